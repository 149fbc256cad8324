"""The C ABI of libadvlock and libadvlock_fake, mirrored with ctypes.

This module is the one place that knows the headers' layouts and the
libraries' symbols: include/advlock.h and include/advlock_fake.h are the
source of truth. Their constants (enumerators, limits, the sizes of opaque
types) are read from the library at import (advlock_constants), never
restated; python/tests/test_layout.py checks the structures mirrored below
against the sizes and offsets a C program compiled from the headers reports.
When a header's structure changes, this file is the one edit.

Libraries are found by the rules docs/python.md lists ("Where the package
finds its libraries"), in _candidates below.
No compiler is involved: the libraries are loaded as they are (ABI mode).
"""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_char, c_char_p, c_int, c_int32,
                    c_int64, c_size_t, c_uint8, c_uint64, c_void_p)
from typing import Any, Dict, List, Sequence, Tuple, Type

INT64_MAX = (1 << 63) - 1
# The shared libraries' soname version (the Makefile's SOVERSION).
SOVERSION = "1"

# ---- loading -----------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(soname: str, env: str) -> List[str]:
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
        from . import _installed  # type: ignore[attr-defined]  # written by `make install-python`
        out.append(os.path.join(_installed.LIBDIR, soname + "." + SOVERSION))
    except ImportError:
        pass
    out.append(soname + "." + SOVERSION)
    return out


def load(soname: str, env: str) -> ctypes.CDLL:
    """The shared library soname, found by the rules of _candidates (env
    names the variable that overrides them). Raises ImportError, with every
    place tried, when none loads."""
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


Signature = Tuple[str, Any, List[Any]]


def declare(lib: ctypes.CDLL, table: Sequence[Signature]) -> None:
    """Gives each function of table (name, restype, argtypes) its C types."""
    for name, restype, argtypes in table:
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


core = load("libadvlock.so", "ADVLOCK_LIBRARY")

# ---- the headers' constants, from the library itself -------------------------


class Constant(Structure):
    """advlock_constant: one row of a library's table of constants."""
    _fields_ = [("group", c_char_p), ("name", c_char_p), ("value", c_int64)]


Groups = Dict[str, Dict[str, int]]


def read_constants(table_fn: Any) -> Groups:
    """A library's table of constants (advlock_constants,
    advlock_fake_constants) by group (an enum's C type name, "limit",
    "sizeof"), then by C name."""
    table_fn.restype = POINTER(Constant)
    table_fn.argtypes = [POINTER(c_size_t)]
    count = c_size_t()
    rows = table_fn(byref(count))
    groups: Groups = {}
    for i in range(count.value):
        row = rows[i]
        groups.setdefault(row.group.decode(), {})[row.name.decode()] = row.value
    return groups


def flatten(groups: Groups) -> Dict[str, int]:
    """Every constant of groups by its C name (the names are unique)."""
    return {name: value for group in groups.values() for name, value in group.items()}


# include/advlock.h's enumerators, limits and sizes as the compiler gave them.
CONSTANTS = read_constants(core.advlock_constants)
C = flatten(CONSTANTS)

# ---- advlock.h: enums (plain ints; the public IntEnums live in _machine) ----

ADVLOCK_OK = C["ADVLOCK_OK"]
ADVLOCK_EINVAL = C["ADVLOCK_EINVAL"]
ADVLOCK_EUTF8 = C["ADVLOCK_EUTF8"]
ADVLOCK_EMISUSE = C["ADVLOCK_EMISUSE"]
ADVLOCK_ECRYPTO = C["ADVLOCK_ECRYPTO"]
ADVLOCK_ENOMEM = C["ADVLOCK_ENOMEM"]

