/*
 * The server session check through real PgBouncers, under
 * tests/pg/with-pgbouncer.sh with ADVLOCK_TEST_PGBOUNCER_TX_POOL=2:
 *   - session pooling: the session row shows a proxy (PgBouncer announces a
 *     pid of its own), so the lock statements are the guarded ones, never
 *     prepared, and they lock as directly; a server session another token
 *     claimed fails ESESSION at once, and PgBouncer's DISCARD ALL between
 *     clients clears the claim;
 *   - transaction pooling: statements of one client land on whichever of
 *     two server sessions is free. PgBouncer hands out the server session
 *     used last (LIFO), so a second client holding a transaction on the
 *     claimed session sends the adapter's next statement to the other one,
 *     where the guard runs nothing: ESESSION on an acquire; a release tries
 *     again until it reaches the claimed session; a session claimed by one
 *     client refuses every other; and a transaction-scoped acquire whose
 *     transaction lands where another client holds the key at session
 *     level is busy, not granted; a transaction-scoped lock turns the
 *     server's timeouts off for its own transaction, never for the next
 *     client's on that server session;
 *   - verifying a held lock: through the transaction pool, once an
 *     administrator terminates the idle server session holding the lock
 *     (the client's connection to PgBouncer stays up), the verify says so
 *     (ESESSION: it reached a server session nobody claimed); through the
 *     session pool and directly it says HELD, and the watch of the held lock
 *     goes on after it (a terminated session is still reported LOST);
 *   - a lock set through the session pool: its statements one at a time,
 *     guarded, its members excluding each other, its lease's heartbeats
 *     guarded too; through the transaction pool the same while its claimed
 *     server session is free, and ESESSION (a try) or retries (a release)
 *     while another client's transaction pins it, as for a single lock.
 */
#include "pg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    pgt_events seen;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    pgt_lock_begin(&f.lock, "proxy", "ADVLOCK_TEST_DIRECT");
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pgt_lock_end(&f->lock);
    return 0;
}

/* A blocking adapter on conn for locks of this scope, whose events f
 * records. */
static void bind_scope(fixture *f, advlock_pq *a, PGconn *conn, advlock_scope scope)
{
    assert_int_equal(advlock_pq_init(a, conn), 0);
    advlock_options o;
    advlock_options_init(&o);
    o.scope = scope;
    pgt_record_events(&o, &f->seen);
    assert_int_equal(advlock_pq_set_options(a, &o), 0);
}

static void bind(fixture *f, advlock_pq *a, PGconn *conn)
{
    bind_scope(f, a, conn, ADVLOCK_SESSION);
}

