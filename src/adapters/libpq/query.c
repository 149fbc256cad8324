/*
 * Sending one of the machine's queries: which form it goes in (prepared
 * under a name, or unnamed), how its int8 parameters are encoded, and when
 * a missing prepared statement may be prepared again. The rule is stated in
 * docs/libpq.md under "On the wire" (prepared statements).
 */
#include "pq.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* "advlock_" + 16 hex digits + NUL */
enum { NAME_SIZE = 8 + 16 + 1 };

static char statement_names[ADVLOCK_SQL_COUNT][NAME_SIZE];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

/* The name is a hash (64-bit FNV-1a) of the statement's text: a changed text
 * gets a new name, so statements of another advlock version prepared on the
 * same (pooled) connection are never executed by mistake. */
static void make_statement_names(void)
{
    for (int sql = 0; sql < ADVLOCK_SQL_COUNT; sql++) {
        uint64_t hash = UINT64_C(0xcbf29ce484222325);
        for (const char *c = advlock_sql_text((advlock_sql)sql); *c != '\0'; c++)
            hash = (hash ^ (unsigned char)*c) * UINT64_C(0x100000001b3);
        snprintf(statement_names[sql], NAME_SIZE, "advlock_%016llx", (unsigned long long)hash);
    }
}

const char *advlock_pq_statement_name(advlock_sql sql)
{
    if ((int)sql < 0 || (int)sql >= ADVLOCK_SQL_COUNT)
        return NULL;
    pthread_once(&names_once, make_statement_names);
    return statement_names[sql];
}

/* One bit per statement in the prepared-statement masks (the single
 * adapter's and the lock set's): the rows a lock's drivers send. The
 * command's own rows (from ADVLOCK_SQL_OCCUPY) are never prepared. */
_Static_assert(ADVLOCK_SQL_OCCUPY <= 32, "prepared masks have 32 bits");

uint32_t advlock_pq_sql_bit(int sql)
{
    return (unsigned)sql < ADVLOCK_SQL_OCCUPY ? UINT32_C(1) << sql : 0;
}

