/*
 * What a statement's results mean, as the connection engine's answer
 * (advlock_answer, advlock_pq_answer_export()). The statement's row in the
 * core's table says what it returns (advlock_sql_answer):
 *   BOOLEAN  one row, one boolean column: TRUE, FALSE or NULL;
 *   VOID     one row, one void column (the waiting lock functions): TRUE,
 *            or NULL when a guarded wait did not run;
 *   HOLDERS  rows of advlock_holder columns;
 *   SESSION  one row: pid int4, in_recovery bool, ours bool;
 *   FENCED   one row: granted bool, token int8 (NULL unless granted; a
 *            NULL granted as NULL);
 *   CAPACITY one row of three int8, none NULL: the lock table's settings.
 * A server error becomes SERVER_ERROR with its SQLSTATE and primary message;
 * a broken connection, or no result at all, becomes CONNECTION_LOST. Written
 * once, for every pump. Results are read in binary format only, so no
 * locale or text format is involved.
 *
 * Words are not copied while results arrive: the result that says the
 * answer is kept, and only a final failure's words are written, once, into
 * the report (a failed PREPARE that the unnamed form replaces never costs a
 * copy, and never hides the words of an earlier failure).
 */
#include "pq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why a result that came is not the answer its statement gives; the words
 * saying so are written only if it is the final answer. */
enum unexpected {
    EXPECTED = 0,      /* the kept result's own words, if any, say it */
    UNEXPECTED_STATUS, /* a status no statement of ours answers */
    UNEXPECTED_SHAPE,  /* other rows or columns than the statement returns */
    UNEXPECTED_BOOLEAN /* a boolean that is neither true nor false */
};

/* Frees the kept result, if any: most statements keep none when this
 * runs, and PQclear(NULL), which does nothing, costs a call into libpq. */
static void forget(advlock_pq_query_ *q)
{
    if (q->kept_ != NULL) {
        PQclear(q->kept_);
        q->kept_ = NULL;
    }
}

void advlock_pq_answer_clear(advlock_pq_query_ *q)
{
    q->answered_ = 0;
    q->status_ = PGRES_EMPTY_QUERY;
    q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
    q->unexpected_ = EXPECTED;
    q->sqlstate_[0] = '\0';
    forget(q);
}

