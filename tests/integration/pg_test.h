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

/* The same, with this application_name. */
PGconn *pgt_connect_as(const char *application_name);

/* A new connection to the conninfo in the environment variable variable
 * (a harness's, such as ADVLOCK_TEST_PGBOUNCER_TX); fails the test if it
 * is unset or the connection cannot be made. */
PGconn *pgt_connect_env(const char *variable);

/* The advlock.session setting of the server session a statement of conn
 * lands on ("" when unclaimed). */
const char *pgt_session_claim(PGconn *conn, char *buf, size_t size);

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

/* ---- the lock every test of a suite works on ---- */

/* What each suite's fixture starts from: a lock name no other test uses,
 * its length and derived key, and an observer: a connection of its own that
 * looks at pg_locks and pg_stat_activity from outside the sessions under
 * test. */
typedef struct pgt_lock {
    PGconn *observer;
    char key[160];
    size_t len;
    int64_t derived;
} pgt_lock;

/* Fills l for a test of the suite what: a fresh unique key, and an
 * observer connected from the environment, or to the conninfo in the
 * environment variable observer_env when it is not NULL (a proxy's tests
 * observe the server itself). Fails the test if it cannot connect. */
void pgt_lock_begin(pgt_lock *l, const char *what, const char *observer_env);

/* Closes l's observer. */
void pgt_lock_end(pgt_lock *l);

/* Granted advisory locks on key seen from observer (any session). */
long long pgt_lock_count(PGconn *observer, int64_t key);

/* pg_locks rows for key: mode NULL for any; granted 1 (held), 0 (waiting)
 * or -1 (either); of session's backend, or of any when session is NULL. */
long long pgt_lock_rows(PGconn *observer, int64_t key, const char *mode, int granted,
                        PGconn *session);

/* Waits (up to 5 s) until session's backend waits for key in pg_locks,
 * turning the loop for adapter a meanwhile when it is not NULL. */
void pgt_wait_until_waiting(PGconn *observer, int64_t key, PGconn *session, advlock_pq *a);

/* The last statement session's backend ran, as pg_stat_activity shows it. */
const char *pgt_last_statement(PGconn *observer, PGconn *session, char *buf, size_t size);

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

/* ---- reports ---- */

/* The report's sentence for the lock named name (advlock_pq_describe), in
 * a buffer that stays valid until the next call. */
const char *pgt_describe(const advlock_pq_report *r, const char *name);

/* Fails the test, saying what happened instead, unless r ended outcome. */
void pgt_expect_outcome(const advlock_pq_report *r, advlock_outcome outcome);

/* Fails the test unless r ended FAILED with ECONNLOST after the server
 * terminated its session, saying so in its sentence for the lock named
 * name, which names function. libpq 14+ reports the server's SQLSTATE
 * (57P01) only when the session dies mid-statement; otherwise its reason
 * arrives as text only. Either way the caller learns the server's reason. */
void pgt_expect_connection_lost(const advlock_pq_report *r, const char *name, const char *function);

/* ---- events ---- */

enum { PGT_MAX_EVENTS = 64 };

/* What an event callback saw, reports and messages copied (the event's
 * pointers are valid only during the call): events[i].report points to
 * reports[i]. */
typedef struct pgt_events {
    advlock_event events[PGT_MAX_EVENTS];
    advlock_report reports[PGT_MAX_EVENTS];
    char messages[PGT_MAX_EVENTS][256];
    int n;
} pgt_events;

/* An advlock_event_fn recording into the pgt_events at user. */
void pgt_record_event(void *user, const advlock_event *event);

/* Empties seen and points o's event callback at it (pgt_record_event). */
void pgt_record_events(advlock_options *o, pgt_events *seen);

/* The index of the first event of kind at or after from, or -1. */
int pgt_find_event(const pgt_events *r, advlock_event_kind kind, int from);

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
 * One turn of the loop over the adapters: waits for the first socket
 * readiness or deadline (no later than limit_ms) and lets each adapter that
 * is busy or watching a held lock process what happened to it. Returns how
 * many are still busy (0 at once when none is busy or watching).
 */
size_t pgt_loop_turn(advlock_pq *const *adapters, size_t n, int64_t limit_ms);

/* Turns until no adapter is busy; fails the test after limit_ms. */
void pgt_loop_until_idle(advlock_pq *const *adapters, size_t n, int64_t limit_ms);

/* Turns until adapter a sleeps having sent at least attempts tries. */
void pgt_loop_until_sleeping(advlock_pq *a, uint64_t attempts, int64_t limit_ms);

#endif
