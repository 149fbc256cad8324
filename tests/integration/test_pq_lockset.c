/*
 * Lock sets against a real PostgreSQL: a thousand members holding a
 * thousand names on one connection, members of one set excluding each
 * other (exclusive and shared), members against other processes both ways,
 * a terminated backend losing every held lock at once, cancellations in
 * the middle of a pipelined batch leaving nothing behind, a release the
 * server refuses keeping the lock, allocations refused mid-batch, the
 * options a set refuses, members of transaction scope held until the
 * caller's block ends, a member waiting on the server while another
 * holds, and twenty thousand names stopping at the set's
 * share of the server's lock table while another client still runs DDL.
 */
#include "pg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 20000, THOUSAND = 1000, BATCH = 200 };

/* Allocations refused on demand: this program is linked with
 * --wrap=malloc,calloc (mk/pq.mk), so the set's calls, in objects linked
 * in, come here; libpq and cmocka, shared libraries, keep the real ones. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
static int refuse_allocations;

void *__wrap_malloc(size_t size)
{
    return refuse_allocations ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return refuse_allocations ? NULL : __real_calloc(n, size);
}

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *conn;  /* the set's */
    PGconn *other; /* another process's session */
    advlock_pq_lockset set;
    advlock_pq_member *members; /* THOUSAND of them */
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    refuse_allocations = 0; /* after a test that failed with it set */
    f.conn = pgt_connect();
    f.other = pgt_connect();
    assert_int_equal(advlock_pq_lockset_init(&f.set, f.conn), 0);
    f.members = calloc(THOUSAND, sizeof *f.members);
    assert_non_null(f.members);
    for (int i = 0; i < THOUSAND; i++)
        advlock_pq_member_init(&f.members[i]);
    pgt_lock_begin(&f.lock, "lockset", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    advlock_pq_lockset_finish(&f->set);
    PQfinish(f->conn);
    PQfinish(f->other);
    free(f->members);
    pgt_lock_end(&f->lock);
    return 0;
}

/* Turns the set's loop until no member is busy. */
static void run(advlock_pq_lockset *set)
{
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (advlock_pq_lockset_busy(set) > 0) {
        assert_true(advlock_pq_now_ms() < limit);
        assert_true(advlock_pq_lockset_wait(set, -1, 100) >= 0);
    }
}

/* Turns the set's loop for ms. */
static void run_for(advlock_pq_lockset *set, int64_t ms)
{
    int64_t limit = advlock_pq_now_ms() + ms;
    while (advlock_pq_now_ms() < limit)
        (void)advlock_pq_lockset_wait(set, -1, 50);
}

/* Turns until m, the only member under way, sleeps between tries (the set
 * has a deadline then). */
static void run_until_sleeping(advlock_pq_lockset *set, advlock_pq_member *m)
{
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS, at;
    while (!advlock_pq_lockset_deadline(set, &at)) {
        assert_true(advlock_pq_member_busy(m));
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(set, -1, 100);
    }
}

static void start(fixture *f, advlock_pq_member *m, const char *name, int64_t timeout_ms,
                  const advlock_options *o)
{
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, m, name, strlen(name), timeout_ms, o,
                                                      advlock_pq_now_ms()),
                     0);
}

static void expect(const advlock_pq_member *m, advlock_outcome outcome)
{
    assert_false(advlock_pq_member_busy(m));
    pgt_expect_outcome(advlock_pq_member_report(m), outcome);
}

static void release(fixture *f, advlock_pq_member *m)
{
    assert_int_equal(advlock_pq_lockset_start_release(&f->set, m, advlock_pq_now_ms()), 0);
    run(&f->set);
    expect(m, ADVLOCK_RELEASED);
}

/* Advisory locks the set's backend holds, granted, in mode (NULL: any). */
static long long backend_locks(fixture *f, const char *mode)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(f->conn));
    return pgt_query_int(f->lock.observer,
                         "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                         " AND pid = $1::int AND ($2::text = '' OR mode = $2::text)",
                         pid, mode != NULL ? mode : "", (char *)NULL);
}

static void name_of(char *buf, size_t size, const fixture *f, int i)
{
    snprintf(buf, size, "%s #%d", f->lock.key, i);
}

/* Members 0 .. n-1 take names #0 .. #n-1 (one try each) and hold them. */
static void hold_distinct(fixture *f, int n)
{
    char name[200];
    for (int i = 0; i < n; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 0, NULL);
    }
    run(&f->set);
    for (int i = 0; i < n; i++)
        expect(&f->members[i], ADVLOCK_ACQUIRED);
}

/* ---- many locks, one connection ---- */

static void test_a_thousand_members_hold_a_thousand_names(void **state)
{
    fixture *f = *state;
    char name[200];
    for (int i = 0; i < THOUSAND; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 5000, NULL);
    }
    run(&f->set);
    for (int i = 0; i < THOUSAND; i++) {
        expect(&f->members[i], ADVLOCK_ACQUIRED);
        assert_true(advlock_pq_member_held(&f->members[i]));
    }
    assert_int_equal(backend_locks(f, "ExclusiveLock"), THOUSAND);

    for (int i = 0; i < THOUSAND; i++)
        assert_int_equal(
            advlock_pq_lockset_start_release(&f->set, &f->members[i], advlock_pq_now_ms()), 0);
    run(&f->set);
    for (int i = 0; i < THOUSAND; i++)
        expect(&f->members[i], ADVLOCK_RELEASED);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* ---- the server's lock table ---- */

enum { MANY = 20000 };

