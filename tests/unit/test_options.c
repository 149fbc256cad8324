/* Options beyond the reference: lock modes and scopes, full jitter, clipping
 * to the deadline, server-side waiting with its cancel, holder diagnostics,
 * events. The reference behaviour (all options zero) is test_machine's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "machine_fixture.h"

static const char KEY[] = "jobs";
#define KEY_LEN (sizeof KEY - 1)

static void use(advlock_machine *m, advlock_options o)
{
    assert_int_equal(advlock_set_options(m, &o), 0);
}

static advlock_options defaults(void)
{
    advlock_options o;
    advlock_options_init(&o);
    return o;
}

static void expect_query(const advlock_machine *m, advlock_sql sql)
{
    advlock_action a = act(m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.sql, sql);
    assert_string_equal(a.sql_text, advlock_sql_text(sql));
}

static void expect_done(const advlock_machine *m, advlock_outcome outcome, int error)
{
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(report_of(m)->outcome, outcome);
    assert_int_equal(report_of(m)->failure, error);
}

static const char *said_with(const advlock_machine *m, const char *words)
{
    return described(m, KEY, KEY_LEN, words);
}

static const char *said(const advlock_machine *m)
{
    return said_with(m, NULL);
}

/* ---- modes and scopes ---------------------------------------------------- */

static void modes_and_scopes_pick_their_statements(void **state)
{
    advlock_machine *m = *state;
    static const struct {
        advlock_mode mode;
        advlock_scope scope;
        advlock_wait wait;
        advlock_sql lock;
    } cases[] = {
        {ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, ADVLOCK_SQL_TRY_LOCK},
        {ADVLOCK_SHARED, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, ADVLOCK_SQL_TRY_LOCK_SHARED},
        {ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_POLL, ADVLOCK_SQL_TRY_XACT_LOCK},
        {ADVLOCK_SHARED, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_POLL, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED},
        {ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_SERVER, ADVLOCK_SQL_LOCK},
        {ADVLOCK_SHARED, ADVLOCK_SESSION, ADVLOCK_WAIT_SERVER, ADVLOCK_SQL_LOCK_SHARED},
        {ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_SERVER, ADVLOCK_SQL_XACT_LOCK},
        {ADVLOCK_SHARED, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_SERVER, ADVLOCK_SQL_XACT_LOCK_SHARED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        advlock_options o = defaults();
        o.mode = cases[i].mode;
        o.scope = cases[i].scope;
        o.wait = cases[i].wait;
        use(m, o);
        assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 5000, 0), 0);
        if (cases[i].wait == ADVLOCK_WAIT_SERVER) {
            /* A try first, in the same mode and scope; then the wait. */
            expect_query(m, cases[i - 4].lock);
            answer(m, ADVLOCK_RESULT_FALSE, 1);
        }
        expect_query(m, cases[i].lock);
        answer(m, ADVLOCK_RESULT_TRUE, 1);
        expect_done(m, ADVLOCK_ACQUIRED, 0);
        assert_int_equal(advlock_start_release(m, KEY, KEY_LEN, 2), 0);
        if (cases[i].scope == ADVLOCK_TRANSACTION) {
            expect_done(m, ADVLOCK_ENDS_WITH_TRANSACTION, 0);
            assert_string_equal(said(m), "Lock 'jobs' is transaction-scoped: it is "
                                         "released when the transaction ends.");
        } else {
            expect_query(m, cases[i].mode == ADVLOCK_SHARED ? ADVLOCK_SQL_UNLOCK_SHARED
                                                            : ADVLOCK_SQL_UNLOCK);
            answer(m, ADVLOCK_RESULT_TRUE, 3);
            expect_done(m, ADVLOCK_RELEASED, 0);
        }
    }
}

static void options_are_checked_and_fixed_during_an_operation(void **state)
{
    advlock_machine *m = *state;
    advlock_options o = defaults();
    assert_int_equal(advlock_set_options(NULL, &o), ADVLOCK_EINVAL);
    assert_int_equal(advlock_set_options(m, NULL), ADVLOCK_EINVAL);
    o.mode = (advlock_mode)2;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EINVAL);
    o = defaults();
    o.wait = (advlock_wait)7;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EINVAL);
    o = defaults();
    o.backoff = (advlock_backoff)-1;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EINVAL);

    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 5000, 0), 0);
    advlock_machine before;
    memcpy(&before, m, sizeof before);
    o = defaults();
    o.mode = ADVLOCK_SHARED;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EMISUSE);
    assert_int_equal(memcmp(&before, m, sizeof before), 0);
    advlock_options_init(NULL);
}

