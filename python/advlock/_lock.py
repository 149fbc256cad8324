"""Lock objects: one member of their connection's engine each (_engine),
blocking (Lock) or on asyncio (AsyncLock). The engine decides everything
about the connection: the session check, the lease, the exclusion between
locks of one connection, what is lost and in which words; a lock starts
its operations, waits for their end and raises what the report says."""

from __future__ import annotations

import asyncio
import threading
from ctypes import byref
from ctypes import addressof
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Optional, Type

from . import _binding as B
from . import _engine as E
from ._lease import DEFAULT as LEASE_DEFAULT, lease_of
from ._machine import (INT64_MAX, Detail, Failure, LeaseExpiry, LockState, Mode, Options,
                       Outcome, Report, Scope, Sql, _encode, describe_lease_lost, escape_name,
                       raise_for, timeout_ms)
from .errors import CallError, Error, LockLost

if TYPE_CHECKING:
    from types import TracebackType

    from ._types import Name

_lib = B.core
_member_report, _member_words = _lib.advlock_member_report, _lib.advlock_member_words
ACQUIRED = int(Outcome.ACQUIRED)
FAILED = int(Outcome.FAILED)
ECONNLOST = int(Failure.ECONNLOST)
_QUIET = frozenset(int(o) for o in (Outcome.ACQUIRED, Outcome.RELEASED, Outcome.NOT_HELD,
                                    Outcome.ENDS_WITH_TRANSACTION, Outcome.HELD))
