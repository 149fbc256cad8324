"""The lease of a held lock: the core's sans-I/O lease engine (advlock_lease,
include/advlock.h "Leases") driven while a lock's body runs, blocking (the
process's timer thread and the connection's worker, _blocking) or on
asyncio (a task). The engine decides when a heartbeat
is due and when the lease has expired; this module only sends the
statements it asks for, tells it the time, and acts on EXPIRED: it marks
the lock lost and stops the body (asyncio: cancels it; blocking: sets
`lost`, and check() raises); the lock object closes the connection once
the body has stopped (a late answer must not renew). docs/python.md
"Leases" says why.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Set, Tuple

from . import _binding as B
from ._asyncio_task import awaited_future
from ._blocking import TIMERS, worker_for
from .errors import CallError, LockLost
from ._machine import (Detail, Failure, LeaseExpiry, Outcome, Report, escape_name,
                       format_seconds, now_ms, params)
from ._session import Busy, ConnSession

if TYPE_CHECKING:
    from ._loop import _LockBase
    from ._types import Answer, Args, AsyncClient, BlockingClient, Name

_lib = B.core
# How soon a heartbeat that could not be sent (the connection busy with the
# body's statement, or its transaction failed) is tried again.
RETRY_S = 0.05
DEFAULT = object()  # lease= not given: ADVLOCK_LEASE_DEFAULT_MS
DEFAULT_STOP_S = 1.0

_REASONS: Dict[int, str] = {
    LeaseExpiry.NO_ANSWER: "no heartbeat was answered by the lease's deadline",
    LeaseExpiry.CONNECTION: "a heartbeat found the connection lost",
    LeaseExpiry.SETTINGS: "a heartbeat found the server session's lease settings changed"
                      " (a rolled-back transaction, RESET, or another server session)",
    LeaseExpiry.SERVER_ERROR: "a heartbeat failed on the server",
}


def _seconds_ms(value: Any, what: str) -> int:
    """lease= or lease_stop= (seconds) in whole milliseconds. Raises
    CallError, naming the value given, for one that is not a number, not
    finite (inf, nan), negative, or longer than the longest lease (which a
    lease_stop, shorter than its lease, can never be either)."""
    try:
        ms = value * 1000
        negative = ms < 0
    except TypeError:
        raise CallError(B.ADVLOCK_EINVAL, "%s is seconds (a number) or None, not %s"
                        % (what, type(value).__name__)) from None
    if ms != ms or ms in (math.inf, -math.inf):
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r is not a finite number of seconds"
                        % (what, value))
    if negative:
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r must be >= 0 seconds" % (what, value))
    whole: int = round(ms)
    if whole > B.LEASE_MAX_MS:
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r is too long: at most %s s (the longest lease,"
                        " 9 h: Linux takes tcp_keepalives_idle up to 32767 s)"
                        % (what, value, format_seconds(B.LEASE_MAX_MS)))
    return whole


def plan_for(lease: object, lease_stop: Optional[float]) -> Optional[B.LeasePlan]:
    """The advlock_lease_plan for lease= and lease_stop= (seconds), or None
    for no lease (None or 0). Raises CallError for a value _seconds_ms
    refuses, or a lease the core refuses (too short for lease_stop: at
    least lease_stop + 6 s)."""
    if lease is DEFAULT:
        lease_ms = B.LEASE_DEFAULT_MS
    elif lease is None:
        return None
    else:
        lease_ms = _seconds_ms(lease, "lease")
        if lease_ms == 0:
            return None
    stop_ms = _seconds_ms(DEFAULT_STOP_S if lease_stop is None else lease_stop, "lease_stop")
    plan = _plans.get((lease_ms, stop_ms))
    if plan is not None:
        return plan
    plan = B.LeasePlan()
    if _lib.advlock_lease_plan_init(plan, lease_ms, stop_ms):
        raise CallError(B.ADVLOCK_EINVAL, "lease=%s is too short for lease_stop=%s: the lease"
                        " must be at least lease_stop + 6 s (3 s for the server's timers, 1 s"
                        " margin, 2 s to notice a loss)"
                        % (format_seconds(lease_ms), format_seconds(stop_ms)))
    if len(_plans) < 64:
        _plans[(lease_ms, stop_ms)] = plan  # read only: shared by the locks
    return plan


_plans: Dict[Tuple[int, int], B.LeasePlan] = {}


class Lease:
    """One advlock_lease; every call under .guard (the watcher and the body's
    check() may both drive it), which expired() and reason() take themselves:
    ctypes lets go of the GIL in the call."""

    __slots__ = ("_l", "plan", "guard")

    def __init__(self, plan: B.LeasePlan) -> None:
        self._l = B.LeaseStorage()
        self.plan = plan
        self.guard = threading.Lock()
        _lib.advlock_lease_init(self._l, plan)

    def next(self) -> B.LeaseAction:
        action: B.LeaseAction = _lib.advlock_lease_next(self._l)
        return action

    def start_setup(self, proxied: Optional[bool]) -> None:
        _lib.advlock_lease_start_setup(self._l, 1 if proxied else 0, now_ms())

    def setup_result(self) -> int:
        result: int = _lib.advlock_lease_setup_result(self._l)
        return result

    def hold(self, anchor_ms: int, token: int) -> None:
        _lib.advlock_lease_hold(self._l, anchor_ms, token, now_ms())

    def on_sent(self) -> None:
        _lib.advlock_lease_on_sent(self._l, now_ms())

    def on_answer(self, answer: Answer) -> None:
        """Feeds a client's answer (an int, or a tuple for an error)."""
        r = answer if isinstance(answer, int) else answer[0]  # type: ignore[index]
        _lib.advlock_lease_on_result(self._l, r, now_ms())

    def on_timer(self) -> None:
        _lib.advlock_lease_on_timer(self._l, now_ms())

    def stop(self) -> None:
        _lib.advlock_lease_stop(self._l)

    def expired(self) -> bool:
        with self.guard:
            return bool(self.next().kind == B.LEASE_EXPIRED)

    def reason(self) -> int:
        with self.guard:
            reason: int = _lib.advlock_lease_expiry_reason(self._l)
            return reason


