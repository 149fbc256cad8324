"""The C ABI of libadvlock and libadvlock_fake, mirrored with ctypes.

This module is the one place that knows the headers' layouts and the
libraries' symbols: include/advlock.h and include/advlock_fake.h are the
source of truth, and python/tests/test_layout.py checks every mirror below
against sizes and offsets a C program compiled from those headers reports.
When a header changes, this file is the one edit.

Libraries are found by the rules docs/python.md lists ("Where the package
finds its libraries"), in _candidates below.
No compiler is involved: the libraries are loaded as they are (ABI mode).
"""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int, c_int32, c_int64,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)

INT64_MAX = (1 << 63) - 1

# ---- advlock.h: enums (plain ints; the public IntEnums live in _machine) ----

ADVLOCK_OK = 0
ADVLOCK_EINVAL = -1
ADVLOCK_EUTF8 = -2
ADVLOCK_EMISUSE = -3
ADVLOCK_ECRYPTO = -4
ADVLOCK_ENOMEM = -11

ACTION_NONE, ACTION_QUERY, ACTION_SLEEP, ACTION_DONE, ACTION_CANCEL_QUERY = range(5)
ANSWER_BOOLEAN, ANSWER_VOID, ANSWER_HOLDERS, ANSWER_SESSION, ANSWER_FENCED, \
    ANSWER_CAPACITY = range(6)
RESULT_TRUE, RESULT_FALSE, RESULT_NULL, RESULT_SERVER_ERROR, RESULT_CONNECTION_LOST = range(5)
SQL_COUNT = 32
SQL_SESSION = 11  # ADVLOCK_SQL_SESSION: its answer is a row for advlock_on_session
SQL_LEASE_SETUP = 26  # ADVLOCK_SQL_LEASE_SETUP
SQL_HEARTBEAT, SQL_HEARTBEAT_GUARDED = 27, 28
SQL_TRY_LOCK_FENCED, SQL_TRY_XACT_LOCK_FENCED = 29, 30
SQL_CAPACITY = 31  # ADVLOCK_SQL_CAPACITY: the lock table's settings
CAPACITY_SHARE_DEFAULT = 25
KEY_ECHO_MAX = 512
MESSAGE_MAX = 1024
MACHINE_SIZE = 264
# The shared libraries' soname version (the Makefile's SOVERSION).
SOVERSION = "1"

# ---- loading -----------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(soname, env):
    explicit = os.environ.get(env)
    if explicit:
        return [explicit]
    out = []
    core = os.environ.get("ADVLOCK_LIBRARY")
    if core and soname != "libadvlock.so":
        out.append(os.path.join(os.path.dirname(core), soname))
    tree = os.path.normpath(os.path.join(_HERE, "..", ".."))
    if os.path.exists(os.path.join(tree, "include", "advlock.h")):
        out.append(os.path.join(tree, os.environ.get("ADVLOCK_BUILD", "build"), soname))
    out.append(os.path.join(_HERE, soname + "." + SOVERSION))
    try:
        from . import _installed  # written by `make install-python`
        out.append(os.path.join(_installed.LIBDIR, soname + "." + SOVERSION))
    except ImportError:
        pass
    out.append(soname + "." + SOVERSION)
    return out


