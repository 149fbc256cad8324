"""Deterministic lock tests from Python: libadvlock_fake's fake clock, fake
PostgreSQL lock manager and simulator (include/advlock_fake.h), in virtual
time. Nothing here touches a server or a real clock; a seed replays a run.

    from advlock import fake

    sim = fake.Simulation()                    # seed 1, no latency, no faults
    sim.add_script([fake.acquire("migrations"), fake.pause(10_000),
                    fake.release("migrations")])
    ours = sim.add_script([fake.pause(1), fake.acquire("migrations", timeout_ms=2000)])
    sim.run()                                  # raises InvariantViolation
    assert ours[1].report.outcome == advlock.Outcome.TIMED_OUT
    assert ours[1].describe() == "Could not acquire migration lock for 'migrations' within 2s."

The library is loaded when this module is first imported (ADVLOCK_FAKE_LIBRARY,
or beside the core).
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import byref, c_char_p, c_int, c_int64, create_string_buffer, string_at
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _binding as B
from . import _fake_binding as F
from ._machine import Options, Report, _encode
from .errors import Error

if TYPE_CHECKING:
    from ._types import Name

__all__ = ["Simulation", "Database", "Clock", "Prng", "Step", "StepKind", "Done",
           "InvariantViolation", "FakeStatus", "acquire", "release", "pause", "reconnect",
           "begin", "commit", "rollback"]


def _lib() -> ctypes.CDLL:
    return F.lib


def _rc(rc: int) -> int:
    if rc < 0:
        from .errors import CallError
        from ._machine import strerror
        raise CallError(rc, strerror(rc))
    return rc


class InvariantViolation(Error, AssertionError):
    """A simulation stopped at a broken invariant; str() is the simulator's
    line ("seed <seed>: ...")."""


class StepKind(enum.IntEnum):
    """advlock_sim_step_kind."""
    STOP = F.F["ADVLOCK_SIM_STOP"]
    ACQUIRE = F.F["ADVLOCK_SIM_ACQUIRE"]
    RELEASE = F.F["ADVLOCK_SIM_RELEASE"]
    PAUSE = F.F["ADVLOCK_SIM_PAUSE"]
    RECONNECT = F.F["ADVLOCK_SIM_RECONNECT"]
    BEGIN = F.F["ADVLOCK_SIM_BEGIN"]
    COMMIT = F.F["ADVLOCK_SIM_COMMIT"]
    ROLLBACK = F.F["ADVLOCK_SIM_ROLLBACK"]


class Step:
    """One step of a script (advlock_sim_step): kind, lock_name, timeout_ms,
    cancel_after_ms, pause_ms."""

    __slots__ = ("kind", "lock_name", "timeout_ms", "cancel_after_ms", "pause_ms")

    def __init__(self, kind: int, lock_name: Optional[Name] = None, timeout_ms: int = 0,
                 cancel_after_ms: int = 0, pause_ms: int = 0) -> None:
        self.kind = StepKind(kind)
        self.lock_name = lock_name
        self.timeout_ms = timeout_ms
        self.cancel_after_ms = cancel_after_ms
        self.pause_ms = pause_ms

    def __repr__(self) -> str:
        return "Step(%s, %r, timeout_ms=%d, pause_ms=%d)" % (
            self.kind.name, self.lock_name, self.timeout_ms, self.pause_ms)


def acquire(name: Name, timeout_ms: int = 0, cancel_after_ms: int = 0) -> Step:
    """ACQUIRE name within timeout_ms (cancelled after cancel_after_ms if > 0)."""
    return Step(StepKind.ACQUIRE, name, timeout_ms=timeout_ms, cancel_after_ms=cancel_after_ms)


def release(name: Name) -> Step:
    """RELEASE one hold of name."""
    return Step(StepKind.RELEASE, name)


def pause(ms: int) -> Step:
    """PAUSE for ms of virtual time (think, or hold)."""
    return Step(StepKind.PAUSE, pause_ms=ms)


def reconnect() -> Step:
    """RECONNECT: close the session (its locks go) and open another."""
    return Step(StepKind.RECONNECT)


def begin() -> Step:
    """BEGIN a transaction block."""
    return Step(StepKind.BEGIN)


def commit() -> Step:
    """COMMIT (transaction-scoped locks end)."""
    return Step(StepKind.COMMIT)


def rollback() -> Step:
    """ROLLBACK (transaction-scoped locks end)."""
    return Step(StepKind.ROLLBACK)


class Done:
    """How one scripted step ended (advlock_sim_done): step (StepKind),
    lock_name, report (advlock.Report), error (0 or the advlock_error that
    refused the step), command_tag, server_message, cancel_sent, started_ms,
    ended_ms. describe() renders report's sentence with the step's name."""

    __slots__ = ("_c", "lock_name")

    def __init__(self, c_done: Any, lock_name: Optional[Name]) -> None:
        self._c = c_done
        self.lock_name = lock_name

    @property
    def step(self) -> StepKind:
        return StepKind(self._c.step.kind)

    @property
    def report(self) -> Report:
        return Report(self._c.report, self.lock_name, self.server_message or None)

    @property
    def error(self) -> int:
        return int(self._c.error)

    @property
    def command_tag(self) -> str:
        return str(self._c.command_tag.decode())

    @property
    def server_message(self) -> str:
        return str(self._c.server_message.decode())

    @property
    def cancel_sent(self) -> bool:
        return bool(self._c.cancel_sent)

    @property
    def started_ms(self) -> int:
        return int(self._c.started_ms)

    @property
    def ended_ms(self) -> int:
        return int(self._c.ended_ms)

    def describe(self) -> str:
        """advlock_describe for this step's report and name."""
        return self.report.describe()

    def __repr__(self) -> str:
        return "<Done %s %r %r %d..%d ms>" % (self.step.name, self.lock_name, self.report,
                                             self.started_ms, self.ended_ms)