def lost_error(lock: _LockBase[Any, Any], lease: Lease, stop_at_ms: int) -> LockLost:
    """The LockLost for a lock whose lease expired."""
    reason = lease.reason()
    if lock._client.state.proxied:  # the lease set nothing on the server
        frees = ("behind a proxy the server frees the lock when the proxy drops this"
                 " connection: its own tcp settings bound that")
    elif reason == LeaseExpiry.SETTINGS:
        frees = "the server may free it early or late"
    else:
        frees = ("the server frees it within %s s of the last message it received from this"
                 " client" % format_seconds(lease.plan.lease_ms))
    err = LockLost("Lock '%s' can no longer be proven held: %s; %s (the connection is closed)."
                   % (escape_name(lock.name), _REASONS.get(reason, "expired"), frees),
                   lock.report, lock.name)
    err.reason = LeaseExpiry(reason)
    err.deadline = stop_at_ms / 1000 if stop_at_ms else None
    err.lease = lease.plan.lease_ms / 1000
    return err


def ended_error(lock: Any, why: str) -> LockLost:
    """The LockLost for a held lock whose connection closed under it: its
    report is the drivers' loss report (a copy of the acquire's, FAILED with
    ECONNLOST and DETAIL_LOST, as the C drivers give), its sentence the
    core's for it, why (the driver's words) after it; reason "connection
    lost", ended (the server session is gone, on a direct connection with
    its locks)."""
    c = B.Report.from_buffer_copy(lock.report._c)
    c.outcome, c.failure, c.detail = Outcome.FAILED, Failure.ECONNLOST, Detail.LOST
    report = Report(c, lock.name, why)
    err = LockLost(report.describe(), report, lock.name, why)
    err.reason = LeaseExpiry.CONNECTION
    err.ended = True
    err.lease = lock._plan.lease_ms / 1000 if lock._plan is not None else None
    return err