int advlock_pq_conn_free(PGconn *conn)
{
    if (PQstatus(conn) != CONNECTION_OK)
        return 1;
    return PQtransactionStatus(conn) != PQTRANS_ACTIVE && PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

void advlock_pq_query_begin(advlock_pq_query_ *q, advlock_sql sql, uint32_t prepared, int proxied,
                            PGconn *conn)
{
    q->sql_ = sql;
    q->reprepared_ = 0;
    advlock_pq_answer_clear(q);
    /* Inside a transaction a missing statement would abort the caller's
     * transaction; a broken connection gets the simplest form to fail with.
     * Behind a proxy a statement prepared on one server session is executed
     * on whichever is free: it works only by accident (26000, 42P05). The
     * session check runs once per connection, before anyone knows which of
     * the two this is, so it is never worth a PREPARE. */
    if (PQtransactionStatus(conn) != PQTRANS_IDLE || proxied || sql == ADVLOCK_SQL_SESSION)
        q->form_ = ADVLOCK_PQ_EXECUTE_UNNAMED;
    else if (prepared & advlock_pq_sql_bit(sql))
        q->form_ = ADVLOCK_PQ_EXECUTE_NAMED;
    else
        q->form_ = ADVLOCK_PQ_PREPARE;
}

/* The parameters as binary int8s: eight bytes each, most significant first. */
enum { MAX_PARAMS = 3 };
typedef struct {
    char bytes[MAX_PARAMS][8];
    const char *values[MAX_PARAMS];
    int lengths[MAX_PARAMS];
    int formats[MAX_PARAMS];
} int8_params;

static void encode(int8_params *p, int i, int64_t value)
{
    uint64_t v = (uint64_t)value;
    char *b = p->bytes[i];
    /* Spelt out, not a loop: compilers merge these into one byte swap and
     * store, where the loop cost 40 instructions a parameter. */
    b[0] = (char)(v >> 56);
    b[1] = (char)(v >> 48);
    b[2] = (char)(v >> 40);
    b[3] = (char)(v >> 32);
    b[4] = (char)(v >> 24);
    b[5] = (char)(v >> 16);
    b[6] = (char)(v >> 8);
    b[7] = (char)v;
    p->values[i] = p->bytes[i];
    p->lengths[i] = 8;
    p->formats[i] = BINARY;
}

static const Oid param_types[MAX_PARAMS] = {INT8_OID, INT8_OID, INT8_OID};

int advlock_pq_send_row(PGconn *conn, advlock_sql sql, const int64_t *params)
{
    const char *text = advlock_sql_text(sql);
    int n = advlock_sql_params(sql);
    if (text == NULL || (n > 0 && params == NULL))
        return ADVLOCK_EINVAL;
    /* Pipeline mode (a lock set's connection) takes the extended protocol
     * only. */
    if (n == 0 && PQpipelineStatus(conn) == PQ_PIPELINE_OFF)
        return PQsendQuery(conn, text);
    int8_params p;
    for (int i = 0; i < n && i < MAX_PARAMS; i++)
        encode(&p, i, params[i]);
    return PQsendQueryParams(conn, text, n, param_types, p.values, p.lengths, p.formats, 0);
}

int advlock_pq_query_send(const advlock_pq_query_ *q, PGconn *conn, const advlock_action *action)
{
    advlock_sql sql = (advlock_sql)q->sql_;
    int n = advlock_sql_params(sql); /* 1 to 3: see advlock_sql */
    const int64_t values[MAX_PARAMS] = {action->param, action->param2, action->param3};
    int8_params p;
    for (int i = 0; i < n && i < MAX_PARAMS; i++) /* only those sent: once per statement */
        encode(&p, i, values[i]);
    switch (q->form_) {
    case ADVLOCK_PQ_PREPARE:
        return PQsendPrepare(conn, advlock_pq_statement_name(sql), advlock_sql_text(sql), n,
                             param_types);
    case ADVLOCK_PQ_EXECUTE_NAMED:
        return PQsendQueryPrepared(conn, advlock_pq_statement_name(sql), n, p.values, p.lengths,
                                   p.formats, BINARY);
    default:
        return PQsendQueryParams(conn, advlock_sql_text(sql), n, param_types, p.values, p.lengths,
                                 p.formats, BINARY);
    }
}

static int sqlstate_is(const advlock_pq_query_ *q, const char *code)
{
    return strcmp(q->sqlstate_, code) == 0;
}

int advlock_pq_query_next(advlock_pq_query_ *q, uint32_t *prepared, PGconn *conn)
{
    switch (q->form_) {
    case ADVLOCK_PQ_PREPARE:
        if (q->result_ == ADVLOCK_RESULT_CONNECTION_LOST)
            return 0;
        /* 42P05 duplicate_prepared_statement: someone (another session
         * object on this connection) prepared it already. */
        if (q->status_ == PGRES_COMMAND_OK || sqlstate_is(q, "42P05")) {
            *prepared |= advlock_pq_sql_bit(q->sql_);
            q->form_ = ADVLOCK_PQ_EXECUTE_NAMED;
        } else {
            q->form_ = ADVLOCK_PQ_EXECUTE_UNNAMED;
        }
        break;
    case ADVLOCK_PQ_EXECUTE_NAMED:
        /* 26000 invalid_sql_statement_name: the statement was dropped.
         * Named statements only run outside transactions, so the failure
         * aborted nothing; check anyway before sending more. */
        if (!sqlstate_is(q, "26000") || q->reprepared_ || PQtransactionStatus(conn) != PQTRANS_IDLE)
            return 0;
        *prepared &= ~advlock_pq_sql_bit(q->sql_);
        q->reprepared_ = 1;
        q->form_ = ADVLOCK_PQ_PREPARE;
        break;
    default: return 0;
    }
    advlock_pq_answer_clear(q);
    return 1;
}