def _load(soname, env):
    errors = []
    for path in _candidates(soname, env):
        if os.sep in path and not os.path.exists(path):
            errors.append(path + ": no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc))
    raise ImportError("advlock: cannot load %s (set ADVLOCK_LIBRARY, or build it with make): %s"
                      % (soname, "; ".join(errors)))


def _declare(lib, table):
    for name, restype, argtypes in table:
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


core = _load("libadvlock.so", "ADVLOCK_LIBRARY")

# ---- advlock.h: structures -------------------------------------------------


class Report(Structure):
    """advlock_report."""
    _fields_ = [
        ("outcome", c_int),
        ("failure", c_int),
        ("sql", c_int),
        ("detail", c_int),
        ("sqlstate", c_char * 6),
        ("key", c_int64),
        ("timeout_ms", c_int64),
        ("elapsed_ms", c_int64),
        ("attempts", c_uint64),
        ("holder_pid", c_int),
        ("other_holders", c_int),
        ("holder_seconds", c_int64),
        ("holder_state", c_int),
        ("holder_application", c_char * 64),
        ("fence", c_int64),
    ]


class Action(Structure):
    """advlock_action (sql_text kept as a raw pointer: drivers use the table)."""
    _fields_ = [
        ("kind", c_int),
        ("sql", c_int),
        ("sql_text", c_void_p),
        ("param", c_int64),
        ("param2", c_int64),
        ("param3", c_int64),
        ("wake_at_ms", c_int64),
        ("sleep_ms", c_int64),
        ("report", POINTER(Report)),
    ]


class Event(Structure):
    """advlock_event."""
    _fields_ = [
        ("kind", c_int),
        ("now_ms", c_int64),
        ("report", POINTER(Report)),
        ("result", c_int),
        ("sleep_ms", c_int64),
        ("message", c_char_p),
    ]


EVENT_FN = CFUNCTYPE(None, c_void_p, POINTER(Event))
RANDOM_FN = CFUNCTYPE(c_uint64, c_void_p)


class Options(Structure):
    """advlock_options."""
    _fields_ = [
        ("mode", c_int),
        ("scope", c_int),
        ("wait", c_int),
        ("backoff", c_int),
        ("clip_to_deadline", c_int),
        ("diagnose", c_int),
        ("allow_standby", c_int),
        ("jitter_seed", c_uint64),
        ("random", RANDOM_FN),
        ("random_user", c_void_p),
        ("on_event", EVENT_FN),
        ("event_user", c_void_p),
        ("lease_ms", c_int64),
        ("lease_stop_ms", c_int64),
        ("fence", c_int),
    ]


class Holder(Structure):
    """advlock_holder."""
    _fields_ = [
        ("pid", c_int),
        ("granted", c_int),
        ("mode", c_char_p),
        ("application_name", c_char_p),
        ("client", c_char_p),
        ("state", c_char_p),
        ("backend_start", c_char_p),
        ("seconds", c_int64),
    ]


class Session(Structure):
    """advlock_session: one connection's server session facts, a plain
    value (advlock_session_init, then the machine fills in the facts)."""
    _fields_ = [("token", c_uint64), ("client_pid", c_int32), ("checked", c_uint8),
                ("proxied", c_uint8), ("claimed", c_uint8), ("standby", c_uint8),
                ("claim_asked", c_uint8)]


class MachineStorage(Structure):
    """advlock_machine: 264 opaque, 8-byte aligned bytes, touched only
    through the library's functions."""
    _fields_ = [("bytes_", c_uint64 * (MACHINE_SIZE // 8))]


# ---- advlock.h: leases ---------------------------------------------------------

LEASE_DEFAULT_MS = 30000  # ADVLOCK_LEASE_DEFAULT_MS
LEASE_MAX_MS = 32400000  # ADVLOCK_LEASE_MAX_MS
LEASE_NONE, LEASE_QUERY, LEASE_WAIT, LEASE_EXPIRED = range(4)
(LEASE_SETUP_PENDING, LEASE_APPLIED, LEASE_UNIX_SOCKET, LEASE_NOT_APPLIED, LEASE_PROXIED,
 LEASE_SETUP_FAILED) = range(6)
(LEASE_LIVE, LEASE_NO_ANSWER, LEASE_CONNECTION, LEASE_SETTINGS,
 LEASE_SERVER_ERROR) = range(5)


class LeasePlan(Structure):
    """advlock_lease_plan: the numbers of one lease (a plain value)."""
    _fields_ = [("lease_ms", c_int64), ("stop_ms", c_int64), ("user_timeout_ms", c_int32),
                ("keepalives_idle_s", c_int32), ("keepalives_interval_s", c_int32),
                ("keepalives_count", c_int32), ("check_interval_ms", c_int32),
                ("deadline_ms", c_int64), ("heartbeat_ms", c_int64)]


class LeaseAction(Structure):
    """advlock_lease_action (sql_text kept as a raw pointer: drivers use the table)."""
    _fields_ = [("kind", c_int), ("sql", c_int), ("sql_text", c_void_p), ("param", c_int64),
                ("param2", c_int64), ("wake_at_ms", c_int64), ("stop_at_ms", c_int64)]


class LeaseStorage(Structure):
    """advlock_lease: one lease on one connection; private fields, copyable."""
    _fields_ = [("plan_", LeasePlan), ("token_", c_uint64), ("anchor_ms_", c_int64),
                ("sent_ms_", c_int64), ("next_beat_ms_", c_int64), ("now_ms_", c_int64),
                ("state_", c_uint8), ("setup_", c_uint8), ("expiry_", c_uint8),
                ("outstanding_", c_uint8)]


# ---- advlock.h: in-process exclusion (lock sets) -------------------------------

PEER_OUT, PEER_ASKING, PEER_HELD = range(3)


class Peer(Structure):
    """advlock_peer: one lock's interest in a key; private fields, zeroed
    (PEER_OUT) when made, never moved while in a table."""
    _fields_ = [("key_", c_int64), ("next_", c_void_p), ("prev_", c_void_p), ("mode_", c_uint8),
                ("state_", c_uint8)]


class Peers(Structure):
    """advlock_peers: the table over a bucket array its owner keeps alive."""
    _fields_ = [("buckets_", c_void_p), ("mask_", c_size_t), ("count_", c_size_t)]


class Capacity(Structure):
    """advlock_capacity: the server's lock-table settings and the share taken."""
    _fields_ = [("max_locks_per_transaction", c_int64), ("max_connections", c_int64),
                ("max_prepared_transactions", c_int64), ("share_percent", c_int32)]


# ---- advlock_fake.h ----------------------------------------------------------

FAKE_TEXT_MAX = 160
SIM_SIZE = 384 * 1024
SIM_VIOLATION = 1
OUTCOME_COUNT = 8


class Prng(Structure):
    """advlock_prng."""
    _fields_ = [("s_", c_uint64 * 4)]


class FakeClock(Structure):
    """advlock_fake_clock (a plain value)."""
    _fields_ = [("now_ms_", c_int64), ("skew_ms_", c_int64), ("stall_until_ms_", c_int64),
                ("frozen_ms_", c_int64), ("stalled_ms_", c_int64), ("jumped_ms_", c_int64)]


class FakeResult(Structure):
    """advlock_fake_result."""
    _fields_ = [
        ("status", c_int),
        ("command_tag", c_char * 16),
        ("sqlstate", c_char * 6),
        ("message", c_char * FAKE_TEXT_MAX),
        ("warning_sqlstate", c_char * 6),
        ("warning", c_char * FAKE_TEXT_MAX),
        ("session_pid", c_int),
        ("in_recovery", c_int),
        ("ours", c_int),
        ("fence_token", c_int64),
    ]


class FakeLockRow(Structure):
    """advlock_fake_lock_row."""
    _fields_ = [("pid", c_int), ("key", c_int64), ("mode", c_int), ("granted", c_int)]


class Latency(Structure):
    """advlock_fake_latency."""
    _fields_ = [("min_ms", c_int64), ("max_ms", c_int64), ("tail_ppm", c_uint32),
                ("tail_max_ms", c_int64)]


class Faults(Structure):
    """advlock_fake_faults."""
    _fields_ = [
        ("null_ppm", c_uint32), ("error_ppm", c_uint32), ("drop_before_ppm", c_uint32),
        ("drop_after_ppm", c_uint32), ("drop_detect_max_ms", c_int64), ("kill_ppm", c_uint32),
        ("kill_within_ms", c_int64), ("stall_ppm", c_uint32), ("stall_max_ms", c_int64),
        ("jump_ppm", c_uint32), ("jump_max_ms", c_int64),
    ]


class SimStep(Structure):
    """advlock_sim_step."""
    _fields_ = [("kind", c_int), ("lock_name", c_char_p), ("timeout_ms", c_int64),
                ("cancel_after_ms", c_int64), ("pause_ms", c_int64)]


class SimDone(Structure):
    """advlock_sim_done."""
    _fields_ = [
        ("step", SimStep),
        ("report", Report),
        ("error", c_int),
        ("command_tag", c_char * 16),
        ("server_message", c_char * FAKE_TEXT_MAX),
        ("cancel_sent", c_int),
        ("started_ms", c_int64),
        ("ended_ms", c_int64),
    ]


class SimCycler(Structure):
    """advlock_sim_cycler."""
    _fields_ = [("lock_names", POINTER(c_char_p)), ("lock_count", c_size_t), ("cycles", c_uint32),
                ("think_min_ms", c_int64), ("think_max_ms", c_int64), ("hold_min_ms", c_int64),
                ("hold_max_ms", c_int64), ("timeout_min_ms", c_int64),
                ("timeout_max_ms", c_int64), ("cancel_ppm", c_uint32), ("cancel_max_ms", c_int64)]


SIM_TRACE_FN = CFUNCTYPE(None, c_void_p, POINTER(c_char), c_size_t)


class SimConfig(Structure):
    """advlock_sim_config."""
    _fields_ = [("seed", c_uint64), ("start_ms", c_int64), ("latency", Latency),
                ("faults", Faults), ("max_virtual_ms", c_int64), ("trace", SIM_TRACE_FN),
                ("trace_user", c_void_p), ("sessions", c_int)]


class SimStats(Structure):
    """advlock_sim_stats."""
    _fields_ = [("events", c_uint64), ("queries", c_uint64),
                ("outcomes", c_uint64 * OUTCOME_COUNT), ("faults", c_uint64),
                ("waits", c_uint64), ("cancels", c_uint64), ("end_ms", c_int64)]


class SimStorage(Structure):
    """advlock_sim: ADVLOCK_SIM_SIZE opaque bytes, 8-byte aligned."""
    _fields_ = [("bytes_", c_uint64 * (SIM_SIZE // 8))]


M = POINTER(MachineStorage)

_declare(core, [
    ("advlock_strerror", c_char_p, [c_int]),
    ("advlock_derive_key", c_int, [c_char_p, c_size_t, POINTER(c_int64)]),
    ("advlock_utf8_valid", c_int, [c_char_p, c_size_t]),
    ("advlock_sql_text", c_char_p, [c_int]),
    ("advlock_sql_answer", c_int, [c_int]),
    ("advlock_outcome_name", c_char_p, [c_int]),
    ("advlock_detail_in_doubt", c_int, [c_int]),
    ("advlock_backend_state_name", c_char_p, [c_int]),
    ("advlock_describe", c_int, [POINTER(Report), c_char_p, c_size_t, c_char_p, c_char_p,
                                 c_size_t]),
    ("advlock_escape_name", c_int, [c_char_p, c_size_t, c_char_p, c_size_t]),
    ("advlock_options_init", None, [POINTER(Options)]),
    ("advlock_machine_init", None, [M]),
    ("advlock_set_options", c_int, [M, POINTER(Options)]),
    ("advlock_session_init", c_int, [POINTER(Session), c_int, c_uint64]),
    ("advlock_set_session", c_int, [M, POINTER(Session)]),
    ("advlock_get_session", c_int, [M, POINTER(Session)]),
    ("advlock_start_acquire", c_int, [M, c_char_p, c_size_t, c_int64, c_int64]),
    ("advlock_start_acquire_key", c_int, [M, c_int64, c_int64, c_int64]),
    ("advlock_start_release", c_int, [M, c_char_p, c_size_t, c_int64]),
    ("advlock_start_release_key", c_int, [M, c_int64, c_int64]),
    ("advlock_start_verify_key", c_int, [M, c_int64, c_int64]),
    ("advlock_on_result", c_int, [M, c_int, c_char_p, c_char_p, c_int64]),
    ("advlock_on_cancel_sent", c_int, [M, c_int64]),
    ("advlock_on_holders", c_int, [M, POINTER(Holder), c_size_t, c_int64]),
    ("advlock_on_session", c_int, [M, c_int, c_int, c_int, c_int64]),
    ("advlock_on_fenced", c_int, [M, c_int, c_int64, c_int64]),
    ("advlock_on_timer", c_int, [M, c_int64]),
    ("advlock_cancel", c_int, [M, c_int64]),
    ("advlock_next_action", Action, [M]),
    ("advlock_format_seconds", c_int, [c_int64, c_char_p, c_size_t]),
    ("advlock_sql_params", c_int, [c_int]),
    ("advlock_sql_guarded", c_int, [c_int]),
    ("advlock_fence_setup_sql", c_char_p, []),
])

L = POINTER(LeaseStorage)
_declare(core, [
    ("advlock_lease_plan_init", c_int, [POINTER(LeasePlan), c_int64, c_int64]),
    ("advlock_lease_init", c_int, [L, POINTER(LeasePlan)]),
    ("advlock_lease_start_setup", c_int, [L, c_int, c_int64]),
    ("advlock_lease_setup_result", c_int, [L]),
    ("advlock_lease_hold", c_int, [L, c_int64, c_uint64, c_int64]),
    ("advlock_lease_on_sent", c_int, [L, c_int64]),
    ("advlock_lease_on_result", c_int, [L, c_int, c_int64]),
    ("advlock_lease_on_timer", c_int, [L, c_int64]),
    ("advlock_lease_stop", c_int, [L]),
    ("advlock_lease_next", LeaseAction, [L]),
    ("advlock_lease_expiry_reason", c_int, [L]),
])

P = POINTER(Peer)
_declare(core, [
    ("advlock_peers_init", c_int, [POINTER(Peers), POINTER(P), c_size_t]),
    ("advlock_peers_ask", c_int, [POINTER(Peers), P, c_int64, c_int]),
    ("advlock_peers_granted", c_int, [POINTER(Peers), P]),
    ("advlock_peers_leave", c_int, [POINTER(Peers), P]),
    ("advlock_peers_count", c_size_t, [POINTER(Peers)]),
    ("advlock_peer_state", c_int, [P]),
    ("advlock_capacity_init", c_int, [POINTER(Capacity), c_int64, c_int64, c_int64, c_int]),
    ("advlock_capacity_limit", c_int64, [POINTER(Capacity)]),
    ("advlock_capacity_refuse", c_int, [POINTER(Capacity), c_int64, c_char_p, c_size_t]),
])

_fake = None


def fake():
    """Loads libadvlock_fake on first use (the drivers never need it).
    Raises ImportError when it cannot be found."""
    global _fake
    if _fake is not None:
        return _fake
    lib = _load("libadvlock_fake.so", "ADVLOCK_FAKE_LIBRARY")
    DB = POINTER(FakeDB)
    S = POINTER(SimStorage)
    _declare(lib, [
        ("advlock_prng_seed", None, [POINTER(Prng), c_uint64]),
        ("advlock_prng_next", c_uint64, [POINTER(Prng)]),
        ("advlock_prng_below", c_uint64, [POINTER(Prng), c_uint64]),
        ("advlock_prng_between", c_int64, [POINTER(Prng), c_int64, c_int64]),
        ("advlock_prng_chance", c_int, [POINTER(Prng), c_uint32]),
        ("advlock_fake_clock_init", None, [POINTER(FakeClock), c_int64]),
        ("advlock_fake_clock_now", c_int64, [POINTER(FakeClock)]),
        ("advlock_fake_clock_read", c_int64, [POINTER(FakeClock)]),
        ("advlock_fake_clock_advance_to", c_int, [POINTER(FakeClock), c_int64]),
        ("advlock_fake_clock_stall", c_int, [POINTER(FakeClock), c_int64]),
        ("advlock_fake_clock_jump", c_int, [POINTER(FakeClock), c_int64]),
        ("advlock_fake_db_init", None, [DB]),
        ("advlock_fake_db_set_time", None, [DB, c_int64]),
        ("advlock_fake_db_set_in_recovery", None, [DB, c_int]),
        ("advlock_fake_db_connect", c_int, [DB, POINTER(c_int)]),
        ("advlock_fake_db_close", c_int, [DB, c_int]),
        ("advlock_fake_db_is_open", c_int, [DB, c_int]),
        ("advlock_fake_db_exec", c_int, [DB, c_int, c_char_p, POINTER(c_int64),
                                         POINTER(FakeResult)]),
        ("advlock_fake_db_poll", c_int, [DB, c_int, POINTER(FakeResult)]),
        ("advlock_fake_db_is_waiting", c_int, [DB, c_int]),
        ("advlock_fake_db_wait_state", c_int, [DB, c_int]),
        ("advlock_fake_db_cancel", c_int, [DB, c_int]),
        ("advlock_fake_db_check_deadlock", c_int, [DB, c_int]),
        ("advlock_fake_db_holds", c_int, [DB, c_int, c_int64, c_int, POINTER(c_int),
                                          POINTER(c_int)]),
        ("advlock_fake_db_lock_rows", c_size_t, [DB, POINTER(FakeLockRow), c_size_t]),
        ("advlock_fake_db_holders", c_size_t, [DB, c_int, c_int64, POINTER(Holder), c_size_t]),
        ("advlock_fake_db_check", c_int, [DB, c_char_p, c_size_t]),
        ("advlock_sim_config_default", None, [POINTER(SimConfig)]),
        ("advlock_fake_db_exec_params", c_int, [DB, c_int, c_char_p, POINTER(c_int64), c_int,
                                                POINTER(FakeResult)]),
        ("advlock_sim_init", c_int, [S, POINTER(SimConfig)]),
        ("advlock_sim_add_script", c_int, [S, POINTER(SimStep), c_size_t, POINTER(SimDone)]),
        ("advlock_sim_add_cycler", c_int, [S, POINTER(SimCycler)]),
        ("advlock_sim_set_options", c_int, [S, c_int, POINTER(Options)]),
        ("advlock_sim_run", c_int, [S]),
        ("advlock_sim_violation", c_char_p, [S]),
        ("advlock_sim_get_stats", SimStats, [S]),
        ("advlock_sim_db", POINTER(FakeDB), [S]),
        ("advlock_sim_client_pid", c_int, [S, c_int]),
        ("advlock_sim_now", c_int64, [S]),
    ])
    _fake = lib
    return lib


# advlock_fake_db's private parts, mirrored only so that its size is right.
FAKE_MAX_SESSIONS = 256
FAKE_MAX_LOCKS = 1024
FAKE_MAX_HOLDS = 2048


class FakeTcp(Structure):
    """advlock_fake_tcp: a fake session's TCP settings."""
    _fields_ = [("user_timeout_ms", c_int32), ("keepalives_idle_s", c_int32),
                ("keepalives_interval_s", c_int32), ("keepalives_count", c_int32),
                ("check_interval_ms", c_int32)]


class _FakeSession(Structure):
    _fields_ = [("ints_", c_int * 9), ("times_", c_int64 * 4), ("claim_", c_int64),
                ("claimed_", c_int * 2), ("claim_at_begin_", c_int64), ("transport_", c_int),
                ("tcp_", FakeTcp), ("tcp_at_begin_", FakeTcp)]


class _FakeLock(Structure):
    _fields_ = [("key_", c_int64), ("in_use_", c_int), ("granted_", c_int * 2),
                ("waiting_", c_int * 2), ("holders_", c_int)]


class _FakeHold(Structure):
    _fields_ = [("session_", c_int), ("lock_", c_int), ("count_", c_int * 4)]


class FakeDB(Structure):
    """advlock_fake_db: storage touched only through the library."""
    _fields_ = [("sessions_", _FakeSession * FAKE_MAX_SESSIONS),
                ("locks_", _FakeLock * FAKE_MAX_LOCKS), ("holds_", _FakeHold * FAKE_MAX_HOLDS),
                ("next_pid_", c_int), ("now_ms_", c_int64), ("in_recovery_", c_int),
                ("used_", c_int * 3), ("fence_keys_", c_int64 * FAKE_MAX_LOCKS),
                ("fence_tokens_", c_int64 * FAKE_MAX_LOCKS), ("fences_used_", c_int),
                ("server_version_", c_int)]


# Every mirrored type, by its C name: the layout test walks this.
MIRRORS = {
    "advlock_report": Report, "advlock_action": Action, "advlock_event": Event,
    "advlock_options": Options, "advlock_holder": Holder, "advlock_session": Session,
    "advlock_machine": MachineStorage, "advlock_lease_plan": LeasePlan,
    "advlock_lease_action": LeaseAction, "advlock_lease": LeaseStorage,
    "advlock_peer": Peer, "advlock_peers": Peers, "advlock_capacity": Capacity,
    "advlock_prng": Prng, "advlock_fake_clock": FakeClock, "advlock_fake_result": FakeResult,
    "advlock_fake_lock_row": FakeLockRow, "advlock_fake_latency": Latency,
    "advlock_fake_faults": Faults, "advlock_fake_tcp": FakeTcp, "advlock_fake_db": FakeDB,
    "advlock_sim_step": SimStep, "advlock_sim_done": SimDone,
    "advlock_sim_cycler": SimCycler,
    "advlock_sim_config": SimConfig, "advlock_sim_stats": SimStats, "advlock_sim": SimStorage,
}
