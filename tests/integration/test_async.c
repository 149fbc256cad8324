/*
 * The nonblocking adapter against a real PostgreSQL, driven by a poll()
 * loop in one thread: what the server sees, mutual exclusion and the
 * reference's timeout, release and its warning, hand-off on the next
 * attempt, re-entrancy, cancel, terminated sessions, many adapters at once,
 * prepared statements, and misuse.
 */
#include "pg_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *a, *b;
    advlock_pq aa, ab;
    advlock_pq sa; /* driven blocking, on a */
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect();
    f.b = pgt_connect();
    assert_int_equal(advlock_pq_async_init(&f.aa, f.a), 0);
    assert_int_equal(advlock_pq_async_init(&f.ab, f.b), 0);
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    pgt_lock_begin(&f.lock, "async", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    pgt_lock_end(&f->lock);
    return 0;
}

static int64_t deadline(void)
{
    return advlock_pq_now_ms() + LIMIT_MS;
}

static void run(advlock_pq *a)
{
    advlock_pq *const one[1] = {a};
    pgt_loop_until_idle(one, 1, deadline());
}

static const advlock_pq_report *expect_outcome(advlock_pq *a, advlock_outcome outcome)
{
    const advlock_pq_report *r = advlock_pq_async_report(a);
    pgt_expect_outcome(r, outcome);
    return r;
}

static void acquire(advlock_pq *a, const char *key, int64_t timeout_ms)
{
    assert_int_equal(
        advlock_pq_async_start_acquire(a, key, strlen(key), timeout_ms, advlock_pq_now_ms()), 0);
    run(a);
}

static void release(advlock_pq *a, const char *key)
{
    assert_int_equal(advlock_pq_async_start_release(a, key, strlen(key), advlock_pq_now_ms()), 0);
    run(a);
}

/* A holds the key; B's acquire, with timeout_ms, was refused and sleeps
 * before its next attempt. */
static void b_sleeps_behind_a(fixture *f, int64_t timeout_ms)
{
    acquire(&f->aa, f->lock.key, 0);
    assert_int_equal(advlock_pq_async_start_acquire(&f->ab, f->lock.key, strlen(f->lock.key),
                                                    timeout_ms, advlock_pq_now_ms()),
                     0);
    pgt_loop_until_sleeping(&f->ab, 2, deadline());
}

/* ---- what the server sees ---- */

static void test_lock_row_and_statement_text(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 1000);
    assert_int_equal(expect_outcome(&f->aa, ADVLOCK_ACQUIRED)->lock.attempts, 1);

    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);
    pgt_expect_try_lock_statement(f->lock.observer, f->a);

    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- mutual exclusion ---- */

static void test_timeout_message_and_attempts(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);

    int64_t start = advlock_pq_now_ms();
    acquire(&f->ab, f->lock.key, 700);
    const advlock_pq_report *r = expect_outcome(&f->ab, ADVLOCK_TIMED_OUT);
    assert_true(advlock_pq_now_ms() - start >= 700);
    assert_int_equal(r->lock.failure, 0);
    assert_int_equal(r->lock.attempts, 4); /* at 0, 100, 300 and 700 ms */
    char expected[256];
    snprintf(expected, sizeof expected, "Could not acquire migration lock for '%s' within 0.7s.",
             f->lock.key);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);

    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
}

static void test_waiter_acquires_on_next_attempt(void **state)
{
    fixture *f = *state;
    b_sleeps_behind_a(f, 10000);
    uint64_t tried = advlock_next_action(advlock_pq_async_machine(&f->ab)).report->attempts;
    int64_t wake_at;
    assert_int_equal(advlock_pq_async_deadline(&f->ab, &wake_at), 1);

    release(&f->aa, f->lock.key); /* while B sleeps: nothing else needs the loop */
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    run(&f->ab);
    const advlock_pq_report *r = expect_outcome(&f->ab, ADVLOCK_ACQUIRED);
    assert_int_equal(r->lock.attempts, tried + 1);
    assert_true(advlock_pq_now_ms() - wake_at < 1000);
    release(&f->ab, f->lock.key);
}

