/*
 * Server-side waiting (ADVLOCK_WAIT_SERVER) through both libpq adapters
 * against a real PostgreSQL: the hand-off in one round trip, the timeout at
 * the deadline by the server's own lock_timeout (nothing left in pg_locks,
 * no waiter, the caller's lock_timeout untouched), grants hidden behind a
 * 55P03 or a cancel (given back), re-entrant acquires that keep the older
 * hold, the caller's cancel, a statement_timeout nobody asked for (an
 * error), and a transaction-scoped wait whose timeout aborts the caller's
 * transaction.
 */
#include "pg_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *a, *b, *c;
    advlock_pq sa, sb; /* blocking, on a and b */
    advlock_pq ac;     /* nonblocking, on c */
} fixture;

static advlock_options server_wait(void)
{
    advlock_options o;
    advlock_options_init(&o);
    o.wait = ADVLOCK_WAIT_SERVER;
    return o;
}

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect();
    f.b = pgt_connect();
    f.c = pgt_connect();
    advlock_options o = server_wait();
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    assert_int_equal(advlock_pq_init(&f.sb, f.b), 0);
    assert_int_equal(advlock_pq_set_options(&f.sb, &o), 0);
    assert_int_equal(advlock_pq_async_init(&f.ac, f.c), 0);
    assert_int_equal(advlock_pq_set_options(&f.ac, &o), 0);
    pgt_lock_begin(&f.lock, "server-wait", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    PQfinish(f->c);
    pgt_lock_end(&f->lock);
    return 0;
}

static void expect(const advlock_pq_report *r, advlock_outcome outcome)
{
    pgt_expect_outcome(r, outcome);
}

static void hold(fixture *f)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
}

static void let_go(fixture *f)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
}

/* a holds the key; the nonblocking waiter on c, waiting on the server,
 * records its events in seen. */
static void hold_and_record_the_waiter(fixture *f, pgt_events *seen)
{
    hold(f);
    advlock_options o = server_wait();
    pgt_record_events(&o, seen);
    assert_int_equal(advlock_pq_set_options(&f->ac, &o), 0);
}

static void run(advlock_pq *a)
{
    advlock_pq *const one[1] = {a};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
}

static void start(fixture *f, int64_t timeout_ms)
{
    assert_int_equal(advlock_pq_async_start_acquire(&f->ac, f->lock.key, f->lock.len, timeout_ms,
                                                    advlock_pq_now_ms()),
                     0);
}

/* Starts the nonblocking acquire and returns once its backend waits on the
 * server, past the try; returns the time just before the start. */
static int64_t start_waiting(fixture *f, int64_t timeout_ms)
{
    int64_t begun = advlock_pq_now_ms();
    start(f, timeout_ms);
    pgt_wait_until_waiting(f->lock.observer, f->lock.derived, f->c, &f->ac);
    return begun;
}

/* Nothing of session's in pg_locks for the key, held or awaited, and its
 * connection is idle and usable. */
static void expect_nothing_left(fixture *f, PGconn *session)
{
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, NULL, -1, session), 0);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, NULL, 0, NULL), 0);
    assert_int_equal(PQtransactionStatus(session), PQTRANS_IDLE);
    assert_int_equal(pgt_query_int(session, "SELECT 1", (char *)NULL), 1);
}

static void expect_timeout_message(const fixture *f, const advlock_pq_report *r,
                                   const char *seconds)
{
    char expected[256];
    snprintf(expected, sizeof expected, "Could not acquire migration lock for '%s' within %ss.",
             f->lock.key, seconds);
    expect(r, ADVLOCK_TIMED_OUT);
    assert_int_equal(r->lock.failure, 0);
    assert_string_equal(r->lock.sqlstate, "");
    /* The 55P03 (or the 57014 of a cancel) is not what the report says. */
    assert_string_equal(r->server_message, "");
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
    assert_int_equal(r->lock.attempts, 2); /* the try, and the wait */
}

/* ---- the hand-off ---- */

/* Hand-off latencies are printed in microseconds. */
static int64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

typedef struct waiter {
    fixture *f;
    int64_t timeout_ms;
    advlock_pq_report report;
    int rc;
    int64_t done_us;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc =
        advlock_pq_acquire(&w->f->sb, w->f->lock.key, w->f->lock.len, w->timeout_ms, &w->report);
    w->done_us = now_us();
    return NULL;
}

/* The lock goes to the waiter as the holder releases it: measured from the
 * start of the release to the waiter's ACQUIRED, typically a millisecond or
 * two (polling would take up to a second). The bound is generous, for a
 * loaded machine; the figure is printed. */