static const advlock_pq_report *acquire(fixture *f, advlock_pq *a, advlock_outcome outcome)
{
    static advlock_pq_report r;
    memset(&f->seen, 0, sizeof f->seen);
    assert_int_equal(advlock_pq_acquire(a, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, outcome);
    return &r;
}

static const advlock_pq_report *release(fixture *f, advlock_pq *a, advlock_outcome outcome)
{
    static advlock_pq_report r;
    assert_int_equal(advlock_pq_release(a, f->lock.key, f->lock.len, &r), 0);
    pgt_expect_outcome(&r, outcome);
    return &r;
}

static void expect_session_failure(const advlock_pq_report *r, advlock_sql sql, const char *name)
{
    assert_int_equal(r->lock.failure, ADVLOCK_ESESSION);
    assert_int_equal(r->lock.sql, sql);
    assert_non_null(strstr(pgt_describe(r, name), "session pool that does not reset sessions"));
}

static int server_pid(PGconn *conn)
{
    return (int)pgt_query_int(conn, "SELECT pg_catalog.pg_backend_pid()", (char *)NULL);
}

/* The pid of the server session holding key, or 0. */
static int pid_holding(fixture *f, int64_t key)
{
    char k[32], buf[16];
    snprintf(k, sizeof k, "%lld", (long long)key);
    pgt_query(f->lock.observer, buf, sizeof buf,
              "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
              " AND ((classid::bigint << 32) | objid::bigint) = $1::bigint",
              k, (char *)NULL);
    return buf[0] != '\0' ? (int)strtol(buf, NULL, 10) : 0;
}

/* The pid of the server session holding the fixture's lock, or 0. */
static int holder_pid(fixture *f)
{
    return pid_holding(f, f->lock.derived);
}

static void test_session_pool_runs_guarded_statements(void **state)
{
    fixture *f = *state;
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_SESSION");
    PGconn *other = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_SESSION");
    advlock_pq a, b;
    bind(f, &a, conn);
    bind(f, &b, other);
    assert_int_not_equal(PQbackendPID(conn), server_pid(conn)); /* PgBouncer's own pid */

    const advlock_pq_report *r = acquire(f, &a, ADVLOCK_ACQUIRED);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    int attempt = pgt_find_event(&f->seen, ADVLOCK_EVENT_ATTEMPT, 0);
    assert_true(attempt >= 0);
    assert_int_equal(f->seen.reports[attempt].sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    assert_int_equal(holder_pid(f), server_pid(conn));
    acquire(f, &b, ADVLOCK_TIMED_OUT); /* excluded as directly */
    r = release(f, &a, ADVLOCK_RELEASED);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_UNLOCK_GUARDED);
    assert_int_equal(holder_pid(f), 0);
    /* Behind a proxy nothing is prepared. */
    assert_int_equal(pgt_query_int(conn,
                                   "SELECT count(*) FROM pg_prepared_statements"
                                   " WHERE name LIKE 'advlock\\_%'",
                                   (char *)NULL),
                     0);
    PQfinish(conn);
    PQfinish(other);
}

static void test_session_pool_claimed_session_and_discard_all(void **state)
{
    fixture *f = *state;
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_SESSION");
    int pid = server_pid(conn);
    /* Another client's claim on this server session, made before the
     * adapter's first statement: as a proxy sharing server sessions would
     * leave it. */
    pgt_exec(conn, "SELECT pg_catalog.set_config('advlock.session', '999', false)");
    advlock_pq a;
    bind(f, &a, conn);
    const advlock_pq_report *r = acquire(f, &a, ADVLOCK_FAILED);
    expect_session_failure(r, ADVLOCK_SQL_SESSION, f->lock.key);
    assert_int_equal(pgt_find_event(&f->seen, ADVLOCK_EVENT_ATTEMPT, 0), -1); /* none sent */
    assert_int_equal(holder_pid(f), 0);
    char claim[64];
    assert_string_equal(pgt_session_claim(conn, claim, sizeof claim), "999");
    PQfinish(conn);

    /* The next client PgBouncer gives that server session finds it reset
     * (DISCARD ALL, server_reset_query's default): unclaimed, and it locks.
     * Clients are kept connected until one gets it: a client closed at once
     * would free its server session for the next, and PgBouncer hands out
     * the most recently freed one, which under load (the reset still
     * running) is a new session every time. */
    enum { MAX_CLIENTS = 30 };
    PGconn *held[MAX_CLIENTS];
    int nheld = 0;
    PGconn *next = NULL;
    for (int tries = 0; tries < 200 && next == NULL; tries++) {
        PGconn *c = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_SESSION");
        if (server_pid(c) == pid)
            next = c;
        else if (nheld < MAX_CLIENTS)
            held[nheld++] = c;
        else
            PQfinish(c);
        if (next == NULL)
            pgt_sleep_ms(20);
    }
    for (int i = 0; i < nheld; i++)
        PQfinish(held[i]);
    if (next == NULL)
        fail_msg("PgBouncer never handed out server session %d again", pid);
    assert_string_equal(pgt_session_claim(next, claim, sizeof claim), "");
    bind(f, &a, next);
    acquire(f, &a, ADVLOCK_ACQUIRED);
    assert_int_equal(holder_pid(f), pid);
    release(f, &a, ADVLOCK_RELEASED);
    PQfinish(next);
}

static void test_transaction_pool_statements_on_other_sessions(void **state)
{
    fixture *f = *state;
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    PGconn *other = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    advlock_pq a;
    bind(f, &a, conn);
    char claim[64];

    /* Alone, the adapter's statements all land on the last server session
     * used: it claims it and locks there. */
    const advlock_pq_report *r = acquire(f, &a, ADVLOCK_ACQUIRED);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    int claimed = holder_pid(f);
    assert_int_not_equal(claimed, 0);

    /* Another client's transaction takes that server session ... */
    pgt_exec(other, "BEGIN");
    if (server_pid(other) != claimed)
        fail_msg("PgBouncer did not hand out the last server session (LIFO) as expected");
    assert_string_not_equal(pgt_session_claim(other, claim, sizeof claim), "");

    /* ... so an acquire lands on the other one, where its guard runs
     * nothing: ESESSION, before anything is locked. */
    r = acquire(f, &a, ADVLOCK_FAILED);
    expect_session_failure(r, ADVLOCK_SQL_TRY_LOCK_GUARDED, f->lock.key);

    /* A release lands there too, and its guard unlocks nothing; it tries
     * again on the backoff schedule, the lock still where it was taken ... */
    assert_int_equal(
        advlock_pq_async_start_release(&a, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    while (advlock_next_action(advlock_pq_async_machine(&a)).kind != ADVLOCK_ACTION_SLEEP)
        assert_true(advlock_pq_wait(&a, -1, -1) >= 0);
    assert_int_equal(advlock_next_action(advlock_pq_async_machine(&a)).report->sql,
                     ADVLOCK_SQL_UNLOCK_GUARDED);
    assert_int_equal(holder_pid(f), claimed);
    /* ... and reaches it once the claimed session is free again. */
    pgt_exec(other, "COMMIT");
    while (advlock_pq_async_busy(&a))
        assert_true(advlock_pq_wait(&a, -1, -1) >= 0);
    pgt_expect_outcome(advlock_pq_async_report(&a), ADVLOCK_RELEASED);
    assert_int_equal(holder_pid(f), 0);

    /* A new client's session row lands on the session this one claimed:
     * refused at once. Claims outlive clients on a transaction pool, which
     * resets nothing between them. */
    PGconn *third = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    advlock_pq c;
    bind(f, &c, third);
    r = acquire(f, &c, ADVLOCK_FAILED);
    expect_session_failure(r, ADVLOCK_SQL_SESSION, f->lock.key);
    assert_int_equal(holder_pid(f), 0);
    PQfinish(third);
    PQfinish(conn);
    PQfinish(other);
}

/* Fresh server sessions in the transaction pool: claims of the tests
 * before outlive their clients there. */
static void fresh_tx_sessions(void)
{
    PGconn *admin = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX_ADMIN");
    pgt_exec(admin, "RECONNECT postgres");
    PQfinish(admin);
}

/* A transaction-scoped lock through the transaction pool whose transaction
 * lands on the server session where another client holds the key at session
 * level: PostgreSQL would grant it there (the session holds it already), so
 * the guard runs nothing and the acquire is busy, as if refused; once the
 * holder has released, the same session grants it. */
static void test_transaction_pool_xact_on_a_holding_session(void **state)
{
    fixture *f = *state;
    fresh_tx_sessions();
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    PGconn *xconn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    advlock_pq a, x;
    bind(f, &a, conn);
    bind_scope(f, &x, xconn, ADVLOCK_TRANSACTION);
    acquire(f, &a, ADVLOCK_ACQUIRED);
    int claimed = holder_pid(f);

    pgt_exec(xconn, "BEGIN");
    if (server_pid(xconn) != claimed)
        fail_msg("PgBouncer did not hand out the last server session (LIFO) as expected");
    const advlock_pq_report *r = acquire(f, &x, ADVLOCK_TIMED_OUT);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED);
    assert_int_equal(pgt_query_int(f->lock.observer,
                                   "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
                                   (char *)NULL),
                     1);
    pgt_exec(xconn, "ROLLBACK");

    release(f, &a, ADVLOCK_RELEASED);
    pgt_exec(xconn, "BEGIN");
    r = acquire(f, &x, ADVLOCK_ACQUIRED);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED);
    assert_int_not_equal(holder_pid(f), 0);
    pgt_exec(xconn, "COMMIT");
    assert_int_equal(holder_pid(f), 0);
    PQfinish(xconn);
    PQfinish(conn);
}

/* A transaction-scoped lock through the transaction pool turns the
 * server's timeouts off for its transaction alone: the session row (on a
 * server session it does not claim) and then each guarded try set them
 * with set_config(..., true), so the next transaction on that server
 * session, another client's, has the role's value again. */
static void test_transaction_pool_timeouts_off_for_the_transaction_only(void **state)
{
    fixture *f = *state;
    pgt_exec(f->lock.observer,
             "ALTER ROLE CURRENT_USER SET idle_in_transaction_session_timeout = '1h'");
    fresh_tx_sessions();
    PGconn *xconn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    advlock_pq x;
    bind_scope(f, &x, xconn, ADVLOCK_TRANSACTION);
    static const char show[] = "SHOW idle_in_transaction_session_timeout";
    char buf[32];
    for (int turn = 0; turn < 2; turn++) { /* with the session row, then without */
        pgt_exec(xconn, "BEGIN");
        int pid = server_pid(xconn);
        assert_string_equal(pgt_query(xconn, buf, sizeof buf, show, (char *)NULL), "1h");
        const advlock_pq_report *r = acquire(f, &x, ADVLOCK_ACQUIRED);
        assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED);
        assert_string_equal(pgt_query(xconn, buf, sizeof buf, show, (char *)NULL), "0");
        pgt_exec(xconn, "COMMIT");
        pgt_exec(xconn, "BEGIN");
        if (server_pid(xconn) != pid)
            fail_msg("PgBouncer did not hand out the last server session (LIFO) as expected");
        assert_string_equal(pgt_query(xconn, buf, sizeof buf, show, (char *)NULL), "1h");
        pgt_exec(xconn, "COMMIT");
    }
    PQfinish(xconn);
    pgt_exec(f->lock.observer, "ALTER ROLE CURRENT_USER RESET idle_in_transaction_session_timeout");
    fresh_tx_sessions();
}

