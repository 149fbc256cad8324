/* The simulation's model of the lock policy accepts the reference's
 * behaviour and every option's, driven in lockstep with a real machine, and
 * rejects each way of departing from them; the mutual-exclusion invariant
 * allows shared holders together and nothing else; and the event queue runs
 * events in (time, sequence) order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../src/sim/sim.h"

static sim_client cl;
static char why[ADVLOCK_SIM_VIOLATION_MAX];
/* The report the hand-made actions below point at, as a machine's would. */
static advlock_report rep;

static void start(int64_t timeout_ms)
{
    memset(&cl, 0, sizeof cl);
    cl.step_ =
        (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = timeout_ms};
    cl.key_ = 77;
    memset(&rep, 0, sizeof rep);
    rep.key = 77;
    rep.timeout_ms = timeout_ms;
    rep.attempts = 1;
    advlock_action q = {.kind = ADVLOCK_ACTION_QUERY,
                        .sql = ADVLOCK_SQL_TRY_LOCK,
                        .sql_text = "SELECT pg_try_advisory_lock($1)",
                        .param = 77,
                        .wake_at_ms = INT64_MAX,
                        .report = &rep};
    assert_int_equal(
        advlock_sim_policy_check(&cl, IN_START_ACQUIRE, 0, "", 1000, &q, why, sizeof why), 0);
}

/* The model's verdict on action a after input `in` at reading `at`, with
 * the report saying `attempts` (and the time since the start at 1000). */
static int judge(enum policy_input in, advlock_result r, int64_t at, advlock_action a,
                 uint64_t attempts)
{
    rep.attempts = attempts;
    rep.elapsed_ms = at - 1000;
    return advlock_sim_policy_check(&cl, in, r, "", at, &a, why, sizeof why);
}

static int result(advlock_result r, int64_t at, advlock_action a, uint64_t attempts)
{
    return judge(IN_RESULT, r, at, a, attempts);
}

static int timer(int64_t at, advlock_action a, uint64_t attempts)
{
    return judge(IN_TIMER, 0, at, a, attempts);
}

static advlock_action sleep_for(int64_t ms, int64_t wake)
{
    return (advlock_action){
        .kind = ADVLOCK_ACTION_SLEEP, .sleep_ms = ms, .wake_at_ms = wake, .report = &rep};
}

static advlock_action try_lock(void)
{
    return (advlock_action){.kind = ADVLOCK_ACTION_QUERY,
                            .sql = ADVLOCK_SQL_TRY_LOCK,
                            .sql_text = "SELECT pg_try_advisory_lock($1)",
                            .param = 77,
                            .wake_at_ms = INT64_MAX,
                            .report = &rep};
}

static advlock_action done(advlock_outcome o, advlock_detail detail)
{
    rep.outcome = o;
    rep.failure = 0;
    rep.detail = detail;
    return (advlock_action){.kind = ADVLOCK_ACTION_DONE, .report = &rep};
}

static void the_reference_passes(void **state)
{
    (void)state;
    start(1500);
    const int64_t sleeps[] = {100, 200, 400, 800};
    int64_t t = 1000;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            result(ADVLOCK_RESULT_FALSE, t, sleep_for(sleeps[i], t + sleeps[i]), (uint64_t)i + 1),
            0);
        assert_int_equal(
            timer(t + sleeps[i] - 1, sleep_for(sleeps[i], t + sleeps[i]), (uint64_t)i + 1), 0);
        t += sleeps[i];
        assert_int_equal(timer(t, try_lock(), (uint64_t)i + 2), 0);
    }
    /* 1500 ms have passed at the fifth failure: time out now, not later. */
    assert_int_equal(
        result(ADVLOCK_RESULT_FALSE, t, done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_NONE), 5), 0);
    assert_int_equal(advlock_sim_policy_sleep(5), 1000);
    assert_int_equal(advlock_sim_policy_sleep(50), 1000);
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
    assert_int_equal(
        result(ADVLOCK_RESULT_FALSE, 2499, done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_NONE), 1), -1);
    assert_non_null(strstr(why, "the reference policy says sleep"));
}

static void timing_out_late_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 2500, sleep_for(100, 2600), 1), -1);
}

static void a_wrong_detail_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(
        result(ADVLOCK_RESULT_FALSE, 2500, done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_DIAGNOSED), 1),
        -1);
    assert_non_null(strstr(why, "detail"));
}

