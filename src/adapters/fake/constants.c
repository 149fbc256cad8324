/*
 * advlock_fake.h's integer constants as data, as src/core/constants.c gives
 * advlock.h's: for bindings that load libadvlock_fake without a compiler.
 */
#include "advlock_fake.h"
#include "../../core/constant_table.h"

static const advlock_constant constants[] = {
    /* advlock_fake_mode */
    ENUMERATOR(advlock_fake_mode, ADVLOCK_FAKE_EXCLUSIVE),
    ENUMERATOR(advlock_fake_mode, ADVLOCK_FAKE_SHARED),
    /* advlock_fake_status */
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_TRUE),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_FALSE),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_NULL),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_VOID),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_COMMAND_OK),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_SERVER_ERROR),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_CONNECTION_LOST),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_WAITING),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROWS),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_SESSION),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_FENCED),
    ENUMERATOR(advlock_fake_status, ADVLOCK_FAKE_ROW_SETTINGS),
    /* advlock_fake_transport */
    ENUMERATOR(advlock_fake_transport, ADVLOCK_FAKE_UNIX_SOCKET),
    ENUMERATOR(advlock_fake_transport, ADVLOCK_FAKE_TCP),
    /* advlock_fake_wait */
    ENUMERATOR(advlock_fake_wait, ADVLOCK_FAKE_WAIT_NONE),
    ENUMERATOR(advlock_fake_wait, ADVLOCK_FAKE_WAIT_QUEUED),
    ENUMERATOR(advlock_fake_wait, ADVLOCK_FAKE_WAIT_GRANTED),
    ENUMERATOR(advlock_fake_wait, ADVLOCK_FAKE_WAIT_FAILED),
    /* advlock_sim_step_kind */
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_STOP),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_ACQUIRE),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_RELEASE),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_PAUSE),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_RECONNECT),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_BEGIN),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_COMMIT),
    ENUMERATOR(advlock_sim_step_kind, ADVLOCK_SIM_ROLLBACK),
    /* advlock_sim_sessions */
    ENUMERATOR(advlock_sim_sessions, ADVLOCK_SIM_SESSIONS_NONE),
    ENUMERATOR(advlock_sim_sessions, ADVLOCK_SIM_SESSIONS_DIRECT),
    ENUMERATOR(advlock_sim_sessions, ADVLOCK_SIM_SESSIONS_PROXIED),
    /* advlock_sim_cut_kind */
    ENUMERATOR(advlock_sim_cut_kind, ADVLOCK_SIM_CUT_PARTITION),
    ENUMERATOR(advlock_sim_cut_kind, ADVLOCK_SIM_CUT_PAUSE),
    /* advlock_sim_end_kind */
    ENUMERATOR(advlock_sim_end_kind, ADVLOCK_SIM_END_TERMINATE),
    ENUMERATOR(advlock_sim_end_kind, ADVLOCK_SIM_END_RESTART),
    /* limits */
    LIMIT(ADVLOCK_FAKE_MAX_SESSIONS),
    LIMIT(ADVLOCK_FAKE_MAX_LOCKS),
    LIMIT(ADVLOCK_FAKE_MAX_HOLDS),
    LIMIT(ADVLOCK_FAKE_TEXT_MAX),
    LIMIT(ADVLOCK_SIM_DIST_POINTS),
    LIMIT(ADVLOCK_SIM_DIST_MAX_US),
    LIMIT(ADVLOCK_SIM_MAX_CLIENTS),
    LIMIT(ADVLOCK_SIM_MAX_KEYS),
    LIMIT(ADVLOCK_SIM_VIOLATION_MAX),
    LIMIT(ADVLOCK_SIM_VIOLATION),
    LIMIT(ADVLOCK_SIM_SIZE),
    LIMIT(ADVLOCK_SIM_LEASE_MAX_CLIENTS),
    LIMIT(ADVLOCK_SIM_LEASE_MAX_CUTS),
    LIMIT(ADVLOCK_SIM_LEASE_MAX_ENDS),
    LIMIT(ADVLOCK_SIM_LOCKSET_MAX_SETS),
    LIMIT(ADVLOCK_SIM_LOCKSET_MAX_MEMBERS),
    LIMIT(ADVLOCK_SIM_LOCKSET_MAX_LONERS),
    LIMIT(ADVLOCK_SIM_LOCKSET_MAX_KEYS),
    /* sizes of the types a caller allocates */
    SIZE(advlock_prng),
    SIZE(advlock_fake_clock),
    SIZE(advlock_fake_result),
    SIZE(advlock_fake_lock_row),
    SIZE(advlock_fake_tcp),
    SIZE(advlock_fake_db),
    SIZE(advlock_fake_latency),
    SIZE(advlock_fake_faults),
    SIZE(advlock_sim_dist),
    SIZE(advlock_sim_model),
    SIZE(advlock_sim_step),
    SIZE(advlock_sim_done),
    SIZE(advlock_sim_cycler),
    SIZE(advlock_sim_config),
    SIZE(advlock_sim_stats),
    SIZE(advlock_sim),
    SIZE(advlock_sim_cut),
    SIZE(advlock_sim_end),
    SIZE(advlock_sim_lease_config),
    SIZE(advlock_sim_lease_stats),
    SIZE(advlock_sim_lockset_config),
    SIZE(advlock_sim_lockset_stats),
};

CONSTANT_TABLE_ACCESSOR(advlock_fake_constants, constants)