void advlock_pq_copy_line(char *out, size_t size, const char *text)
{
    static const char ellipsis[] = "...";
    if (size < sizeof ellipsis) { /* every caller's field is larger */
        if (size > 0)
            out[0] = '\0';
        return;
    }
    /* Most operations end with no words to copy. */
    if (text == NULL || text[0] == '\0') {
        out[0] = '\0';
        return;
    }
    size_t n = strcspn(text, "\n");
    int cut = n >= size;
    if (cut) {
        n = size - sizeof ellipsis;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(out, text, n);
    if (cut) {
        memcpy(out + n, ellipsis, sizeof ellipsis);
        return;
    }
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
static void write_error_words(char *out, size_t size, PGconn *conn, const PGresult *res)
{
    const char *text = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (text == NULL && PQerrorMessage(conn)[0] != '\0')
        text = PQerrorMessage(conn);
    if (text == NULL && res != NULL)
        text = PQresultErrorMessage(res);
    advlock_pq_copy_line(out, size, text);
}

/* What came instead of the answer, in words. */
static void write_unexpected_words(char *out, size_t size, const advlock_pq_query_ *q)
{
    const PGresult *res = q->kept_;
    switch (q->unexpected_) {
    case UNEXPECTED_STATUS:
        snprintf(out, size, "unexpected result: %s", PQresStatus((ExecStatusType)q->status_));
        break;
    case UNEXPECTED_SHAPE:
        snprintf(out, size,
                 "unexpected result: %d rows, %d columns, first of type OID %u (format %d)",
                 PQntuples(res), PQnfields(res), PQnfields(res) > 0 ? PQftype(res, 0) : 0,
                 PQnfields(res) > 0 ? PQfformat(res, 0) : -1);
        break;
    default:
        snprintf(out, size, "unexpected result: a boolean that is neither true nor false");
        break;
    }
}

static void unexpected(advlock_pq_query_ *q, enum unexpected why)
{
    q->result_ = ADVLOCK_RESULT_SERVER_ERROR;
    q->unexpected_ = (uint8_t)why;
}

/* Checks that a result has the rows and binary columns a statement returns
 * (rows < 0: any number); otherwise the answer is that something else came. */
static int has_shape(advlock_pq_query_ *q, const PGresult *res, int rows, const Oid *types,
                     int ncolumns)
{
    int ok = (rows < 0 || PQntuples(res) == rows) && PQnfields(res) == ncolumns;
    for (int i = 0; ok && i < ncolumns; i++)
        ok = PQftype(res, i) == types[i] && PQfformat(res, i) == BINARY;
    if (!ok)
        unexpected(q, UNEXPECTED_SHAPE);
    return ok;
}

/* A binary boolean's 1 or 0, or -1 for NULL or anything else. */
static int boolean_value(const PGresult *res, int row, int column)
{
    if (PQgetisnull(res, row, column) || PQgetlength(res, row, column) != 1)
        return -1;
    char value = PQgetvalue(res, row, column)[0];
    return value == 0 || value == 1 ? value : -1;
}

/* One row, one binary boolean column: 1 byte, 0 or 1. */
static void read_boolean(advlock_pq_query_ *q, const PGresult *res)
{
    static const Oid types[1] = {BOOL_OID};
    if (!has_shape(q, res, 1, types, 1))
        return;
    int value = boolean_value(res, 0, 0); /* asks whether NULL first */
    if (value >= 0)
        q->result_ = value ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
    else if (PQgetisnull(res, 0, 0))
        q->result_ = ADVLOCK_RESULT_NULL;
    else
        unexpected(q, UNEXPECTED_BOOLEAN);
}

/* One row, one void column: the function returned, so the lock is held.
 * (Its value, an empty binary datum, carries nothing.) A SQL NULL is a
 * guarded wait that found another server session and ran nothing. */
static void read_void(advlock_pq_query_ *q, const PGresult *res)
{
    static const Oid types[1] = {VOID_OID};
    if (has_shape(q, res, 1, types, 1))
        q->result_ = PQgetisnull(res, 0, 0) ? ADVLOCK_RESULT_NULL : ADVLOCK_RESULT_TRUE;
}

/* The session row: a pid and two booleans, none of them NULL (the
 * statement never answers NULL); its values are read when fed. */
static void read_session(advlock_pq_query_ *q, const PGresult *res)
{
    static const Oid types[3] = {INT4_OID, BOOL_OID, BOOL_OID};
    if (!has_shape(q, res, 1, types, 3))
        return;
    if (PQgetisnull(res, 0, 0) || PQgetlength(res, 0, 0) != 4)
        unexpected(q, UNEXPECTED_SHAPE);
    else if (boolean_value(res, 0, 1) < 0 || boolean_value(res, 0, 2) < 0)
        unexpected(q, UNEXPECTED_BOOLEAN);
    else
        q->result_ = ADVLOCK_RESULT_TRUE;
}

static int64_t integer(const PGresult *res, int row, int column, int width);

/* The fenced row: granted and, with a grant, its token (8 bytes; NULL
 * otherwise); read as TRUE or FALSE here, the token when fed. */
static void read_fenced(advlock_pq_query_ *q, const PGresult *res)
{
    static const Oid types[2] = {BOOL_OID, INT8_OID};
    if (!has_shape(q, res, 1, types, 2))
        return;
    if (PQgetisnull(res, 0, 0)) {
        q->result_ = ADVLOCK_RESULT_NULL;
        return;
    }
    int granted = boolean_value(res, 0, 0);
    if (granted < 0)
        unexpected(q, UNEXPECTED_BOOLEAN);
    else if (granted && integer(res, 0, 1, 8) < 1) /* NULL, another width, or edited */
        unexpected(q, UNEXPECTED_SHAPE);
    else
        q->result_ = granted ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
}

/* The lock table's settings: three int8, none of them NULL. */
static void read_capacity(advlock_pq_query_ *q, const PGresult *res)
{
    static const Oid types[3] = {INT8_OID, INT8_OID, INT8_OID};
    if (!has_shape(q, res, 1, types, 3))
        return;
    for (int i = 0; i < 3; i++)
        if (PQgetisnull(res, 0, i) || PQgetlength(res, 0, i) != 8) {
            unexpected(q, UNEXPECTED_SHAPE);
            return;
        }
    q->result_ = ADVLOCK_RESULT_TRUE;
}

/* The types of ADVLOCK_SQL_HOLDERS's columns (advlock_holders_column). */
static const Oid holder_types[ADVLOCK_HOLDERS_COLUMNS] = {
    [ADVLOCK_HOLDERS_PID] = INT4_OID,    [ADVLOCK_HOLDERS_GRANTED] = BOOL_OID,
    [ADVLOCK_HOLDERS_MODE] = TEXT_OID,   [ADVLOCK_HOLDERS_APPLICATION] = TEXT_OID,
    [ADVLOCK_HOLDERS_CLIENT] = TEXT_OID, [ADVLOCK_HOLDERS_STATE] = TEXT_OID,
    [ADVLOCK_HOLDERS_START] = TEXT_OID,  [ADVLOCK_HOLDERS_SECONDS] = INT8_OID,
};

/* Any number of rows: the kept result's values are the holders' strings,
 * fed to the machine with the answer. */
static void read_holders(advlock_pq_query_ *q, const PGresult *res)
{
    if (has_shape(q, res, -1, holder_types, ADVLOCK_HOLDERS_COLUMNS))
        q->result_ = ADVLOCK_RESULT_TRUE;
}

static int is_failure(int result)
{
    return result == ADVLOCK_RESULT_SERVER_ERROR || result == ADVLOCK_RESULT_CONNECTION_LOST;
}

/* The connection broke: that, in libpq's or the server's words, is the
 * answer, whatever came before it. */
static void connection_lost(advlock_pq_query_ *q)
{
    q->result_ = ADVLOCK_RESULT_CONNECTION_LOST;
    q->unexpected_ = EXPECTED;
}

/* Reads res into q; returns 1 if q keeps it. */
static int read_result(advlock_pq_query_ *q, PGconn *conn, PGresult *res)
{
    int lost = PQstatus(conn) == CONNECTION_BAD;
    /* The first failure says why: a session terminated mid-statement yields
     * the server's FATAL (SQLSTATE 57P01), then libpq's "server closed the
     * connection", which adds only that the connection is gone. */
    if (q->answered_ && is_failure(q->result_)) {
        if (lost)
            connection_lost(q);
        return 0;
    }
    /* A result after the rows (there is none in the protocol, but a failure
     * would say more than the rows) replaces them. */
    forget(q);
    q->kept_ = res;
    q->answered_ = 1;
    q->status_ = (uint8_t)PQresultStatus(res);
    q->unexpected_ = EXPECTED;
    /* Rows and a PREPARE's success carry no SQLSTATE: not asked for. */
    if (q->status_ == PGRES_TUPLES_OK || q->status_ == PGRES_COMMAND_OK)
        q->sqlstate_[0] = '\0';
    else
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
        connection_lost(q);
    } else if (failed) {
        q->result_ = ADVLOCK_RESULT_SERVER_ERROR;
    } else if (q->status_ == PGRES_TUPLES_OK) {
        switch (advlock_sql_answer((advlock_sql)q->sql_)) {
        case ADVLOCK_ANSWER_VOID: read_void(q, res); break;
        case ADVLOCK_ANSWER_HOLDERS: read_holders(q, res); break;
        case ADVLOCK_ANSWER_SESSION: read_session(q, res); break;
        case ADVLOCK_ANSWER_FENCED: read_fenced(q, res); break;
        case ADVLOCK_ANSWER_CAPACITY: read_capacity(q, res); break;
        default: read_boolean(q, res); break;
        }
    } else {
        /* PGRES_COMMAND_OK is what a PREPARE answers; see query.c. */
        unexpected(q, UNEXPECTED_STATUS);
    }
    return 1;
}

void advlock_pq_answer_read(advlock_pq_query_ *q, PGconn *conn, PGresult *res)
{
    if (!read_result(q, conn, res))
        PQclear(res);
}

void advlock_pq_answer_end(advlock_pq_query_ *q, PGconn *conn)
{
    if (!q->answered_) {
        q->answered_ = 1;
        q->sqlstate_[0] = '\0';
        connection_lost(q);
    }
    if (PQstatus(conn) == CONNECTION_BAD)
        connection_lost(q);
    /* Read what a failing server said last (its goodbye notice) while the
     * adapter still diverts notices, rather than let libpq print it when
     * the caller next touches the connection. Never blocks. */
    if (q->result_ == ADVLOCK_RESULT_CONNECTION_LOST && PQstatus(conn) == CONNECTION_OK
        && PQconsumeInput(conn))
        (void)PQisBusy(conn);
}

/* Binary integers arrive most significant byte first. */
static int64_t big_endian(const char *bytes, int length)
{
    uint64_t v = 0;
    for (int i = 0; i < length; i++)
        v = v << 8 | (unsigned char)bytes[i];
    if (length == 4)
        return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* A column's integer, or 0 for NULL (a prepared transaction's lock has no
 * pid) or a value of the wrong width. */
static int64_t integer(const PGresult *res, int row, int column, int width)
{
    if (PQgetisnull(res, row, column) || PQgetlength(res, row, column) != width)
        return 0;
    return big_endian(PQgetvalue(res, row, column), width);
}

/* libpq ends every value, binary text included, with a NUL byte. */
static const char *text(const PGresult *res, int row, int column)
{
    return PQgetisnull(res, row, column) ? NULL : PQgetvalue(res, row, column);
}

/* The kept rows as advlock_holder values whose strings point into res
 * (calloc'd: the caller frees them), or NULL when memory ran out. */
static advlock_holder *holder_rows(const PGresult *res)
{
    int n = PQntuples(res);
    advlock_holder *rows = calloc((size_t)n, sizeof *rows);
    for (int i = 0; rows != NULL && i < n; i++) {
        rows[i].pid = (int)integer(res, i, ADVLOCK_HOLDERS_PID, 4);
        rows[i].granted = boolean_value(res, i, ADVLOCK_HOLDERS_GRANTED) == 1;
        rows[i].mode = text(res, i, ADVLOCK_HOLDERS_MODE);
        rows[i].application_name = text(res, i, ADVLOCK_HOLDERS_APPLICATION);
        rows[i].client = text(res, i, ADVLOCK_HOLDERS_CLIENT);
        rows[i].state = text(res, i, ADVLOCK_HOLDERS_STATE);
        rows[i].backend_start = text(res, i, ADVLOCK_HOLDERS_START);
        rows[i].seconds = integer(res, i, ADVLOCK_HOLDERS_SECONDS, 8);
    }
    return rows;
}

/* holder_rows(), or NULL with the words of the failure in words: the
 * statement is then answered as failed. Diagnostics are optional: their
 * failure still ends TIMED_OUT. */
static advlock_holder *holder_rows_or_say(const PGresult *res, char *words, size_t size)
{
    advlock_holder *rows = holder_rows(res);
    if (rows == NULL)
        advlock_pq_copy_line(words, size, "out of memory");
    return rows;
}

/* A failure's words into words; returns 0 (nothing written) for a success. */
static int write_failure_words(const advlock_pq_query_ *q, PGconn *conn, char *words, size_t size)
{
    if (!is_failure(q->result_))
        return 0;
    if (q->unexpected_ != EXPECTED)
        write_unexpected_words(words, size, q);
    else
        write_error_words(words, size, conn, q->kept_);
    return 1;
}

void advlock_pq_answer_export(advlock_pq_query_ *q, PGconn *conn, char *words, size_t size,
                              advlock_answer *out, advlock_holder **rows)
{
    advlock_answer_init(out, (advlock_result)q->result_);
    *rows = NULL;
    out->aborted = q->status_ == PGRES_PIPELINE_ABORTED;
    out->sqlstate = q->sqlstate_[0] != '\0' ? q->sqlstate_ : NULL;
    if (q->form_ == ADVLOCK_FORM_PREPARE && q->status_ == PGRES_COMMAND_OK)
        out->result = ADVLOCK_RESULT_TRUE;
    else if (write_failure_words(q, conn, words, size))
        out->message = words;
    const PGresult *res = q->kept_;
    if (out->result != ADVLOCK_RESULT_TRUE || res == NULL || q->form_ == ADVLOCK_FORM_PREPARE)
        return;
    /* read_result checked every value these read. */
    switch (advlock_sql_answer((advlock_sql)q->sql_)) {
    case ADVLOCK_ANSWER_SESSION:
        out->server_pid = (int)integer(res, 0, 0, 4);
        out->in_recovery = boolean_value(res, 0, 1);
        out->ours = boolean_value(res, 0, 2);
        break;
    case ADVLOCK_ANSWER_FENCED: out->fence_token = integer(res, 0, 1, 8); break;
    case ADVLOCK_ANSWER_CAPACITY:
        for (int i = 0; i < 3; i++)
            out->settings[i] = integer(res, 0, i, 8);
        break;
    case ADVLOCK_ANSWER_HOLDERS:
        if (PQntuples(res) == 0)
            break;
        *rows = holder_rows_or_say(res, words, size);
        if (*rows == NULL) {
            out->result = ADVLOCK_RESULT_SERVER_ERROR;
            out->message = words;
            break;
        }
        out->holders = *rows;
        out->nholders = (size_t)PQntuples(res);
        break;
    default: break;
    }
}