_in_doubt = _lib.advlock_detail_in_doubt
_LIVE = int(LeaseExpiry.LIVE)
class _LockBase:
    __slots__ = ("_engine", "_conn", "name", "timeout", "options", "_m", "_raw", "_opts",
                 "_lease", "_t", "_ms", "report", "release_report", "_lost", "_lost_event",
                 "_waiter", "_body", "_cancelled_body", "_cancelling", "_holding", "_session_scoped",
                 "_addr", "warning")

    _engine: E.Engine
    _lost: Optional[LockLost]

    def __init__(self, engine: Optional[E.Engine], conn: object, name: Name,
                 timeout: Optional[float] = None, options: Optional[Options] = None,
                 lease: object = LEASE_DEFAULT, lease_stop: Optional[float] = None,
                 **option_kwargs: Any) -> None:
        self._conn = conn
        self.name = name
        self.timeout = timeout
        self.options = Options.coerce(options, **option_kwargs)
        self._raw = _encode(name)
        self._engine = engine  # type: ignore[assignment]  # None: tests
        # A transaction's lock ends with its block: no lease, no watch.
        self._session_scoped = self.options.scope != Scope.TRANSACTION
        self._opts = byref(self.options.to_c())
        self._lease = lease_of(lease, lease_stop)
        self._m = B.MemberStorage()
        _lib.advlock_member_init(self._m)
        self._addr = addressof(self._m)  # the engine's key for this member
        self._t: Optional[float] = None
        self._ms = 0
        self.report: Optional[Report] = None          # the last acquire's
        self.release_report: Optional[Report] = None  # the last release's
        self._lost = None
        self._lost_event: Optional[threading.Event] = None
        self._waiter: Optional[asyncio.Future[None]] = None
        self._body: Optional[asyncio.Task[Any]] = None
        self._cancelled_body = False
        self._cancelling = 0
        self._holding = False
        # The last warning about this lock's statements: (sqlstate, words).
        self.warning: Optional[tuple[str, str]] = None

    # ---- what the engine tells ------------------------------------------------

    def _on_warning(self, sqlstate: str, words: str) -> None:
        self.warning = (sqlstate, words)

    def _on_done(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _on_lost(self) -> None:
        """The held lock is lost (the engine's words): the loss's report,
        FAILED with ECONNLOST and DETAIL_LOST as every driver gives."""
        m = self._m
        r = self.report
        c = B.Report.from_buffer_copy(r._c if r is not None else _member_report(m).contents)
        c.outcome, c.failure, c.detail = FAILED, ECONNLOST, Detail.LOST
        c.sqlstate = _lib.advlock_member_sqlstate(m)
        raw_words = _member_words(m)
        words = raw_words.decode("utf-8", "replace")
        report = Report(c, self.name, words)
        expiry = _lib.advlock_member_lease_expiry(m)
        text = report.describe() if expiry == _LIVE else describe_lease_lost(self.name, raw_words)
        err = LockLost(text, report, self.name, words)
        err.reason = LeaseExpiry.CONNECTION if expiry == _LIVE else LeaseExpiry(expiry)
        err.ended = expiry == _LIVE
        err.lease = self._lease[0] / 1000 if self._lease[0] else None
        self._lost = err
        self._unhold()
        self.lost.set()
        self._cancel_body()
        self._on_done()

    def _cancel_body(self) -> None:
        body = self._body
        if body is not None and not body.done() and not self._cancelled_body:
            self._cancelled_body = True
            body.cancel()
            self._engine.let_go_of_body(body)

    # ---- the steps both kinds share ------------------------------------------------

    def _member_report(self) -> Report:
        c, words = self._engine.report_of(self)
        return Report(c, self.name, words.decode("utf-8", "replace") if words else None)

    def _start_acquiring(self) -> E.Engine:
        e = self._engine
        e.client.conn = self._conn
        rr = self.release_report
        if rr is not None and rr._c.outcome == FAILED and e.held_by(self):
            # The failed release left the lock in doubt, still this
            # member's: it is let go (the server session keeps what it
            # holds) and the acquire starts anew, as in the C adapter.
            e.let_go(self)
            self._unhold()
        self.report = self.release_report = None
        self.warning = None
        self._lost = None
        if self._lost_event is not None:
            self._lost_event.clear()
        t = self.timeout
        if t is not self._t or not self._ms:
            self._ms, self._t = INT64_MAX if t is None else timeout_ms(t), t
        if self.options.lock_delay and not e.client.commits_alone():
            raise CallError(B.ADVLOCK_EINVAL,
                            "advlock.lock(%r): lock_delay=True needs a connection whose statements"
                            " commit on their own (psycopg: autocommit=True): the mark would wait"
                            " uncommitted in psycopg's transaction, and a session ended before its"
                            " commit would take it back (docs/operators.md \"Lock-delay\")"
                            % escape_name(self.name))
        try:
            e.start_acquire(self, self._raw, self._ms, self._opts,
                            self._lease if self._session_scoped else None)
        except CallError as exc:
            if exc.code == B.ADVLOCK_EINVAL and self.options.lock_delay:
                raise self._lock_delay_refused(exc) from None
            raise
        return e

    def _lock_delay_refused(self, exc: CallError) -> CallError:
        """The engine's refusal of a lock-delay acquire (its words: it
        gives no reason), with the reason the options show."""
        o = self.options
        why = ("mode=advlock.SHARED: a mark is an exclusive holder's" if o.mode != Mode.EXCLUSIVE
               else "scope=advlock.TRANSACTION: the mark would commit or roll back with the"
               " transaction" if not self._session_scoped
               else "no lease (lease=None or 0): the mark records the lease's stop bound"
               if not self._lease[0] else None)
        return CallError(exc.code, "advlock.lock(%r): the engine refused lock_delay=True: %s%s"
                         " (docs/operators.md \"Lock-delay\")"
                         % (escape_name(self.name), exc, "" if why is None else ", with " + why))

    def _acquired(self) -> Report:
        report = self.report = self._member_report()
        if report._c.outcome == ACQUIRED:
            self._hold()
        else:
            self._forget()
        return self._ended(report)

    def _hold(self) -> None:
        if not self._holding and self._session_scoped:
            self._holding = True
            self._engine.hold()

    def _unhold(self) -> None:
        if self._holding:
            self._holding = False
            self._engine.unhold()
        self._forget()

    def _forget(self) -> None:
        owners = getattr(self._engine, "owners", None)
        if owners is not None:
            owners.pop(self._addr, None)

    def _held(self) -> bool:
        """The engine's word on whether this lock is held (a transaction's
        lock went with its block)."""
        e = self._engine
        if not self._session_scoped:
            e.tell_transaction()
        return e.held_by(self)

    def _start_releasing(self) -> Optional[E.Engine]:
        """Starts the release of what the acquire took; None (a report
        NOT_HELD is made) when nothing is held through this object."""
        e = self._engine
        e.client.conn = self._conn
        if not self._held():
            return None
        e.start_release(self)
        return e

    def _released(self) -> Report:
        """A release's end: the report, or its error raised. A release that
        found the connection lost was too late: the lock was lost with the
        connection (LockLost, not LockFailed)."""
        e = self._engine
        report = self.release_report = self._member_report()
        if report._c.outcome == FAILED and report._c.failure == ECONNLOST and self._holding:
            with e.guard:
                e.closed(E.ENDED)
        if self._lost is not None:
            self._raise_lost()
        if not e.held_by(self):
            self._unhold()
        return self._ended(report)

    def _not_held(self, sql: Sql) -> Report:
        """The report of a release or verify of a lock this object does not
        hold: NOT_HELD, with nothing sent."""
        c = B.Report()
        c.outcome, c.sql, c.key = Outcome.NOT_HELD, sql, self.key
        return Report(c, self.name)

    def _start_verifying(self) -> Optional[E.Engine]:
        """Starts the verify of the lock held; None (a report NOT_HELD is
        made) when nothing is held through this object."""
        e = self._engine
        e.client.conn = self._conn
        if not self._held():
            return None
        e.start_verify(self)
        return e

    def _ended(self, report: Report) -> Report:
        """Raises for an outcome that is an error; else returns the report.
        A statement the client refused to send (asyncpg runs one operation
        at a time) is the caller's misuse: CallError, in its words."""
        refused = self._engine.refused
        if refused and self._addr in refused:
            raise CallError(B.ADVLOCK_EMISUSE, "A statement for lock '%s' was not sent: the"
                            " connection is busy with another operation (one operation at a"
                            " time per connection): %s" % (escape_name(self.name),
                                                          refused.pop(self._addr)))
        if report._c.outcome not in _QUIET:
            raise_for(report, self.name)
        return report

    def _heard(self) -> Optional[LockLost]:
        """The loss of the held lock, asking the client whether the
        server closed the connection (its watch may not have said yet)."""
        if self._lost is None and self._holding and self._engine.client.ended():
            e = self._engine
            with e.guard:
                e.closed(E.ENDED)
        return self._lost

    def _raise_lost(self, cause: Optional[BaseException] = None) -> NoReturn:
        """The body has stopped: the connection is closed (no late answer
        counts, and the server frees the lock now if it still has it)."""
        lost = self._lost
        assert lost is not None
        self._engine.client.close_now()
        if cause is lost:
            raise lost
        raise lost from cause

    def _release_failed_during(self, body_error: BaseException, failure: Error) -> None:
        body_error.add_note("advlock: releasing lock '%s' failed during this exception: %s: %s"
                            " (lock state: %s)" % (escape_name(self.name),
                                                   type(failure).__name__, failure,
                                                   self.state.value))

    # ---- what users read -----------------------------------------------------------

    @property
    def held(self) -> bool:
        """True between a successful acquire and its release."""
        return self._held() and self._lost is None

    @property
    def lost(self) -> threading.Event:
        """A threading.Event set when the held lock is lost: its connection
        closed under it, or its lease ran out; cleared by the next acquire."""
        event = self._lost_event
        if event is None:
            event = self._lost_event = threading.Event()
        return event

    @property
    def state(self) -> LockState:
        """LockState: HELD between a successful acquire and its release;
        MAY_BE_HELD when the session's holds of the key are in doubt (a
        failed release, a give-back or a fenced try's error, a lease that
        ran out, a loss behind a proxy), NOT_HELD otherwise."""
        r, rr = self.report, self.release_report
        if r is None:
            return LockState.NOT_HELD
        if r._c.outcome != ACQUIRED:
            return LockState.MAY_BE_HELD if _in_doubt(r._c.detail) else LockState.NOT_HELD
        lost = self._lost
        if lost is not None:  # as the core says of the loss's report
            report = lost.report
            return LockState.MAY_BE_HELD if report is not None and \
                _in_doubt(report._c.detail) else LockState.NOT_HELD
        if rr is None:
            return LockState.HELD if self._held() else LockState.NOT_HELD
        if rr._c.outcome != FAILED or (rr._c.failure == ECONNLOST
                                       and self._engine.proxied is False):
            return LockState.NOT_HELD
        return LockState.MAY_BE_HELD

    @property
    def fence(self) -> Optional[int]:
        """The fencing token the held lock's grant issued, or None."""
        r = self.report
        return (int(r._c.fence) or None) if r is not None and self.held else None

    @property
    def key(self) -> int:
        """The lock's bigint key (derived by the core)."""
        if self.report is not None:
            return self.report.key
        from ._machine import derive_key
        return derive_key(self.name)

    def check(self) -> None:
        """Raises LockLost once the held lock is lost; else returns. Call
        it between units of work of at most lease_stop seconds."""
        e = self._engine
        with e.guard:
            e.tick(due_only=False)
        lost = self._heard()
        if lost is not None:
            raise lost

    def __repr__(self) -> str:
        return "<%s %r %s>" % (type(self).__name__, self.name,
                               "held" if self.held else "not held")


class Lock(_LockBase):
    """A lock on a blocking connection. acquire() and release(), or
    `with lock:`. See advlock.lock()."""

    __slots__ = ()

    def acquire(self) -> Report:
        """Takes the lock within self.timeout seconds (None: no limit).
        Returns the Report (ACQUIRED). Raises LockTimeout, LockFailed,
        CallError, LockLost (a grant whose lease could not be confirmed),
        KeyboardInterrupt (after the acquire was cancelled)."""
        e = self._engine
        with e.guard:
            self._start_acquiring()
        E.run_blocking(e, self, interruptible=True)
        report = self._acquired()
        if self._lost is not None:
            self._raise_lost()
        return report

    def release(self) -> Report:
        """Releases what acquire() took. Returns the Report: RELEASED,
        NOT_HELD (a value, not an error). Raises LockFailed on a server
        error or a lost connection; LockLost when the lock was lost."""
        if self._lost is not None:
            self._raise_lost()
        e = self._engine
        with e.guard:
            started = self._start_releasing()
        if started is None:
            self.release_report = self._not_held(Sql.UNLOCK)
            return self.release_report
        E.run_blocking(e, self)
        if self._lost is not None:
            self._raise_lost()
        return self._released()

    def verify(self) -> Report:
        """Asks the server whether this connection's server session still
        holds the lock. Returns the Report: HELD or NOT_HELD."""
        e = self._engine
        with e.guard:
            started = self._start_verifying()
        if started is None:
            return self._not_held(Sql.HELD)
        E.run_blocking(e, self)
        return self._ended(self._member_report())

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        """Releases. A body's exception stays the one raised (a release
        failure goes on it as a note); a lost lock raises LockLost."""
        if self._heard() is not None:
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


class AsyncLock(_LockBase):
    """A lock on an asyncio connection. await acquire() and release(), or
    `async with lock:`. See advlock.lock()."""

    __slots__ = ()

    async def acquire(self) -> Report:
        """As Lock.acquire(); asyncio.CancelledError when the task is
        cancelled (the acquire was cancelled: no lock is left held)."""
        e = self._start_acquiring()
        try:
            await E.run_async(e, self)
        except asyncio.CancelledError:
            if e.held_by(self):  # granted in the turn the cancel came: given back
                e.start_release(self)
                await E.run_async(e, self, shielded=True)
            self._forget()
            raise
        report = self._acquired()
        if self._lost is not None:
            self._raise_lost()
        return report

    async def release(self) -> Report:
        """As Lock.release(); runs to its end even if the task is cancelled
        meanwhile (the CancelledError is raised afterwards)."""
        if self._lost is not None:
            self._raise_lost()
        e = self._start_releasing()
        if e is None:
            self.release_report = self._not_held(Sql.UNLOCK)
            return self.release_report
        cancelled = await E.run_async(e, self, shielded=True)
        if self._lost is not None:
            self._raise_lost(cancelled)
        report = self._released()
        if cancelled is not None:
            raise cancelled
        return report

    async def verify(self) -> Report:
        """As Lock.verify()."""
        e = self._start_verifying()
        if e is None:
            return self._not_held(Sql.HELD)
        await E.run_async(e, self)
        return self._ended(self._member_report())

    async def __aenter__(self) -> AsyncLock:
        await self.acquire()
        body = self._body = asyncio.current_task()
        self._cancelling = body.cancelling() if body is not None else 0
        self._cancelled_body = False
        if body is not None:
            self._engine.bodies[id(self)] = body
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> Literal[False]:
        """As Lock.__exit__. A lock lost while the body ran cancelled the
        body: its CancelledError becomes LockLost, as asyncio.timeout() makes
        it TimeoutError; a cancellation from elsewhere still propagates."""
        body, self._body = self._body, None
        self._engine.bodies.pop(id(self), None)
        if self._heard() is not None:
            cancelling = exc_type is asyncio.CancelledError
            if self._cancelled_body:
                self._cancelled_body = False
                cancelling = cancelling and body is not None \
                    and body.uncancel() > self._cancelling
            if cancelling:
                self._engine.client.close_now()
                return False
            self._raise_lost(exc)
        if exc is None:
            await self.release()
            return False
        try:
            await self.release()
        except LockLost as lost:
            # A cancelled body whose release was cut short (the loop
            # closing with it): the cancellation goes on, as asyncio's
            # structure needs, with the loss as its note; the connection is
            # closed, so the server holds nothing for it.
            if exc_type is not asyncio.CancelledError:
                self._raise_lost(exc)
            self._engine.client.close_now()
            self._release_failed_during(exc, lost)
        except Error as failure:
            self._release_failed_during(exc, failure)
        return False

