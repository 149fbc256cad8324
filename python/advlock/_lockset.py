"""Lock sets: many locks, from any number of asyncio tasks, over one
connection and its one server session (docs/python.md "Lock sets"; the
rules: docs/design.md "Lock sets").

Each lock of a set (SetLock) has its own machine, report and deadline. Their
statements queue on the set and one worker task sends them over the
connection one at a time, in the order asked (asyncpg refuses a second
operation while one runs), and routes each answer back to its lock. A
try-lock that conflicts with another lock of the set is answered "busy"
unsent, by the core's table (advlock_peers; why: docs/design.md "Lock sets").

The worker keeps the table, not the lock's task: a try answered after its
task was cancelled still enters or leaves it, and the machine then gives the
grant back (the worker does, when nobody waits for the answer). No answer is
ever dropped, not even when the loop closes (_send_queued).

The set's connection has one session check and one lease, whose heartbeats
queue with the locks' statements. With the session check the set reads the
server's lock-table settings, and answers a try past its share of the table
itself, as a configuration limit (53400): docs/design.md "The server's lock
table". A lost connection or an
expired lease ends every lock of the set at once: each held one is lost
(LockLost, its `async with` body cancelled), and the table is emptied.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
from typing import TYPE_CHECKING, Any, Coroutine, Deque, Optional, Set, Tuple, cast

from . import _binding as B
from . import _lease
from ._lease import DEFAULT as LEASE_DEFAULT
from ._asyncio_task import nothing_held
from ._clients import client_for, is_asyncio, wrong_kind
from ._loop import AsyncLock, CapacityRow, FencedRow, Guard, guarded
from ._session import Busy
from ._machine import Scope, Sql, Wait, escape_name, strerror
from .errors import CallError, LockFailed

if TYPE_CHECKING:
    from ._lease import Lease, TaskWatch
    from ._machine import Options, Report
    from ._session import ConnSession
    from ._types import Answer, Args, AsyncClient, AsyncWatch, Call, ErrorAnswer, Name

    # A queued statement: the lock it is for (None: the set's own), its
    # advlock_sql, its arguments, and the future of its answer (None: nobody
    # waits for it).
    Queued = Tuple[Optional["SetLock"], int, "Args", Optional["asyncio.Future[Any]"]]

_lib = B.core
_ask, _granted, _leave = _lib.advlock_peers_ask, _lib.advlock_peers_granted, \
    _lib.advlock_peers_leave
_TRIES = frozenset(int(s) for s in (Sql.TRY_LOCK, Sql.TRY_LOCK_SHARED, Sql.TRY_LOCK_GUARDED,
                                    Sql.TRY_LOCK_SHARED_GUARDED, Sql.TRY_LOCK_FENCED))
_UNLOCKS = frozenset(int(s) for s in (Sql.UNLOCK, Sql.UNLOCK_SHARED, Sql.UNLOCK_GUARDED,
                                      Sql.UNLOCK_SHARED_GUARDED))
# What the server answers a session-scoped try for a key another session
# holds, the guarded forms included (their NULL means "not this session").
_BUSY = B.RESULT_FALSE
_BUSY_FENCED = FencedRow(False, None)
# A server that did not give its lock-table settings is taken for one with
# PostgreSQL's defaults (include/advlock.h).
_DEFAULT_SETTINGS = CapacityRow((B.C["ADVLOCK_CAPACITY_PG_MAX_LOCKS_PER_TRANSACTION"],
                                 B.C["ADVLOCK_CAPACITY_PG_MAX_CONNECTIONS"],
                                 B.C["ADVLOCK_CAPACITY_PG_MAX_PREPARED_TRANSACTIONS"]))
# The statement that gives back what a try granted, when nobody waits for
# the try's answer (the worker's own give-back): same arguments.
_GIVE_BACK = {int(Sql.TRY_LOCK): int(Sql.UNLOCK), int(Sql.TRY_LOCK_FENCED): int(Sql.UNLOCK),
              int(Sql.TRY_LOCK_SHARED): int(Sql.UNLOCK_SHARED),
              int(Sql.TRY_LOCK_GUARDED): int(Sql.UNLOCK_GUARDED),
              int(Sql.TRY_LOCK_SHARED_GUARDED): int(Sql.UNLOCK_SHARED_GUARDED)}
_KINDS = "an asyncpg connection or a psycopg AsyncConnection"
# The statements a transaction block may group (docs/design.md, "A lock set
# as it grows"): all but the session check and the lease's setup (settings
# a failed block would undo), the fenced tries (a token is committed before
# its holder hears of it) and the diagnosis (pg_stat_activity is read once
# per transaction). At most _BLOCK_MAX statements a block.
_UNGROUPED = frozenset({B.SQL_SESSION, B.SQL_LEASE_SETUP, B.SQL_TRY_LOCK_FENCED,
                        B.SQL_TRY_XACT_LOCK_FENCED, int(Sql.HOLDERS)})
_BLOCK_MAX = 1000
_END_TURN = 0.01  # seconds between two tries of a block's end the connection refused
_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
# The table's buckets: about the number of keys held at once keeps chains short.
_BUCKETS = 1024


def _capacity(row: object, share: int) -> B.Capacity:
    """The set's advlock_capacity from the settings' answer (PostgreSQL's
    defaults when it is not a row the core takes)."""
    capacity = B.Capacity()
    if not isinstance(row, CapacityRow) or \
            _lib.advlock_capacity_init(capacity, row[0], row[1], row[2], share):
        _lib.advlock_capacity_init(capacity, *_DEFAULT_SETTINGS, share)
    return capacity


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

    __slots__ = ("_client", "_table", "_buckets", "_entered", "_queue", "_worker",
                 "_checking", "lost", "_plan", "_lease", "_watch", "_leased", "_loop",
                 "_unwatch", "_share", "_capacity", "_capacity_read")

    _client: AsyncClient
    _capacity: Optional[B.Capacity]
    _capacity_read: Optional[asyncio.Future[Any]]
    _plan: Optional[B.LeasePlan]
    _lease: Optional[Lease]
    _watch: Optional[TaskWatch]
    _leased: Set[SetLock]
    _entered: Set[SetLock]
    _queue: Deque[Queued]
    _worker: Optional[asyncio.Task[None]]
    _checking: Optional[Tuple[SetLock, asyncio.Future[None]]]
    _loop: Optional[asyncio.AbstractEventLoop]
    lost: Optional[str]
    _unwatch: Optional[Call]

    def __init__(self, conn: object, lease: object = LEASE_DEFAULT,
                 lease_stop: Optional[float] = None,
                 capacity_share: int = B.CAPACITY_SHARE_DEFAULT) -> None:
        client = client_for(conn, "advlock.LockSet", _KINDS)
        if not is_asyncio(client):
            raise wrong_kind(conn, "advlock.LockSet", _KINDS)
        self._client = cast("AsyncClient", client)
        if capacity_share.__class__ is not int or not 1 <= capacity_share <= 100:
            raise CallError(B.ADVLOCK_EINVAL, "advlock.LockSet: capacity_share is a percentage,"
                            " an int from 1 to 100, not %r" % (capacity_share,))
        self._share = capacity_share
        self._capacity = None       # B.Capacity, once the settings are read
        self._capacity_read = None  # the future of their read, once asked
        self._plan = _lease.plan_for(lease, lease_stop)  # None: no lease
        self._lease = None    # the held locks' one _lease.Lease
        self._watch = None    # its TaskWatch
        self._leased = set()  # the locks holding under it
        self._buckets = (B.P * _BUCKETS)()
        self._table = B.Peers()
        if _lib.advlock_peers_init(self._table, self._buckets, _BUCKETS):
            raise CallError(B.ADVLOCK_EINVAL, strerror(B.ADVLOCK_EINVAL))
        self._entered = set()              # the locks whose peer is in the table
        self._queue = collections.deque()  # (lock, sql, args, future) to send
        self._worker = None                # the task sending them
        self._checking = None              # (lock, future) of the session check
        self._loop = None                  # the event loop of the set's first operation
        # Why the connection was lost (a str), once a statement or the
        # session watch found it so.
        self.lost = None
        self._unwatch = None  # stops the connection's watch (_watch)

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
        return SetLock(self, name, timeout, options, **option_kwargs)

    @property
    def in_use(self) -> int:
        """How many locks of the set hold their key or have a try out for
        it (advlock_peers_count): 0 once every lock has ended."""
        count: int = _lib.advlock_peers_count(self._table)
        return count

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

    # ---- the session check: once per connection, shared -------------------

    async def _session_checked(self, lock: SetLock) -> None:
        """Before lock's acquire: returns at once when the connection's
        session value is checked or lock is to check it; else waits for
        the check in flight (the waiter that finds none checked after it
        checks next)."""
        client = self._client
        while True:
            value = client.state.value
            if value is not None and value.client_pid == client.pid():
                return
            if self._checking is None:
                self._checking = (lock, asyncio.get_running_loop().create_future())
                return
            await asyncio.shield(self._checking[1])

    def _check_done(self, lock: Optional[SetLock]) -> None:
        """lock's session row has been answered and fed (its next statement
        is asked for, or its operation ended): the waiters go on."""
        checking = self._checking
        if checking is not None and checking[0] is lock:
            self._checking = None
            checking[1].set_result(None)

    # ---- statements: one at a time, the table kept around them ---------------

    async def _statement(self, lock: Optional[SetLock], sql: int, args: Args) -> Answer:
        """lock's statement sql with args, sent in its turn; its answer.
        A try that conflicts with another lock of the set is answered busy
        here, unsent; on a lost set every statement is answered lost,
        unsent (its session is gone: a new connection needs a new set)."""
        if sql != B.SQL_SESSION and sql != B.SQL_LEASE_SETUP:
            self._check_done(lock)
        if self.lost is not None:
            return (B.RESULT_CONNECTION_LOST, None, "the lock set's connection was lost (%s)"
                    % self.lost)
        if sql == B.SQL_SESSION and self._capacity_read is None:
            self._ask_capacity()
        if sql in _TRIES and lock is not None:
            refused = await self._past_capacity()
            if refused is not None:
                return refused
            asked = _ask(self._table, lock._peer, args[0], lock.options.mode)
            if asked == 0:
                return _BUSY_FENCED if sql == B.SQL_TRY_LOCK_FENCED else _BUSY
            if asked < 0:  # EMISUSE: the peer was left in the table, a bug
                raise CallError(asked, strerror(asked))
            self._enter(lock)
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._queue.append((lock, sql, args, answer))
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._send_queued())
        try:
            return await answer
        except BaseException:  # noqa: B902 - whatever cut the wait, nobody reads the answer
            answer.cancel()    # so the worker gives back what it grants
            raise

    # ---- the server's lock table: its settings read once, with the check ----

    def _ask_capacity(self) -> None:
        """Queues the read of the lock table's settings: ahead of the
        session check about to queue (as the C set does), or of the first
        try on a connection checked before the set."""
        self._capacity_read = asyncio.get_running_loop().create_future()
        self._queue.append((None, B.SQL_CAPACITY, (), self._capacity_read))

    async def _past_capacity(self) -> Optional[ErrorAnswer]:
        """Before a try: None when one more lock fits in the set's share of
        the server's lock table (every lock holding or trying counts); else
        the answer the set gives it, unsent: the server's configuration
        limit, in the core's words."""
        if self._capacity is None:
            if self._capacity_read is None:
                self._ask_capacity()
            row = await asyncio.shield(cast("asyncio.Future[Any]", self._capacity_read))
            if self._capacity is None:
                self._capacity = _capacity(row, self._share)
        words = ctypes.create_string_buffer(B.MESSAGE_MAX)
        if _lib.advlock_capacity_refuse(self._capacity, _lib.advlock_peers_count(self._table),
                                        words, len(words)) != 1:
            return None
        return (B.RESULT_SERVER_ERROR, "53400", words.value.decode())

    async def _send_queued(self) -> None:
        """The worker: sends the queued statements in order, each answer to
        its lock; it owns the give-back of a try granted when nobody waits
        for the answer any more (its future cancelled). A cancellation of
        the worker (the loop closing: asyncio.run cancels every task) never
        drops an answer: the statement in flight is read, the queue sent to
        its end (the give-backs and releases of the locks cancelled
        meanwhile included), and then the worker ends cancelled. Any other
        exception out of a statement (KeyboardInterrupt) leaves the
        connection in doubt: _abandon() closes it, and the exception goes
        on."""
        queue, start, guard = self._queue, self._client.start, Guard()
        block = _Block(self._client, guard)
        try:
            while queue:
                lock, sql, args, answer = queue[0]
                await block.before(sql, len(queue))
                result = await guarded(start(sql, args), guard)
                queue.popleft()
                await block.after(result, len(queue))
                self._answered(lock, sql, result)
                if answer is not None and not answer.done():
                    answer.set_result(result)
                elif sql in _TRIES and lock is not None \
                        and _lib.advlock_peer_state(lock._peer) == B.PEER_HELD:
                    queue.append((lock, _GIVE_BACK[sql], args, None))
        except BaseException as exc:  # noqa: B902 - every queued lock must hear of it
            self._abandon(exc)
            raise
        finally:
            self._worker = None
        if guard.cancelled_by is not None:
            raise guard.cancelled_by

    def _abandon(self, exc: BaseException) -> None:
        """A statement was cut off by exc: what reached the server is
        unknown, so the connection is closed (the server session ends, and
        every lock of the set with it) and every queued statement, the one
        in flight included, is answered lost."""
        why = "a statement was interrupted by %s" % type(exc).__name__
        self._client.close_now()
        self._on_lost(why)
        lost: ErrorAnswer = (B.RESULT_CONNECTION_LOST, None,
                             "the lock set's connection was closed: " + why)
        while self._queue:
            lock, _sql, _args, answer = self._queue.popleft()
            self._leave(lock)
            if answer is not None and not answer.done():
                answer.set_result(lost)

    def _answered(self, lock: Optional[SetLock], sql: int, result: Answer) -> None:
        """Keeps the table: a try granted holds the key; refused, failed or
        lost, or an unlock answered (whatever it said), leaves it."""
        if result.__class__ is tuple and cast("ErrorAnswer", result)[0] == \
                B.RESULT_CONNECTION_LOST:
            # lock too, if held: its unlock is what found it
            self._on_lost(cast("ErrorAnswer", result)[2])
        if sql in _TRIES and lock is not None:
            if result == B.RESULT_TRUE or (isinstance(result, FencedRow)
                                           and result.granted is True):
                _granted(self._table, lock._peer)
            else:
                self._leave(lock)
        elif sql in _UNLOCKS:
            self._leave(lock)

    def _enter(self, lock: SetLock) -> None:
        """lock's try goes out: while any lock of the set holds or tries,
        the connection is watched for the server ending its session."""
        if not self._entered and self._unwatch is None:
            self._unwatch = self._client.watch(
                lambda: self._on_lost("the connection closed: the server ended the session,"
                                      " or the connection was closed"))
        self._entered.add(lock)

    def _leave(self, lock: Optional[SetLock]) -> None:
        if lock is not None:  # None: the lease's heartbeat
            _leave(self._table, lock._peer)
            self._entered.discard(lock)
            if not self._entered and self._unwatch is not None:
                unwatch, self._unwatch = self._unwatch, None
                unwatch()

    def _on_lost(self, why: Optional[str]) -> None:
        """The connection is lost, and the server session with it: every
        held lock of the set is lost, every peer leaves the table."""
        lost = self.lost
        if lost is None:
            lost = self.lost = why or "the connection was lost"
        for lock in list(self._entered):
            self._leave(lock)
            if lock.held:
                lock._lose_with_set(lost)

    # ---- the lease: one for the connection -----------------------------------

    def _share_lease(self, lock: SetLock, lease: Lease) -> Lease:
        """lock was granted under lease (held from its grant): the set's
        lease from now on if none runs, else the running one. Returns the
        lease lock holds under."""
        shared = self._lease
        if shared is None:
            shared = self._lease = lease
            self._watch = _lease.TaskWatch(lease, _MemberClient(self), self._lease_expired,
                                           lambda: None)
        self._leased.add(lock)
        return shared

    async def _unshare_lease(self, lock: SetLock) -> None:
        """lock is released: the last holder stops the lease."""
        self._leased.discard(lock)
        if self._leased or self._watch is None:
            return
        watch, lease = self._watch, self._lease
        self._watch = self._lease = None
        await watch.stop()
        if lease is not None:
            lease.stop()

    def _lease_expired(self, stop_at_ms: int) -> None:
        """No heartbeat proved the session by the deadline: every held lock
        of the set is lost (the first to leave its body closes the
        connection)."""
        for lock in list(self._leased):
            lock._expire_async(stop_at_ms)
        self._on_lost("the lease expired")