/* ---- verifying a held lock ------------------------------------------------- */

static const advlock_pq_report *verify(fixture *f, advlock_pq *a, advlock_outcome outcome)
{
    static advlock_pq_report r;
    assert_int_equal(advlock_pq_verify_key(a, f->lock.derived, &r), 0);
    pgt_expect_outcome(&r, outcome);
    return &r;
}

/* A blocking adapter through the conninfo in env, holding the fixture's
 * lock; proxied: what advlock_pq_proxied() says once the session row came. */
static PGconn *holding_through(fixture *f, advlock_pq *a, const char *env, int proxied)
{
    PGconn *conn = pgt_connect_env(env);
    bind(f, a, conn);
    assert_int_equal(advlock_pq_proxied(a), 0); /* not known before the session row */
    acquire(f, a, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_proxied(a), proxied);
    return conn;
}

/* The gap the verify closes: the idle server session holding the lock is
 * closed behind PgBouncer's back (an administrator here; server_lifetime,
 * server_idle_timeout or RECONNECT in the field), the client's connection
 * to PgBouncer stays up, and nothing but a statement can tell. */
static void test_transaction_pool_verify_sees_the_holder_terminated(void **state)
{
    fixture *f = *state;
    fresh_tx_sessions();
    advlock_pq a;
    PGconn *conn = holding_through(f, &a, "ADVLOCK_TEST_PGBOUNCER_TX", 1);
    const advlock_pq_report *r = verify(f, &a, ADVLOCK_HELD);
    assert_int_equal(r->lock.sql, ADVLOCK_SQL_HELD_GUARDED);
    assert_string_equal(pgt_describe(r, f->lock.key), "");

    int holder = holder_pid(f);
    assert_int_not_equal(holder, 0);
    pgt_terminate(f->lock.observer, holder);
    assert_int_equal(holder_pid(f), 0); /* the lock went with its session */
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    /* The watch cannot see it: PgBouncer keeps the client's connection. */
    assert_int_equal(advlock_pq_check(&a), 0);
    assert_int_equal(advlock_pq_async_lost(&a), 0);

    advlock_pq_report after;
    assert_int_equal(advlock_pq_verify_key(&a, f->lock.derived, &after), 0);
    if (after.lock.outcome == ADVLOCK_NOT_HELD) {
        assert_non_null(strstr(pgt_describe(&after, f->lock.key), "is no longer held"));
    } else {
        pgt_expect_outcome(&after, ADVLOCK_FAILED);
        expect_session_failure(&after, ADVLOCK_SQL_HELD_GUARDED, f->lock.key);
        assert_non_null(
            strstr(pgt_describe(&after, f->lock.key), "cannot tell whether it still holds"));
    }
    printf("verify after the holder's server session was terminated: %s\n",
           pgt_describe(&after, f->lock.key));
    /* The watch ended with it: nothing more to wait for. */
    assert_int_equal(advlock_pq_async_wants(&a), 0);
    assert_int_equal(advlock_pq_async_busy(&a), 0);
    PQfinish(conn);
}