/* ---- release and its warning ---- */

static void test_second_release_not_held_and_quiet(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 0);
    PQnoticeReceiver before = PQsetNoticeReceiver(f->a, NULL, NULL);

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    release(&f->aa, f->lock.key);
    const advlock_pq_report *first = expect_outcome(&f->aa, ADVLOCK_RELEASED);
    assert_int_equal(first->notices, 0);
    release(&f->aa, f->lock.key);
    pgt_stderr_end(&capture, printed, sizeof printed);

    assert_string_equal(printed, "");
    const advlock_pq_report *r = expect_outcome(&f->aa, ADVLOCK_NOT_HELD);
    assert_int_equal(r->lock.failure, 0);
    assert_int_equal(r->notices, 1);
    assert_string_equal(r->notice_sqlstate, "01000");
    assert_string_equal(r->notice, "you don't own a lock of type ExclusiveLock");
    assert_ptr_equal(PQsetNoticeReceiver(f->a, NULL, NULL), before);
}

/* ---- re-entrancy ---- */

static void test_reentrant_holds_need_two_releases(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    acquire(&f->ab, f->lock.key, 0);
    expect_outcome(&f->ab, ADVLOCK_TIMED_OUT);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_NOT_HELD);
}

/* ---- cancel ---- */

static void test_cancel_during_sleep(void **state)
{
    fixture *f = *state;
    b_sleeps_behind_a(f, 10000);

    assert_int_equal(advlock_pq_async_cancel(&f->ab, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_async_busy(&f->ab), 0); /* at once */
    assert_int_equal(advlock_pq_async_wants(&f->ab), 0);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->ab, &at), 0);
    const advlock_pq_report *r = expect_outcome(&f->ab, ADVLOCK_CANCELLED);
    char expected[256];
    snprintf(expected, sizeof expected, "Acquire of lock '%s' was cancelled.", f->lock.key);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);

    /* Only A's lock is there, and B's connection is idle and usable. */
    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);
    assert_int_equal(PQtransactionStatus(f->b), PQTRANS_IDLE);

    release(&f->aa, f->lock.key);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