static void a_wrong_key_timeout_or_elapsed_fails(void **state)
{
    (void)state;
    start(1500);
    rep.key = 78;
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, sleep_for(100, 1100), 1), -1);
    assert_non_null(strstr(why, "report key"));
    start(1500);
    rep.timeout_ms = 1000;
    assert_int_equal(result(ADVLOCK_RESULT_FALSE, 1000, sleep_for(100, 1100), 1), -1);
    assert_non_null(strstr(why, "report timeout"));
    start(1500);
    advlock_action a = done(ADVLOCK_ACQUIRED, ADVLOCK_DETAIL_NONE);
    rep.elapsed_ms = 7;
    assert_int_equal(advlock_sim_policy_check(&cl, IN_RESULT, ADVLOCK_RESULT_TRUE, "", 1000, &a,
                                              why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "elapsed"));
}

static void a_wrong_outcome_or_count_fails(void **state)
{
    (void)state;
    start(1500);
    assert_int_equal(
        result(ADVLOCK_RESULT_FALSE, 1000, done(ADVLOCK_ACQUIRED, ADVLOCK_DETAIL_NONE), 1), -1);
    start(1500);
    assert_int_equal(
        result(ADVLOCK_RESULT_TRUE, 1000, done(ADVLOCK_ACQUIRED, ADVLOCK_DETAIL_NONE), 2), -1);
    assert_non_null(strstr(why, "attempts"));
    start(1500);
    advlock_action failed = done(ADVLOCK_FAILED, ADVLOCK_DETAIL_NONE);
    rep.failure = ADVLOCK_ESERVER;
    assert_int_equal(result(ADVLOCK_RESULT_NULL, 1000, failed, 1), -1);
    assert_non_null(strstr(why, "failure"));
}

/* ---- options: the model in lockstep with a real machine ------------------------- */

static advlock_machine m;
/* A copy of the machine's report that a test alters. */
static advlock_report tampered;

/* Starts an acquire of "m" on both the machine and the model. */
static int shadow_start(advlock_options o, int64_t timeout_ms, int64_t now)
{
    memset(&cl, 0, sizeof cl);
    cl.step_ =
        (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = timeout_ms};
    advlock_derive_key("m", 1, &cl.key_);
    cl.options_ = o;
    advlock_sim_policy_seed(&cl, o.jitter_seed);
    advlock_machine_init(&m);
    assert_int_equal(advlock_set_options(&m, &o), 0);
    assert_int_equal(advlock_start_acquire(&m, "m", 1, timeout_ms, now), 0);
    advlock_action a = advlock_next_action(&m);
    return advlock_sim_policy_check(&cl, IN_START_ACQUIRE, 0, "", now, &a, why, sizeof why);
}

/* Feeds an input to the machine, then the model; tamper may alter the
 * machine's action before the model sees it. */
static int shadow(enum policy_input in, advlock_result r, const char *sqlstate, int64_t now,
                  void (*tamper)(advlock_action *))
{
    if (in == IN_RESULT)
        assert_int_equal(advlock_on_result(&m, r, sqlstate, NULL, now), 0);
    else if (in == IN_TIMER)
        assert_int_equal(advlock_on_timer(&m, now), 0);
    else if (in == IN_CANCEL_SENT)
        assert_int_equal(advlock_on_cancel_sent(&m, now), 0);
    advlock_action a = advlock_next_action(&m);
    if (tamper != NULL)
        tamper(&a);
    return advlock_sim_policy_check(&cl, in, r, sqlstate != NULL ? sqlstate : "", now, &a, why,
                                    sizeof why);
}

/* Refused until the end, waking on time; returns the model's verdict and
 * the time of the last answer. tamper_at: which sleep (from 1) to alter. */
static int refused_to_the_end(int64_t now, int tamper_at, void (*tamper)(advlock_action *),
                              int64_t *ended)
{
    for (int sleep = 1;; sleep++) {
        int rc =
            shadow(IN_RESULT, ADVLOCK_RESULT_FALSE, NULL, now, sleep == tamper_at ? tamper : NULL);
        advlock_action a = advlock_next_action(&m);
        if (rc != 0 || a.kind == ADVLOCK_ACTION_DONE) {
            *ended = now;
            return rc;
        }
        now = a.wake_at_ms;
        if (shadow(IN_TIMER, 0, NULL, now, NULL) != 0)
            return -1;
    }
}