def session_ended_error(lock: _LockBase[Any, Any]) -> LockLost:
    """The LockLost for a single lock whose session watch (_watch) heard the
    connection close, or whose release found it lost."""
    return ended_error(lock, "the server ended the session (pg_terminate_backend, a restart"
                       " or a crash), or the connection was closed")


# ---- the setup, before the first acquire on a connection -----------------------


def setup_message(result: int, name: Name, plan: B.LeasePlan) -> Optional[str]:
    """None when the lock may be held under this setup; else why not."""
    if result in (B.LEASE_APPLIED, B.LEASE_UNIX_SOCKET, B.LEASE_PROXIED):
        return None
    what = ("the server did not apply the lease's settings (tcp_user_timeout=%d ms): it would"
            " not free the lock within the lease if this client were cut off"
            % plan.user_timeout_ms if result == B.LEASE_NOT_APPLIED
            else "setting the lease up failed")
    return ("Refused to lock '%s' with a lease of %s s: %s; pass lease=None to hold it"
            " without one." % (escape_name(name), format_seconds(plan.lease_ms), what))


def remembered(state: ConnSession, plan: B.LeasePlan) -> Optional[int]:
    """The connection's setup result for this plan's settings, or None."""
    done = state.lease_setup
    if done is not None and done[0] == plan.user_timeout_ms:
        return done[1]
    return None


def setup_blocking(lease: Lease, client: BlockingClient) -> Tuple[int, Optional[Answer]]:
    """Runs the lease's setup on a blocking client; returns its result,
    remembered on the connection, and the statement's answer (None if none
    was sent)."""
    lease.start_setup(client.state.proxied)
    a = lease.next()
    answer: Optional[Answer] = None
    if a.kind == B.LEASE_QUERY:
        lease.on_sent()
        answer = client.run(a.sql, (a.param,))
    return _remember(lease, client, answer)


async def setup_async(lease: Lease, client: AsyncClient) -> Tuple[int, Optional[Answer]]:
    """As setup_blocking, on asyncio."""
    lease.start_setup(client.state.proxied)
    a = lease.next()
    answer: Optional[Answer] = None
    if a.kind == B.LEASE_QUERY:
        lease.on_sent()
        answer = await client.start(a.sql, (a.param,))
    return _remember(lease, client, answer)


def _remember(lease: Lease, client: Any, answer: Optional[Answer]) -> Tuple[int, Optional[Answer]]:
    if answer is not None and answer.__class__ is not Busy:
        lease.on_answer(answer)
    result = lease.setup_result()
    if answer is None or answer.__class__ is int:
        client.state.lease_setup = (lease.plan.user_timeout_ms, result)
    return result, answer


def heartbeat_token(setup: Optional[int], session: B.Session) -> Optional[int]:
    """For a lock just granted on the server session that session (the
    machine's _binding.Session) describes: the token its heartbeats carry
    (0 direct), or None when none are to run: on a Unix socket (no
    partition is silent there; a heartbeat thread or task per lock would
    cost more than the lock itself), and behind a proxy on a connection
    that claimed no server session (a transaction-scoped lock's: a guarded
    heartbeat proves only a claim)."""
    if setup == B.LEASE_UNIX_SOCKET:
        return None
    if setup == B.LEASE_PROXIED:
        return int(session.token) if session.claimed else None
    return 0


