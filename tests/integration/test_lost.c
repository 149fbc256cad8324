/*
 * Watching a held lock against a real PostgreSQL: the nonblocking adapter
 * reports a terminated session as LOST within one loop turn, and so does
 * the blocking check call; neither mistakes a notification, a
 * notice or the caller's own statement on a healthy connection for a loss,
 * and neither prints anything. A connection reset (PQreset()) while a lock
 * is held is a loss too, reported at the next call with its reason, never
 * a lock still held while pg_locks has none.
 */
#include "pg_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *a, *c;
    advlock_pq sa; /* blocking, on a */
    advlock_pq ac; /* nonblocking, on c */
    pgt_events seen;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect();
    f.c = pgt_connect();
    advlock_options o;
    advlock_options_init(&o);
    pgt_record_events(&o, &f.seen);
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    assert_int_equal(advlock_pq_set_options(&f.sa, &o), 0);
    assert_int_equal(advlock_pq_async_init(&f.ac, f.c), 0);
    assert_int_equal(advlock_pq_set_options(&f.ac, &o), 0);
    pgt_lock_begin(&f.lock, "lost", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->c);
    pgt_lock_end(&f->lock);
    return 0;
}

static void expect(const advlock_pq_report *r, advlock_outcome outcome)
{
    pgt_expect_outcome(r, outcome);
}

static void async_acquire(fixture *f)
{
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->ac, f->lock.key, f->lock.len, 0, advlock_pq_now_ms()),
        0);
    advlock_pq *const one[1] = {&f->ac};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_ACQUIRED);
}

/* One turn of the loop for the adapter alone, waiting at most limit_ms. */
static void one_turn(fixture *f, int64_t limit_ms)
{
    advlock_pq *const one[1] = {&f->ac};
    assert_int_equal(pgt_loop_turn(one, 1, advlock_pq_now_ms() + limit_ms), 0);
}

static void expect_watching(fixture *f)
{
    assert_int_equal(advlock_pq_async_busy(&f->ac), 0);
    assert_int_equal(advlock_pq_async_lost(&f->ac), 0);
    assert_int_equal(advlock_pq_async_wants(&f->ac), ADVLOCK_PQ_READ);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->ac, &at), 0);
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0), -1);
}

/* ---- the nonblocking adapter ---- */

static void test_async_reports_lost_within_one_turn(void **state)
{
    fixture *f = *state;
    async_acquire(f);
    expect_watching(f);
    assert_int_equal(advlock_pq_async_process(&f->ac, ADVLOCK_PQ_READ, advlock_pq_now_ms()), 0);
    expect_watching(f); /* a spurious wake-up reads nothing */

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    pgt_terminate(f->lock.observer, PQbackendPID(f->c));
    one_turn(f, 2000);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");

    assert_int_equal(advlock_pq_async_lost(&f->ac), 1);
    assert_int_equal(advlock_pq_async_wants(&f->ac), 0);
    assert_int_equal(advlock_pq_async_busy(&f->ac), 0);
    const advlock_pq_report *r = advlock_pq_async_report(&f->ac);
    expect(r, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
    assert_string_equal(r->lock.sqlstate, "57P01");
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
    assert_true(r->lock.key == f->lock.derived);
    assert_string_equal(r->server_message, "terminating connection due to administrator command");
    char expected[512];
    snprintf(expected, sizeof expected,
             "Lock '%s' lost: the connection holding it closed: terminating connection due to "
             "administrator command",
             f->lock.key);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
    int lost = pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0);
    assert_true(lost >= 0);
    assert_string_equal(f->seen.messages[lost], r->server_message);
    assert_true(f->seen.reports[lost].key == f->lock.derived);
    /* The server's FATAL came as a notice first: a warning, then the loss. */
    int warning = pgt_find_event(&f->seen, ADVLOCK_EVENT_WARNING, 0);
    assert_true(warning >= 0 && warning < lost);
    assert_string_equal(f->seen.messages[warning],
                        "terminating connection due to administrator command");

    /* Lost is final: nothing to process, and the next operation fails. */
    assert_int_equal(advlock_pq_async_process(&f->ac, ADVLOCK_PQ_READ, advlock_pq_now_ms()),
                     ADVLOCK_EMISUSE);
    assert_int_equal(
        advlock_pq_async_start_release(&f->ac, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_async_lost(&f->ac), 0);
    advlock_pq *const one[1] = {&f->ac};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_FAILED);
    assert_int_equal(advlock_pq_async_report(&f->ac)->lock.failure, ADVLOCK_ECONNLOST);
}