def _fill(struct: ctypes.Structure, values: Optional[Dict[str, Any]]) -> None:
    for k, v in (values or {}).items():
        if not hasattr(struct, k):
            from .errors import ArgumentTypeError
            raise ArgumentTypeError(B.ADVLOCK_EINVAL, "unknown field %r for %s"
                                    % (k, type(struct).__name__))
        setattr(struct, k, v)


class Simulation:
    """An advlock_sim: clients with scripts (or the random cycler), each with
    its own lock machine, options, fake session and clock, run from one event
    queue in virtual time, every invariant checked after every event.

    seed, start_ms, max_virtual_ms: as advlock_sim_config (defaults: 1, 0,
        one day).
    latency: a dict of advlock_fake_latency fields (min_ms, max_ms,
        tail_ppm, tail_max_ms); faults: a dict of advlock_fake_faults fields.
    trace: a callable given each JSON trace line (str), or None.
    Raises CallError for an invalid configuration.
    """

    def __init__(self, seed: int = 1, start_ms: int = 0,
                 latency: Optional[Dict[str, int]] = None,
                 faults: Optional[Dict[str, int]] = None, max_virtual_ms: Optional[int] = None,
                 trace: Optional[Callable[[str], None]] = None) -> None:
        lib = _lib()
        self._sim = F.SimStorage()
        cfg = F.SimConfig()
        lib.advlock_sim_config_default(byref(cfg))
        cfg.seed, cfg.start_ms = seed, start_ms
        if max_virtual_ms is not None:
            cfg.max_virtual_ms = max_virtual_ms
        _fill(cfg.latency, latency)
        _fill(cfg.faults, faults)
        self._keep: List[object] = []  # everything the simulation points to
        if trace is not None:
            tell = trace

            def line_out(_user: object, line: Any, n: int) -> None:
                tell(string_at(line, n).decode())
            fn = F.SIM_TRACE_FN(line_out)
            self._keep.append(fn)
            cfg.trace = fn
        _rc(lib.advlock_sim_init(self._sim, byref(cfg)))

    def add_script(self, steps: Sequence[Step], options: Optional[Options] = None,
                   **option_kwargs: Any) -> _Records:
        """Adds a client running `steps` (Step objects) in order; returns
        the list of Done records it fills, one per step, readable after
        run(). options/keywords: advlock.Options for the client's machine."""
        arr = (F.SimStep * max(len(steps), 1))()
        names: List[Optional[bytes]] = []
        for i, s in enumerate(steps):
            raw = None if s.lock_name is None else _encode(s.lock_name)
            names.append(raw)
            arr[i] = F.SimStep(s.kind, raw, s.timeout_ms, s.cancel_after_ms, s.pause_ms)
        done = (F.SimDone * max(len(steps), 1))()
        self._keep += [arr, names, done]
        client = _rc(_lib().advlock_sim_add_script(self._sim, arr, len(steps), done))
        if options is not None or option_kwargs:
            self.set_options(client, Options.coerce(options, **option_kwargs))
        records = [Done(done[i], s.lock_name) for i, s in enumerate(steps)]
        return _Records(records, client)

    def add_cycler(self, lock_names: Sequence[Name], cycles: int,
                   think_ms: Tuple[int, int] = (0, 0), hold_ms: Tuple[int, int] = (0, 0),
                   timeout_ms: Tuple[int, int] = (0, 0), cancel_ppm: int = 0,
                   cancel_max_ms: int = 0, options: Optional[Options] = None,
                   **option_kwargs: Any) -> int:
        """Adds a client running the built-in random plan (advlock_sim_cycler):
        `cycles` times think, acquire one of lock_names, hold, release; the
        *_ms arguments are (min, max) ranges. Returns the client's index."""
        raws = [_encode(n) for n in lock_names]
        arr = (c_char_p * len(raws))(*raws)
        c = F.SimCycler(arr, len(raws), cycles, think_ms[0], think_ms[1], hold_ms[0],
                        hold_ms[1], timeout_ms[0], timeout_ms[1], cancel_ppm, cancel_max_ms)
        self._keep += [raws, arr]
        client = _rc(_lib().advlock_sim_add_cycler(self._sim, byref(c)))
        if options is not None or option_kwargs:
            self.set_options(client, Options.coerce(options, **option_kwargs))
        return client

    def set_options(self, client: int, options: Options) -> None:
        """advlock_sim_set_options: the client's machine options."""
        _rc(_lib().advlock_sim_set_options(self._sim, client, byref(options.to_c())))

    def run(self) -> Dict[str, Any]:
        """Runs every client to its end. Returns the stats (see .stats);
        raises InvariantViolation at the first broken invariant."""
        rc = _rc(_lib().advlock_sim_run(self._sim))
        if rc == F.SIM_VIOLATION:
            raise InvariantViolation(self.violation)
        return self.stats

    @property
    def violation(self) -> str:
        """The violation that stopped the run, or ""."""
        return str(_lib().advlock_sim_violation(self._sim).decode())

    @property
    def stats(self) -> Dict[str, Any]:
        """A dict of the run's counters (advlock_sim_stats); outcomes by name."""
        s = _lib().advlock_sim_get_stats(self._sim)
        from ._machine import Outcome
        return {"events": s.events, "queries": s.queries, "faults": s.faults,
                "waits": s.waits, "cancels": s.cancels, "end_ms": s.end_ms,
                "outcomes": {o.name: s.outcomes[o] for o in Outcome}}

    @property
    def now(self) -> int:
        """Virtual time now (ms)."""
        return int(_lib().advlock_sim_now(self._sim))

    def client_pid(self, client: int) -> int:
        """The process id of the client's current fake session."""
        return _rc(_lib().advlock_sim_client_pid(self._sim, client))