class _Block:
    """The worker's transaction blocks. The server's cost of ending a
    transaction grows with the locks its session holds (it walks them all),
    so on a direct connection, idle outside a transaction, statements
    queued together go in one block: BEGIN before the first, COMMIT once
    the queue is empty (or after _BLOCK_MAX). Session locks ignore the
    block: a grant holds at once and outlives a rollback. A statement that
    fails aborts the block: ROLLBACK, and the next ones open another; one
    lock's failure never becomes another's. docs/design.md, "A lock set as
    it grows"."""

    __slots__ = ("_client", "_guard", "_sent")

    def __init__(self, client: AsyncClient, guard: Guard) -> None:
        self._client, self._guard = client, guard
        self._sent = 0  # statements in the open block; 0: none open

    def _may_group(self, sql: int) -> bool:
        client = self._client
        return sql not in _UNGROUPED and client.state.proxied is False

    async def before(self, sql: int, queued: int) -> None:
        """Before sql goes, with queued statements waiting (it included)."""
        if self._sent and (not self._may_group(sql) or self._sent >= _BLOCK_MAX):
            await self._end("COMMIT")
        if not self._sent and queued > 1 and self._may_group(sql) \
                and self._client.outside_transaction():
            if await guarded(self._client.control(_BEGIN), self._guard) is None:
                self._sent = 1

    async def after(self, result: Answer, queued: int) -> None:
        """A statement of the block was answered, queued left behind it."""
        if not self._sent:
            return
        self._sent += 1
        if result.__class__ is tuple:  # the server failed it (Busy: never sent)
            await self._end("ROLLBACK")
        elif not queued:
            await self._end("COMMIT")

    async def _end(self, text: str) -> None:
        """Ends the open block with text (COMMIT or ROLLBACK), however long
        it takes: a block left open would hold every later statement of the
        set, and of the caller, in one transaction that nothing ends.
        asyncpg refuses it (Busy) while another operation runs on the
        connection (the caller's own statement, docs/python.md "Lock
        sets"): it is tried again each turn until that one ends. Any other
        failure is the connection's, which the next statement finds."""
        self._sent = 0
        while (await guarded(self._client.control(text), self._guard)).__class__ is Busy:
            await guarded(asyncio.sleep(_END_TURN), self._guard)


