/* Helpers for the benchmarks against a real server; see bench_pq.h. */
#include "bench_pq.h"

#include <string.h>

#include "bench.h"

enum { INT8_OID = 20, BOOL_OID = 16, BINARY = 1 };

PGconn *bench_pq_connect(void)
{
    PGconn *conn = PQconnectdb("");
    if (PQstatus(conn) != CONNECTION_OK)
        bench_fail("cannot connect (run under tests/pg/with-postgres.sh): %s",
                   PQerrorMessage(conn));
    return conn;
}

static void prepare(PGconn *conn, const char *name, const char *sql)
{
    const Oid types[1] = {INT8_OID};
    PGresult *res = PQprepare(conn, name, sql, 1, types);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        bench_fail("PREPARE %s: %s", name, PQerrorMessage(conn));
    PQclear(res);
}

void bench_pq_prepare(PGconn *conn)
{
    prepare(conn, BENCH_PQ_TRY_LOCK, "SELECT pg_try_advisory_lock($1)");
    prepare(conn, BENCH_PQ_UNLOCK, "SELECT pg_advisory_unlock($1)");
}

/* The parameter as the adapters send it: a binary int8, big-endian. */
typedef struct int8_param {
    char bytes[8];
    const char *values[1];
    int lengths[1];
    int formats[1];
} int8_param;

static void encode(int8_param *p, int64_t key)
{
    uint64_t v = (uint64_t)key;
    for (int i = 7; i >= 0; i--, v >>= 8)
        p->bytes[i] = (char)(v & 0xFF);
    p->values[0] = p->bytes;
    p->lengths[0] = 8;
    p->formats[0] = BINARY;
}

void bench_pq_send(PGconn *conn, const char *statement, int64_t key)
{
    int8_param p;
    encode(&p, key);
    if (!PQsendQueryPrepared(conn, statement, 1, p.values, p.lengths, p.formats, BINARY))
        bench_fail("%s: %s", statement, PQerrorMessage(conn));
}

void bench_pq_expect_true(PGresult *res, const char *what)
{
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQftype(res, 0) != BOOL_OID
        || PQgetlength(res, 0, 0) != 1 || PQgetvalue(res, 0, 0)[0] != 1)
        bench_fail("%s did not answer true: %s", what, PQresultErrorMessage(res));
    PQclear(res);
}

void bench_pq_exec_true(PGconn *conn, const char *statement, int64_t key)
{
    int8_param p;
    encode(&p, key);
    bench_pq_expect_true(PQexecPrepared(conn, statement, 1, p.values, p.lengths, p.formats, BINARY),
                         statement);
}

void bench_pq_expect_outcome(const advlock_pq_report *r, advlock_outcome outcome, const char *name,
                             const char *what)
{
    if (r->lock.outcome == outcome)
        return;
    char message[ADVLOCK_MESSAGE_MAX];
    advlock_pq_describe(r, name, strlen(name), message, sizeof message);
    bench_fail("%s: %s, not %s: %s", what, advlock_outcome_name(r->lock.outcome),
               advlock_outcome_name(outcome), message);
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

void bench_pq_exec_script(PGconn *conn, const char *script, const char *what)
{
    /* An idempotent script's "already exists, skipping" is no news. */
    PQnoticeProcessor shown = PQsetNoticeProcessor(conn, ignore_notice, NULL);
    PGresult *res = PQexec(conn, script);
    PQsetNoticeProcessor(conn, shown, NULL);
    ExecStatusType status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
        bench_fail("%s: %s", what, PQerrorMessage(conn));
    PQclear(res);
}

int64_t bench_pq_key(const char *name)
{
    int64_t key;
    if (advlock_derive_key(name, strlen(name), &key) != 0)
        bench_fail("cannot derive the key of %s", name);
    return key;
}