ACTION_NONE = C["ADVLOCK_ACTION_NONE"]
ACTION_QUERY = C["ADVLOCK_ACTION_QUERY"]
ACTION_SLEEP = C["ADVLOCK_ACTION_SLEEP"]
ACTION_DONE = C["ADVLOCK_ACTION_DONE"]
ACTION_CANCEL_QUERY = C["ADVLOCK_ACTION_CANCEL_QUERY"]
ANSWER_BOOLEAN = C["ADVLOCK_ANSWER_BOOLEAN"]
ANSWER_VOID = C["ADVLOCK_ANSWER_VOID"]
ANSWER_HOLDERS = C["ADVLOCK_ANSWER_HOLDERS"]
ANSWER_SESSION = C["ADVLOCK_ANSWER_SESSION"]
ANSWER_FENCED = C["ADVLOCK_ANSWER_FENCED"]
ANSWER_CAPACITY = C["ADVLOCK_ANSWER_CAPACITY"]
RESULT_TRUE = C["ADVLOCK_RESULT_TRUE"]
RESULT_FALSE = C["ADVLOCK_RESULT_FALSE"]
RESULT_NULL = C["ADVLOCK_RESULT_NULL"]
RESULT_SERVER_ERROR = C["ADVLOCK_RESULT_SERVER_ERROR"]
RESULT_CONNECTION_LOST = C["ADVLOCK_RESULT_CONNECTION_LOST"]
SQL_COUNT = C["ADVLOCK_SQL_COUNT"]
SQL_SESSION = C["ADVLOCK_SQL_SESSION"]  # its answer is a row for advlock_on_session
SQL_LEASE_SETUP = C["ADVLOCK_SQL_LEASE_SETUP"]
SQL_HEARTBEAT = C["ADVLOCK_SQL_HEARTBEAT"]
SQL_HEARTBEAT_GUARDED = C["ADVLOCK_SQL_HEARTBEAT_GUARDED"]
SQL_TRY_LOCK_FENCED = C["ADVLOCK_SQL_TRY_LOCK_FENCED"]
SQL_TRY_XACT_LOCK_FENCED = C["ADVLOCK_SQL_TRY_XACT_LOCK_FENCED"]
SQL_CAPACITY = C["ADVLOCK_SQL_CAPACITY"]  # the lock table's settings
CAPACITY_SHARE_DEFAULT = C["ADVLOCK_CAPACITY_SHARE_DEFAULT"]
MESSAGE_MAX = C["ADVLOCK_MESSAGE_MAX"]
MACHINE_SIZE = C["advlock_machine"]

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
        ("lock_delay", c_int),
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