enum { HANDOFF_BOUND_MS = 500 };

static void test_blocking_handoff_in_one_round_trip(void **state)
{
    fixture *f = *state;
    hold(f);
    waiter w = {.f = f, .timeout_ms = LIMIT_MS};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_wait_until_waiting(f->lock.observer, f->lock.derived, f->b, NULL);
    char buf[512];
    assert_string_equal(pgt_last_statement(f->lock.observer, f->b, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_LOCK));

    int64_t releasing = now_us();
    let_go(f);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(w.rc, 0);
    expect(&w.report, ADVLOCK_ACQUIRED);
    assert_int_equal(w.report.lock.attempts, 2);
    int64_t latency = w.done_us - releasing;
    print_message("      blocking server-side hand-off: %lld us after the release began\n",
                  (long long)latency);
    assert_in_range(latency, 0, HANDOFF_BOUND_MS * 1000);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->b), 1);

    advlock_pq_report r;
    assert_int_equal(advlock_pq_release(&f->sb, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
}

static void test_async_handoff_in_one_round_trip(void **state)
{
    fixture *f = *state;
    hold(f);
    int64_t started = start_waiting(f, LIMIT_MS);
    /* Waiting on the server: the socket, and the deadline a grace after the
     * timeout (the server's lock_timeout ends the wait at the timeout). */
    assert_int_equal(advlock_pq_async_busy(&f->ac), 1);
    assert_int_equal(advlock_pq_async_wants(&f->ac), ADVLOCK_PQ_READ);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->ac, &at), 1);
    assert_in_range(at - started, LIMIT_MS + ADVLOCK_WAIT_GRACE_MS,
                    LIMIT_MS + ADVLOCK_WAIT_GRACE_MS + 50);

    int64_t releasing = now_us();
    let_go(f);
    run(&f->ac);
    int64_t latency = now_us() - releasing;
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_report(&f->ac)->lock.attempts, 2);
    print_message("      nonblocking server-side hand-off: %lld us after the release began\n",
                  (long long)latency);
    assert_in_range(latency, 0, HANDOFF_BOUND_MS * 1000);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
}

static void test_free_lock_granted_at_once(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 1000, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    char buf[128];
    /* The try granted it: no wait was needed. */
    assert_string_equal(pgt_last_statement(f->lock.observer, f->b, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_LOCK));
    assert_int_equal(r.lock.attempts, 1);
    assert_int_equal(advlock_pq_release(&f->sb, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
    /* A zero timeout is one try, whatever the strategy. */
    hold(f);
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_TIMED_OUT);
    assert_string_equal(pgt_last_statement(f->lock.observer, f->b, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_LOCK));
    let_go(f);
}

/* ---- the deadline ---- */

static void test_blocking_times_out_at_the_deadline(void **state)
{
    fixture *f = *state;
    hold(f);
    int64_t begun = advlock_pq_now_ms();
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 300, &r), 0);
    int64_t took = advlock_pq_now_ms() - begun;
    expect_timeout_message(f, &r, "0.3");
    assert_in_range(took, 300, 300 + 1000);
    expect_nothing_left(f, f->b);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->a), 1);
    let_go(f);
}

static void test_async_times_out_at_the_deadline(void **state)
{
    fixture *f = *state;
    static pgt_events seen;
    hold_and_record_the_waiter(f, &seen);

    pgt_exec(f->c, "SET lock_timeout = '7s'"); /* the caller's own, kept */
    int64_t begun = start_waiting(f, 250);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->ac, &at), 1);
    /* from the start, a moment after begun, a grace after the timeout */
    assert_in_range(at - begun, 250 + ADVLOCK_WAIT_GRACE_MS, 300 + ADVLOCK_WAIT_GRACE_MS);
    run(&f->ac);
    int64_t took = advlock_pq_now_ms() - begun;
    expect_timeout_message(f, advlock_pq_async_report(&f->ac), "0.25");
    assert_in_range(took, 250, 250 + 1000);
    expect_nothing_left(f, f->c);

    /* The story: the try (false), the wait, the server's own lock timeout
     * at the deadline (55P03, no cancel request), then the unlock that
     * makes sure no grant slipped in (the server warns that there was none
     * and answers false). */
    static const advlock_event_kind story[] = {
        ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT, ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT,
        ADVLOCK_EVENT_WARNING, ADVLOCK_EVENT_RESULT, ADVLOCK_EVENT_DONE,
    };
    assert_int_equal(seen.n, sizeof story / sizeof story[0]);
    for (int i = 0; i < seen.n; i++)
        assert_int_equal(seen.events[i].kind, story[i]);
    assert_int_equal(seen.events[1].result, ADVLOCK_RESULT_FALSE);
    assert_in_range(seen.events[3].now_ms - begun, 250, 250 + 1000);
    assert_int_equal(seen.events[3].result, ADVLOCK_RESULT_SERVER_ERROR);
    assert_string_equal(seen.messages[3], "canceling statement due to lock timeout");
    assert_int_equal(seen.events[5].result, ADVLOCK_RESULT_FALSE);
    /* The bound lived for the statement only. */
    char buf[32];
    assert_string_equal(pgt_query(f->c, buf, sizeof buf, "SHOW lock_timeout", (char *)NULL), "7s");
    let_go(f);
}

