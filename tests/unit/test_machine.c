/* The lock state machine: the reference's schedule, timeout boundary and
 * messages; release; cancel in every state; misuse; time; extreme values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "machine_fixture.h"

static const char KEY[] = "BrighterMigration_public.Outbox";
#define KEY_LEN (sizeof KEY - 1)
static const int64_t KEY_VALUE = INT64_C(6330443736081384332);

static void expect_query(const advlock_machine *m, advlock_sql sql)
{
    advlock_action a = act(m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.sql, sql);
    assert_string_equal(a.sql_text, advlock_sql_text(sql));
    assert_int_equal(a.param, KEY_VALUE);
}

static void expect_done(const advlock_machine *m, advlock_outcome outcome, int error)
{
    advlock_action a = act(m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(a.report->outcome, outcome);
    assert_int_equal(a.report->failure, error);
}

static const char *said_with(const advlock_machine *m, const char *words)
{
    return described(m, KEY, KEY_LEN, words);
}

static const char *said(const advlock_machine *m)
{
    return said_with(m, NULL);
}

static void start_acquire(advlock_machine *m, int64_t timeout, int64_t now)
{
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, timeout, now), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
}

/* Answers "false" to every attempt, waking exactly on time, until DONE.
 * Records the sleeps; returns how many there were. */
static size_t run_contended(advlock_machine *m, int64_t timeout, int64_t sleeps[], size_t max)
{
    int64_t now = 0;
    size_t n = 0;
    start_acquire(m, timeout, now);
    for (;;) {
        answer(m, ADVLOCK_RESULT_FALSE, now);
        advlock_action a = act(m);
        if (a.kind == ADVLOCK_ACTION_DONE)
            return n;
        assert_int_equal(a.kind, ADVLOCK_ACTION_SLEEP);
        assert_int_equal(a.wake_at_ms, now + a.sleep_ms);
        assert_true(n < max);
        sleeps[n++] = a.sleep_ms;
        now = a.wake_at_ms;
        assert_int_equal(advlock_on_timer(m, now), 0);
        expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    }
}

static void first_action_tries_the_derived_key(void **state)
{
    advlock_machine *m = *state;
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_NONE);
    start_acquire(m, 1000, 0);
    assert_string_equal(act(m).sql_text, "SELECT pg_try_advisory_lock($1)");
    assert_int_equal(report_of(m)->attempts, 1);
}

static void true_acquires(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 1000, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 3);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_string_equal(said(m), "");
    assert_string_equal(report_of(m)->sqlstate, "");
}

static void backoff_schedule_is_the_references(void **state)
{
    advlock_machine *m = *state;
    int64_t sleeps[64];
    size_t n = run_contended(m, 10000, sleeps, 64);
    static const int64_t expected[] = {100,  200,  400,  800,  1000, 1000, 1000,
                                       1000, 1000, 1000, 1000, 1000, 1000};
    assert_int_equal(n, sizeof expected / sizeof expected[0]);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(sleeps[i], expected[i]);
    /* Attempts at 0, 100, 300, 700, 1500, 2500, ..., 9500, 10500. */
    assert_int_equal(report_of(m)->attempts, 14);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
}

static void timeout_zero_is_one_attempt(void **state)
{
    advlock_machine *m = *state;
    int64_t sleeps[4];
    assert_int_equal(run_contended(m, 0, sleeps, 4), 0);
    assert_int_equal(report_of(m)->attempts, 1);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m),
                        "Could not acquire migration lock for 'BrighterMigration_public.Outbox' "
                        "within 0s.");
}