static void test_cancel_while_the_lock_is_being_granted(void **state)
{
    fixture *f = *state;
    /* The connection's one session row and the try's PREPARE first, so
     * that the cancel meets the try-lock itself (a cancel during the
     * session row: test_pq_session.c). */
    acquire(&f->ab, f->lock.key, 0);
    release(&f->ab, f->lock.key);
    expect_outcome(&f->ab, ADVLOCK_RELEASED);
    /* The lock is free: the try-lock in flight will be granted, and the
     * adapter must give it back before reporting CANCELLED. */
    assert_int_equal(advlock_pq_async_start_acquire(&f->ab, f->lock.key, strlen(f->lock.key), 10000,
                                                    advlock_pq_now_ms()),
                     0);
    assert_int_equal(advlock_pq_async_busy(&f->ab), 1);
    assert_int_equal(advlock_pq_async_cancel(&f->ab, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_async_cancel(&f->ab, advlock_pq_now_ms()), 0);
    run(&f->ab);
    expect_outcome(&f->ab, ADVLOCK_CANCELLED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    /* Granted, then given back: B's last statement was the unlock. */
    char pid[16], buf[64];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(f->b));
    pgt_query(f->lock.observer, buf, sizeof buf,
              "SELECT query FROM pg_stat_activity WHERE pid = $1::int", pid, (char *)NULL);
    assert_string_equal(buf, advlock_sql_text(ADVLOCK_SQL_UNLOCK));
}

/* ---- terminated sessions ---- */

static void test_terminated_while_waiting(void **state)
{
    fixture *f = *state;
    b_sleeps_behind_a(f, 30000);
    pgt_terminate(f->lock.observer, PQbackendPID(f->b));
    int64_t terminated = advlock_pq_now_ms();
    run(&f->ab);
    pgt_expect_connection_lost(advlock_pq_async_report(&f->ab), f->lock.key,
                               "pg_try_advisory_lock for '");
    assert_true(advlock_pq_now_ms() - terminated < 1500);
    assert_int_equal(advlock_pq_async_socket(&f->ab), -1);

    /* The dead connection makes the next operation end at once. */
    assert_int_equal(advlock_pq_async_start_acquire(&f->ab, f->lock.key, strlen(f->lock.key), 30000,
                                                    advlock_pq_now_ms()),
                     0);
    assert_int_equal(advlock_pq_async_busy(&f->ab), 0);
    assert_int_equal(expect_outcome(&f->ab, ADVLOCK_FAILED)->lock.failure, ADVLOCK_ECONNLOST);
    release(&f->aa, f->lock.key);
}

static void test_terminated_while_holding(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 0);
    pgt_terminate(f->lock.observer, PQbackendPID(f->a));
    release(&f->aa, f->lock.key);
    pgt_expect_connection_lost(advlock_pq_async_report(&f->aa), f->lock.key,
                               "pg_advisory_unlock for '");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

static void test_terminated_mid_statement(void **state)
{
    fixture *f = *state;
    /* The connection's one session row first, so that the termination
     * meets the try-lock. */
    release(&f->ab, f->lock.key);
    expect_outcome(&f->ab, ADVLOCK_NOT_HELD);
    int pid = PQbackendPID(f->b);
    pgt_freeze(pid);
    assert_int_equal(advlock_pq_async_start_acquire(&f->ab, f->lock.key, strlen(f->lock.key), 30000,
                                                    advlock_pq_now_ms()),
                     0);
    pgt_terminate_frozen(f->lock.observer, pid);
    run(&f->ab);
    /* The server's FATAL answered the statement: its SQLSTATE is kept, not
     * replaced by libpq's "server closed the connection" that follows. */
    pgt_expect_connection_lost(advlock_pq_async_report(&f->ab), f->lock.key,
                               "pg_try_advisory_lock for '");
    assert_string_equal(advlock_pq_async_report(&f->ab)->lock.sqlstate, "57P01");
}

/* ---- many adapters, one thread ---- */

enum { CLIENTS = 6 };

static void test_many_adapters_one_key(void **state)
{
    fixture *f = *state;
    PGconn *conns[CLIENTS];
    advlock_pq adapters[CLIENTS];
    advlock_pq *list[CLIENTS];
    int acquired[CLIENTS] = {0};
    for (int i = 0; i < CLIENTS; i++) {
        conns[i] = pgt_connect();
        assert_int_equal(advlock_pq_async_init(&adapters[i], conns[i]), 0);
        list[i] = &adapters[i];
        assert_int_equal(advlock_pq_async_start_acquire(list[i], f->lock.key, strlen(f->lock.key),
                                                        20000, advlock_pq_now_ms()),
                         0);
    }
    int64_t limit = advlock_pq_now_ms() + 30000;
    int finished = 0;
    while (finished < CLIENTS) {
        assert_true(advlock_pq_now_ms() < limit);
        pgt_loop_turn(list, CLIENTS, limit);
        for (int i = 0; i < CLIENTS; i++) {
            const advlock_pq_report *r = advlock_pq_async_report(list[i]);
            if (r == NULL || acquired[i] == 2)
                continue;
            if (acquired[i] == 0) {
                pgt_expect_outcome(r, ADVLOCK_ACQUIRED);
                /* Mutual exclusion, as the server sees it: one holder, this one. */
                pgt_expect_lock_row(f->lock.observer, f->lock.derived, conns[i]);
                acquired[i] = 1;
                assert_int_equal(advlock_pq_async_start_release(list[i], f->lock.key,
                                                                strlen(f->lock.key),
                                                                advlock_pq_now_ms()),
                                 0);
            } else {
                assert_int_equal(r->lock.outcome, ADVLOCK_RELEASED);
                acquired[i] = 2;
                finished++;
            }
        }
    }
    for (int i = 0; i < CLIENTS; i++)
        PQfinish(conns[i]);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- prepared statements ---- */

static void test_statements_dropped_and_open_transaction(void **state)
{
    fixture *f = *state;
    acquire(&f->aa, f->lock.key, 0);
    release(&f->aa, f->lock.key);
    /* Dropped while idle: prepared again on the fly. */
    pgt_exec(f->a, "DEALLOCATE ALL");
    acquire(&f->aa, f->lock.key, 0);
    assert_int_equal(expect_outcome(&f->aa, ADVLOCK_ACQUIRED)->lock.attempts, 1);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);

    /* Dropped, then a transaction: the statements go unnamed, and the
     * caller's transaction survives. */
    pgt_exec(f->a, "DEALLOCATE ALL");
    pgt_exec(f->a, "BEGIN");
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    assert_int_equal(PQtransactionStatus(f->a), PQTRANS_INTRANS);
    assert_int_equal(pgt_query_int(f->a, "SELECT 1", (char *)NULL), 1);
    pgt_exec(f->a, "COMMIT");
}

/* ---- one connection, both adapters ---- */

static void test_blocking_calls_on_a_nonblocking_connection(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(PQisnonblocking(f->a), 1);
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, strlen(f->lock.key), 0, &r), 0);
    assert_int_equal(r.lock.outcome, ADVLOCK_ACQUIRED);
    release(&f->aa, f->lock.key);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, strlen(f->lock.key), &r), 0);
    assert_int_equal(r.lock.outcome, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);

    /* Busy with the adapter's query: the blocking call sends nothing. */
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, strlen(f->lock.key), 0,
                                                    advlock_pq_now_ms()),
                     0);
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, strlen(f->lock.key), 0, &r),
                     ADVLOCK_EMISUSE);
    run(&f->aa);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    release(&f->aa, f->lock.key);
}

