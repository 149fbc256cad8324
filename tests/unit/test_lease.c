/* The lease engine: the plan's arithmetic, the setup, heartbeats, renewal
 * and every way a lease expires, driven by hand on a made-up clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "advlock.h"

enum { K = 10000 }; /* advlock run's default --kill-after */

static advlock_lease_plan plan_of(int64_t lease_ms, int64_t stop_ms)
{
    advlock_lease_plan p;
    assert_int_equal(advlock_lease_plan_init(&p, lease_ms, stop_ms), 0);
    return p;
}

/* A lease of 30 s (D 16 s, H 4 s) held from t0 (the grant's send and
 * now), direct (token 0) or behind a proxy. Filled in place, not returned:
 * a returned struct's padding is not copied, and the tests compare bytes. */
static void hold_at(advlock_lease *l, int64_t t0, uint64_t token)
{
    advlock_lease_plan p = plan_of(30000, K);
    assert_int_equal(advlock_lease_init(l, &p), 0);
    assert_int_equal(advlock_lease_hold(l, t0, token, t0), 0);
}

static advlock_lease_action next(const advlock_lease *l)
{
    return advlock_lease_next(l);
}

static void expect_wait(const advlock_lease *l, int64_t wake_at, int64_t stop_at)
{
    advlock_lease_action a = next(l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_WAIT);
    assert_int_equal(a.wake_at_ms, wake_at);
    assert_int_equal(a.stop_at_ms, stop_at);
}

static void expect_heartbeat(const advlock_lease *l, int64_t stop_at)
{
    advlock_lease_action a = next(l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_QUERY);
    assert_int_equal(a.sql, ADVLOCK_SQL_HEARTBEAT);
    assert_string_equal(a.sql_text, advlock_sql_text(ADVLOCK_SQL_HEARTBEAT));
    assert_int_equal(a.param, 27000);
    assert_int_equal(a.wake_at_ms, stop_at);
    assert_int_equal(a.stop_at_ms, stop_at);
}

static void expect_expired(const advlock_lease *l, advlock_lease_expiry why, int64_t stop_at)
{
    advlock_lease_action a = next(l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_EXPIRED);
    assert_int_equal(a.stop_at_ms, stop_at);
    assert_int_equal(advlock_lease_expiry_reason(l), why);
}

/* One heartbeat: due at `due`, sent at `sent`, answered r at `answered`. */
static void beat(advlock_lease *l, int64_t due, int64_t sent, advlock_result r, int64_t answered)
{
    assert_int_equal(advlock_lease_on_timer(l, due), 0);
    assert_int_equal(next(l).kind, ADVLOCK_LEASE_QUERY);
    assert_int_equal(advlock_lease_on_sent(l, sent), 0);
    assert_int_equal(advlock_lease_on_result(l, r, answered), 0);
}

static void plan_for_30_and_60_seconds(void **state)
{
    (void)state;
    advlock_lease_plan p = plan_of(30000, K);
    assert_int_equal(p.lease_ms, 30000);
    assert_int_equal(p.stop_ms, K);
    assert_int_equal(p.user_timeout_ms, 27000);
    assert_int_equal(p.keepalives_idle_s, 25);
    assert_int_equal(p.keepalives_interval_s, 1);
    assert_int_equal(p.keepalives_count, 2);
    assert_int_equal(p.check_interval_ms, 1000);
    assert_int_equal(p.deadline_ms, 16000);
    assert_int_equal(p.heartbeat_ms, 4000);

    p = plan_of(60000, K);
    assert_int_equal(p.user_timeout_ms, 57000);
    assert_int_equal(p.keepalives_idle_s, 55);
    assert_int_equal(p.deadline_ms, 46000);
    assert_int_equal(p.heartbeat_ms, 11500);

    /* U is whole seconds, and D follows from it. */
    p = plan_of(30999, K);
    assert_int_equal(p.user_timeout_ms, 27000);
    assert_int_equal(p.deadline_ms, 16000);
    p = plan_of(30000, 2500);
    assert_int_equal(p.deadline_ms, 23500);
    assert_int_equal(p.heartbeat_ms, 5875);
}

