/* The fake database's lease rows and TCP settings, as PostgreSQL answers
 * them over TCP and on a Unix socket, and lock-delay's marks; and the
 * lease world (the simulator's partitions, pauses and the server's own
 * ends of sessions) on a few hand-picked cuts. */
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

/* ---- lock-delay's marks ---- */

enum { KEY = 7, OTHER_KEY = 8, TOKEN_B = 55 };

/* A mark row's three columns (ADVLOCK_FAKE_ROW_SETTINGS), through the
 * answer the engine is handed, which points into *r (the fake's result). */
static advlock_answer mark(fixture *f, int pid, advlock_sql sql, int64_t token, int64_t stop_ms,
                           advlock_fake_result *r)
{
    const int64_t params[3] = {KEY, token, stop_ms};
    assert_int_equal(advlock_fake_db_exec_params(&f->db, pid, advlock_sql_text(sql), params, 3, r),
                     0);
    advlock_answer a;
    advlock_fake_answer(r, NULL, 0, &a);
    return a;
}

static void marks_are_taken_written_and_cleared_by_token(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    /* no mark: ours is written */
    advlock_answer a = mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_SETTINGS);
    assert_int_equal(a.result, ADVLOCK_RESULT_TRUE);
    assert_int_equal(a.settings[0], 0);
    assert_int_equal(a.settings[1], 0);
    assert_int_equal(a.settings[2], 1);
    /* our own mark again: written over */
    assert_int_equal(mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U + 1, &r).settings[2], 1);
    /* another token's take reads ours and writes nothing */
    a = mark(f, f->b, ADVLOCK_SQL_MARK_TAKE, TOKEN_B, 5000, &r);
    assert_int_equal(a.settings[0], TOKEN);
    assert_int_equal(a.settings[1], U + 1);
    assert_int_equal(a.settings[2], 0);
    /* a clear by another token leaves it; a write replaces it */
    assert_int_equal(mark(f, f->b, ADVLOCK_SQL_MARK_CLEAR, TOKEN_B, 0, &r).settings[2], 0);
    a = mark(f, f->b, ADVLOCK_SQL_MARK_WRITE, TOKEN_B, 5000, &r);
    assert_int_equal(a.settings[0], 0);
    assert_int_equal(a.settings[2], 1);
    a = mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r);
    assert_int_equal(a.settings[0], TOKEN_B);
    assert_int_equal(a.settings[1], 5000);
    /* the clear is by token, from any session; then the key is free */
    assert_int_equal(mark(f, f->c, ADVLOCK_SQL_MARK_CLEAR, TOKEN_B, 0, &r).settings[2], 1);
    assert_int_equal(mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r).settings[0], 0);
    /* each key has its own */
    const int64_t other[3] = {OTHER_KEY, TOKEN_B, 1};
    advlock_fake_db_exec_params(&f->db, f->b, advlock_sql_text(ADVLOCK_SQL_MARK_TAKE), other, 3,
                                &r);
    assert_int_equal(r.settings[2], 1);
}

/* A mark is a committed row: the session that wrote it may end, every
 * session may (a restart), and the next holder still reads it. */
static void a_mark_outlives_its_session(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r);
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), 0);
    assert_int_equal(advlock_fake_db_close(&f->db, f->b), 0);
    assert_int_equal(advlock_fake_db_close(&f->db, f->c), 0);
    assert_int_equal(advlock_fake_db_close(&f->db, f->d), 0);
    assert_int_equal(advlock_fake_db_connect(&f->db, &f->a), 0);
    advlock_answer a = mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN_B, 5000, &r);
    assert_int_equal(a.settings[0], TOKEN);
    assert_int_equal(a.settings[1], U);
    /* set up again for the fixture's check */
    assert_int_equal(advlock_fake_db_connect(&f->db, &f->b), 0);
    assert_int_equal(advlock_fake_db_connect(&f->db, &f->c), 0);
    assert_int_equal(advlock_fake_db_connect(&f->db, &f->d), 0);
}

static void a_standby_refuses_the_marks(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    advlock_fake_db_set_in_recovery(&f->db, 1);
    advlock_answer a = mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_int_equal(a.result, ADVLOCK_RESULT_SERVER_ERROR);
    assert_string_equal(a.sqlstate, "25006");
    mark(f, f->a, ADVLOCK_SQL_MARK_CLEAR, TOKEN, 0, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    advlock_fake_db_set_in_recovery(&f->db, 0);
    assert_int_equal(mark(f, f->a, ADVLOCK_SQL_MARK_TAKE, TOKEN, U, &r).settings[2], 1);
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

/* The holder is cut off, and 0.5 s later the server terminates its
 * session (or crashes): the lock is free at once, and the holder, which
 * hears nothing, works on till its lease runs out. Lock-delay keeps the
 * next holder out until then; without it the two overlap. */
static void a_server_end_under_a_cut_off_holder(advlock_sim_end_kind kind)
{
    advlock_sim_lease_stats st;
    advlock_sim_lease_config cfg = world(1, ADVLOCK_SIM_CUT_PARTITION, 30000);
    cfg.nends = 1;
    cfg.ends[0] = (advlock_sim_end){kind, 5500, 2000};
    cfg.lock_delay = 1;
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), 0);
    assert_int_equal(st.overlaps, 0);
    assert_int_equal(st.spurious_stops, 0);
    assert_int_equal(st.terminates + st.restarts, 1);
    assert_true(st.delay_waits >= 1);
    assert_true(st.min_handover_ms >= ADVLOCK_LEASE_MARGIN_MS);
    cfg.lock_delay = 0;
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), ADVLOCK_SIM_VIOLATION);
    assert_true(st.overlaps >= 1);
    assert_true(st.min_handover_ms < 0);
    assert_non_null(strstr(st.violation, "two holders' work overlaps"));
}

static void a_terminate_under_a_cut_off_holder(void **state)
{
    (void)state;
    a_server_end_under_a_cut_off_holder(ADVLOCK_SIM_END_TERMINATE);
}

static void a_restart_under_a_cut_off_holder(void **state)
{
    (void)state;
    a_server_end_under_a_cut_off_holder(ADVLOCK_SIM_END_RESTART);
}

static void lock_delay_needs_heartbeats(void **state)
{
    (void)state;
    advlock_sim_lease_stats st;
    advlock_sim_lease_config cfg = world(0, ADVLOCK_SIM_CUT_PARTITION, 1000);
    cfg.lock_delay = 1;
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), ADVLOCK_EINVAL);
    cfg = world(1, ADVLOCK_SIM_CUT_PARTITION, 1000);
    cfg.nends = ADVLOCK_SIM_LEASE_MAX_ENDS + 1;
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), ADVLOCK_EINVAL);
    cfg.nends = 1;
    cfg.ends[0] = (advlock_sim_end){(advlock_sim_end_kind)7, 1000, 0};
    assert_int_equal(advlock_sim_lease_run(&cfg, &st), ADVLOCK_EINVAL);
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
        T_(marks_are_taken_written_and_cleared_by_token),
        T_(a_mark_outlives_its_session),
        T_(a_standby_refuses_the_marks),
        cmocka_unit_test(a_long_partition_stops_the_holder_first),
        cmocka_unit_test(a_tolerated_blip_stops_nobody),
        cmocka_unit_test(a_paused_holder_overlaps_and_is_counted_apart),
        cmocka_unit_test(a_terminate_under_a_cut_off_holder),
        cmocka_unit_test(a_restart_under_a_cut_off_holder),
        cmocka_unit_test(lock_delay_needs_heartbeats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