/* ---- the key: derived once, passed back ---- */

static void test_acquire_and_release_by_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(
        advlock_pq_async_start_acquire_key(&f->aa, f->lock.derived, 0, advlock_pq_now_ms()), 0);
    run(&f->aa);
    const advlock_pq_report *r = expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    assert_true(r->lock.key == f->lock.derived);
    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);

    /* A name's acquire and the key's release meet on one lock. */
    acquire(&f->ab, f->lock.key, 0);
    expect_outcome(&f->ab, ADVLOCK_TIMED_OUT);
    int64_t key = advlock_pq_async_report(&f->ab)->lock.key;
    assert_true(key == f->lock.derived);
    assert_int_equal(advlock_pq_async_start_release_key(&f->aa, key, advlock_pq_now_ms()), 0);
    run(&f->aa);
    assert_true(expect_outcome(&f->aa, ADVLOCK_RELEASED)->lock.key == f->lock.derived);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    assert_int_equal(advlock_pq_async_start_acquire_key(&f->aa, key, -1, advlock_pq_now_ms()),
                     ADVLOCK_EINVAL);
}

/* ---- one turn of a loop: advlock_pq_wait ---- */

static void test_wait_drives_an_operation_and_watches_a_pipe(void **state)
{
    fixture *f = *state;
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);

    /* Nothing to wait for: back at once, whatever the limit. */
    int64_t start = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_wait(&f->aa, -1, -1), 0);
    assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], 30), 0); /* the limit */
    assert_true(advlock_pq_now_ms() - start >= 30);

    /* Turns run an acquire to its end, through its sleeps. */
    acquire(&f->ab, f->lock.key, 0);
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, strlen(f->lock.key), 250,
                                                    advlock_pq_now_ms()),
                     0);
    int turns = 0;
    while (advlock_pq_async_busy(&f->aa)) {
        assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], -1), 0);
        assert_true(++turns < 100);
    }
    expect_outcome(&f->aa, ADVLOCK_TIMED_OUT);
    assert_int_equal(advlock_pq_async_report(&f->aa)->lock.attempts, 3); /* 0, 100, 300 ms */

    /* Holding a lock, the adapter watches its socket; the pipe wakes the
     * wait, and is left unread for the caller. */
    release(&f->ab, f->lock.key);
    acquire(&f->aa, f->lock.key, 0);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_wants(&f->aa), ADVLOCK_PQ_READ);
    assert_int_equal(write(pipe_fds[1], "!", 1), 1);
    assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], -1), 1);
    assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], -1), 1);
    char byte;
    assert_int_equal(read(pipe_fds[0], &byte, 1), 1);
    assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], 0), 0);
    assert_int_equal(advlock_pq_async_lost(&f->aa), 0);

    /* The session's end wakes it too: the lock is reported lost. */
    pgt_terminate(f->lock.observer, PQbackendPID(f->a));
    while (!advlock_pq_async_lost(&f->aa))
        assert_int_equal(advlock_pq_wait(&f->aa, pipe_fds[0], 5000), 0);
    const advlock_pq_report *r = expect_outcome(&f->aa, ADVLOCK_FAILED);
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