static void plan_refusals_leave_it_unchanged(void **state)
{
    (void)state;
    advlock_lease_plan p, before;
    memset(&p, 0x5a, sizeof p);
    memcpy(&before, &p, sizeof p);
    /* The shortest lease for K: U = K + margin + 2 s, plus 3 s: K + 6 s. */
    assert_int_equal(advlock_lease_plan_init(&p, 15999, K), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, 0, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, 5999, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, -30000, K), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, 30000, -1), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, 30000, INT64_MAX), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, ADVLOCK_LEASE_MAX_MS + 1, K), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(&p, INT64_MAX, K), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_plan_init(NULL, 30000, K), ADVLOCK_EINVAL);
    assert_memory_equal(&p, &before, sizeof p);

    assert_int_equal(plan_of(16000, K).deadline_ms, ADVLOCK_LEASE_MIN_DEADLINE_MS);
    assert_int_equal(plan_of(6000, 0).deadline_ms, ADVLOCK_LEASE_MIN_DEADLINE_MS);
    /* A stop time that rounds U up a whole second. */
    assert_int_equal(advlock_lease_plan_init(&p, 16999, K + 500), ADVLOCK_EINVAL);
    assert_int_equal(plan_of(17000, K + 500).deadline_ms, 2500);
    advlock_lease_plan longest = plan_of(ADVLOCK_LEASE_MAX_MS, K);
    /* Linux's ceiling for tcp_keepalives_idle. */
    assert_true(longest.keepalives_idle_s <= 32767);
}

static void set_options_refuses_a_lease_the_plan_refuses(void **state)
{
    (void)state;
    advlock_machine m;
    advlock_machine_init(&m);
    advlock_options o;
    advlock_options_init(&o);
    assert_int_equal(advlock_set_options(&m, &o), 0); /* lease_ms 0: none */
    o.lease_stop_ms = -5;                             /* no lease: ignored */
    assert_int_equal(advlock_set_options(&m, &o), 0);
    o.lease_ms = 30000;
    assert_int_equal(advlock_set_options(&m, &o), ADVLOCK_EINVAL);
    o.lease_stop_ms = K;
    assert_int_equal(advlock_set_options(&m, &o), 0);
    o.lease_ms = 15999;
    assert_int_equal(advlock_set_options(&m, &o), ADVLOCK_EINVAL);
    o.lease_ms = -1;
    assert_int_equal(advlock_set_options(&m, &o), ADVLOCK_EINVAL);
}

static void options_text(void **state)
{
    (void)state;
    advlock_lease_plan p = plan_of(30000, K);
    static const char want[] = "-c tcp_user_timeout=27000 -c tcp_keepalives_idle=25"
                               " -c tcp_keepalives_interval=1 -c tcp_keepalives_count=2"
                               " -c client_connection_check_interval=1000";
    char buf[ADVLOCK_LEASE_OPTIONS_MAX];
    assert_int_equal(advlock_lease_options(&p, buf, sizeof buf), (int)strlen(want));
    assert_string_equal(buf, want);
    char small[8];
    assert_int_equal(advlock_lease_options(&p, small, sizeof small), (int)strlen(want));
    assert_string_equal(small, "-c tcp_");
    assert_int_equal(advlock_lease_options(&p, NULL, 0), (int)strlen(want));
    assert_int_equal(advlock_lease_options(&p, NULL, 1), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_options(NULL, buf, sizeof buf), ADVLOCK_EINVAL);
    /* The longest plan fits the documented size. */
    p = plan_of(ADVLOCK_LEASE_MAX_MS, 0);
    assert_true(advlock_lease_options(&p, NULL, 0) < ADVLOCK_LEASE_OPTIONS_MAX);
}

static advlock_lease_setup setup_answering(int has_answer, advlock_result r)
{
    advlock_lease_plan p = plan_of(30000, K);
    advlock_lease l;
    advlock_lease_init(&l, &p);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(advlock_lease_start_setup(&l, 0, 100), 0);
    advlock_lease_action a = next(&l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_QUERY);
    assert_int_equal(a.sql, ADVLOCK_SQL_LEASE_SETUP);
    assert_string_equal(a.sql_text, advlock_sql_text(ADVLOCK_SQL_LEASE_SETUP));
    assert_int_equal(a.param, 27000);
    assert_int_equal(a.wake_at_ms, INT64_MAX);
    assert_int_equal(a.stop_at_ms, INT64_MAX);
    assert_int_equal(advlock_lease_setup_result(&l), ADVLOCK_LEASE_SETUP_PENDING);
    /* The lock may not be held while the setup is out. */
    assert_int_equal(advlock_lease_hold(&l, 100, 0, 100), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_on_sent(&l, 101), 0);
    if (has_answer)
        assert_int_equal(advlock_lease_on_result(&l, r, 102), 0);
    else
        return advlock_lease_setup_result(&l);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(advlock_lease_expiry_reason(&l), ADVLOCK_LEASE_LIVE);
    return advlock_lease_setup_result(&l);
}

