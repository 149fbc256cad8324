"""One server connection's engine (advlock_conn: every rule of a connection
lives in src/core/conn*.c) and the pump that moves its statements.

The pump is written once, as a generator (turns()) that says what to do
next: SEND a statement and hand back its answer, AWAIT the answer of the one
in flight until a time, WAIT until a time (or until poked), CANCEL the
statement in flight on the server. Two shells perform those: pump_async()
on asyncio (one task per connection while it has work) and pump_blocking()
on the caller's thread, with at most one helper thread per connection for
what must go on while the caller's statement blocks or while nothing else
runs (a server-side wait's deadline, a held lock's heartbeats). The clients
(asyncpg_driver, psycopg_driver) allow one statement in flight, so the
engine runs with caps 0 plus ADVLOCK_CAPS_CANCEL: one statement at a time.

An owner (a lock object) keeps an advlock_member; the engine tells it of
its events: done() when its operation ended, lost() when its held lock is.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import types
import weakref
from asyncio import isfuture
from ctypes import c_int64, pointer
from typing import (TYPE_CHECKING, Any, Callable, Coroutine, Dict, Generator, List, Optional,
                    Protocol, Tuple, TypeVar)

from . import _binding as B
from ._asyncio_task import Waiting
from ._machine import INT64_MAX, SQL_ANSWER, SQL_PARAMS, escape_name, now_ms, strerror
from .errors import CallError

if TYPE_CHECKING:
    from ._types import Answer, AnyClient, AsyncClient, BlockingClient, Call, Name

_lib = B.core
_poll, _on_answer, _on_timer = (_lib.advlock_conn_poll_statement, _lib.advlock_conn_on_answer,
                                _lib.advlock_conn_on_timer)
_next_wake, _poll_event, _answer_init = (_lib.advlock_conn_next_wake,
                                         _lib.advlock_conn_poll_event, _lib.advlock_answer_init)
_busy, _outstanding = _lib.advlock_conn_busy, _lib.advlock_conn_outstanding
_member_busy, _member_held = _lib.advlock_member_busy, _lib.advlock_member_held
_start_acquire, _start_release = _lib.advlock_conn_start_acquire, _lib.advlock_conn_start_release
_on_transaction = _lib.advlock_conn_on_transaction
_member_report, _member_words = _lib.advlock_member_report, _lib.advlock_member_words
_turn = _lib.advlock_conn_turn
_head = _lib.advlock_conn_head
_on_notice, _warning, _warning_sqlstate = (_lib.advlock_conn_on_notice,
                                           _lib.advlock_conn_warning,
                                           _lib.advlock_conn_warning_sqlstate)
_STATEMENT, _EVENTS = B.C["ADVLOCK_TURN_STATEMENT"], B.C["ADVLOCK_TURN_EVENTS"]
_WORDLESS = frozenset((B.C["ADVLOCK_ACQUIRED"], B.C["ADVLOCK_RELEASED"]))
_TRUE, _NULL, _LOST = B.RESULT_TRUE, B.RESULT_NULL, B.RESULT_CONNECTION_LOST
_CANCEL, _DONE, _VOID = B.STATEMENT_CANCEL, B.CONN_DONE, B.ANSWER_VOID
_LOST_EVENT, _WARNING = B.CONN_LOST, B.CONN_WARNING
_SERVER_ERROR = B.RESULT_SERVER_ERROR
_mono = time.monotonic_ns
# What a shell does for the generator.
SEND, AWAIT, WAIT, CANCEL = range(4)
# How soon a statement the client could not send now (the connection busy
# with a body's statement, or its transaction failed) is tried again.
RETRY_MS = 50
_SLOTS = 16
# What the session watch tells the engine when the socket closes.
ENDED = ("the server ended the session (pg_terminate_backend, a restart or a crash), or the"
         " connection was closed")
_BUCKETS = 256
CANCELLED = "advlock: a statement was given up in flight (the event loop closing, the connection closed)"


def new_token() -> int:
    """64 random bits, never 0 (the core reads 0 as "not told")."""
    return int.from_bytes(os.urandom(8), "little") or 1


# ---- answers: what a client hands back for a statement ------------------------


class SessionRow:
    """The session query's row, and whether it answered inside a
    transaction block."""

    __slots__ = ("pid", "in_recovery", "ours", "in_transaction")

    def __init__(self, pid: Optional[int], in_recovery: object, ours: object,
                 in_transaction: bool = False) -> None:
        self.pid, self.in_recovery, self.ours = int(pid or 0), bool(in_recovery), bool(ours)
        self.in_transaction = in_transaction


class FencedRow:
    """A fenced try-lock's row: granted (True, False, or None for a SQL
    NULL) and the token the grant issued."""

    __slots__ = ("granted", "token")

    def __init__(self, granted: Optional[bool], token: Optional[int]) -> None:
        self.granted, self.token = granted, token


class CapacityRow(Tuple[int, int, int]):
    """The lock table's settings (ADVLOCK_SQL_CAPACITY's row)."""

    __slots__ = ()


class Busy:
    """The client did not send the statement: its connection is busy with
    another operation (asyncpg), or in a failed transaction (psycopg)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _fill(a: B.Answer, answer: Answer) -> List[Any]:
    """Writes a client's answer into a; returns what must stay alive while
    the engine reads it (strings, holder rows)."""
    if isinstance(answer, tuple) and not isinstance(answer, CapacityRow):
        result, sqlstate, message = answer
        _answer_init(a, result)
        words = [None if sqlstate is None else sqlstate.encode("ascii", "replace"),
                 message.encode("utf-8", "replace")]
        a.sqlstate, a.message = words
        return words
    _answer_init(a, _TRUE)
    if isinstance(answer, SessionRow):
        a.server_pid, a.in_recovery, a.ours = answer.pid, answer.in_recovery, answer.ours
        a.in_transaction = answer.in_transaction
    elif isinstance(answer, FencedRow):
        a.result = _NULL if answer.granted is None else _TRUE if answer.granted \
            else B.RESULT_FALSE
        a.fence_token = int(answer.token or 0)
    elif isinstance(answer, CapacityRow):
        a.settings[0], a.settings[1], a.settings[2] = answer
    elif isinstance(answer, list):
        rows = (B.Holder * max(len(answer), 1))()
        keep: List[Any] = [rows]  # the rows and their strings
        for i, r in enumerate(answer):
            strs = [None if v is None else str(v).encode("utf-8", "replace") for v in r[2:7]]
            keep.append(strs)
            rows[i] = B.Holder(int(r[0] or 0), 1 if r[1] else 0, *strs, int(r[7] or 0))
        a.holders, a.nholders = rows, len(answer)
        return keep
    return []


