/*
 * Leases on a real PostgreSQL (the throwaway server's Unix socket, where
 * the setup answers UNIX_SOCKET and heartbeats still run): heartbeats keep
 * a held lock as long as the server answers them, on a blocking adapter
 * through advlock_pq_check() and on a nonblocking one through its deadline;
 * a server that stops answering (its backend frozen: a partition's silence
 * without the namespace) turns the lock LOST at the stop deadline, with
 * words naming the lease and never "no longer held", the event, and the
 * deadlines exposed; lock-delay's wait after a holder the server ended.
 * tests/partition/lease.sh does the same over real TCP.
 */
#include "pg_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The shortest lease for a stop time of 1 s: D = 3 s, heartbeats every
 * 0.75 s. */
enum { LEASE_MS = 8000, STOP_MS = 1000, D_MS = 3000, SLACK_MS = 900 };

typedef struct fixture {
    PGconn *conn, *observer;
    advlock_pq a;
    pgt_events seen;
    char key[160];
} fixture;

static fixture *begin(int nonblocking)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.conn = pgt_connect();
    f.observer = pgt_connect();
    advlock_options o;
    advlock_options_init(&o);
    o.on_event = pgt_record_event;
    o.event_user = &f.seen;
    o.lease_ms = LEASE_MS;
    o.lease_stop_ms = STOP_MS;
    assert_int_equal(
        nonblocking ? advlock_pq_async_init(&f.a, f.conn) : advlock_pq_init(&f.a, f.conn), 0);
    assert_int_equal(advlock_pq_set_options(&f.a, &o), 0);
    pgt_unique_key(f.key, sizeof f.key, "lease");
    return &f;
}

static void end(fixture *f)
{
    PQfinish(f->conn);
    PQfinish(f->observer);
}

/* The lock lost to its lease: report, words, event, deadlines. */
static void expect_lease_lost(fixture *f, int64_t frozen_at)
{
    int64_t now = advlock_pq_now_ms();
    assert_true(advlock_pq_async_lost(&f->a));
    const advlock_pq_report *r = advlock_pq_async_report(&f->a);
    assert_int_equal(r->lease_expiry, ADVLOCK_LEASE_NO_ANSWER);
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
    assert_non_null(strstr(r->server_message, "no heartbeat answered within 3s (lease 8s)"));
    const char *sentence = pgt_describe(r, f->key);
    assert_non_null(strstr(sentence, "lost: its lease ran out: no heartbeat answered"));
    assert_null(strstr(sentence, "no longer held"));
    assert_null(strstr(sentence, "closed"));
    int i = pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0);
    assert_true(i >= 0);
    assert_non_null(strstr(f->seen.messages[i], "(lease 8s)"));
    /* LOST came at the stop deadline, which no answered heartbeat set later
     * than the freeze + D. */
    int64_t stop_at = 0, free_by = 0;
    assert_int_equal(advlock_pq_lease_deadline(&f->a, &stop_at, &free_by), 2);
    assert_true(stop_at <= frozen_at + D_MS);
    assert_true(now - stop_at < SLACK_MS + 100);
    assert_true(free_by > now && free_by <= now + LEASE_MS);
}

static int backend_of(fixture *f)
{
    return PQbackendPID(f->conn);
}

/* Blocking: acquire, then advlock_pq_check() every 100 ms. */
static void test_blocking_heartbeats_keep_then_lose(void **state)
{
    (void)state;
    fixture *f = begin(0);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    int64_t stop_at = 0;
    assert_int_equal(advlock_pq_lease_deadline(&f->a, &stop_at, NULL), 1);
    assert_true(stop_at > advlock_pq_now_ms() && stop_at <= advlock_pq_now_ms() + D_MS);

    /* Twice D with the server answering: held all along, and the heartbeat
     * is what the session ran last. */
    int64_t until = advlock_pq_now_ms() + 2 * D_MS;
    while (advlock_pq_now_ms() < until) {
        assert_int_equal(advlock_pq_check(&f->a), 0);
        assert_false(advlock_pq_async_lost(&f->a));
        pgt_sleep_ms(100);
    }
    char buf[512];
    assert_non_null(
        strstr(pgt_last_statement(f->observer, f->conn, buf, sizeof buf), "tcp_user_timeout"));
    assert_int_equal(pgt_lock_count(f->observer, pgt_key_of(f->key)), 1);

    /* The server stops answering: LOST by the stop deadline. */
    int pid = backend_of(f);
    int64_t frozen_at = advlock_pq_now_ms();
    pgt_freeze(pid);
    until = frozen_at + D_MS + 2000;
    while (!advlock_pq_async_lost(&f->a) && advlock_pq_now_ms() < until) {
        assert_int_equal(advlock_pq_check(&f->a), 0);
        pgt_sleep_ms(20);
    }
    expect_lease_lost(f, frozen_at);
    pgt_terminate_frozen(f->observer, pid);
    end(f);
}

/* Nonblocking: the deadline alone wakes the loop for heartbeats and the
 * stop. */