def renewal(plan: B.LeasePlan, token: int, anchor_ms: int) -> Optional[Tuple[int, Args]]:
    """The heartbeat statement (sql, args) that must confirm a grant whose
    statement went out a heartbeat interval ago or more (a server-side
    wait: the server may have stopped hearing this client meanwhile) before
    the body runs; None when the grant's send time anchors the lease."""
    if now_ms() < anchor_ms + plan.heartbeat_ms:
        return None
    if token:
        return B.SQL_HEARTBEAT_GUARDED, (plan.user_timeout_ms, token)
    return B.SQL_HEARTBEAT, (plan.user_timeout_ms,)


def unconfirmed_error(lock: _LockBase[Any, Any], answer: Answer) -> LockLost:
    """The LockLost for a grant whose confirming heartbeat (renewal())
    answered anything but TRUE: the lock cannot be proven held."""
    words = answer[2] if isinstance(answer, tuple) and answer[2] else "the server session changed"
    err = LockLost("Lock '%s' can no longer be proven held: the heartbeat after a long wait for"
                   " the grant failed (%s); stop the work now (the connection is closed)."
                   % (escape_name(lock.name), words), lock.report, lock.name)
    err.reason = (LeaseExpiry.CONNECTION if isinstance(answer, tuple)
                  and answer[0] == B.RESULT_CONNECTION_LOST else LeaseExpiry.SETTINGS)
    err.deadline = None
    err.lease = lock._plan.lease_ms / 1000 if lock._plan is not None else None
    return err


def hold(plan: B.LeasePlan, token: int, anchor_ms: int) -> Lease:
    """A held Lease from anchor_ms, the send time of a statement the server
    answered on the lock's session since the grant (or of the grant's)."""
    lease = Lease(plan)
    with lease.guard:
        lease.hold(anchor_ms, token)
    return lease


def shut_socket(fd: int) -> None:
    """Ends a connection's socket under its library's feet: the statement in
    flight and every later one fail at once, and no late answer is read.
    shutdown() acts on the socket, not on a descriptor (a dup is enough),
    and unlike close() cannot pull the descriptor from under the library."""
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


# ---- blocking: the process's timer thread and the connection's worker ---------------


class ThreadWatch:
    """Drives a held lease while the body runs, without a thread of its own
    (_blocking): its deadline on the process's timer thread, which sends
    each heartbeat the engine asks for to the connection's worker (psycopg's
    connection lock serialises it with the body's statements) and keeps the
    deadline even while one waits. On EXPIRED: on_expired(), on the timer
    thread."""

    __slots__ = ("lease", "client", "on_expired", "worker", "guard", "stopping", "beating",
                 "__weakref__")

    def __init__(self, lease: Lease, client: BlockingClient,
                 on_expired: Callable[[int], None]) -> None:
        self.lease, self.client, self.on_expired = lease, client, on_expired
        self.worker = worker_for(client.state)
        self.guard = threading.Lock()  # a tick against stop(): none runs after it
        self.stopping = False
        self.beating = False
        TIMERS.add(self)

    def tick(self) -> Optional[int]:
        """The timer thread's call: the lease driven to now."""
        lease = self.lease
        with self.guard:
            if self.stopping:
                return None
            with lease.guard:
                lease.on_timer()
                a = lease.next()
                if a.kind == B.LEASE_QUERY and not self.beating:
                    self.beating = True
                    sql, args = a.sql, params(a)
                    self.worker.submit(lambda: self._beat(sql, args))
            if a.kind == B.LEASE_EXPIRED:
                self.stopping = True
                self.on_expired(a.stop_at_ms)
                return None
            wake: int = a.wake_at_ms
            return wake

    def _beat(self, sql: int, args: Args) -> None:
        """A heartbeat, on the connection's worker."""
        lease, client = self.lease, self.client
        with lease.guard:
            lease.on_sent()  # before the wait for the connection: an earlier anchor is safe
        answer: Optional[Answer] = None
        while not self.stopping and not lease.expired():
            if client.heartbeat_blocked(None):
                time.sleep(RETRY_S)
                continue
            answer = client.run(sql, args)
            if answer.__class__ is not Busy:
                break
            time.sleep(RETRY_S)
        with lease.guard:
            self.beating = False
            if answer is not None and answer.__class__ is not Busy:
                lease.on_answer(answer)
        TIMERS.poke()

    def stop(self) -> None:
        """Ends the watch (and waits for a heartbeat in flight: one round
        trip, or the deadline in a partition)."""
        with self.guard:
            self.stopping = True
        TIMERS.remove(self)
        lease = self.lease
        while self.beating:  # the release must not share the lock's cursor with it
            with lease.guard:
                lease.on_timer()
            if lease.expired():
                return  # closing the connection ends it
            time.sleep(0.001)


