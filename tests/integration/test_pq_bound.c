/*
 * The blocking calls' bound: a backend that never answers (stopped with
 * SIGSTOP after the connection's first statement) holds an acquire no
 * longer than its timeout + ADVLOCK_PQ_GRACE_MS + the cancel's 0.5 s, nor
 * a release longer than ADVLOCK_GUARD_RETRY_MS + the grace + 0.5 s; the
 * call ends FAILED with ADVLOCK_ENOANSWER and the adapter refuses every
 * further call (EMISUSE) until it is bound to a new connection. Closing
 * the connection then frees what the session held.
 */
#include "pg_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    pgt_lock lock;
    PGconn *conn;
    advlock_pq adapter;
    int frozen; /* the backend's pid while stopped, else 0 */
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    pgt_lock_begin(&f.lock, "pq-bound", NULL);
    f.conn = pgt_connect();
    assert_int_equal(advlock_pq_init(&f.adapter, f.conn), 0);
    *state = &f;
    return 0;
}

/* The backend always runs again, whatever the test asserted. */
static int teardown(void **state)
{
    fixture *f = *state;
    if (f->frozen != 0)
        (void)kill(f->frozen, SIGCONT);
    PQfinish(f->conn);
    pgt_lock_end(&f->lock);
    return 0;
}

static void freeze(fixture *f)
{
    f->frozen = PQbackendPID(f->conn);
    pgt_freeze(f->frozen);
}

/* The report of a call given up on, and the adapter refusing more. */
static void expect_given_up(fixture *f, const advlock_pq_report *r, const char *function)
{
    pgt_expect_outcome(r, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ENOANSWER);
    char expected[256];
    snprintf(expected, sizeof expected, "%s for '", function);
    const char *said = pgt_describe(r, f->lock.key);
    assert_non_null(strstr(said, expected));
    assert_non_null(strstr(said, "no answer from the server within the bound; the connection is "
                                 "unusable and must be closed"));

    advlock_pq_report again;
    assert_int_equal(advlock_pq_acquire(&f->adapter, f->lock.key, f->lock.len, 0, &again),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_release(&f->adapter, f->lock.key, f->lock.len, &again),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_verify_key(&f->adapter, f->lock.derived, &again), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_check(&f->adapter), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_wait(&f->adapter, -1, 0), ADVLOCK_EMISUSE);
    assert_int_equal(PQstatus(f->conn), CONNECTION_OK); /* the caller's to close */
}

/* Closing the connection (the backend running again) leaves nothing held. */
static void expect_freed_when_closed(fixture *f)
{
    assert_int_equal(kill(f->frozen, SIGCONT), 0);
    f->frozen = 0;
    PQfinish(f->conn);
    f->conn = NULL;
    int64_t until = advlock_pq_now_ms() + 5000;
    while (pgt_lock_count(f->lock.observer, f->lock.derived) != 0 && advlock_pq_now_ms() < until)
        pgt_sleep_ms(20);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

static void test_acquire_on_a_stopped_backend_is_bounded(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    /* The session check first, so that the stop meets the try-lock. */
    assert_int_equal(advlock_pq_release(&f->adapter, f->lock.key, f->lock.len, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_NOT_HELD);
    freeze(f);

    int64_t started = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_acquire(&f->adapter, f->lock.key, f->lock.len, 500, &r), 0);
    int64_t took = advlock_pq_now_ms() - started;
    assert_true(took >= 500 + ADVLOCK_PQ_GRACE_MS);
    assert_true(took < 5000);
    assert_true(r.lock.elapsed_ms >= 500 + ADVLOCK_PQ_GRACE_MS);
    expect_given_up(f, &r, "pg_try_advisory_lock");
    expect_freed_when_closed(f);

    /* A new connection binds the adapter again. */
    f->conn = pgt_connect();
    assert_int_equal(advlock_pq_init(&f->adapter, f->conn), 0);
    assert_int_equal(advlock_pq_acquire(&f->adapter, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
}

static void test_release_on_a_stopped_backend_is_bounded(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->adapter, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    freeze(f);

    int64_t started = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_release(&f->adapter, f->lock.key, f->lock.len, &r), 0);
    int64_t took = advlock_pq_now_ms() - started;
    assert_true(took >= ADVLOCK_GUARD_RETRY_MS + ADVLOCK_PQ_GRACE_MS);
    assert_true(took < 6000);
    expect_given_up(f, &r, "pg_advisory_unlock");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 1);
    expect_freed_when_closed(f);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acquire_on_a_stopped_backend_is_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_release_on_a_stopped_backend_is_bounded, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("blocking calls on a server that does not answer", tests,
                                       NULL, NULL);
}
