/*
 * What the benchmarks against a real server share: connections from the
 * environment tests/pg/with-postgres.sh sets up, and the raw libpq way of
 * running the library's two statements, which the library is compared with.
 *
 * The raw path sends exactly what the adapters send: a prepared statement,
 * its one int8 parameter in binary, the boolean result in binary.
 */
#ifndef BENCH_PQ_H
#define BENCH_PQ_H

#include <libpq-fe.h>
#include <stdint.h>

#include "advlock_pq.h"

/* A connection from the PG* environment; exits the program if none. */
PGconn *bench_pq_connect(void);

/* Raw statement names, distinct from the adapters' "advlock_..." ones. */
#define BENCH_PQ_TRY_LOCK "bench_try_lock"
#define BENCH_PQ_UNLOCK   "bench_unlock"

/* Prepares BENCH_PQ_TRY_LOCK and BENCH_PQ_UNLOCK on conn, each with one
 * int8 parameter; exits on failure. */
void bench_pq_prepare(PGconn *conn);

/* Sends a prepared statement with key as its binary int8 parameter, asking
 * for a binary result (PQsendQueryPrepared); exits if libpq refuses. */
void bench_pq_send(PGconn *conn, const char *statement, int64_t key);

/* Checks that res is one row holding boolean true, then clears it; exits
 * otherwise (a benchmark of a failing lock measures nothing). */
void bench_pq_expect_true(PGresult *res, const char *what);

/* PQexecPrepared of statement with key (binary in and out); expects true.
 * One round trip. */
void bench_pq_exec_true(PGconn *conn, const char *statement, int64_t key);

/* Exits with the report's sentence (advlock_pq_describe() for the lock
 * named name), prefixed by what, unless the operation ended with outcome. */
void bench_pq_expect_outcome(const advlock_pq_report *r, advlock_outcome outcome, const char *name,
                             const char *what);

/* Runs each SQL command of script (PQexec: several allowed) on conn, its
 * notices unshown; exits on failure, naming what. */
void bench_pq_exec_script(PGconn *conn, const char *script, const char *what);

/* The advisory-lock key of a name, as the library derives it. */
int64_t bench_pq_key(const char *name);

#endif
