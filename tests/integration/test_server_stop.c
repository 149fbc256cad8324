/*
 * The server stopped with pg_ctl stop -m immediate while a session waits for
 * a lock: both adapters end FAILED with ADVLOCK_ECONNLOST within a second
 * (at the waiter's next try), never hang; and while a session holds a lock,
 * the nonblocking adapter reports it LOST within one loop turn. Each test
 * restarts the server, and this program runs last of the suite.
 */
#include "pg_test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    PGconn *a, *b;
    char key[160];
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect();
    f.b = pgt_connect();
    pgt_unique_key(f.key, sizeof f.key, "server-stop");
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    pgt_server_start();
    return 0;
}

/* Nothing reaches stderr: the server's goodbye, if it sent one, is one of
 * the report's notices. */
static void expect_lost(const advlock_pq_report *r, const char *key)
{
    pgt_expect_outcome(r, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
    assert_non_null(strstr(pgt_describe(r, key), "pg_try_advisory_lock for '"));
    if (r->notices > 0)
        assert_string_equal(r->notice, "terminating connection due to immediate shutdown command");
}

typedef struct waiter {
    advlock_pq session;
    const char *key;
    advlock_pq_report report;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = advlock_pq_acquire(&w->session, w->key, strlen(w->key), 30000, &w->report);
    w->done_ms = advlock_pq_now_ms();
    return NULL;
}

static void test_blocking_waiter(void **state)
{
    fixture *f = *state;
    advlock_pq holder;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&holder, f->a), 0);
    assert_int_equal(advlock_pq_acquire(&holder, f->key, strlen(f->key), 0, &r), 0);
    assert_int_equal(r.lock.outcome, ADVLOCK_ACQUIRED);

    waiter w = {.key = f->key};
    assert_int_equal(advlock_pq_init(&w.session, f->b), 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_sleep_ms(150); /* the waiter tried at 0 and 100 ms, sleeps until 300 */
    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    int64_t stopping = advlock_pq_now_ms();
    pgt_server_stop_immediate();
    assert_int_equal(pthread_join(thread, NULL), 0);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");

    expect_lost(&w.report, f->key);
    assert_int_equal(w.rc, 0);
    assert_true(w.done_ms - stopping < 1000);
}

static void test_nonblocking_waiter(void **state)
{
    fixture *f = *state;
    advlock_pq holder;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&holder, f->a), 0);
    assert_int_equal(advlock_pq_acquire(&holder, f->key, strlen(f->key), 0, &r), 0);

    advlock_pq adapter;
    assert_int_equal(advlock_pq_async_init(&adapter, f->b), 0);
    assert_int_equal(advlock_pq_async_start_acquire(&adapter, f->key, strlen(f->key), 30000,
                                                    advlock_pq_now_ms()),
                     0);
    pgt_loop_until_sleeping(&adapter, 2, advlock_pq_now_ms() + 5000);
    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    int64_t stopping = advlock_pq_now_ms();
    pgt_server_stop_immediate();
    advlock_pq *const one[1] = {&adapter};
    pgt_loop_until_idle(one, 1, stopping + 5000);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");

    expect_lost(advlock_pq_async_report(&adapter), f->key);
    assert_true(advlock_pq_now_ms() - stopping < 1000);
}

static void test_nonblocking_holder(void **state)
{
    fixture *f = *state;
    advlock_pq adapter;
    assert_int_equal(advlock_pq_async_init(&adapter, f->b), 0);
    assert_int_equal(
        advlock_pq_async_start_acquire(&adapter, f->key, strlen(f->key), 0, advlock_pq_now_ms()),
        0);
    advlock_pq *const one[1] = {&adapter};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + 5000);
    assert_int_equal(advlock_pq_async_report(&adapter)->lock.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_wants(&adapter), ADVLOCK_PQ_READ);

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    pgt_server_stop_immediate();
    assert_int_equal(pgt_loop_turn(one, 1, advlock_pq_now_ms() + 2000), 0);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");

    assert_int_equal(advlock_pq_async_lost(&adapter), 1);
    const advlock_pq_report *r = advlock_pq_async_report(&adapter);
    assert_int_equal(r->lock.outcome, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
    char expected[512];
    snprintf(expected, sizeof expected, "Lock '%s' lost: the connection holding it closed", f->key);
    assert_non_null(strstr(pgt_describe(r, f->key), expected));
    assert_int_equal(advlock_pq_async_socket(&adapter), -1);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_blocking_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonblocking_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonblocking_holder, setup, teardown),
    };
    return cmocka_run_group_tests_name("server stopped during a wait", tests, NULL, NULL);
}
