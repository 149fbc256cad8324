"""Which driver's client runs a connection's statements: the one place
that tells asyncpg's connections from psycopg's (advlock.lock(),
advlock.LockSet)."""

from ._binding import ADVLOCK_EINVAL
from .errors import ArgumentTypeError

_KINDS = "an asyncpg or psycopg connection"


def client_for(conn, caller, kinds=_KINDS):
    """The client of conn's driver: asyncpg_driver.Client, or
    psycopg_driver.AsyncClient / Client (for an AsyncConnection / a
    blocking Connection); a new object, the caller's. Raises
    ArgumentTypeError (ADVLOCK_EINVAL) naming caller and the kinds it takes
    for any other object."""
    module = type(conn).__module__
    if module.startswith("asyncpg"):
        from . import asyncpg_driver
        return asyncpg_driver.Client(conn)
    if module.startswith("psycopg"):
        from . import psycopg_driver
        return psycopg_driver.client(conn)
    raise wrong_kind(conn, caller, kinds)


def is_asyncio(client):
    """True for a client whose statements are coroutines (start()), False
    for a blocking one (run())."""
    return hasattr(client, "start")


def wrong_kind(conn, caller, kinds=_KINDS):
    """The ArgumentTypeError for a connection caller does not take."""
    cls = type(conn)
    return ArgumentTypeError(ADVLOCK_EINVAL, "%s: %s, not %s.%s"
                             % (caller, kinds, cls.__module__, cls.__name__))