class _MemberClient:
    """A lock's client: the set's connection, its statements through the
    set's queue."""

    __slots__ = ("_set", "lock", "state")

    lock: Optional[SetLock]
    state: ConnSession

    def __init__(self, lockset: LockSet) -> None:
        self._set = lockset
        self.lock = None
        self.state = lockset._client.state

    def pid(self) -> int:
        """The connection's announced backend pid."""
        return self._set._client.pid()

    def outside_transaction(self) -> bool:
        """The connection is idle outside any transaction block."""
        return self._set._client.outside_transaction()

    def start(self, sql: int, args: Args) -> Coroutine[Any, Any, Answer]:
        """The statement in the set's queue, as a coroutine of its answer."""
        return self._set._statement(self.lock, sql, args)

    def close_now(self) -> None:
        """Ends the set's connection: a lock was lost, so were all."""
        self._set._client.close_now()

    def ended(self) -> bool:
        """Whether the set's connection has ended."""
        return self._set._client.ended()

    def watch(self, on_end: Call) -> Call:
        """The set watches its connection (LockSet._enter), not each lock."""
        return self._set._client.watch(on_end)

    def cancel(self) -> None:
        """Never asked: a set's locks poll (no server-side wait)."""

    def heartbeat_client(self) -> _MemberClient:
        """This client: its statements queue with the set's."""
        return self

    async def control(self, text: str) -> Optional[Answer]:
        """The set's connection's (the set's worker ends its own blocks)."""
        return await self._set._client.control(text)

    @staticmethod
    def hold_body(_body: object) -> Call:
        """Nothing: the set's queue keeps a heartbeat apart from the locks'
        statements."""
        return nothing_held