/* The holder releases just before the deadline and the waiter's loop is
 * late: the grant is in the waiter's socket, unread, when the deadline's
 * cancel goes out (to an idle backend, which ignores it). The grant is then
 * given back, and the acquire still ends TIMED_OUT. */
static void test_grant_racing_the_cancel_is_given_back(void **state)
{
    fixture *f = *state;
    hold(f);
    int64_t begun = start_waiting(f, 300);
    let_go(f);
    /* The server granted it to c's backend at once. */
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->ac, &at), 1);
    /* The deadline counts from the start, which came a moment after begun
     * (several milliseconds under valgrind), a grace after the timeout. */
    assert_in_range(at - begun, 300 + ADVLOCK_WAIT_GRACE_MS, 350 + ADVLOCK_WAIT_GRACE_MS);
    pgt_sleep_ms(at + 20 - advlock_pq_now_ms());

    /* The deadline, before the socket was read: the cancel goes out. */
    assert_int_equal(advlock_pq_async_process(&f->ac, 0, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_async_busy(&f->ac), 1);
    assert_int_equal(advlock_next_action(advlock_pq_async_machine(&f->ac)).kind,
                     ADVLOCK_ACTION_QUERY);
    run(&f->ac);
    expect_timeout_message(f, advlock_pq_async_report(&f->ac), "0.3");
    char buf[128];
    assert_string_equal(pgt_last_statement(f->lock.observer, f->c, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_UNLOCK));
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    expect_nothing_left(f, f->c);
}

/* The same race one step later: the grant lands while the waiter's backend
 * is still inside pg_advisory_lock, and the cancel arrives before the
 * statement ends. PostgreSQL then fails the statement (57014, or 55P03 when
 * its lock_timeout fired meanwhile, which it reports first) although the
 * session now holds the lock (ProcSleep keeps a grant it finds), and a
 * session lock survives the failed statement. Frozen with SIGSTOP, the
 * backend is granted the lock by the releaser and gets the signals before
 * it runs again. The core answers either error by giving back a grant that
 * may have happened (session scope), so the acquire ends TIMED_OUT with
 * nothing held. A timeout of a second leaves a loaded machine time to see
 * the wait in pg_locks before the deadline ends it. */
static void test_grant_inside_the_cancelled_statement(void **state)
{
    fixture *f = *state;
    hold(f);
    int64_t begun = start_waiting(f, 1000);
    int pid = PQbackendPID(f->c);
    pgt_freeze(pid);
    let_go(f);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
    pgt_sleep_ms(begun + 1020 + ADVLOCK_WAIT_GRACE_MS - advlock_pq_now_ms());
    assert_int_equal(advlock_pq_async_process(&f->ac, 0, advlock_pq_now_ms()), 0); /* cancel */
    assert_int_equal(kill(pid, SIGCONT), 0);
    run(&f->ac);
    expect_timeout_message(f, advlock_pq_async_report(&f->ac), "1");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    expect_nothing_left(f, f->c);
}

/* A lock_timeout is a cancel the server sends itself, with the same race:
 * the holder lets go as the timer fires, and the statement fails with
 * 55P03 although the lock was granted. (This is why the machine unlocks
 * after a 55P03 too.) Frozen, the backend is granted the lock and its timer
 * fires before it runs again; no cancel request is sent. */
