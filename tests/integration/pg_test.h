/*
 * Helpers for the integration tests, which run against the throwaway server
 * of tests/pg/with-postgres.sh (connection settings from the PG* variables).
 */
#ifndef PG_TEST_H
#define PG_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "advlock_pq.h"

/* ---- connections and queries ---- */

/* A new connection from the environment; fails the test if it cannot. */
PGconn *pgt_connect(void);

/* Runs sql with text parameters (NULL-terminated list) and returns the
 * first column of the first row in buf ("" for no row); fails the test on
 * an error. */
const char *pgt_query(PGconn *conn, char *buf, size_t size, const char *sql, ...);

/* Like pgt_query(), as a number. */
long long pgt_query_int(PGconn *conn, const char *sql, ...);

/* Runs sql (no parameters, no result wanted); fails the test on an error. */
void pgt_exec(PGconn *conn, const char *sql);

/* Sleeps for ms milliseconds (only to let another thread get going). */
void pgt_sleep_ms(int64_t ms);

/* A lock name no other test uses, with non-ASCII characters. */
void pgt_unique_key(char *buf, size_t size, const char *what);

/* The derived key of a lock name. */
int64_t pgt_key_of(const char *name);

/* Granted advisory locks on key seen from observer (any session). */
long long pgt_lock_count(PGconn *observer, int64_t key);

/*
 * What a second session sees after holder acquired the lock named by key:
 * exactly one pg_locks row for it, advisory, ExclusiveLock, granted,
 * objsubid 1 (the single-bigint overload), held by holder's backend.
 */
void pgt_expect_lock_row(PGconn *observer, int64_t key, PGconn *holder);

/*
 * The statement the holder's session ran last, as the server saw it: the
 * core's try-lock text with one parameter, no hashtext; and, prepared on the
 * holder's session, the same text with one bigint parameter. (Runs a query
 * on holder, so check pg_stat_activity-dependent things before.)
 */
void pgt_expect_try_lock_statement(PGconn *observer, PGconn *holder);

/* pg_terminate_backend(pid), waiting until the backend is gone. */
void pgt_terminate(PGconn *observer, int pid);

/*
 * Terminates backend pid in the middle of a statement: call with the backend
 * frozen (pgt_freeze) and a statement sent to it; the backend wakes to the
 * termination request and dies before executing the statement, so the client
 * gets the server's FATAL as the statement's answer.
 */
void pgt_freeze(int pid);
void pgt_terminate_frozen(PGconn *observer, int pid);

/* ---- stderr ---- */

typedef struct pgt_stderr_capture {
    int saved_fd;
    int read_fd;
} pgt_stderr_capture;

/* Sends fd 2 into a pipe until pgt_stderr_end(), which returns what was
 * written (NUL-terminated, cut to size). */
void pgt_stderr_begin(pgt_stderr_capture *c);
const char *pgt_stderr_end(pgt_stderr_capture *c, char *buf, size_t size);

/* ---- the server ---- */

/* pg_ctl stop -m immediate / start -w, as the data directory's owner. */
void pgt_server_stop_immediate(void);
void pgt_server_start(void);

/* ---- a poll() loop for nonblocking adapters ---- */

/*
 * One turn of the loop over the busy adapters: waits for the first socket
 * readiness or deadline (no later than limit_ms) and lets each adapter
 * process what happened to it. Returns how many are still busy.
 */
size_t pgt_loop_turn(advlock_pq_async *const *adapters, size_t n, int64_t limit_ms);

/* Turns until no adapter is busy; fails the test after limit_ms. */
void pgt_loop_until_idle(advlock_pq_async *const *adapters, size_t n, int64_t limit_ms);

/* Turns until adapter a sleeps having sent at least attempts tries. */
void pgt_loop_until_sleeping(advlock_pq_async *a, uint64_t attempts, int64_t limit_ms);

#endif