def opaque(cname: str, size: int) -> Type[Structure]:
    """A ctypes type of size opaque bytes, 8-byte aligned, for a C type
    whose fields are private (touched only through the library)."""
    return type(cname, (Structure,), {
        "_fields_": [("bytes_", c_uint64 * (size // 8))],
        "__doc__": "%s: %d opaque bytes, touched only through the library." % (cname, size)})


MachineStorage = opaque("advlock_machine", MACHINE_SIZE)


# ---- advlock.h: leases ---------------------------------------------------------

LEASE_DEFAULT_MS = C["ADVLOCK_LEASE_DEFAULT_MS"]
LEASE_MAX_MS = C["ADVLOCK_LEASE_MAX_MS"]
LEASE_QUERY = C["ADVLOCK_LEASE_QUERY"]
LEASE_EXPIRED = C["ADVLOCK_LEASE_EXPIRED"]
LEASE_APPLIED = C["ADVLOCK_LEASE_APPLIED"]
LEASE_UNIX_SOCKET = C["ADVLOCK_LEASE_UNIX_SOCKET"]
LEASE_NOT_APPLIED = C["ADVLOCK_LEASE_NOT_APPLIED"]
LEASE_PROXIED = C["ADVLOCK_LEASE_PROXIED"]


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


# advlock_lease: one lease on one connection; private fields, copyable.
LeaseStorage = opaque("advlock_lease", C["advlock_lease"])


# ---- advlock.h: in-process exclusion (lock sets) -------------------------------

PEER_HELD = C["ADVLOCK_PEER_HELD"]
# advlock_peer: one lock's interest in a key, zeroed (ADVLOCK_PEER_OUT) when
# made, never moved while in a table; advlock_peers: the table over a bucket
# array its owner keeps alive. Both private.
Peer = opaque("advlock_peer", C["advlock_peer"])
Peers = opaque("advlock_peers", C["advlock_peers"])


class Capacity(Structure):
    """advlock_capacity: the server's lock-table settings and the share taken."""
    _fields_ = [("max_locks_per_transaction", c_int64), ("max_connections", c_int64),
                ("max_prepared_transactions", c_int64), ("share_percent", c_int32)]


M = POINTER(MachineStorage)

declare(core, [
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
    ("advlock_describe_lease_lost", c_int, [c_char_p, c_size_t, c_char_p, c_char_p, c_size_t]),
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
declare(core, [
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
declare(core, [
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

# ---- advlock.h: the connection engine ------------------------------------------

CAPS_CANCEL = C["ADVLOCK_CAPS_CANCEL"]
STATEMENT_QUERY = C["ADVLOCK_STATEMENT_QUERY"]
STATEMENT_CANCEL = C["ADVLOCK_STATEMENT_CANCEL"]
CONN_DONE = C["ADVLOCK_CONN_DONE"]
CONN_LOST = C["ADVLOCK_CONN_LOST"]
CONN_WARNING = C["ADVLOCK_CONN_WARNING"]
MemberStorage = opaque("advlock_member", C["advlock_member"])
SlotStorage = opaque("advlock_conn_slot", C["advlock_conn_slot"])
ConnStorage = opaque("advlock_conn", C["advlock_conn"])


class Statement(Structure):
    """advlock_statement."""
    _fields_ = [("kind", c_int), ("sql", c_int), ("form", c_int), ("param", c_int64),
                ("param2", c_int64), ("param3", c_int64), ("member", c_void_p),
                ("sync_follows", c_int)]


class Answer(Structure):
    """advlock_answer."""
    _fields_ = [("result", c_int), ("aborted", c_int), ("sqlstate", c_char_p),
                ("message", c_char_p), ("in_transaction", c_int), ("server_pid", c_int),
                ("in_recovery", c_int), ("ours", c_int), ("fence_token", c_int64),
                ("settings", c_int64 * 3), ("holders", POINTER(Holder)),
                ("nholders", c_size_t)]


class ConnEvent(Structure):
    """advlock_conn_event."""
    _fields_ = [("kind", c_int), ("member", c_void_p)]


CN, MB = POINTER(ConnStorage), POINTER(MemberStorage)
declare(core, [
    ("advlock_conn_init", c_int, [CN, POINTER(SlotStorage), c_size_t, POINTER(P), c_size_t,
                                  c_int, c_uint64, c_int]),
    ("advlock_member_init", None, [MB]),
    ("advlock_conn_start_acquire", c_int, [CN, MB, c_char_p, c_size_t, c_int64,
                                           POINTER(Options), c_int64]),
    ("advlock_conn_start_release", c_int, [CN, MB, c_int64]),
    ("advlock_conn_start_verify", c_int, [CN, MB, c_int64]),
    ("advlock_conn_cancel", c_int, [CN, MB, c_int64]),
    ("advlock_conn_set_lease", c_int, [CN, c_int64, c_int64]),
    ("advlock_conn_set_capacity_share", c_int, [CN, c_int]),
    ("advlock_conn_poll_statement", c_int, [CN, POINTER(Statement), c_int64]),
    ("advlock_conn_unsend", None, [CN, c_int, c_char_p, c_int64]),
    ("advlock_conn_on_answer", c_int, [CN, POINTER(Answer), c_int64]),
    ("advlock_conn_on_timer", None, [CN, c_int64]),
    ("advlock_conn_next_wake", c_int64, [CN]),
    ("advlock_conn_on_closed", None, [CN, c_char_p, c_char_p, c_int64]),
    ("advlock_conn_on_reset", c_int, [CN, c_int, c_uint64, c_int64]),
    ("advlock_conn_on_transaction", None, [CN, c_int]),
    ("advlock_conn_forget", None, [CN, c_int64]),
    ("advlock_conn_session", POINTER(Session), [CN]),
    ("advlock_conn_busy", c_size_t, [CN]),
    ("advlock_conn_outstanding", c_size_t, [CN]),
    ("advlock_conn_poll_event", c_int, [CN, POINTER(ConnEvent)]),
    ("advlock_conn_turn", c_int, [CN, POINTER(Answer), POINTER(Statement), c_int64,
                                  POINTER(c_int64)]),
    ("advlock_conn_let_go", None, [CN, MB]),
    ("advlock_conn_watching", c_int, [CN]),
    ("advlock_conn_head", c_int, [CN, POINTER(Statement)]),
    ("advlock_conn_on_notice", None, [CN, c_char_p, c_char_p, c_int64]),
    ("advlock_conn_warning", c_char_p, [CN]),
    ("advlock_conn_warning_sqlstate", c_char_p, [CN]),
    ("advlock_member_busy", c_int, [MB]),
    ("advlock_member_held", c_int, [MB]),
    ("advlock_member_report", POINTER(Report), [MB]),
    ("advlock_member_words", c_char_p, [MB]),
    ("advlock_member_sqlstate", c_char_p, [MB]),
    ("advlock_member_lease_expiry", c_int, [MB]),
    ("advlock_answer_init", None, [POINTER(Answer), c_int]),
])


def fake() -> ctypes.CDLL:
    """libadvlock_fake, loaded on first use (the drivers never need it).
    Raises ImportError when it cannot be found."""
    from . import _fake_binding
    return _fake_binding.lib


# Every mirrored type, by its C name: the layout test walks this.
MIRRORS: Dict[str, Type[Structure]] = {
    "advlock_report": Report, "advlock_action": Action, "advlock_event": Event,
    "advlock_options": Options, "advlock_holder": Holder, "advlock_session": Session,
    "advlock_machine": MachineStorage, "advlock_lease_plan": LeasePlan,
    "advlock_lease_action": LeaseAction, "advlock_lease": LeaseStorage,
    "advlock_peer": Peer, "advlock_peers": Peers, "advlock_capacity": Capacity,
    "advlock_constant": Constant, "advlock_member": MemberStorage,
    "advlock_conn_slot": SlotStorage, "advlock_conn": ConnStorage,
    "advlock_statement": Statement, "advlock_answer": Answer, "advlock_conn_event": ConnEvent,
}