/* elapsed == timeout ends; one millisecond less sleeps again. */
static void timeout_boundary(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 5000, 1000);
    answer(m, ADVLOCK_RESULT_FALSE, 5999);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).sleep_ms, 100);
    assert_int_equal(act(m).wake_at_ms, 6099);
    assert_int_equal(advlock_on_timer(m, 6099), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 6000 - 1 + 1); /* elapsed exactly 5000 */
    expect_done(m, ADVLOCK_TIMED_OUT, 0);

    advlock_machine_init(m);
    start_acquire(m, 100, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_int_equal(advlock_on_timer(m, 100), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 100);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_int_equal(report_of(m)->attempts, 2);

    advlock_machine_init(m);
    start_acquire(m, 101, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_int_equal(advlock_on_timer(m, 100), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 100);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).sleep_ms, 200);
}

static const struct {
    int64_t ms;
    const char *text;
} timeout_texts[] = {
    {30000, "30"},
    {500, "0.5"},
    {1250, "1.25"},
    {1, "0.001"},
    {10, "0.01"},
    {100, "0.1"},
    {1001, "1.001"},
    {1010, "1.01"},
    {60000, "60"},
    {86400000, "86400"},
    {INT64_MAX, "9223372036854775.807"},
};

static void timeout_message(advlock_machine *m, int64_t timeout, const char *seconds)
{
    char expected[256];
    snprintf(expected, sizeof expected,
             "Could not acquire migration lock for 'BrighterMigration_public.Outbox' within %ss.",
             seconds);
    advlock_machine_init(m);
    start_acquire(m, timeout, 0);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MAX);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m), expected);
}

static void timeout_messages(void **state)
{
    for (size_t i = 0; i < sizeof timeout_texts / sizeof timeout_texts[0]; i++)
        timeout_message(*state, timeout_texts[i].ms, timeout_texts[i].text);
}

/* The reference prints '.' whatever the process locale; printf's %g would not. */
static void timeout_messages_under_comma_locale(void **state)
{
    if (setlocale(LC_ALL, "de_DE.UTF-8") == NULL && setlocale(LC_ALL, "de_DE.utf8") == NULL) {
        fprintf(stderr, "SKIPPED LOUDLY: no de_DE.UTF-8 locale (make test builds one under "
                        "build/locale; run with LOCPATH set to it)\n");
        skip();
    }
    char probe[16];
    snprintf(probe, sizeof probe, "%.1f", 0.5);
    assert_string_equal(probe, "0,5"); /* the locale really is in force */
    for (size_t i = 0; i < sizeof timeout_texts / sizeof timeout_texts[0]; i++)
        timeout_message(*state, timeout_texts[i].ms, timeout_texts[i].text);
    setlocale(LC_ALL, "C");
}

static void null_is_an_error_with_the_references_message(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 1000, 0);
    answer(m, ADVLOCK_RESULT_NULL, 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL);
    assert_string_equal(said(m), "pg_try_advisory_lock for "
                                 "'BrighterMigration_public.Outbox' returned null "
                                 "(expected boolean).");
}

static void server_error_carries_sqlstate_and_message(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 1000, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_int_equal(advlock_on_timer(m, 100), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014",
                                       "canceling statement due to user request\n", 120),
                     0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(report_of(m)->sqlstate, "57014");
    assert_string_equal(said_with(m, "canceling statement due to user request\n"),
                        "pg_try_advisory_lock for 'BrighterMigration_public.Outbox' failed "
                        "with SQLSTATE 57014: canceling statement due to user request");
}

static void connection_lost_is_an_error(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 1000, 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_CONNECTION_LOST, "57P01",
                                       "terminating connection due to administrator command", 5),
                     0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
    assert_string_equal(report_of(m)->sqlstate, "57P01");
    assert_string_equal(said_with(m, "terminating connection due to administrator command"),
                        "pg_try_advisory_lock for 'BrighterMigration_public.Outbox' failed: "
                        "connection lost with SQLSTATE 57P01: terminating connection due to "
                        "administrator command");

    start_acquire(m, 1000, 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_CONNECTION_LOST, NULL, NULL, 5), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
    assert_string_equal(report_of(m)->sqlstate, "");
    assert_string_equal(said(m), "pg_try_advisory_lock for "
                                 "'BrighterMigration_public.Outbox' failed: "
                                 "connection lost");
}