/* How many locks the set may hold on the test server, from its settings. */
static int64_t set_limit(fixture *f, int share)
{
    advlock_capacity c;
    assert_int_equal(
        advlock_capacity_init(
            &c,
            pgt_query_int(f->lock.observer,
                          "SELECT current_setting('max_locks_per_transaction')::int", (char *)NULL),
            pgt_query_int(f->lock.observer, "SELECT current_setting('max_connections')::int",
                          (char *)NULL),
            pgt_query_int(f->lock.observer,
                          "SELECT current_setting('max_prepared_transactions')::int", (char *)NULL),
            share),
        0);
    return advlock_capacity_limit(&c);
}

/* n members ask for n names at once: the set holds its share of the lock
 * table and refuses the rest in words; meanwhile a new client connects and
 * runs DDL (a full table fails both with "out of shared memory"). */
static void take_many(fixture *f, int share, int n)
{
    advlock_pq_member *many = calloc((size_t)n, sizeof *many);
    assert_non_null(many);
    char name[200];
    for (int i = 0; i < n; i++) {
        advlock_pq_member_init(&many[i]);
        name_of(name, sizeof name, f, i);
        start(f, &many[i], name, 0, NULL);
    }
    run(&f->set);
    int64_t limit = set_limit(f, share);
    long long held = 0;
    for (int i = 0; i < n; i++) {
        const advlock_pq_report *r = advlock_pq_member_report(&many[i]);
        if (r->lock.outcome == ADVLOCK_ACQUIRED) {
            held++;
            continue;
        }
        assert_int_equal(r->lock.outcome, ADVLOCK_FAILED);
        assert_int_equal(r->lock.failure, ADVLOCK_ESERVER);
        assert_string_equal(r->lock.sqlstate, "53400");
        assert_non_null(
            strstr(r->server_message, "max_locks_per_transaction 64 x (max_connections"));
        assert_non_null(strstr(r->server_message, "raise max_locks_per_transaction"));
        assert_false(advlock_pq_member_held(&many[i]));
    }
    assert_int_equal(held, limit);
    assert_int_equal(backend_locks(f, NULL), limit);

    PGconn *newcomer = pgt_connect();
    pgt_exec(newcomer, "CREATE TABLE lockset_newcomer (id int PRIMARY KEY, t text)");
    pgt_exec(newcomer, "DROP TABLE lockset_newcomer");
    PQfinish(newcomer);

    for (int i = 0; i < n; i++)
        if (advlock_pq_member_held(&many[i]))
            assert_int_equal(
                advlock_pq_lockset_start_release(&f->set, &many[i], advlock_pq_now_ms()), 0);
    run(&f->set);
    assert_int_equal(backend_locks(f, NULL), 0);
    free(many);
}

static void test_twenty_thousand_names_stop_at_the_share(void **state)
{
    take_many(*state, ADVLOCK_CAPACITY_SHARE_DEFAULT, MANY);
}

static void test_the_share_is_the_callers(void **state)
{
    fixture *f = *state;
    assert_int_equal(advlock_pq_lockset_set_capacity_share(&f->set, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_lockset_set_capacity_share(&f->set, 101), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_lockset_set_capacity_share(&f->set, 5), 0);
    take_many(f, 5, MANY / 10);
}

/* ---- members of one set exclude each other ---- */

static void test_two_members_on_one_name_exclude_each_other(void **state)
{
    fixture *f = *state;
    advlock_pq_member *a = &f->members[0], *b = &f->members[1];
    start(f, a, f->lock.key, 0, NULL);
    run(&f->set);
    expect(a, ADVLOCK_ACQUIRED);

    /* The server would grant b too (its locks are re-entrant per session):
     * the set answers b "busy" itself, so b times out (b asks by key). */
    assert_int_equal(advlock_pq_lockset_start_acquire_key(&f->set, b, f->lock.derived, 300, NULL,
                                                          advlock_pq_now_ms()),
                     0);
    run(&f->set);
    expect(b, ADVLOCK_TIMED_OUT);
    assert_true(advlock_pq_member_report(b)->lock.attempts >= 2);
    /* Diagnosed, the holder is this process's own backend. */
    advlock_options diagnose;
    advlock_options_init(&diagnose);
    diagnose.diagnose = 1;
    start(f, b, f->lock.key, 0, &diagnose);
    run(&f->set);
    expect(b, ADVLOCK_TIMED_OUT);
    assert_int_equal(advlock_pq_member_report(b)->lock.detail, ADVLOCK_DETAIL_DIAGNOSED);
    assert_int_equal(advlock_pq_member_report(b)->lock.holder_pid, PQbackendPID(f->conn));
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, NULL, 1, f->conn), 1);

    /* b waits; a releases; b's next try finds the name free. */
    start(f, b, f->lock.key, 10000, NULL);
    run_until_sleeping(&f->set, b);
    release(f, a);
    run(&f->set);
    expect(b, ADVLOCK_ACQUIRED);
    release(f, b);
    assert_int_equal(backend_locks(f, NULL), 0);
}

