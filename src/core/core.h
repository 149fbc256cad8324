/* Declarations shared by the core's files; none of this is exported. */
#ifndef ADVLOCK_CORE_H
#define ADVLOCK_CORE_H

#include "advlock.h"
#include "saturating.h"

/* The SQL function a statement calls, for messages ("pg_advisory_unlock"). */
const char *advlock_sql_function(advlock_sql sql);

/* The row that takes (or waits for) a lock of this mode and scope; guarded:
 * the form that runs only on the connection's claimed server session. */
advlock_sql advlock_sql_for_lock(advlock_mode mode, advlock_scope scope, int wait, int guarded);

/* The row that releases a session lock of this mode. */
advlock_sql advlock_sql_for_unlock(advlock_mode mode, int guarded);

/* The verify's row for a lock of this mode and scope (guarded: the
 * connection is behind a proxy). */
advlock_sql advlock_sql_for_held(advlock_mode mode, advlock_scope scope, int guarded);

/* 1 for the guarded transaction-scoped rows, whose NULL means busy: the
 * statement reached a server session holding the key for someone else. */
int advlock_sql_null_is_busy(advlock_sql sql);

/* 1 for the fenced try-locks (ADVLOCK_ANSWER_FENCED). */
int advlock_sql_fenced(advlock_sql sql);

/* The fenced try-lock of a scope (exclusive: only those take tokens). */
advlock_sql advlock_sql_for_fenced(advlock_scope scope);

/* 1 for the verify's rows (ADVLOCK_SQL_HELD and its forms). */
int advlock_sql_verifies(advlock_sql sql);

/* 1 when m's options ask for lock-delay (advlock_options.lock_delay). */
int advlock_machine_lock_delay(const advlock_machine *m);

/* 1 when a fenced try's error with sqlstate (NULL: unknown, 0) is one it
 * raises before it runs (class 42: the schema or a privilege missing, at
 * parse or executor start; 3F000: no schema; 25006: read-only, a
 * standby), so before anything is locked; any other error may follow the
 * grant, which is then to be given back (machine.c). */
int advlock_fenced_fails_before_locking(const char *sqlstate);

/* The words of an ESESSION failure: what was observed, then its possible
 * causes. The session check observed a claimed server session; a guarded
 * statement's NULL (advlock_strerror()) only that it ran on one this
 * connection did not claim. */
#define ADVLOCK_SESSION_CAUSES                                                         \
    ": a transaction-pooling proxy, or a session pool that does not reset sessions "   \
    "between clients (PgBouncer's server_reset_query)? session advisory locks need a " \
    "direct connection or a session pool that resets sessions"
#define ADVLOCK_SESSION_CLAIMED                                                         \
    "the server session this connection reached was claimed by another connection, or " \
    "holds another client's advisory lock" ADVLOCK_SESSION_CAUSES
#define ADVLOCK_SESSION_ELSEWHERE                                         \
    "a statement of this connection reached a server session it did not " \
    "claim" ADVLOCK_SESSION_CAUSES

/* Why a server older than PostgreSQL 14 is refused (the session check
 * fails there; docs/operators.md, "Supported servers"). */
#define ADVLOCK_SERVER_MINIMUM                                                           \
    "advlock needs PostgreSQL 14 or later: older servers have no "                       \
    "client_connection_check_interval, which bounds how long a leased holder's running " \
    "statement outlives its connection, nor pg_locks.waitstart"

/*
 * Bounded text builder: appends into a fixed buffer that always holds a C
 * string. Text that does not fit is cut at a UTF-8 character boundary and
 * marked with "...", and everything appended after that is dropped.
 */
typedef struct advlock_text {
    char *buf;
    size_t size;
    size_t len;
    int cut;
} advlock_text;

void advlock_text_init(advlock_text *t, char *buf, size_t size);
void advlock_text_putn(advlock_text *t, const char *s, size_t n);
void advlock_text_put(advlock_text *t, const char *s);
void advlock_text_put_seconds(advlock_text *t, int64_t ms);
void advlock_text_put_int(advlock_text *t, int64_t v);

/* Appends a lock name, showing an embedded NUL byte as \0. */
void advlock_text_put_key(advlock_text *t, const char *key, size_t len);

#endif