static void malformed_sqlstates_are_dropped(void **state)
{
    advlock_machine *m = *state;
    static const char *bad[] = {"5701", "57p01", "57P01X", "", "57 01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        start_acquire(m, 1000, 0);
        assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, bad[i], "x", 0), 0);
        expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
        assert_string_equal(report_of(m)->sqlstate, "");
    }
}

static void start_release(advlock_machine *m)
{
    assert_int_equal(advlock_start_release(m, KEY, KEY_LEN, 0), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    assert_string_equal(act(m).sql_text, "SELECT pg_advisory_unlock($1)");
}

static void release_outcomes(void **state)
{
    advlock_machine *m = *state;
    start_release(m);
    answer(m, ADVLOCK_RESULT_TRUE, 0);
    expect_done(m, ADVLOCK_RELEASED, 0);

    start_release(m);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    expect_done(m, ADVLOCK_NOT_HELD, 0);
    assert_string_equal(said(m),
                        "This session held no lock 'BrighterMigration_public.Outbox' to release.");

    start_release(m);
    answer(m, ADVLOCK_RESULT_NULL, 0);
    expect_done(m, ADVLOCK_NOT_HELD, 0);

    start_release(m);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "XX000", "boom", 0), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(said_with(m, "boom"), "pg_advisory_unlock for "
                                              "'BrighterMigration_public.Outbox' failed with "
                                              "SQLSTATE XX000: boom");

    start_release(m);
    answer(m, ADVLOCK_RESULT_CONNECTION_LOST, 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
    assert_int_equal(report_of(m)->attempts, 0);
}

static void cancel_during_sleep_ends_at_once(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 10000, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_int_equal(advlock_cancel(m, 50), 0);
    expect_done(m, ADVLOCK_CANCELLED, 0);
    assert_string_equal(said(m),
                        "Acquire of lock 'BrighterMigration_public.Outbox' was cancelled.");
}

static void cancel_while_querying_waits_for_the_answer(void **state)
{
    advlock_machine *m = *state;
    static const advlock_result not_granted[] = {ADVLOCK_RESULT_FALSE, ADVLOCK_RESULT_NULL};
    for (size_t i = 0; i < 2; i++) {
        start_acquire(m, 10000, 0);
        assert_int_equal(advlock_cancel(m, 1), 0);
        expect_query(m, ADVLOCK_SQL_TRY_LOCK);     /* still waiting for the answer */
        assert_int_equal(advlock_cancel(m, 2), 0); /* twice is harmless */
        answer(m, not_granted[i], 3);
        expect_done(m, ADVLOCK_CANCELLED, 0);
    }
}

/* The race the reference loses: the server granted the lock just as the
 * caller gave up. The machine gives it back before saying CANCELLED. */
static void cancel_racing_a_grant_unlocks_first(void **state)
{
    advlock_machine *m = *state;
    static const advlock_result unlock_answers[] = {ADVLOCK_RESULT_TRUE, ADVLOCK_RESULT_FALSE};
    for (size_t i = 0; i < 2; i++) {
        start_acquire(m, 10000, 0);
        assert_int_equal(advlock_cancel(m, 1), 0);
        answer(m, ADVLOCK_RESULT_TRUE, 2);
        expect_query(m, ADVLOCK_SQL_UNLOCK);
        assert_int_equal(advlock_cancel(m, 3), 0); /* no effect while undoing */
        assert_int_equal(advlock_on_timer(m, 4), 0);
        expect_query(m, ADVLOCK_SQL_UNLOCK);
        answer(m, unlock_answers[i], 5);
        expect_done(m, ADVLOCK_CANCELLED, 0);
        assert_int_equal(report_of(m)->attempts, 1);
    }

    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "XX000", "oops", 3), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_non_null(strstr(said(m), "pg_advisory_unlock for"));
    assert_non_null(strstr(said(m), "the lock may still be held"));

    /* NULL does not prove the unlock ran: the lock may still be held. */
    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    answer(m, ADVLOCK_RESULT_NULL, 3);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL);
    assert_string_equal(said(m),
                        "pg_advisory_unlock for 'BrighterMigration_public.Outbox' returned null "
                        "(expected boolean). (undoing a cancelled acquire: the lock may still "
                        "be held)");

    /* A lost session took the lock with it. */
    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    answer(m, ADVLOCK_RESULT_CONNECTION_LOST, 3);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
    assert_null(strstr(said(m), "may still be held"));
}