static void test_shared_members_share_and_exclude_exclusive(void **state)
{
    fixture *f = *state;
    advlock_options shared;
    advlock_options_init(&shared);
    shared.mode = ADVLOCK_SHARED;
    advlock_pq_member *s1 = &f->members[0], *s2 = &f->members[1], *x = &f->members[2];

    start(f, s1, f->lock.key, 0, &shared);
    start(f, s2, f->lock.key, 0, &shared);
    run(&f->set);
    expect(s1, ADVLOCK_ACQUIRED);
    expect(s2, ADVLOCK_ACQUIRED);

    start(f, x, f->lock.key, 0, NULL);
    run(&f->set);
    expect(x, ADVLOCK_TIMED_OUT);
    assert_int_equal(backend_locks(f, "ExclusiveLock"), 0);

    /* Each shared member releases its own hold. */
    release(f, s1);
    assert_int_equal(backend_locks(f, "ShareLock"), 1);
    start(f, x, f->lock.key, 0, NULL);
    run(&f->set);
    expect(x, ADVLOCK_TIMED_OUT);
    release(f, s2);
    assert_int_equal(backend_locks(f, NULL), 0);

    /* Exclusive held: a shared member is refused. */
    start(f, x, f->lock.key, 0, NULL);
    run(&f->set);
    expect(x, ADVLOCK_ACQUIRED);
    start(f, s1, f->lock.key, 0, &shared);
    run(&f->set);
    expect(s1, ADVLOCK_TIMED_OUT);
    release(f, x);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* ---- members against another process ---- */

static void test_members_and_another_process_contend_both_ways(void **state)
{
    fixture *f = *state;
    char key[32], buf[8];
    snprintf(key, sizeof key, "%lld", (long long)f->lock.derived);
    advlock_pq_member *m = &f->members[0];

    pgt_exec(f->other, "SELECT 1"); /* connected */
    assert_string_equal(pgt_query(f->other, buf, sizeof buf,
                                  "SELECT pg_try_advisory_lock($1::bigint)", key, (char *)NULL),
                        "t");
    start(f, m, f->lock.key, 300, NULL);
    run(&f->set);
    expect(m, ADVLOCK_TIMED_OUT);

    /* The other process lets go while the member waits: it gets it. */
    start(f, m, f->lock.key, 10000, NULL);
    run_until_sleeping(&f->set, m);
    assert_string_equal(pgt_query(f->other, buf, sizeof buf,
                                  "SELECT pg_advisory_unlock($1::bigint)", key, (char *)NULL),
                        "t");
    run(&f->set);
    expect(m, ADVLOCK_ACQUIRED);

    assert_string_equal(pgt_query(f->other, buf, sizeof buf,
                                  "SELECT pg_try_advisory_lock($1::bigint)", key, (char *)NULL),
                        "f");
    release(f, m);
    assert_string_equal(pgt_query(f->other, buf, sizeof buf,
                                  "SELECT pg_try_advisory_lock($1::bigint)", key, (char *)NULL),
                        "t");
    pgt_exec(f->other, "SELECT pg_advisory_unlock_all()");
}

/* ---- a lost connection ---- */

static void test_terminated_backend_loses_every_held_lock(void **state)
{
    fixture *f = *state;
    enum { HELD = 5 };
    hold_distinct(f, HELD);

    pgt_terminate(f->lock.observer, PQbackendPID(f->conn));
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (!advlock_pq_member_lost(&f->members[HELD - 1])) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
    }
    for (int i = 0; i < HELD; i++) {
        const advlock_pq_member *m = &f->members[i];
        assert_true(advlock_pq_member_lost(m));
        assert_false(advlock_pq_member_held(m));
        const advlock_pq_report *r = advlock_pq_member_report(m);
        assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
        assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_LOST);
        assert_string_equal(r->lock.sqlstate, "57P01");
        assert_non_null(strstr(pgt_describe(r, "x"), "lost"));
    }
    /* A new acquire on the dead connection fails at once. */
    start(f, &f->members[0], "after", 0, NULL);
    run(&f->set);
    expect(&f->members[0], ADVLOCK_FAILED);
    assert_int_equal(advlock_pq_member_report(&f->members[0])->lock.failure, ADVLOCK_ECONNLOST);
}

static void test_reset_connection_loses_every_held_lock(void **state)
{
    fixture *f = *state;
    enum { HELD = 3 };
    hold_distinct(f, HELD);
    /* The last one's release is sent, its answer unread, when the session
     * goes: the lock went with it. */
    assert_int_equal(
        advlock_pq_lockset_start_release(&f->set, &f->members[HELD - 1], advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    int old_pid = PQbackendPID(f->conn);
    PQreset(f->conn);
    assert_int_equal(PQstatus(f->conn), CONNECTION_OK);
    assert_int_not_equal(PQbackendPID(f->conn), old_pid);
    assert_int_equal(advlock_pq_lockset_process(&f->set, 0, advlock_pq_now_ms()), 0);
    for (int i = 0; i < HELD; i++) {
        assert_true(advlock_pq_member_lost(&f->members[i]));
        assert_non_null(
            strstr(advlock_pq_member_report(&f->members[i])->server_message, "was reset"));
    }
    /* The set goes on over the new session: checked, pipelined anew. */
    start(f, &f->members[0], f->lock.key, 0, NULL);
    run(&f->set);
    expect(&f->members[0], ADVLOCK_ACQUIRED);
    assert_int_equal(backend_locks(f, NULL), 1);
    release(f, &f->members[0]);
}

/* Runs sql on the set's connection between its batches, out of pipeline
 * mode, as the caller's own SQL would: once the set says nothing of its
 * own is in flight (its last batch's end may come after the reports). */
static void exec_between_batches(fixture *f, const char *sql)
{
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (!advlock_pq_lockset_quiet(&f->set)) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&f->set, -1, 50);
    }
    assert_int_equal(PQexitPipelineMode(f->conn), 1);
    assert_int_equal(PQsetnonblocking(f->conn, 0), 0);
    pgt_exec(f->conn, sql);
    assert_int_equal(PQsetnonblocking(f->conn, 1), 0);
    assert_int_equal(PQenterPipelineMode(f->conn), 1);
}

/* A release the server refuses leaves the lock in doubt: the member still
 * holds it, its key stays taken in the set (a re-entrant grant to another
 * member would be the session's second hold, which nobody would give
 * back), and the release may be started again. The unlock is made to fail
 * by a statement of the same name that divides by zero. */