/* Through the session pool the verify says HELD, and the held lock stays
 * watched: its server session's end closes the client's connection, which
 * is reported LOST as after an acquire. */
static void test_session_pool_verify_keeps_the_watch(void **state)
{
    fixture *f = *state;
    advlock_pq a;
    PGconn *conn = holding_through(f, &a, "ADVLOCK_TEST_PGBOUNCER_SESSION", 1);
    verify(f, &a, ADVLOCK_HELD);
    verify(f, &a, ADVLOCK_HELD);
    assert_int_equal(advlock_pq_async_wants(&a), ADVLOCK_PQ_READ); /* still watching */

    memset(&f->seen, 0, sizeof f->seen);
    pgt_terminate(f->lock.observer, holder_pid(f));
    for (int i = 0; i < 100 && !advlock_pq_async_lost(&a); i++) {
        pgt_sleep_ms(20);
        assert_int_equal(advlock_pq_check(&a), 0);
    }
    assert_int_equal(advlock_pq_async_lost(&a), 1);
    assert_true(pgt_find_event(&f->seen, ADVLOCK_EVENT_LOST, 0) >= 0);
    PQfinish(conn);
}

/* Directly, no proxy: the plain row, which a released lock answers false. */
static void test_direct_verify_is_plain(void **state)
{
    fixture *f = *state;
    advlock_pq a;
    PGconn *conn = holding_through(f, &a, "ADVLOCK_TEST_DIRECT", 0);
    assert_int_equal(verify(f, &a, ADVLOCK_HELD)->lock.sql, ADVLOCK_SQL_HELD);
    release(f, &a, ADVLOCK_RELEASED);
    const advlock_pq_report *r = verify(f, &a, ADVLOCK_NOT_HELD);
    char expected[256];
    snprintf(expected, sizeof expected, "Lock '%s' is no longer held by this session.",
             f->lock.key);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
    PQfinish(conn);
}

