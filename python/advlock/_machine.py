"""The lock machine, wrapped: one advlock_machine per object, driven only
through the library's functions. No lock logic here: this module turns
Python values into the core's inputs and its reports into Python values."""

from __future__ import annotations

import enum
import time
from ctypes import byref, c_int64, create_string_buffer, pointer
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import _binding as B
from .errors import (ArgumentTypeError, CallError, LockCancelled, LockError, LockFailed,
                     LockTimeout, ServerSessionError, StandbyError)

if TYPE_CHECKING:
    from ._types import HolderRow, Name

INT64_MAX = B.INT64_MAX
_lib = B.core
# The values of the enums below are the library's (include/advlock.h).
_C = B.C


class Mode(enum.IntEnum):
    """advlock_mode."""
    EXCLUSIVE = _C["ADVLOCK_EXCLUSIVE"]
    SHARED = _C["ADVLOCK_SHARED"]


class Scope(enum.IntEnum):
    """advlock_scope."""
    SESSION = _C["ADVLOCK_SESSION"]
    TRANSACTION = _C["ADVLOCK_TRANSACTION"]


class Wait(enum.IntEnum):
    """advlock_wait."""
    POLL = _C["ADVLOCK_WAIT_POLL"]
    SERVER = _C["ADVLOCK_WAIT_SERVER"]


class Backoff(enum.IntEnum):
    """advlock_backoff."""
    REFERENCE = _C["ADVLOCK_BACKOFF_REFERENCE"]
    FULL_JITTER = _C["ADVLOCK_BACKOFF_FULL_JITTER"]


class Outcome(enum.IntEnum):
    """advlock_outcome."""
    ACQUIRED = _C["ADVLOCK_ACQUIRED"]
    RELEASED = _C["ADVLOCK_RELEASED"]
    NOT_HELD = _C["ADVLOCK_NOT_HELD"]
    TIMED_OUT = _C["ADVLOCK_TIMED_OUT"]
    CANCELLED = _C["ADVLOCK_CANCELLED"]
    FAILED = _C["ADVLOCK_FAILED"]
    ENDS_WITH_TRANSACTION = _C["ADVLOCK_ENDS_WITH_TRANSACTION"]
    HELD = _C["ADVLOCK_HELD"]


class Failure(enum.IntEnum):
    """advlock_failure."""
    NONE = _C["ADVLOCK_FAILURE_NONE"]
    ENULL = _C["ADVLOCK_ENULL"]
    ESERVER = _C["ADVLOCK_ESERVER"]
    ECONNLOST = _C["ADVLOCK_ECONNLOST"]
    ESTANDBY = _C["ADVLOCK_ESTANDBY"]
    ESESSION = _C["ADVLOCK_ESESSION"]
    ENOANSWER = _C["ADVLOCK_ENOANSWER"]


class Detail(enum.IntEnum):
    """advlock_detail."""
    NONE = _C["ADVLOCK_DETAIL_NONE"]
    CANCEL_TOO_LATE = _C["ADVLOCK_DETAIL_CANCEL_TOO_LATE"]
    UNDO_CANCELLED = _C["ADVLOCK_DETAIL_UNDO_CANCELLED"]
    UNDO_AFTER_DEADLINE = _C["ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE"]
    UNDO_AFTER_57014 = _C["ADVLOCK_DETAIL_UNDO_AFTER_57014"]
    DIAGNOSED = _C["ADVLOCK_DETAIL_DIAGNOSED"]
    DIAGNOSIS_FAILED = _C["ADVLOCK_DETAIL_DIAGNOSIS_FAILED"]
    LOST = _C["ADVLOCK_DETAIL_LOST"]
    UNDO_AFTER_FENCE_ERROR = _C["ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR"]


class LeaseExpiry(enum.IntEnum):
    """advlock_lease_expiry: why a held lock was lost (LockLost.reason)."""
    LIVE = _C["ADVLOCK_LEASE_LIVE"]
    NO_ANSWER = _C["ADVLOCK_LEASE_NO_ANSWER"]
    CONNECTION = _C["ADVLOCK_LEASE_CONNECTION"]
    SETTINGS = _C["ADVLOCK_LEASE_SETTINGS"]
    SERVER_ERROR = _C["ADVLOCK_LEASE_SERVER_ERROR"]