/* ---- schedules ------------------------------------------------------------- */

/* Runs an acquire that is always refused, waking on time; records sleeps. */
static size_t refused_until_done(advlock_machine *m, int64_t timeout, int64_t sleeps[],
                                 int64_t attempts_at[], size_t max)
{
    int64_t now = 1000;
    size_t n = 0;
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, timeout, now), 0);
    for (;;) {
        attempts_at[n] = now;
        answer(m, ADVLOCK_RESULT_FALSE, now);
        advlock_action a = act(m);
        if (a.kind == ADVLOCK_ACTION_DONE)
            return n;
        assert_int_equal(a.kind, ADVLOCK_ACTION_SLEEP);
        assert_true(n + 1 < max);
        sleeps[n++] = a.sleep_ms;
        now = a.wake_at_ms;
        assert_int_equal(advlock_on_timer(m, now), 0);
    }
}

static void clipping_puts_the_last_attempt_at_the_deadline(void **state)
{
    advlock_machine *m = *state;
    int64_t sleeps[32], at[32];
    /* Unclipped reference: 0, 100, 300, 700, 1500 > 1250, so it ends 250 ms late. */
    size_t n = refused_until_done(m, 1250, sleeps, at, 32);
    assert_int_equal(n, 4);
    assert_int_equal(at[n] - 1000, 1500);

    advlock_options o = defaults();
    o.clip_to_deadline = 1;
    use(m, o);
    n = refused_until_done(m, 1250, sleeps, at, 32);
    static const int64_t clipped[] = {100, 200, 400, 550};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(sleeps[i], clipped[i]);
    assert_int_equal(at[n] - 1000, 1250); /* the final attempt, at the deadline */
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m), "Could not acquire migration lock for 'jobs' within 1.25s.");
}

static void full_jitter_stays_within_its_ceilings(void **state)
{
    advlock_machine *m = *state;
    advlock_options o = defaults();
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.jitter_seed = 12345;
    use(m, o);
    int64_t sleeps[256], at[256];
    size_t n = refused_until_done(m, 60000, sleeps, at, 256);
    assert_true(n > 20);
    int64_t total = 0;
    int below_ceiling = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t ceiling = i < 4 ? 100 << i : 1000;
        assert_in_range(sleeps[i], 0, ceiling);
        below_ceiling += sleeps[i] < ceiling;
        total += sleeps[i];
    }
    assert_true(below_ceiling > (int)n / 2); /* it really is random */
    assert_int_equal(at[n] - 1000, 60000);   /* jitter always clips */

    /* The same seed replays the same sleeps; another seed does not. */
    int64_t again[256], at2[256];
    use(m, o);
    assert_int_equal(refused_until_done(m, 60000, again, at2, 256), n);
    assert_memory_equal(sleeps, again, n * sizeof sleeps[0]);
    o.jitter_seed = 54321;
    use(m, o);
    size_t n3 = refused_until_done(m, 60000, again, at2, 256);
    assert_true(n3 != n || memcmp(sleeps, again, n * sizeof sleeps[0]) != 0);
    (void)total;
}

static uint64_t always(void *user)
{
    return *(uint64_t *)user;
}

static void jitter_from_the_callers_randomness(void **state)
{
    advlock_machine *m = *state;
    uint64_t value = 350;
    advlock_options o = defaults();
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.random = always;
    o.random_user = &value;
    use(m, o);
    int64_t sleeps[64] = {0}, at[64] = {0};
    size_t n = refused_until_done(m, 5000, sleeps, at, 64);
    assert_true(n >= 5);
    /* 350 mod (ceiling + 1): 100 -> 47, 200 -> 149, 400 -> 350, 800 -> 350, 1000 -> 350. */
    static const int64_t expected[] = {47, 149, 350, 350, 350};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(sleeps[i], expected[i]);
    assert_int_equal(at[n] - 1000, 5000);
}

/* ---- waiting on the server ---------------------------------------------------- */

/* Starts a server-side acquire at 1000: its try finds the lock busy, and
 * the wait goes out bounded by the whole timeout. */