class SetLock(AsyncLock):
    """A lock of a LockSet (LockSet.lock()): an AsyncLock whose statements
    share the set's connection, and which the set keeps apart from its
    other locks on the same key. When the connection is lost, a held
    SetLock raises LockLost (reason: connection lost) on leaving `async
    with` (its body cancelled first) or from release()."""

    __slots__ = ("_set", "_peer")

    def __init__(self, lockset: LockSet, name: Name, timeout: Optional[float] = None,
                 options: Optional[Options] = None, **option_kwargs: Any) -> None:
        client = _MemberClient(lockset)
        super().__init__(client, name, timeout, options, lease=None, **option_kwargs)
        self._plan = lockset._plan
        if self.options.scope == Scope.TRANSACTION:
            raise _refused("scope=TRANSACTION", "every lock of a set runs on its one"
                           " connection, so they would all share one transaction")
        if self.options.wait == Wait.SERVER:
            raise _refused("wait=WAIT_SERVER", "a wait on the server would stall the"
                           " statements of every other lock of the set behind it")
        client.lock = self
        self._set = lockset
        self._peer = B.Peer()  # zeroed: ADVLOCK_PEER_OUT

    async def acquire(self) -> Report:
        """As AsyncLock.acquire(); the first acquire on the connection makes
        its session check, the others wait for it."""
        lockset = self._set
        lockset._check_loop(self)
        await lockset._session_checked(self)
        try:
            return await super().acquire()
        finally:
            lockset._check_done(self)

    async def release(self) -> Report:
        """As AsyncLock.release(); raises LockLost when the set's connection
        was lost while the lock was held."""
        self._set._check_loop(self)
        try:
            return await super().release()
        except LockFailed as failure:
            if self._lost is None:
                raise
            self._raise_lost(failure)

    async def verify(self) -> Report:
        """As AsyncLock.verify()."""
        self._set._check_loop(self)
        return await super().verify()

    def _hold_granted(self, plan: B.LeasePlan, token: int, anchor_ms: int,
                      answer: Optional[Answer]) -> Lease:
        lease = super()._hold_granted(plan, token, anchor_ms, answer)
        shared = self._lease = self._set._share_lease(self, lease)
        return shared

    def _watch_lease(self, lease: Lease) -> AsyncWatch:
        return _SetWatch(self)

    def _end_lease(self) -> None:
        self._lease = None  # the set's: its last holder stops it

    def _drop_lost(self) -> None:
        self._set._leave(self)  # unlocked by the connection's end, not by a statement
        super()._drop_lost()

    def _watch_session(self) -> None:
        """The set watches its connection (LockSet._watch), not each lock."""

    def _lose_with_set(self, why: str) -> None:
        """The set's connection was lost while this lock was held."""
        if self._lost is None:
            self._lose(_lease.ended_error(self, "%s; every lock of the set was lost with it"
                                          % why))


class _SetWatch:
    """A held SetLock's part in the set's lease."""

    __slots__ = ("_lock",)

    def __init__(self, lock: SetLock) -> None:
        self._lock = lock

    async def stop(self) -> None:
        """The lock leaves the lease (the last one stops it)."""
        await self._lock._set._unshare_lease(self._lock)