class Sql(enum.IntEnum):
    """advlock_sql: the rows of the core's one SQL table."""
    TRY_LOCK = _C["ADVLOCK_SQL_TRY_LOCK"]
    UNLOCK = _C["ADVLOCK_SQL_UNLOCK"]
    TRY_LOCK_SHARED = _C["ADVLOCK_SQL_TRY_LOCK_SHARED"]
    UNLOCK_SHARED = _C["ADVLOCK_SQL_UNLOCK_SHARED"]
    TRY_XACT_LOCK = _C["ADVLOCK_SQL_TRY_XACT_LOCK"]
    TRY_XACT_LOCK_SHARED = _C["ADVLOCK_SQL_TRY_XACT_LOCK_SHARED"]
    LOCK = _C["ADVLOCK_SQL_LOCK"]
    LOCK_SHARED = _C["ADVLOCK_SQL_LOCK_SHARED"]
    XACT_LOCK = _C["ADVLOCK_SQL_XACT_LOCK"]
    XACT_LOCK_SHARED = _C["ADVLOCK_SQL_XACT_LOCK_SHARED"]
    HOLDERS = _C["ADVLOCK_SQL_HOLDERS"]
    SESSION = _C["ADVLOCK_SQL_SESSION"]
    TRY_LOCK_GUARDED = _C["ADVLOCK_SQL_TRY_LOCK_GUARDED"]
    UNLOCK_GUARDED = _C["ADVLOCK_SQL_UNLOCK_GUARDED"]
    TRY_LOCK_SHARED_GUARDED = _C["ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED"]
    UNLOCK_SHARED_GUARDED = _C["ADVLOCK_SQL_UNLOCK_SHARED_GUARDED"]
    LOCK_GUARDED = _C["ADVLOCK_SQL_LOCK_GUARDED"]
    LOCK_SHARED_GUARDED = _C["ADVLOCK_SQL_LOCK_SHARED_GUARDED"]
    HELD = _C["ADVLOCK_SQL_HELD"]
    HELD_SHARED = _C["ADVLOCK_SQL_HELD_SHARED"]
    HELD_GUARDED = _C["ADVLOCK_SQL_HELD_GUARDED"]
    HELD_SHARED_GUARDED = _C["ADVLOCK_SQL_HELD_SHARED_GUARDED"]
    TRY_XACT_LOCK_GUARDED = _C["ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED"]
    TRY_XACT_LOCK_SHARED_GUARDED = _C["ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED"]
    XACT_LOCK_GUARDED = _C["ADVLOCK_SQL_XACT_LOCK_GUARDED"]
    XACT_LOCK_SHARED_GUARDED = _C["ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED"]
    LEASE_SETUP = _C["ADVLOCK_SQL_LEASE_SETUP"]
    HEARTBEAT = _C["ADVLOCK_SQL_HEARTBEAT"]
    HEARTBEAT_GUARDED = _C["ADVLOCK_SQL_HEARTBEAT_GUARDED"]
    TRY_LOCK_FENCED = _C["ADVLOCK_SQL_TRY_LOCK_FENCED"]
    TRY_XACT_LOCK_FENCED = _C["ADVLOCK_SQL_TRY_XACT_LOCK_FENCED"]
    CAPACITY = _C["ADVLOCK_SQL_CAPACITY"]
    OCCUPY = _C["ADVLOCK_SQL_OCCUPY"]
    FENCE_INSTALLED = _C["ADVLOCK_SQL_FENCE_INSTALLED"]
    FENCE_SETUP = _C["ADVLOCK_SQL_FENCE_SETUP"]
    FENCE_GRANTS = _C["ADVLOCK_SQL_FENCE_GRANTS"]
    BEGIN = _C["ADVLOCK_SQL_BEGIN"]
    CLOSE_ALL = _C["ADVLOCK_SQL_CLOSE_ALL"]
    COMMIT = _C["ADVLOCK_SQL_COMMIT"]
    ROLLBACK = _C["ADVLOCK_SQL_ROLLBACK"]
    MARK_TAKE = _C["ADVLOCK_SQL_MARK_TAKE"]
    MARK_WRITE = _C["ADVLOCK_SQL_MARK_WRITE"]
    MARK_CLEAR = _C["ADVLOCK_SQL_MARK_CLEAR"]
    MARK_GRANTS = _C["ADVLOCK_SQL_MARK_GRANTS"]
    LOCKS_TABLES = _C["ADVLOCK_SQL_LOCKS_TABLES"]
    LOCKS = _C["ADVLOCK_SQL_LOCKS"]
    LOCKS_MARK = _C["ADVLOCK_SQL_LOCKS_MARK"]
    LOCKS_FENCE = _C["ADVLOCK_SQL_LOCKS_FENCE"]
    LOCKS_MARK_FENCE = _C["ADVLOCK_SQL_LOCKS_MARK_FENCE"]