static void start_waiting(advlock_machine *m, advlock_scope scope, int64_t timeout)
{
    advlock_options o = defaults();
    o.wait = ADVLOCK_WAIT_SERVER;
    o.scope = scope;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, timeout, 1000), 0);
    expect_query(m, scope == ADVLOCK_SESSION ? ADVLOCK_SQL_TRY_LOCK : ADVLOCK_SQL_TRY_XACT_LOCK);
    assert_int_equal(act(m).wake_at_ms, INT64_MAX);
    assert_int_equal(act(m).param2, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 1000);
    expect_query(m, scope == ADVLOCK_SESSION ? ADVLOCK_SQL_LOCK : ADVLOCK_SQL_XACT_LOCK);
    assert_int_equal(act(m).param2, timeout);
    assert_int_equal(act(m).wake_at_ms, 1000 + timeout + ADVLOCK_WAIT_GRACE_MS);
}

/* The machine's own deadline: the server should have ended the wait by
 * then; a statement stuck before its wait began is cancelled. */
static void reach_deadline(advlock_machine *m, int64_t deadline)
{
    assert_int_equal(advlock_on_timer(m, deadline - 1), 0); /* early: nothing */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(advlock_on_timer(m, deadline), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_true(act(m).param2 > 0);                         /* the query in flight */
    assert_int_equal(advlock_on_timer(m, deadline + 5), 0); /* twice: still one cancel */
    assert_int_equal(advlock_on_cancel_sent(m, deadline + 1), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_QUERY);
    /* PostgreSQL drops a cancel that overtakes its statement: until the
     * answer comes, the cancel is asked for again every 250 ms. */
    assert_int_equal(act(m).wake_at_ms, deadline + 5 + 250);
    assert_int_equal(advlock_on_cancel_sent(m, deadline + 1), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_on_timer(m, deadline + 5 + 249), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(advlock_on_timer(m, deadline + 5 + 250), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(advlock_on_cancel_sent(m, deadline + 256), 0);
}

static void lock_timeout(advlock_machine *m, int64_t now)
{
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "55P03",
                                       "canceling statement due to lock timeout", now),
                     0);
}

static void server_wait_granted_in_one_round_trip(void **state)
{
    advlock_machine *m = *state;
    start_waiting(m, ADVLOCK_SESSION, 30000);
    answer(m, ADVLOCK_RESULT_TRUE, 5000);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->attempts, 2); /* the try and the wait */
}

/* A free lock, or one the session holds in this mode already (re-entrant),
 * is granted by the try: no wait starts, so nothing can be undone later
 * that the session held before. */
static void server_wait_starts_with_a_try(void **state)
{
    advlock_machine *m = *state;
    advlock_options o = defaults();
    o.wait = ADVLOCK_WAIT_SERVER;
    o.mode = ADVLOCK_SHARED;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 30000, 0), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_SHARED);
    answer(m, ADVLOCK_RESULT_TRUE, 1);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->attempts, 1);

    /* The bound is what is left of the timeout when the try answers, and
     * lock_timeout's range ends at INT32_MAX ms. */
    o.mode = ADVLOCK_EXCLUSIVE;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 30000, 0), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 700);
    expect_query(m, ADVLOCK_SQL_LOCK);
    assert_int_equal(act(m).param2, 29300);
    assert_int_equal(act(m).param, report_of(m)->key);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 1, 0), ADVLOCK_EMISUSE);
    answer(m, ADVLOCK_RESULT_TRUE, 800);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, INT64_MAX, 0), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 1);
    assert_int_equal(act(m).param2, INT32_MAX);
    assert_int_equal(act(m).wake_at_ms, INT64_MAX);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_ACQUIRED, 0);

    /* A try that answers at the deadline ends the acquire: no wait. */
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 50, 0), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 50);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_int_equal(report_of(m)->attempts, 1);
}

static void server_wait_times_out_with_the_references_message(void **state)
{
    advlock_machine *m = *state;
    /* The server ends the wait itself at the deadline (lock_timeout). */
    start_waiting(m, ADVLOCK_SESSION, 2500);
    assert_int_equal(advlock_on_timer(m, 3500), 0); /* the grace is not over: no cancel */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_QUERY);
    lock_timeout(m, 3502);
    /* The lock may have been granted as the timeout struck: one unlock
     * makes sure, before the timeout is reported. It cannot release an
     * older hold: the try would have been granted. */
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 3503);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m), "Could not acquire migration lock for 'jobs' within 2.5s.");
    assert_string_equal(report_of(m)->sqlstate, "");
    assert_int_equal(report_of(m)->attempts, 2);

    /* It had been granted: the unlock gives it back, still a timeout. */
    start_waiting(m, ADVLOCK_SESSION, 2500);
    lock_timeout(m, 3502);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 3503);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);

    /* A statement stuck before its wait began (a catalog lock): the
     * machine cancels it a grace after the deadline. */
    start_waiting(m, ADVLOCK_SESSION, 2500);
    reach_deadline(m, 3500 + ADVLOCK_WAIT_GRACE_MS);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "c", 4300), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 4301);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);

    /* A transaction lock needs no unlock: the error aborted its transaction. */
    start_waiting(m, ADVLOCK_TRANSACTION, 2500);
    lock_timeout(m, 3502);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    start_waiting(m, ADVLOCK_TRANSACTION, 2500);
    reach_deadline(m, 3500 + ADVLOCK_WAIT_GRACE_MS);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "c", 4300), 0);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
}

