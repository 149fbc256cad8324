/* The lock-set world (advlock_sim_lockset_run): what it refuses, that a set
 * answers its own conflicts, pipelines directly and sends one statement at
 * a time behind a proxy, that a terminated session makes held members
 * LOST, and that a seed replays exactly. tests/sim/lockset_campaign.c runs
 * it over many seeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "advlock_fake.h"

/* One set of eight callers contending for one name, no faults. */
static advlock_sim_lockset_config crowd(uint64_t seed)
{
    advlock_sim_lockset_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = seed;
    cfg.sets = 1;
    cfg.members = 8;
    cfg.keys = 1;
    cfg.cycles = 3;
    cfg.latency_max_ms = 5;
    cfg.think_max_ms = 20;
    cfg.hold_max_ms = 200;
    cfg.timeout_max_ms = 1000;
    return cfg;
}

static void bad_worlds_are_refused(void **state)
{
    (void)state;
    advlock_sim_lockset_stats st;
    advlock_sim_lockset_config cfg = crowd(1);
    assert_int_equal(advlock_sim_lockset_run(NULL, &st), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_lockset_run(&cfg, NULL), ADVLOCK_EINVAL);
    static const struct {
        int sets, members, loners, keys;
        unsigned cycles;
        int64_t latency;
    } bad[] = {
        {0, 8, 0, 1, 1, 0},  {ADVLOCK_SIM_LOCKSET_MAX_SETS + 1, 8, 0, 1, 1, 0},
        {1, 0, 0, 1, 1, 0},  {1, ADVLOCK_SIM_LOCKSET_MAX_MEMBERS + 1, 0, 1, 1, 0},
        {1, 8, -1, 1, 1, 0}, {1, 8, ADVLOCK_SIM_LOCKSET_MAX_LONERS + 1, 1, 1, 0},
        {1, 8, 0, 0, 1, 0},  {1, 8, 0, ADVLOCK_SIM_LOCKSET_MAX_KEYS + 1, 1, 0},
        {1, 8, 0, 1, 0, 0},  {1, 8, 0, 1, 1, -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg = crowd(1);
        cfg.sets = bad[i].sets;
        cfg.members = bad[i].members;
        cfg.loners = bad[i].loners;
        cfg.keys = bad[i].keys;
        cfg.cycles = bad[i].cycles;
        cfg.latency_max_ms = bad[i].latency;
        assert_int_equal(advlock_sim_lockset_run(&cfg, &st), ADVLOCK_EINVAL);
    }
}

/* Eight callers of one set on one exclusive name: conflicts never reach
 * the server, so it only ever sees one caller's statement at a time. */
static void a_set_answers_its_own_conflicts(void **state)
{
    (void)state;
    advlock_sim_lockset_config cfg = crowd(7);
    advlock_sim_lockset_stats st;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &st), 0);
    assert_string_equal(st.violation, "");
    assert_true(st.local_busy > 0);
    /* no one else holds the name: the server never says busy */
    assert_int_equal(st.server_busy, 0);
    assert_true(st.acquired > 0);
    assert_int_equal(st.released, st.acquired);
    assert_int_equal(st.max_in_flight, 1);
}

/* Shared callers all go to the server: directly, their statements are
 * pipelined. */
static void shared_callers_pipeline(void **state)
{
    (void)state;
    advlock_sim_lockset_config cfg = crowd(7);
    cfg.members = 16;
    cfg.shared_ppm = 1000000;
    advlock_sim_lockset_stats st;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &st), 0);
    assert_int_equal(st.local_busy, 0);
    assert_true(st.max_in_flight > 1);
}

static void behind_a_proxy_one_statement_at_a_time(void **state)
{
    (void)state;
    advlock_sim_lockset_config cfg = crowd(7);
    cfg.proxied = 1;
    cfg.members = 16;
    cfg.shared_ppm = 1000000;
    advlock_sim_lockset_stats st;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &st), 0);
    assert_true(st.acquired > 0);
    assert_int_equal(st.max_in_flight, 1);
}

/* Ordinary clients on the same name: the server refuses some tries. */
static void ordinary_clients_contend_at_the_server(void **state)
{
    (void)state;
    advlock_sim_lockset_config cfg = crowd(11);
    cfg.loners = 4;
    cfg.shared_ppm = 300000;
    advlock_sim_lockset_stats st;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &st), 0);
    assert_true(st.server_busy > 0);
    assert_true(st.local_busy > 0);
}

/* Every connection's session is terminated once: held members are LOST,
 * and the run still ends with nothing held (the world checks it). */
static void terminated_sessions_make_held_members_lost(void **state)
{
    (void)state;
    uint64_t kills = 0, lost = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        advlock_sim_lockset_config cfg = crowd(seed);
        cfg.kill_ppm = 1000000;
        cfg.hold_max_ms = 2000;
        cfg.shared_ppm = 500000;
        advlock_sim_lockset_stats st;
        assert_int_equal(advlock_sim_lockset_run(&cfg, &st), 0);
        kills += st.kills;
        lost += st.lost;
    }
    assert_true(kills > 0);
    assert_true(lost > 0);
}

static void count_line(void *user, const char *line)
{
    (void)line;
    (*(int *)user)++;
}

static void a_seed_replays_exactly(void **state)
{
    (void)state;
    advlock_sim_lockset_config cfg = crowd(5);
    cfg.loners = 2;
    cfg.kill_ppm = 500000;
    cfg.error_ppm = 50000;
    cfg.cancel_ppm = 200000;
    advlock_sim_lockset_stats a, b;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &a), 0);
    int lines = 0;
    cfg.trace = count_line;
    cfg.trace_user = &lines;
    assert_int_equal(advlock_sim_lockset_run(&cfg, &b), 0);
    assert_memory_equal(&a, &b, sizeof a);
    assert_true(lines > 0);
}

#define T(name) cmocka_unit_test(name)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(bad_worlds_are_refused),
        T(a_set_answers_its_own_conflicts),
        T(shared_callers_pipeline),
        T(behind_a_proxy_one_statement_at_a_time),
        T(ordinary_clients_contend_at_the_server),
        T(terminated_sessions_make_held_members_lost),
        T(a_seed_replays_exactly),
    };
    return cmocka_run_group_tests_name("sim_lockset", tests, NULL, NULL);
}