static void test_a_failed_release_keeps_the_lock(void **state)
{
    fixture *f = *state;
    advlock_pq_member *a = &f->members[0], *b = &f->members[1];
    start(f, a, "lockset: first", 0, NULL); /* the unlock prepared */
    run(&f->set);
    release(f, a);
    start(f, a, f->lock.key, 0, NULL);
    run(&f->set);
    expect(a, ADVLOCK_ACQUIRED);

    char name[64], sql[256];
    assert_int_equal(PQexitPipelineMode(f->conn), 1);
    PGresult *res = PQexec(f->conn, "SELECT name FROM pg_prepared_statements"
                                    " WHERE statement = 'SELECT pg_advisory_unlock($1)'");
    assert_int_equal(PQntuples(res), 1);
    snprintf(name, sizeof name, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    assert_int_equal(PQenterPipelineMode(f->conn), 1);
    snprintf(sql, sizeof sql,
             "DEALLOCATE %s; PREPARE %s(bigint) AS SELECT pg_advisory_unlock($1 / 0)", name, name);
    exec_between_batches(f, sql);

    assert_int_equal(advlock_pq_lockset_start_release(&f->set, a, advlock_pq_now_ms()), 0);
    run(&f->set);
    expect(a, ADVLOCK_FAILED);
    assert_string_equal(advlock_pq_member_report(a)->lock.sqlstate, "22012");
    assert_true(advlock_pq_member_held(a));
    assert_int_equal(backend_locks(f, NULL), 1);
    start(f, b, f->lock.key, 0, NULL);
    run(&f->set);
    expect(b, ADVLOCK_TIMED_OUT);

    /* The statement gone, the set sends the unlock unnamed: released. */
    snprintf(sql, sizeof sql, "DEALLOCATE %s", name);
    exec_between_batches(f, sql);
    release(f, a);
    assert_false(advlock_pq_member_held(a));
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* ---- the connection's lease ---- */

/* The shortest lease: U = 3 s, D = 2 s, heartbeats every 0.5 s. */
enum { LEASE_MS = 6000, D_MS = 2000 };

static void test_one_lease_for_every_member(void **state)
{
    fixture *f = *state;
    enum { HELD = 3 };
    assert_int_equal(advlock_pq_lockset_set_lease(&f->set, 1000, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_lockset_set_lease(&f->set, LEASE_MS, 0), 0);
    hold_distinct(f, HELD);
    assert_int_equal(advlock_pq_lockset_set_lease(&f->set, 0, 0), ADVLOCK_EMISUSE);
    int64_t at;
    assert_int_equal(advlock_pq_lockset_deadline(&f->set, &at), 1);
    assert_true(at <= advlock_pq_now_ms() + D_MS);

    /* A verify keeps the lock, and the lease, going. */
    assert_int_equal(advlock_pq_lockset_start_verify(&f->set, &f->members[0], advlock_pq_now_ms()),
                     0);
    assert_true(advlock_pq_member_busy(&f->members[0]));
    run(&f->set);
    expect(&f->members[0], ADVLOCK_HELD);
    assert_true(advlock_pq_member_held(&f->members[0]));
    assert_int_equal(advlock_pq_lockset_start_verify(&f->set, &f->members[HELD], 0),
                     ADVLOCK_EMISUSE);

    /* Twice D with the server answering the heartbeats: all held. */
    int64_t until = advlock_pq_now_ms() + 2 * D_MS;
    while (advlock_pq_now_ms() < until) {
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
        for (int i = 0; i < HELD; i++)
            assert_true(advlock_pq_member_held(&f->members[i]));
    }
    char buf[512];
    assert_non_null(
        strstr(pgt_last_statement(f->lock.observer, f->conn, buf, sizeof buf), "tcp_user_timeout"));

    /* The server stops answering: every member LOST by the stop deadline. */
    int pid = PQbackendPID(f->conn);
    int64_t frozen_at = advlock_pq_now_ms();
    pgt_freeze(pid);
    until = frozen_at + D_MS + 2000;
    while (!advlock_pq_member_lost(&f->members[0]) && advlock_pq_now_ms() < until)
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
    assert_true(advlock_pq_now_ms() <= frozen_at + D_MS + 200);
    for (int i = 0; i < HELD; i++) {
        const advlock_pq_report *r = advlock_pq_member_report(&f->members[i]);
        assert_true(advlock_pq_member_lost(&f->members[i]));
        assert_int_equal(r->lease_expiry, ADVLOCK_LEASE_NO_ANSWER);
        assert_non_null(strstr(r->server_message, "no heartbeat answered within 2s (lease 6s)"));
        assert_non_null(
            strstr(pgt_describe(r, "x"), "lost: its lease ran out: no heartbeat answered"));
    }
    /* The connection must go: the set takes no new acquire on it, nor a
     * lease that would let one through. */
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, &f->members[0], "x", 1, 0, NULL,
                                                      advlock_pq_now_ms()),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_lockset_set_lease(&f->set, 0, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, &f->members[0], "x", 1, 0, NULL,
                                                      advlock_pq_now_ms()),
                     ADVLOCK_EMISUSE);
    pgt_terminate_frozen(f->lock.observer, pid);
}

/* ---- cancellations in a pipelined batch ---- */

static void test_cancels_in_a_batch_leave_nothing_behind(void **state)
{
    fixture *f = *state;
    char name[200];
    /* The first member asks the session check for all: cancelled before
     * it goes, another asks instead. */
    start(f, &f->members[0], "lockset: first", 0, NULL);
    start(f, &f->members[1], "lockset: second", 0, NULL);
    assert_int_equal(advlock_pq_lockset_cancel(&f->set, &f->members[0], advlock_pq_now_ms()), 0);
    expect(&f->members[0], ADVLOCK_CANCELLED);
    run(&f->set);
    expect(&f->members[1], ADVLOCK_ACQUIRED);
    release(f, &f->members[1]);

    for (int i = 0; i < BATCH; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 5000, NULL);
    }
    /* Every third is cancelled before its statement goes. */
    for (int i = 0; i < BATCH; i += 3)
        assert_int_equal(advlock_pq_lockset_cancel(&f->set, &f->members[i], advlock_pq_now_ms()),
                         0);
    /* The batch goes; every third of the rest is cancelled in flight. */
    assert_int_equal(advlock_pq_lockset_wants(&f->set), ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE);
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    /* Sent, unanswered: nothing has been read since. */
    assert_int_equal(advlock_pq_lockset_wants(&f->set), ADVLOCK_PQ_READ);
    for (int i = 1; i < BATCH; i += 3) {
        assert_true(advlock_pq_member_busy(&f->members[i]));
        assert_int_equal(advlock_pq_lockset_cancel(&f->set, &f->members[i], advlock_pq_now_ms()),
                         0);
    }
    for (int i = 0; i < BATCH; i++)
        if (i % 3 != 2)
            expect(&f->members[i], ADVLOCK_CANCELLED);
    /* A cancelled member may start again at once, on a name whose grant
     * the set is giving back. */
    start(f, &f->members[1], "lockset: again", 0, NULL);
    run(&f->set);
    expect(&f->members[1], ADVLOCK_ACQUIRED);
    release(f, &f->members[1]);

    int held = 0;
    for (int i = 2; i < BATCH; i += 3) {
        expect(&f->members[i], ADVLOCK_ACQUIRED);
        held++;
    }
    assert_int_equal(backend_locks(f, NULL), held);
    for (int i = 2; i < BATCH; i += 3)
        assert_int_equal(
            advlock_pq_lockset_start_release(&f->set, &f->members[i], advlock_pq_now_ms()), 0);
    run(&f->set);
    assert_int_equal(backend_locks(f, NULL), 0);
    /* Nothing is left in the pipeline either. */
    assert_int_equal(advlock_pq_lockset_wants(&f->set), 0);
}

