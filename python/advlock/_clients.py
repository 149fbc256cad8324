"""Which driver's client runs a connection's statements: the one place
that tells asyncpg's connections from psycopg's (advlock.lock(),
advlock.LockSet)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ._binding import ADVLOCK_EINVAL
from .errors import ArgumentTypeError, CallError

if TYPE_CHECKING:
    from ._types import AnyClient

_KINDS = "an asyncpg or psycopg connection"


def client_for(conn: object, caller: str, kinds: str = _KINDS) -> AnyClient:
    """The client of conn's driver: asyncpg_driver.Client, or
    psycopg_driver.AsyncClient / Client (for an AsyncConnection / a
    blocking Connection); a new object, the caller's. Raises
    ArgumentTypeError (ADVLOCK_EINVAL) naming caller and the kinds it takes
    for any other object, CallError (ADVLOCK_EINVAL) for a connection
    closed already."""
    module = type(conn).__module__
    driver: ModuleType
    if module.startswith("asyncpg"):
        from . import asyncpg_driver
        driver = asyncpg_driver
    elif module.startswith("psycopg"):
        from . import psycopg_driver
        driver = psycopg_driver
    else:
        raise wrong_kind(conn, caller, kinds)
    unusable = driver.unusable(conn)
    if unusable is not None:
        raise CallError(ADVLOCK_EINVAL, "%s: the connection cannot take a lock: %s (open"
                        " a new one)" % (caller, unusable))
    made: AnyClient = driver.client(conn)
    return made


def is_asyncio(client: object) -> bool:
    """True for a client whose statements are coroutines (start()), False
    for a blocking one (run())."""
    return hasattr(client, "start")


def wrong_kind(conn: object, caller: str, kinds: str = _KINDS) -> ArgumentTypeError:
    """The ArgumentTypeError for a connection caller does not take."""
    cls = type(conn)
    return ArgumentTypeError(ADVLOCK_EINVAL, "%s: %s, not %s.%s"
                             % (caller, kinds, cls.__module__, cls.__name__))