# The SQL table, read once from the library: (text, answer kind) by id.
SQL_TEXT = tuple(_lib.advlock_sql_text(i).decode() for i in range(B.SQL_COUNT))
SQL_ANSWER = tuple(_lib.advlock_sql_answer(i) for i in range(B.SQL_COUNT))
SQL_PARAMS = tuple(_lib.advlock_sql_params(i) for i in range(B.SQL_COUNT))
# The guarded statements (advlock_sql_guarded): they answer NULL off the
# connection's claimed server session.
SQL_GUARDED = tuple(bool(_lib.advlock_sql_guarded(i)) for i in range(B.SQL_COUNT))


def params(action: Union[B.Action, B.LeaseAction]) -> Tuple[int, ...]:
    """The values of $1.. for a QUERY action, as many as its statement takes."""
    n = SQL_PARAMS[action.sql]
    if n == 1:
        return (action.param,)
    if n == 2:
        return (action.param, action.param2)
    return (action.param, action.param2, action.param3)


def now_ms() -> int:
    """The caller's clock the machine is fed: time.monotonic() in ms."""
    return time.monotonic_ns() // 1000000


def strerror(code: int) -> str:
    """advlock_strerror: the words for an advlock_error or advlock_failure."""
    words: bytes = _lib.advlock_strerror(code)
    return words.decode()


def _check(rc: int) -> None:
    if rc != 0:
        raise CallError(rc, strerror(rc))


def _encode(name: object) -> bytes:
    if isinstance(name, str):
        try:
            return name.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: as the core's own check
            raise CallError(B.ADVLOCK_EUTF8, strerror(B.ADVLOCK_EUTF8)) from None
    if isinstance(name, (bytes, bytearray, memoryview)):
        return bytes(name)
    raise ArgumentTypeError(B.ADVLOCK_EINVAL,
                            "a lock name is str or bytes, not %s" % type(name).__name__)


def derive_key(name: Name) -> int:
    """The bigint key for a lock name (str, or UTF-8 bytes): SHA-256 of
    "74726:" + name, first 8 bytes big-endian, signed. Raises CallError
    (code ADVLOCK_EUTF8) for bytes that are not well-formed UTF-8 and for a
    str holding lone surrogates."""
    raw = _encode(name)
    out = c_int64()
    _check(_lib.advlock_derive_key(raw, len(raw), byref(out)))
    return out.value


def fence_setup_sql() -> str:
    """advlock_fence_setup_sql: the idempotent script that installs the
    schema fencing tokens need (schema advlock, table advlock.fence,
    function advlock.fence_ok); several statements, for a simple-query
    call (psycopg's execute() without parameters, asyncpg's execute()).
    `advlock setup` runs the same; docs/operators.md prints it."""
    script: bytes = _lib.advlock_fence_setup_sql()
    return script.decode()


def format_seconds(ms: int) -> str:
    """A millisecond duration as the reference prints TotalSeconds
    (30000 -> "30", 500 -> "0.5")."""
    buf = create_string_buffer(32)
    rc = _lib.advlock_format_seconds(int(ms), buf, 32)
    if rc < 0:
        raise CallError(rc, strerror(rc))
    return buf.value.decode()


def describe_lease_lost(name: Name, words: bytes) -> str:
    """advlock_describe_lease_lost: the sentence for a held lock its lease
    gave up, words being the lease's."""
    raw = _encode(name)
    buf = create_string_buffer(B.MESSAGE_MAX)
    _lib.advlock_describe_lease_lost(raw, len(raw), words, buf, B.MESSAGE_MAX)
    return buf.value.decode("utf-8", "replace")


def escape_name(name: Name) -> str:
    """A lock name as messages show it: one printable line."""
    raw = _encode(name)
    buf = create_string_buffer(B.MESSAGE_MAX)
    _lib.advlock_escape_name(raw, len(raw), buf, B.MESSAGE_MAX)
    return buf.value.decode()