static void test_grant_inside_the_timed_out_statement(void **state)
{
    fixture *f = *state;
    static pgt_events seen;
    hold_and_record_the_waiter(f, &seen);
    int64_t begun = start_waiting(f, 300);
    int pid = PQbackendPID(f->c);
    pgt_freeze(pid);
    let_go(f);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
    pgt_sleep_ms(begun + 400 - advlock_pq_now_ms()); /* the timer fires, pending */
    assert_int_equal(kill(pid, SIGCONT), 0);
    run(&f->ac);
    expect_timeout_message(f, advlock_pq_async_report(&f->ac), "0.3");
    /* The wait's answer was the lock timeout's error, and the unlock found
     * the grant it hid. */
    int wait_error = 0, unlock = 0; /* found once past the try's answer (0) */
    for (int i = 1; i < seen.n; i++) {
        if (seen.events[i].kind != ADVLOCK_EVENT_RESULT)
            continue;
        if (seen.events[i].result == ADVLOCK_RESULT_SERVER_ERROR)
            wait_error = i;
        else if (wait_error > 0)
            unlock = i;
    }
    assert_true(wait_error > 0 && unlock > wait_error);
    assert_string_equal(seen.messages[wait_error], "canceling statement due to lock timeout");
    assert_int_equal(seen.events[unlock].result, ADVLOCK_RESULT_TRUE);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    expect_nothing_left(f, f->c);
}

/* ---- re-entrant acquires ---- */

/* A re-entrant acquire whose statement the server delays past the
 * deadline: b holds the lock (taken by polling, on the same
 * connection), and a catalog lock held elsewhere stalls any statement that
 * must look a function up for the first time. A wait that only begins once
 * the server has run it would be cancelled, and the unlock after its 57014
 * would release the older hold. The try grants the re-entrant acquire at
 * once (it was looked up before), so nothing waits and nothing older is
 * given back. */