static void errors_win_over_a_pending_cancel(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "40001", "x", 2), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);

    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    answer(m, ADVLOCK_RESULT_CONNECTION_LOST, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
}

/* Calls a misuse must refuse, leaving every byte of the machine as it was. */
static void assert_refused(advlock_machine *m, int allow_start)
{
    advlock_machine before;
    memcpy(&before, m, sizeof before);
    static const advlock_result results[] = {ADVLOCK_RESULT_TRUE, ADVLOCK_RESULT_FALSE,
                                             ADVLOCK_RESULT_NULL, ADVLOCK_RESULT_SERVER_ERROR,
                                             ADVLOCK_RESULT_CONNECTION_LOST};
    advlock_action a = act(m);
    if (a.kind != ADVLOCK_ACTION_QUERY)
        for (size_t i = 0; i < 5; i++)
            assert_int_equal(advlock_on_result(m, results[i], "XX000", "m", 7), ADVLOCK_EMISUSE);
    if (a.kind == ADVLOCK_ACTION_NONE || a.kind == ADVLOCK_ACTION_DONE) {
        assert_int_equal(advlock_on_timer(m, 7), ADVLOCK_EMISUSE);
        assert_int_equal(advlock_cancel(m, 7), ADVLOCK_EMISUSE);
    }
    if (!allow_start) {
        assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 10, 7), ADVLOCK_EMISUSE);
        assert_int_equal(advlock_start_release(m, KEY, KEY_LEN, 7), ADVLOCK_EMISUSE);
    }
    assert_int_equal(advlock_on_result(m, (advlock_result)99, NULL, NULL, 7), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_result(m, (advlock_result)-1, NULL, NULL, 7), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, -1, 7), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_acquire(m, NULL, 3, 10, 7), ADVLOCK_EINVAL);
    assert_int_equal(memcmp(&before, m, sizeof before), 0);
}

static void misuse_in_every_state(void **state)
{
    advlock_machine *m = *state;
    assert_refused(m, 1); /* new */

    start_acquire(m, 10000, 0);
    assert_refused(m, 0); /* querying */

    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_refused(m, 0); /* sleeping */

    assert_int_equal(advlock_cancel(m, 1), 0);
    assert_refused(m, 1); /* done */

    start_acquire(m, 10000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    assert_refused(m, 0); /* undoing a cancelled grant */
    answer(m, ADVLOCK_RESULT_TRUE, 3);
    expect_done(m, ADVLOCK_CANCELLED, 0);

    start_release(m);
    assert_refused(m, 0); /* releasing */
    advlock_machine before;
    memcpy(&before, m, sizeof before);
    assert_int_equal(advlock_cancel(m, 1), ADVLOCK_EMISUSE); /* a release runs to its end */
    assert_int_equal(memcmp(&before, m, sizeof before), 0);
}

static void bad_keys_change_nothing(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 0);
    advlock_machine before;
    memcpy(&before, m, sizeof before);
    assert_int_equal(advlock_start_acquire(m, "\xC0\x80", 2, 10, 1), ADVLOCK_EUTF8);
    assert_int_equal(advlock_start_release(m, "\xED\xA0\x80", 3, 1), ADVLOCK_EUTF8);
    assert_int_equal(advlock_start_release(m, NULL, 1, 1), ADVLOCK_EINVAL);
    assert_int_equal(memcmp(&before, m, sizeof before), 0);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
}