class _Records(List[Done]):
    """The Done records of a scripted client; .client is its index."""

    def __init__(self, records: List[Done], client: int) -> None:
        super().__init__(records)
        self.client = client


class FakeStatus(enum.IntEnum):
    """advlock_fake_status."""
    ROW_TRUE = F.F["ADVLOCK_FAKE_ROW_TRUE"]
    ROW_FALSE = F.F["ADVLOCK_FAKE_ROW_FALSE"]
    ROW_NULL = F.F["ADVLOCK_FAKE_ROW_NULL"]
    ROW_VOID = F.F["ADVLOCK_FAKE_ROW_VOID"]
    COMMAND_OK = F.F["ADVLOCK_FAKE_COMMAND_OK"]
    SERVER_ERROR = F.F["ADVLOCK_FAKE_SERVER_ERROR"]
    CONNECTION_LOST = F.F["ADVLOCK_FAKE_CONNECTION_LOST"]
    WAITING = F.F["ADVLOCK_FAKE_WAITING"]
    ROWS = F.F["ADVLOCK_FAKE_ROWS"]
    ROW_SESSION = F.F["ADVLOCK_FAKE_ROW_SESSION"]
    ROW_FENCED = F.F["ADVLOCK_FAKE_ROW_FENCED"]
    ROW_SETTINGS = F.F["ADVLOCK_FAKE_ROW_SETTINGS"]


