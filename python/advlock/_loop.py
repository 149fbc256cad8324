"""The driving loops: the machine's actions performed, blocking or on
asyncio, over a small client object that knows one wire library.

A client provides:
    run(sql, args)     blocking clients: run statement `sql` (an advlock_sql
                       id) with $1, $2.. = args (bigints); return the answer
    start(sql, args)   asyncio clients: the same, as a coroutine (not yet
                       awaited) returning the answer; the loop awaits it in
                       its own task or in a task of its own (see drive_async)
    cancel()           ask the server to cancel the statement in flight
                       (blocking clients: from another thread, returning
                       once the request is delivered; asyncio clients: an
                       awaitable for its delivery, or None)
    pid()              the backend pid the server (or a proxy) announced at
                       connect, 0 if unknown
    state              the connection's _session.ConnSession (its checked
                       session value)
    heartbeat_blocked(body)  blocking clients: True when a lease's heartbeat
                       cannot go out now (psycopg: the body's transaction
                       failed)
    hold_body(body)    asyncio clients: before a lease's heartbeat, holds the
                       body's task (or None) back if its statements could
                       meet the heartbeat (asyncpg); returns the call that
                       lets it go on after the answer, or None when the
                       heartbeat cannot go out now (psycopg: the body's
                       transaction failed; asyncpg: the body's task is about
                       to run)
    close_now()        ends the connection at once (a lease expired), from
                       any thread
    heartbeat_client() a client for the lease's heartbeats, which run while
                       the lock's own statements may (verify()): psycopg's
                       has a cursor of its own
An answer is RESULT_TRUE / RESULT_FALSE / RESULT_NULL (an int), or a tuple
(result, sqlstate, message) for an error or a lost connection, a list of
holder rows for the holders query, a _session.SessionRow for the session
query, or a FencedRow for a fenced try-lock's (granted, token) row. Every decision is the machine's: the loops only wait for what an
action asks for and report what happened.
"""

from __future__ import annotations

import asyncio
import threading
import time
import types
from asyncio import isfuture
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Generator, Generic,
                    Literal, NoReturn, cast,
                    List, Optional, Tuple, Type, TypeVar, Union)

from . import _binding as B
from ._session import Busy, SessionRow
from .errors import CallError, Error, LockFailed, LockLost
from . import _lease
from ._blocking import TIMERS
from ._lease import DEFAULT as LEASE_DEFAULT, Lease, TaskWatch, ThreadWatch
from ._machine import (INT64_MAX, SQL_PARAMS, Failure, LockState, Machine, Options,
                       Outcome, Report, _encode, escape_name, now_ms, params, raise_for,
                       timeout_ms, Wait)

if TYPE_CHECKING:
    from types import TracebackType

    from ._types import Answer, AsyncClient, AsyncWatch, BlockingClient, Client, ErrorAnswer, Name

    # What before_lock returns: None to go on, else the answer the lock
    # statement gets instead of being sent.
    Refusal = Optional[Answer]

_lib = B.core
_next_action = _lib.advlock_next_action
_on_result = _lib.advlock_on_result
_start_acquire = _lib.advlock_start_acquire
_start_release_key = _lib.advlock_start_release_key
_set_session = _lib.advlock_set_session
_Report = B.Report
_new = object.__new__
_mono = time.monotonic_ns
ACQUIRED = int(Outcome.ACQUIRED)
# The outcomes that return a report rather than raise (raise_for).
_QUIET = frozenset(int(o) for o in (Outcome.ACQUIRED, Outcome.RELEASED, Outcome.NOT_HELD,
                                    Outcome.ENDS_WITH_TRANSACTION, Outcome.HELD))
CANCELLED = int(Outcome.CANCELLED)
FAILED = int(Outcome.FAILED)
ECONNLOST = int(Failure.ECONNLOST)
# An acquire's details that leave its lock in doubt: the core's one list.
_in_doubt = _lib.advlock_detail_in_doubt
POLL = int(Wait.POLL)
QUERY, SLEEP, DONE, CANCEL_QUERY = B.ACTION_QUERY, B.ACTION_SLEEP, B.ACTION_DONE, \
    B.ACTION_CANCEL_QUERY


class CapacityRow(Tuple[int, int, int]):
    """The lock table's settings (ADVLOCK_SQL_CAPACITY's row): three ints,
    max_locks_per_transaction, max_connections, max_prepared_transactions."""

    __slots__ = ()


class FencedRow:
    """A fenced try-lock's answer: granted (True, False or None for a SQL
    NULL) and the token the grant issued."""

    __slots__ = ("granted", "token")

    def __init__(self, granted: Optional[bool], token: Optional[int]) -> None:
        self.granted, self.token = granted, token