/* ---- a lease behind a proxy -------------------------------------------------- */

/* A blocking adapter through env under the shortest lease for a 1 s stop
 * (D = 3 s, heartbeats every 0.75 s), holding the fixture's lock. */
static PGconn *leased_through(fixture *f, advlock_pq *a, const char *env)
{
    PGconn *conn = pgt_connect_env(env);
    bind(f, a, conn);
    advlock_options o;
    advlock_options_init(&o);
    o.on_event = pgt_record_event;
    o.event_user = &f->seen;
    o.lease_ms = 8000;
    o.lease_stop_ms = 1000;
    assert_int_equal(advlock_pq_set_options(a, &o), 0);
    acquire(f, a, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_proxied(a), 1);
    return conn;
}

/* Checks the adapter every 50 ms for ms, verifying every 400 ms (each
 * verify may find a heartbeat in flight, and waits for it). */
static void hold_for(fixture *f, advlock_pq *a, int64_t ms)
{
    int64_t until = advlock_pq_now_ms() + ms;
    for (int i = 0; advlock_pq_now_ms() < until && !advlock_pq_async_lost(a); i++) {
        assert_int_equal(advlock_pq_check(a), 0);
        if (i % 8 == 7)
            verify(f, a, ADVLOCK_HELD);
        pgt_sleep_ms(50);
    }
}