/* The server ended the wait before the deadline (the caller's own
 * lock_timeout stopped the statement before the bound took over, or a
 * timeout beyond lock_timeout's range): the next round, after a sleep. */
static void server_wait_ended_early_goes_on(void **state)
{
    advlock_machine *m = *state;
    start_waiting(m, ADVLOCK_SESSION, 2500);
    lock_timeout(m, 1200);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 1201);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).wake_at_ms, 1301);
    assert_int_equal(advlock_on_timer(m, 1301), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 1302);
    expect_query(m, ADVLOCK_SQL_LOCK);
    assert_int_equal(act(m).param2, 2500 - 302);
    answer(m, ADVLOCK_RESULT_TRUE, 1400);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->attempts, 4);

    /* In a transaction the error aborted it: no second wait can follow. */
    start_waiting(m, ADVLOCK_TRANSACTION, 2500);
    lock_timeout(m, 1200);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(report_of(m)->sqlstate, "55P03");
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_XACT_LOCK);
}

static void server_wait_grant_racing_the_cancel_is_given_back(void **state)
{
    advlock_machine *m = *state;
    start_waiting(m, ADVLOCK_SESSION, 2500);
    reach_deadline(m, 4000);
    answer(m, ADVLOCK_RESULT_TRUE, 4001); /* granted before the cancel landed */
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 4002);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m), "Could not acquire migration lock for 'jobs' within 2.5s.");

    /* A transaction lock cannot be given back: it counts as acquired. */
    start_waiting(m, ADVLOCK_TRANSACTION, 2500);
    reach_deadline(m, 4000);
    answer(m, ADVLOCK_RESULT_TRUE, 4001);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
}

static void server_wait_cancelled_by_the_caller(void **state)
{
    advlock_machine *m = *state;
    start_waiting(m, ADVLOCK_SESSION, 60000);
    assert_int_equal(advlock_cancel(m, 1200), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(advlock_cancel(m, 1201), 0); /* twice: harmless */
    assert_int_equal(advlock_on_cancel_sent(m, 1202), 0);
    assert_int_equal(advlock_on_timer(m, 1300), 0); /* not yet time to repeat it */
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "c", 1203), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 1204);
    expect_done(m, ADVLOCK_CANCELLED, 0);

    /* The answer may overtake the cancel request. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    assert_int_equal(advlock_cancel(m, 1200), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 1201);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 1202);
    expect_done(m, ADVLOCK_CANCELLED, 0);

    /* So may the lock timeout: the undo, then CANCELLED all the same. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    assert_int_equal(advlock_cancel(m, 1200), 0);
    lock_timeout(m, 1201);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 1202);
    expect_done(m, ADVLOCK_CANCELLED, 0);

    start_waiting(m, ADVLOCK_TRANSACTION, 60000);
    assert_int_equal(advlock_cancel(m, 1200), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 1201);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_string_equal(said(m), "Cancel came too late for lock 'jobs': it was granted "
                                 "and is held until the transaction ends.");

    /* During the try there is no wait to stop: its answer decides. */
    advlock_options o = defaults();
    o.wait = ADVLOCK_WAIT_SERVER;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 60000, 0), 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    answer(m, ADVLOCK_RESULT_FALSE, 2);
    expect_done(m, ADVLOCK_CANCELLED, 0);
    assert_int_equal(report_of(m)->attempts, 1);
}