def _feed(m: Machine, answer: Answer) -> None:
    if isinstance(answer, int):
        if _on_result(m._m, answer, None, None, _mono() // 1000000):
            m.on_result(answer)  # raises CallError with the core's words
    elif isinstance(answer, list):
        m.on_holders(answer)
    elif isinstance(answer, SessionRow):
        m.on_session(answer.pid, answer.in_recovery, answer.ours)
        # The connection's value from now on: the statements after the row
        # choose their form by it.
        answer.shared.remember(m.session(), answer.provisional)
    elif isinstance(answer, FencedRow):
        if answer.granted is None:
            m.on_result(B.RESULT_NULL)
        else:
            m.on_fenced(answer.granted, answer.token)
    elif isinstance(answer, Busy):
        m.refused = answer.message
        m.on_result(B.RESULT_SERVER_ERROR, None, answer.message)
    else:
        result, sqlstate, message = cast("ErrorAnswer", answer)
        m.on_result(result, sqlstate, message)


# ---- blocking ------------------------------------------------------------------


class _Deadline:
    """A server-side wait's deadline while its statement blocks the calling
    thread: the process's timer thread (_blocking) calls the machine's timer
    at each wake_at_ms, and a cancel the machine asks for is sent from a
    thread of its own (a cancel request blocks on the network). One lock
    keeps the machine to one thread at a time."""

    __slots__ = ("m", "client", "guard", "wake_at_ms", "finished", "cancelling",
                 "__weakref__")

    def __init__(self, m: Machine, client: BlockingClient, wake_at_ms: int) -> None:
        self.m, self.client = m, client
        self.guard = threading.Lock()
        self.wake_at_ms = wake_at_ms
        self.finished = False
        self.cancelling: Optional[threading.Thread] = None

    def tick(self) -> Optional[int]:
        """The timer thread's call."""
        with self.guard:
            if self.finished:
                return None
            if self.cancelling is not None:
                return INT64_MAX  # poked once the request is delivered
            if now_ms() >= self.wake_at_ms:
                m = self.m
                m.on_timer()
                a = m.next_action()
                if a.kind == CANCEL_QUERY:
                    sender = self.cancelling = threading.Thread(
                        target=self._cancel, name="advlock-cancel", daemon=True)
                    sender.start()
                    return INT64_MAX
                self.wake_at_ms = a.wake_at_ms
            return self.wake_at_ms

    def _cancel(self) -> None:
        try:
            self.client.cancel()
        finally:
            with self.guard:
                self.m.on_cancel_sent()
                self.wake_at_ms = self.m.next_action().wake_at_ms
                self.cancelling = None
            TIMERS.poke()

    def finish(self) -> None:
        """The statement answered: no timer call after this returns, and a
        cancel request under way has been delivered (none may land on a
        later statement)."""
        with self.guard:
            self.finished = True
            sender = self.cancelling
        TIMERS.remove(self)
        if sender is not None:
            sender.join()


def _run_with_deadline(m: Machine, client: BlockingClient, action: B.Action) -> Answer:
    """A server-side wait: the statement blocks on this thread while its
    deadline is kept (_Deadline)."""
    deadline = _Deadline(m, client, action.wake_at_ms)
    TIMERS.add(deadline)
    try:
        answer = client.run(action.sql, params(action))
    finally:
        deadline.finish()
    return answer


def drive(m: Machine, client: BlockingClient, name: Optional[Name],
          before_lock: Optional[Callable[[], Refusal]] = None) -> Report:
    """Runs the started operation to its end on this thread; returns the
    final Report. A KeyboardInterrupt during a sleep cancels the acquire
    (the machine ends it CANCELLED) and is re-raised.

    before_lock: called once before the first statement that is not the
    session row (the lease's setup); an answer it returns (an error tuple,
    or Busy) is fed for that statement, not sent, and the operation ends
    FAILED. m.sent_ms is the last statement's send time."""
    interrupted: Optional[KeyboardInterrupt] = None
    mm, run = m._m, client.run
    while True:
        a = _next_action(mm)
        kind = a.kind
        if kind == QUERY:
            if before_lock is not None and a.sql != B.SQL_SESSION:
                refusal, before_lock = before_lock(), None
                if refusal is not None:
                    _feed(m, refusal)
                    continue
            m.sent_ms = _mono() // 1000000
            if a.wake_at_ms == INT64_MAX:
                sql = a.sql
                answer = run(sql, (a.param,) if SQL_PARAMS[sql] == 1 else params(a))
                if isinstance(answer, int):
                    if _on_result(mm, answer, None, None, _mono() // 1000000):
                        m.on_result(answer)  # raises CallError with the core's words
                else:
                    _feed(m, answer)
            else:
                _feed(m, _run_with_deadline(m, client, a))
        elif kind == SLEEP:
            try:
                delay = a.wake_at_ms - now_ms()
                if delay > 0:
                    time.sleep(delay / 1000)
                m.on_timer()
            except KeyboardInterrupt as exc:
                interrupted = exc
                m.cancel()
        elif kind == DONE:
            report = _new(Report)
            report._c = _Report.from_buffer_copy(a.report.contents)
            report.name, report.server_message = name, m.server_message
            if interrupted is not None:
                raise interrupted
            return report
        else:  # CANCEL_QUERY outside a wait, or NONE: not for this loop
            raise Error("advlock: unexpected action %d" % kind)


# ---- asyncio ---------------------------------------------------------------------


async def _settle(m: Machine, cancels: List[Awaitable[Any]],
                  cancelled: Optional[asyncio.CancelledError]
                  ) -> Optional[asyncio.CancelledError]:
    """Waits until every cancel request sent has been delivered (as libpq's
    PQcancel returns only then), so that none lands on a later statement.
    A cancellation of the task meanwhile goes to the machine."""
    while cancels:
        try:
            await asyncio.shield(asyncio.gather(*cancels, return_exceptions=True))
            cancels.clear()
        except asyncio.CancelledError as exc:
            cancelled = exc
            m.cancel()
    return cancelled


class Inflight:
    """A statement in flight on asyncio in a task of its own, and its answer
    once it came: for a server-side wait, during which the driving loop also
    keeps the machine's deadline and sends the cancels it asks for. The
    loop awaits a fresh waiter future each time, so that cancelling the
    loop's task cancels a waiter, never the statement."""

    __slots__ = ("task", "answer", "finished", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 coro: Coroutine[Any, Any, Answer]) -> None:
        self.answer: Union[None, Answer, BaseException] = None
        self.finished = False
        self.waiter: Optional[asyncio.Future[None]] = None
        self.task = loop.create_task(self._run(coro))

    async def _run(self, coro: Coroutine[Any, Any, Answer]) -> None:
        try:
            self.answer = await coro
        except BaseException as exc:  # noqa: B902 - the task itself was cancelled
            self.answer = exc
            raise
        finally:
            self.finished = True
            w = self.waiter
            if w is not None and not w.done():
                w.set_result(None)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Guard:
    """What a task's cancel() did while a statement ran inline (guarded):
    the CancelledError the loop hands the machine with the answer."""

    __slots__ = ("cancelled_by",)

    def __init__(self) -> None:
        self.cancelled_by: Optional[asyncio.CancelledError] = None


T = TypeVar("T")


@types.coroutine
def guarded(coro: Coroutine[Any, Any, T], guard: Guard) -> Generator[Any, None, T]:
    """Awaits coro (a statement) inline, in the task that drives the
    machine (no task of its own), while keeping a cancellation of that task
    away from the statement.

    asyncpg and psycopg answer a cancelled await of a query by cancelling
    the query and dropping its answer, so a lock granted in the race would
    be lost. Each future the statement waits on is therefore awaited through
    a waiter future of this task's own, woken by the statement's future: the
    task's cancel() cancels the waiter, is recorded in guard.cancelled_by,
    and the statement goes on to its answer, which the loop feeds the
    machine after the cancel. Only for statements the machine never asks to
    cancel (polling: ADVLOCK_ACTION_CANCEL_QUERY comes only with a
    server-side wait), since no cancel reaches the loop before the answer."""
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
            if not isfuture(fut):
                # A bare yield (one turn of the loop): as is. A cancel of
                # the task can only come in as an exception here.
                try:
                    yield fut
                except asyncio.CancelledError as e:
                    if guard.cancelled_by is None:
                        guard.cancelled_by = e
                except GeneratorExit:
                    raise
                except BaseException as e:  # noqa: B902 - the statement's to handle
                    exc = e
                continue
            while not fut.done():
                waiter = fut.get_loop().create_future()
                # Called with fut, a result unread; the waiter may be
                # cancelled by then (the task's cancel in the same turn).
                wake = lambda _fut, w=waiter: _wake(w)  # noqa: E731
                fut.add_done_callback(wake)
                try:
                    yield from waiter.__await__()
                except GeneratorExit:
                    raise
                except asyncio.CancelledError as e:
                    # The task's cancel (of the waiter, or after its wake-up):
                    # recorded, and the statement goes on to its answer.
                    fut.remove_done_callback(wake)
                    if guard.cancelled_by is None:
                        guard.cancelled_by = e
                except BaseException as e:  # noqa: B902 - the statement's to handle
                    fut.remove_done_callback(wake)
                    exc = e
                    break
    except BaseException:
        coro.close()  # closed or failed here: the statement's coroutine too
        raise


async def drive_async(m: Machine, client: AsyncClient, name: Optional[Name],
                      inline: bool = True,
                      before_lock: Optional[Callable[[], Awaitable[Refusal]]] = None
                      ) -> Report:
    """Runs the started operation to its end on the running loop; returns
    the final Report. Cancelling the awaiting task (task.cancel(),
    asyncio.timeout) cancels the acquire through the machine: the statement
    in flight is awaited to its answer, a lock granted in the race is
    unlocked, and then the CancelledError is re-raised (chained to a
    LockError if the operation failed meanwhile). A release is not
    cancelled: it runs to its end before the CancelledError goes on.

    inline: run statements in this task (through a Guard), which only a
    polling lock may: a server-side wait runs in a task of its own
    (Inflight) while this one keeps its deadline and sends its cancel.
    before_lock: as for drive(), a coroutine function."""
    cancelled: Optional[asyncio.CancelledError] = None
    guard: Optional[Guard] = None
    mm = m._m
    a = _next_action(mm)
    while True:
        kind = a.kind
        if kind == QUERY and before_lock is not None and a.sql != B.SQL_SESSION:
            refusal, before_lock = await before_lock(), None
            if refusal is not None:
                _feed(m, refusal)
                a = _next_action(mm)
                continue
        if kind == QUERY:
            sql = a.sql
            m.sent_ms = _mono() // 1000000
            coro = client.start(sql, (a.param,) if SQL_PARAMS[sql] == 1 else params(a))
            if inline:
                if guard is None:
                    guard = Guard()
                answer = await guarded(coro, guard)
                if guard.cancelled_by is not None:
                    cancelled, guard.cancelled_by = guard.cancelled_by, None
                    m.cancel()
            else:
                got = await _inflight(m, client, a, coro)
                if isinstance(got, _Cancelled):
                    cancelled = got.exc
                    answer = got.answer
                else:
                    answer = got
            if isinstance(answer, int):
                if _on_result(mm, answer, None, None, _mono() // 1000000):
                    m.on_result(answer)  # raises CallError with the core's words
            else:
                _feed(m, answer)
        elif kind == SLEEP:
            try:
                delay = a.wake_at_ms - now_ms()
                await asyncio.sleep(delay / 1000 if delay > 0 else 0)
                m.on_timer()
            except asyncio.CancelledError as exc:
                cancelled = exc
                m.cancel()
        elif kind == DONE:
            report = _new(Report)
            report._c = _Report.from_buffer_copy(a.report.contents)
            report.name, report.server_message = name, m.server_message
            if cancelled is not None:
                try:
                    raise_for(report, name)
                except Exception as failure:
                    if report._c.outcome != CANCELLED:
                        raise cancelled from failure
                raise cancelled
            return report
        else:
            raise Error("advlock: unexpected action %d" % kind)
        a = _next_action(mm)


class _Cancelled:
    """An answer that came after the task was cancelled."""

    __slots__ = ("answer", "exc")

    def __init__(self, answer: Answer, exc: asyncio.CancelledError) -> None:
        self.answer, self.exc = answer, exc


async def _inflight(m: Machine, client: AsyncClient, a: B.Action,
                    coro: Coroutine[Any, Any, Answer]) -> Union[Answer, _Cancelled]:
    """A statement in a task of its own (Inflight): waits for its answer,
    calling the timer at its deadline and sending the cancels the machine
    asks for (appended to client's pending deliveries, settled by the loop
    before its next statement). Returns the answer, or a _Cancelled holding
    it when the task was cancelled meanwhile (the machine knows already)."""
    loop = asyncio.get_running_loop()
    inflight = Inflight(loop, coro)
    cancelled: Optional[asyncio.CancelledError] = None
    cancels: List[Awaitable[Any]] = []
    while not inflight.finished:
        if a.kind == CANCEL_QUERY:
            try:
                sent = client.cancel()
                if sent is not None:
                    cancels.append(sent)
            finally:
                m.on_cancel_sent()
            a = m.next_action()
            continue
        waiter = inflight.waiter = loop.create_future()
        timer = None
        if a.wake_at_ms != INT64_MAX:
            delay = max(0, a.wake_at_ms - now_ms()) / 1000
            timer = loop.call_later(delay, _wake, waiter)
        try:
            await waiter
        except asyncio.CancelledError as exc:
            cancelled = exc
            m.cancel()
        finally:
            if timer is not None:
                timer.cancel()
        if timer is not None and not inflight.finished:
            m.on_timer()
        a = m.next_action()
    answer = cast("Answer", inflight.answer)
    if isinstance(answer, BaseException):
        raise answer
    if cancels:
        # Delivered before the next statement goes out.
        cancelled = await _settle(m, cancels, cancelled)
    return answer if cancelled is None else _Cancelled(answer, cancelled)


# ---- the lock objects ----------------------------------------------------------------


C = TypeVar("C", bound="Client")
# What drives a held lock's lease while the body runs.
W = TypeVar("W")


class _LockBase(Generic[C, W]):
    __slots__ = ("_client", "name", "timeout", "options", "_machine", "report",
                 "release_report", "_raw", "_t", "_ms", "_pid", "_epoch", "_plan", "_lease", "_watch",
                 "_lost", "_refusal", "_lost_event", "_unwatch")

    _client: C
    name: Name
    timeout: Optional[float]
    options: Options
    _machine: Machine
    report: Optional[Report]
    release_report: Optional[Report]
    _raw: bytes
    _t: Optional[float]
    _ms: Optional[int]
    _pid: Optional[int]
    _epoch: Optional[int]
    _plan: Optional[B.LeasePlan]
    _lease: Optional[Lease]
    _watch: Optional[W]
    _lost: Optional[LockLost]
    _refusal: Optional[str]
    _lost_event: Optional[threading.Event]
    _unwatch: Optional[Callable[[], None]]

    def __init__(self, client: C, name: Name, timeout: Optional[float] = None,
                 options: Optional[Options] = None, lease: object = LEASE_DEFAULT,
                 lease_stop: Optional[float] = None, **option_kwargs: Any) -> None:
        self._client = client
        self.name = name
        self.timeout = timeout
        self.options = Options.coerce(options, **option_kwargs)
        self._raw = _encode(name)
        self._plan = _lease.plan_for(lease, lease_stop)  # None: no lease
        self._machine = Machine(self.options)
        self._t = self._ms = None   # self.timeout and its ms, as last converted
        self._pid = None            # the announced pid the machine's session has
        self._epoch = None          # and the connection's ConnSession.epoch then
        self.report = None          # the last acquire's Report
        self.release_report = None  # the last release's Report
        self._lease = None          # the held lock's _lease.Lease (heartbeats run)
        self._watch = None          # what drives it while the body runs
        self._lost = None           # the LockLost once the held lock was lost
        self._refusal = None        # the lease setup's refusal of the acquire
        self._lost_event = None     # lost, made on first use
        self._unwatch = None        # stops the held lock's session watch

    @property
    def held(self) -> bool:
        """True between a successful acquire and its release."""
        r = self.report
        return (r is not None and r._c.outcome == ACQUIRED and self.release_report is None
                and self._lost is None)

    @property
    def state(self) -> LockState:
        """LockState: HELD between a successful acquire and its release;
        MAY_BE_HELD after a failed release (or a failed give-back of an
        unwanted grant, or a fenced try's server error: the session's holds
        of the key are in doubt, close the connection), unless the connection was lost on a direct
        connection, whose server session ended with it; NOT_HELD otherwise."""
        r, rr = self.report, self.release_report
        if r is None:
            return LockState.NOT_HELD
        if r._c.outcome != ACQUIRED:
            return LockState.MAY_BE_HELD if _in_doubt(r._c.detail) else LockState.NOT_HELD
        if self._lost is not None:
            return self._lost_state()
        if rr is None:
            return LockState.HELD
        if rr._c.outcome != FAILED or self._session_ended(rr._c.failure):
            return LockState.NOT_HELD
        return LockState.MAY_BE_HELD

    def _session_ended(self, failure: int) -> bool:
        """Whether a failure ended the server session, and every lock it
        held: a lost connection made directly to the server (behind a proxy
        the server session may outlive it)."""
        return failure == ECONNLOST and self._client.state.proxied is False

    def _lost_state(self) -> LockState:
        """The state of a lock lost while held (self._lost): gone with its
        session when the connection closed under it on a direct connection;
        else (the lease: the server frees it within the lease; a proxy's
        server session may live on) MAY_BE_HELD."""
        lost = self._lost
        if lost is not None and lost.ended and self._session_ended(ECONNLOST):
            return LockState.NOT_HELD
        return LockState.MAY_BE_HELD

    @property
    def fence(self) -> Optional[int]:
        """The fencing token the held lock's grant issued (an int >= 1,
        strictly above every token issued before for its key), for the
        resource to check with advlock.fence_ok(); None when the lock is not
        held or was not taken with fence=True."""
        r = self.report
        return (int(r._c.fence) or None) if r is not None and self.held else None

    @property
    def key(self) -> int:
        """The lock's bigint key (derived by the core)."""
        if self.report is not None:
            return self.report.key
        from ._machine import derive_key
        return derive_key(self.name)

    def __repr__(self) -> str:
        return "<%s %r %s>" % (type(self).__name__, self.name,
                               "held" if self.held else "not held")

    # The steps the blocking and the asyncio lock share around their drive.

    def _tell_session(self, m: Machine, acquiring: bool = False) -> None:
        """advlock_set_session before the machine's first operation, or
        when the connection announces another pid, or before an acquire
        once the connection's value is to be checked again (a row answered
        inside a block, now ended): the connection's checked value, or a
        fresh one with a token of its own (see _session: a token is checked
        once). In between, the machine keeps its copy and what its session
        row found."""
        client = self._client
        state = client.state
        m.refused = None
        pid = client.pid()
        if acquiring and state.provisional:
            state.end_provisional(client.outside_transaction())
        if pid != self._pid or (acquiring and state.epoch != self._epoch):
            session = state.value_for(pid)
            if _set_session(m._m, session):
                m.set_session(session)  # raises CallError
            self._pid, self._epoch = pid, state.epoch

    def _start_acquiring(self) -> Machine:
        """Starts the machine's acquire; returns the machine."""
        m = self._machine
        self._tell_session(m, acquiring=True)
        self.report = self.release_report = None
        self._lost = self._refusal = None
        if self._lost_event is not None:
            self._lost_event.clear()
        m.server_message = None
        raw, t = self._raw, self.timeout
        if t is not self._t or self._ms is None:
            self._ms, self._t = INT64_MAX if t is None else timeout_ms(t), t
        if _start_acquire(m._m, raw, len(raw), self._ms, _mono() // 1000000):
            m.start_acquire(raw, self._ms)  # raises CallError
        return m

    def _start_releasing(self) -> Machine:
        """Starts releasing what the last acquire took (by its key, no second
        hash), or one hold of the name; returns the machine."""
        r = self.report
        m = self._machine
        self._tell_session(m)
        if r is not None and r._c.outcome == ACQUIRED:
            m.server_message = None
            key = r._c.key
            if _start_release_key(m._m, key, _mono() // 1000000):
                m.start_release_key(key)  # raises CallError
        else:
            m.start_release(self.name)
        return m

    def _start_verifying(self) -> Machine:
        """Starts a verify of the lock's key (the last acquire's, else the
        name's); returns the machine."""
        m = self._machine
        self._tell_session(m)
        m.start_verify_key(self.key)
        return m

    def _refuse(self, plan: B.LeasePlan, result: int, answer: Optional[Answer]) -> Refusal:
        """What the setup leaves the acquire: None to go on; else the answer
        its lock statement gets instead of being sent (the setup's own
        failure, or a refusal to hold without the lease's settings)."""
        if answer is not None and answer.__class__ is not int:
            return answer
        self._refusal = _lease.setup_message(result, self.name, plan)
        if self._refusal is None:
            return None
        return (B.RESULT_SERVER_ERROR, None, self._refusal)

    def _heartbeat_token(self) -> Optional[Tuple[B.LeasePlan, int]]:
        """After an acquire: the lease's plan and the token of its
        heartbeats (0 direct), or None when none are to run (no lease, or a
        lease held already: another hold of the lock; see
        _lease.heartbeat_token)."""
        plan = self._plan
        if plan is None or self._lease is not None:
            return None
        setup = _lease.remembered(self._client.state, plan)
        token = _lease.heartbeat_token(setup, self._machine.session())
        return None if token is None else (plan, token)

    def _hold_granted(self, plan: B.LeasePlan, token: int, anchor_ms: int,
                      answer: Optional[Answer]) -> Lease:
        """Holds the lease of a lock just granted, from anchor_ms: the
        grant's send time (answer None), or that of the heartbeat that
        confirmed a stale grant (_lease.renewal), which answered answer.
        Raises LockLost, the connection closed, before the body runs when
        that heartbeat answered anything but TRUE (the lock cannot be proven
        held) or when the lease's deadline has passed already."""
        if self._lost_event is None:  # made here, before a watcher may set it
            self._lost_event = threading.Event()
        if answer is not None and answer != B.RESULT_TRUE:
            self._lost = _lease.unconfirmed_error(self, answer)
            self._lost_event.set()
            self._raise_lost()
        lease = self._lease = _lease.hold(plan, token, anchor_ms)
        if self._overdue():
            self._raise_lost()
        return lease

    def _expire(self, stop_at_ms: int) -> None:
        """The lease expired: the lock is lost. The connection stays open
        until the body has stopped (_raise_lost): closing it frees the lock
        at once on a link that works, while the body may still run."""
        lease = self._lease
        if self._lost is None and lease is not None:
            self._lose(_lease.lost_error(self, lease, stop_at_ms), stop_body=False)

    @property
    def lost(self) -> threading.Event:
        """A threading.Event set when the held lock is lost: its connection
        closed under it, or its lease expired (by the watcher: wait on it
        from any thread); cleared by the next acquire."""
        event = self._lost_event
        if event is None:
            event = self._lost_event = threading.Event()
        return event

    def _overdue(self) -> bool:
        """True once the held lock is lost: its connection heard closed
        (asked here too, without waiting for the watch's callback), or its
        lease, driven to now, expired."""
        if self._lost is None and self._unwatch is not None and self._client.ended():
            self._session_lost(stop_body=False)  # check() raises in the body itself
        lease = self._lease
        if lease is not None and self._lost is None:
            with lease.guard:
                lease.on_timer()
                a = lease.next()
            if a.kind == B.LEASE_EXPIRED:
                self._expire(a.stop_at_ms)
        return self._lost is not None

    def _raise_lost(self, cause: Optional[BaseException] = None) -> NoReturn:
        """The body has stopped: closes the connection (no late answer can
        count, and the server frees the lock now if it still has it) and
        raises the LockLost."""
        self._drop_lost()
        lost = self._lost
        assert lost is not None, "a lock is lost before its loss is raised"
        if cause is lost:  # check() raised it in the body
            raise lost
        raise lost from cause

    def _check(self) -> None:
        """check(): raises the LockLost of a lock found lost now."""
        lost = self._lost if self._overdue() else None
        if lost is not None:
            raise lost

    def _end_lease(self) -> None:
        """The release begins: the held lock's lease stops."""
        if self._lease is not None:
            self._lease.stop()
            self._lease = None

    def _drop_lost(self) -> None:
        self._unwatch_session()
        self._lease = None
        self._client.close_now()

    # The session watch (_watch): a session the server ends, heard at once.

    def _watch_session(self) -> None:
        """The lock is held: its connection is watched until the release."""
        if self._lost_event is None:  # made here, before the watch may set it
            self._lost_event = threading.Event()
        self._unwatch = self._client.watch(self._session_lost)

    def _unwatch_session(self) -> None:
        unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()

    def _session_lost(self, stop_body: bool = True) -> None:
        """The connection closed under the held lock (the watch's callback,
        on the loop or the session watch's thread): the lock is lost."""
        if self._lost is None and self.held:
            self._lose(_lease.session_ended_error(self), stop_body)

    def _lose(self, err: LockLost, stop_body: bool = True) -> None:
        """The held lock is lost (err, a LockLost): lost is set and, with
        stop_body, the body stopped (asyncio: cancelled)."""
        self._lost = err
        self.lost.set()
        if stop_body:
            self._cancel_body()

    def _cancel_body(self) -> None:
        """A blocking body stops at its next check()."""

    def _released(self, report: Report) -> Report:
        """A release's end: the report, or its error raised; a held lock
        whose release found the connection lost was lost before its
        release could reach the server (LockLost, not LockFailed)."""
        c = self.report._c if self.report is not None else None
        if (c is not None and c.outcome == ACQUIRED and report._c.outcome == FAILED
                and report._c.failure == ECONNLOST):
            if self._lost is None:  # else the watch heard it during the release
                self._lose(_lease.session_ended_error(self), stop_body=False)
            self._raise_lost()
        return self._ended(report)

    def _ended(self, report: Report) -> Report:
        """Raises for an outcome that is an error; else returns the report."""
        m = self._machine
        if self._refusal is not None:
            raise LockFailed(self._refusal, report, self.name, self._refusal)
        if m.refused is not None:
            raise CallError(B.ADVLOCK_EMISUSE, "A statement for lock '%s' was not sent: the"
                            " connection is busy with another operation (one operation at a"
                            " time per connection): %s" % (escape_name(self.name), m.refused))
        if report._c.outcome not in _QUIET:
            raise_for(report, self.name)
        return report

    def _release_failed_during(self, body_error: BaseException, failure: Error) -> None:
        """A release in __exit__ failed while the body's exception
        propagates: the failure and the lock's state go on that exception
        as a note (PEP 678), which stays the one raised."""
        body_error.add_note("advlock: releasing lock '%s' failed during this exception: %s: %s"
                            " (lock state: %s)" % (escape_name(self.name),
                                                   type(failure).__name__, failure,
                                                   self.state.value))


class Lock(_LockBase["BlockingClient", ThreadWatch]):
    """A lock on a blocking connection. acquire() and release(), or
    `with lock:`. See advlock.lock()."""

    __slots__ = ()

    def acquire(self) -> Report:
        """Takes the lock as the options say, within self.timeout seconds
        (None: no limit). Returns the Report (outcome ACQUIRED). Raises
        LockTimeout (TIMED_OUT, the reference's message), LockFailed (NULL
        answer, server error, lost connection), CallError (an operation is
        under way, or the connection is busy with another), KeyboardInterrupt
        (after the machine cancelled the acquire)."""
        m = self._start_acquiring()
        self.report = drive(m, self._client, self.name,
                            self._setup if self._plan is not None else None)
        self._ended(self.report)
        self._watch_session()
        held = self._heartbeat_token()
        if held is not None:
            plan, token = held
            renewal, sent = _lease.renewal(plan, token, m.sent_ms), now_ms()
            answer = self._client.run(*renewal) if renewal is not None else None
            lease = self._hold_granted(plan, token, m.sent_ms if renewal is None else sent,
                                       answer)
            self._watch = ThreadWatch(lease, self._client.heartbeat_client(), self._expire)
        return self.report

    def _setup(self) -> Refusal:
        plan = self._plan
        if plan is None:  # no lease: nothing to set up
            return None
        result, answer = _lease.remembered(self._client.state, plan), None
        if result is None:
            result, answer = _lease.setup_blocking(Lease(plan), self._client)
        return self._refuse(plan, result, answer)

    def _stop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()

    def check(self) -> None:
        """Raises LockLost once the held lock's lease has expired (its
        deadline is checked here too, whatever the timer thread is doing);
        else returns. Call it between units of work of at most lease_stop
        seconds: docs/python.md "Leases"."""
        self._check()

    def release(self) -> Report:
        """Releases what acquire() took (by its key, no second hash), or one
        hold of the name if nothing was acquired through this object.
        Returns the Report: RELEASED, NOT_HELD (a value, not an error) or
        ENDS_WITH_TRANSACTION. Raises LockFailed on a server error or a lost
        connection; LockLost when the lease expired (nothing is sent: the
        connection is closed, and the server frees the lock within the
        lease)."""
        self._stop_watch()
        if self._overdue():
            self._raise_lost()
        self._unwatch_session()
        self._end_lease()
        m = self._start_releasing()
        self.release_report = drive(m, self._client, self.name)
        return self._released(self.release_report)

    def verify(self) -> Report:
        """Asks the server whether this connection's server session still
        holds the lock (advlock_start_verify_key; changes no lock). Behind
        a transaction-pooling proxy a pooled server session may be closed
        while the connection stays up, and its locks go with it. Returns
        the Report: HELD, or NOT_HELD ("Lock '<name>' is no longer held by
        this session."). Raises ServerSessionError behind a proxy when the
        statement reached a server session this connection did not claim
        (whether the lock is held cannot be told), LockFailed otherwise."""
        return self._ended(drive(self._start_verifying(), self._client, self.name))

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        """Releases. When the body raised, its exception is the one that
        propagates: a release failure is attached to it as a note. When the
        lease expired, raises LockLost (from the body's exception, if any)."""
        self._stop_watch()
        if self._overdue():
            self._raise_lost(exc)
        if exc is None:
            self.release()
            return False
        try:
            self.release()
        except LockLost:
            self._raise_lost(exc)
        except Error as failure:
            self._release_failed_during(exc, failure)
        return False


class AsyncLock(_LockBase["AsyncClient", "AsyncWatch"]):
    """A lock on an asyncio connection. await acquire() and release(), or
    `async with lock:`. See advlock.lock()."""

    __slots__ = ("_body", "_cancelling", "_cancelled_body")

    _body: Optional[asyncio.Task[Any]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._body = None              # the task running `async with`'s body
        self._cancelling = 0           # its cancelling() count on entry
        self._cancelled_body = False   # the lease's expiry cancelled it

    async def acquire(self) -> Report:
        """Takes the lock as the options say, within self.timeout seconds
        (None: no limit). Returns the Report (outcome ACQUIRED). Raises
        LockTimeout, LockFailed, CallError as Lock.acquire does, and
        asyncio.CancelledError when the task is cancelled (the machine has
        then cancelled the acquire: no lock is left held)."""
        m = self._start_acquiring()
        self.report = await drive_async(m, self._client, self.name, self.options.wait == POLL,
                                        self._setup if self._plan is not None else None)
        self._ended(self.report)
        self._watch_session()
        held = self._heartbeat_token()
        if held is not None:
            plan, token = held
            renewal, sent = _lease.renewal(plan, token, m.sent_ms), now_ms()
            answer = await self._client.start(*renewal) if renewal is not None else None
            lease = self._hold_granted(plan, token, m.sent_ms if renewal is None else sent,
                                       answer)
            self._watch = self._watch_lease(lease)
        return self.report

    def _watch_lease(self, lease: Lease) -> AsyncWatch:
        """What drives the held lock's lease while the body runs: a task of
        its own (its stop() is awaited before the release)."""
        return TaskWatch(lease, self._client.heartbeat_client(), self._expire_async,
                         lambda: self._body)

    async def _setup(self) -> Refusal:
        plan = self._plan
        if plan is None:  # no lease: nothing to set up
            return None
        result, answer = _lease.remembered(self._client.state, plan), None
        if result is None:
            result, answer = await _lease.setup_async(Lease(plan), self._client)
        return self._refuse(plan, result, answer)

    def _expire_async(self, stop_at_ms: int) -> None:
        """The lease expired while held: as _expire, and the body is
        cancelled (as asyncio.timeout() cancels it)."""
        self._expire(stop_at_ms)
        self._cancel_body()

    def _cancel_body(self) -> None:
        """The lock is lost while `async with` runs its body: the body is
        cancelled once, and __aexit__ turns that CancelledError into the
        LockLost."""
        body = self._body
        if body is not None and not body.done() and not self._cancelled_body:
            self._cancelled_body = True
            body.cancel()

    async def _stop_watch(self) -> Optional[asyncio.CancelledError]:
        """Ends the lease's task, even if this task is cancelled meanwhile
        (the release that follows must not meet a heartbeat in flight);
        returns that CancelledError, for the caller to raise after it."""
        watch, self._watch = self._watch, None
        cancelled: Optional[asyncio.CancelledError] = None
        if watch is not None:
            stopping = asyncio.ensure_future(watch.stop())
            while not stopping.done():
                try:
                    await asyncio.shield(stopping)
                except asyncio.CancelledError as exc:
                    cancelled = exc
        return cancelled

    def check(self) -> None:
        """As Lock.check()."""
        self._check()

    async def release(self) -> Report:
        """As Lock.release(); runs to its end even if the task is cancelled
        meanwhile (the CancelledError is raised afterwards)."""
        cancelled = await self._stop_watch()
        if self._overdue():
            self._raise_lost()
        self._unwatch_session()
        self._end_lease()
        m = self._start_releasing()
        self.release_report = await drive_async(m, self._client, self.name,
                                                self.options.wait == POLL)
        if cancelled is not None:
            raise cancelled
        return self._released(self.release_report)

    async def verify(self) -> Report:
        """As Lock.verify()."""
        m = self._start_verifying()
        return self._ended(await drive_async(m, self._client, self.name))

    async def __aenter__(self) -> AsyncLock:
        await self.acquire()
        body = self._body = asyncio.current_task()
        self._cancelling = body.cancelling() if body is not None else 0
        self._cancelled_body = False
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> Literal[False]:
        """As Lock.__exit__ (a cancellation of the task during the release
        still propagates, after it). When the lease expired, the body was
        cancelled: its CancelledError becomes LockLost, as asyncio.timeout()
        makes it TimeoutError; a cancellation from elsewhere meanwhile still
        propagates as CancelledError."""
        body, self._body = self._body, None
        cancelled = await self._stop_watch()
        if self._overdue():
            cancelling = cancelled is not None or exc_type is asyncio.CancelledError
            if self._cancelled_body:  # the lease's cancel: is there another?
                self._cancelled_body = False
                cancelling = cancelling and body is not None \
                    and body.uncancel() > self._cancelling
            if cancelling:  # cancelled from elsewhere: that goes on
                self._drop_lost()
                if cancelled is not None:
                    raise cancelled
                return False
            self._raise_lost(exc)
        if cancelled is not None:
            await self.release()  # to its end, then the cancellation goes on
            raise cancelled
        if exc is None:
            await self.release()
            return False
        try:
            await self.release()
        except LockLost:
            self._raise_lost(exc)
        except Error as failure:
            self._release_failed_during(exc, failure)
        return False