/* A member cancelled with its try in flight: the server may grant that try
 * to the set's session, so its key stays taken in the set until the try
 * has been answered and the grant given back. A member asking meanwhile
 * is answered busy locally, nothing sent, and the server's holds for the
 * session never outnumber the set's asking and holding peers (read from
 * the set's table, advlock_peers_count()). */
static void test_a_cancelled_try_keeps_its_key_until_answered(void **state)
{
    fixture *f = *state;
    advlock_pq_member *a = &f->members[0], *b = &f->members[1];
    start(f, a, "lockset: first", 0, NULL); /* the session check, out of the way */
    run(&f->set);
    release(f, a);

    start(f, a, f->lock.key, 5000, NULL);
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_lockset_wants(&f->set), ADVLOCK_PQ_READ); /* sent, unanswered */
    assert_int_equal(advlock_pq_lockset_cancel(&f->set, a, advlock_pq_now_ms()), 0);
    expect(a, ADVLOCK_CANCELLED);

    start(f, b, f->lock.key, 0, NULL); /* one try */
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    expect(b, ADVLOCK_TIMED_OUT);
    assert_int_equal(advlock_pq_member_report(b)->lock.attempts, 1);
    assert_int_equal(advlock_peers_count(&f->set.pump_.engine_.peers_), 1);

    /* The server grants a's try to the session: the set accounts for it. */
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (backend_locks(f, NULL) == 0) {
        assert_true(advlock_pq_now_ms() < limit);
        pgt_sleep_ms(5);
    }
    assert_int_equal(advlock_peers_count(&f->set.pump_.engine_.peers_), 1);
    /* Through the grant's answer and the give-back's. */
    while (advlock_pq_lockset_wants(&f->set) != 0) {
        assert_true(advlock_pq_now_ms() < limit);
        long long server = backend_locks(f, NULL);
        assert_true(server <= (long long)advlock_peers_count(&f->set.pump_.engine_.peers_));
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
    }
    assert_int_equal(advlock_peers_count(&f->set.pump_.engine_.peers_), 0);
    assert_int_equal(backend_locks(f, NULL), 0);
    start(f, b, f->lock.key, 0, NULL);
    run(&f->set);
    expect(b, ADVLOCK_ACQUIRED);
    release(f, b);
}

/* Out of memory: the set's init refuses with ADVLOCK_ENOMEM and changes
 * nothing; a cancel, whose key's place is one of the set's slots, needs no
 * memory: the grant is given back all the same. */
static void test_out_of_memory_is_enomem(void **state)
{
    fixture *f = *state;
    advlock_pq_lockset other;
    refuse_allocations = 1;
    assert_int_equal(advlock_pq_lockset_init(&other, f->other), ADVLOCK_ENOMEM);
    refuse_allocations = 0;
    assert_int_equal(advlock_pq_lockset_process(&other, 0, advlock_pq_now_ms()), ADVLOCK_EMISUSE);
    assert_int_equal(PQisnonblocking(f->other), 0); /* the connection as it was */
    advlock_pq_lockset_finish(&other);
    assert_string_equal(advlock_strerror(ADVLOCK_ENOMEM), "out of memory");
    assert_int_equal(advlock_pq_lockset_init(&other, f->other), 0);
    advlock_pq_lockset_finish(&other);

    advlock_pq_member *a = &f->members[0];
    start(f, a, "lockset: first", 0, NULL);
    run(&f->set);
    release(f, a);
    start(f, a, f->lock.key, 5000, NULL);
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    refuse_allocations = 1;
    int rc = advlock_pq_lockset_cancel(&f->set, a, advlock_pq_now_ms());
    refuse_allocations = 0;
    assert_int_equal(rc, 0);
    expect(a, ADVLOCK_CANCELLED);
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (advlock_pq_lockset_wants(&f->set) != 0) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
    }
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* A batch larger than the set's slots, which cannot grow (out of memory):
 * the statements past them wait for the answers that free slots, and no
 * member fails for it. */