static void one_ms_longer(advlock_action *a)
{
    a->sleep_ms += 1;
    a->wake_at_ms += 1;
}

static void full_jitter_is_replayed_exactly(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.jitter_seed = 99;
    int64_t ended;
    assert_int_equal(shadow_start(o, 5000, 1000), 0);
    assert_int_equal(refused_to_the_end(1000, 0, NULL, &ended), 0);
    assert_int_equal(ended, 6000); /* the last try at the deadline */
    assert_true(cl.policy_sleeps_ > 5);
    /* The model draws from its own splitmix64: one sleep 1 ms off is caught. */
    assert_int_equal(shadow_start(o, 5000, 1000), 0);
    assert_int_equal(refused_to_the_end(1000, 3, one_ms_longer, &ended), -1);
    assert_non_null(strstr(why, "schedule: sleep 3 lasted"));
    assert_non_null(strstr(why, "the full-jitter policy says"));
}

static uint64_t fixed_random(void *user)
{
    return *(uint64_t *)user;
}

static void jitter_from_a_callback_is_checked_against_its_range(void **state)
{
    (void)state;
    uint64_t value = 350;
    advlock_options o;
    advlock_options_init(&o);
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.random = fixed_random;
    o.random_user = &value;
    int64_t ended;
    assert_int_equal(shadow_start(o, 5000, 0), 0);
    assert_int_equal(refused_to_the_end(0, 0, NULL, &ended), 0);
    assert_int_equal(ended, 5000);
    /* 350 mod 101 = 47 lies in [0, 100]; 101 does not. */
    value = 100;
    assert_int_equal(shadow_start(o, 5000, 0), 0);
    assert_int_equal(refused_to_the_end(0, 1, one_ms_longer, &ended), -1);
    assert_non_null(strstr(why, "the full-jitter policy allows 0..100 ms"));
}

static void unclipped(advlock_action *a)
{
    a->wake_at_ms += 800 - a->sleep_ms;
    a->sleep_ms = 800;
}

static void clipping_is_checked(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.clip_to_deadline = 1;
    int64_t ended = 0;
    assert_int_equal(shadow_start(o, 1250, 0), 0);
    assert_int_equal(refused_to_the_end(0, 0, NULL, &ended), 0);
    assert_int_equal(ended, 1250);
    assert_int_equal(shadow_start(o, 1250, 0), 0);
    assert_int_equal(refused_to_the_end(0, 4, unclipped, &ended), -1);
    assert_string_equal(
        why, "schedule: sleep 4 lasted 800 ms; the clipped reference policy says 550 ms");
}

static void no_deadline(advlock_action *a)
{
    a->wake_at_ms = INT64_MAX;
}

static void no_cancel(advlock_action *a)
{
    a->kind = ADVLOCK_ACTION_QUERY;
}

static void wrong_bound(advlock_action *a)
{
    a->param2 += 1;
}

/* Starts a server-side acquire at 100 (timeout 2000) whose try is refused
 * at 100: the wait goes out bounded by the whole timeout. */
static int shadow_waiting(advlock_options o, void (*tamper)(advlock_action *))
{
    assert_int_equal(shadow_start(o, 2000, 100), 0);
    return shadow(IN_RESULT, ADVLOCK_RESULT_FALSE, NULL, 100, tamper);
}