static void test_reentrant_acquire_keeps_the_older_hold(void **state)
{
    fixture *f = *state;
    advlock_pq poll;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&poll, f->b), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(advlock_pq_acquire(&poll, f->lock.key, f->lock.len, 0, &r), 0);
        expect(&r, ADVLOCK_ACQUIRED);
    }
    /* One hold left; the unlock has been looked up too, so an undo would
     * not stall. */
    assert_int_equal(advlock_pq_release(&poll, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);

    PGconn *catalog = pgt_connect();
    pgt_exec(catalog, "BEGIN");
    pgt_exec(catalog, "LOCK TABLE pg_catalog.pg_proc IN ACCESS EXCLUSIVE MODE");
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 300, &r), 0);
    pgt_exec(catalog, "ROLLBACK");
    PQfinish(catalog);
    /* Whatever the acquire says it took is given back; the older hold
     * stays. */
    if (r.lock.outcome == ADVLOCK_ACQUIRED) {
        advlock_pq_report released;
        assert_int_equal(advlock_pq_release(&f->sb, f->lock.key, f->lock.len, &released), 0);
        expect(&released, ADVLOCK_RELEASED);
    }
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->b), 1);
    expect(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.attempts, 1);
    assert_int_equal(advlock_pq_release(&poll, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* A re-entrant acquire in another mode does wait: b holds the lock shared,
 * and so does a; b's exclusive server-side wait times out (55P03), the
 * unlock after it (of an exclusive hold: none) leaves the shared hold. */
static void test_reentrant_wait_times_out_keeping_the_older_hold(void **state)
{
    fixture *f = *state;
    advlock_options shared;
    advlock_options_init(&shared);
    shared.mode = ADVLOCK_SHARED;
    advlock_pq sa, sb;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&sa, f->a), 0);
    assert_int_equal(advlock_pq_init(&sb, f->b), 0);
    assert_int_equal(advlock_pq_set_options(&sa, &shared), 0);
    assert_int_equal(advlock_pq_set_options(&sb, &shared), 0);
    assert_int_equal(advlock_pq_acquire(&sa, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_acquire(&sb, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);

    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 200, &r), 0);
    expect_timeout_message(f, &r, "0.2");
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, f->b), 1);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", -1, f->b),
                     0);
    assert_int_equal(advlock_pq_release(&sb, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_release(&sa, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- the caller's cancel ---- */

static void test_cancel_during_a_server_wait(void **state)
{
    fixture *f = *state;
    hold(f);
    start_waiting(f, 60000);

    int64_t cancelling = advlock_pq_now_ms(), cancelling_us = now_us();
    assert_int_equal(advlock_pq_async_cancel(&f->ac, cancelling), 0);
    int64_t blocked = now_us() - cancelling_us;
    /* PQcancel blocked for one local connection: print what it cost. */
    print_message("      cancel request (PQcancel) blocked the loop for %lld us\n",
                  (long long)blocked);
    assert_int_equal(advlock_pq_async_busy(&f->ac), 1); /* the answer is on its way */
    assert_int_equal(advlock_pq_async_cancel(&f->ac, advlock_pq_now_ms()), 0); /* harmless */
    run(&f->ac);
    assert_in_range(advlock_pq_now_ms() - cancelling, 0, 1000);
    const advlock_pq_report *r = advlock_pq_async_report(&f->ac);
    expect(r, ADVLOCK_CANCELLED);
    char expected[256];
    snprintf(expected, sizeof expected, "Acquire of lock '%s' was cancelled.", f->lock.key);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
    expect_nothing_left(f, f->c);
    let_go(f);
}

/* Cancelled before the server has read the statement: the first request
 * may be ignored there, and is repeated until the statement answers. */
static void test_cancel_right_after_the_start(void **state)
{
    fixture *f = *state;
    hold(f);
    for (int round = 0; round < 5; round++) {
        start(f, 60000);
        int64_t cancelling = advlock_pq_now_ms();
        assert_int_equal(advlock_pq_async_cancel(&f->ac, cancelling), 0);
        run(&f->ac);
        expect(advlock_pq_async_report(&f->ac), ADVLOCK_CANCELLED);
        assert_in_range(advlock_pq_now_ms() - cancelling, 0, 3000);
        expect_nothing_left(f, f->c);
    }
    let_go(f);
}

/* ---- errors ---- */

static void test_statement_timeout_is_an_error(void **state)
{
    fixture *f = *state;
    hold(f);
    char expected[256];
    snprintf(expected, sizeof expected,
             "pg_advisory_lock for '%s' failed with SQLSTATE 57014: canceling statement due to "
             "statement timeout",
             f->lock.key);

    pgt_exec(f->b, "SET statement_timeout = 150");
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 30000, &r), 0);
    expect(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ESERVER);
    assert_string_equal(r.lock.sqlstate, "57014");
    assert_string_equal(pgt_describe(&r, f->lock.key), expected);
    pgt_exec(f->b, "RESET statement_timeout");
    expect_nothing_left(f, f->b);

    pgt_exec(f->c, "SET statement_timeout = 150");
    start(f, 30000);
    run(&f->ac);
    const advlock_pq_report *ar = advlock_pq_async_report(&f->ac);
    expect(ar, ADVLOCK_FAILED);
    assert_int_equal(ar->lock.failure, ADVLOCK_ESERVER);
    assert_string_equal(ar->lock.sqlstate, "57014");
    assert_string_equal(pgt_describe(ar, f->lock.key), expected);
    pgt_exec(f->c, "RESET statement_timeout");
    expect_nothing_left(f, f->c);
    let_go(f);
}

/* The lock timeout at the deadline fails the statement inside the caller's
 * transaction, which is then aborted: documented, and shown here. */
static void test_transaction_scoped_wait_aborts_the_transaction(void **state)
{
    fixture *f = *state;
    hold(f);
    advlock_options o = server_wait();
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_pq_set_options(&f->sb, &o), 0);
    pgt_exec(f->b, "BEGIN");
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 200, &r), 0);
    expect_timeout_message(f, &r, "0.2");
    assert_int_equal(PQtransactionStatus(f->b), PQTRANS_INERROR);
    pgt_exec(f->b, "ROLLBACK");
    expect_nothing_left(f, f->b);

    /* Granted inside the transaction: held until COMMIT. */
    let_go(f);
    pgt_exec(f->b, "BEGIN");
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 1000, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    char buf[128];
    assert_string_equal(pgt_last_statement(f->lock.observer, f->b, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_XACT_LOCK));
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->b), 1);
    pgt_exec(f->b, "COMMIT");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_blocking_handoff_in_one_round_trip),
        T(test_async_handoff_in_one_round_trip),
        T(test_free_lock_granted_at_once),
        T(test_blocking_times_out_at_the_deadline),
        T(test_async_times_out_at_the_deadline),
        T(test_grant_racing_the_cancel_is_given_back),
        T(test_grant_inside_the_cancelled_statement),
        T(test_grant_inside_the_timed_out_statement),
        T(test_reentrant_acquire_keeps_the_older_hold),
        T(test_reentrant_wait_times_out_keeping_the_older_hold),
        T(test_cancel_during_a_server_wait),
        T(test_cancel_right_after_the_start),
        T(test_statement_timeout_is_an_error),
        T(test_transaction_scoped_wait_aborts_the_transaction),
    };
    return cmocka_run_group_tests_name("libpq adapters: server-side waiting", tests, NULL, NULL);
}
