/* The simulation's model of the reference policy accepts the reference's
 * behaviour and rejects each way of departing from it; and its event queue
 * runs events in (time, sequence) order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../src/adapters/fake/sim.h"

static advlock_sim_client_ cl;
static char why[ADVLOCK_SIM_VIOLATION_MAX];

static void start(int64_t timeout_ms)
{
    memset(&cl, 0, sizeof cl);
    cl.step_ = (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = timeout_ms};
    cl.key_ = 77;
    advlock_action q = {.kind = ADVLOCK_ACTION_QUERY, .sql = ADVLOCK_SQL_TRY_LOCK,
                        .sql_text = "SELECT pg_try_advisory_lock($1)", .param = 77,
                        .wake_at_ms = INT64_MAX};
    assert_int_equal(sim_policy_check(&cl, IN_START_ACQUIRE, 0, "", "", 1000, &q, 1, why, sizeof why), 0);
}

static int result(advlock_result r, int64_t at, advlock_action a, uint64_t attempts)
{
    return sim_policy_check(&cl, IN_RESULT, r, "", "", at, &a, attempts, why, sizeof why);
}

static int timer(int64_t at, advlock_action a, uint64_t attempts)
{
    return sim_policy_check(&cl, IN_TIMER, 0, "", "", at, &a, attempts, why, sizeof why);
}

static advlock_action sleep_for(int64_t ms, int64_t wake)
{
    return (advlock_action){.kind = ADVLOCK_ACTION_SLEEP, .sleep_ms = ms, .wake_at_ms = wake};
}

static advlock_action try_lock(void)
{
    return (advlock_action){.kind = ADVLOCK_ACTION_QUERY, .sql = ADVLOCK_SQL_TRY_LOCK,
                            .sql_text = "SELECT pg_try_advisory_lock($1)", .param = 77,
                            .wake_at_ms = INT64_MAX};
}

static advlock_action done(advlock_outcome o, const char *message)
{
    return (advlock_action){.kind = ADVLOCK_ACTION_DONE, .outcome = o, .sqlstate = "", .message = message};
}

static const char *const timed_out_msg = "Could not acquire migration lock for 'm' within 1.5s.";

static void the_reference_passes(void **state)
{
    (void)state;
    start(1500);
    const int64_t sleeps[] = {100, 200, 400, 800};
    int64_t t = 1000;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(result(ADVLOCK_RESULT_FALSE, t, sleep_for(sleeps[i], t + sleeps[i]), (uint64_t)i + 1), 0);
        assert_int_equal(timer(t + sleeps[i] - 1, sleep_for(sleeps[i], t + sleeps[i]), (uint64_t)i + 1), 0);
        t += sleeps[i];
        assert_int_equal(timer(t, try_lock(), (uint64_t)i + 2), 0);
    }
    /* 1500 ms have passed at the fifth failure: time out now, not later. */
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, t, done(ADVLOCK_TIMED_OUT, timed_out_msg), 5), 0);
    assert_int_equal(sim_policy_sleep(5), 1000);
    assert_int_equal(sim_policy_sleep(50), 1000);
}

static void a_wrong_first_delay_fails(void **state)
{
    (void)state;
    start(30000);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, sleep_for(150, 1150), 1), -1);
    assert_string_equal(why, "schedule: sleep 1 lasted 150 ms; the reference policy says 100 ms");
}

static void a_wrong_wake_up_fails(void **state)
{
    (void)state;
    start(30000);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1010, sleep_for(100, 1100), 1), -1);
    assert_non_null(strstr(why, "wake-up time"));
}

static void an_early_try_fails(void **state)
{
    (void)state;
    start(30000);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, sleep_for(100, 1100), 1), 0);
    assert_int_equal(timer(1099, try_lock(), 2), -1);
}

static void a_late_try_fails(void **state)
{
    (void)state;
    start(30000);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, sleep_for(100, 1100), 1), 0);
    assert_int_equal(timer(1100, sleep_for(100, 1100), 1), -1);
}

static void timing_out_early_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 2499, done(ADVLOCK_TIMED_OUT, timed_out_msg), 1), -1);
    assert_non_null(strstr(why, "the reference policy says sleep"));
}

static void timing_out_late_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 2500, sleep_for(100, 2600), 1), -1);
}

static void a_wrong_message_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(
        result(ADVLOCK_RESULT_FALSE, 2500,
               done(ADVLOCK_TIMED_OUT, "Could not acquire migration lock for 'm' within 1,5s."), 1),
        -1);
    assert_non_null(strstr(why, "message is"));
}

static void a_wrong_outcome_or_count_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, done(ADVLOCK_ACQUIRED, ""), 1), -1);
    start(1500);
    assert_int_equal(result(ADVLOCK_RESULT_TRUE, 1000, done(ADVLOCK_ACQUIRED, ""), 2), -1);
    assert_non_null(strstr(why, "attempts"));
    start(1500);
    advlock_action failed = done(ADVLOCK_FAILED, "");
    failed.error = ADVLOCK_ESERVER;
    assert_int_equal(result(ADVLOCK_RESULT_NULL, 1000, failed, 1), -1);
}

static void events_run_in_time_then_sequence_order(void **state)
{
    (void)state;
    static advlock_sim sim;
    advlock_sim_init(&sim, NULL);
    const int64_t at[] = {30, 10, 20, 10, 30, 10};
    for (int i = 0; i < 6; i++)
        assert_int_equal(sim_schedule(&sim, at[i], EV_STEP, i, 0, 0), 0);
    const int order[] = {1, 3, 5, 2, 0, 4};
    advlock_sim_event_ ev;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(sim_next_event(&sim, &ev), 1);
        assert_int_equal(ev.client_, order[i]);
    }
    assert_int_equal(sim_next_event(&sim, &ev), 0);
    for (int i = 0; i < ADVLOCK_SIM_MAX_EVENTS; i++)
        assert_int_equal(sim_schedule(&sim, i, EV_STEP, 0, 0, 0), 0);
    assert_int_equal(sim_schedule(&sim, 0, EV_STEP, 0, 0, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_reference_passes),
        cmocka_unit_test(a_wrong_first_delay_fails),
        cmocka_unit_test(a_wrong_wake_up_fails),
        cmocka_unit_test(an_early_try_fails),
        cmocka_unit_test(a_late_try_fails),
        cmocka_unit_test(timing_out_early_fails),
        cmocka_unit_test(timing_out_late_fails),
        cmocka_unit_test(a_wrong_message_fails),
        cmocka_unit_test(a_wrong_outcome_or_count_fails),
        cmocka_unit_test(events_run_in_time_then_sequence_order),
    };
    return cmocka_run_group_tests_name("simulation policy model", tests, NULL, NULL);
}