static void test_a_batch_past_the_slots_waits(void **state)
{
    fixture *f = *state;
    start(f, &f->members[0], "lockset: first", 0, NULL); /* session checked, try prepared */
    run(&f->set);
    release(f, &f->members[0]);
    size_t n = f->set.pump_.engine_.nslots_ + 8;
    assert_true(n < THOUSAND);
    char name[200];
    for (size_t i = 0; i < n; i++) {
        name_of(name, sizeof name, f, (int)i);
        start(f, &f->members[i], name, 0, NULL);
    }
    refuse_allocations = 1;
    (void)advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms());
    refuse_allocations = 0;
    assert_int_equal(advlock_pq_lockset_busy(&f->set), n);
    assert_true(advlock_pq_member_busy(&f->members[n - 1]));
    run(&f->set);
    for (size_t i = 0; i < n; i++)
        expect(&f->members[i], ADVLOCK_ACQUIRED);
    assert_int_equal(backend_locks(f, NULL), (long long)n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(
            advlock_pq_lockset_start_release(&f->set, &f->members[i], advlock_pq_now_ms()), 0);
    run(&f->set);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* A cancelled member's grant in a batch that fills every slot (which
 * cannot grow: out of memory) keeps its key taken and is given back once
 * the answers come: the session never keeps a lock nobody holds. */