static void setup_outcomes(void **state)
{
    (void)state;
    assert_int_equal(setup_answering(1, ADVLOCK_RESULT_TRUE), ADVLOCK_LEASE_APPLIED);
    assert_int_equal(setup_answering(1, ADVLOCK_RESULT_FALSE), ADVLOCK_LEASE_NOT_APPLIED);
    assert_int_equal(setup_answering(1, ADVLOCK_RESULT_NULL), ADVLOCK_LEASE_UNIX_SOCKET);
    assert_int_equal(setup_answering(1, ADVLOCK_RESULT_SERVER_ERROR), ADVLOCK_LEASE_SETUP_FAILED);
    assert_int_equal(setup_answering(1, ADVLOCK_RESULT_CONNECTION_LOST),
                     ADVLOCK_LEASE_SETUP_FAILED);
    assert_int_equal(setup_answering(0, ADVLOCK_RESULT_TRUE), ADVLOCK_LEASE_SETUP_PENDING);
    assert_int_equal(advlock_lease_setup_result(NULL), ADVLOCK_LEASE_SETUP_PENDING);
}

static void setup_behind_a_proxy_sends_nothing(void **state)
{
    (void)state;
    advlock_lease_plan p = plan_of(30000, K);
    advlock_lease l;
    advlock_lease_init(&l, &p);
    assert_int_equal(advlock_lease_start_setup(&l, 1, 100), 0);
    assert_int_equal(advlock_lease_setup_result(&l), ADVLOCK_LEASE_PROXIED);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(advlock_lease_on_sent(&l, 100), ADVLOCK_EMISUSE);
}

static void heartbeats_renew_from_their_send(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    /* First heartbeat H after the grant's send; deadline anchor + D. */
    expect_wait(&l, 5000, 17000);
    assert_int_equal(advlock_lease_on_timer(&l, 4999), 0);
    expect_wait(&l, 5000, 17000);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    expect_heartbeat(&l, 17000);
    assert_int_equal(advlock_lease_on_sent(&l, 5003), 0);
    expect_heartbeat(&l, 17000);
    /* Answered late but before the deadline: renewed from the send. */
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 9000), 0);
    expect_wait(&l, 9003, 21003);
    beat(&l, 9003, 9010, ADVLOCK_RESULT_TRUE, 9011);
    expect_wait(&l, 13010, 25010);
    assert_int_equal(advlock_lease_expiry_reason(&l), ADVLOCK_LEASE_LIVE);
}

static void no_two_heartbeats_out(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 5000), 0);
    /* Another H passes with the answer still out: the same one, and the
     * wake is the deadline. */
    assert_int_equal(advlock_lease_on_timer(&l, 9000), 0);
    expect_heartbeat(&l, 17000);
    assert_int_equal(advlock_lease_on_sent(&l, 9001), ADVLOCK_EMISUSE);
}

/* The stop deadline is exactly anchor + D: not a millisecond earlier. */
static void expires_at_the_deadline_exactly(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_timer(&l, 16999), 0);
    expect_heartbeat(&l, 17000);
    assert_int_equal(advlock_lease_expiry_reason(&l), ADVLOCK_LEASE_LIVE);
    assert_int_equal(advlock_lease_on_timer(&l, 17000), 0);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
}

/* A driver that overslept its heartbeat expires at the deadline too. */
static void expires_without_a_heartbeat_sent(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 40000), 0);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
}

static void late_answers_change_nothing(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 5000), 0);
    /* An answer exactly at the deadline is too late. */
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 17000), 0);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
    advlock_lease before;
    memcpy(&before, &l, sizeof l);
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 17001), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 17002), 0);
    assert_int_equal(advlock_lease_on_timer(&l, 90000), 0);
    assert_int_equal(advlock_lease_stop(&l), 0);
    assert_int_equal(advlock_lease_hold(&l, 90000, 0, 90000), ADVLOCK_EMISUSE);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
    /* Only the clock moved. */
    before.now_ms_ = l.now_ms_;
    assert_memory_equal(&l, &before, sizeof l);
}

static advlock_lease_expiry expiry_on(advlock_result r)
{
    advlock_lease l;
    hold_at(&l, 1000, 0);
    beat(&l, 5000, 5000, r, 5001);
    advlock_lease_action a = next(&l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_EXPIRED);
    assert_int_equal(a.stop_at_ms, 17000);
    return advlock_lease_expiry_reason(&l);
}

