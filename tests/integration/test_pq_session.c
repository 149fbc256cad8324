/*
 * The server session check on a direct connection, against a real
 * PostgreSQL: the adapters tell the machine their connection, so
 * the first operation on it runs one session row, which claims the server
 * session; a direct connection then runs the plain statements, prepared as
 * before, and never the session row again until the backend changes (a
 * reset). A direct connection needs no claim: a session another token
 * claimed still locks. The row also turns the server's timeouts off, or
 * fails naming the one it cannot. (Through a proxy: test_proxy.c.)
 */
#include "pg_test.h"

/* The answer reader, for results no server can be made to send on cue. */
#include "../../src/adapters/libpq/pq.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *conn;
    advlock_pq a;
    pgt_events seen;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.conn = pgt_connect();
    assert_int_equal(advlock_pq_init(&f.a, f.conn), 0);
    advlock_options o;
    advlock_options_init(&o);
    pgt_record_events(&o, &f.seen);
    assert_int_equal(advlock_pq_set_options(&f.a, &o), 0);
    pgt_lock_begin(&f.lock, "session", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->conn);
    pgt_lock_end(&f->lock);
    return 0;
}

/* Acquires and releases on the fixture's adapter; every try the machine
 * made was the plain try-lock (no guard on a direct connection). */
