/*
 * Sending one of the core's statements in the form the connection engine
 * names (prepared under a name, executed by it, or unnamed) and how its
 * int8 parameters are encoded. When each form is used is the engine's
 * rule, stated in docs/libpq.md under "On the wire".
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

int advlock_pq_conn_free(PGconn *conn, int *in_block)
{
    int ok = PQstatus(conn) == CONNECTION_OK;
    PGTransactionStatusType block = ok ? PQtransactionStatus(conn) : PQTRANS_UNKNOWN;
    if (in_block != NULL)
        *in_block = ok ? block != PQTRANS_IDLE : -1;
    return !ok || (block != PQTRANS_ACTIVE && PQpipelineStatus(conn) == PQ_PIPELINE_OFF);
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

int advlock_pq_statement_send(PGconn *conn, const advlock_statement *st)
{
    advlock_sql sql = st->sql;
    int n = advlock_sql_params(sql); /* 1 to 3: see advlock_sql */
    const int64_t values[MAX_PARAMS] = {st->param, st->param2, st->param3};
    int8_params p;
    for (int i = 0; i < n && i < MAX_PARAMS; i++) /* only those sent: once per statement */
        encode(&p, i, values[i]);
    switch (st->form) {
    case ADVLOCK_FORM_PREPARE:
        return PQsendPrepare(conn, advlock_pq_statement_name(sql), advlock_sql_text(sql), n,
                             param_types);
    case ADVLOCK_FORM_NAMED:
        return PQsendQueryPrepared(conn, advlock_pq_statement_name(sql), n, p.values, p.lengths,
                                   p.formats, BINARY);
    default:
        return PQsendQueryParams(conn, advlock_sql_text(sql), n, param_types, p.values, p.lengths,
                                 p.formats, BINARY);
    }
}