static void server_wait_errors(void **state)
{
    advlock_machine *m = *state;
    /* 57014 nobody asked for (statement_timeout) is an error, reported once
     * a grant it may hide has been given back. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014",
                                       "canceling statement due to statement timeout", 2000),
                     0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 2001);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(report_of(m)->sqlstate, "57014");
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_LOCK);
    assert_string_equal(said_with(m, "canceling statement due to statement timeout"),
                        "pg_advisory_lock for 'jobs' failed with SQLSTATE 57014: "
                        "canceling statement due to statement timeout");
    /* If giving it back fails too, the message says the lock may be held. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    lock_timeout(m, 61000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "XX000", "boom", 61001), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(said_with(m, "boom"),
                        "pg_advisory_unlock for 'jobs' failed with SQLSTATE "
                        "XX000: boom (giving back a grant the cancelled "
                        "statement may have made: the lock may still be held)");
    /* In a transaction the error has aborted it: nothing to give back. */
    start_waiting(m, ADVLOCK_TRANSACTION, 60000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "timeout", 2000),
                     0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    /* NULL from a function that returns void is named as such. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    answer(m, ADVLOCK_RESULT_NULL, 2000);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL);
    assert_string_equal(said(m), "pg_advisory_lock for 'jobs' returned null (expected void).");
    /* A deadlock is an error. */
    start_waiting(m, ADVLOCK_SESSION, 60000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "40P01", "deadlock", 2000),
                     0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    /* An error of the try is the try's. */
    advlock_options o = defaults();
    o.wait = ADVLOCK_WAIT_SERVER;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 60000, 0), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "c", 1), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_TRY_LOCK);
    /* After the cancel, another error is still an error. */
    start_waiting(m, ADVLOCK_SESSION, 100);
    reach_deadline(m, 1100 + ADVLOCK_WAIT_GRACE_MS);
    answer(m, ADVLOCK_RESULT_CONNECTION_LOST, 1700);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST);
    /* Misuse around the cancel. */
    assert_int_equal(advlock_on_cancel_sent(m, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_on_cancel_sent(NULL, 0), ADVLOCK_EINVAL);
}

static void server_wait_with_zero_timeout_tries_once(void **state)
{
    advlock_machine *m = *state;
    advlock_options o = defaults();
    o.wait = ADVLOCK_WAIT_SERVER;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 0, 0), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(act(m).wake_at_ms, INT64_MAX);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
}

/* ---- holder diagnostics ------------------------------------------------------- */

static void time_out_with_diagnostics(advlock_machine *m)
{
    advlock_options o = defaults();
    o.diagnose = 1;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 0, 0), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 0);
    expect_query(m, ADVLOCK_SQL_HOLDERS);
    assert_int_equal(act(m).param, act(m).param);
    /* Rows come through on_holders, not as a boolean. */
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_TRUE, NULL, NULL, 1), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_cancel(m, 1), 0); /* too late to matter */
}

static void diagnostics_name_the_holder(void **state)
{
    advlock_machine *m = *state;
    time_out_with_diagnostics(m);
    const advlock_holder rows[] = {
        {.pid = 4242,
         .granted = 1,
         .mode = "ExclusiveLock",
         .application_name = "nightly",
         .client = "local",
         .state = "idle",
         .backend_start = "2026-11-30",
         .seconds = 75},
        {.pid = 77,
         .granted = 0,
         .mode = "ExclusiveLock",
         .application_name = "other",
         .state = "active",
         .seconds = 3},
    };
    assert_int_equal(advlock_on_holders(m, rows, 2, 2), 0);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said(m),
                        "Could not acquire migration lock for 'jobs' within 0s. Held by pid 4242 "
                        "(application 'nightly', state idle) for 75s.");
    assert_int_equal(report_of(m)->holder_pid, 4242);
    assert_int_equal(report_of(m)->holder_seconds, 75);
    assert_string_equal(report_of(m)->holder_application, "nightly");
    assert_int_equal(report_of(m)->holder_state, ADVLOCK_BACKEND_IDLE);
    assert_int_equal(report_of(m)->other_holders, 0);
    assert_int_equal(report_of(m)->detail, ADVLOCK_DETAIL_DIAGNOSED);

    /* Shared holders: the first is named, the rest counted. */
    time_out_with_diagnostics(m);
    const advlock_holder shared[] = {
        {.pid = 1, .granted = 1, .application_name = NULL, .state = NULL, .seconds = -5},
        {.pid = 2, .granted = 1},
        {.pid = 3, .granted = 1},
    };
    assert_int_equal(advlock_on_holders(m, shared, 3, 2), 0);
    assert_string_equal(said(m),
                        "Could not acquire migration lock for 'jobs' within 0s. Held by pid 1 "
                        "(application '', state unknown) for 0s and by 2 other sessions.");

    /* Found by fuzzing: seconds near INT64_MAX must not overflow. */
    time_out_with_diagnostics(m);
    const advlock_holder ancient[] = {{.pid = -1, .granted = 1, .seconds = INT64_MAX}};
    assert_int_equal(advlock_on_holders(m, ancient, 1, 2), 0);
    assert_string_equal(said(m),
                        "Could not acquire migration lock for 'jobs' within 0s. Held by pid -1 "
                        "(application '', state unknown) for 9223372036854775807s.");

    time_out_with_diagnostics(m);
    assert_int_equal(advlock_on_holders(m, NULL, 0, 2), 0);
    assert_string_equal(said(m), "Could not acquire migration lock for 'jobs' within 0s. "
                                 "No session holds it now.");
    assert_int_equal(report_of(m)->holder_pid, 0);
}

