/*
 * What a statement's results mean for the lock machine: one boolean row
 * becomes TRUE, FALSE or NULL; a server error becomes SERVER_ERROR with its
 * SQLSTATE and primary message; a broken connection, or no result at all,
 * becomes CONNECTION_LOST. Written once, for both adapters. Results are read
 * in binary format only, so no locale or text format is involved.
 */
#include "pq.h"

#include <stdio.h>
#include <string.h>

enum { BOOL_OID = 16, BINARY = 1 };

void advlock_pq_answer_clear(advlock_pq_query_ *q)
{
    q->answered_ = 0;
    q->status_ = PGRES_EMPTY_QUERY;
    q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
    q->sqlstate_[0] = '\0';
    q->message_[0] = '\0';
}

void advlock_pq_copy_line(char *out, size_t size, const char *text)
{
    size_t n = text != NULL ? strcspn(text, "\n") : 0;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(out, text, n);
    out[n] = '\0';
}

static void keep_sqlstate(advlock_pq_query_ *q, const PGresult *res)
{
    const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (code != NULL && strlen(code) == 5)
        memcpy(q->sqlstate_, code, 6);
    else
        q->sqlstate_[0] = '\0';
}

/* The server's primary message; failing that (libpq's own errors have no
 * fields), the first line of the connection's error text, which begins with
 * the server's last words when it sent any ("FATAL:  terminating connection
 * due to administrator command"), then libpq's view of it. */
static void keep_error_message(advlock_pq_query_ *q, PGconn *conn, const PGresult *res)
{
    const char *text = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (text == NULL && PQerrorMessage(conn)[0] != '\0')
        text = PQerrorMessage(conn);
    if (text == NULL && res != NULL)
        text = PQresultErrorMessage(res);
    advlock_pq_copy_line(q->message_, sizeof q->message_, text);
}

static void unexpected(advlock_pq_query_ *q, const char *what)
{
    q->result_ = ADVLOCK_RESULT_SERVER_ERROR;
    snprintf(q->message_, sizeof q->message_, "unexpected result: %s", what);
}

/* One row, one binary boolean column: 1 byte, 0 or 1. */
static void read_boolean(advlock_pq_query_ *q, const PGresult *res)
{
    char shape[96];
    if (PQntuples(res) != 1 || PQnfields(res) != 1 || PQftype(res, 0) != BOOL_OID
        || PQfformat(res, 0) != BINARY) {
        snprintf(shape, sizeof shape, "%d rows, %d columns, first of type OID %u (format %d)",
                 PQntuples(res), PQnfields(res), PQnfields(res) > 0 ? PQftype(res, 0) : 0,
                 PQnfields(res) > 0 ? PQfformat(res, 0) : -1);
        unexpected(q, shape);
        return;
    }
    if (PQgetisnull(res, 0, 0)) {
        q->result_ = ADVLOCK_RESULT_NULL;
        return;
    }
    const char *value = PQgetvalue(res, 0, 0);
    if (PQgetlength(res, 0, 0) == 1 && (value[0] == 0 || value[0] == 1))
        q->result_ = value[0] == 1 ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
    else
        unexpected(q, "a boolean that is neither true nor false");
}

static int is_failure(int result)
{
    return result == ADVLOCK_RESULT_SERVER_ERROR || result == ADVLOCK_RESULT_CONNECTION_LOST;
}

void advlock_pq_answer_read(advlock_pq_query_ *q, PGconn *conn, const PGresult *res)
{
    int lost = PQstatus(conn) == CONNECTION_BAD;
    /* The first failure says why: a session terminated mid-statement yields
     * the server's FATAL (SQLSTATE 57P01), then libpq's "server closed the
     * connection", which adds only that the connection is gone. */
    if (q->answered_ && is_failure(q->result_)) {
        if (lost)
            q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
        return;
    }
    q->answered_ = 1;
    q->status_ = PQresultStatus(res);
    q->message_[0] = '\0';
    keep_sqlstate(q, res);

    /* Whatever the result said, a broken connection took the session and its
     * locks with it (a row that arrived just before the break included).
     * Errors the server reports always carry an SQLSTATE; an error without
     * one is libpq's own failure to complete the exchange ("server closed
     * the connection unexpectedly", seen before libpq marks the connection
     * bad when a write to a closed socket fails). */
    int failed = q->status_ == PGRES_FATAL_ERROR || q->status_ == PGRES_NONFATAL_ERROR
                 || q->status_ == PGRES_BAD_RESPONSE;
    if (lost || (failed && q->sqlstate_[0] == '\0')) {
        q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
        keep_error_message(q, conn, res);
    } else if (failed) {
        q->result_ = ADVLOCK_RESULT_SERVER_ERROR;
        keep_error_message(q, conn, res);
    } else if (q->status_ == PGRES_TUPLES_OK) {
        read_boolean(q, res);
    } else {
        /* PGRES_COMMAND_OK is what a PREPARE answers; see query.c. */
        unexpected(q, PQresStatus((ExecStatusType)q->status_));
    }
}

void advlock_pq_answer_end(advlock_pq_query_ *q, PGconn *conn)
{
    if (!q->answered_) {
        q->answered_ = 1;
        q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
        q->sqlstate_[0] = '\0';
        keep_error_message(q, conn, NULL);
    }
    if (PQstatus(conn) == CONNECTION_BAD)
        q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
    /* Read what a failing server said last (its goodbye notice) while the
     * adapter still diverts notices, rather than let libpq print it when
     * the caller next touches the connection. Never blocks. */
    if (q->result_ == ADVLOCK_RESULT_CONNECTION_LOST && PQstatus(conn) == CONNECTION_OK
        && PQconsumeInput(conn))
        (void)PQisBusy(conn);
}

void advlock_pq_answer_feed(const advlock_pq_query_ *q, advlock_machine *m, int64_t now_ms)
{
    const char *sqlstate = q->sqlstate_[0] != '\0' ? q->sqlstate_ : NULL;
    /* The machine is QUERYING whenever an answer is fed: it cannot refuse. */
    (void)advlock_on_result(m, (advlock_result)q->result_, sqlstate, q->message_, now_ms);
}