# ---- asyncio: a task ---------------------------------------------------------------


class TaskWatch:
    """Drives a held lease in a task of its own while the body runs. A
    heartbeat goes out when the client's hold_body() allows it (asyncpg
    refuses a second operation, so the body's task is held back from the
    send to the answer; psycopg queues it): one that cannot go out is tried
    again, and the deadline still applies. On EXPIRED: on_expired()."""

    def __init__(self, lease: Lease, client: AsyncClient, on_expired: Callable[[int], None],
                 body: Callable[[], Optional[asyncio.Task[Any]]]) -> None:
        self.lease, self.client, self.on_expired = lease, client, on_expired
        self.body = body  # the body's task (or None), for hold_body()
        self.stopping = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        lease = self.lease
        beat: Optional[asyncio.Future[Optional[Answer]]] = None
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            while True:
                lease.on_timer()
                a = lease.next()
                if a.kind == B.LEASE_EXPIRED:
                    if not self.stopping.is_set():
                        self.on_expired(a.stop_at_ms)
                    return
                if a.kind == B.LEASE_QUERY and beat is None:
                    if self.stopping.is_set():
                        return
                    lease.on_sent()  # before any retry: an earlier anchor is safe
                    beat = asyncio.ensure_future(self._beat(a.sql, params(a)))
                if beat is None and self.stopping.is_set():
                    return
                waits: Set[asyncio.Future[Any]] = {stop} if beat is None else {beat}
                delay = max(0, a.wake_at_ms - now_ms()) / 1000
                await asyncio.wait(waits, timeout=delay)
                if beat is not None and beat.done():
                    answer, beat = beat.result(), None
                    if answer is not None:
                        lease.on_answer(answer)
        finally:
            stop.cancel()
            if beat is not None:
                beat.cancel()

    async def _beat(self, sql: int, args: Args) -> Optional[Answer]:
        client, lease = self.client, self.lease
        while not lease.expired() and not self.stopping.is_set():
            body = self.body()
            go_on = client.hold_body(body)
            if go_on is not None:
                try:
                    answer = await client.start(sql, args)
                finally:
                    go_on()  # the body resumes after the answer, not before
                if answer.__class__ is not Busy:
                    return answer
            await _after_next_step(body)
        return None

    async def stop(self) -> None:
        """Ends the task (after a heartbeat in flight: one round trip, or
        the deadline in a partition)."""
        self.stopping.set()
        await asyncio.shield(self.task)


def _wake(waiter: asyncio.Future[None], _done: object = None) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _after_next_step(body: Optional[asyncio.Task[Any]]) -> None:
    """Waits until the body's task has taken its next step: when what it
    awaits now ends, its own wake-up runs first (registered first), so a
    heartbeat tried then meets the body's next wait, not a statement it is
    about to start. At most RETRY_S; RETRY_S when there is no body."""
    waiting_on = awaited_future(body)
    if body is not None and (waiting_on is None or waiting_on.done()):
        await asyncio.sleep(0)  # its step is scheduled already: after it
        return
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()
    timer = loop.call_later(RETRY_S, _wake, woken)
    if waiting_on is not None:
        waiting_on.add_done_callback(functools.partial(_wake, woken))
    try:
        await woken
    finally:
        timer.cancel()
