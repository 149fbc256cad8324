/*
 * The advlock command's own rows of the core's table, against a real
 * PostgreSQL: advlock_pq_send_row() sends each as the table says and the
 * server answers in the shape its answer kind names; and a connection given
 * up with advlock_pq_abandon() in the middle of a statement ends its server
 * session, and the lock it held, without waiting for the statement.
 */
#include "pg_test.h"

#include <stdio.h>
#include <string.h>

enum { LIMIT_MS = 10000 };

/* Sends row sql on conn and returns its last result (PQclear it). */
static PGresult *run_row(PGconn *conn, advlock_sql sql, const int64_t *params)
{
    assert_int_equal(advlock_pq_send_row(conn, sql, params), 1);
    PGresult *last = NULL, *res;
    while ((res = PQgetResult(conn)) != NULL) {
        PQclear(last);
        last = res;
    }
    assert_non_null(last);
    return last;
}

/* One row of columns columns, or no rows for ADVLOCK_ANSWER_COMMAND. */
static void expect_shape(PGconn *conn, advlock_sql sql, const int64_t *params, int columns)
{
    PGresult *res = run_row(conn, sql, params);
    if (advlock_sql_answer(sql) == ADVLOCK_ANSWER_COMMAND) {
        assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    } else {
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        assert_int_equal(PQntuples(res), 1);
        assert_int_equal(PQnfields(res), columns);
    }
    PQclear(res);
}

static void command_rows_answer_as_their_kind_says(void **state)
{
    (void)state;
    PGconn *conn = pgt_connect();
    const int64_t token = 42;
    expect_shape(conn, ADVLOCK_SQL_FENCE_INSTALLED, NULL, 3);
    expect_shape(conn, ADVLOCK_SQL_FENCE_GRANTS, NULL, 1);
    expect_shape(conn, ADVLOCK_SQL_OCCUPY, &token, 1);
    expect_shape(conn, ADVLOCK_SQL_BEGIN, NULL, 0);
    assert_int_equal(PQtransactionStatus(conn), PQTRANS_INTRANS);
    expect_shape(conn, ADVLOCK_SQL_CLOSE_ALL, NULL, 0);
    expect_shape(conn, ADVLOCK_SQL_ROLLBACK, NULL, 0);
    expect_shape(conn, ADVLOCK_SQL_BEGIN, NULL, 0);
    expect_shape(conn, ADVLOCK_SQL_COMMIT, NULL, 0);
    assert_int_equal(PQtransactionStatus(conn), PQTRANS_IDLE);
    /* The holders row takes its key as a binary int8, and answers text. */
    const int64_t key = pgt_key_of("test_pq_rows");
    PGresult *res = run_row(conn, ADVLOCK_SQL_HOLDERS, &key);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQnfields(res), ADVLOCK_HOLDERS_COLUMNS);
    assert_int_equal(PQfformat(res, ADVLOCK_HOLDERS_PID), 0);
    PQclear(res);
    /* The listing: the check of advlock's tables picks the form that names
     * only those this role may read (with or without the schema another
     * test installed), and that form answers at least this session's own
     * row (no lock: key NULL). */
    res = run_row(conn, ADVLOCK_SQL_LOCKS_TABLES, NULL);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQnfields(res), 2);
    int form =
        (strcmp(PQgetvalue(res, 0, 0), "t") == 0) + 2 * (strcmp(PQgetvalue(res, 0, 1), "t") == 0);
    PQclear(res);
    res = run_row(conn, (advlock_sql)(ADVLOCK_SQL_LOCKS + form), NULL);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQnfields(res), ADVLOCK_LOCKS_COLUMNS);
    assert_true(PQntuples(res) >= 1);
    assert_true(PQgetisnull(res, 0, ADVLOCK_LOCKS_KEY));
    PQclear(res);
    /* Refused, nothing sent: the connection is still idle and usable. */
    assert_int_equal(advlock_pq_send_row(conn, ADVLOCK_SQL_COUNT, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_send_row(conn, ADVLOCK_SQL_OCCUPY, NULL), ADVLOCK_EINVAL);
    assert_null(PQgetResult(conn));
    expect_shape(conn, ADVLOCK_SQL_FENCE_GRANTS, NULL, 1);
    PQfinish(conn);
}

/* A holder whose statement runs on (a long pg_sleep) is given up: the
 * cancel ends the statement and the shut socket the session, so the lock
 * is gone well before the statement would have ended. */
static void an_abandoned_connection_leaves_no_lock(void **state)
{
    (void)state;
    pgt_lock l;
    pgt_lock_begin(&l, "rows", NULL);
    PGconn *holder = pgt_connect();
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_lock(%lld)", (long long)l.derived);
    pgt_exec(holder, sql);
    assert_int_equal(pgt_lock_count(l.observer, l.derived), 1);
    assert_int_equal(PQsendQuery(holder, "SELECT pg_sleep(60)"), 1);
    pgt_sleep_ms(100);
    int64_t started = advlock_pq_now_ms();
    advlock_pq_abandon(holder);
    while (pgt_lock_count(l.observer, l.derived) != 0 && advlock_pq_now_ms() - started < LIMIT_MS)
        pgt_sleep_ms(20);
    assert_int_equal(pgt_lock_count(l.observer, l.derived), 0);
    PQfinish(holder);
    advlock_pq_abandon(NULL); /* nothing to give up: nothing done */
    pgt_lock_end(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(command_rows_answer_as_their_kind_says),
        cmocka_unit_test(an_abandoned_connection_leaves_no_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