class Report:
    """An operation's report (advlock_report), copied out of the machine:
    facts only. describe() renders the core's sentence.

    Fields, as in C: outcome (Outcome), failure (Failure), sql (Sql),
    detail (Detail), sqlstate (str), key, timeout_ms, elapsed_ms, attempts,
    holder_pid, other_holders, holder_seconds, holder_state (pg_stat_activity
    word), holder_application, fence (the fencing token a fenced acquire's
    grant issued; 0 otherwise).
    """

    __slots__ = ("_c", "name", "server_message")

    _c: B.Report
    name: Optional[Name]
    server_message: Optional[str]

    def __init__(self, c_report: B.Report, name: Optional[Name] = None,
                 server_message: Optional[str] = None) -> None:
        self._c = c_report
        self.name = name
        self.server_message = server_message

    @property
    def outcome(self) -> Outcome:
        return Outcome(self._c.outcome)

    @property
    def failure(self) -> Failure:
        return Failure(self._c.failure)

    @property
    def sql(self) -> Sql:
        return Sql(self._c.sql)

    @property
    def detail(self) -> Detail:
        return Detail(self._c.detail)

    @property
    def sqlstate(self) -> str:
        state: bytes = self._c.sqlstate
        return state.decode()

    @property
    def key(self) -> int:
        return int(self._c.key)

    @property
    def timeout_ms(self) -> int:
        return int(self._c.timeout_ms)

    @property
    def elapsed_ms(self) -> int:
        return int(self._c.elapsed_ms)

    @property
    def attempts(self) -> int:
        return int(self._c.attempts)

    @property
    def holder_pid(self) -> int:
        return int(self._c.holder_pid)

    @property
    def other_holders(self) -> int:
        return int(self._c.other_holders)

    @property
    def holder_seconds(self) -> int:
        return int(self._c.holder_seconds)

    @property
    def holder_state(self) -> str:
        word: bytes = _lib.advlock_backend_state_name(self._c.holder_state)
        return word.decode()

    @property
    def holder_application(self) -> str:
        application: bytes = self._c.holder_application
        return application.decode("utf-8", "replace")

    @property
    def fence(self) -> int:
        return int(self._c.fence)

    def describe(self, name: Optional[Name] = None, server_message: Optional[str] = None) -> str:
        """advlock_describe: the sentence for this report ("" for ACQUIRED
        and RELEASED without a detail). name defaults to the name the
        operation was started with, server_message to the driver's words."""
        if name is None:
            name = self.name if self.name is not None else ""
        if server_message is None:
            server_message = self.server_message
        raw = _encode(name)
        msg = None if server_message is None else _encode(server_message)
        buf = create_string_buffer(B.MESSAGE_MAX)
        _lib.advlock_describe(pointer(self._c), raw, len(raw), msg, buf, B.MESSAGE_MAX)
        return buf.value.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return "<advlock.Report %s key=%d attempts=%d elapsed_ms=%d%s>" % (
            self.outcome.name, self.key, self.attempts, self.elapsed_ms,
            "" if self._c.outcome != Outcome.FAILED else " sqlstate=%r" % self.sqlstate)


class LockState(enum.Enum):
    """What a lock object knows of its lock (Lock.state, AsyncLock.state)."""
    NOT_HELD = "not held"
    HELD = "held"
    # A release (or the give-back of an unwanted grant) failed on a
    # connection that may still be up, or behind a proxy whose server
    # session may outlive it: the lock may be held until that session ends.
    MAY_BE_HELD = "may still be held"