static void server_wait_is_checked(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.wait = ADVLOCK_WAIT_SERVER;
    /* The try, the wait bounded by lock_timeout, its 55P03, the unlock in
     * case a grant hid behind it: TIMED_OUT. */
    assert_int_equal(shadow_waiting(o, NULL), 0);
    assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_LOCK);
    assert_int_equal(shadow(IN_TIMER, 0, NULL, 2100, NULL), 0); /* within the grace */
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_SERVER_ERROR, "55P03", 2101, NULL), 0);
    assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_UNLOCK);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_FALSE, NULL, 2102, NULL), 0);
    assert_int_equal(advlock_next_action(&m).report->outcome, ADVLOCK_TIMED_OUT);
    /* Stuck past the grace: cancel, 57014, the unlock: TIMED_OUT. */
    assert_int_equal(shadow_waiting(o, NULL), 0);
    assert_int_equal(shadow(IN_TIMER, 0, NULL, 2599, NULL), 0);
    assert_int_equal(shadow(IN_TIMER, 0, NULL, 2600, NULL), 0);
    assert_int_equal(advlock_next_action(&m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(shadow(IN_CANCEL_SENT, 0, NULL, 2600, NULL), 0);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_SERVER_ERROR, "57014", 2610, NULL), 0);
    assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_UNLOCK);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_FALSE, NULL, 2615, NULL), 0);
    assert_int_equal(advlock_next_action(&m).report->outcome, ADVLOCK_TIMED_OUT);
    /* A grant after the deadline is given back before TIMED_OUT. */
    assert_int_equal(shadow_waiting(o, NULL), 0);
    assert_int_equal(shadow(IN_TIMER, 0, NULL, 2600, NULL), 0);
    assert_int_equal(shadow(IN_CANCEL_SENT, 0, NULL, 2600, NULL), 0);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_TRUE, NULL, 2605, NULL), 0);
    assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_UNLOCK);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_TRUE, NULL, 2610, NULL), 0);
    /* A wait without its deadline or with another bound, or a deadline
     * without a cancel, fails. */
    memset(&cl, 0, sizeof cl);
    assert_int_equal(shadow_waiting(o, no_deadline), -1);
    assert_non_null(strstr(why, "the query's deadline"));
    assert_int_equal(shadow_waiting(o, wrong_bound), -1);
    assert_non_null(strstr(why, "the wait's bound"));
    assert_int_equal(shadow_waiting(o, NULL), 0);
    assert_int_equal(shadow(IN_TIMER, 0, NULL, 2600, no_cancel), -1);
    assert_non_null(
        strstr(why, "the server-wait policy says cancel the query, the machine did query"));
}

static void shared_transaction_release_ends_with_the_transaction(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.mode = ADVLOCK_SHARED;
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(shadow_start(o, 0, 0), 0);
    assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED);
    assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_TRUE, NULL, 1, NULL), 0);
    cl.step_.kind = ADVLOCK_SIM_RELEASE;
    assert_int_equal(advlock_start_release(&m, "m", 1, 2), 0);
    advlock_action a = advlock_next_action(&m);
    assert_int_equal(advlock_sim_policy_check(&cl, IN_START_RELEASE, 0, "", 2, &a, why, sizeof why),
                     0);
    tampered = *a.report;
    tampered.outcome = ADVLOCK_RELEASED;
    a.report = &tampered;
    assert_int_equal(advlock_sim_policy_check(&cl, IN_START_RELEASE, 0, "", 2, &a, why, sizeof why),
                     -1);
}

static void wrong_pid(advlock_action *a)
{
    tampered = *a->report;
    tampered.holder_pid = 43;
    a->report = &tampered;
}

static void diagnostics_are_checked_against_the_rows(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.diagnose = 1;
    const advlock_holder rows[] = {
        {.pid = 7, .granted = 0, .mode = "ExclusiveLock", .state = "active", .seconds = 3},
        {.pid = 42,
         .granted = 1,
         .mode = "ShareLock",
         .state = "idle in transaction",
         .seconds = 75},
        {.pid = 44, .granted = 1, .mode = "ShareLock", .state = "idle", .seconds = 1},
    };
    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(shadow_start(o, 0, 0), 0);
        assert_int_equal(shadow(IN_RESULT, ADVLOCK_RESULT_FALSE, NULL, 0, NULL), 0);
        assert_int_equal(advlock_next_action(&m).sql, ADVLOCK_SQL_HOLDERS);
        /* The rows as the driver keeps them (state: an index into advlock_sim_state_names). */
        static const unsigned char states[3] = {1, 2, 0};
        cl.nrows_ = 3;
        for (int i = 0; i < 3; i++) {
            cl.rows_[i].pid = rows[i].pid;
            cl.rows_[i].granted = (unsigned char)rows[i].granted;
            cl.rows_[i].mode = strcmp(rows[i].mode, "ShareLock") == 0;
            cl.rows_[i].state = states[i];
            cl.rows_[i].seconds = rows[i].seconds;
        }
        assert_int_equal(advlock_on_holders(&m, rows, 3, 1), 0);
        advlock_action a = advlock_next_action(&m);
        if (pass == 1)
            wrong_pid(&a);
        int rc = advlock_sim_policy_check(&cl, IN_HOLDERS, 0, "", 1, &a, why, sizeof why);
        assert_int_equal(rc, pass == 0 ? 0 : -1);
        if (pass == 0) { /* pid 42 (the first granted row), 75 s, and one more holder */
            assert_int_equal(a.report->holder_pid, 42);
            assert_int_equal(a.report->holder_seconds, 75);
            assert_int_equal(a.report->other_holders, 1);
            assert_int_equal(a.report->holder_state, ADVLOCK_BACKEND_IDLE_IN_TRANSACTION);
        }
    }
    assert_string_equal(why, "holder pid: the policy model says 42, the machine did 43");
}