static void test_async_no_false_loss(void **state)
{
    fixture *f = *state;
    pgt_exec(f->c, "LISTEN advlock_it");
    async_acquire(f);

    /* A notification makes the idle session's socket readable. */
    pgt_exec(f->lock.observer, "NOTIFY advlock_it, 'hello'");
    one_turn(f, 2000);
    expect_watching(f);
    PGnotify *n = PQnotifies(f->c); /* left in libpq for the caller */
    assert_non_null(n);
    assert_string_equal(n->relname, "advlock_it");
    assert_string_equal(n->extra, "hello");
    PQfreemem(n);

    /* The caller's own statement while the lock is held: its notice goes to
     * the report and the callback, its result stays the caller's. */
    pgt_stderr_capture capture;
    char printed[512];
    unsigned notices = advlock_pq_async_report(&f->ac)->notices;
    pgt_stderr_begin(&capture);
    assert_int_equal(PQsendQuery(f->c, "DO $$ BEGIN RAISE NOTICE 'while-holding'; END $$"), 1);
    while (PQflush(f->c) == 1)
        continue;
    pgt_sleep_ms(100); /* the answer is in the socket */
    one_turn(f, 2000);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");
    expect_watching(f);
    assert_int_equal(advlock_pq_async_report(&f->ac)->notices, notices + 1);
    assert_string_equal(advlock_pq_async_report(&f->ac)->notice, "while-holding");
    int warning = pgt_find_event(&f->seen, ADVLOCK_EVENT_WARNING, 0);
    assert_true(warning >= 0);
    assert_string_equal(f->seen.messages[warning], "while-holding");
    PGresult *res;
    int results = 0;
    while ((res = PQgetResult(f->c)) != NULL) {
        assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
        results++;
        PQclear(res);
    }
    assert_int_equal(results, 1);

    /* Still held, still watched; the release ends the watch. */
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
    assert_int_equal(
        advlock_pq_async_start_release(&f->ac, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    advlock_pq *const one[1] = {&f->ac};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_async_wants(&f->ac), 0);
    pgt_exec(f->c, "UNLISTEN *");
}

/* ---- the blocking check ---- */

static void test_blocking_check(void **state)
{
    fixture *f = *state;
    advlock_pq unbound;
    memset(&unbound, 0, sizeof unbound);
    assert_int_equal(advlock_pq_check(NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_check(&unbound), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_check(&f->sa), 0); /* nothing held: still a check */

    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_check(&f->sa), 0);

    /* Healthy: a notification is left for the caller. */
    pgt_exec(f->a, "LISTEN advlock_it");
    pgt_exec(f->lock.observer, "NOTIFY advlock_it, 'still here'");
    pgt_sleep_ms(50);
    assert_int_equal(advlock_pq_check(&f->sa), 0);
    PGnotify *n = PQnotifies(f->a);
    assert_non_null(n);
    assert_string_equal(n->extra, "still here");
    PQfreemem(n);
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0), -1);

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    pgt_terminate(f->lock.observer, PQbackendPID(f->a));
    int64_t checking = advlock_pq_now_ms();
    int rc = advlock_pq_check(&f->sa);
    int64_t took = advlock_pq_now_ms() - checking;
    int again = advlock_pq_check(&f->sa);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");
    assert_int_equal(rc, 0);
    assert_int_equal(again, 0);
    assert_in_range(took, 0, 100); /* never waits */
    assert_int_equal(advlock_pq_async_lost(&f->sa), 1);
    const advlock_pq_report *loss = advlock_pq_async_report(&f->sa);
    expect(loss, ADVLOCK_FAILED);
    assert_int_equal(loss->lock.failure, ADVLOCK_ECONNLOST);
    assert_int_equal(loss->lock.detail, ADVLOCK_DETAIL_LOST);
    assert_string_equal(loss->server_message,
                        "terminating connection due to administrator command");
    int lost = pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0);
    assert_true(lost >= 0);
    assert_non_null(
        strstr(f->seen.messages[lost], "terminating connection due to administrator command"));
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, lost + 1), -1); /* once */

    /* The next operation fails as on any lost connection. */
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ECONNLOST);
    assert_int_equal(r.lock.detail, ADVLOCK_DETAIL_NONE);
}

/* ---- a reset connection ---- */

/* pg_locks has no hold of the key left: the backend of a reset connection
 * ends (and frees its locks) just after libpq closed its socket. */