class FakeResult:
    """A statement's result on the fake database: status (FakeStatus),
    command_tag, sqlstate, message, warning_sqlstate, warning, the
    session row's session_pid, in_recovery, ours (ROW_SESSION; else 0), a
    fenced try's fence_token (ROW_FENCED; 0 when busy), and a lock-delay
    mark row's three columns as the tuple settings (ROW_SETTINGS; else
    zeros)."""

    __slots__ = ("status", "command_tag", "sqlstate", "message", "warning_sqlstate", "warning",
                 "session_pid", "in_recovery", "ours", "fence_token", "settings")

    def __init__(self, c: Any) -> None:
        self.status = FakeStatus(c.status)
        self.command_tag = c.command_tag.decode()
        self.sqlstate = c.sqlstate.decode()
        self.message = c.message.decode()
        self.warning_sqlstate = c.warning_sqlstate.decode()
        self.warning = c.warning.decode()
        self.session_pid, self.in_recovery, self.ours = c.session_pid, c.in_recovery, c.ours
        self.fence_token = c.fence_token
        self.settings = tuple(c.settings)

    def __repr__(self) -> str:
        return "<FakeResult %s %s%s>" % (self.status.name, self.command_tag,
                                        " %s %s" % (self.sqlstate, self.message)
                                        if self.sqlstate else "")


