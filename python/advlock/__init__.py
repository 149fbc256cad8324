"""advlock: PostgreSQL advisory locks by name, from Python.

The lock logic is advlock's sans-I/O core in C (libadvlock.so), loaded with
ctypes; this package only feeds it the time and the server's answers and
performs what it asks: run a statement, sleep, cancel a statement, done.

    import advlock

    # asyncpg (asyncio)
    async with advlock.lock(conn, "migrations", timeout=30):
        ...
    # psycopg 3, blocking (or psycopg.AsyncConnection with `async with`)
    with advlock.lock(conn, "migrations", timeout=30):
        ...

Options, named as in C's advlock_options: mode=advlock.SHARED,
scope=advlock.TRANSACTION, wait=advlock.WAIT_SERVER,
backoff=advlock.FULL_JITTER, clip_to_deadline=True, diagnose=True,
allow_standby=True, jitter_seed=N, fence=True (a fencing token with each
grant: lock.fence, checked where the work lands with advlock.fence_ok();
the schema from advlock.fence_setup_sql() or `advlock setup`),
lock_delay=True (the next holder after one whose session ended unreleased
waits out its lease, and lock.warning tells of that wait; the same schema:
docs/python.md and docs/operators.md "Lock-delay"). Failures raise
LockTimeout (a TimeoutError: "Could not acquire migration lock for '<name>'
within <seconds>s."), LockFailed (StandbyError on a hot standby, ServerSessionError
behind a transaction-pooling proxy), and asyncio.CancelledError for a
cancelled task; LockLost when a held lock is lost (the server ended its
session, heard at once; or its lease expired: lease=, 30 s by default over
TCP); CallError for refused calls. Every exception of the
package derives from advlock.Error.
advlock.fake holds the fake database, clock and simulator for deterministic
tests. advlock.LockSet(conn) holds many locks from many tasks over one
asyncio connection (docs/python.md "Lock sets"). docs/python.md has the
whole story.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from ._machine import (Backoff, Detail, Failure, LeaseExpiry, LockState, Machine, Mode, Options,
                       Outcome, Report, Scope, Sql, Wait, derive_key, escape_name, fence_setup_sql,
                       format_seconds, now_ms, strerror)
from ._lock import AsyncLock, Lock
from ._clients import engine_for
from ._lockset import LockSet, SetLock
from ._binding import ADVLOCK_EINVAL  # noqa: F401 - advlock.ADVLOCK_EINVAL, for checks of .code
from .errors import (ArgumentTypeError, CallError, Error, LockCancelled, LockError, LockFailed,
                     LockLost, LockTimeout, ServerSessionError, StandbyError)

__version__ = "0.4.0"

EXCLUSIVE, SHARED = Mode.EXCLUSIVE, Mode.SHARED
SESSION, TRANSACTION = Scope.SESSION, Scope.TRANSACTION
WAIT_POLL, WAIT_SERVER = Wait.POLL, Wait.SERVER
REFERENCE, FULL_JITTER = Backoff.REFERENCE, Backoff.FULL_JITTER


if TYPE_CHECKING:
    from ._types import Name


def lock(conn: object, name: Name, timeout: Optional[float] = None,
         options: Optional[Options] = None, **option_kwargs: Any) -> Union[Lock, AsyncLock]:
    """A lock named `name` (str, or UTF-8 bytes) on connection `conn`.

    conn: an asyncpg Connection or a psycopg (3) AsyncConnection, giving an
        AsyncLock (`async with`, `await .acquire()`, `await .release()`), or
        a blocking psycopg Connection, giving a Lock (`with`, `.acquire()`,
        `.release()`).
    timeout: seconds to keep trying (int or float; 0 tries once; None, the
        default, or infinity never gives up).
    options: an advlock.Options, and/or its fields as keywords (mode, scope,
        wait, backoff, clip_to_deadline, diagnose, allow_standby, jitter_seed,
        fence, lock_delay). lock_delay=True needs an exclusive session lock
        and a lease (the engine refuses the rest at acquire: CallError) and
        the table `advlock setup` creates (docs/python.md "Lock-delay").
    lease: seconds (default 30, ADVLOCK_LEASE_DEFAULT_MS; None or 0: none):
        while the lock is held over TCP, heartbeats prove it held, and when
        they cannot the body is stopped and LockLost raised, before the
        server could free the lock (docs/python.md "Leases").
    lease_stop: seconds the body takes to stop once told (default 1): the
        lease must be at least lease_stop + 6 s.

    Creating the lock sends nothing. Raises CallError for a name that is
    not UTF-8, an option value it does not take, a connection closed
    already, or a lease too short or too long (acquire() for a negative
    or NaN timeout), ArgumentTypeError (a CallError and a TypeError) for
    another kind of connection.
    """
    engine = engine_for(conn, "advlock.lock")
    if engine.is_async:
        return AsyncLock(engine, conn, name, timeout, options, **option_kwargs)
    return Lock(engine, conn, name, timeout, options, **option_kwargs)


__all__ = [
    "lock", "Lock", "AsyncLock", "LockSet", "SetLock", "Options", "Report", "Machine", "Mode", "Scope", "Wait",
    "Backoff", "Outcome", "Failure", "Detail", "LeaseExpiry", "Sql", "derive_key", "escape_name",
    "format_seconds", "fence_setup_sql", "now_ms", "strerror", "Error", "LockError",
    "LockTimeout", "LockFailed", "LockLost",
    "StandbyError", "ServerSessionError", "LockCancelled", "CallError", "ArgumentTypeError",
    "LockState", "EXCLUSIVE", "SHARED",
    "SESSION", "TRANSACTION",
    "WAIT_POLL", "WAIT_SERVER", "REFERENCE", "FULL_JITTER",
]
