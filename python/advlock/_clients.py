"""Which driver runs a connection's statements: the one place that tells
asyncpg's connections from psycopg's (advlock.lock(), advlock.LockSet)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ._binding import ADVLOCK_EINVAL
from .errors import ArgumentTypeError, CallError

if TYPE_CHECKING:
    from ._engine import Engine

_KINDS = "an asyncpg or psycopg connection"


def engine_for(conn: object, caller: str, kinds: str = _KINDS) -> Engine:
    """The engine of conn (one per connection), whose client is conn's
    driver's: asyncpg_driver.Client, or psycopg_driver.AsyncClient / Client
    (for an AsyncConnection / a blocking Connection). Raises
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
    made: Engine = driver.engine(conn)
    return made


def wrong_kind(conn: object, caller: str, kinds: str = _KINDS) -> ArgumentTypeError:
    """The ArgumentTypeError for a connection caller does not take."""
    cls = type(conn)
    return ArgumentTypeError(ADVLOCK_EINVAL, "%s: %s, not %s.%s"
                             % (caller, kinds, cls.__module__, cls.__name__))