class Database:
    """A fake PostgreSQL advisory-lock manager (advlock_fake_db) answering
    the exact SQL text the core emits. Methods raise CallError where the C
    function returns an advlock_error."""

    def __init__(self) -> None:
        self._db = F.FakeDB()
        _lib().advlock_fake_db_init(self._db)

    def set_time(self, now_ms: int) -> None:
        """The database's clock (for the holders query's ages)."""
        _lib().advlock_fake_db_set_time(self._db, now_ms)

    def set_in_recovery(self, in_recovery: bool) -> None:
        """Makes the database a hot standby (True) or a primary, as the
        session query's pg_is_in_recovery() answers."""
        _lib().advlock_fake_db_set_in_recovery(self._db, int(bool(in_recovery)))

    def connect(self) -> int:
        """Opens a session; returns its pid."""
        pid = c_int()
        _rc(_lib().advlock_fake_db_connect(self._db, byref(pid)))
        return pid.value

    def close(self, pid: int) -> None:
        """Ends a session: its locks go, its transaction rolls back."""
        _rc(_lib().advlock_fake_db_close(self._db, pid))

    def execute(self, pid: int, sql: Name, *params: int) -> FakeResult:
        """Runs one statement (text as the core emits it) with bigint
        parameters $1, $2.. = params."""
        out = F.FakeResult()
        lib = _lib()
        if len(params) <= 1:
            p = byref(c_int64(params[0])) if params else None
            _rc(lib.advlock_fake_db_exec(self._db, pid, _encode(sql), p, byref(out)))
        else:
            arr = (c_int64 * len(params))(*params)
            _rc(lib.advlock_fake_db_exec_params(self._db, pid, _encode(sql), arr, len(params),
                                                byref(out)))
        return FakeResult(out)

    def poll(self, pid: int) -> Optional[FakeResult]:
        """The result of a waiting statement, or None while it still waits."""
        out = F.FakeResult()
        return FakeResult(out) if _rc(_lib().advlock_fake_db_poll(self._db, pid, byref(out))) \
            else None

    def cancel(self, pid: int) -> bool:
        """pg_cancel_backend: True if a waiting statement was cancelled."""
        return bool(_rc(_lib().advlock_fake_db_cancel(self._db, pid)))

    def holds(self, pid: int, key: int, shared: bool = False) -> Tuple[int, int]:
        """(session-level, transaction-level) hold counts of key by pid."""
        s, t = c_int(), c_int()
        _rc(_lib().advlock_fake_db_holds(self._db, pid, key, int(bool(shared)), byref(s),
                                         byref(t)))
        return s.value, t.value

    def lock_rows(self) -> List[Tuple[int, int, str, bool]]:
        """The pg_locks picture: (pid, key, "ExclusiveLock"/"ShareLock",
        granted) tuples."""
        lib = _lib()
        n = lib.advlock_fake_db_lock_rows(self._db, None, 0)
        rows = (F.FakeLockRow * max(n, 1))()
        n = lib.advlock_fake_db_lock_rows(self._db, rows, n)
        return [(r.pid, r.key, "ShareLock" if r.mode else "ExclusiveLock", bool(r.granted))
                for r in rows[:n]]

    def check(self) -> str:
        """The lock manager's own bookkeeping: "" if consistent, else why."""
        why = create_string_buffer(256)
        return "" if _lib().advlock_fake_db_check(self._db, why, 256) == 0 else \
            why.value.decode()


class Clock:
    """A fake monotonic clock (advlock_fake_clock): virtual time that only
    advance_to() moves, and a reading that stall() and jump() can skew."""

    def __init__(self, start_ms: int = 0) -> None:
        self._c = F.FakeClock()
        _lib().advlock_fake_clock_init(byref(self._c), start_ms)

    @property
    def now(self) -> int:
        """Virtual time."""
        return int(_lib().advlock_fake_clock_now(byref(self._c)))

    def read(self) -> int:
        """What a program reading this clock sees."""
        return int(_lib().advlock_fake_clock_read(byref(self._c)))

    def advance_to(self, now_ms: int) -> None:
        """Moves virtual time forward; CallError if now_ms is in its past."""
        _rc(_lib().advlock_fake_clock_advance_to(byref(self._c), now_ms))

    def stall(self, ms: int) -> None:
        """Freezes the reading for the next ms of virtual time."""
        _rc(_lib().advlock_fake_clock_stall(byref(self._c), ms))

    def jump(self, ms: int) -> None:
        """Moves the reading forward by ms at once."""
        _rc(_lib().advlock_fake_clock_jump(byref(self._c), ms))


class Prng:
    """The seeded xoshiro256** stream (advlock_prng): same seed, same stream."""

    def __init__(self, seed: int) -> None:
        self._p = F.Prng()
        _lib().advlock_prng_seed(byref(self._p), seed)

    def next(self) -> int:
        """The next 64 random bits."""
        return int(_lib().advlock_prng_next(byref(self._p)))

    def below(self, bound: int) -> int:
        """Uniform in [0, bound)."""
        return int(_lib().advlock_prng_below(byref(self._p), bound))

    def between(self, lo: int, hi: int) -> int:
        """Uniform in [lo, hi]."""
        return int(_lib().advlock_prng_between(byref(self._p), lo, hi))