static void failures_expire_at_once(void **state)
{
    (void)state;
    assert_int_equal(expiry_on(ADVLOCK_RESULT_FALSE), ADVLOCK_LEASE_SETTINGS);
    assert_int_equal(expiry_on(ADVLOCK_RESULT_NULL), ADVLOCK_LEASE_SETTINGS);
    assert_int_equal(expiry_on(ADVLOCK_RESULT_SERVER_ERROR), ADVLOCK_LEASE_SERVER_ERROR);
    assert_int_equal(expiry_on(ADVLOCK_RESULT_CONNECTION_LOST), ADVLOCK_LEASE_CONNECTION);
    /* A send that failed: lost before on_sent. */
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_CONNECTION_LOST, 5000), 0);
    expect_expired(&l, ADVLOCK_LEASE_CONNECTION, 17000);
}

static void proxied_heartbeat_is_guarded(void **state)
{
    (void)state;
    const uint64_t token = 0x8000000000000001u;
    advlock_lease l;
    hold_at(&l, 1000, token);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    advlock_lease_action a = next(&l);
    assert_int_equal(a.kind, ADVLOCK_LEASE_QUERY);
    assert_int_equal(a.sql, ADVLOCK_SQL_HEARTBEAT_GUARDED);
    assert_string_equal(a.sql_text, advlock_sql_text(ADVLOCK_SQL_HEARTBEAT_GUARDED));
    assert_int_equal(a.param, 27000);
    assert_int_equal((uint64_t)a.param2, token);
    assert_true(advlock_sql_guarded(a.sql));
    assert_int_equal(advlock_sql_params(a.sql), 2);
    /* After a stop, a new hold on a direct connection is plain again. */
    assert_int_equal(advlock_lease_stop(&l), 0);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(advlock_lease_hold(&l, 6000, 0, 6000), 0);
    assert_int_equal(advlock_lease_on_timer(&l, 10000), 0);
    assert_int_equal(next(&l).sql, ADVLOCK_SQL_HEARTBEAT);
}

static void sql_rows(void **state)
{
    (void)state;
    for (advlock_sql s = ADVLOCK_SQL_LEASE_SETUP; s <= ADVLOCK_SQL_HEARTBEAT_GUARDED; s++) {
        assert_non_null(advlock_sql_text(s));
        assert_int_equal(advlock_sql_answer(s), ADVLOCK_ANSWER_BOOLEAN);
    }
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_LEASE_SETUP), 1);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_HEARTBEAT), 1);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_HEARTBEAT_GUARDED), 2);
    assert_false(advlock_sql_guarded(ADVLOCK_SQL_LEASE_SETUP));
    assert_false(advlock_sql_guarded(ADVLOCK_SQL_HEARTBEAT));
    assert_true(advlock_sql_guarded(ADVLOCK_SQL_HEARTBEAT_GUARDED));
    assert_null(advlock_sql_text(ADVLOCK_SQL_COUNT));
}

static void hold_after_a_long_wait(void **state)
{
    (void)state;
    advlock_lease_plan p = plan_of(30000, K);
    advlock_lease l;
    advlock_lease_init(&l, &p);
    /* The lock statement was sent D ago: too late to start the work. */
    assert_int_equal(advlock_lease_hold(&l, 1000, 0, 17000), 0);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
    /* A ms less, and a heartbeat is due at once. */
    advlock_lease_init(&l, &p);
    assert_int_equal(advlock_lease_hold(&l, 1000, 0, 16999), 0);
    expect_heartbeat(&l, 17000);
    /* An anchor after now is taken as now. */
    advlock_lease_init(&l, &p);
    assert_int_equal(advlock_lease_hold(&l, 9000, 0, 1000), 0);
    expect_wait(&l, 5000, 17000);
}

static void time_going_backwards_changes_nothing(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 6000), 0);
    /* A send reported before an earlier input counts from that input's
     * time (any later send time would be unsafe). */
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 3000), 0);
    expect_wait(&l, 10000, 22000);
    beat(&l, 10000, 2000, ADVLOCK_RESULT_TRUE, 2500);
    expect_wait(&l, 14000, 26000);
    advlock_lease before;
    memcpy(&before, &l, sizeof l);
    assert_int_equal(advlock_lease_on_timer(&l, 0), 0);
    assert_int_equal(advlock_lease_on_timer(&l, INT64_MIN), 0);
    assert_memory_equal(&l, &before, sizeof l);
}