static void test_nonblocking_deadline_drives_the_lease(void **state)
{
    (void)state;
    fixture *f = begin(1);
    advlock_pq *all[1] = {&f->a};
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->a, f->key, strlen(f->key), 0, advlock_pq_now_ms()), 0);
    pgt_loop_until_idle(all, 1, advlock_pq_now_ms() + 5000);
    pgt_expect_outcome(advlock_pq_async_report(&f->a), ADVLOCK_ACQUIRED);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->a, &at), 1);
    assert_true(at <= advlock_pq_now_ms() + D_MS);

    int64_t until = advlock_pq_now_ms() + 2 * D_MS;
    while (advlock_pq_now_ms() < until)
        (void)pgt_loop_turn(all, 1, until);
    assert_false(advlock_pq_async_lost(&f->a));

    int pid = backend_of(f);
    int64_t frozen_at = advlock_pq_now_ms();
    pgt_freeze(pid);
    until = frozen_at + D_MS + 2000;
    while (!advlock_pq_async_lost(&f->a) && advlock_pq_now_ms() < until)
        (void)pgt_loop_turn(all, 1, until);
    expect_lease_lost(f, frozen_at);
    pgt_terminate_frozen(f->observer, pid);
    end(f);
}

/* A release ends the heartbeats: nothing more is sent, nothing is lost. */
static void test_release_ends_the_lease(void **state)
{
    (void)state;
    fixture *f = begin(0);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_release(&f->a, f->key, strlen(f->key), &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_lease_deadline(&f->a, NULL, NULL), 0);
    int64_t at;
    assert_int_equal(advlock_pq_async_deadline(&f->a, &at), 0);
    int pid = backend_of(f);
    pgt_freeze(pid);
    pgt_sleep_ms(D_MS + 500);
    assert_int_equal(advlock_pq_check(&f->a), 0);
    assert_false(advlock_pq_async_lost(&f->a));
    pgt_terminate_frozen(f->observer, pid);
    end(f);
}

/* A second acquire on the connection (another key, held elsewhere) that
 * polls for longer than D: between its tries the connection is idle, and
 * the held lock's heartbeats go out then, so it stays held; the second
 * acquire times out as it would without a lease. */
static void test_heartbeats_run_while_a_second_acquire_sleeps(void **state)
{
    (void)state;
    fixture *f = begin(0);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    char other[160], sql[96];
    pgt_unique_key(other, sizeof other, "lease-other");
    snprintf(sql, sizeof sql, "SELECT pg_advisory_lock(%lld)", (long long)pgt_key_of(other));
    pgt_exec(f->observer, sql);
    assert_int_equal(pgt_lock_count(f->observer, pgt_key_of(other)), 1);

    int64_t started = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_acquire(&f->a, other, strlen(other), D_MS + 1500, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_TIMED_OUT);
    assert_true(advlock_pq_now_ms() - started >= D_MS + 1500);
    assert_false(advlock_pq_async_lost(&f->a));
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0), -1);
    assert_int_equal(advlock_pq_check(&f->a), 0);
    assert_int_equal(pgt_lock_count(f->observer, pgt_key_of(f->key)), 1);
    assert_int_equal(advlock_pq_release(&f->a, f->key, strlen(f->key), &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    end(f);
}

/* How many lock-delay marks key's row has (0 or 1). */
static long long marks_of(fixture *f)
{
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)pgt_key_of(f->key));
    return pgt_query_int(f->observer, "SELECT count(*) FROM advlock.mark WHERE key = $1::bigint",
                         key, (char *)NULL);
}

/* f's adapter, under the lease, with lock-delay on or off. */
static void set_lock_delay(fixture *f, int on)
{
    advlock_options o;
    advlock_options_init(&o);
    o.lease_ms = LEASE_MS;
    o.lease_stop_ms = STOP_MS;
    o.lock_delay = on;
    assert_int_equal(advlock_pq_set_options(&f->a, &o), 0);
}

/* Lock-delay through the blocking adapter (docs/design.md, "Lock-delay"):
 * a clean release clears the holder's mark, so the next acquire waits for
 * nothing; a holder whose session the server ends leaves its mark, and
 * the next holder reports ACQUIRED only the holder's stop bound (U = 5 s
 * for this lease) + 1 s after its grant, its mark then in place. */
static void test_lock_delay_waits_out_a_terminated_holder(void **state)
{
    (void)state;
    fixture *f = begin(0);
    pgt_exec(f->observer, advlock_fence_setup_sql());
    set_lock_delay(f, 1);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(marks_of(f), 1);
    assert_int_equal(advlock_pq_release(&f->a, f->key, strlen(f->key), &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(marks_of(f), 0);
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    pgt_terminate(f->observer, backend_of(f));

    PQfinish(f->conn);
    f->conn = pgt_connect();
    assert_int_equal(advlock_pq_init(&f->a, f->conn), 0);
    set_lock_delay(f, 1);
    assert_int_equal(advlock_pq_acquire(&f->a, f->key, strlen(f->key), 20000, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_true(r.lock.elapsed_ms >= 5000 + ADVLOCK_LEASE_MARGIN_MS);
    assert_int_equal(marks_of(f), 1);
    assert_int_equal(advlock_pq_release(&f->a, f->key, strlen(f->key), &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(marks_of(f), 0);
    end(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_heartbeats_keep_then_lose),
        cmocka_unit_test(test_nonblocking_deadline_drives_the_lease),
        cmocka_unit_test(test_release_ends_the_lease),
        cmocka_unit_test(test_heartbeats_run_while_a_second_acquire_sleeps),
        cmocka_unit_test(test_lock_delay_waits_out_a_terminated_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