class Options:
    """advlock_options, with the C field names. Defaults are the reference:
    exclusive, session scope, polling, the reference schedule.

    mode: Mode.EXCLUSIVE or Mode.SHARED
    scope: Scope.SESSION or Scope.TRANSACTION
    wait: Wait.POLL or Wait.SERVER (pg_advisory_lock, cancelled at the deadline)
    backoff: Backoff.REFERENCE or Backoff.FULL_JITTER
    clip_to_deadline, diagnose: bool
    allow_standby: bool (acquire on a hot standby too: its locks exclude
        nobody on the primary; off, such an acquire raises StandbyError)
    jitter_seed: int (the machine's splitmix64 seed for jitter)
    fence: bool (each grant issues a fencing token, Report.fence; exclusive
        and polling only: docs/python.md "Fencing tokens")
    lock_delay: bool (a grant counts once this holder's mark is in
        advlock.mark, after the lease of a holder that never released has
        run out; exclusive session locks under a lease only, which the
        engine checks at acquire: docs/python.md "Lock-delay")
    """

    __slots__ = ("mode", "scope", "wait", "backoff", "clip_to_deadline", "diagnose",
                 "allow_standby", "jitter_seed", "fence", "lock_delay")

    mode: Mode
    scope: Scope
    wait: Wait
    backoff: Backoff
    clip_to_deadline: bool
    diagnose: bool
    allow_standby: bool
    jitter_seed: int
    fence: bool
    lock_delay: bool

    def __init__(self, mode: int = Mode.EXCLUSIVE, scope: int = Scope.SESSION,
                 wait: int = Wait.POLL, backoff: int = Backoff.REFERENCE,
                 clip_to_deadline: object = False, diagnose: object = False,
                 allow_standby: object = False, jitter_seed: int = 0,
                 fence: object = False, lock_delay: object = False) -> None:
        self.mode = _member(Mode, "mode", mode)
        self.scope = _member(Scope, "scope", scope)
        self.wait = _member(Wait, "wait", wait)
        self.backoff = _member(Backoff, "backoff", backoff)
        self.clip_to_deadline = bool(clip_to_deadline)
        self.diagnose = bool(diagnose)
        self.allow_standby = bool(allow_standby)
        if not isinstance(jitter_seed, int):
            raise ArgumentTypeError(B.ADVLOCK_EINVAL, "jitter_seed is an int, not %s"
                                    % type(jitter_seed).__name__)
        self.jitter_seed = jitter_seed
        self.fence = bool(fence)
        # Its refusals are the engine's, at acquire (the lease is the
        # connection's, known only there).
        self.lock_delay = bool(lock_delay)
        # The core refuses these pairs with EINVAL alone: say why here.
        if self.fence and self.mode != Mode.EXCLUSIVE:
            raise CallError(B.ADVLOCK_EINVAL, "fence=True needs mode=advlock.EXCLUSIVE: a"
                            " fencing token orders holders one after another, and shared"
                            " holders hold at once, so a newer token would exclude nobody")
        if self.fence and self.wait != Wait.POLL:
            raise CallError(B.ADVLOCK_EINVAL, "fence=True needs wait=advlock.WAIT_POLL: the"
                            " token is issued by the try-lock statement that takes the lock,"
                            " and a server-side wait takes it with another statement")

    @classmethod
    def coerce(cls, options: Optional[Options] = None, **kw: Any) -> Options:
        """Options from an Options object and/or keyword overrides. Raises
        ArgumentTypeError for an option that does not exist or options= that
        is not an Options, CallError for a value the option does not take."""
        unknown = sorted(set(kw) - set(cls.__slots__))
        if unknown:
            raise ArgumentTypeError(B.ADVLOCK_EINVAL, "no such option: %s (the options: %s)"
                                    % (", ".join(unknown), ", ".join(cls.__slots__)))
        if options is None:
            return cls(**kw)
        if not isinstance(options, cls):
            raise ArgumentTypeError(B.ADVLOCK_EINVAL, "options is an advlock.Options, not %s"
                                    % type(options).__name__)
        if not kw:
            return options
        merged = {f: getattr(options, f) for f in cls.__slots__}
        merged.update(kw)
        return cls(**merged)

    def to_c(self) -> B.Options:
        """The advlock_options struct for these options."""
        o = B.Options()
        _lib.advlock_options_init(byref(o))
        o.mode, o.scope, o.wait, o.backoff = self.mode, self.scope, self.wait, self.backoff
        o.clip_to_deadline, o.diagnose = int(self.clip_to_deadline), int(self.diagnose)
        o.allow_standby = int(self.allow_standby)
        o.jitter_seed = self.jitter_seed & 0xFFFFFFFFFFFFFFFF
        o.fence = int(self.fence)
        o.lock_delay = int(self.lock_delay)
        return o

    def __repr__(self) -> str:
        return "advlock.Options(%s)" % ", ".join(
            "%s=%r" % (f, getattr(self, f)) for f in self.__slots__)


E = TypeVar("E", bound=enum.IntEnum)