def args_of(st: B.Statement) -> Tuple[int, ...]:
    """The statement's $1.., as many as it takes."""
    return (st.param, st.param2, st.param3)[:SQL_PARAMS[st.sql]]


# ---- the engine -------------------------------------------------------------------


class Owner(Protocol):
    """A lock object with a member on an engine."""

    _m: Any  # its advlock_member (a _binding.MemberStorage)
    _addr: int  # addressof(_m): the key of owners and refused
    _session_scoped: bool  # False: a lock of transaction scope

    def _on_done(self) -> None: ...
    def _on_lost(self) -> None: ...
    def _on_warning(self, sqlstate: str, words: str) -> None: ...


class Engine:
    """One connection's advlock_conn, its client (one for every lock on the
    connection), and the owners of its members by their address."""

    __slots__ = ("_c", "_slots", "_buckets", "client", "owners", "pid", "lease", "guard",
                 "cond", "task", "poke", "helper", "helper_cond", "helper_until", "helper_idle_until", "bodies",
                 "held_back",
                 "held", "unwatch", "_ev", "wake", "_wake_p", "_session",
                 "_ans", "_head", "is_async", "settling", "timer", "timer_at", "sleeping", "news", "refused", "tick_at", "sending",
                 "__weakref__")

    def __init__(self, client: AnyClient) -> None:
        self._c = B.ConnStorage()
        self._slots = (B.SlotStorage * _SLOTS)()
        self._buckets = (B.P * _BUCKETS)()
        self.client = client
        self.is_async = hasattr(client, "start")  # an asyncio client
        client.state = self  # the client sends by what the session check found
        self.pid = client.pid()
        rc = _lib.advlock_conn_init(self._c, self._slots, _SLOTS, self._buckets, _BUCKETS,
                                    self.pid, new_token(), B.CAPS_CANCEL)
        if rc:
            raise CallError(rc, strerror(rc))
        self.owners: Dict[int, Owner] = {}
        self._session = _lib.advlock_conn_session(self._c).contents
        self.lease = (0, 0)  # (lease_ms, stop_ms) set on the engine
        # Blocking connections: one thread in the engine at a time; the
        # condition wakes the threads waiting for an answer or a time.
        self.guard = threading.Lock()
        self.cond = threading.Condition(self.guard)
        # Threads in cond.wait(), each with the time it sleeps to (-1: until
        # the statement in flight answers): notify only when one may act.
        self.sleeping: Dict[int, int] = {}
        self.news = False  # an event taken since the last such wake-up
        # The client's words for a member's statement it refused to send,
        # by the member's address, until its lock reads them.
        self.refused: Dict[int, str] = {}
        self.tick_at = INT64_MAX  # blocking: the deadline a timer thread keeps
        self.sending = Guard()  # asyncio: the guard of the statement sent by a task
        # asyncio: the pump's task, or the Guard of a pump running inline
        self.task: Optional[object] = None
        self.poke: Optional[asyncio.Future[None]] = None   # wakes its WAIT
        self.helper: Optional[threading.Thread] = None     # blocking: the helper
        # The helper sleeps on a condition of its own, to the time in
        # helper_until (-1: awake or absent), woken only for a timer due
        # before it: the callers' news never wakes it.
        self.helper_cond = threading.Condition(self.guard)
        self.helper_until = -1
        self.helper_idle_until = -1  # idle (no timer), it sleeps till then
        self.bodies: Dict[int, asyncio.Task[Any]] = {}     # asyncpg: held locks' bodies
        # asyncpg: the bodies a heartbeat in flight holds back, each with the
        # call that lets it go on (let_go_of_body())
        self.held_back: Dict[asyncio.Task[Any], Call] = {}
        self.held = 0                     # members holding, for the session watch
        self.unwatch: Optional[Call] = None
        # asyncio: futures of tasks waiting for the engine to settle (nothing
        # in flight or owed), woken at each answer
        self.settling: List[asyncio.Future[None]] = []
        # asyncio, no pump task: the loop's timer for the engine's (a held
        # lock's heartbeat, a lease's deadline), due at timer_at (ms)
        self.timer: Optional[asyncio.TimerHandle] = None
        self.timer_at = INT64_MAX
        self._ev = B.ConnEvent()
        self._ans = B.Answer()
        self._head = B.Statement()  # advlock_conn_head()'s, for a notice
        # The engine's next wake as the last turn left it (turns()).
        self.wake = c_int64(INT64_MAX)
        self._wake_p = pointer(self.wake)

    # What the lock objects call.

    def join(self, owner: Owner) -> None:
        """owner's member is busy or holding from now on: its events come."""
        self.owners[owner._addr] = owner

    def check(self, rc: int) -> None:
        """Raises the CallError of a call the engine refused."""
        if rc:
            raise CallError(rc, strerror(rc))

    def set_lease(self, lease: Tuple[int, int], name: Name) -> None:
        """The connection's lease becomes lease (lease_ms, stop_ms). Raises
        CallError while locks are held on it (the lock named name asked)."""
        rc = _lib.advlock_conn_set_lease(self._c, *lease)
        if rc == B.ADVLOCK_EMISUSE:
            raise CallError(rc, "advlock.lock(%r): the connection's lease is %s, set while its"
                            " locks are held: every lock on a connection shares its lease"
                            " (docs/python.md \"Leases\")"
                            % (escape_name(name), "none" if not self.lease[0]
                               else "%g s" % (self.lease[0] / 1000)))
        self.check(rc)
        self.lease = lease

    def let_go_of_body(self, body: asyncio.Task[Any]) -> None:
        """body, held back by a heartbeat in flight, goes on now (its lock
        was lost: it must stop, and in a partition that heartbeat may not
        answer for minutes); nothing if it is not held back."""
        go_on = self.held_back.pop(body, None)
        if go_on is not None:
            go_on()

    def hold(self) -> None:
        """A lock on the connection is held. The connection is watched for
        the server's close (the client's watch) from its first hold on, and
        stays watched while it lives: a watch costs nothing while the
        session lives, and one added and dropped at every hold would cost
        each cycle two epoll_ctl (psycopg) or a listener's list edits."""
        self.held += 1
        if self.unwatch is None:
            self.unwatch = self.client.watch(_heard_closed_of(self))

    def unhold(self) -> None:
        """A lock on the connection is held no more (its watch stays)."""
        self.held -= 1

    def _heard_closed(self) -> None:
        """The watch's call (on the loop, or the watcher thread): the watch
        is spent (the socket left the set); the engine hears of the close
        only while a lock holds (else the next statement finds it)."""
        self.unwatch = None
        with self.guard:
            if not self.held:
                return
            self.closed(ENDED)
            if self.sleeping:
                self.cond.notify_all()
            _wake_helper(self)

    def session(self) -> B.Session:
        """The connection's session value (a view of the engine's own, read
        once: it lives as long as the engine)."""
        value: B.Session = self._session
        return value

    @property
    def proxied(self) -> Optional[bool]:
        """True behind a proxy, False direct, None until the row said."""
        s = self._session
        return bool(s.proxied) if s.checked else None

    def tell_transaction(self) -> None:
        """Tells the engine whether the client is inside a transaction
        block: outside one, the locks of transaction scope went with it."""
        _on_transaction(self._c, 0 if self.client.outside_transaction() else 1)

    def closed(self, words: str) -> None:
        """The connection closed under the engine (its watch heard it)."""
        _lib.advlock_conn_on_closed(self._c, None, words.encode("utf-8", "replace"), now_ms())
        self.take_events()

    def stopped(self, words: str) -> None:
        """The pump stopped on an exception with the connection in a state
        nobody knows: it is closed (the server frees the session's locks)
        and every member told so, in words."""
        try:
            self.client.close_now()
        finally:
            self.closed(words)

    def quiet(self) -> bool:
        """No member busy, nothing in flight or owed (timers may run)."""
        c = self._c
        return bool(_busy(c) == 0 and _outstanding(c) == 0)

    def idle(self) -> bool:
        """Nothing for a pump to do: no member busy, nothing in flight or
        owed, no timer."""
        c = self._c
        return bool(_busy(c) == 0 and _outstanding(c) == 0 and _next_wake(c) == INT64_MAX)

    # What the pump and the lock objects call.

    def tick(self, due_only: bool = True) -> None:
        """The engine's timer, if it is due (or whenever not due_only: a
        timer thread may wake a little early); then its events."""
        c, now = self._c, _mono() // 1000000
        if not due_only or _next_wake(c) <= now:
            _on_timer(c, now)
            self.take_events()

    def next_wake(self) -> int:
        wake: int = _next_wake(self._c)
        return wake

    def outstanding(self) -> int:
        count: int = _outstanding(self._c)
        return count

    def cancel(self, owner: Owner) -> int:
        rc: int = _lib.advlock_conn_cancel(self._c, owner._m, now_ms())
        return rc

    def let_go(self, owner: Owner) -> None:
        """owner's member forgets its held lock without releasing it
        (advlock_conn_let_go())."""
        _lib.advlock_conn_let_go(self._c, owner._m)

    def busy(self, owner: Owner) -> bool:
        return bool(_member_busy(owner._m))

    def held_by(self, owner: Owner) -> bool:
        return bool(_lib.advlock_member_held(owner._m))

    def report_of(self, owner: Owner) -> Tuple[B.Report, bytes]:
        """A copy of owner's last report, and its words (b"" if none: an
        acquire or a release that went as asked has none to read)."""
        m = owner._m
        c = B.Report.from_buffer_copy(_member_report(m).contents)
        return c, b"" if c.outcome in _WORDLESS else _member_words(m)

    def start_acquire(self, owner: Owner, raw: bytes, ms: int, opts: Any,
                      lease: Optional[Tuple[int, int]]) -> None:
        """Starts owner's acquire, the engine told first what the client
        sees of the connection (a new server session: another announced
        pid; a transaction block) and the lease (lease None: a lock of
        transaction scope, which holds no lease)."""
        c, client = self._c, self.client
        pid = client.pid()
        if pid != self.pid:
            self.pid = pid
            _lib.advlock_conn_on_reset(c, pid, new_token(), _mono() // 1000000)
            self.take_events()
        in_block = not client.outside_transaction()
        if lease is None and in_block:
            self._end_earlier_block()
        _on_transaction(c, in_block)
        if lease is not None and lease != self.lease:
            self.set_lease(lease, raw)
        rc = _start_acquire(c, owner._m, raw, len(raw), ms, opts, _mono() // 1000000)
        if rc:
            raise CallError(rc, strerror(rc))
        self.owners[owner._addr] = owner

    def _end_earlier_block(self) -> None:
        """Before a transaction-scoped acquire inside a block: the engine
        hears of a block's end only before an operation, and a connection
        has one block at a time, so the transaction-scoped locks still held
        went with an earlier block, or share this one (the server session
        holds them either way). They stop holding, unless one of them is
        still acquiring (its block is this one)."""
        xact = [o for o in self.owners.values() if not o._session_scoped]
        if any(_member_held(o._m) for o in xact) and \
                not any(_member_busy(o._m) for o in xact):
            _on_transaction(self._c, 0)

    def start_release(self, owner: Owner) -> None:
        rc = _start_release(self._c, owner._m, _mono() // 1000000)
        if rc:
            raise CallError(rc, strerror(rc))
        self.owners[owner._addr] = owner

    def start_verify(self, owner: Owner) -> None:
        self.check(_lib.advlock_conn_start_verify(self._c, owner._m, now_ms()))
        self.join(owner)

    def take_events(self) -> None:
        """Hands each event to its member's owner."""
        c, ev, owners = self._c, self._ev, self.owners
        while _poll_event(c, ev):
            self.news = True
            owner = owners.get(ev.member)
            if owner is None:
                continue
            if ev.kind == _DONE:
                owner._on_done()
            elif ev.kind == _LOST_EVENT:
                owner._on_lost()
            elif ev.kind == _WARNING:
                owner._on_warning(_warning_sqlstate(c).decode("ascii", "replace"),
                                  _warning(c).decode("utf-8", "replace"))

    def notice(self, sqlstate: Optional[str], words: str) -> None:
        """The server's notice or warning, heard while the engine's
        statement was in flight (the client calls it before that
        statement's answer is handed in): the engine keeps it for the
        statement's member (advlock_conn_on_notice()), and a lock-delay
        acquire may fail on it. A blocking client calls it on the thread
        running the statement, which holds no guard then."""
        raw = (None if not sqlstate else sqlstate.encode("ascii", "replace"),
               words.encode("utf-8", "replace"))
        if self.is_async:
            self._notice(*raw)
            return
        with self.guard:
            self._notice(*raw)

    def _notice(self, sqlstate: Optional[bytes], words: bytes) -> None:
        # Only while a statement of the engine's is in flight: else the
        # notice is some other statement's (the caller's, on the same
        # connection), and nothing of the engine's.
        c = self._c
        if _head(c, self._head):
            _on_notice(c, sqlstate, words, now_ms())


def _heard_closed_of(e: Engine) -> Callable[[], None]:
    """e's watch call, holding e weakly: a watch kept while the connection
    lives must not keep it (and its socket) alive."""
    ref = weakref.ref(e)

    def heard() -> None:
        found = ref()
        if found is not None:
            found._heard_closed()
    return heard


# ---- the pump, once ---------------------------------------------------------------

Op = Tuple[int, Any]
Pump = Generator[Op, Optional["Answer"], None]


def turns(e: Engine, done: Callable[[], bool]) -> Generator[Op, Optional[Answer], None]:
    """The pump's logic: yields (SEND, statement) and takes its answer (or
    None: not yet, AWAIT it), (AWAIT, wake_ms) taking the answer or None at
    that time, (WAIT, wake_ms), (CANCEL, None); returns once done() says so
    and nothing may be sent. A pass is one call into the engine
    (advlock_conn_turn(): the answer, the timer when due, the next
    statement), the events taken only when it says some wait; e.wake is
    the engine's next wake after it."""
    c, take_events, ans, tick = e._c, e.take_events, e._ans, e.tick
    wake, wake_p = e.wake, e._wake_p
    st = B.Statement()
    late: Optional[B.Statement] = None
    fed: Optional[B.Answer] = None  # the answer the next pass hands in
    keep: List[Any] = []  # what fed's strings need alive until then
    while True:
        found = _turn(c, fed, st, _mono() // 1000000, wake_p)
        fed = None
        if found & _EVENTS:
            take_events()
        if not found & _STATEMENT:
            if done():
                return
            yield WAIT, wake.value
            continue
        if st.kind == _CANCEL:
            yield CANCEL, None
            continue
        answer = yield SEND, st
        while True:
            while answer is None:
                answer = yield AWAIT, _next_wake(c)
                if answer is None:  # its time came first: a cancel may be due
                    tick()
                    late = late or B.Statement()
                    if _poll(c, late, _mono() // 1000000) and late.kind == _CANCEL:
                        yield CANCEL, None
            if answer.__class__ is not Busy or st.member is not None:
                break
            # The connection's own statement, refused (asyncpg: the caller's
            # runs; psycopg: the caller's transaction failed): again, later.
            yield WAIT, _mono() // 1000000 + RETRY_MS
            answer = yield SEND, st
        if answer.__class__ is int:
            fed = _BOOLEANS.get(answer)  # type: ignore[arg-type]
            if fed is None:
                _answer_init(ans, answer)
                fed = ans
        elif answer.__class__ is Busy:
            # A member's statement the client refused to send: never run,
            # so nothing granted; the operation fails as a misuse, in the
            # client's words (the lock raises CallError), the connection
            # usable.
            message = answer.message  # type: ignore[union-attr]
            e.refused[st.member] = message
            keep = _fill(ans, (_SERVER_ERROR, None, message))
            fed = ans
        else:
            keep = _fill(ans, answer)  # alive while the engine reads it
            fed = ans
            if answer.__class__ is tuple and answer[0] == _LOST:  # type: ignore[index]
                # The clients answer so only for a connection closed or
                # broken: the engine hears of the close, once.
                _on_answer(c, ans, _mono() // 1000000)
                fed = None
                e.closed(str(answer[2]))  # type: ignore[index]


def _boolean(result: int) -> B.Answer:
    a = B.Answer()
    _answer_init(a, result)
    return a


# The answers of a boolean statement, made once (the engine only reads them).
_BOOLEANS = {r: _boolean(r) for r in (_TRUE, B.RESULT_FALSE, _NULL)}


# ---- the asyncio shell ------------------------------------------------------------


def kick(e: Engine) -> None:
    """Work was started or cancelled on an asyncio engine: its pump runs."""
    task = e.task
    if task is None:
        if e.timer is not None:
            e.timer.cancel()
            e.timer = None
        e.task = asyncio.get_running_loop().create_task(_pump_async(e))
    else:
        poke = e.poke
        if poke is not None and not poke.done():
            poke.set_result(None)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _pump_async(e: Engine, gen: Optional[Pump] = None,
                      pending: Optional[Op] = None) -> None:
    """The pump's task: a generator handed over by an inline pump (with
    the step it was at), then the engine's own until it is idle."""
    client: AsyncClient = e.client  # type: ignore[assignment]
    loop = asyncio.get_running_loop()
    if gen is None:
        gen = turns(e, e.idle)
    value: Optional[Answer] = None
    inflight: Optional[asyncio.Future[Answer]] = None
    cancels: List[Any] = []
    # A cancel of this task (asyncio.run's teardown cancels every task) is
    # kept away from the statement in flight and the grants owed: the pump
    # goes on until nothing is in flight, owed or busy, then ends.
    guard = Guard()
    task = asyncio.current_task()
    try:
        while True:
            try:
                if pending is not None:
                    (op, arg), pending = pending, None
                else:
                    op, arg = gen.send(value)
            except StopIteration:
                if e.idle():
                    return
                gen, value = turns(e, e.idle), None
                continue
            finally:
                if e.settling:
                    _settle(e)
            value = None
            if guard.cancelled_by is not None and op == WAIT and e.quiet():
                return
            try:
                value, inflight = await _step(e, client, loop, op, arg, inflight, cancels, guard)
            except asyncio.CancelledError as err:
                guard.cancelled_by = guard.cancelled_by or err
                if task is not None:
                    task.uncancel()
    except BaseException as exc:  # noqa: B902 - no member may wait for ever
        e.stopped("advlock: the pump stopped: %r" % exc)
        raise
    finally:
        e.task = None
        _settle(e)


def _settle(e: Engine) -> None:
    """Wakes the cancelled tasks waiting for e to settle: each looks again."""
    for waiting in e.settling:
        _wake(waiting)
    e.settling.clear()


async def _step(e: Engine, client: AsyncClient, loop: asyncio.AbstractEventLoop, op: int,
                arg: Any, inflight: Optional[asyncio.Future[Answer]], cancels: List[Any],
                guard: Guard) -> Tuple[Optional[Answer], Optional[asyncio.Future[Answer]]]:
    """Performs one of the generator's steps on asyncio: (the answer for
    it, or None; the statement still in flight)."""
    value: Optional[Answer] = None
    if op == SEND:
        if cancels:  # none may land on this statement
            await guarded(_delivered(cancels), guard)  # type: ignore[misc]
            cancels.clear()
        if e.wake.value == INT64_MAX and not e.bodies and SQL_ANSWER[arg.sql] != _VOID:
            value = await guarded(client.start(arg.sql, args_of(arg)), guard)  # type: ignore[misc]
        else:  # a wait, timers or bodies: the pump stays free meanwhile
            e.sending = Guard()
            inflight = asyncio.ensure_future(_send_async(e, client, arg, e.sending))
    elif op == AWAIT:
        assert inflight is not None
        if not inflight.done() and guard.cancelled_by is not None and client.ended():
            # The loop closing, and the connection closed under the
            # statement (its owner closed it): no answer will come.
            e.sending.let_go = True
            inflight.cancel()
            await asyncio.wait((inflight,))
        if not inflight.done():
            poke = e.poke = loop.create_future()
            delay = None if arg == INT64_MAX else max(0, arg - now_ms()) / 1000
            await asyncio.wait((inflight, poke), timeout=delay,
                               return_when=asyncio.FIRST_COMPLETED)
        if inflight.done():
            # Its task cancelled: the statement's fate is unknown, so the
            # connection's.
            value = (_LOST, None, CANCELLED) if inflight.cancelled() else inflight.result()
            inflight = None
    elif op == WAIT:
        fut = e.poke = loop.create_future()
        timer = None if arg == INT64_MAX else \
            loop.call_later(max(0, arg - now_ms()) / 1000, _wake, fut)
        try:
            await fut
        finally:
            if timer is not None:
                timer.cancel()
    else:
        sent = client.cancel()
        if sent is not None:
            cancels.append(sent)
    return value, inflight


async def _delivered(cancels: List[Any]) -> None:
    """Once every cancel request sent is delivered (or failed)."""
    await asyncio.gather(*cancels, return_exceptions=True)


async def _send_async(e: Engine, client: AsyncClient, st: B.Statement,
                      guard: Guard) -> Answer:
    """A statement while timers run or bodies may use the connection: a
    connection's own statement (a heartbeat) waits until the bodies of the
    locks held on it are held back (asyncpg runs one operation at a time)."""
    sql, args = st.sql, args_of(st)
    own = st.member is None
    # Its task's cancel (asyncio.run's teardown cancels every task) is kept
    # away (guard): the statement runs to its answer, which the engine is
    # owed.
    # A body held back goes on after the answer, or at once if its lock is
    # lost meanwhile (e.let_go_of_body()): each is let go once.
    while True:
        held: Optional[Call] = _nothing
        # Nested `async with` locks share their task: held back once.
        for body in dict.fromkeys(e.bodies.values()) if own else ():
            held = client.hold_body(body)
            if held is None:
                break
            e.held_back[body] = held
        if held is None:  # a body is about to run: after its step
            _let_go_of_bodies(e)
            await guarded(asyncio.sleep(RETRY_MS / 1000), guard)  # type: ignore[misc]
            continue
        try:
            answer: Answer = await guarded(client.start(sql, args), guard)  # type: ignore[misc]
            return answer
        finally:
            _let_go_of_bodies(e)


def _let_go_of_bodies(e: Engine) -> None:
    """Every body a heartbeat held back goes on."""
    for body in list(e.held_back):
        e.let_go_of_body(body)


def _nothing() -> None:
    pass


async def run_async(e: Engine, owner: Owner,
                    shielded: bool = False) -> Optional[asyncio.CancelledError]:
    """Waits until owner's operation on e ends. A cancellation of the task
    meanwhile cancels the operation and is re-raised once the engine has
    settled: nothing in flight or owed, so a grant that came is given back.
    shielded (a release, a give-back): the operation goes on to its end,
    and the cancellation that came meanwhile is returned, not raised."""
    cancelled: Optional[asyncio.CancelledError] = None
    if e.task is None:
        cancelled = await _inline(e, owner, shielded)
        if cancelled is not None and not shielded:
            await _cancelled(e, owner, asyncio.get_running_loop())
            raise cancelled
    else:
        kick(e)
    m = owner._m
    if not _member_busy(m):
        return cancelled
    loop = asyncio.get_running_loop()
    while _member_busy(m):
        waiter = owner._waiter = loop.create_future()  # type: ignore[attr-defined]
        try:
            await waiter
        except asyncio.CancelledError as exc:
            if not shielded:
                await _cancelled(e, owner, loop)
                raise
            cancelled = cancelled or exc
    return cancelled


async def _cancelled(e: Engine, owner: Owner, loop: asyncio.AbstractEventLoop) -> None:
    """owner's task was cancelled: its acquire is, and this returns once the
    engine has nothing in flight or owed."""
    if e.busy(owner) and e.cancel(owner) == 0:
        e.take_events()
    if not e.idle():
        kick(e)  # a pump task runs, or is poked: a cancel request may be due
    while e.busy(owner) or e.outstanding():
        if e.task is None:
            kick(e)  # no pump runs (an inline one ended): one must, to settle
        settled = loop.create_future()
        e.settling.append(settled)
        await asyncio.shield(settled)


async def _inline(e: Engine, owner: Owner, shielded: bool) -> Optional[asyncio.CancelledError]:
    """Pumps in the caller's task while each step is a statement with no
    timer running (a fake or a quick server costs no task and no turn of
    the loop); anything else hands the generator to a pump task. A cancel
    of the task meanwhile never reaches the statement (guarded): it is
    returned, once the answer was fed."""
    client: AsyncClient = e.client  # type: ignore[assignment]
    c = e._c
    me = e.task = guard = Guard()  # marks the pump running, inline
    m = owner._m
    gen: Optional[Pump] = turns(e, lambda: not _member_busy(m))
    value: Optional[Answer] = None
    try:
        while gen is not None:
            try:
                op, arg = gen.send(value)
            except StopIteration:
                gen = None
                break
            value = None
            if op == SEND and (shielded or guard.cancelled_by is None) and not e.bodies and \
                    SQL_ANSWER[arg.sql] != _VOID:
                # The engine's timer (a lease's) is tended while the answer
                # is awaited, as a pump task's AWAIT does.
                if e.wake.value != INT64_MAX:
                    _arm_timer(e)
                value = await guarded(client.start(arg.sql, args_of(arg)), guard)  # type: ignore[misc]
                if guard.cancelled_by is not None and not shielded and e.busy(owner):
                    e.cancel(owner)  # before its answer: a grant is the engine's to give back
                continue
            e.task = None
            kick_with(e, gen, (op, arg))
            gen = None
    finally:
        if e.task is me:
            e.task = None
        if gen is not None:  # failed: no member may wait for ever
            e.stopped("advlock: the pump stopped")
        if e.settling:
            _settle(e)
    if e.task is None and not e.idle():
        if e.quiet():  # only a timer: a pump task once it is due
            _arm_timer(e)
        else:
            kick(e)
    return guard.cancelled_by


def _arm_timer(e: Engine) -> None:
    """No pump task runs: the loop calls _due() once the engine's timer
    is due (a millisecond late: never before). One armed no later than
    that stays: a lock taken and released again moves its heartbeat
    later each time, and costs the loop no timer each time."""
    wake = _next_wake(e._c)
    if wake == INT64_MAX or (e.timer is not None and e.timer_at <= wake):
        return
    if e.timer is not None:
        e.timer.cancel()
    e.timer_at = wake
    e.timer = asyncio.get_running_loop().call_later(max(0, wake - now_ms() + 1) / 1000, _due, e)


def _due(e: Engine) -> None:
    """The loop's timer for the engine: with a pump running inline (its
    statement in flight) the engine's timer runs here, as a pump task's
    AWAIT runs it; with none, a pump task starts if there is work or the
    timer is due; a pump task tends its timers itself."""
    e.timer = None
    task = e.task
    if task is None:
        if not e.quiet() or _next_wake(e._c) <= now_ms():
            kick(e)
        else:
            _arm_timer(e)
    elif task.__class__ is Guard:
        e.tick()
        _arm_timer(e)


def kick_with(e: Engine, gen: Pump, pending: Op) -> None:
    """A pump task takes over gen at its step pending."""
    e.task = asyncio.get_running_loop().create_task(_pump_async(e, gen, pending))


class Guard:
    """What a task's cancel() did while a statement ran inline (guarded);
    let_go: a cancel from now on ends the statement (nothing will answer
    it)."""

    __slots__ = ("cancelled_by", "let_go")

    def __init__(self) -> None:
        self.cancelled_by: Optional[asyncio.CancelledError] = None
        self.let_go = False


T = TypeVar("T")


@types.coroutine
def guarded(coro: Coroutine[Any, Any, T], guard: Guard) -> Generator[Any, None, T]:
    """Awaits coro (a statement) inline while keeping a cancellation of the
    task away from it: asyncpg and psycopg answer a cancelled await of a
    query by cancelling it and dropping its answer, so a grant would be
    lost. Each future it waits on is awaited through a Waiting: the
    task's cancel() is recorded in guard, and the statement goes on to its
    answer."""
    send, throw = coro.send, coro.throw
    exc: Optional[BaseException] = None
    try:
        while True:
            try:
                fut = send(None) if exc is None else throw(exc)
            except StopIteration as stop:
                value: T = stop.value
                return value
            exc = None
            if isfuture(fut) and fut.done():
                continue
            try:
                # a bare yield is one turn of the loop; a future is awaited
                # through a Waiting
                yield Waiting(fut, guard) if isfuture(fut) else fut
            except asyncio.CancelledError as err:
                if guard.let_go:
                    raise
                guard.cancelled_by = guard.cancelled_by or err
            except GeneratorExit:
                raise
            except BaseException as err:  # noqa: B902 - the statement's to handle
                exc = err
    except BaseException:
        coro.close()
        raise


# ---- the blocking shell -----------------------------------------------------------


def run_blocking(e: Engine, owner: Owner, interruptible: bool = False) -> None:
    """Pumps on this thread until owner's operation on e ends. With
    interruptible, a KeyboardInterrupt during a wait cancels the acquire and
    is re-raised once it ended."""
    m = owner._m
    with e.guard:
        interrupted = _pump_blocking(e, turns(e, lambda: not _member_busy(m)),
                                     owner if interruptible else None)
        if e.wake.value != INT64_MAX:
            _ensure_helper(e)
    if interrupted is not None:
        raise interrupted


def _pump_blocking(e: Engine, gen: Pump,
                   interruptible: Optional[Owner] = None) -> Optional[KeyboardInterrupt]:
    """Under e.guard: performs gen's steps on this thread. A KeyboardInterrupt
    during a wait cancels interruptible's operation and is returned once
    gen ended; without interruptible it is raised."""
    interrupted: Optional[KeyboardInterrupt] = None
    value: Optional[Answer] = None
    send, c, sleeping = gen.send, e._c, e.sleeping
    while True:
        try:
            op, arg = send(value)
        except StopIteration:
            return interrupted
        finally:
            if value is not None:  # an answer fed: who may act on it
                if sleeping:
                    _notify_answered(e)
                if e.helper_until >= 0:
                    _wake_helper(e)
        value = None
        if op == SEND:
            if e.wake.value != INT64_MAX and e.helper is not threading.current_thread():
                _ensure_helper(e)  # the timers go on while this thread waits
            value = _send_blocking(e, arg)
        elif op == WAIT and e.helper is threading.current_thread():
            _helper_sleep(e, arg)
        elif op == WAIT:
            me = threading.get_ident()
            # -1: waiting for the statement in flight to answer
            sleeping[me] = -1 if _outstanding(c) else arg
            try:
                e.cond.wait(None if arg == INT64_MAX else max(0, arg - now_ms()) / 1000)
            except KeyboardInterrupt as exc:
                if interruptible is None:
                    raise
                interrupted = exc
                e.cancel(interruptible)
            finally:
                del sleeping[me]
        elif op == CANCEL:
            _cancel_blocking(e)


def _notify_answered(e: Engine) -> None:
    """After an answer: wakes the threads waiting on e if one waits for
    that answer, a member's operation ended or was lost (e.news), or the
    engine's next wake came before theirs."""
    first = min(e.sleeping.values())
    if first < 0 or e.news or _next_wake(e._c) < first:
        e.news = False
        e.cond.notify_all()


def _wake_helper(e: Engine) -> None:
    """Under e.guard: wakes the sleeping helper if the engine's timer is
    due before the time it sleeps to (a later one waits for it to wake),
    or when the timers it tends are gone and it would sleep on for longer
    than it idles (it idles, then ends). A lock taken and released again
    and again thus wakes it about once per heartbeat, not once a cycle."""
    until = e.helper_until
    if until >= 0:
        wake = _tended(e)
        if wake < until or (wake == INT64_MAX and until != e.helper_idle_until
                            and until - now_ms() > HELPER_IDLE_MS):
            e.helper_cond.notify()


def _tended(e: Engine) -> int:
    """The engine's next wake if the helper must keep it: something busy,
    in flight or owed, or a lock held (its lease); INT64_MAX if not (a
    closed connection's timer is nobody's)."""
    c = e._c
    wake: int = _next_wake(c)
    if wake != INT64_MAX and not _lib.advlock_conn_watching(c) and e.quiet():
        return INT64_MAX
    return wake


def _helper_sleep(e: Engine, until: int) -> None:
    """Under e.guard: the helper sleeps until the time until (ms), or until
    _wake_helper() wakes it."""
    e.helper_until = until
    try:
        e.helper_cond.wait(None if until == INT64_MAX else max(0, until - now_ms()) / 1000)
    finally:
        e.helper_until = -1


def _send_blocking(e: Engine, st: B.Statement) -> Answer:
    """Runs the statement with the engine let go (another thread may tend
    its timers meanwhile)."""
    client: BlockingClient = e.client  # type: ignore[assignment]
    wake = _next_wake(e._c) if st.member is None else INT64_MAX
    if wake != INT64_MAX and wake != e.tick_at:
        # the connection's deadline, kept while this thread waits in its
        # own statement (a heartbeat)
        from ._watch import call_at
        e.tick_at = wake
        call_at(wake / 1000, lambda: _tick(weakref.ref(e)))
    e.guard.release()
    try:
        return client.run(st.sql, args_of(st))
    finally:
        e.guard.acquire()


def _tick(ref: weakref.ReferenceType[Engine]) -> None:
    """A blocking engine's timer, from the watcher thread."""
    e = ref()
    if e is not None:
        with e.guard:
            e.tick(due_only=False)
            if e.sleeping:
                e.cond.notify_all()
            _wake_helper(e)


def _cancel_blocking(e: Engine) -> None:
    client: BlockingClient = e.client  # type: ignore[assignment]
    e.guard.release()
    try:
        client.cancel()
    finally:
        e.guard.acquire()


def _ensure_helper(e: Engine) -> None:
    """Under e.guard: the connection's helper thread runs (one at most),
    tending the engine's timers; a sleeping one is woken if a timer is due
    before its time."""
    if e.helper_until >= 0:
        # Asleep, so alive: no thread looked up at each operation.
        _wake_helper(e)
        return
    helper = e.helper
    if helper is None or not helper.is_alive():
        ref = weakref.ref(e)
        helper = e.helper = threading.Thread(target=_help, args=(ref,), daemon=True,
                                             name="advlock-connection")
        helper.start()
    else:
        _wake_helper(e)


# How long a helper with no timer to tend stays for the next one: a lock
# taken again at once would otherwise start a thread each cycle (~0.5 ms).
HELPER_IDLE_MS = 1000


def _help(ref: weakref.ReferenceType[Engine]) -> None:
    found = ref()
    if found is None:
        return
    e: Engine = found
    with e.guard:
        while True:
            _pump_blocking(e, turns(e, lambda: _tended(e) == INT64_MAX))
            # Idle: a timer that comes later than idle_until (a held lock's
            # heartbeat) is found when it wakes, with no wake-up per cycle.
            idle_until = e.helper_idle_until = now_ms() + HELPER_IDLE_MS
            while _tended(e) == INT64_MAX and now_ms() < idle_until:
                _helper_sleep(e, idle_until)
            e.helper_idle_until = -1
            if _tended(e) == INT64_MAX:
                break
        if e.helper is threading.current_thread():
            e.helper = None