/* Through the session pool: nothing is set (the proxy's own settings bound
 * the release), guarded heartbeats keep the lock past D, between verifies. */
static void test_session_pool_lease_heartbeats_keep_the_lock(void **state)
{
    fixture *f = *state;
    advlock_pq a;
    PGconn *conn = leased_through(f, &a, "ADVLOCK_TEST_PGBOUNCER_SESSION");
    hold_for(f, &a, 7000);
    assert_int_equal(advlock_pq_async_lost(&a), 0);
    assert_int_not_equal(holder_pid(f), 0);
    release(f, &a, ADVLOCK_RELEASED);
    PQfinish(conn);
}

/* Through the transaction pool, the holder's server session closed behind
 * PgBouncer's back: the next guarded heartbeat reaches another server
 * session, and the lease ends the lock, in its own words. */
static void test_transaction_pool_lease_sees_the_holder_terminated(void **state)
{
    fixture *f = *state;
    fresh_tx_sessions();
    advlock_pq a;
    PGconn *conn = leased_through(f, &a, "ADVLOCK_TEST_PGBOUNCER_TX");
    pgt_terminate(f->lock.observer, holder_pid(f));
    for (int i = 0; i < 100 && !advlock_pq_async_lost(&a); i++) {
        assert_int_equal(advlock_pq_check(&a), 0);
        pgt_sleep_ms(50);
    }
    assert_int_equal(advlock_pq_async_lost(&a), 1);
    const advlock_pq_report *r = advlock_pq_async_report(&a);
    assert_int_equal(r->lease_expiry, ADVLOCK_LEASE_SETTINGS);
    assert_non_null(strstr(pgt_describe(r, f->lock.key), "its lease ran out: a heartbeat found"));
    int64_t stop_at = 0, free_by = 0;
    assert_int_equal(advlock_pq_lease_deadline(&a, &stop_at, &free_by), 2);
    assert_true(free_by == INT64_MAX); /* the settings changed: no bound from the lease */
    PQfinish(conn);
}

/* Through the session pool, the holder's backend frozen: no heartbeat
 * answers, the lease runs out, and it promises no time by which the server
 * frees the lock, since it set nothing there: the proxy's own settings
 * bound that. */
static void test_session_pool_lease_expiry_promises_no_free_time(void **state)
{
    fixture *f = *state;
    advlock_pq a;
    PGconn *conn = leased_through(f, &a, "ADVLOCK_TEST_PGBOUNCER_SESSION");
    int holder = holder_pid(f);
    pgt_freeze(holder);
    for (int i = 0; i < 100 && !advlock_pq_async_lost(&a); i++) {
        (void)advlock_pq_check(&a);
        pgt_sleep_ms(50);
    }
    assert_int_equal(advlock_pq_async_lost(&a), 1);
    const advlock_pq_report *r = advlock_pq_async_report(&a);
    assert_int_not_equal(r->lease_expiry, ADVLOCK_LEASE_LIVE);
    const char *said = pgt_describe(r, f->lock.key);
    assert_non_null(strstr(said, "behind a proxy the server frees the lock when the proxy drops "
                                 "this connection: its own tcp settings bound that"));
    assert_null(strstr(said, "within 8s"));
    int64_t stop_at = 0, free_by = 0;
    assert_int_equal(advlock_pq_lease_deadline(&a, &stop_at, &free_by), 2);
    assert_true(free_by == INT64_MAX);
    pgt_terminate_frozen(f->lock.observer, holder);
    PQfinish(conn);
}

/* A lock set behind a session pool: one statement at a time, guarded, and
 * the members still exclude each other. */