/* ---- the mutual-exclusion invariant ------------------------------------------------ */

static void shared_holders_may_share_and_nothing_else(void **state)
{
    (void)state;
    static advlock_sim handle;
    char text[ADVLOCK_SIM_VIOLATION_MAX];
    const advlock_sim_step idle[] = {{.kind = ADVLOCK_SIM_PAUSE}};
    advlock_sim_init(&handle, NULL);
    for (int c = 0; c < 3; c++)
        advlock_sim_add_script(&handle, idle, 1, NULL);
    sim_world *sim = sim_world_of(&handle);
    sim->nkeys_ = 1;
    /* Beliefs alone: with an empty lock table and no views the other
     * invariants hold, so only mutual exclusion judges. */
    const int kinds[3] = {advlock_sim_kind(ADVLOCK_SHARED, ADVLOCK_SESSION),
                          advlock_sim_kind(ADVLOCK_SHARED, ADVLOCK_TRANSACTION),
                          advlock_sim_kind(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION)};
    for (int c = 0; c < 2; c++)
        sim->clients_[c].belief_[0][kinds[c]] = 1;
    assert_int_equal(advlock_sim_check_world(sim, text, sizeof text), 0);
    sim->clients_[2].belief_[0][kinds[2]] = 1;
    assert_int_equal(advlock_sim_check_world(sim, text, sizeof text), -1);
    assert_string_equal(text,
                        "mutual exclusion: client 2 believes it holds key 0 exclusively while "
                        "client 0 believes it holds it too");
    /* A client whose COMMIT is on its way has left its transaction lock. */
    sim->clients_[0].belief_[0][kinds[0]] = 0;
    sim->clients_[1].busy_ = 1;
    sim->clients_[1].step_.kind = ADVLOCK_SIM_COMMIT;
    assert_int_equal(advlock_sim_check_world(sim, text, sizeof text), 0);
}

static void events_run_in_time_then_sequence_order(void **state)
{
    (void)state;
    static advlock_sim handle;
    advlock_sim_init(&handle, NULL);
    sim_world *sim = sim_world_of(&handle);
    const int64_t at[] = {30, 10, 20, 10, 30, 10};
    for (int i = 0; i < 6; i++)
        assert_int_equal(advlock_sim_schedule(sim, at[i], EV_STEP, i, 0, 0), 0);
    const int order[] = {1, 3, 5, 2, 0, 4};
    sim_event ev;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(advlock_sim_next_event(sim, &ev), 1);
        assert_int_equal(ev.client_, order[i]);
    }
    assert_int_equal(advlock_sim_next_event(sim, &ev), 0);
    for (int i = 0; i < SIM_MAX_EVENTS; i++)
        assert_int_equal(advlock_sim_schedule(sim, i, EV_STEP, 0, 0, 0), 0);
    assert_int_equal(advlock_sim_schedule(sim, 0, EV_STEP, 0, 0, 0), -1);
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
        cmocka_unit_test(a_wrong_detail_fails),
        cmocka_unit_test(a_wrong_key_timeout_or_elapsed_fails),
        cmocka_unit_test(a_wrong_outcome_or_count_fails),
        cmocka_unit_test(full_jitter_is_replayed_exactly),
        cmocka_unit_test(jitter_from_a_callback_is_checked_against_its_range),
        cmocka_unit_test(clipping_is_checked),
        cmocka_unit_test(server_wait_is_checked),
        cmocka_unit_test(shared_transaction_release_ends_with_the_transaction),
        cmocka_unit_test(diagnostics_are_checked_against_the_rows),
        cmocka_unit_test(shared_holders_may_share_and_nothing_else),
        cmocka_unit_test(events_run_in_time_then_sequence_order),
    };
    return cmocka_run_group_tests_name("simulation policy model and invariants", tests, NULL, NULL);
}