static void misuse_changes_nothing(void **state)
{
    (void)state;
    advlock_lease l, before;
    hold_at(&l, 1000, 0);
    memcpy(&before, &l, sizeof l);
    assert_int_equal(advlock_lease_on_sent(&l, 2000), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 2000), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_hold(&l, 2000, 0, 2000), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_start_setup(&l, 0, 2000), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_on_result(&l, (advlock_result)9, 2000), ADVLOCK_EINVAL);
    assert_memory_equal(&l, &before, sizeof l);

    /* Due but not sent: TRUE has no send time to renew from. */
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    memcpy(&before, &l, sizeof l);
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 5001), ADVLOCK_EMISUSE);
    assert_memory_equal(&l, &before, sizeof l);

    /* A setup out: no second setup. */
    advlock_lease_plan p = plan_of(30000, K);
    advlock_lease_init(&l, &p);
    assert_int_equal(advlock_lease_start_setup(&l, 0, 1), 0);
    memcpy(&before, &l, sizeof l);
    assert_int_equal(advlock_lease_start_setup(&l, 1, 2), ADVLOCK_EMISUSE);
    assert_memory_equal(&l, &before, sizeof l);

    assert_int_equal(advlock_lease_init(NULL, &p), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_init(&l, NULL), ADVLOCK_EINVAL);
    /* Only a plan the plan's function made: D and H are relied on. */
    advlock_lease_plan forged = p;
    forged.heartbeat_ms = 0;
    assert_int_equal(advlock_lease_init(&l, &forged), ADVLOCK_EINVAL);
    forged = p;
    forged.deadline_ms = p.deadline_ms + 1;
    assert_int_equal(advlock_lease_init(&l, &forged), ADVLOCK_EINVAL);
    forged = p;
    forged.user_timeout_ms = 3000;
    assert_int_equal(advlock_lease_init(&l, &forged), ADVLOCK_EINVAL);
    forged = p;
    forged.lease_ms = 0;
    assert_int_equal(advlock_lease_init(&l, &forged), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_start_setup(NULL, 0, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_hold(NULL, 0, 0, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_on_sent(NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_on_result(NULL, ADVLOCK_RESULT_TRUE, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_on_timer(NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_stop(NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_lease_next(NULL).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(advlock_lease_expiry_reason(NULL), ADVLOCK_LEASE_LIVE);
}

static void stop_ends_heartbeats_and_a_new_setup_clears_expiry(void **state)
{
    (void)state;
    advlock_lease l;
    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 5000), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 5000), 0);
    assert_int_equal(advlock_lease_stop(&l), 0);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);
    assert_int_equal(next(&l).stop_at_ms, INT64_MAX);
    /* The heartbeat's answer after the stop is nobody's. */
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 5001), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_lease_on_timer(&l, 99000), 0);
    assert_int_equal(next(&l).kind, ADVLOCK_LEASE_NONE);

    hold_at(&l, 1000, 0);
    assert_int_equal(advlock_lease_on_timer(&l, 17000), 0);
    expect_expired(&l, ADVLOCK_LEASE_NO_ANSWER, 17000);
    assert_int_equal(advlock_lease_start_setup(&l, 0, 20000), 0);
    assert_int_equal(advlock_lease_expiry_reason(&l), ADVLOCK_LEASE_LIVE);
    assert_int_equal(next(&l).sql, ADVLOCK_SQL_LEASE_SETUP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_for_30_and_60_seconds),
        cmocka_unit_test(plan_refusals_leave_it_unchanged),
        cmocka_unit_test(set_options_refuses_a_lease_the_plan_refuses),
        cmocka_unit_test(options_text),
        cmocka_unit_test(setup_outcomes),
        cmocka_unit_test(setup_behind_a_proxy_sends_nothing),
        cmocka_unit_test(heartbeats_renew_from_their_send),
        cmocka_unit_test(no_two_heartbeats_out),
        cmocka_unit_test(expires_at_the_deadline_exactly),
        cmocka_unit_test(expires_without_a_heartbeat_sent),
        cmocka_unit_test(late_answers_change_nothing),
        cmocka_unit_test(failures_expire_at_once),
        cmocka_unit_test(proxied_heartbeat_is_guarded),
        cmocka_unit_test(sql_rows),
        cmocka_unit_test(hold_after_a_long_wait),
        cmocka_unit_test(time_going_backwards_changes_nothing),
        cmocka_unit_test(misuse_changes_nothing),
        cmocka_unit_test(stop_ends_heartbeats_and_a_new_setup_clears_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