static void test_session_pool_lockset(void **state)
{
    fixture *f = *state;
    enum { MEMBERS = 12 };
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_SESSION");
    advlock_pq_lockset set;
    advlock_pq_member m[MEMBERS + 1];
    assert_int_equal(advlock_pq_lockset_init(&set, conn), 0);
    assert_int_equal(advlock_pq_lockset_set_lease(&set, 6000, 0), 0); /* heartbeats every 0.5 s */
    char names[MEMBERS][200];
    for (int i = 0; i <= MEMBERS; i++) {
        advlock_pq_member_init(&m[i]);
        if (i < MEMBERS)
            snprintf(names[i], sizeof names[i], "%s #%d", f->lock.key, i);
        const char *name = i < MEMBERS ? names[i] : names[0]; /* the last: a second on #0 */
        assert_int_equal(advlock_pq_lockset_start_acquire(&set, &m[i], name, strlen(name),
                                                          i < MEMBERS ? 0 : 250, NULL,
                                                          advlock_pq_now_ms()),
                         0);
    }
    int64_t limit = advlock_pq_now_ms() + 10000;
    while (advlock_pq_lockset_busy(&set) > 0) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&set, -1, 100);
    }
    for (int i = 0; i < MEMBERS; i++) {
        const advlock_pq_report *r = advlock_pq_member_report(&m[i]);
        pgt_expect_outcome(r, ADVLOCK_ACQUIRED);
        assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    }
    pgt_expect_outcome(advlock_pq_member_report(&m[MEMBERS]), ADVLOCK_TIMED_OUT);
    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(names[i])), 1);
    /* The lease's guarded heartbeats reach the claimed session: held on. */
    int64_t until = advlock_pq_now_ms() + 3000; /* past D (2 s) */
    while (advlock_pq_now_ms() < until)
        (void)advlock_pq_lockset_wait(&set, -1, 100);
    for (int i = 0; i < MEMBERS; i++)
        assert_true(advlock_pq_member_held(&m[i]));
    /* A guarded verify finds it on the claimed session. */
    assert_int_equal(advlock_pq_lockset_start_verify(&set, &m[0], advlock_pq_now_ms()), 0);
    while (advlock_pq_member_busy(&m[0]))
        (void)advlock_pq_lockset_wait(&set, -1, 100);
    pgt_expect_outcome(advlock_pq_member_report(&m[0]), ADVLOCK_HELD);
    assert_int_equal(advlock_pq_member_report(&m[0])->lock.sql, ADVLOCK_SQL_HELD_GUARDED);

    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(advlock_pq_lockset_start_release(&set, &m[i], advlock_pq_now_ms()), 0);
    while (advlock_pq_lockset_busy(&set) > 0) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&set, -1, 100);
    }
    for (int i = 0; i < MEMBERS; i++) {
        pgt_expect_outcome(advlock_pq_member_report(&m[i]), ADVLOCK_RELEASED);
        assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(names[i])), 0);
    }
    advlock_pq_lockset_finish(&set);
    PQfinish(conn);
}

static void run_set(advlock_pq_lockset *set)
{
    int64_t limit = advlock_pq_now_ms() + 10000;
    while (advlock_pq_lockset_busy(set) > 0) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(set, -1, 100);
    }
}

/* A lock set behind a transaction pool works as a single adapter does
 * there: its statements, one at a time and guarded, all land on the
 * server session it claimed while that one is free, so its members hold
 * there, exclude each other and another client, and release; a try that
 * lands on another server session (the claimed one pinned by another
 * client's transaction) fails ESESSION, locking nothing, and a release
 * tries again until it reaches the claimed one. */
