"""libadvlock_fake (include/advlock_fake.h), mirrored with ctypes: the fake
database, clock and simulator advlock.fake wraps. Loaded when first
imported (advlock.fake imports it; the drivers never do); the constants and
the sizes of the opaque types are the library's own (advlock_fake_constants),
the public structures' layouts are checked by python/tests/test_layout.py.
"""

from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int, c_int64, c_size_t,
                    c_uint32, c_uint64, c_void_p)
from typing import Dict, Type

from ._binding import (C, Holder, Options, Report, declare, flatten, load, opaque,
                       read_constants)

lib = load("libadvlock_fake.so", "ADVLOCK_FAKE_LIBRARY")

# include/advlock_fake.h's enumerators, limits and sizes as the compiler gave them.
CONSTANTS = read_constants(lib.advlock_fake_constants)
F = flatten(CONSTANTS)

FAKE_TEXT_MAX = F["ADVLOCK_FAKE_TEXT_MAX"]
SIM_VIOLATION = F["ADVLOCK_SIM_VIOLATION"]
OUTCOME_COUNT = C["ADVLOCK_OUTCOME_COUNT"]

# Types whose fields are private: only their sizes are ABI.
Prng = opaque("advlock_prng", F["advlock_prng"])
FakeClock = opaque("advlock_fake_clock", F["advlock_fake_clock"])
FakeDB = opaque("advlock_fake_db", F["advlock_fake_db"])
SimStorage = opaque("advlock_sim", F["advlock_sim"])


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
        ("settings", c_int64 * 3),
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


DB = POINTER(FakeDB)
S = POINTER(SimStorage)
declare(lib, [
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


# Every mirrored type, by its C name: the layout test walks this.
MIRRORS: Dict[str, Type[Structure]] = {
    "advlock_prng": Prng, "advlock_fake_clock": FakeClock, "advlock_fake_result": FakeResult,
    "advlock_fake_lock_row": FakeLockRow, "advlock_fake_latency": Latency,
    "advlock_fake_faults": Faults, "advlock_fake_db": FakeDB,
    "advlock_sim_step": SimStep, "advlock_sim_done": SimDone, "advlock_sim_cycler": SimCycler,
    "advlock_sim_config": SimConfig, "advlock_sim_stats": SimStats, "advlock_sim": SimStorage,
}