static void acquire_and_release(fixture *f)
{
    advlock_pq_report r;
    memset(&f->seen, 0, sizeof f->seen);
    assert_int_equal(advlock_pq_acquire(&f->a, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.sql, ADVLOCK_SQL_TRY_LOCK);
    int attempts = 0;
    for (int i = pgt_find_event(&f->seen, ADVLOCK_EVENT_ATTEMPT, 0); i >= 0;
         i = pgt_find_event(&f->seen, ADVLOCK_EVENT_ATTEMPT, i + 1), attempts++)
        assert_int_equal(f->seen.reports[i].sql, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(attempts, 1);
    pgt_expect_lock_row(f->lock.observer, pgt_key_of(f->lock.key), f->conn);
    assert_int_equal(advlock_pq_release(&f->a, f->lock.key, f->lock.len, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(r.lock.sql, ADVLOCK_SQL_UNLOCK);
    assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(f->lock.key)), 0);
}

/* Whether the statement sql is prepared on conn's session. */
static long long prepared(PGconn *conn, advlock_sql sql)
{
    return pgt_query_int(conn, "SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
                         advlock_pq_statement_name(sql), (char *)NULL);
}

static void test_one_session_row_per_connection(void **state)
{
    fixture *f = *state;
    char claim[64];
    assert_string_equal(pgt_session_claim(f->conn, claim, sizeof claim), "");
    acquire_and_release(f);
    /* The session row ran (its claim is there), unnamed; the lock
     * statements were prepared as on any direct connection. */
    assert_string_not_equal(pgt_session_claim(f->conn, claim, sizeof claim), "");
    assert_int_equal(prepared(f->conn, ADVLOCK_SQL_SESSION), 0);
    assert_int_equal(prepared(f->conn, ADVLOCK_SQL_TRY_LOCK), 1);
    assert_int_equal(prepared(f->conn, ADVLOCK_SQL_TRY_LOCK_GUARDED), 0);

    /* Wipe the claim: a second session row would write it again. */
    pgt_exec(f->conn, "SELECT pg_catalog.set_config('advlock.session', '', false)");
    acquire_and_release(f);
    acquire_and_release(f);
    assert_string_equal(pgt_session_claim(f->conn, claim, sizeof claim), "");
}

static void test_reset_checks_the_new_session(void **state)
{
    fixture *f = *state;
    char claim[64];
    acquire_and_release(f);
    int before = PQbackendPID(f->conn);
    PQreset(f->conn);
    assert_int_equal(PQstatus(f->conn), CONNECTION_OK);
    assert_int_not_equal(PQbackendPID(f->conn), before);
    assert_string_equal(pgt_session_claim(f->conn, claim, sizeof claim), "");
    /* The new backend is checked (and claimed), and the statements are
     * prepared on it anew. */
    acquire_and_release(f);
    assert_string_not_equal(pgt_session_claim(f->conn, claim, sizeof claim), "");
    assert_int_equal(prepared(f->conn, ADVLOCK_SQL_TRY_LOCK), 1);
}

/* Runs before on the connection, then an operation: the session row finds
 * the session unclaimable (ours false), but its pid is the connection's, so
 * no proxy is in between and the claim does not matter: plain statements
 * lock. The setting is then claim. */
static void expect_locks_unclaimed(fixture *f, const char *before, const char *claim)
{
    char seen[64];
    pgt_exec(f->conn, before);
    acquire_and_release(f);
    assert_string_equal(pgt_session_claim(f->conn, seen, sizeof seen), claim);
}

static void test_direct_session_claimed_by_another_token(void **state)
{
    expect_locks_unclaimed(
        *state, "SELECT pg_catalog.set_config('advlock.session', '12345', false)", "12345");
}

/* A session that already holds an advisory lock is never claimed. */
static void test_direct_session_holding_a_lock_of_its_own(void **state)
{
    fixture *f = *state;
    expect_locks_unclaimed(f, "SELECT pg_advisory_lock(42)", "");
    pgt_exec(f->conn, "SELECT pg_advisory_unlock(42)");
}

static void test_nonblocking_adapter_checks_too(void **state)
{
    fixture *f = *state;
    char claim[64];
    PGconn *conn = pgt_connect();
    advlock_pq a;
    assert_int_equal(advlock_pq_async_init(&a, conn), 0);
    assert_int_equal(
        advlock_pq_async_start_acquire(&a, f->lock.key, f->lock.len, 0, advlock_pq_now_ms()), 0);
    advlock_pq *const one[1] = {&a};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    pgt_expect_outcome(advlock_pq_async_report(&a), ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_report(&a)->lock.sql, ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(
        advlock_pq_async_start_release(&a, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    pgt_expect_outcome(advlock_pq_async_report(&a), ADVLOCK_RELEASED);
    /* The connection is nonblocking now; pgt_query waits all the same. */
    assert_string_not_equal(pgt_session_claim(conn, claim, sizeof claim), "");
    PQfinish(conn);
}

static void test_cancel_during_the_session_row(void **state)
{
    fixture *f = *state;
    PGconn *conn = pgt_connect();
    advlock_pq a;
    assert_int_equal(advlock_pq_async_init(&a, conn), 0);
    assert_int_equal(
        advlock_pq_async_start_acquire(&a, f->lock.key, f->lock.len, 10000, advlock_pq_now_ms()),
        0);
    assert_int_equal(advlock_pq_async_cancel(&a, advlock_pq_now_ms()), 0);
    advlock_pq *const one[1] = {&a};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
    /* The session row was answered; no lock statement followed it. */
    pgt_expect_outcome(advlock_pq_async_report(&a), ADVLOCK_CANCELLED);
    assert_int_equal(advlock_pq_async_report(&a)->lock.sql, ADVLOCK_SQL_SESSION);
    assert_int_equal(advlock_pq_async_report(&a)->lock.attempts, 0);
    assert_int_equal(pgt_lock_count(f->lock.observer, pgt_key_of(f->lock.key)), 0);
    /* As long as pg_stat_activity keeps (track_activity_query_size, 1 kB). */
    char last[1024];
    assert_int_equal(strlen(advlock_sql_text(ADVLOCK_SQL_SESSION)) < sizeof last, 1);
    assert_string_equal(pgt_last_statement(f->lock.observer, conn, last, sizeof last),
                        advlock_sql_text(ADVLOCK_SQL_SESSION));
    PQfinish(conn);
}

/* A result libpq might deliver, built by hand: one row of binary columns
 * of these types, with these values (NULL: SQL NULL). */
static PGresult *row(PGconn *conn, int n, const Oid *types, const char *const *values,
                     const int *lengths)
{
    PGresult *res = PQmakeEmptyPGresult(conn, PGRES_TUPLES_OK);
    PGresAttDesc columns[3];
    assert_true(n <= 3);
    for (int i = 0; i < n; i++)
        columns[i] = (PGresAttDesc){
            .name = (char *)"c", .format = 1, .typid = types[i], .typlen = -1, .atttypmod = -1};
    assert_int_equal(PQsetResultAttrs(res, n, columns), 1);
    for (int i = 0; i < n; i++)
        assert_int_equal(PQsetvalue(res, 0, i, (char *)values[i], values[i] ? lengths[i] : -1), 1);
    return res;
}

/* What the adapter reads from one result of statement sql. */
static int read_answer(PGconn *conn, advlock_sql sql, PGresult *res)
{
    advlock_pq_query_ q;
    memset(&q, 0, sizeof q);
    advlock_pq_answer_clear(&q);
    q.sql_ = (uint8_t)sql;
    advlock_pq_answer_read(&q, conn, res);
    int result = q.result_;
    advlock_pq_answer_clear(&q); /* frees res */
    return result;
}

static void test_answers_of_guarded_and_session_rows(void **state)
{
    fixture *f = *state;
    static const Oid void_type[1] = {2278}, session_types[3] = {23, 16, 16};
    static const int lengths[3] = {4, 1, 1};
    const char *const null_void[1] = {NULL}, *const a_void[1] = {""};
    /* A guarded wait that found another server session answers NULL, a
     * wait that ran answers its void: NULL and TRUE to the machine. */
    assert_int_equal(read_answer(f->conn, ADVLOCK_SQL_LOCK_GUARDED,
                                 row(f->conn, 1, void_type, null_void, lengths)),
                     ADVLOCK_RESULT_NULL);
    int zero = 0;
    assert_int_equal(
        read_answer(f->conn, ADVLOCK_SQL_LOCK_GUARDED, row(f->conn, 1, void_type, a_void, &zero)),
        ADVLOCK_RESULT_TRUE);
    /* The session row: a pid and two booleans; anything else (a NULL, a
     * boolean that is neither) is an unexpected result, never a guess. */
    const char *const good[3] = {"\0\0\x30\x39", "\0", "\1"};
    assert_int_equal(
        read_answer(f->conn, ADVLOCK_SQL_SESSION, row(f->conn, 3, session_types, good, lengths)),
        ADVLOCK_RESULT_TRUE);
    const char *const null_ours[3] = {"\0\0\x30\x39", "\0", NULL};
    assert_int_equal(read_answer(f->conn, ADVLOCK_SQL_SESSION,
                                 row(f->conn, 3, session_types, null_ours, lengths)),
                     ADVLOCK_RESULT_SERVER_ERROR);
    const char *const two[3] = {"\0\0\x30\x39", "\2", "\1"};
    assert_int_equal(
        read_answer(f->conn, ADVLOCK_SQL_SESSION, row(f->conn, 3, session_types, two, lengths)),
        ADVLOCK_RESULT_SERVER_ERROR);
    const char *const null_pid[3] = {NULL, "\0", "\1"};
    assert_int_equal(read_answer(f->conn, ADVLOCK_SQL_SESSION,
                                 row(f->conn, 3, session_types, null_pid, lengths)),
                     ADVLOCK_RESULT_SERVER_ERROR);
    /* Two columns where three belong. */
    assert_int_equal(
        read_answer(f->conn, ADVLOCK_SQL_SESSION, row(f->conn, 2, session_types, good, lengths)),
        ADVLOCK_RESULT_SERVER_ERROR);
}

/* The session row as text, with its "= '0'" read-backs replaced by
 * "= 'zz'": what it does on a server that keeps a setting on. */
static const char *refusing_session_sql(char *buf, size_t size)
{
    const char *sql = advlock_sql_text(ADVLOCK_SQL_SESSION);
    const char *at = strstr(sql, "= '0' THEN");
    assert_non_null(at);
    assert_null(strstr(at + 1, "= '0' THEN")); /* one read-back serves all */
    int n = snprintf(buf, size, "%.*s= 'zz'%s", (int)(at - sql), sql, at + 5);
    assert_true(n > 0 && (size_t)n < size);
    return buf;
}

/* Runs the session row (or sql, its text) on conn with $1 token, $2 pid;
 * returns the result for the caller to judge and clear. */
static PGresult *session_row(PGconn *conn, const char *sql, const char *token, const char *pid)
{
    const char *const values[2] = {token, pid};
    return PQexecParams(conn, sql != NULL ? sql : advlock_sql_text(ADVLOCK_SQL_SESSION), 2, NULL,
                        values, NULL, NULL, 0);
}

static void expect_timeouts(PGconn *conn, const char *idle, const char *in_transaction)
{
    char buf[32];
    assert_string_equal(pgt_query(conn, buf, sizeof buf, "SHOW idle_session_timeout", (char *)NULL),
                        idle);
    assert_string_equal(
        pgt_query(conn, buf, sizeof buf, "SHOW idle_in_transaction_session_timeout", (char *)NULL),
        in_transaction);
}

/* The session row turns the server's timeouts off: for the session where
 * the session is the connection's ($2 its own pid: direct; or claimed),
 * for the transaction alone on an unclaimed session behind a proxy ($2
 * another pid, $1 0); and fails, naming the setting, where one does not
 * read back. */
static void test_session_row_turns_the_timeouts_off(void **state)
{
    fixture *f = *state;
    PGconn *conn = pgt_connect();
    char own[16], sql[2048];
    snprintf(own, sizeof own, "%d", PQbackendPID(conn));
    pgt_exec(conn, "SET idle_session_timeout = '1h'");
    pgt_exec(conn, "SET idle_in_transaction_session_timeout = '1h'");

    /* Behind a proxy, transaction scope: for the transaction alone. */
    pgt_exec(conn, "BEGIN");
    PGresult *res = session_row(conn, NULL, "0", "1");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    PQclear(res);
    expect_timeouts(conn, "0", "0");
    pgt_exec(conn, "COMMIT");
    expect_timeouts(conn, "1h", "1h");

    /* Refused: an error naming the setting and its value; nothing set. */
    res = session_row(conn, refusing_session_sql(sql, sizeof sql), "0", own);
    assert_int_equal(PQresultStatus(res), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(res, PG_DIAG_SQLSTATE), "22P02");
    assert_non_null(strstr(PQresultErrorMessage(res),
                           "advlock cannot turn off idle_session_timeout: it reads "));
    PQclear(res);
    expect_timeouts(conn, "1h", "1h");

    /* Direct: for the session. */
    res = session_row(conn, NULL, "0", own);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    PQclear(res);
    expect_timeouts(conn, "0", "0");
    PQfinish(conn);
    (void)f;
}

int main(void)
{
    alarm(60); /* a hang fails the program instead of the whole run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_one_session_row_per_connection),
        T(test_reset_checks_the_new_session),
        T(test_direct_session_claimed_by_another_token),
        T(test_direct_session_holding_a_lock_of_its_own),
        T(test_nonblocking_adapter_checks_too),
        T(test_cancel_during_the_session_row),
        T(test_answers_of_guarded_and_session_rows),
        T(test_session_row_turns_the_timeouts_off),
    };
    return cmocka_run_group_tests_name("libpq adapters: the server session check, direct", tests,
                                       NULL, NULL);
}