static void test_a_give_back_in_a_full_batch(void **state)
{
    fixture *f = *state;
    advlock_pq_member *a = &f->members[0];
    start(f, a, "lockset: first", 0, NULL); /* session checked, try prepared */
    run(&f->set);
    release(f, a);
    /* One batch fills the slots: n statements (one slot stays free for a
     * prepare's pair) and the sync. */
    size_t n = f->set.pump_.engine_.nslots_ - 1;
    start(f, a, f->lock.key, 5000, NULL);
    char name[200];
    for (size_t i = 1; i < n; i++) {
        name_of(name, sizeof name, f, (int)i);
        start(f, &f->members[i], name, 0, NULL);
    }
    refuse_allocations = 1;
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    refuse_allocations = 0;
    assert_int_equal(advlock_conn_outstanding(&f->set.pump_.engine_), n);
    assert_int_equal(advlock_pq_lockset_cancel(&f->set, a, advlock_pq_now_ms()), 0);
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (backend_locks(f, NULL) < (long long)n) {
        assert_true(advlock_pq_now_ms() < limit);
        pgt_sleep_ms(5);
    }
    assert_int_equal(advlock_peers_count(&f->set.pump_.engine_.peers_),
                     n); /* a's key still taken */
    while (advlock_conn_outstanding(&f->set.pump_.engine_) > 0) {
        assert_true(advlock_pq_now_ms() < limit);
        (void)advlock_pq_lockset_wait(&f->set, -1, 100);
    }
    assert_int_equal(backend_locks(f, NULL), (long long)n - 1);
    assert_int_equal(advlock_peers_count(&f->set.pump_.engine_.peers_), n - 1);
    for (size_t i = 1; i < n; i++) {
        expect(&f->members[i], ADVLOCK_ACQUIRED);
        assert_int_equal(
            advlock_pq_lockset_start_release(&f->set, &f->members[i], advlock_pq_now_ms()), 0);
    }
    run(&f->set);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* Fenced members: each grant issues its key's next token; a fenced try
 * goes in a batch of its own, so no other statement's failure can roll its
 * token back. */
static void test_fenced_members_get_increasing_tokens(void **state)
{
    fixture *f = *state;
    enum { FENCED = 4 };
    pgt_exec(f->lock.observer, advlock_fence_setup_sql());
    advlock_options o;
    advlock_options_init(&o);
    o.fence = 1;
    char name[200];
    for (int i = 0; i < FENCED; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 0, &o);
    }
    start(f, &f->members[FENCED], f->lock.key, 0, NULL); /* a plain one among them */
    run(&f->set);
    for (int i = 0; i <= FENCED; i++)
        expect(&f->members[i], ADVLOCK_ACQUIRED);
    for (int i = 0; i < FENCED; i++)
        assert_true(advlock_pq_member_report(&f->members[i])->lock.fence >= 1);
    int64_t first = advlock_pq_member_report(&f->members[0])->lock.fence;
    release(f, &f->members[0]);
    name_of(name, sizeof name, f, 0);
    start(f, &f->members[0], name, 0, &o);
    run(&f->set);
    expect(&f->members[0], ADVLOCK_ACQUIRED);
    assert_true(advlock_pq_member_report(&f->members[0])->lock.fence > first);
    for (int i = 0; i <= FENCED; i++)
        release(f, &f->members[i]);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* ---- the blocking forms ---- */

static void test_blocking_acquire_drives_the_whole_set(void **state)
{
    fixture *f = *state;
    char name[200];
    enum { OTHERS = 10 };
    for (int i = 1; i <= OTHERS; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 0, NULL);
    }
    advlock_pq_report r;
    assert_int_equal(
        advlock_pq_lockset_acquire(&f->set, &f->members[0], f->lock.key, f->lock.len, 0, NULL, &r),
        0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    run(&f->set);
    for (int i = 1; i <= OTHERS; i++)
        expect(&f->members[i], ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_lockset_release(&f->set, &f->members[0], &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    for (int i = 1; i <= OTHERS; i++)
        release(f, &f->members[i]);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* A blocking acquire whose statement the server never answers gives the
 * whole connection up (every member's statements wait behind it): FAILED
 * ENOANSWER within its bound, the held members LOST, the set unbound. */
static void test_a_server_that_does_not_answer_gives_the_connection_up(void **state)
{
    fixture *f = *state;
    hold_distinct(f, 2);
    int pid = PQbackendPID(f->conn);
    pgt_freeze(pid);
    advlock_pq_report r;
    int64_t started = advlock_pq_now_ms();
    assert_int_equal(
        advlock_pq_lockset_acquire(&f->set, &f->members[2], "unanswered", 10, 0, NULL, &r), 0);
    int64_t took = advlock_pq_now_ms() - started;
    assert_true(took >= ADVLOCK_PQ_GRACE_MS && took < ADVLOCK_PQ_GRACE_MS + 1000);
    pgt_expect_outcome(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ENOANSWER);
    for (int i = 0; i < 2; i++)
        assert_true(advlock_pq_member_lost(&f->members[i]));
    assert_int_equal(advlock_pq_lockset_process(&f->set, 0, advlock_pq_now_ms()), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_lockset_wants(&f->set), 0);
    pgt_terminate_frozen(f->lock.observer, pid);
}

/* ---- transaction scope ---- */

/* Members of transaction scope take their locks in the caller's block, one
 * batch for all, and hold them until the block ends; outside a block such
 * an acquire is refused. */
static void test_transaction_members_hold_until_the_block_ends(void **state)
{
    fixture *f = *state;
    advlock_options o;
    advlock_options_init(&o);
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, &f->members[0], "x", 1, 0, &o,
                                                      advlock_pq_now_ms()),
                     ADVLOCK_EMISUSE);

    exec_between_batches(f, "BEGIN");
    char name[200];
    for (int i = 0; i < 2; i++) {
        name_of(name, sizeof name, f, i);
        start(f, &f->members[i], name, 0, &o);
    }
    run(&f->set);
    for (int i = 0; i < 2; i++) {
        expect(&f->members[i], ADVLOCK_ACQUIRED);
        assert_true(advlock_pq_member_held(&f->members[i]));
    }
    assert_int_equal(backend_locks(f, "ExclusiveLock"), 2);

    exec_between_batches(f, "COMMIT");
    assert_int_equal(advlock_pq_lockset_process(&f->set, 0, advlock_pq_now_ms()), 0);
    for (int i = 0; i < 2; i++)
        assert_false(advlock_pq_member_held(&f->members[i]));
    assert_int_equal(backend_locks(f, NULL), 0);
    /* The names are free again, for the set's members too. */
    name_of(name, sizeof name, f, 0);
    start(f, &f->members[2], name, 0, NULL);
    run(&f->set);
    expect(&f->members[2], ADVLOCK_ACQUIRED);
    release(f, &f->members[2]);
}

/* ---- waiting on the server ---- */

/* Names taken one after another: a member waits in the server's queue for
 * a name another process holds while a member holds another name, and gets
 * it once that process lets go; meanwhile no other member may start. A wait
 * past its timeout is cancelled (the set's cancel request) and ends
 * TIMED_OUT, the first name still held. */
static void test_a_server_wait_while_another_member_holds(void **state)
{
    fixture *f = *state;
    hold_distinct(f, 1);
    advlock_options o;
    advlock_options_init(&o);
    o.wait = ADVLOCK_WAIT_SERVER;
    char name[200];
    name_of(name, sizeof name, f, 1);
    int64_t key;
    assert_int_equal(advlock_derive_key(name, strlen(name), &key), 0);
    char k[24];
    snprintf(k, sizeof k, "%lld", (long long)key);
    assert_int_equal(pgt_query_int(f->other,
                                   "SELECT count(*) FROM (SELECT pg_advisory_lock($1::int8)) l", k,
                                   (char *)NULL),
                     1);

    start(f, &f->members[1], name, 500, &o);
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, &f->members[2], "y", 1, 0, NULL,
                                                      advlock_pq_now_ms()),
                     ADVLOCK_EMISUSE);
    run(&f->set);
    expect(&f->members[1], ADVLOCK_TIMED_OUT);
    assert_true(advlock_pq_member_held(&f->members[0]));

    /* A cancel ends the wait with its answer (the cancel request's). */
    start(f, &f->members[1], name, LIMIT_MS / 2, &o);
    run_for(&f->set, 300);
    assert_int_equal(advlock_pq_lockset_cancel(&f->set, &f->members[1], advlock_pq_now_ms()), 0);
    run(&f->set);
    expect(&f->members[1], ADVLOCK_CANCELLED);

    start(f, &f->members[1], name, LIMIT_MS / 2, &o);
    run_for(&f->set, 300);
    assert_true(advlock_pq_member_busy(&f->members[1]));
    pgt_exec(f->other, "SELECT pg_advisory_unlock_all()");
    run(&f->set);
    expect(&f->members[1], ADVLOCK_ACQUIRED);
    assert_int_equal(backend_locks(f, "ExclusiveLock"), 2);
    release(f, &f->members[1]);
    release(f, &f->members[0]);
}

/* A release by key: of the member's own hold, as a release; of a key the
 * session does not hold, NOT_HELD; of a key another member holds, refused. */
static void test_a_release_by_key(void **state)
{
    fixture *f = *state;
    hold_distinct(f, 1);
    char name[200];
    name_of(name, sizeof name, f, 0);
    int64_t key, other;
    assert_int_equal(advlock_derive_key(name, strlen(name), &key), 0);
    assert_int_equal(advlock_derive_key("nobody's", 8, &other), 0);
    int64_t now = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_lockset_start_release_key(&f->set, &f->members[1], key, NULL, now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(
        advlock_pq_lockset_start_release_key(&f->set, &f->members[1], other, NULL, now), 0);
    run(&f->set);
    expect(&f->members[1], ADVLOCK_NOT_HELD);
    assert_int_equal(advlock_pq_lockset_start_release_key(&f->set, &f->members[0], key, NULL, now),
                     0);
    run(&f->set);
    expect(&f->members[0], ADVLOCK_RELEASED);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* ---- what a set refuses ---- */

static void test_refused_options_and_misuse(void **state)
{
    fixture *f = *state;
    advlock_pq_member *m = &f->members[0];
    advlock_options o;
    int64_t now = advlock_pq_now_ms();

    assert_false(advlock_pq_lockset_quiet(NULL));
    assert_null(advlock_pq_lockset_engine(NULL));
    assert_false(advlock_conn_must_close(advlock_pq_lockset_engine(&f->set)));
    advlock_options_init(&o);
    o.lease_ms = 30000; /* the lease is the set's: advlock_pq_lockset_set_lease() */
    o.lease_stop_ms = 5000;
    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, m, "x", 1, 0, &o, now),
                     ADVLOCK_EINVAL);
    assert_false(advlock_pq_member_busy(m));

    assert_int_equal(advlock_pq_lockset_start_acquire(&f->set, m, "x", 1, -1, NULL, now),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_lockset_start_acquire(NULL, m, "x", 1, 0, NULL, now),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_lockset_start_release(&f->set, m, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_lockset_cancel(&f->set, m, now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_lockset_process(&f->set, 4, now), ADVLOCK_EINVAL);
    assert_null(advlock_pq_member_report(m));

    /* A connection already in use by the caller's query is refused. */
    advlock_pq_lockset other;
    assert_int_equal(PQsendQuery(f->other, "SELECT pg_sleep(0.1)"), 1);
    assert_int_equal(advlock_pq_lockset_init(&other, f->other), ADVLOCK_EMISUSE);
    PGresult *res;
    while ((res = PQgetResult(f->other)) != NULL)
        PQclear(res);
    assert_int_equal(advlock_pq_lockset_init(NULL, f->other), ADVLOCK_EINVAL);
    /* So is one in a transaction block: every member's statements would
     * run in the caller's transaction. */
    pgt_exec(f->other, "BEGIN");
    assert_int_equal(advlock_pq_lockset_init(&other, f->other), ADVLOCK_EMISUSE);
    pgt_exec(f->other, "ROLLBACK");
}

/* A connection whose set finished serves a single adapter: pipeline mode
 * is left, and the statements the set prepared, under the names the
 * adapter uses too, are the adapter's (its PREPARE finds them there). */
static void test_a_finished_sets_connection_serves_an_adapter(void **state)
{
    fixture *f = *state;
    hold_distinct(f, 1);
    release(f, &f->members[0]);
    advlock_pq_lockset_finish(&f->set);
    assert_int_equal(PQpipelineStatus(f->conn), PQ_PIPELINE_OFF);
    advlock_pq a;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&a, f->conn), 0);
    assert_int_equal(advlock_pq_acquire(&a, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.sql, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(backend_locks(f, NULL), 1);
    assert_int_equal(advlock_pq_release(&a, f->lock.key, f->lock.len, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(backend_locks(f, NULL), 0);
}

/* Finishing a set ends its members: those under way CANCELLED (queued or
 * in flight), those holding forgotten; each may start in another set,
 * where the exclusion table knows it afresh. */
static void test_finish_leaves_members_free_for_another_set(void **state)
{
    fixture *f = *state;
    advlock_pq_member *m = f->members;
    hold_distinct(f, 1);
    start(f, &m[1], "lockset: in flight", 5000, NULL);
    assert_int_equal(advlock_pq_lockset_process(&f->set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_lockset_wants(&f->set), ADVLOCK_PQ_READ); /* sent, unanswered */
    start(f, &m[2], "lockset: queued", 5000, NULL);
    advlock_pq_lockset_finish(&f->set);
    assert_false(advlock_pq_member_held(&m[0]));
    expect(&m[1], ADVLOCK_CANCELLED);
    expect(&m[2], ADVLOCK_CANCELLED);

    advlock_pq_lockset next;
    assert_int_equal(advlock_pq_lockset_init(&next, f->other), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(advlock_pq_lockset_start_acquire(&next, &m[i], f->lock.key, f->lock.len, 0,
                                                          NULL, advlock_pq_now_ms()),
                         0);
    run(&next);
    expect(&m[0], ADVLOCK_ACQUIRED);
    expect(&m[1], ADVLOCK_TIMED_OUT);
    expect(&m[2], ADVLOCK_TIMED_OUT);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 1);
    assert_int_equal(advlock_pq_lockset_start_release(&next, &m[0], advlock_pq_now_ms()), 0);
    run(&next);
    expect(&m[0], ADVLOCK_RELEASED);
    advlock_pq_lockset_finish(&next);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_thousand_members_hold_a_thousand_names, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_twenty_thousand_names_stop_at_the_share, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_share_is_the_callers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_members_on_one_name_exclude_each_other, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shared_members_share_and_exclude_exclusive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_members_and_another_process_contend_both_ways, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_terminated_backend_loses_every_held_lock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reset_connection_loses_every_held_lock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_failed_release_keeps_the_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_lease_for_every_member, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancels_in_a_batch_leave_nothing_behind, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_cancelled_try_keeps_its_key_until_answered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_out_of_memory_is_enomem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_past_the_slots_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_give_back_in_a_full_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fenced_members_get_increasing_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocking_acquire_drives_the_whole_set, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_server_that_does_not_answer_gives_the_connection_up,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_transaction_members_hold_until_the_block_ends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_server_wait_while_another_member_holds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_release_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_options_and_misuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finish_leaves_members_free_for_another_set, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_finished_sets_connection_serves_an_adapter, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("libpq lock sets", tests, NULL, NULL);
}
