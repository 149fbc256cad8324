/* The fake database's lease rows and TCP settings, as PostgreSQL answers
 * them over TCP and on a Unix socket; and the lease world (the simulator's
 * partitions and pauses) on a few hand-picked cuts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "advlock_fake.h"
#include "fake_db_fixture.h"

static const int64_t U = 27000, TOKEN = 99;

static advlock_fake_status row(fixture *f, int pid, advlock_sql sql, int64_t p1, int64_t p2)
{
    const int64_t params[2] = {p1, p2};
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec_params(&f->db, pid, advlock_sql_text(sql), params,
                                                 advlock_sql_params(sql), &r),
                     0);
    return r.status;
}

static advlock_fake_tcp settings(fixture *f, int pid)
{
    advlock_fake_tcp t;
    assert_int_equal(advlock_fake_db_tcp_settings(&f->db, pid, &t), 0);
    return t;
}

static void setup_applies_over_tcp_only(void **state)
{
    fixture *f = *state;
    assert_int_equal(advlock_fake_db_set_transport(&f->db, f->a, ADVLOCK_FAKE_TCP), 0);
    assert_int_equal(settings(f, f->a).keepalives_idle_s, 7200);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_LEASE_SETUP, U, 0), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_tcp t = settings(f, f->a);
    assert_int_equal(t.user_timeout_ms, U);
    assert_int_equal(t.keepalives_idle_s, 25);
    assert_int_equal(t.keepalives_interval_s, 1);
    assert_int_equal(t.keepalives_count, 2);
    assert_int_equal(t.check_interval_ms, 1000);
    /* a new session is a Unix socket's: NULL, every TCP setting 0 */
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_LEASE_SETUP, U, 0), ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(settings(f, f->b).user_timeout_ms, 0);
    assert_int_equal(settings(f, f->b).keepalives_idle_s, 0);
}

static void heartbeat_checks_the_setting(void **state)
{
    fixture *f = *state;
    advlock_fake_db_set_transport(&f->db, f->a, ADVLOCK_FAKE_TCP);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_HEARTBEAT, U, 0), ADVLOCK_FAKE_ROW_FALSE);
    row(f, f->a, ADVLOCK_SQL_LEASE_SETUP, U, 0);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_HEARTBEAT, U, 0), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_HEARTBEAT, U + 1000, 0), ADVLOCK_FAKE_ROW_FALSE);
    /* a Unix socket needs no setting */
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_HEARTBEAT, U, 0), ADVLOCK_FAKE_ROW_TRUE);
}

static void a_rolled_back_setup_is_undone_and_discard_resets(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    advlock_fake_db_set_transport(&f->db, f->a, ADVLOCK_FAKE_TCP);
    advlock_fake_db_exec(&f->db, f->a, "BEGIN", NULL, &r);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_LEASE_SETUP, U, 0), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db_exec(&f->db, f->a, "ROLLBACK", NULL, &r);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_HEARTBEAT, U, 0), ADVLOCK_FAKE_ROW_FALSE);
    row(f, f->a, ADVLOCK_SQL_LEASE_SETUP, U, 0);
    advlock_fake_db_exec(&f->db, f->a, "DISCARD ALL", NULL, &r);
    assert_int_equal(settings(f, f->a).user_timeout_ms, 0);
    assert_int_equal(settings(f, f->a).keepalives_idle_s, 7200);
}

static void guarded_heartbeat_only_on_the_claimed_session(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    const int64_t claim[2] = {TOKEN, f->a};
    advlock_fake_db_exec_params(&f->db, f->a, advlock_sql_text(ADVLOCK_SQL_SESSION), claim, 2, &r);
    assert_int_equal(r.ours, 1);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_HEARTBEAT_GUARDED, U, TOKEN), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_HEARTBEAT_GUARDED, U, TOKEN), ADVLOCK_FAKE_ROW_NULL);
}

/* ---- the lease world ---- */

static advlock_sim_lease_config world(int heartbeats, advlock_sim_cut_kind kind, int64_t length)
{
    advlock_sim_lease_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = 1;
    cfg.clients = 2;
    cfg.lease_ms = 20000;
    cfg.stop_ms = 2000;
    cfg.heartbeats = heartbeats;
    cfg.run_ms = 60000;
    cfg.hold_min_ms = cfg.hold_max_ms = 50000; /* the first holder outlasts the cut */
    cfg.latency_max_ms = 2;
    cfg.ncuts = 1;
    cfg.cuts[0] = (advlock_sim_cut){kind, 5000, length, -1};
    return cfg;
}

static void a_long_partition_stops_the_holder_first(void **state)
{
    (void)state;
    advlock_sim_lease_stats st;
    advlock_sim_lease_config cfg = world(1, ADVLOCK_SIM_CUT_PARTITION, 30000);
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), 0);
    assert_true(st.expiries >= 1);
    assert_true(st.releases >= 1);
    assert_int_equal(st.overlaps, 0);
    assert_true(st.min_stop_margin_ms >= 1000); /* the plan's margin */
    /* without heartbeats the same cut gives two holders */
    cfg = world(0, ADVLOCK_SIM_CUT_PARTITION, 30000);
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), ADVLOCK_SIM_VIOLATION);
    assert_true(st.overlaps >= 1);
    assert_non_null(strstr(st.violation, "two holders' work overlaps"));
}

static void a_tolerated_blip_stops_nobody(void **state)
{
    (void)state;
    advlock_lease_plan plan;
    advlock_lease_plan_init(&plan, 20000, 2000);
    advlock_sim_lease_stats st;
    advlock_sim_lease_config cfg =
        world(1, ADVLOCK_SIM_CUT_PARTITION, advlock_sim_lease_tolerated_blip_ms(&plan));
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), 0);
    assert_int_equal(st.blips, 1);
    assert_int_equal(st.expiries, 0);
}

static void a_paused_holder_overlaps_and_is_counted_apart(void **state)
{
    (void)state;
    advlock_sim_lease_stats st;
    advlock_sim_lease_config cfg = world(1, ADVLOCK_SIM_CUT_PAUSE, 30000);
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), 0);
    assert_int_equal(st.overlaps, 0);
    assert_true(st.paused_overlaps >= 1);
}

int main(void)
{
#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T_(setup_applies_over_tcp_only),
        T_(heartbeat_checks_the_setting),
        T_(a_rolled_back_setup_is_undone_and_discard_resets),
        T_(guarded_heartbeat_only_on_the_claimed_session),
        cmocka_unit_test(a_long_partition_stops_the_holder_first),
        cmocka_unit_test(a_tolerated_blip_stops_nobody),
        cmocka_unit_test(a_paused_holder_overlaps_and_is_counted_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