static void test_transaction_pool_lockset(void **state)
{
    fixture *f = *state;
    enum { MEMBERS = 3 };
    fresh_tx_sessions();
    PGconn *conn = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    PGconn *pinning = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    PGconn *direct = pgt_connect_env("ADVLOCK_TEST_DIRECT");
    advlock_pq_lockset set;
    advlock_pq_member m[MEMBERS + 2];
    assert_int_equal(advlock_pq_lockset_init(&set, conn), 0);
    char names[MEMBERS][200];
    for (int i = 0; i < MEMBERS + 2; i++)
        advlock_pq_member_init(&m[i]);
    for (int i = 0; i <= MEMBERS; i++) {
        if (i < MEMBERS)
            snprintf(names[i], sizeof names[i], "%s #%d", f->lock.key, i);
        const char *name = i < MEMBERS ? names[i] : names[0]; /* the last: a second on #0 */
        assert_int_equal(advlock_pq_lockset_start_acquire(&set, &m[i], name, strlen(name),
                                                          i < MEMBERS ? 0 : 250, NULL,
                                                          advlock_pq_now_ms()),
                         0);
    }
    run_set(&set);
    int claimed = pid_holding(f, pgt_key_of(names[0]));
    assert_int_not_equal(claimed, 0);
    for (int i = 0; i < MEMBERS; i++) {
        const advlock_pq_report *r = advlock_pq_member_report(&m[i]);
        pgt_expect_outcome(r, ADVLOCK_ACQUIRED);
        assert_int_equal(r->lock.sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
        assert_int_equal(pid_holding(f, pgt_key_of(names[i])), claimed);
        assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(names[i])), 1);
    }
    pgt_expect_outcome(advlock_pq_member_report(&m[MEMBERS]), ADVLOCK_TIMED_OUT);

    /* Another client contends, and is excluded. */
    advlock_pq other;
    bind(f, &other, direct);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&other, names[1], strlen(names[1]), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_TIMED_OUT);

    /* Another client's transaction pins the claimed session: a try lands
     * on the other one, where its guard locks nothing. */
    pgt_exec(pinning, "BEGIN");
    if (server_pid(pinning) != claimed)
        fail_msg("PgBouncer did not hand out the last server session (LIFO) as expected");
    advlock_pq_member *late = &m[MEMBERS + 1];
    assert_int_equal(advlock_pq_lockset_start_acquire(&set, late, f->lock.key, f->lock.len, 0, NULL,
                                                      advlock_pq_now_ms()),
                     0);
    run_set(&set);
    expect_session_failure(advlock_pq_member_report(late), ADVLOCK_SQL_TRY_LOCK_GUARDED,
                           f->lock.key);
    assert_int_equal(holder_pid(f), 0);

    /* Releases started meanwhile try again until the session is free.
     * It is freed while none of the set's statements is out: PgBouncer
     * hands out the session freed last, which must be the claimed one. */
    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(advlock_pq_lockset_start_release(&set, &m[i], advlock_pq_now_ms()), 0);
    int64_t limit = advlock_pq_now_ms() + 1000;
    do {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&set, -1, 10);
    } while (advlock_pq_lockset_wants(&set) != 0);
    for (int i = 0; i < MEMBERS; i++)
        assert_true(advlock_pq_member_busy(&m[i])); /* sleeping before the next try */
    assert_int_equal(pid_holding(f, pgt_key_of(names[0])), claimed);
    pgt_exec(pinning, "COMMIT");
    run_set(&set);
    for (int i = 0; i < MEMBERS; i++) {
        pgt_expect_outcome(advlock_pq_member_report(&m[i]), ADVLOCK_RELEASED);
        assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(names[i])), 0);
    }
    assert_int_equal(advlock_pq_acquire(&other, names[1], strlen(names[1]), 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_release(&other, names[1], strlen(names[1]), &r), 0);
    advlock_pq_lockset_finish(&set);
    PQfinish(conn);
    PQfinish(pinning);
    PQfinish(direct);
}

int main(void)
{
    alarm(60); /* a hang fails the program instead of the whole run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_session_pool_runs_guarded_statements),
        T(test_session_pool_claimed_session_and_discard_all),
        T(test_transaction_pool_statements_on_other_sessions),
        T(test_transaction_pool_xact_on_a_holding_session),
        T(test_transaction_pool_timeouts_off_for_the_transaction_only),
        T(test_transaction_pool_verify_sees_the_holder_terminated),
        T(test_session_pool_verify_keeps_the_watch),
        T(test_direct_verify_is_plain),
        T(test_session_pool_lease_heartbeats_keep_the_lock),
        T(test_transaction_pool_lease_sees_the_holder_terminated),
        T(test_session_pool_lease_expiry_promises_no_free_time),
        T(test_session_pool_lockset),
        T(test_transaction_pool_lockset),
    };
    return cmocka_run_group_tests_name("libpq adapters: the server session check through PgBouncer",
                                       tests, NULL, NULL);
}