static void failed_diagnostics_still_time_out(void **state)
{
    advlock_machine *m = *state;
    time_out_with_diagnostics(m);
    assert_int_equal(
        advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "42501", "permission denied", 2), 0);
    expect_done(m, ADVLOCK_TIMED_OUT, 0);
    assert_string_equal(said_with(m, "permission denied"),
                        "Could not acquire migration lock for 'jobs' within 0s. "
                        "(holder diagnostics failed: permission denied)");
    assert_string_equal(report_of(m)->sqlstate, "");

    assert_int_equal(advlock_on_holders(m, NULL, 0, 3), ADVLOCK_EMISUSE); /* done already */
    assert_int_equal(advlock_on_holders(NULL, NULL, 0, 3), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_holders(m, NULL, 1, 3), ADVLOCK_EINVAL);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 10, 0), 0);
    assert_int_equal(advlock_on_holders(m, NULL, 0, 3), ADVLOCK_EMISUSE); /* a lock query */
}

/* ---- events ----------------------------------------------------------------------- */

/* What each event said at the time: its report changes as the operation
 * goes on, so the facts are copied as they arrive. */
typedef struct recorder {
    advlock_event events[32];
    advlock_report reports[32];
    char messages[32][160];
    int n;
} recorder;

static void record(void *user, const advlock_event *e)
{
    recorder *r = user;
    if (r->n < 32) {
        r->events[r->n] = *e;
        r->reports[r->n] = *e->report;
        if (e->kind == ADVLOCK_EVENT_DONE)
            advlock_describe(e->report, KEY, KEY_LEN, NULL, r->messages[r->n],
                             sizeof r->messages[0]);
        else
            strncpy(r->messages[r->n], e->message, sizeof r->messages[0] - 1);
        r->n++;
    }
}

static void events_tell_the_story(void **state)
{
    advlock_machine *m = *state;
    static recorder r;
    memset(&r, 0, sizeof r);
    advlock_options o = defaults();
    o.on_event = record;
    o.event_user = &r;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 250, 0), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 1);
    assert_int_equal(advlock_on_timer(m, 101), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 102);
    assert_int_equal(advlock_on_timer(m, 302), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 303);
    advlock_notify(m, ADVLOCK_EVENT_WARNING, "you don't own a lock", 400);
    advlock_notify(m, ADVLOCK_EVENT_LOST, NULL, 401);
    advlock_notify(NULL, ADVLOCK_EVENT_LOST, NULL, 401);

    static const advlock_event_kind kinds[] = {
        ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT,  ADVLOCK_EVENT_SLEEP,   ADVLOCK_EVENT_ATTEMPT,
        ADVLOCK_EVENT_RESULT,  ADVLOCK_EVENT_SLEEP,   ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT,
        ADVLOCK_EVENT_DONE,    ADVLOCK_EVENT_WARNING, ADVLOCK_EVENT_LOST,
    };
    assert_int_equal(r.n, sizeof kinds / sizeof kinds[0]);
    for (int i = 0; i < r.n; i++) {
        assert_int_equal(r.events[i].kind, kinds[i]);
        assert_int_equal(r.reports[i].key, r.reports[0].key);
    }
    assert_int_equal(r.reports[0].attempts, 1);
    assert_int_equal(r.reports[6].attempts, 3);
    assert_int_equal(r.events[1].result, ADVLOCK_RESULT_FALSE);
    assert_int_equal(r.events[2].sleep_ms, 100);
    assert_int_equal(r.events[5].sleep_ms, 200);
    assert_int_equal(r.events[5].now_ms, 102);
    assert_int_equal(r.reports[8].outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(r.reports[8].elapsed_ms, 303);
    assert_string_equal(r.messages[8], "Could not acquire migration lock for 'jobs' within 0.25s.");
    assert_string_equal(r.messages[9], "you don't own a lock");
    assert_string_equal(r.messages[10], "");
    assert_int_equal(r.events[10].now_ms, 401);
}

