"""Lock sets: many locks, from any number of asyncio tasks, over one
connection and its one server session (docs/python.md "Lock sets"; the
rules: docs/design.md "Lock sets").

A set is its connection's engine (_engine) seen as many members: the
engine keeps them apart on a key, checks the session once, reads the
server's lock table's settings and refuses a try past the set's share,
keeps one lease for all, gives back a grant nobody waits for, and loses
every held lock at once with the connection. One pump task sends the
statements one at a time (asyncpg refuses a second operation while one
runs).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any, Optional

from . import _binding as B
from ._clients import engine_for, wrong_kind
from ._lease import DEFAULT as LEASE_DEFAULT, lease_of
from ._lock import AsyncLock
from ._machine import Scope, Wait, escape_name
from .errors import CallError

if TYPE_CHECKING:
    from ._machine import Options, Report
    from ._types import Name

_lib = B.core
_KINDS = "an asyncpg connection or a psycopg AsyncConnection"


def _refused(what: str, why: str) -> CallError:
    return CallError(B.ADVLOCK_EINVAL, "advlock.LockSet refuses %s: %s (docs/design.md,"
                     " \"Lock sets\")." % (what, why))


class LockSet:
    """Many locks over one asyncio connection: an asyncpg Connection or a
    psycopg AsyncConnection (autocommit, as for a single lock). See
    lock(). The set holds no lock itself; the connection stays the
    caller's to close, after every lock of the set has ended.

    lease, lease_stop: the connection's lease, as advlock.lock()'s (default
    30 s; None or 0: none): one setup and one stream of heartbeats for all
    the set's held locks, which are all lost when it expires.

    capacity_share: the percentage (1 to 100, default 25) of the server's
    lock table the set may hold: a try past it raises LockFailed (SQLSTATE
    53400) with the settings and the numbers, unsent (docs/design.md "The
    server's lock table").

    Raises CallError for a lease the core refuses or a share out of range,
    ArgumentTypeError for another kind of connection."""

    __slots__ = ("_conn", "_engine", "_lease", "_locks", "_loop", "lost")

    def __init__(self, conn: object, lease: object = LEASE_DEFAULT,
                 lease_stop: Optional[float] = None,
                 capacity_share: int = B.CAPACITY_SHARE_DEFAULT) -> None:
        engine = engine_for(conn, "advlock.LockSet", _KINDS)
        if not engine.is_async:
            raise wrong_kind(conn, "advlock.LockSet", _KINDS)
        if capacity_share.__class__ is not int or \
                _lib.advlock_conn_set_capacity_share(engine._c, capacity_share):
            raise CallError(B.ADVLOCK_EINVAL, "advlock.LockSet: capacity_share is a percentage,"
                            " an int from 1 to 100, not %r" % (capacity_share,))
        self._conn = conn
        self._engine = engine
        self._lease = lease_of(lease, lease_stop)
        self._locks: weakref.WeakSet[SetLock] = weakref.WeakSet()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        # Why the connection was lost (a str), once a held lock was lost
        # with it.
        self.lost: Optional[str] = None

    def lock(self, name: Name, timeout: Optional[float] = None,
             options: Optional[Options] = None, **option_kwargs: Any) -> SetLock:
        """A SetLock named `name` on the set's connection: `async with`, or
        await acquire() and release(), from any task, as advlock.lock()'s
        AsyncLock. Same arguments and options, except: scope=TRANSACTION
        (all the set's locks would share one transaction) and wait=WAIT_SERVER
        (a wait on the server stalls every other lock's statements behind
        it) are refused with CallError, and the lease is the set's
        (LockSet(conn, lease=...)). Creating the lock sends nothing."""
        if "lease" in option_kwargs or "lease_stop" in option_kwargs:
            raise _refused("a lease per lock", "the lease is the set's connection's: pass"
                           " lease= to advlock.LockSet()")
        lk = SetLock(self, name, timeout, options, **option_kwargs)
        self._locks.add(lk)
        return lk

    @property
    def in_use(self) -> int:
        """How many locks of the set hold their key or are acquiring it: 0
        once every lock has ended."""
        return sum(1 for lk in self._locks if _lib.advlock_member_busy(lk._m)
                   or _lib.advlock_member_held(lk._m))

    def _check_loop(self, lock: SetLock) -> None:
        """Before an operation of lock: the set, like its connection, serves
        the event loop of its first operation; raises CallError on another."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise CallError(B.ADVLOCK_EMISUSE, "Lock '%s' of an advlock.LockSet was used from"
                            " another event loop than the set's first operation: a set, as"
                            " its connection, serves one event loop." % escape_name(lock.name))


class SetLock(AsyncLock):
    """A lock of a LockSet (LockSet.lock()): an AsyncLock whose statements
    share the set's connection, and which the set keeps apart from its
    other locks on the same key. When the connection is lost, a held
    SetLock raises LockLost (reason: connection lost) on leaving `async
    with` (its body cancelled first) or from release()."""

    __slots__ = ("_set", "__weakref__")

    def __init__(self, lockset: LockSet, name: Name, timeout: Optional[float] = None,
                 options: Optional[Options] = None, **option_kwargs: Any) -> None:
        super().__init__(lockset._engine, lockset._conn, name, timeout, options, lease=None,
                         **option_kwargs)
        self._lease = lockset._lease
        if self.options.scope == Scope.TRANSACTION:
            raise _refused("scope=TRANSACTION", "every lock of a set runs on its one"
                           " connection, so they would all share one transaction")
        if self.options.wait == Wait.SERVER:
            raise _refused("wait=WAIT_SERVER", "a wait on the server would stall the"
                           " statements of every other lock of the set behind it")
        self._set = lockset

    def _on_lost(self) -> None:
        super()._on_lost()
        lost = self._lost
        if lost is not None and lost.ended and self._set.lost is None:
            self._set.lost = lost.server_message or "the connection was lost"

    async def acquire(self) -> Report:
        """As AsyncLock.acquire()."""
        self._set._check_loop(self)
        return await super().acquire()

    async def release(self) -> Report:
        """As AsyncLock.release(); raises LockLost when the set's connection
        was lost while the lock was held."""
        self._set._check_loop(self)
        return await super().release()

    async def verify(self) -> Report:
        """As AsyncLock.verify()."""
        self._set._check_loop(self)
        return await super().verify()