def _member(enum_type: Type[E], what: str, value: int) -> E:
    """value as a member of enum_type; CallError naming the ones it takes."""
    try:
        return enum_type(value)
    except ValueError:
        raise CallError(B.ADVLOCK_EINVAL, "%s must be one of %s, not %r" % (
            what, ", ".join("advlock.%s" % m.name for m in enum_type), value)) from None


def timeout_ms(timeout: Optional[float]) -> int:
    """Seconds (int, float, or None or infinity for no limit) as the core's
    timeout in ms. Raises CallError (ADVLOCK_EINVAL) for a negative or NaN
    timeout, ArgumentTypeError for one that is not a number."""
    if timeout is None:
        return INT64_MAX
    try:
        ms = timeout * 1000
        valid = ms >= 0  # False for NaN
    except TypeError:
        raise ArgumentTypeError(B.ADVLOCK_EINVAL, "timeout is seconds (a number) or None,"
                                " not %s" % type(timeout).__name__) from None
    if not valid:
        raise CallError(B.ADVLOCK_EINVAL, "timeout must be >= 0 seconds (or None)")
    return INT64_MAX if ms >= INT64_MAX else round(ms)


class Machine:
    """One advlock_machine (264 bytes, owned here) and the thin calls a
    driver makes on it, for writing a driver of your own. Every input takes
    now= (monotonic ms; default now_ms()), so a test can drive it in virtual
    time. Methods raise CallError when the core refuses a call (and the
    machine is unchanged). A failing result's words are kept in
    .server_message for the report's sentence."""

    __slots__ = ("_m", "server_message", "refused", "sent_ms")

    def __init__(self, options: Optional[Options] = None) -> None:
        self._m = B.MachineStorage()
        _lib.advlock_machine_init(self._m)
        self.server_message: Optional[str] = None
        # The driver's send time of the last statement (monotonic ms): the
        # anchor of a lease held from its grant (0 before any).
        self.sent_ms = 0
        # A driver's words when its client refused to send a statement on a
        # connection busy with another operation (fed as a server error).
        self.refused: Optional[str] = None
        if options is not None:
            self.set_options(options)

    def set_options(self, options: Options) -> None:
        """advlock_set_options (between operations)."""
        _check(_lib.advlock_set_options(self._m, byref(options.to_c())))

    def set_session(self, session: B.Session) -> None:
        """advlock_set_session: hands the machine a copy of a connection's
        session value (a _binding.Session; between operations)."""
        _check(_lib.advlock_set_session(self._m, session))

    def session(self) -> B.Session:
        """advlock_get_session: a copy of the machine's session value, with
        what the session row found."""
        out = B.Session()
        _check(_lib.advlock_get_session(self._m, out))
        return out

    def start_acquire(self, name: Name, timeout_ms: int, now: Optional[int] = None) -> None:
        """advlock_start_acquire with the time now; name is str or bytes."""
        raw = _encode(name)
        self.server_message = None
        _check(_lib.advlock_start_acquire(self._m, raw, len(raw), timeout_ms,
                                            now_ms() if now is None else now))

    def start_acquire_key(self, key: int, timeout_ms: int, now: Optional[int] = None) -> None:
        """advlock_start_acquire_key with the time now."""
        self.server_message = None
        _check(_lib.advlock_start_acquire_key(self._m, key, timeout_ms,
                                                now_ms() if now is None else now))

    def start_release(self, name: Name, now: Optional[int] = None) -> None:
        """advlock_start_release with the time now."""
        raw = _encode(name)
        self.server_message = None
        _check(_lib.advlock_start_release(self._m, raw, len(raw),
                                            now_ms() if now is None else now))

    def start_release_key(self, key: int, now: Optional[int] = None) -> None:
        """advlock_start_release_key with the time now: no second hash."""
        self.server_message = None
        _check(_lib.advlock_start_release_key(self._m, key,
                                                now_ms() if now is None else now))

    def start_verify_key(self, key: int, now: Optional[int] = None) -> None:
        """advlock_start_verify_key: does this session still hold key?"""
        self.server_message = None
        _check(_lib.advlock_start_verify_key(self._m, key, now_ms() if now is None else now))

    def report(self) -> Report:
        """The current or last operation's report, copied."""
        return final_report(self.next_action(), None, self.server_message)

    def next_action(self) -> B.Action:
        """advlock_next_action: a B.Action (kind, sql, param, wake_at_ms,
        sleep_ms, report)."""
        action: B.Action = _lib.advlock_next_action(self._m)
        return action

    def on_result(self, result: int, sqlstate: Optional[str] = None,
                  message: Optional[str] = None, now: Optional[int] = None) -> None:
        """advlock_on_result; message is kept for the report's sentence."""
        if message is not None:
            self.server_message = message
        _check(_lib.advlock_on_result(
            self._m, result, None if sqlstate is None else sqlstate.encode("ascii", "replace"),
            None if message is None else message.encode("utf-8", "replace"),
            now_ms() if now is None else now))

    def on_holders(self, rows: Sequence[HolderRow], now: Optional[int] = None) -> None:
        """advlock_on_holders with rows of the holders query, as tuples
        (pid, granted, mode, application_name, client, state, backend_start,
        seconds)."""
        arr = (B.Holder * max(len(rows), 1))()
        keep = []
        for i, r in enumerate(rows):
            strs = [None if v is None else str(v).encode("utf-8", "replace") for v in r[2:7]]
            keep.append(strs)
            arr[i] = B.Holder(int(r[0] or 0), 1 if r[1] else 0, *strs, int(r[7] or 0))
        _check(_lib.advlock_on_holders(self._m, arr, len(rows),
                                         now_ms() if now is None else now))

    def on_session(self, server_pid: Optional[int], in_recovery: object, ours: object,
                   now: Optional[int] = None) -> None:
        """advlock_on_session with the row of the session query."""
        _check(_lib.advlock_on_session(self._m, int(server_pid or 0), 1 if in_recovery else 0,
                                         1 if ours else 0, now_ms() if now is None else now))

    def on_fenced(self, granted: object, token: Optional[int],
                  now: Optional[int] = None) -> None:
        """advlock_on_fenced with the row of a fenced try-lock (granted
        True/False, token an int or None; a NULL granted goes to on_result)."""
        _check(_lib.advlock_on_fenced(self._m, 1 if granted else 0, int(token or 0),
                                        now_ms() if now is None else now))

    def on_timer(self, now: Optional[int] = None) -> None:
        """advlock_on_timer with the time now (early calls are harmless)."""
        _check(_lib.advlock_on_timer(self._m, now_ms() if now is None else now))

    def on_cancel_sent(self, now: Optional[int] = None) -> None:
        """advlock_on_cancel_sent with the time now."""
        _check(_lib.advlock_on_cancel_sent(self._m, now_ms() if now is None else now))

    def cancel(self, now: Optional[int] = None) -> bool:
        """advlock_cancel; returns False (and changes nothing) when no acquire
        is under way, e.g. during a release, which always ends on its own."""
        rc: int = _lib.advlock_cancel(self._m, now_ms() if now is None else now)
        return rc == 0