/* ---- fencing tokens ------------------------------------------------------ */

static void start_fenced(advlock_machine *m, advlock_scope scope, int64_t timeout)
{
    advlock_options o = defaults();
    o.fence = 1;
    o.scope = scope;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, timeout, 0), 0);
    expect_query(m, scope == ADVLOCK_SESSION ? ADVLOCK_SQL_TRY_LOCK_FENCED
                                             : ADVLOCK_SQL_TRY_XACT_LOCK_FENCED);
    assert_int_equal(act(m).param, report_of(m)->key);
}

static void fence_takes_the_token_with_the_grant(void **state)
{
    advlock_machine *m = *state;
    start_fenced(m, ADVLOCK_SESSION, 1000);
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_TRY_LOCK_FENCED), ADVLOCK_ANSWER_FENCED);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_TRY_LOCK_FENCED), 1);
    /* Busy: no token; the next round is fenced too. */
    assert_int_equal(advlock_on_fenced(m, 0, 0, 1), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(advlock_on_timer(m, 101), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_FENCED);
    assert_int_equal(advlock_on_fenced(m, 1, 42, 102), 0);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->fence, 42);
    assert_int_equal(report_of(m)->attempts, 2);
    /* A release is a plain unlock, and its report carries no token. */
    assert_int_equal(advlock_start_release_key(m, report_of(m)->key, 103), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    assert_int_equal(report_of(m)->fence, 0);

    advlock_machine_init(m);
    start_fenced(m, ADVLOCK_TRANSACTION, 0);
    assert_int_equal(advlock_on_fenced(m, 1, 7, 1), 0);
    expect_done(m, ADVLOCK_ACQUIRED, 0);
    assert_int_equal(report_of(m)->fence, 7);
}

static void fence_answers_are_rows(void **state)
{
    advlock_machine *m = *state;
    assert_int_equal(advlock_on_fenced(NULL, 1, 1, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_fenced(m, 1, 1, 0), ADVLOCK_EMISUSE); /* nothing out */
    start_fenced(m, ADVLOCK_SESSION, 1000);
    assert_int_equal(advlock_on_fenced(m, 2, 1, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_on_fenced(m, 1, 0, 0), ADVLOCK_EINVAL); /* a grant needs a token */
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_TRUE, NULL, NULL, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_FALSE, NULL, NULL, 0), ADVLOCK_EMISUSE);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_FENCED); /* the refusals changed nothing */
    /* A NULL granted is the reference's NULL failure. */
    answer(m, ADVLOCK_RESULT_NULL, 1);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL);
    assert_int_equal(report_of(m)->fence, 0);

    /* An unfenced try answers with a boolean, never a fenced row. */
    advlock_machine_init(m);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 0, 0), 0);
    assert_int_equal(advlock_on_fenced(m, 1, 1, 0), ADVLOCK_EMISUSE);
}

static void fence_is_for_exclusive_polling_locks(void **state)
{
    advlock_machine *m = *state;
    advlock_options o = defaults();
    o.fence = 1;
    o.mode = ADVLOCK_SHARED;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EINVAL);
    o.mode = ADVLOCK_EXCLUSIVE;
    o.wait = ADVLOCK_WAIT_SERVER;
    assert_int_equal(advlock_set_options(m, &o), ADVLOCK_EINVAL);
    /* Unfenced options send the plain rows: nothing changes for them. */
    use(m, defaults());
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 0, 0), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK);
}

/* The schema missing: nothing was locked, nothing to give back, and the
 * message says how to install it. */
static void fence_without_the_schema_names_the_setup(void **state)
{
    advlock_machine *m = *state;
    start_fenced(m, ADVLOCK_SESSION, 1000);
    const char *words = "relation \"advlock.fence\" does not exist";
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "42P01", words, 1), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_string_equal(report_of(m)->sqlstate, "42P01");
    assert_non_null(strstr(said_with(m, words), "advlock setup"));
    assert_non_null(strstr(said_with(m, words), words));
}

/* Any other error may come after the grant (the session lock outlives the
 * statement's rolled-back transaction): one unlock, then the failure. */