static void null_machine(void **state)
{
    (void)state;
    assert_int_equal(advlock_start_acquire(NULL, KEY, KEY_LEN, 10, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_release(NULL, KEY, KEY_LEN, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_result(NULL, ADVLOCK_RESULT_TRUE, NULL, NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_timer(NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_cancel(NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_next_action(NULL).kind, ADVLOCK_ACTION_NONE);
    advlock_machine_init(NULL);
}

static void timer_early_late_and_twice(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 100000, 0);
    assert_int_equal(advlock_on_timer(m, 0), 0); /* while querying: nothing */
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    assert_int_equal(advlock_on_timer(m, 99), 0); /* early */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).wake_at_ms, 100);
    assert_int_equal(advlock_on_timer(m, 5000), 0); /* late */
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(advlock_on_timer(m, 5000), 0); /* twice */
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(report_of(m)->attempts, 2);
    answer(m, ADVLOCK_RESULT_FALSE, 5001);
    assert_int_equal(act(m).sleep_ms, 200);
    assert_int_equal(act(m).wake_at_ms, 5201); /* from the time of the answer */
}

static void time_going_backwards_is_no_time(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 150, 1000);
    answer(m, ADVLOCK_RESULT_FALSE, 400); /* behind the start: elapsed 0 */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).wake_at_ms, 1100);
    assert_int_equal(advlock_on_timer(m, 1099), 0);
    assert_int_equal(advlock_on_timer(m, -5000), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(advlock_on_timer(m, 1100), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 0); /* clock jumps back: still 100 ms elapsed */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).wake_at_ms, 1300);
    assert_int_equal(advlock_on_timer(m, 1300), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 1200); /* 300 elapsed, by the latest time seen */
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
}

static void extreme_times_and_timeouts(void **state)
{
    advlock_machine *m = *state;
    /* Deadlines saturate rather than wrap. */
    start_acquire(m, INT64_MAX, INT64_MAX - 50);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MAX - 50);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).wake_at_ms, INT64_MAX);
    assert_int_equal(advlock_on_timer(m, INT64_MAX), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MAX);
    assert_int_equal(act(m).wake_at_ms, INT64_MAX);

    /* The whole range of the clock elapses: the difference saturates. */
    assert_int_equal(advlock_cancel(m, 0), 0);
    start_acquire(m, INT64_MAX, INT64_MIN);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MAX);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);

    start_acquire(m, INT64_MAX - 1, INT64_MIN);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MIN);
    assert_int_equal(act(m).wake_at_ms, INT64_MIN + 100);
    assert_int_equal(advlock_cancel(m, INT64_MIN), 0);
    expect_done(m, ADVLOCK_CANCELLED, 0);

    start_acquire(m, 0, INT64_MIN);
    answer(m, ADVLOCK_RESULT_FALSE, INT64_MIN);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
}

/* Run far past the cap: the delay never leaves 1000 and never overflows. */
static void long_waits_stay_capped(void **state)
{
    advlock_machine *m = *state;
    int64_t now = 0;
    start_acquire(m, INT64_MAX, now);
    for (int i = 0; i < 100000; i++) {
        answer(m, ADVLOCK_RESULT_FALSE, now);
        advlock_action a = act(m);
        assert_int_equal(a.kind, ADVLOCK_ACTION_SLEEP);
        if (i >= 4)
            assert_int_equal(a.sleep_ms, 1000);
        now = a.wake_at_ms;
        assert_int_equal(advlock_on_timer(m, now), 0);
    }
    assert_int_equal(report_of(m)->attempts, 100001);
}

static void a_new_operation_after_done(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 0, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    start_acquire(m, 1000, 10);
    assert_int_equal(report_of(m)->attempts, 1);
    assert_int_equal(report_of(m)->timeout_ms, 1000);
    answer(m, ADVLOCK_RESULT_TRUE, 11);
    assert_string_equal(said(m), "");
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    start_release(m);
    answer(m, ADVLOCK_RESULT_TRUE, 12);
    expect_done(m, ADVLOCK_RELEASED, 0);
}