static void expect_no_lock_left(fixture *f)
{
    int64_t until = advlock_pq_now_ms() + 5000;
    while (pgt_lock_count(f->lock.observer, f->lock.derived) != 0 && advlock_pq_now_ms() < until)
        pgt_sleep_ms(10);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* The loss of a lock held on pid old, now that conn has another backend:
 * the report and (once) the event say the connection was reset. */
static void expect_reset_loss(fixture *f, const advlock_pq_report *r, int old, PGconn *conn)
{
    char words[160];
    snprintf(words, sizeof words,
             "the connection was reset: server session %d, which held it, was replaced by %d", old,
             PQbackendPID(conn));
    int lost = pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0);
    assert_true(lost >= 0);
    assert_string_equal(f->seen.messages[lost], words);
    assert_true(f->seen.reports[lost].key == f->lock.derived);
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, lost + 1), -1); /* once */
    if (r == NULL)
        return;
    expect(r, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
    assert_string_equal(r->lock.sqlstate, "");
    assert_string_equal(r->server_message, words);
    char expected[512];
    snprintf(expected, sizeof expected, "Lock '%s' lost: the connection holding it closed: %s",
             f->lock.key, words);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
}

static void test_async_reset_is_lost(void **state)
{
    fixture *f = *state;
    async_acquire(f);
    expect_watching(f);
    int old = PQbackendPID(f->c);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);

    PQreset(f->c);
    assert_int_equal(PQstatus(f->c), CONNECTION_OK);
    assert_int_not_equal(PQbackendPID(f->c), old);
    assert_int_equal(advlock_pq_async_lost(&f->ac), 1); /* the next call, no turn needed */
    assert_int_equal(advlock_pq_async_wants(&f->ac), 0);
    expect_reset_loss(f, advlock_pq_async_report(&f->ac), old, f->c);
    expect_no_lock_left(f);

    /* The new session works, and holds nothing of the old one's. */
    assert_int_equal(
        advlock_pq_async_start_release(&f->ac, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    advlock_pq *const one[1] = {&f->ac};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    expect(advlock_pq_async_report(&f->ac), ADVLOCK_NOT_HELD);
}

/* A loop turn after the reset reports it too (the loop watches the old
 * socket, which libpq closed: the turn must not wait on it). */
static void test_async_reset_seen_by_a_turn(void **state)
{
    fixture *f = *state;
    async_acquire(f);
    int old = PQbackendPID(f->c);
    PQreset(f->c);
    assert_int_equal(advlock_pq_async_process(&f->ac, 0, advlock_pq_now_ms()), 0);
    expect_reset_loss(f, NULL, old, f->c); /* told by the turn itself */
    assert_int_equal(advlock_pq_async_lost(&f->ac), 1);
    expect_reset_loss(f, advlock_pq_async_report(&f->ac), old, f->c);
    expect_no_lock_left(f);
}

/* Takes the lock with the blocking adapter, then resets its connection;
 * returns the backend pid that held it. */
static int blocking_acquire_then_reset(fixture *f)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    int old = PQbackendPID(f->a);
    PQreset(f->a);
    assert_int_equal(PQstatus(f->a), CONNECTION_OK);
    return old;
}

static void test_blocking_reset_is_lost(void **state)
{
    fixture *f = *state;
    int old = blocking_acquire_then_reset(f);
    assert_int_equal(advlock_pq_check(&f->sa), 0);
    expect_reset_loss(f, NULL, old, f->a); /* told by the check itself */
    assert_int_equal(advlock_pq_async_lost(&f->sa), 1);
    expect_reset_loss(f, advlock_pq_async_report(&f->sa), old, f->a);
    expect_no_lock_left(f);
}

/* A program's own wait loop (advlock_pq_wait) is told within its turn,
 * although the reset connection's new socket stays silent. */
static void test_wait_turn_reset_is_lost(void **state)
{
    fixture *f = *state;
    int old = blocking_acquire_then_reset(f);
    assert_int_equal(advlock_pq_wait(&f->sa, -1, 50), 0);
    /* The event, before anything else is asked. */
    expect_reset_loss(f, NULL, old, f->a);
    assert_int_equal(advlock_pq_async_lost(&f->sa), 1);
    expect_reset_loss(f, advlock_pq_async_report(&f->sa), old, f->a);
    expect_no_lock_left(f);
}

/* Reset, then the next operation straight away: the loss is still told
 * (the event) before the operation runs on the new session. */
static void test_blocking_reset_then_acquire(void **state)
{
    fixture *f = *state;
    int old = blocking_acquire_then_reset(f);
    expect_no_lock_left(f);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), 0);
    expect_reset_loss(f, NULL, old, f->a);
    expect(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->a), 1);
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_RELEASED);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_async_reports_lost_within_one_turn),
        T(test_async_no_false_loss),
        T(test_blocking_check),
        T(test_async_reset_is_lost),
        T(test_async_reset_seen_by_a_turn),
        T(test_blocking_reset_is_lost),
        T(test_blocking_reset_then_acquire),
        T(test_wait_turn_reset_is_lost),
    };
    return cmocka_run_group_tests_name("libpq adapters: watching a held lock", tests, NULL, NULL);
}