static void fence_error_after_the_grant_is_undone(void **state)
{
    advlock_machine *m = *state;
    start_fenced(m, ADVLOCK_SESSION, 1000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", "timeout", 1), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_TRY_LOCK_FENCED);
    assert_string_equal(report_of(m)->sqlstate, "57014");
    /* The unlock may have given back an older, re-entrant hold instead. */
    assert_int_equal(report_of(m)->detail, ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR);
    assert_non_null(strstr(said(m), "in doubt"));

    /* The undo failing leaves the grant in doubt, and says so. */
    start_fenced(m, ADVLOCK_SESSION, 1000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "53100", "disk full", 1), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57P01", NULL, 2), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
    assert_int_equal(report_of(m)->detail, ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR);

    /* A transaction lock goes with the aborted transaction: no unlock. */
    start_fenced(m, ADVLOCK_TRANSACTION, 1000);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57014", NULL, 1), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
}

/* The one list of details that leave a lock in doubt, which every driver
 * and the command read: a failed give-back, and a fenced try's error. */
static void details_in_doubt(void **state)
{
    (void)state;
    for (int d = 0; d <= ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR + 1; d++) {
        int doubt = d == ADVLOCK_DETAIL_UNDO_CANCELLED || d == ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE
                    || d == ADVLOCK_DETAIL_UNDO_AFTER_57014
                    || d == ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR;
        assert_int_equal(advlock_detail_in_doubt((advlock_detail)d), doubt);
    }
}

/* A grant nobody wants any more is given back, its token with it. */
static void fence_cancelled_grant_keeps_no_token(void **state)
{
    advlock_machine *m = *state;
    start_fenced(m, ADVLOCK_SESSION, 1000);
    assert_int_equal(advlock_cancel(m, 1), 0);
    assert_int_equal(advlock_on_fenced(m, 1, 9, 2), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK);
    answer(m, ADVLOCK_RESULT_TRUE, 3);
    expect_done(m, ADVLOCK_CANCELLED, 0);
    assert_int_equal(report_of(m)->fence, 0);
}

/* The fenced rows have no guarded form: behind a proxy, refused unsent. */
static void fence_behind_a_proxy_is_refused(void **state)
{
    advlock_machine *m = *state;
    advlock_session s;
    assert_int_equal(advlock_session_init(&s, 4242, 99), 0);
    s.checked = s.proxied = s.claimed = s.claim_asked = 1;
    assert_int_equal(advlock_set_session(m, &s), 0);
    advlock_options o = defaults();
    o.fence = 1;
    use(m, o);
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, 1000, 0), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION);
    assert_non_null(strstr(said(m), "direct connection"));
}

static void fence_setup_script_installs_all_three(void **state)
{
    (void)state;
    const char *sql = advlock_fence_setup_sql();
    assert_non_null(strstr(sql, "CREATE SCHEMA IF NOT EXISTS advlock"));
    assert_non_null(strstr(sql, "CREATE TABLE IF NOT EXISTS advlock.fence"));
    assert_non_null(strstr(sql, "CREATE OR REPLACE FUNCTION advlock.fence_ok"));
    assert_non_null(strstr(sql, "FOR SHARE"));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(fence_takes_the_token_with_the_grant),
        T(fence_answers_are_rows),
        T(fence_is_for_exclusive_polling_locks),
        T(fence_without_the_schema_names_the_setup),
        T(fence_error_after_the_grant_is_undone),
        cmocka_unit_test(details_in_doubt),
        T(fence_cancelled_grant_keeps_no_token),
        T(fence_behind_a_proxy_is_refused),
        T(fence_setup_script_installs_all_three),
        T(modes_and_scopes_pick_their_statements),
        T(options_are_checked_and_fixed_during_an_operation),
        T(clipping_puts_the_last_attempt_at_the_deadline),
        T(full_jitter_stays_within_its_ceilings),
        T(jitter_from_the_callers_randomness),
        T(server_wait_starts_with_a_try),
        T(server_wait_ended_early_goes_on),
        T(server_wait_granted_in_one_round_trip),
        T(server_wait_times_out_with_the_references_message),
        T(server_wait_grant_racing_the_cancel_is_given_back),
        T(server_wait_cancelled_by_the_caller),
        T(server_wait_errors),
        T(server_wait_with_zero_timeout_tries_once),
        T(diagnostics_name_the_holder),
        T(failed_diagnostics_still_time_out),
        T(events_tell_the_story),
    };
    return cmocka_run_group_tests_name("options", tests, NULL, NULL);
}