/* A machine holds no pointers: a copy carries on by itself. */
static void machines_can_be_copied(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 0, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    advlock_machine copy;
    memcpy(&copy, m, sizeof copy);
    advlock_machine_init(m);
    assert_int_equal(act(&copy).kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(report_of(&copy)->outcome, ADVLOCK_TIMED_OUT);
    assert_true(strncmp(described(&copy, KEY, KEY_LEN, NULL), "Could not acquire", 17) == 0);
    assert_true((const char *)report_of(&copy) >= (const char *)&copy
                && (const char *)report_of(&copy) < (const char *)(&copy + 1));
}

/* A key-started operation is the named one without the hash: same
 * queries, same report. */
static void key_taking_starts(void **state)
{
    advlock_machine *m = *state;
    assert_int_equal(advlock_start_acquire_key(m, KEY_VALUE, 1000, 0), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(report_of(m)->key, KEY_VALUE);
    assert_int_equal(report_of(m)->timeout_ms, 1000);
    answer(m, ADVLOCK_RESULT_TRUE, 7);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->elapsed_ms, 7);
    assert_int_equal(advlock_start_release_key(m, report_of(m)->key, 8), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 9);
    expect_done(m, ADVLOCK_NOT_HELD, 0);
    assert_string_equal(said(m),
                        "This session held no lock 'BrighterMigration_public.Outbox' to release.");

    assert_int_equal(advlock_start_acquire_key(NULL, 1, 0, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_acquire_key(m, 1, -1, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_release_key(NULL, 1, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_acquire_key(m, 1, 10, 0), 0);
    assert_int_equal(advlock_start_release_key(m, 1, 0), ADVLOCK_EMISUSE);
}

static void describe_refuses_bad_arguments(void **state)
{
    advlock_machine *m = *state;
    start_acquire(m, 0, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    char buf[8];
    assert_int_equal(advlock_describe(NULL, KEY, KEY_LEN, NULL, buf, sizeof buf), ADVLOCK_EINVAL);
    assert_int_equal(advlock_describe(report_of(m), NULL, 1, NULL, buf, sizeof buf),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_describe(report_of(m), KEY, KEY_LEN, NULL, NULL, 1), ADVLOCK_EINVAL);
    assert_int_equal(advlock_describe(report_of(m), KEY, KEY_LEN, NULL, NULL, 0), 0);
    /* Too small: cut, still a C string. */
    int n = advlock_describe(report_of(m), KEY, KEY_LEN, NULL, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(buf, "Coul...");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(first_action_tries_the_derived_key),
        T(true_acquires),
        T(backoff_schedule_is_the_references),
        T(timeout_zero_is_one_attempt),
        T(timeout_boundary),
        T(timeout_messages),
        T(timeout_messages_under_comma_locale),
        T(null_is_an_error_with_the_references_message),
        T(server_error_carries_sqlstate_and_message),
        T(connection_lost_is_an_error),
        T(malformed_sqlstates_are_dropped),
        T(release_outcomes),
        T(cancel_during_sleep_ends_at_once),
        T(cancel_while_querying_waits_for_the_answer),
        T(cancel_racing_a_grant_unlocks_first),
        T(errors_win_over_a_pending_cancel),
        T(misuse_in_every_state),
        T(bad_keys_change_nothing),
        T(null_machine),
        T(timer_early_late_and_twice),
        T(time_going_backwards_is_no_time),
        T(extreme_times_and_timeouts),
        T(long_waits_stay_capped),
        T(a_new_operation_after_done),
        T(machines_can_be_copied),
        T(key_taking_starts),
        T(describe_refuses_bad_arguments),
    };
    return cmocka_run_group_tests_name("lock machine", tests, NULL, NULL);
}