/* ---- size: an adapter per lock in flight ---- */

/* Under 1 KB before leases, 1160 bytes with them and the fencing token;
 * the connection engine with its one member, slots and the pump's state
 * (the lock set's too) make it 3264 on x86-64 (include/advlock_pq.h,
 * "Sizes"), still no heap memory. */
static void test_adapter_size_is_bounded(void **state)
{
    (void)state;
    print_message("      sizeof(advlock_pq) = %zu, sizeof(advlock_pq_report) = %zu\n",
                  sizeof(advlock_pq), sizeof(advlock_pq_report));
    assert_true(sizeof(advlock_pq) <= 3264);
}

/* ---- misuse ---- */

static void test_null_and_unbound(void **state)
{
    fixture *f = *state;
    advlock_pq unbound;
    memset(&unbound, 0, sizeof unbound);
    int64_t now = advlock_pq_now_ms(), at = 0;

    assert_int_equal(advlock_pq_async_init(NULL, f->a), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_init(&unbound, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_start_acquire(NULL, "k", 1, 0, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_start_release(NULL, "k", 1, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_start_acquire_key(NULL, 1, 0, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_start_release_key(NULL, 1, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(NULL, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_check(NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_wait(NULL, -1, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_cancel(NULL, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_process(NULL, 0, now), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_socket(NULL), -1);
    assert_int_equal(advlock_pq_async_wants(NULL), 0);
    assert_int_equal(advlock_pq_async_deadline(NULL, &at), 0);
    assert_int_equal(advlock_pq_async_deadline(&f->aa, NULL), 0);
    assert_int_equal(advlock_pq_async_busy(NULL), 0);
    assert_null(advlock_pq_async_report(NULL));
    assert_null(advlock_pq_async_machine(NULL));

    /* A zeroed adapter is unbound: everything is refused. */
    assert_int_equal(advlock_pq_async_start_acquire(&unbound, "k", 1, 0, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_start_release(&unbound, "k", 1, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_start_acquire_key(&unbound, 1, 0, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_start_release_key(&unbound, 1, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_process(&unbound, ADVLOCK_PQ_READ, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_check(&unbound), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_wait(&unbound, -1, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_cancel(&unbound, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_socket(&unbound), -1);

    /* A broken connection cannot be bound, and leaves the adapter unbound. */
    PGconn *bad = PQconnectdb("host=/nonexistent/advlock-test port=1");
    assert_int_equal(PQstatus(bad), CONNECTION_BAD);
    assert_int_equal(advlock_pq_async_init(&unbound, bad), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_start_acquire(&unbound, "k", 1, 0, now), ADVLOCK_EMISUSE);
    PQfinish(bad);
}

static void test_wrong_order(void **state)
{
    fixture *f = *state;
    int64_t now = advlock_pq_now_ms();
    size_t len = strlen(f->lock.key);

    /* Nothing started yet. */
    assert_int_equal(advlock_pq_async_process(&f->aa, ADVLOCK_PQ_READ, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_cancel(&f->aa, now), ADVLOCK_EMISUSE);
    assert_null(advlock_pq_async_report(&f->aa));
    assert_int_equal(advlock_pq_async_process(&f->aa, 4, now), ADVLOCK_EINVAL);

    /* Bad arguments to start change nothing. */
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, len, -5, now),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, "\xFF", 1, 0, now), ADVLOCK_EUTF8);
    assert_int_equal(advlock_pq_async_busy(&f->aa), 0);

    /* Busy: a second start is refused and the first carries on. Readiness
     * that was not asked for, and early timer calls, are harmless. */
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, len, 0, now), 0);
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, len, 0, now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_start_release(&f->aa, f->lock.key, len, now),
                     ADVLOCK_EMISUSE);
    assert_null(advlock_pq_async_report(&f->aa));
    assert_int_equal(advlock_pq_async_process(&f->aa, ADVLOCK_PQ_WRITE, now), 0);
    assert_int_equal(advlock_pq_async_process(&f->aa, 0, now), 0);
    assert_int_equal(advlock_pq_async_process(&f->aa, 4, now), ADVLOCK_EINVAL);
    run(&f->aa);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED);
    /* Holding the lock, the adapter watches the session: readiness is read
     * (here there is nothing to read), but there is nothing to cancel. */
    assert_int_equal(advlock_pq_async_process(&f->aa, ADVLOCK_PQ_READ, now), 0);
    assert_int_equal(advlock_pq_async_lost(&f->aa), 0);
    assert_int_equal(advlock_pq_async_cancel(&f->aa, now), ADVLOCK_EMISUSE);
    expect_outcome(&f->aa, ADVLOCK_ACQUIRED); /* the report is unchanged */

    /* A release cannot be cancelled. */
    assert_int_equal(advlock_pq_async_start_release(&f->aa, f->lock.key, len, now), 0);
    assert_int_equal(advlock_pq_async_cancel(&f->aa, now), ADVLOCK_EMISUSE);
    run(&f->aa);
    expect_outcome(&f->aa, ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_async_process(&f->aa, ADVLOCK_PQ_READ, now), ADVLOCK_EMISUSE);

    /* A query of the caller's in flight: nothing is sent, its result stays
     * the caller's to read. */
    assert_int_equal(PQsendQuery(f->a, "SELECT 42"), 1);
    assert_int_equal(advlock_pq_async_start_acquire(&f->aa, f->lock.key, len, 0, now),
                     ADVLOCK_EMISUSE);
    while (PQflush(f->a) == 1)
        continue;
    PGresult *res;
    int rows = 0;
    while ((res = PQgetResult(f->a)) != NULL) {
        rows += PQntuples(res);
        PQclear(res);
    }
    assert_int_equal(rows, 1);

    /* A sleeping adapter ignores readiness and early deadlines. */
    acquire(&f->ab, f->lock.key, 0);
    expect_outcome(&f->ab, ADVLOCK_ACQUIRED);
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->aa, f->lock.key, len, 5000, advlock_pq_now_ms()), 0);
    pgt_loop_until_sleeping(&f->aa, 1, deadline());
    uint64_t tried = advlock_next_action(advlock_pq_async_machine(&f->aa)).report->attempts;
    int64_t wake_at;
    assert_int_equal(advlock_pq_async_deadline(&f->aa, &wake_at), 1);
    assert_int_equal(
        advlock_pq_async_process(&f->aa, ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE, wake_at - 1), 0);
    assert_int_equal(advlock_next_action(advlock_pq_async_machine(&f->aa)).report->attempts, tried);
    assert_int_equal(advlock_pq_async_busy(&f->aa), 1);
    assert_int_equal(advlock_pq_async_cancel(&f->aa, advlock_pq_now_ms()), 0);
    expect_outcome(&f->aa, ADVLOCK_CANCELLED);
    release(&f->ab, f->lock.key);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_row_and_statement_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_message_and_attempts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiter_acquires_on_next_attempt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_release_not_held_and_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reentrant_holds_need_two_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_during_sleep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_while_the_lock_is_being_granted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_terminated_while_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_while_holding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_mid_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_adapters_one_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statements_dropped_and_open_transaction, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_blocking_calls_on_a_nonblocking_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_acquire_and_release_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_drives_an_operation_and_watches_a_pipe, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_adapter_size_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_and_unbound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_order, setup, teardown),
    };
    return cmocka_run_group_tests_name("libpq nonblocking adapter", tests, NULL, NULL);
}