def final_report(action: B.Action, name: Optional[Name], server_message: Optional[str]) -> Report:
    """The DONE action's report, copied out of the machine."""
    return Report(B.Report.from_buffer_copy(action.report.contents), name, server_message)


# FAILED's exception by the report's failure; LockFailed for the others.
_FAILED_BY: Dict[int, Type[LockFailed]] = {Failure.ESTANDBY: StandbyError,
                                           Failure.ESESSION: ServerSessionError}


def raise_for(report: Report, name: Optional[Name]) -> None:
    """Raises the exception an outcome calls for: LockTimeout (TIMED_OUT),
    LockFailed or its StandbyError / ServerSessionError (FAILED),
    LockCancelled (CANCELLED); returns for the others."""
    outcome = report._c.outcome
    cls: Type[LockError]
    if outcome == Outcome.TIMED_OUT:
        cls = LockTimeout
    elif outcome == Outcome.FAILED:
        cls = _FAILED_BY.get(report._c.failure, LockFailed)
    elif outcome == Outcome.CANCELLED:
        cls = LockCancelled
    else:
        return
    raise cls(report.describe(name), report, name, report.server_message)


__all__ = ["Mode", "Scope", "Wait", "Backoff", "Outcome", "Failure", "Detail", "LeaseExpiry",
           "Sql", "Report",
           "Options", "Machine", "LockState", "derive_key", "format_seconds", "escape_name",
           "strerror", "now_ms", "LockError", "fence_setup_sql"]
