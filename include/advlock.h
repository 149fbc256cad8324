/*
 * advlock — PostgreSQL advisory locks by name: the sans-I/O core.
 *
 * A lock name becomes a 64-bit key (advlock_derive_key()). A lock machine
 * then tells its driver, one action at a time, to run a query, sleep until
 * a deadline, or stop with an outcome. It never performs I/O, reads a
 * clock, sleeps or allocates: the caller owns every byte of its state and
 * feeds it the current time (monotonic milliseconds) with every input.
 * docs/design.md describes the machine (its inputs, actions and states, the
 * server session check, who owns every pointer); README.md shows the
 * driving loop.
 *
 * Thread safety: a machine belongs to one thread at a time; different
 * machines may be driven from different threads without locking.
 * advlock_derive_key() may be called from any thread.
 */
#ifndef ADVLOCK_H
#define ADVLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The project's version, written here only (scripts/version.sh reads it). */
#define ADVLOCK_VERSION "0.4.0"

/* Marks the exported API; everything else in the libraries is hidden. */
#if defined(__GNUC__) && !defined(ADVLOCK_STATIC_ONLY)
#define ADVLOCK_API __attribute__((visibility("default")))
#else
#define ADVLOCK_API
#endif

/* The version of the library loaded at run time (ADVLOCK_VERSION is the one
 * a program was built against): for bindings that load it, such as the
 * Python package. Static storage; never NULL; no errors. */
ADVLOCK_API const char *advlock_version(void);

/*
 * Call errors. Every function that can refuse a call returns 0 or one of
 * these negative values, and a refused call changes nothing. They say what
 * was wrong with the call, never how an operation ended (see
 * advlock_failure).
 */
typedef enum advlock_error {
    ADVLOCK_OK = 0,
    /* A required pointer is NULL, or a number is out of range. */
    ADVLOCK_EINVAL = -1,
    /* The lock key's bytes are not well-formed UTF-8. */
    ADVLOCK_EUTF8 = -2,
    /* The call is not allowed in the machine's current state. */
    ADVLOCK_EMISUSE = -3,
    /* libcrypto failed to compute SHA-256 (for example, out of memory). */
    ADVLOCK_ECRYPTO = -4,
    /* A driver could not allocate the memory the call needs (the core
     * never allocates). -11: the values in between are advlock_failure's. */
    ADVLOCK_ENOMEM = -11
} advlock_error;

/*
 * Why an operation ended ADVLOCK_FAILED (advlock_report.failure). These are
 * facts about the server and the connection, reported in an operation's
 * report; no function returns them. Their values never collide with
 * advlock_error's, so advlock_strerror() describes both.
 */
typedef enum advlock_failure {
    ADVLOCK_FAILURE_NONE = 0,
    /* The server answered SQL NULL where a boolean was required. */
    ADVLOCK_ENULL = -5,
    /* The server reported an error; the SQLSTATE says which. */
    ADVLOCK_ESERVER = -6,
    /* The connection to the server was lost; the session's locks are gone. */
    ADVLOCK_ECONNLOST = -7,
    /* The server is a hot standby (pg_is_in_recovery()): its advisory locks
     * exclude nobody on the primary. Nothing was locked. Only when the
     * driver told the machine its session (advlock_set_session()) and
     * options.allow_standby is 0. */
    ADVLOCK_ESTANDBY = -8,
    /* A statement of this connection reached a server session it did not
     * claim, or the server session check found the one it reached claimed
     * by another connection: a transaction-pooling proxy is in between, or
     * a session pool that does not reset sessions between clients; session
     * advisory locks need a direct connection or a session pool that resets
     * sessions. The statement that found it locked or unlocked
     * nothing; a lock taken earlier may be left on the other server session
     * (detail says when that is the case). See advlock_set_session(). */
    ADVLOCK_ESESSION = -9,
    /* A statement got no answer within the bound the driver sets (a stopped
     * backend, a hung server): the connection is unusable and must be
     * closed; closing it ends the server session and any lock it may have
     * taken. Set by drivers, never by the machine. */
    ADVLOCK_ENOANSWER = -10
} advlock_failure;

/*
 * Returns a static, human-readable description of an advlock_error or
 * advlock_failure value (or of 0). Unknown values give "unknown advlock
 * error". Never NULL.
 */
ADVLOCK_API const char *advlock_strerror(int error);

/*
 * Derives the 64-bit advisory-lock key for a lock name.
 *
 * lock_key, len: the name's bytes; len is explicit, so an embedded NUL byte
 *     is part of the name. lock_key may be NULL only when len is 0. The bytes
 *     are read during the call only.
 * key_out: receives the key: SHA-256 over "74726:" followed by the name's
 *     bytes, first 8 bytes of the digest read big-endian as a signed integer.
 *     Untouched on error.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL  lock_key is NULL with len > 0, or key_out is NULL;
 *     ADVLOCK_EUTF8   the bytes are not well-formed UTF-8 (truncated or
 *                     overlong sequences, surrogates U+D800..U+DFFF, code
 *                     points above U+10FFFF, stray continuation bytes);
 *     ADVLOCK_ECRYPTO libcrypto could not compute the digest.
 *
 * Thread-safe. The first call on each thread sets up a digest context that is
 * reused by later calls on that thread and freed when the thread exits.
 */
ADVLOCK_API int advlock_derive_key(const char *lock_key, size_t len, int64_t *key_out);

/*
 * Checks that len bytes at s form well-formed UTF-8 (Unicode 15, table 3-7).
 * Returns 1 if they do, 0 if not (also for s NULL with len > 0).
 */
ADVLOCK_API int advlock_utf8_valid(const char *s, size_t len);

/*
 * Every SQL statement advlock sends: a machine's, a lease's, the lock
 * sets' and the advlock command's own. Every parameter is a
 * bigint (int8, type OID 20), and advlock_sql_params() says how many a
 * statement takes; the action's param, param2 and param3 are their values.
 * $1 is the lock key, except for ADVLOCK_SQL_SESSION and the lease's rows
 * (26 to 28). The waiting statements (6 to 9, 16, 17, 24, 25) take $2: the
 * wait's bound in milliseconds, set as lock_timeout for the statement
 * alone. The guarded statements (12 to 17, 20 to 25, 28) take the
 * connection's session token last ($2, or $3 after a wait's bound): they
 * run their lock function (or the verify's look at pg_locks, or a
 * heartbeat) only on a server session this connection claimed (the
 * transaction-scoped 22 to 25 also on one that holds nothing of the key),
 * and answer NULL anywhere else (docs/design.md, "The
 * server session check").
 * advlock_sql_answer() says what a statement returns. Drivers may prepare
 * each statement once per connection, indexed by this identifier.
 */
typedef enum advlock_sql {
    ADVLOCK_SQL_TRY_LOCK = 0,             /* SELECT pg_try_advisory_lock($1) */
    ADVLOCK_SQL_UNLOCK = 1,               /* SELECT pg_advisory_unlock($1) */
    ADVLOCK_SQL_TRY_LOCK_SHARED = 2,      /* SELECT pg_try_advisory_lock_shared($1) */
    ADVLOCK_SQL_UNLOCK_SHARED = 3,        /* SELECT pg_advisory_unlock_shared($1) */
    ADVLOCK_SQL_TRY_XACT_LOCK = 4,        /* SELECT pg_try_advisory_xact_lock($1) */
    ADVLOCK_SQL_TRY_XACT_LOCK_SHARED = 5, /* SELECT pg_try_advisory_xact_lock_shared($1) */
    /* pg_advisory_lock($1) with lock_timeout = $2 ms, the caller's
     * lock_timeout put back after a grant (the text: advlock_sql_text()) */
    ADVLOCK_SQL_LOCK = 6,
    ADVLOCK_SQL_LOCK_SHARED = 7,      /* the same with pg_advisory_lock_shared */
    ADVLOCK_SQL_XACT_LOCK = 8,        /* the same with pg_advisory_xact_lock */
    ADVLOCK_SQL_XACT_LOCK_SHARED = 9, /* the same with pg_advisory_xact_lock_shared */
    ADVLOCK_SQL_HOLDERS = 10,         /* who holds and waits for key $1 */
    /* The server session's facts, once per connection: pg_backend_pid(),
     * pg_is_in_recovery(), and whether the session is this connection's:
     * $1 is the session token to claim it with, or 0 to claim nothing
     * (then the answer is true); $2 the pid the client was told at connect.
     * It also turns off the server's timeouts that would end a holder's
     * session, and fails (a server error naming the setting) where one
     * cannot be. The claim and the timeouts: docs/design.md. */
    ADVLOCK_SQL_SESSION = 11,
    /* The guarded forms of the session-scoped rows 0 to 3, 6 and 7. */
    ADVLOCK_SQL_TRY_LOCK_GUARDED = 12,
    ADVLOCK_SQL_UNLOCK_GUARDED = 13,
    ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED = 14,
    ADVLOCK_SQL_UNLOCK_SHARED_GUARDED = 15,
    ADVLOCK_SQL_LOCK_GUARDED = 16,
    ADVLOCK_SQL_LOCK_SHARED_GUARDED = 17,
    /* Does this server session hold key $1, granted, in this database:
     * exclusively (HELD) or shared (HELD_SHARED)? One boolean, from
     * pg_locks (advlock_start_verify_key()). */
    ADVLOCK_SQL_HELD = 18,
    ADVLOCK_SQL_HELD_SHARED = 19,
    /* Their guarded forms ($2 the token): NULL off the claimed session. */
    ADVLOCK_SQL_HELD_GUARDED = 20,
    ADVLOCK_SQL_HELD_SHARED_GUARDED = 21,
    /* The guarded forms of the transaction-scoped rows 4, 5, 8 and 9 ($2,
     * or $3 after a wait's bound, the token): they run their lock function
     * only on this connection's claimed server session or on one holding
     * no granted row of key $1, and answer NULL (busy: another client's
     * session-level hold is there) anywhere else. */
    ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED = 22,
    ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED = 23,
    ADVLOCK_SQL_XACT_LOCK_GUARDED = 24,
    ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED = 25,
    /* The lease's rows (advlock_lease_*). $1 is the plan's tcp_user_timeout
     * in ms (U). LEASE_SETUP sets, for the rest of the server session
     * (set_config(..., false)), tcp_user_timeout = U, tcp_keepalives_idle =
     * U/1000 - 2 s, tcp_keepalives_interval = 1 s, tcp_keepalives_count = 2
     * and client_connection_check_interval = 1 s, and answers TRUE when the
     * server applied them all, FALSE when it did not, NULL on a Unix socket
     * (no TCP settings there: the server reads them as 0). */
    ADVLOCK_SQL_LEASE_SETUP = 26,
    /* A heartbeat: TRUE while the server session still has tcp_user_timeout
     * = $1 (a rolled-back SET, RESET or another client's change answers
     * FALSE), and always on a Unix socket (which needs no setting). */
    ADVLOCK_SQL_HEARTBEAT = 27,
    /* Behind a proxy: TRUE on this connection's claimed server session ($2
     * the token; $1 is U, unused: SHOW there describes the proxy's hop),
     * NULL on any other. Guarded (advlock_sql_guarded()). */
    ADVLOCK_SQL_HEARTBEAT_GUARDED = 28,
    /* Fencing (options.fence): the exclusive try-locks 0 and 4 that, in the
     * same statement and only when granted, issue the key's next fencing
     * token (the counter advlock_fence_setup_sql() creates), with
     * synchronous_commit on for the statement's transaction. One row:
     * granted boolean, token bigint (NULL unless granted);
     * ADVLOCK_ANSWER_FENCED. docs/design.md, "Fencing tokens". */
    ADVLOCK_SQL_TRY_LOCK_FENCED = 29,
    ADVLOCK_SQL_TRY_XACT_LOCK_FENCED = 30,
    /* The server settings that size its shared lock table, no parameter:
     * one row of three bigints, max_locks_per_transaction, max_connections
     * and max_prepared_transactions (ADVLOCK_ANSWER_CAPACITY), for
     * advlock_capacity_init(). Read once per connection by the lock sets'
     * drivers and advlock run, never by a machine. */
    ADVLOCK_SQL_CAPACITY = 31,
    /* The rows below are the advlock command's own statements: no machine
     * or lease emits them, and drivers never prepare them. The rows without
     * parameters go as one simple query (advlock_pq_send_row()). */
    /* Behind a transaction pooler, a helper connection's hold of the server
     * session it was handed: a short pg_sleep (docs/operators.md, "PgBouncer
     * in transaction mode"), none on the session whose advlock.session is $1,
     * the token of the connection that claimed it. One row, one void column
     * (ADVLOCK_ANSWER_VOID). */
    ADVLOCK_SQL_OCCUPY = 32,
    /* Whether advlock_fence_setup_sql() has work to do, from the catalogs
     * any role may read (ADVLOCK_ANSWER_FENCE_INSTALLED). */
    ADVLOCK_SQL_FENCE_INSTALLED = 33,
    /* The script itself, as advlock_fence_setup_sql() returns it: one
     * simple query, so the server runs it in one implicit transaction
     * (ADVLOCK_ANSWER_COMMAND). */
    ADVLOCK_SQL_FENCE_SETUP = 34,
    /* The GRANT statements fencing tokens need that the connected role
     * lacks (ADVLOCK_ANSWER_FENCE_GRANTS). */
    ADVLOCK_SQL_FENCE_GRANTS = 35,
    /* The transaction advlock run --xact holds open around its command,
     * and CLOSE ALL, which drops the snapshot the acquire's unnamed portal
     * keeps (ADVLOCK_ANSWER_COMMAND each). */
    ADVLOCK_SQL_BEGIN = 36,
    ADVLOCK_SQL_CLOSE_ALL = 37,
    ADVLOCK_SQL_COMMIT = 38,
    ADVLOCK_SQL_ROLLBACK = 39,
    /* Lock-delay (options.lock_delay; docs/design.md, "Lock-delay"): the
     * engine's statements on the mark table advlock_fence_setup_sql()
     * creates, sent after a grant and before a release's unlock, never
     * prepared. Each answers one row of three bigints
     * (ADVLOCK_ANSWER_CAPACITY). $1 is the key, $2 this holder's token (the
     * connection's session token), $3 its stop bound U in ms. */
    /* Reads the key's mark and, only if no other token's is there, writes
     * ours, durably (synchronous_commit on): the other token or 0, its
     * stop bound or 0, 1 if ours was written. */
    ADVLOCK_SQL_MARK_TAKE = 40,
    /* Writes ours over whatever mark is there, durably: 0, 0, 1. */
    ADVLOCK_SQL_MARK_WRITE = 41,
    /* Deletes the key's mark if it is ours ($3 unused): 0, 0, rows
     * deleted. */
    ADVLOCK_SQL_MARK_CLEAR = 42,
    /* The advlock command's own: the grants lock-delay needs that the
     * connected role lacks (ADVLOCK_ANSWER_FENCE_GRANTS). */
    ADVLOCK_SQL_MARK_GRANTS = 43,
    /* The advlock command's own, for advlock status with no name: which of
     * the tables advlock.mark and advlock.fence exist and the connected
     * role may read (ADVLOCK_ANSWER_LOCKS_TABLES), from the catalogs any
     * role may read. */
    ADVLOCK_SQL_LOCKS_TABLES = 44,
    /* Every advisory lock of the current database, holders and waiters, in
     * one statement over pg_locks and pg_stat_activity (ADVLOCK_ANSWER_LOCKS),
     * PostgreSQL 14 or later. A query names only tables that exist, so there
     * are four forms: without either table, with advlock.mark (a holder's
     * time from lock-delay's mark), with advlock.fence (the key's token),
     * with both; LOCKS + 1 reads the mark, LOCKS + 2 the fence, as
     * ADVLOCK_SQL_LOCKS_TABLES's answer says they can be read. */
    ADVLOCK_SQL_LOCKS = 45,
    ADVLOCK_SQL_LOCKS_MARK = 46,
    ADVLOCK_SQL_LOCKS_FENCE = 47,
    ADVLOCK_SQL_LOCKS_MARK_FENCE = 48,
    ADVLOCK_SQL_COUNT = 49
} advlock_sql;

/* What a statement returns, and so which input reports its answer. */
typedef enum advlock_sql_answer_kind {
    /* One row, one boolean column: advlock_on_result() TRUE, FALSE or NULL. */
    ADVLOCK_ANSWER_BOOLEAN = 0,
    /* One row, one void column (the waiting lock functions): success is
     * reported as advlock_on_result() TRUE, a SQL NULL (a guarded wait
     * that did not run) as NULL. */
    ADVLOCK_ANSWER_VOID = 1,
    /* Rows of advlock_holder columns, in advlock_holders_column's order;
     * reported with advlock_on_holders(). */
    ADVLOCK_ANSWER_HOLDERS = 2,
    /* One row: pid int4, in_recovery bool, ours bool (ADVLOCK_SQL_SESSION);
     * reported with advlock_on_session(). */
    ADVLOCK_ANSWER_SESSION = 3,
    /* One row: granted bool, token int8 (the fenced try-locks); reported
     * with advlock_on_fenced() (a NULL granted with advlock_on_result()). */
    ADVLOCK_ANSWER_FENCED = 4,
    /* One row: three int8 (ADVLOCK_SQL_CAPACITY, the lock-delay mark
     * rows); read by the driver into advlock_answer.settings. */
    ADVLOCK_ANSWER_CAPACITY = 5,
    /* No rows: a command's completion (transaction control, the setup
     * script); read by the driver. */
    ADVLOCK_ANSWER_COMMAND = 6,
    /* One row: schema advlock exists bool, tables advlock.fence and
     * advlock.mark exist bool,
     * advlock.fence_ok(key bigint, token bigint)'s body text (NULL: no such
     * function); read by the driver. */
    ADVLOCK_ANSWER_FENCE_INSTALLED = 7,
    /* One row, one text column: the GRANT statements missing, separated by
     * spaces (NULL: none, or no schema); read by the driver. */
    ADVLOCK_ANSWER_FENCE_GRANTS = 8,
    /* One row: advlock.mark readable bool, advlock.fence readable bool
     * (ADVLOCK_SQL_LOCKS_TABLES); read by the driver. */
    ADVLOCK_ANSWER_LOCKS_TABLES = 9,
    /* Rows of advlock_locks_column columns (the ADVLOCK_SQL_LOCKS forms);
     * read by the driver. */
    ADVLOCK_ANSWER_LOCKS = 10
} advlock_sql_answer_kind;

/* The columns of ADVLOCK_SQL_HOLDERS's rows (ADVLOCK_ANSWER_HOLDERS), by
 * index: holders first (ORDER BY granted DESC), then waiters, each by pid. */
typedef enum advlock_holders_column {
    ADVLOCK_HOLDERS_PID = 0,         /* int4 */
    ADVLOCK_HOLDERS_GRANTED = 1,     /* bool: holds (true) or waits */
    ADVLOCK_HOLDERS_MODE = 2,        /* text: "ExclusiveLock", "ShareLock" */
    ADVLOCK_HOLDERS_APPLICATION = 3, /* text: application_name ('' unknown) */
    ADVLOCK_HOLDERS_CLIENT = 4,      /* text: client address, or "local" */
    ADVLOCK_HOLDERS_STATE = 5,       /* text: pg_stat_activity.state */
    ADVLOCK_HOLDERS_START = 6,       /* text: backend_start */
    ADVLOCK_HOLDERS_SECONDS = 7,     /* int8: held for (holder), waited for (waiter) */
    ADVLOCK_HOLDERS_COLUMNS = 8
} advlock_holders_column;

/* The columns of the ADVLOCK_SQL_LOCKS forms' rows (ADVLOCK_ANSWER_LOCKS),
 * by index. Rows of two kinds: first one per session of the database (key
 * NULL), ordered by pid, with PID and the session's facts (APPLICATION to
 * START); then one per pg_locks row (key set), ordered by key, the
 * two-int4 form after the bigint one, holders before waiters, then pid,
 * whose session's facts are NULL: they are on its session's row, if the
 * session is still there. Otherwise NULL is unknown (or, for the mark's
 * and the fence's columns, a form that does not read the table). */
typedef enum advlock_locks_column {
    ADVLOCK_LOCKS_KEY = 0,         /* int8: (classid << 32) | objid, signed */
    ADVLOCK_LOCKS_CLASSID = 1,     /* oid: pg_locks.classid */
    ADVLOCK_LOCKS_OBJID = 2,       /* oid: pg_locks.objid */
    ADVLOCK_LOCKS_PAIR = 3,        /* bool: the two-int4 form (objsubid 2), not a bigint key */
    ADVLOCK_LOCKS_PID = 4,         /* int4 */
    ADVLOCK_LOCKS_GRANTED = 5,     /* bool: holds (true) or waits */
    ADVLOCK_LOCKS_MODE = 6,        /* text: "ExclusiveLock", "ShareLock" */
    ADVLOCK_LOCKS_APPLICATION = 7, /* text: application_name ('' none) */
    ADVLOCK_LOCKS_CLIENT = 8,      /* text: client address, or "local" */
    ADVLOCK_LOCKS_STATE = 9,       /* text: pg_stat_activity.state ('' unknown) */
    ADVLOCK_LOCKS_START = 10,      /* text: backend_start ('' unknown) */
    ADVLOCK_LOCKS_WAITED = 11,     /* int8: a waiter's seconds since pg_locks.waitstart */
    ADVLOCK_LOCKS_HELD = 12,       /* int8: a holder's seconds since its lock-delay mark */
    ADVLOCK_LOCKS_HELD_SINCE = 13, /* text: that mark's time (ISO 8601, UTC) */
    ADVLOCK_LOCKS_TOKEN = 14,      /* int8: the key's last fencing token */
    ADVLOCK_LOCKS_COLUMNS = 15
} advlock_locks_column;

/*
 * Returns the constant SQL text of a statement, or NULL for an identifier
 * outside [0, ADVLOCK_SQL_COUNT). The text has static storage duration.
 */
ADVLOCK_API const char *advlock_sql_text(advlock_sql sql);

/* Returns what a statement returns (BOOLEAN for an unknown identifier). */
ADVLOCK_API advlock_sql_answer_kind advlock_sql_answer(advlock_sql sql);

/*
 * Returns the script that installs what fencing tokens and lock-delay
 * need: schema advlock, table advlock.fence (the counter, one row per
 * key), table advlock.mark (lock-delay's mark, one row per key) and function
 * advlock.fence_ok(key bigint, token bigint) (true iff no newer token than
 * token was issued for key). Idempotent; several statements, so run it with
 * a simple-query call (libpq: PQexec). The text of ADVLOCK_SQL_FENCE_SETUP.
 * Static storage, never NULL.
 * docs/operators.md prints it and the grants lock users need.
 */
ADVLOCK_API const char *advlock_fence_setup_sql(void);

/* Returns how many bigint parameters a statement takes (0 to 3; see
 * advlock_sql), 0 for an unknown identifier. */
ADVLOCK_API int advlock_sql_params(advlock_sql sql);

/* Returns 1 for the guarded statements (rows 12 to 17, 20 to 25, 28: they take
 * the session token and run their lock function only where it is safe: a
 * session-scoped row on the connection's claimed server session, a
 * transaction-scoped row where no other client holds the key; elsewhere
 * they answer NULL), 0 for every other identifier, unknown ones included. A driver
 * reads it to send a guarded statement as one message a proxy keeps on
 * one server session (never a named prepared statement). */
ADVLOCK_API int advlock_sql_guarded(advlock_sql sql);

/* The result of the outstanding query, as reported to advlock_on_result(). */
typedef enum advlock_result {
    ADVLOCK_RESULT_TRUE = 0,
    ADVLOCK_RESULT_FALSE = 1,
    ADVLOCK_RESULT_NULL = 2,           /* one row, one SQL NULL value */
    ADVLOCK_RESULT_SERVER_ERROR = 3,   /* the server rejected the query */
    ADVLOCK_RESULT_CONNECTION_LOST = 4 /* no answer will ever come */
} advlock_result;

/* How an operation ended. */
typedef enum advlock_outcome {
    ADVLOCK_ACQUIRED = 0,  /* the session now holds the lock */
    ADVLOCK_RELEASED = 1,  /* the session released one hold of the lock */
    ADVLOCK_NOT_HELD = 2,  /* release found no hold to release (not an error); a
                              verify found the lock not held (report sql says which) */
    ADVLOCK_TIMED_OUT = 3, /* the lock stayed busy until the timeout */
    ADVLOCK_CANCELLED = 4, /* the caller cancelled; no lock is held */
    ADVLOCK_FAILED = 5,    /* failure says why */
    /* Release of a transaction-scoped lock: nothing was sent; the lock is
     * released when the caller's transaction commits or rolls back. */
    ADVLOCK_ENDS_WITH_TRANSACTION = 6,
    /* A verify (advlock_start_verify_key()) found the session holding the
     * lock. A verify that finds it not held ends NOT_HELD. */
    ADVLOCK_HELD = 7,
    ADVLOCK_OUTCOME_COUNT = 8
} advlock_outcome;

/* Returns a static name for an outcome ("acquired", "timed out", ...). */
ADVLOCK_API const char *advlock_outcome_name(advlock_outcome outcome);

/* What an outcome adds to its plain meaning; advlock_describe() renders it. */
typedef enum advlock_detail {
    ADVLOCK_DETAIL_NONE = 0,
    /* ACQUIRED: the caller cancelled, but a transaction-scoped grant had
     * come; it is held until the transaction ends. */
    ADVLOCK_DETAIL_CANCEL_TOO_LATE = 1,
    /* FAILED while giving back a grant nobody wanted (the lock may still be
     * held): after the caller cancelled, */
    ADVLOCK_DETAIL_UNDO_CANCELLED = 2,
    /* after the deadline had passed, */
    ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE = 3,
    /* or after a server-side wait ended by an error that may hide a grant
     * (57014, a cancel; 55P03, its lock_timeout). */
    ADVLOCK_DETAIL_UNDO_AFTER_57014 = 4,
    /* TIMED_OUT with holder diagnostics: the holders query answered; the
     * report's holder fields say who holds the lock (pid 0: nobody now). */
    ADVLOCK_DETAIL_DIAGNOSED = 5,
    /* TIMED_OUT: the holders query failed (the timeout stands). */
    ADVLOCK_DETAIL_DIAGNOSIS_FAILED = 6,
    /* FAILED, set by drivers in their copy of an ACQUIRED report: the
     * session that held the lock is gone, and the lock with it. */
    ADVLOCK_DETAIL_LOST = 7,
    /* FAILED after a session-scoped fenced try failed on the server (its
     * error may come after the grant): one unlock was sent. If it failed
     * too, the lock may still be held; if it ran, it may have given back an
     * older hold of this session instead (a re-entrant acquire whose try
     * failed before its grant). Either way this session's holds of the key
     * are in doubt: close the connection. */
    ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR = 8
} advlock_detail;

/*
 * Returns 1 for the details an acquire ends with when its lock is left in
 * doubt: the give-back of a grant nobody wanted failed (UNDO_CANCELLED,
 * UNDO_AFTER_DEADLINE, UNDO_AFTER_57014), or a fenced try's server error
 * left this session's holds of the key in doubt (UNDO_AFTER_FENCE_ERROR).
 * The server session may still hold the lock: give it back (an unlock),
 * or close the connection. Returns 0 for every other value, unknown ones
 * included. Every driver and the command decide by this one list.
 */
ADVLOCK_API int advlock_detail_in_doubt(advlock_detail detail);

/* A holder's pg_stat_activity.state. */
typedef enum advlock_backend_state {
    ADVLOCK_BACKEND_UNKNOWN = 0, /* none, or a value this version does not know */
    ADVLOCK_BACKEND_ACTIVE = 1,
    ADVLOCK_BACKEND_IDLE = 2,
    ADVLOCK_BACKEND_IDLE_IN_TRANSACTION = 3,
    ADVLOCK_BACKEND_IDLE_IN_TRANSACTION_ABORTED = 4,
    ADVLOCK_BACKEND_FASTPATH = 5,
    ADVLOCK_BACKEND_DISABLED = 6
} advlock_backend_state;

/* Returns pg_stat_activity's word for a state ("idle", "idle in
 * transaction", ...), or "unknown". Static storage. */
ADVLOCK_API const char *advlock_backend_state_name(advlock_backend_state state);

/* Reads pg_stat_activity's word for a state (NULL: UNKNOWN). */
ADVLOCK_API advlock_backend_state advlock_backend_state_parse(const char *state);

/*
 * What an operation did and how it ended: facts, no sentences (render them
 * with advlock_describe()). A machine keeps one for its current or last
 * operation; it is live while the operation runs (key, timeout_ms and
 * attempts are set from the start) and final once the action is DONE.
 */
typedef struct advlock_report {
    advlock_outcome outcome; /* meaningful once the operation is DONE */
    int failure;             /* 0, or an advlock_failure when outcome is FAILED */
    advlock_sql sql;         /* the statement that failed (FAILED), else the last sent */
    advlock_detail detail;   /* what the outcome adds, or ADVLOCK_DETAIL_NONE */
    char sqlstate[6];        /* FAILED: the server's SQLSTATE ("57P01"), or "" */
    int64_t key;             /* the lock's key */
    int64_t timeout_ms;      /* the acquire's timeout (0 for a release) */
    int64_t elapsed_ms;      /* DONE: from the start to the end, on the caller's clock */
    uint64_t attempts;       /* lock queries sent so far (0 for a release) */
    /* DETAIL_DIAGNOSED: the first session holding the lock (pid 0: none). */
    int holder_pid;
    int other_holders;                  /* sessions holding it besides that one */
    int64_t holder_seconds;             /* how long it has held it, as far as the
                                           server knows: for an idle holder, since
                                           its last statement ended */
    advlock_backend_state holder_state; /* its pg_stat_activity state */
    char holder_application[64];        /* its application_name (cut), or "" */
    /* ACQUIRED by a fenced acquire (options.fence): the fencing token the
     * grant issued (>= 1, strictly above every token issued before for the
     * key); 0 otherwise. */
    int64_t fence;
} advlock_report;

/*
 * Renders a report as a sentence: the reference's exact messages where it
 * has them ("Could not acquire migration lock for '<name>' within 30s.",
 * "pg_try_advisory_lock for '<name>' returned null (expected boolean)."),
 * and sentences in the same style for everything else. ACQUIRED and
 * RELEASED render as "" (nothing to explain), unless a detail says more.
 * Seconds are written as the reference prints them, whatever the locale.
 *
 * name, len: the lock name the operation was started with (its key is the
 *     report's; a key-started operation's caller passes the name it knows).
 *     The name is shown as advlock_escape_name() shows it, into at most
 *     ADVLOCK_KEY_ECHO_MAX + 3 bytes. name may be NULL only when len is 0.
 * server_message: the server's or driver's words about a failure (the
 *     message given with the failing result), or NULL; its first line is
 *     quoted after the failure.
 * buf, size: where to write, like snprintf: at most size bytes including the
 *     terminating NUL; text that does not fit is cut at a UTF-8 character
 *     boundary and ends with "...". ADVLOCK_MESSAGE_MAX bytes always hold
 *     a whole message with a server message of up to 256 bytes.
 *
 * Returns the length written (not counting the NUL), or ADVLOCK_EINVAL (r
 * NULL, name NULL with len > 0, buf NULL with size > 0).
 */
ADVLOCK_API int advlock_describe(const advlock_report *r, const char *name, size_t len,
                                 const char *server_message, char *buf, size_t size);

/*
 * The sentence for a held lock lost because its lease ran out: "Lock
 * '<name>' lost: its lease ran out: <words>", words being the lease's
 * (advlock_member_words(), advlock_lease_say_expiry()). advlock_describe()'s
 * sentence for a loss says the connection closed; a lease that ran out
 * closed nothing, and the server may hold the lock yet. Written as
 * advlock_describe() writes (name escaped and cut alike, buf always a C
 * string). Returns the length written, or ADVLOCK_EINVAL (name NULL with
 * len > 0, buf NULL with size > 0).
 */
ADVLOCK_API int advlock_describe_lease_lost(const char *name, size_t len, const char *words,
                                            char *buf, size_t size);

/*
 * Writes a lock name as messages show it: one line of printable, valid
 * UTF-8, whatever the name holds. Control characters are escaped (NUL as
 * \0; tab, newline, carriage return as \t \n \r; other C0 controls and DEL
 * as \x1b; C1 controls as \u009b), and so are bytes that are not UTF-8
 * (\xff); everything else is copied. Text that does not fit in size bytes
 * (including the NUL) is cut at a character boundary and ends with "...".
 *
 * Returns the length written (not counting the NUL), or ADVLOCK_EINVAL
 * (name NULL with len > 0, buf NULL with size > 0).
 */
ADVLOCK_API int advlock_escape_name(const char *name, size_t len, char *buf, size_t size);

/*
 * Writes text as one JSON string (RFC 8259), quotes included, as the
 * command's JSON log and the simulator's trace write theirs: quotes and
 * backslashes escaped, newline and tab as \n and \t, other control
 * characters and DEL as \u00XX, and every byte that is not part of
 * well-formed UTF-8 as \ufffd, so that any bytes make a line that parses.
 * Into buf of size bytes, always NUL-terminated when size > 0; what does not
 * fit is left out whole (never half an escape or a character).
 *
 * Returns the length of the whole JSON string (not counting the NUL), which
 * exceeds size - 1 when it was cut (as snprintf: pass size 0 to measure),
 * or ADVLOCK_EINVAL (text NULL, buf NULL with size > 0, or a text too long
 * for an int).
 */
ADVLOCK_API int advlock_json_string(const char *text, char *buf, size_t size);

/* Message sizes: see advlock_describe(). A name is shown whole when its
 * escaped form fits in ADVLOCK_KEY_ECHO_MAX + 3 bytes, else cut to at most
 * ADVLOCK_KEY_ECHO_MAX bytes followed by "...". */
#define ADVLOCK_KEY_ECHO_MAX 512
#define ADVLOCK_MESSAGE_MAX  1024

/* What the driver must do next. */
typedef enum advlock_action_kind {
    /* No operation: the machine is new; start one. */
    ADVLOCK_ACTION_NONE = 0,
    /* Run sql with param (and param2, for the statements that take it),
     * then report its result with advlock_on_result(). */
    ADVLOCK_ACTION_QUERY = 1,
    /* Wait until wake_at_ms, then call advlock_on_timer(). */
    ADVLOCK_ACTION_SLEEP = 2,
    /* The operation ended; report says how. Start another or stop. */
    ADVLOCK_ACTION_DONE = 3,
    /* Ask the server to cancel the query in flight (libpq: PQcancel or
     * PQcancelStart), call advlock_on_cancel_sent(), then keep waiting for
     * the query's result as before. Only with ADVLOCK_WAIT_SERVER. */
    ADVLOCK_ACTION_CANCEL_QUERY = 4
} advlock_action_kind;

/*
 * The next action. Fields are meaningful only for the kind that names them.
 * The report pointer points into the machine: it stays valid until the
 * machine next changes (any successful input, or init) or is freed.
 */
typedef struct advlock_action {
    advlock_action_kind kind;

    /* QUERY (and CANCEL_QUERY: the query in flight) */
    advlock_sql sql;      /* which statement, for drivers that prepare them */
    const char *sql_text; /* its text, as advlock_sql_text(sql) */
    /* The values of $1, $2 and $3, as many as advlock_sql_params(sql) says
     * (the others are 0): the lock key ($1; the session token or 0 for
     * ADVLOCK_SQL_SESSION, whose $2 is the client's pid), a server-side
     * wait's bound in ms (1 to INT32_MAX), and the session token for the
     * guarded statements. */
    int64_t param;
    int64_t param2;
    int64_t param3;

    /* SLEEP: when to call advlock_on_timer(). QUERY: when to call it if the
     * query has not answered by then (INT64_MAX: no such deadline; only a
     * server-side wait has one). */
    int64_t wake_at_ms; /* absolute deadline on the caller's clock */
    int64_t sleep_ms;   /* SLEEP: the length the schedule chose */

    /* Every kind but NONE: the operation's report, final when DONE (the one
     * place an outcome is read). NULL for NONE. */
    const advlock_report *report;
} advlock_action;

/* ---- options ------------------------------------------------------------- */

/* Sleep schedules between polling attempts. */
typedef enum advlock_backoff {
    /* The reference: 100, 200, 400, 800, 1000, 1000, ... ms. */
    ADVLOCK_BACKOFF_REFERENCE = 0,
    /* Full jitter: sleep n (from 0) is drawn uniformly from
     * [0, min(1000, 100 * 2^n)] ms, so clients that started together stop
     * retrying in lockstep. Always clipped to the deadline. */
    ADVLOCK_BACKOFF_FULL_JITTER = 1
} advlock_backoff;

/* How an acquire waits for a busy lock. */
typedef enum advlock_wait {
    /* Poll with pg_try_advisory_lock and sleep between tries (the reference). */
    ADVLOCK_WAIT_POLL = 0,
    /* Try once (the try-lock polling uses); if the lock is busy, let the
     * server queue the session in pg_advisory_lock, bounded by lock_timeout
     * set to the time left (ADVLOCK_SQL_LOCK's $2): the lock is handed over
     * in one round trip, and the server itself ends the wait at the
     * deadline (55P03), with no cancel request. Only if no answer has come
     * ADVLOCK_WAIT_GRACE_MS after the deadline (the statement is stuck
     * before its wait began), or when the caller cancels, does the machine
     * ask for a cancel (CANCEL_QUERY).
     *
     * PostgreSQL can grant the lock in the instant a cancel or lock_timeout
     * ends the statement and report the error all the same, so after a
     * 57014 or 55P03 a session lock is unlocked once. That unlock can only
     * give back this wait's grant: the wait starts only after a try-lock in
     * the same mode answered false, which it never does for a session that
     * already holds the lock in that mode (a re-entrant acquire is granted
     * by the try). So a timed-out or cancelled wait neither leaves a lock
     * behind nor releases an older hold, re-entrant acquires included.
     * A session waiting inside pg_advisory_lock can deadlock with CREATE
     * INDEX CONCURRENTLY and holds a backend busy while it waits; see
     * docs/design.md. */
    ADVLOCK_WAIT_SERVER = 1
} advlock_wait;

typedef enum advlock_mode {
    ADVLOCK_EXCLUSIVE = 0, /* conflicts with every other session's hold */
    ADVLOCK_SHARED = 1     /* conflicts only with exclusive holds */
} advlock_mode;

typedef enum advlock_scope {
    /* Held until released or until the session ends (the reference). */
    ADVLOCK_SESSION = 0,
    /* Held until the caller's transaction ends; cannot be released earlier.
     * Take it inside a transaction block, or it ends with the statement. */
    ADVLOCK_TRANSACTION = 1
} advlock_scope;

/* What an event reports. */
typedef enum advlock_event_kind {
    ADVLOCK_EVENT_ATTEMPT = 0,      /* a lock query goes out (report->attempts) */
    ADVLOCK_EVENT_RESULT = 1,       /* its answer came: result */
    ADVLOCK_EVENT_SLEEP = 2,        /* a sleep starts: sleep_ms */
    ADVLOCK_EVENT_CANCEL_QUERY = 3, /* the machine asks to cancel the query */
    ADVLOCK_EVENT_DONE = 4,         /* the operation ended: report */
    ADVLOCK_EVENT_LOST = 5,         /* drivers: the session holding locks is gone */
    ADVLOCK_EVENT_WARNING = 6       /* drivers: the server sent a warning: message */
} advlock_event_kind;

typedef struct advlock_event {
    advlock_event_kind kind;
    int64_t now_ms;
    /* The operation's report (key, attempts so far; final for DONE). Valid
     * during the call. */
    const advlock_report *report;
    advlock_result result; /* RESULT */
    int64_t sleep_ms;      /* SLEEP */
    /* RESULT: the server's words with a failing result; LOST, WARNING: the
     * driver's or server's words; "" otherwise. Valid during the call. */
    const char *message;
} advlock_event;

/*
 * Receives events as they happen. Called from inside the machine's input
 * functions (or a driver's calls): it must not call back into the machine.
 */
typedef void (*advlock_event_fn)(void *user, const advlock_event *event);

/*
 * Options for the operations a machine runs. advlock_options_init() gives
 * the reference behaviour; every other value is something a user turns on.
 */
typedef struct advlock_options {
    advlock_mode mode;
    advlock_scope scope;
    advlock_wait wait;
    advlock_backoff backoff;
    /* Reference schedule only (jitter always clips): make the last sleep end
     * at the deadline, so the final attempt happens at the timeout rather
     * than up to a second after it. Off by default, as in the reference. */
    int clip_to_deadline;
    /* After TIMED_OUT, one more query (ADVLOCK_SQL_HOLDERS) finds who holds
     * the lock; the report then names the holder. */
    int diagnose;
    /* Acquire on a hot standby too. Its locks exclude only other sessions
     * of that standby, never the primary's; off by default, when such an
     * acquire ends FAILED with ADVLOCK_ESTANDBY (see advlock_set_session()). */
    int allow_standby;
    /* Randomness for jitter: random(random_user) if random is set, else the
     * machine's own generator (splitmix64) seeded with jitter_seed, so a
     * seed replays the same sleeps. The machine has no entropy of its own
     * (it performs no I/O): given jitter_seed 0 and no random, it draws
     * from seed 0 like any other seed. Drivers must not pass that on from a
     * caller who asked for nothing: full jitter with jitter_seed 0 and no
     * random means "random", and a driver seeds the machine from the
     * operating system's entropy when the options are set (the libpq
     * adapters use getrandom(2)), so that clients started together do not
     * draw the same sleeps. Any other seed replays exactly, in every
     * driver. */
    uint64_t jitter_seed;
    uint64_t (*random)(void *random_user);
    void *random_user;
    /* Optional; see advlock_event_fn. */
    advlock_event_fn on_event;
    void *event_user;
    /* For drivers that hold locks over a connection (the libpq adapter):
     * a lease of lease_ms (0: none; see "Leases" below) whose holder takes
     * up to lease_stop_ms to stop its work. The machine itself keeps no
     * lease; advlock_set_options() refuses (ADVLOCK_EINVAL) a pair that
     * advlock_lease_plan_init() refuses. */
    int64_t lease_ms;
    int64_t lease_stop_ms;
    /* Issue a fencing token with every grant (report.fence): the try-lock
     * becomes ADVLOCK_SQL_TRY_LOCK_FENCED (or its transaction form), which
     * needs the schema advlock_fence_setup_sql() installs and costs one
     * durable write per acquisition. Exclusive locks only, and polling
     * only: advlock_set_options() refuses fence with ADVLOCK_SHARED or
     * ADVLOCK_WAIT_SERVER (ADVLOCK_EINVAL). Needs a direct connection: a
     * fenced acquire behind a proxy ends FAILED with ADVLOCK_ESESSION,
     * nothing sent. A server error from a session-scoped fenced try
     * (after which the lock may be held) is followed by one unlock before
     * the acquire ends FAILED (ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR). */
    int fence;
    /* Lock-delay (docs/design.md, "Lock-delay"), for the connection engine
     * under its lease (advlock_conn_set_lease()): a grant is reported
     * ACQUIRED only once this holder's mark (its token and stop bound) is
     * durably in advlock.mark, the table advlock_fence_setup_sql()
     * creates, and, where the mark of a holder that never released was
     * there, once that holder's stop bound plus ADVLOCK_LEASE_MARGIN_MS
     * has passed since the grant (counted against the timeout). A release
     * clears the mark before its unlock. Costs one durable write per
     * acquisition and one per release. Exclusive session locks only:
     * advlock_set_options() refuses it with ADVLOCK_SHARED or
     * ADVLOCK_TRANSACTION (ADVLOCK_EINVAL: a transaction's mark would
     * commit or roll back with the caller's transaction), and the engine
     * refuses it on a connection without a lease (ADVLOCK_EINVAL: a holder
     * with no stop bound leaves nothing to wait out). */
    int lock_delay;
} advlock_options;

/* Fills o with the reference behaviour (all zero). No-op for NULL. */
ADVLOCK_API void advlock_options_init(advlock_options *o);

/* One row of ADVLOCK_SQL_HOLDERS, as a driver read it. Strings may be NULL. */
typedef struct advlock_holder {
    int pid;
    int granted;      /* 1: holds the lock; 0: waits for it */
    const char *mode; /* "ExclusiveLock", "ShareLock" */
    const char *application_name;
    const char *client; /* address, or "local" */
    const char *state;  /* "idle", "active", ... */
    const char *backend_start;
    int64_t seconds; /* held (holder) or waited (waiter) */
} advlock_holder;

/*
 * What a driver knows of one connection's server session: a small value,
 * owned and stored by the caller (one per connection), copied into a
 * machine for its operations (advlock_set_session()) and back out of it
 * (advlock_get_session()), as BearSSL's br_ssl_session_parameters are.
 * advlock_session_init() sets a fresh value; the machine fills in the
 * facts when the session row (ADVLOCK_SQL_SESSION) answers. Drivers read
 * the fields; only advlock_session_init() and the machine write them.
 * It holds no pointers: copy it freely.
 */
typedef struct advlock_session {
    /* Claims server sessions behind a proxy: nonzero, drawn at random per
     * connection (64 bits) so that no other client shares it. */
    uint64_t token;
    /* The process id the server announced when the connection was made
     * (libpq: PQbackendPID(); asyncpg: get_server_pid(); psycopg:
     * info.backend_pid), or 0 if unknown. A pooling proxy announces a
     * number of its own, which is how the check tells it is there. */
    int32_t client_pid;
    /* The facts, each 0 or 1; all 0 until the session row answered. */
    uint8_t checked; /* the session row answered: the facts below are known */
    uint8_t proxied; /* the server session's pid is not client_pid (or either
                        is 0): a proxy is in between, and session-scoped
                        statements go in their guarded forms, which a
                        driver must not send as named prepared statements */
    uint8_t claimed; /* the server session is this token's (always 1 direct) */
    uint8_t standby; /* the server is in recovery (pg_is_in_recovery()) */
    /* the row asked for the claim (a session-scoped operation's row does; a
     * transaction-scoped one claims nothing, and a later session-scoped
     * operation behind a proxy then asks once): claimed is its answer */
    uint8_t claim_asked;
} advlock_session;

/*
 * Sets *s to a fresh, unchecked value for a connection: its announced
 * client_pid (0 if unknown) and its token. Draw a new token for every
 * connection, a reconnect included. Returns 0, or ADVLOCK_EINVAL (s NULL,
 * token 0; *s is then untouched).
 */
ADVLOCK_API int advlock_session_init(advlock_session *s, int client_pid, uint64_t token);

/* The size of an advlock_machine where pointers are 8 bytes (at most this
 * where they are smaller): asserted where the machine is built
 * (src/core/machine.c), so this is the one place the figure is written. */
#define ADVLOCK_MACHINE_SIZE 264

/*
 * A lock machine: ADVLOCK_MACHINE_SIZE bytes. Allocate it anywhere (stack,
 * static, inside your own struct); it holds no pointers into itself, so it
 * may be copied or moved at any time (the copy shares the options'
 * callbacks). It keeps facts only: no name, no text. Its fields are
 * private: use the functions below.
 */
typedef struct advlock_machine {
    /* The options, kept compactly (advlock_set_options). */
    uint64_t jitter_state_;
    uint64_t (*random_)(void *random_user);
    void *random_user_;
    advlock_event_fn on_event_;
    void *event_user_;
    advlock_report report_;
    int64_t start_ms_;
    int64_t now_ms_;
    int64_t wake_at_ms_;
    advlock_session session_; /* advlock_set_session's copy; token 0: not told */
    int32_t span_ms_;         /* SLEEP: its length; a server-side wait: its bound */
    int32_t next_delay_ms_;
    uint8_t mode_;
    uint8_t scope_;
    uint8_t wait_;
    uint8_t backoff_;
    uint8_t option_flags_; /* clip_to_deadline, diagnose, allow_standby, fence, lock_delay */
    uint8_t state_;
    uint8_t op_;
    uint8_t step_;
    uint8_t cancel_;
    uint8_t deadline_passed_;
    uint8_t fail_after_undo_;
    uint8_t undo_reason_; /* the advlock_detail an undo that fails in doubt reports */
} advlock_machine;

/* How long after its deadline a server-side wait that has not answered is
 * asked to stop with a cancel request: the server's own lock_timeout should
 * have ended it by then. */
#define ADVLOCK_WAIT_GRACE_MS 500

/* How long a guarded release or verify that keeps reaching server sessions
 * other than the claimed one (busy with another client's transaction) goes
 * on trying, on the acquire's backoff schedule (tries after 100, 200, 400
 * and 800 ms), before it ends FAILED with ADVLOCK_ESESSION (a release's lock may be
 * left on the claimed session). Short, because a claimed session that is
 * gone (closed by the proxy or an administrator) answers just as a busy one
 * does, and a verify must say so promptly. */
#define ADVLOCK_GUARD_RETRY_MS 1500

/* Puts a machine into its initial state (action NONE) with the reference
 * options. Cannot fail. */
ADVLOCK_API void advlock_machine_init(advlock_machine *m);

/*
 * Sets the options for the operations started from now on; o is copied.
 * Returns 0, or ADVLOCK_EINVAL (m or o NULL, a value outside its enum, a
 * lease pair advlock_lease_plan_init() refuses) or ADVLOCK_EMISUSE (an
 * operation is under way: options apply from its start to its end).
 */
ADVLOCK_API int advlock_set_options(advlock_machine *m, const advlock_options *o);

/*
 * Hands a connection's session value to the machine for the operations
 * started from now on (*s is copied in); the machine updates its copy when
 * the session row answers, and advlock_get_session() copies it back out.
 * Call it before every operation (or at least whenever the connection, or
 * the value, changed). Without it the machine never checks, and sends the
 * plain statements only (the reference's behaviour).
 *
 * The first operation given an unchecked value (checked 0) starts with one
 * ADVLOCK_SQL_SESSION query (a round trip once per connection, not per
 * operation, as long as the driver keeps the checked value): it refuses an
 * acquire on a standby (ADVLOCK_ESTANDBY, unless options.allow_standby),
 * and behind a proxy claims the server session, after which the lock
 * statements go in their guarded forms and a session-scoped operation
 * that cannot reach its claimed session ends FAILED with ADVLOCK_ESESSION.
 * docs/design.md, "The server session check", explains the claim, the
 * guards, each failure and the limits. A token names one connection: give
 * every machine on a connection the checked value (or a value of its own
 * token), never one token to two checks.
 *
 * Returns 0, or ADVLOCK_EINVAL (m or s NULL, token 0, a fact other than 0
 * or 1) or ADVLOCK_EMISUSE (an operation is under way).
 */
ADVLOCK_API int advlock_set_session(advlock_machine *m, const advlock_session *s);

/*
 * Copies the machine's session value into *out: the one advlock_set_session()
 * gave, with what the session row found since. A driver copies it out once
 * the row has answered (or when the operation is DONE) and hands it to the
 * next machine on the same connection, which then sends no session row.
 * A machine never told its session gives a value with token 0. Returns 0,
 * or ADVLOCK_EINVAL (m or out NULL).
 */
ADVLOCK_API int advlock_get_session(const advlock_machine *m, advlock_session *out);

/*
 * Starts acquiring a lock, exactly as the reference does: try at once; on
 * false, if at least timeout_ms has passed since the start, end TIMED_OUT;
 * otherwise sleep 100, 200, 400, 800, 1000, 1000, ... ms and try again.
 * timeout_ms 0 means exactly one attempt. The options (advlock_set_options)
 * choose the mode, scope, schedule and waiting strategy; with
 * ADVLOCK_WAIT_SERVER a busy first try is followed by one waiting query
 * that the server bounds with lock_timeout (see advlock_wait): its 55P03
 * ends TIMED_OUT, once a session lock the error may hide is given back.
 *
 * lock_key, len: as for advlock_derive_key(); read during the call only
 *     (the key is derived here; the machine keeps no copy of the name).
 * now_ms: the caller's monotonic time in milliseconds.
 *
 * On success the next action is QUERY (try-lock). Returns 0, or:
 *     ADVLOCK_EINVAL   m NULL, lock_key NULL with len > 0, timeout_ms < 0;
 *     ADVLOCK_EUTF8    the name is not well-formed UTF-8;
 *     ADVLOCK_ECRYPTO  the key could not be derived;
 *     ADVLOCK_EMISUSE  an operation is under way (action QUERY or SLEEP).
 */
ADVLOCK_API int advlock_start_acquire(advlock_machine *m, const char *lock_key, size_t len,
                                      int64_t timeout_ms, int64_t now_ms);

/*
 * As advlock_start_acquire(), for a key already derived (advlock_derive_key()
 * or a report's key): no hashing. Returns 0, or ADVLOCK_EINVAL (m NULL,
 * timeout_ms < 0) or ADVLOCK_EMISUSE.
 */
ADVLOCK_API int advlock_start_acquire_key(advlock_machine *m, int64_t key, int64_t timeout_ms,
                                          int64_t now_ms);

/*
 * Starts releasing one hold of a lock: QUERY unlock (pg_advisory_unlock, or
 * pg_advisory_unlock_shared for ADVLOCK_SHARED); true ends RELEASED, false or
 * NULL ends NOT_HELD. Behind a proxy the guarded unlock's NULL (it reached
 * another server session) is followed by a SLEEP on the backoff schedule and
 * the unlock again, until ADVLOCK_GUARD_RETRY_MS after the start; then it
 * ends FAILED with ADVLOCK_ESESSION (advlock_cancel() during such a SLEEP
 * ends it so at once). For ADVLOCK_TRANSACTION scope nothing can be unlocked:
 * the operation ends at once ENDS_WITH_TRANSACTION. Arguments and errors as
 * for advlock_start_acquire() (without the timeout).
 */
ADVLOCK_API int advlock_start_release(advlock_machine *m, const char *lock_key, size_t len,
                                      int64_t now_ms);

/*
 * As advlock_start_release(), for a key already derived: releasing what an
 * acquire took costs no second hash (pass its report's key). Returns 0, or
 * ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE.
 */
ADVLOCK_API int advlock_start_release_key(advlock_machine *m, int64_t key, int64_t now_ms);

/*
 * Starts a verify: one statement asks whether this server session still
 * holds the lock key in the options' mode (ADVLOCK_SQL_HELD or
 * HELD_SHARED, read from pg_locks; either scope, so a transaction-scoped
 * lock can be verified too). For a lock held while work goes on where
 * nothing would tell its loss: behind a transaction-pooling proxy the
 * server session holding a session lock sits in the pool, and the proxy
 * or an administrator may close it (the lock goes with it) while the
 * client's own connection stays up. The session check (advlock_set_session())
 * precedes it like any operation's first statement; behind a proxy the
 * guarded form runs, only on the server session this connection claimed.
 * Ends
 *   HELD      the session holds the lock;
 *   NOT_HELD  it does not (any more): advlock_describe() says "Lock
 *             '<name>' is no longer held by this session.";
 *   FAILED    ADVLOCK_ESESSION behind a proxy when the statement kept
 *             reaching server sessions this connection did not claim (the
 *             claimed one is gone, or busy with another client: whether the
 *             lock is held cannot be told); each such answer is followed by
 *             a SLEEP on the backoff schedule and the statement again, until
 *             ADVLOCK_GUARD_RETRY_MS after the start; or at once, nothing
 *             sent, when the claim was refused; or as any statement fails
 *             (ESERVER, ECONNLOST, ENULL).
 * A verify changes no lock. Its statement cannot be cancelled (it always
 * ends on its own); advlock_cancel() during its SLEEP ends it FAILED with
 * ADVLOCK_ESESSION.
 *
 * key: the lock's key (advlock_derive_key(), or the acquire's report key).
 * now_ms: the caller's monotonic time.
 *
 * On success the next action is QUERY (or DONE, refused at once). Returns
 * 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (an operation is under
 * way).
 */
ADVLOCK_API int advlock_start_verify_key(advlock_machine *m, int64_t key, int64_t now_ms);

/*
 * Reports the result of the outstanding query.
 *
 * sqlstate: the server's SQLSTATE for SERVER_ERROR or CONNECTION_LOST, or
 *     NULL; only a 5-character code of digits and capital letters is kept.
 * message: the server's or driver's words, or NULL: passed on to the event
 *     callback (RESULT) and not kept; a driver keeps them to give
 *     advlock_describe() if the operation fails.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL   m NULL or result not an advlock_result value;
 *     ADVLOCK_EMISUSE  no query is outstanding (action is not QUERY), or
 *                      its answer is rows (the holders query's come with
 *                      advlock_on_holders(), the session query's with
 *                      advlock_on_session(), a fenced row's with
 *                      advlock_on_fenced()) and result is TRUE or FALSE
 *                      (a fenced row's NULL granted is reported here).
 */
ADVLOCK_API int advlock_on_result(advlock_machine *m, advlock_result result, const char *sqlstate,
                                  const char *message, int64_t now_ms);

/*
 * Reports that the cancel request asked for by a CANCEL_QUERY action was
 * sent (or could not be: the query's answer will come either way). The
 * action goes back to QUERY, waiting for the answer, with wake_at_ms 250 ms
 * ahead: PostgreSQL ignores a cancel that overtakes its statement, so until
 * the answer comes, the timer asks for the cancel again.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (the action is
 * not CANCEL_QUERY).
 */
ADVLOCK_API int advlock_on_cancel_sent(advlock_machine *m, int64_t now_ms);

/*
 * Reports the rows of an ADVLOCK_SQL_HOLDERS query (any order; n may be 0).
 * The strings are read during the call only. A failed holders query is
 * reported with advlock_on_result() as usual: the operation still ends
 * TIMED_OUT, with ADVLOCK_DETAIL_DIAGNOSIS_FAILED.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL, rows NULL with n > 0) or
 * ADVLOCK_EMISUSE (the outstanding query is not ADVLOCK_SQL_HOLDERS).
 */
ADVLOCK_API int advlock_on_holders(advlock_machine *m, const advlock_holder *rows, size_t n,
                                   int64_t now_ms);

/*
 * Reports the row of an ADVLOCK_SQL_SESSION query: the server session's
 * pg_backend_pid(), its pg_is_in_recovery(), and whether it is this
 * connection's (its third column). A failed session query is reported with
 * advlock_on_result() as usual: the operation ends FAILED.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (the
 * outstanding query is not ADVLOCK_SQL_SESSION).
 */
ADVLOCK_API int advlock_on_session(advlock_machine *m, int server_pid, int in_recovery, int ours,
                                   int64_t now_ms);

/*
 * Reports the row of a fenced try-lock (ADVLOCK_ANSWER_FENCED): granted 1
 * with the token the grant issued, or granted 0 (busy; token ignored). A
 * NULL granted is reported with advlock_on_result(ADVLOCK_RESULT_NULL), a
 * failure with advlock_on_result() as usual. A grant ends ACQUIRED with
 * report.fence = token (or is undone like any unwanted grant).
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL, granted neither 0 nor 1, granted
 * with token < 1) or ADVLOCK_EMISUSE (the outstanding query is not a
 * fenced row).
 */
ADVLOCK_API int advlock_on_fenced(advlock_machine *m, int granted, int64_t token, int64_t now_ms);

/*
 * For drivers: reports an event the machine cannot see (ADVLOCK_EVENT_LOST,
 * ADVLOCK_EVENT_WARNING) to the machine's event callback, with the report of
 * its current or last operation. message may be NULL. No-op without a
 * callback or for m NULL.
 */
ADVLOCK_API void advlock_notify(const advlock_machine *m, advlock_event_kind kind,
                                const char *message, int64_t now_ms);

/*
 * Tells the machine its timer may have expired. During a SLEEP whose
 * wake_at_ms has come, the next action becomes QUERY; during a server-side
 * wait whose wake_at_ms has come (the deadline plus ADVLOCK_WAIT_GRACE_MS,
 * or a cancel to repeat), CANCEL_QUERY. An early call, or a call while
 * any other query is outstanding, changes nothing and returns 0.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (no operation is
 * under way: action NONE or DONE).
 */
ADVLOCK_API int advlock_on_timer(advlock_machine *m, int64_t now_ms);

/*
 * Cancels an acquire. During a SLEEP it ends CANCELLED at once. While the
 * try-lock query is outstanding the machine waits for its result (during a
 * server-side wait it first asks for the query to be cancelled:
 * CANCEL_QUERY): if the server granted the lock, the next action is an
 * unlock query, and the operation ends CANCELLED once that answers, so a
 * cancelled acquire never leaves the session holding a lock nobody knows
 * about. (The reference implementation, cancelled at that moment, keeps the
 * lock.) A transaction-scoped grant cannot be undone: it ends ACQUIRED with
 * ADVLOCK_DETAIL_CANCEL_TOO_LATE. A server error or lost connection in the
 * meantime still ends FAILED. Cancelling twice is harmless.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (no acquire is
 * under way: action NONE or DONE, or a release's or verify's query, which
 * always ends on its own; one sleeping between guarded statements ends
 * FAILED with ADVLOCK_ESESSION, as its bound would have ended it).
 */
ADVLOCK_API int advlock_cancel(advlock_machine *m, int64_t now_ms);

/*
 * Returns the machine's next action, by value (its report pointer points
 * into the machine). For m NULL, returns an action of kind NONE.
 */
ADVLOCK_API advlock_action advlock_next_action(const advlock_machine *m);

/*
 * Writes a millisecond duration as seconds the way the reference prints a
 * TimeSpan's TotalSeconds: no trailing zeros, '.' as the decimal separator
 * whatever the locale (30000 -> "30", 500 -> "0.5", 1250 -> "1.25").
 * Writes at most size bytes including the terminating NUL, like snprintf,
 * and returns the length the full text needs, or ADVLOCK_EINVAL for buf
 * NULL with size > 0 or a negative ms.
 */
ADVLOCK_API int advlock_format_seconds(int64_t ms, char *buf, size_t size);

/* ---- Leases ---------------------------------------------------------------
 *
 * A lease bounds, in time, what a silent network partition (no FIN, no RST)
 * does to a held session lock: the server frees the lock within lease_ms of
 * the last message it received from the holder (the release bound), and
 * the holder learns that it can no longer prove it holds the lock, and
 * stops its work, strictly before the server could free it (the stop
 * bound). docs/design.md "Leases" gives the arithmetic and the measurements
 * behind it; this section is the sans-I/O engine that keeps it: a plan (the
 * numbers), then an advlock_lease per held connection, driven like the
 * machine (time in, actions out).
 */

/* Allowances the plan is made from (ms): the server's timers fire up to
 * ~0.75 s late and its first retransmission comes ~0.4 s after an
 * unacknowledged answer, plus headroom for the round trip; the holder's
 * margin covers reaping its command after SIGKILL; a heartbeat needs at
 * least ADVLOCK_LEASE_MIN_DEADLINE_MS to be sent and answered. */
#define ADVLOCK_LEASE_SERVER_SLACK_MS 3000
#define ADVLOCK_LEASE_MARGIN_MS       1000
#define ADVLOCK_LEASE_MIN_DEADLINE_MS 2000
/* The longest lease a plan accepts (9 h): Linux takes tcp_keepalives_idle
 * (U/1000 - 2) up to 32767 s, and a server that cannot apply the plan
 * would fail the setup instead. */
#define ADVLOCK_LEASE_MAX_MS 32400000
/* The default lease of drivers that run one by default (advlock run,
 * Python): short enough that a cut-off holder's lock is free within it,
 * long enough to ride out blips of about 6 s. */
#define ADVLOCK_LEASE_DEFAULT_MS 30000

/*
 * The numbers of one lease, all derived from the lease L and the longest
 * time the holder's stop takes, K (for advlock run: --kill-after):
 *
 *   U = L - ADVLOCK_LEASE_SERVER_SLACK_MS, whole seconds   tcp_user_timeout
 *   I = U - 2 s, V = 1 s, C = 2                            tcp_keepalives_*
 *   check_interval = 1 s                     client_connection_check_interval
 *   D = U - K - ADVLOCK_LEASE_MARGIN_MS     from a heartbeat's send to the stop
 *   H = D / 4                                        between heartbeats
 *
 * so that D + K + margin <= U <= (the earliest the server can free the
 * lock, counted from the send of the last heartbeat it answered), and the
 * server frees it by U + ~0.75 s (+ 1 s inside a statement) < L.
 */
typedef struct advlock_lease_plan {
    int64_t lease_ms;              /* L */
    int64_t stop_ms;               /* K */
    int32_t user_timeout_ms;       /* U */
    int32_t keepalives_idle_s;     /* I */
    int32_t keepalives_interval_s; /* V */
    int32_t keepalives_count;      /* C */
    int32_t check_interval_ms;     /* client_connection_check_interval */
    int64_t deadline_ms;           /* D */
    int64_t heartbeat_ms;          /* H */
} advlock_lease_plan;

/*
 * Makes the plan for a lease of lease_ms whose holder takes up to stop_ms
 * to stop its work. Returns 0, or ADVLOCK_EINVAL (p NULL; lease_ms above
 * ADVLOCK_LEASE_MAX_MS; stop_ms negative; or a lease too short for stop_ms:
 * it must leave D >= ADVLOCK_LEASE_MIN_DEADLINE_MS, that is lease_ms >=
 * stop_ms + 6 s, rounded up to whole seconds), leaving *p unchanged on error.
 */
ADVLOCK_API int advlock_lease_plan_init(advlock_lease_plan *p, int64_t lease_ms, int64_t stop_ms);

/*
 * Writes the plan's server settings as libpq startup options ("-c
 * tcp_user_timeout=27000 -c tcp_keepalives_idle=25 ..."), for a connection
 * the driver opens itself: startup options hold for the whole session, and
 * survive RESET ALL, DISCARD ALL and a rolled-back SET. Writes at most size
 * bytes including the NUL, like snprintf; returns the length the full text
 * needs, or ADVLOCK_EINVAL (p NULL, or buf NULL with size > 0).
 * ADVLOCK_LEASE_OPTIONS_MAX bytes always suffice.
 */
#define ADVLOCK_LEASE_OPTIONS_MAX 160
ADVLOCK_API int advlock_lease_options(const advlock_lease_plan *p, char *buf, size_t size);

/* What a lease asks its driver to do next. */
typedef enum advlock_lease_action_kind {
    ADVLOCK_LEASE_NONE = 0,   /* not started, or stopped: nothing */
    ADVLOCK_LEASE_QUERY = 1,  /* send sql with $1 = param (and $2 = param2),
                                 call advlock_lease_on_sent() once it is
                                 sent and advlock_lease_on_result() with its
                                 answer; meanwhile wake at wake_at_ms */
    ADVLOCK_LEASE_WAIT = 2,   /* nothing to send: wake at wake_at_ms (the next
                                 heartbeat or the stop deadline, whichever
                                 comes first) and call advlock_lease_on_timer() */
    ADVLOCK_LEASE_EXPIRED = 3 /* stop the work guarded by the lock now: the
                                 holder can no longer prove it holds it, and
                                 the server may free it U - D - elapsed
                                 later; close the connection (a late answer
                                 must not count) */
} advlock_lease_action_kind;

typedef struct advlock_lease_action {
    advlock_lease_action_kind kind;
    advlock_sql sql; /* QUERY: ADVLOCK_SQL_LEASE_SETUP, _HEARTBEAT or _HEARTBEAT_GUARDED */
    const char *sql_text;
    int64_t param;      /* QUERY: $1 (U) */
    int64_t param2;     /* QUERY, guarded: $2 (the session token) */
    int64_t wake_at_ms; /* QUERY, WAIT: when to call advlock_lease_on_timer()
                           (INT64_MAX: never, as during the setup) */
    int64_t stop_at_ms; /* held or EXPIRED: the stop deadline, the send time of
                           the last heartbeat answered in time + D; INT64_MAX
                           while no lock is held */
} advlock_lease_action;

/* Why a lease expired (advlock_lease_expiry_reason()). */
typedef enum advlock_lease_expiry {
    ADVLOCK_LEASE_LIVE = 0,        /* it has not */
    ADVLOCK_LEASE_NO_ANSWER = 1,   /* no heartbeat was answered by the stop deadline */
    ADVLOCK_LEASE_CONNECTION = 2,  /* a heartbeat found the connection lost */
    ADVLOCK_LEASE_SETTINGS = 3,    /* a heartbeat found the server session's
                                      settings changed (FALSE), or the
                                      guarded one reached another server
                                      session (NULL) */
    ADVLOCK_LEASE_SERVER_ERROR = 4 /* a heartbeat failed on the server */
} advlock_lease_expiry;

/* What setting a lease up found (advlock_lease_setup_result()). */
typedef enum advlock_lease_setup {
    ADVLOCK_LEASE_SETUP_PENDING = 0, /* not asked, or no answer yet */
    ADVLOCK_LEASE_APPLIED = 1,       /* TCP: the server applied the plan */
    ADVLOCK_LEASE_UNIX_SOCKET = 2,   /* a Unix socket: no partition can be silent;
                                        the lease needs no server settings */
    ADVLOCK_LEASE_NOT_APPLIED = 3,   /* the server did not apply them (refuse to
                                        hold: the release bound would not hold) */
    ADVLOCK_LEASE_PROXIED = 4,       /* behind a proxy: the server's socket is the
                                        proxy's, whose own tcp_* settings bound
                                        the release; only the stop bound holds */
    ADVLOCK_LEASE_SETUP_FAILED = 5   /* the statement failed or the connection was lost */
} advlock_lease_setup;

/*
 * One lease on one connection: caller-allocated, no pointers inside but to
 * static SQL text, copyable. Lifecycle: advlock_lease_init(), then
 * advlock_lease_start_setup() before the first acquire on a connection (one
 * statement; skip it for a connection opened with advlock_lease_options()
 * whose settings you read back another way), then advlock_lease_hold() when
 * a lock is acquired, heartbeats until advlock_lease_stop() (the lock
 * released) or EXPIRED. Fields are private.
 */
typedef struct advlock_lease {
    advlock_lease_plan plan_;
    uint64_t token_;    /* guarded heartbeats: the session token; 0 direct */
    int64_t anchor_ms_; /* send time of the last heartbeat answered in time */
    int64_t sent_ms_;   /* the outstanding query's send time, once sent */
    int64_t next_beat_ms_;
    int64_t now_ms_;
    uint8_t state_;
    uint8_t setup_;       /* advlock_lease_setup */
    uint8_t expiry_;      /* advlock_lease_expiry */
    uint8_t outstanding_; /* a query is out: 0 none, 1 to send, 2 sent */
} advlock_lease;

/* Sets l to an idle lease with plan p (copied). Returns 0 or ADVLOCK_EINVAL
 * (l or p NULL, or *p not a plan advlock_lease_plan_init() made). */
ADVLOCK_API int advlock_lease_init(advlock_lease *l, const advlock_lease_plan *p);

/*
 * Starts the setup: the next action is ADVLOCK_SQL_LEASE_SETUP, or nothing
 * behind a proxy (proxied nonzero: the session check found one), where the
 * setup ends ADVLOCK_LEASE_PROXIED at once. Returns 0, ADVLOCK_EINVAL (l
 * NULL) or ADVLOCK_EMISUSE (a query is outstanding, or a lock is held).
 */
ADVLOCK_API int advlock_lease_start_setup(advlock_lease *l, int proxied, int64_t now_ms);

/* How the setup ended (ADVLOCK_LEASE_SETUP_PENDING for l NULL). */
ADVLOCK_API advlock_lease_setup advlock_lease_setup_result(const advlock_lease *l);

/*
 * The lock is held from now on: heartbeats start. anchor_ms is the send
 * time of the statement whose answer granted the lock (any earlier time is
 * safe; a later one is not): the stop deadline is anchor_ms + D. A lease
 * whose deadline has already passed is EXPIRED at once (a server-side wait
 * that lasted longer than D: the holder must not start its work). token:
 * behind a proxy the connection's session token (guarded heartbeats), else
 * 0. Returns 0, ADVLOCK_EINVAL (l NULL) or ADVLOCK_EMISUSE (a setup query
 * is outstanding, already holding, or EXPIRED: the connection must go).
 */
ADVLOCK_API int advlock_lease_hold(advlock_lease *l, int64_t anchor_ms, uint64_t token,
                                   int64_t now_ms);

/* The outstanding query was sent (its send time anchors the next renewal,
 * and the next heartbeat falls due H after it). After EXPIRED it changes
 * nothing. Returns 0, ADVLOCK_EINVAL or ADVLOCK_EMISUSE (no query to send,
 * or it was sent already). */
ADVLOCK_API int advlock_lease_on_sent(advlock_lease *l, int64_t now_ms);

/*
 * The outstanding query's answer. Setup: TRUE applied, FALSE not applied,
 * NULL Unix socket, error or lost: SETUP_FAILED. Heartbeat: TRUE renews the
 * lease (the stop deadline moves to the query's send time + D) if it came
 * before the deadline; FALSE, NULL, an error or a lost connection expire it
 * (advlock_lease_expiry_reason() says which). An answer after EXPIRED changes
 * nothing; one at or after the stop deadline finds the lease EXPIRED
 * (NO_ANSWER). Returns 0, ADVLOCK_EINVAL (r not an advlock_result) or
 * ADVLOCK_EMISUSE (no query out, or a heartbeat's TRUE before
 * advlock_lease_on_sent(): a renewal needs the send time).
 */
ADVLOCK_API int advlock_lease_on_result(advlock_lease *l, advlock_result r, int64_t now_ms);

/* Time passes: a heartbeat falls due, or the stop deadline passes (EXPIRED,
 * ADVLOCK_LEASE_NO_ANSWER). Early, late and repeated calls are harmless.
 * Returns 0 or ADVLOCK_EINVAL. */
ADVLOCK_API int advlock_lease_on_timer(advlock_lease *l, int64_t now_ms);

/* The lock was released (or the connection closed on purpose): no more
 * heartbeats; a setup already made stays made. An EXPIRED lease stays
 * EXPIRED (only advlock_lease_init() or a new setup, for a new connection,
 * leaves it). Returns 0 or ADVLOCK_EINVAL. */
ADVLOCK_API int advlock_lease_stop(advlock_lease *l);

/* The next action, by value (kind NONE for l NULL). */
ADVLOCK_API advlock_lease_action advlock_lease_next(const advlock_lease *l);

/* Why the lease expired, or ADVLOCK_LEASE_LIVE. */
ADVLOCK_API advlock_lease_expiry advlock_lease_expiry_reason(const advlock_lease *l);

/* The plan l was made with (advlock_lease_init()), owned by l: valid while
 * l is; NULL for l NULL. Drivers read the plan's times here rather than
 * keep a copy. */
ADVLOCK_API const advlock_lease_plan *advlock_lease_plan_of(const advlock_lease *l);

/* ---- In-process exclusion (lock sets) -------------------------------------
 *
 * A lock set's driver asks this table before it sends a caller's try-lock,
 * and answers a conflict itself as "busy": docs/design.md, "Lock sets",
 * says why (the callers share one re-entrant server session) and gives the
 * decisions drivers share.
 *
 * Modes keep their meaning: an EXCLUSIVE peer conflicts with every other
 * peer on its key, asking or holding; a SHARED one only with an EXCLUSIVE
 * one. Two shared peers both go to the server and each releases its own
 * hold.
 *
 * The table is a hash of intrusive lists: the caller owns the bucket array
 * and every peer, the table allocates nothing. A table and its peers belong
 * to one thread at a time (the set's driver).
 */

/* advlock_peer_state(): where a peer is. */
typedef enum advlock_peer_state_kind {
    ADVLOCK_PEER_OUT = 0,    /* in no table */
    ADVLOCK_PEER_ASKING = 1, /* its try-lock is out to the server */
    ADVLOCK_PEER_HELD = 2    /* the server granted it */
} advlock_peer_state_kind;

/* One caller's interest in a key: caller memory (inside the caller's own
 * struct, typically), not moved while in a table. Fields are private. */
typedef struct advlock_peer {
    int64_t key_;
    struct advlock_peer *next_; /* bucket chain, doubly linked: O(1) leave */
    struct advlock_peer *prev_;
    uint8_t mode_;  /* advlock_mode */
    uint8_t state_; /* advlock_peer_state_kind */
} advlock_peer;

/* The table: caller memory. Fields are private. */
typedef struct advlock_peers {
    advlock_peer **buckets_;
    size_t mask_;
    size_t count_;
} advlock_peers;

/*
 * Sets t to an empty table over buckets, an array of nbuckets pointers that
 * the caller owns and keeps alive (and unmoved) as long as the table; this
 * zeroes it. nbuckets is a power of two, at least 1 (about the number of
 * keys held at once keeps chains short). Returns 0, or ADVLOCK_EINVAL (t or
 * buckets NULL, nbuckets 0 or not a power of two; t is then untouched).
 */
ADVLOCK_API int advlock_peers_init(advlock_peers *t, advlock_peer **buckets, size_t nbuckets);

/* Sets p to a peer in no table (ADVLOCK_PEER_OUT). A peer must be
 * initialised, or zeroed, before its first advlock_peers_ask(). No-op for
 * NULL. */
ADVLOCK_API void advlock_peer_init(advlock_peer *p);

/*
 * Before a caller's try-lock on key in mode goes out. Returns 1 when no peer
 * in t conflicts: p enters t as ASKING, send the try. Returns 0 when one
 * does: p stays OUT, send nothing, and feed the machine the server's "held
 * by another session" answer: advlock_on_result() FALSE for every
 * session-scoped try row, the guarded ones too (their NULL means "not the
 * claimed session" and fails ESESSION), advlock_on_fenced() with granted 0
 * for a fenced one. Other returns:
 * ADVLOCK_EINVAL (t or p NULL, mode not an advlock_mode), ADVLOCK_EMISUSE (p
 * is already in a table: leave first).
 */
ADVLOCK_API int advlock_peers_ask(advlock_peers *t, advlock_peer *p, int64_t key,
                                  advlock_mode mode);

/* The server granted p's try: ASKING -> HELD. Returns 0, ADVLOCK_EINVAL (t
 * or p NULL) or ADVLOCK_EMISUSE (p is not ASKING). */
ADVLOCK_API int advlock_peers_granted(advlock_peers *t, advlock_peer *p);

/*
 * p leaves t (its try was refused or failed, its lock was released, lost or
 * given up, its caller cancelled): -> OUT, and the key is free for the
 * others' next tries (no one is woken: their schedules try again). p must be
 * in t or OUT: leaving when OUT is a no-op returning 0, so drivers call it
 * on every end path. Returns 0 or ADVLOCK_EINVAL (t or p NULL).
 */
ADVLOCK_API int advlock_peers_leave(advlock_peers *t, advlock_peer *p);

/* How many peers are in t, asking or holding; 0 for NULL. */
ADVLOCK_API size_t advlock_peers_count(const advlock_peers *t);

/* p's state, an advlock_peer_state_kind (ADVLOCK_PEER_OUT for NULL). */
ADVLOCK_API int advlock_peer_state(const advlock_peer *p);

/* ---- The server's lock table: how much of it one connection takes -------- */

/*
 * Every lock of every server session, advisory locks and the relation locks
 * of every query alike, lives in one shared table whose nominal size is
 * max_locks_per_transaction x (max_connections + max_prepared_transactions).
 * Filled, every session's next lock fails with "out of shared memory", new
 * connections included. A connection holding many advisory locks (a lock
 * set, advlock run with several names) therefore takes at most a share of
 * the nominal size: docs/design.md, "The server's lock table".
 */

/* The share of the nominal size one connection holds by default, in percent. */
#define ADVLOCK_CAPACITY_SHARE_DEFAULT 25

/* PostgreSQL's defaults of the three settings, taken for a server that did
 * not give its own (a failed or odd settings row): a share of those rather
 * than no limit. */
#define ADVLOCK_CAPACITY_PG_MAX_LOCKS_PER_TRANSACTION 64
#define ADVLOCK_CAPACITY_PG_MAX_CONNECTIONS           100
#define ADVLOCK_CAPACITY_PG_MAX_PREPARED_TRANSACTIONS 0

/* The server's settings (ADVLOCK_SQL_CAPACITY's row) and the share taken.
 * Caller memory; fields are read-only for the caller after init. */
typedef struct advlock_capacity {
    int64_t max_locks_per_transaction;
    int64_t max_connections;
    int64_t max_prepared_transactions;
    int32_t share_percent; /* 1 to 100 */
} advlock_capacity;

/*
 * Sets c from the server's three settings and the share of the nominal size
 * to hold (percent, 1 to 100; 0: ADVLOCK_CAPACITY_SHARE_DEFAULT). Returns 0,
 * or ADVLOCK_EINVAL (c NULL, a setting negative or above INT32_MAX,
 * max_locks_per_transaction or the connections 0, the share out of range;
 * c is then untouched).
 */
ADVLOCK_API int advlock_capacity_init(advlock_capacity *c, int64_t max_locks_per_transaction,
                                      int64_t max_connections, int64_t max_prepared_transactions,
                                      int share_percent);

/* The table's nominal size, in locks; 0 for NULL. */
ADVLOCK_API int64_t advlock_capacity_nominal(const advlock_capacity *c);

/* How many locks one connection may hold: the share of the nominal size,
 * rounded down, at least 1; 0 for NULL. */
ADVLOCK_API int64_t advlock_capacity_limit(const advlock_capacity *c);

/*
 * Before one more lock, beside the `held` a connection holds or asks for:
 * returns 0 when it fits (held < advlock_capacity_limit()); else 1, and
 * writes the refusal's words into buf (size bytes, caller memory; always a C
 * string, cut with "..." when short; buf may be NULL with size 0): the
 * numbers, the settings they come from, and what to raise. Returns
 * ADVLOCK_EINVAL for c NULL, or buf NULL with size > 0.
 */
ADVLOCK_API int advlock_capacity_refuse(const advlock_capacity *c, int64_t held, char *buf,
                                        size_t size);

/* ---- The connection engine: one server connection's rules ---------------- */

/*
 * advlock_conn composes everything above for one server connection: its
 * members (each a lock machine of a caller), their in-process exclusion
 * (advlock_peers), the session check and its claim, the lease, the share of
 * the server's lock table, and what may travel together on the wire. It
 * does no I/O: a driver (the "pump") sends the statements it asks for
 * (advlock_conn_poll_statement()), hands back each answer in the order sent
 * (advlock_conn_on_answer()), arms the one timer it names
 * (advlock_conn_next_wake()) and reports what it sees of the connection: a
 * close (advlock_conn_on_closed()), a new server session
 * (advlock_conn_on_reset()). What happened to members comes out as events
 * (advlock_conn_poll_event()). docs/architecture.md, "The connection".
 *
 * Everything is caller memory, nothing is allocated: the engine, its
 * members, its slots (the statements in flight) and the exclusion table's
 * buckets. One thread at a time per engine. Fields are private.
 */

/* What the pump's client can do (advlock_conn_init()'s caps, OR'ed). */
typedef enum advlock_caps {
    /* Many statements in flight, batches ended by a sync (libpq's pipeline
     * mode). Without it: one statement at a time (asyncpg), each its own
     * batch. */
    ADVLOCK_CAPS_PIPELINE = 1,
    /* Named prepared statements (PREPARE once, then execute by name). */
    ADVLOCK_CAPS_PREPARE = 2,
    /* Cancel requests (ADVLOCK_STATEMENT_CANCEL): a member may wait on the
     * server (ADVLOCK_WAIT_SERVER), and a lock-delay mark statement still
     * out past its acquire's deadline is cancelled. Without it such a wait
     * is refused, and such a mark answers in its own time. */
    ADVLOCK_CAPS_CANCEL = 4,
    /* One member only (the single-lock adapter): no share of the server's
     * lock table to keep, so its settings are never read (no CAPACITY
     * row before the session check). */
    ADVLOCK_CAPS_ONE_MEMBER = 8
} advlock_caps;

/* The form a statement goes in. */
typedef enum advlock_form {
    ADVLOCK_FORM_PREPARE = 1, /* prepare sql under advlock_pq_statement_name()'s name;
                                 answers TRUE (done) or a failure */
    ADVLOCK_FORM_NAMED = 2,   /* execute the statement prepared before */
    ADVLOCK_FORM_UNNAMED = 3  /* parse, bind and execute in one message */
} advlock_form;

typedef enum advlock_statement_kind {
    ADVLOCK_STATEMENT_NONE = 0,  /* nothing to send now */
    ADVLOCK_STATEMENT_QUERY = 1, /* send sql in form with its parameters */
    ADVLOCK_STATEMENT_SYNC = 2,  /* end the batch (libpq: PQpipelineSync()) */
    /* Ask the server to cancel member's server-side wait, or its
     * lock-delay mark statement (sql says which) past the acquire's
     * deadline, which it is running now (libpq: PQcancel()): a request on
     * a connection of its own, with no answer to read on this one. Counts
     * as sent when polled: the statement's answer comes as ever, and the
     * engine asks again while it is late. */
    ADVLOCK_STATEMENT_CANCEL = 3
} advlock_statement_kind;

struct advlock_member;

/* A statement to send (advlock_conn_poll_statement()) or the one whose
 * answer is due next (advlock_conn_head()). */
typedef struct advlock_statement {
    advlock_statement_kind kind;
    advlock_sql sql;
    advlock_form form;
    int64_t param, param2, param3; /* as many as advlock_sql_params(sql) */
    /* The member it belongs to; NULL for the connection's own statements
     * (the lease's, the capacity row, a prepare, a give-back) and for a
     * cancelled member's, whose answer the engine takes. */
    struct advlock_member *member;
    /* advlock_conn_head(): a sync's result follows this statement's answer
     * on the wire (libpq: PGRES_PIPELINE_SYNC), for the pump to read. */
    int sync_follows;
} advlock_statement;

/*
 * An answer, in the pump's terms: set it up with advlock_answer_init(),
 * then fill the fields the statement's answer kind uses (advlock_sql_answer()).
 * Strings and rows are read during advlock_conn_on_answer() only.
 */
typedef struct advlock_answer {
    advlock_result result;             /* BOOLEAN/VOID values, or a failure; TRUE for a
                                          good row of the other kinds or a done PREPARE */
    int aborted;                       /* the server skipped it: an earlier statement of
                                          its batch failed (libpq: PGRES_PIPELINE_ABORTED) */
    const char *sqlstate;              /* a failure's SQLSTATE, or NULL */
    const char *message;               /* a failure's words, or NULL */
    int in_transaction;                /* SESSION: answered inside a transaction block */
    int server_pid, in_recovery, ours; /* SESSION's row */
    int64_t fence_token;               /* FENCED, granted: the token */
    int64_t settings[3];               /* CAPACITY's row */
    const advlock_holder *holders;     /* HOLDERS' rows */
    size_t nholders;
} advlock_answer;

/* Sets *a to an answer of result with nothing else said. No-op for NULL. */
ADVLOCK_API void advlock_answer_init(advlock_answer *a, advlock_result result);

/* The longest failure words an engine keeps per member, NUL included. */
#define ADVLOCK_CONN_WORDS_MAX 256

/* The sizes of the engine's structs on 64-bit platforms (LP64), fixed:
 * bindings that allocate them without this header rely on them, and the
 * core checks them at build time. */
#define ADVLOCK_MEMBER_SIZE    784
#define ADVLOCK_CONN_SLOT_SIZE 72
#define ADVLOCK_CONN_SIZE      656

/*
 * One caller of a connection: a lock machine, its place in the exclusion
 * table, its failure's words. Caller memory (ADVLOCK_MEMBER_SIZE bytes), set up once
 * with advlock_member_init(), kept in place while busy or holding.
 */
typedef struct advlock_member {
    advlock_machine machine_;
    advlock_report report_; /* the last operation's, copied when it ended */
    advlock_peer peer_;
    struct advlock_conn *conn_;
    struct advlock_member *next_; /* in one of the engine's lists (list_) */
    struct advlock_member *prev_;
    struct advlock_member *news_next_;
    int64_t key_;
    int64_t timeout_ms_;
    int64_t started_ms_;
    int64_t delay_at_ms_; /* lock-delay: the grant's answer, then the wait's end */
    uint8_t phase_;
    uint8_t list_;
    uint8_t acquiring_;
    uint8_t verifying_;
    uint8_t news_; /* events not yet polled: 1 done, 2 lost */
    uint8_t lease_expiry_;
    uint8_t by_key_;     /* a release or verify of a key it did not hold */
    uint8_t delay_;      /* lock-delay's step */
    uint8_t delay_end_;  /* how a grant lock-delay gives back ends */
    uint8_t delay_late_; /* lock-delay: its mark in flight past the timeout */
    char sqlstate_[6];
    char words_[ADVLOCK_CONN_WORDS_MAX];
} advlock_member;

/* One statement in flight: caller memory, advlock_conn_init()'s slots
 * (ADVLOCK_CONN_SLOT_SIZE bytes each).
 * Each slot is also one place where a cancelled member's key stays taken
 * until the server's answer (and a grant's give-back) says it is free. */
typedef struct advlock_conn_slot {
    advlock_member *member_;
    int64_t key_;
    int64_t sent_ms_;
    int32_t keeper_; /* index of the keeper its cancelled member left, or -1 */
    uint8_t kind_;
    uint8_t sql_;
    uint8_t form_;
    uint8_t sync_;
    /* the keeper part, independent of the ring position */
    advlock_peer kept_;
    int32_t kept_next_;
    uint8_t kept_unlock_;
    uint8_t kept_tries_; /* give-backs of its grant the server failed */
} advlock_conn_slot;

/* The engine: one per server connection, caller memory (ADVLOCK_CONN_SIZE
 * bytes). */
typedef struct advlock_conn {
    advlock_session session_;
    advlock_peers peers_;
    advlock_conn_slot *slots_;
    uint32_t nslots_, head_, count_;
    int32_t free_keepers_, owed_, owed_tail_;
    uint32_t owed_count_;
    advlock_member *lists_[5];
    advlock_member *tails_[5];
    advlock_member *news_, *news_tail_;
    advlock_member *confirming_; /* a wait's grant awaiting its heartbeat */
    /* The confirming heartbeat's send time; once the lease ran out (no
     * grant is confirmed then), the last statement's send since. */
    int64_t lease_mark_ms_;
    advlock_lease lease_;
    advlock_capacity capacity_;
    int64_t now_ms_;
    uint32_t prepared_, unnamed_, preparing_;
    uint32_t verifying_;
    uint8_t caps_;
    uint8_t lease_on_, lease_query_, lease_holding_, lease_expired_;
    uint8_t session_asked_, provisional_;
    uint8_t unsynced_, close_batch_, follow_;
    uint8_t capacity_read_, capacity_share_;
    uint8_t given_up_, polled_, starved_;
    uint8_t must_close_;
    uint8_t waits_;     /* a member's acquire may wait on the server */
    uint8_t in_block_;  /* inside a transaction block (advlock_conn_on_transaction()) */
    uint8_t warned_;    /* a warning not yet polled */
    uint8_t xact_;      /* a member of transaction scope started since a block last ended */
    uint32_t delaying_; /* members whose grant lock-delay holds back */
    advlock_member *warned_member_;
    char warning_sqlstate_[6];
    char warning_[ADVLOCK_CONN_WORDS_MAX];
} advlock_conn;

/*
 * Sets c up for a connection whose server announced client_pid (0 if
 * unknown), with token (nonzero, drawn at random by the caller: the core
 * has no entropy) to claim its server session. slots: nslots (at least 2)
 * statements in flight at most; when they are all taken the engine sends
 * nothing more until answers free some (back-pressure). buckets: nbuckets
 * (a power of two) for the exclusion table. caps: ADVLOCK_CAPS_*. Both
 * arrays are the caller's, kept in place as long as c. The lock-table
 * share starts at ADVLOCK_CAPACITY_SHARE_DEFAULT, with no lease.
 * Returns 0, or ADVLOCK_EINVAL (a pointer NULL, token 0, nslots < 2,
 * nbuckets not a power of two).
 */
ADVLOCK_API int advlock_conn_init(advlock_conn *c, advlock_conn_slot *slots, size_t nslots,
                                  advlock_peer **buckets, size_t nbuckets, int client_pid,
                                  uint64_t token, unsigned caps);

/* Sets m to a member of no connection, nothing under way. No-op for NULL. */
ADVLOCK_API void advlock_member_init(advlock_member *m);

/*
 * Starts acquiring key for m with options o (NULL: the defaults), within
 * timeout_ms. A member's own lease is refused (the lease is the
 * connection's: advlock_conn_set_lease()). Transaction scope only inside a
 * transaction block (advlock_conn_on_transaction()): outside one the lock
 * would go with its own statement's end. Its grant is held until the block
 * ends; a release ends ADVLOCK_ENDS_WITH_TRANSACTION, the member still
 * holding; a cancel with its try in flight leaves it busy until the answer
 * (a grant then cannot be unlocked: ACQUIRED, ADVLOCK_DETAIL_CANCEL_TOO_LATE),
 * its DONE event coming then. Ends the watch of
 * a lock m held before; events of m's last operation not yet polled are
 * dropped (they would follow the new operation's and say the wrong thing
 * of it).
 *
 * A server-side wait (ADVLOCK_WAIT_SERVER, for a pump with
 * ADVLOCK_CAPS_CANCEL) holds its session up while it waits, so it needs
 * the connection to itself: no other member busy, nothing in flight or
 * owed, no member starting, releasing or verifying meanwhile; other
 * members may hold locks (their watch goes on), other keys than its own,
 * unless the connection has a lease, whose heartbeats could not go. Its deadline is the
 * engine's timer, where the engine asks for the wait to be cancelled
 * (ADVLOCK_STATEMENT_CANCEL). Under the connection's lease a grant that
 * came more than a heartbeat's interval after its send counts once a
 * heartbeat sent after it has answered: m's DONE comes then, or, if that
 * heartbeat fails, DONE (ACQUIRED) and LOST at once, in words saying so.
 *
 * With options.lock_delay a grant is held back, m busy, until its mark is
 * written and another holder's lease waited out (docs/design.md,
 * "Lock-delay"): the wait counts against timeout_ms, and m's warning
 * (ADVLOCK_CONN_WARNING) says why it takes that long. A mark statement
 * still out at the deadline (but no sooner than 1 s after its send) is
 * cancelled (ADVLOCK_STATEMENT_CANCEL, with ADVLOCK_CAPS_CANCEL, when
 * nothing else is in flight), and m ends TIMED_OUT at its answer, the
 * grant given back. A grant held back when the lease runs out ends m
 * FAILED (ADVLOCK_ECONNLOST, advlock_member_lease_expiry() saying why),
 * nothing given back (the connection's close frees it); one held back when
 * a transaction block begins (advlock_conn_on_transaction()) ends m FAILED
 * (ADVLOCK_ESERVER, SQLSTATE 25001) once it is given back.
 *
 * Returns 0, or ADVLOCK_EINVAL (a pointer NULL, timeout < 0, options
 * refused, a server-side wait without ADVLOCK_CAPS_CANCEL, lock-delay on a
 * connection without a lease), ADVLOCK_EMISUSE
 * (m busy or holding, m another engine's (advlock_member_init() frees it),
 * transaction scope outside a transaction block, lock-delay on a session
 * lock inside one (its mark would commit or roll back with the block), the
 * connection given up, to be closed (advlock_conn_must_close()) or its lease ran out, another
 * member's server-side wait under way, or a server-side wait asked for
 * while the connection is not its alone).
 */
ADVLOCK_API int advlock_conn_start_acquire_key(advlock_conn *c, advlock_member *m, int64_t key,
                                               int64_t timeout_ms, const advlock_options *o,
                                               int64_t now_ms);

/* As advlock_conn_start_acquire_key(), for a name (len bytes, UTF-8); also
 * returns the key derivation's errors. */
ADVLOCK_API int advlock_conn_start_acquire(advlock_conn *c, advlock_member *m, const char *name,
                                           size_t len, int64_t timeout_ms, const advlock_options *o,
                                           int64_t now_ms);

/* Starts releasing (advlock_conn_start_release()) or verifying
 * (advlock_conn_start_verify()) the lock m holds on c. Returns 0, or
 * ADVLOCK_EINVAL (NULL) or ADVLOCK_EMISUSE (m holds nothing on c, or
 * another member's server-side wait is under way). A
 * release or a verify that ends FAILED leaves m holding (the lock is in
 * doubt: release it, or close the connection). */
ADVLOCK_API int advlock_conn_start_release(advlock_conn *c, advlock_member *m, int64_t now_ms);
ADVLOCK_API int advlock_conn_start_verify(advlock_conn *c, advlock_member *m, int64_t now_ms);

/*
 * Starts releasing (advlock_conn_start_release_key()) or verifying
 * (advlock_conn_start_verify_key()) key, which m does not hold on c: the
 * session may hold it without the engine knowing (a statement of the
 * caller's took it). o (NULL: the defaults) gives the mode, scope and guard
 * as for an acquire; a lease in o is refused. On a member holding key on c
 * these are advlock_conn_start_release() and _verify() (o unused). While it
 * runs the key is taken in the exclusion table as EXCLUSIVE (a release must
 * not take another member's hold, a verify must not find one), so other
 * members' tries of it are answered busy. A release ends as advlock_start_release() says and
 * leaves m holding nothing, FAILED included; a verify that ends HELD leaves
 * m holding key (released with advlock_conn_start_release(), lost with the
 * connection). Transaction scope only inside a transaction block, as for
 * an acquire; a verify not under the connection's lease (a lock it found
 * would be held with no heartbeat to keep it). Neither is cancellable.
 * Returns 0, or ADVLOCK_EINVAL (NULL, options refused) or ADVLOCK_EMISUSE
 * (m busy, holding another key, or another engine's; the key taken by
 * another member or kept for a cancelled one; transaction scope outside a
 * transaction block; a verify while a lease is set; the connection given
 * up, to be closed, or its session held by a server-side wait).
 */
ADVLOCK_API int advlock_conn_start_release_key(advlock_conn *c, advlock_member *m, int64_t key,
                                               const advlock_options *o, int64_t now_ms);
ADVLOCK_API int advlock_conn_start_verify_key(advlock_conn *c, advlock_member *m, int64_t key,
                                              const advlock_options *o, int64_t now_ms);

/*
 * Ends m's acquire CANCELLED at once. A try of m's in flight stays the
 * engine's: its key stays taken until it answers, and a grant is given back
 * with an unlock of the engine's own. No event comes for the cancel (the
 * caller knows it: advlock_member_report() says CANCELLED), so m may start
 * again or be freed on return. These exceptions leave m busy until its
 * machine ends as advlock_cancel() says, and its DONE event comes then: a
 * server-side wait's statement in flight (the engine asks the server to
 * cancel it, ADVLOCK_STATEMENT_CANCEL; a grant that came first is
 * unlocked), a try in flight on a pump without ADVLOCK_CAPS_PIPELINE (the
 * caller waits for its answer; a grant is unlocked), a try of transaction
 * scope in flight (its grant cannot be unlocked: ACQUIRED, too late to
 * cancel), an unlock still to send that undoes a grant the session
 * may hold (it goes out first), and a grant lock-delay holds back
 * (options.lock_delay: it is given back with an unlock first, and m ends
 * CANCELLED at its answer); advlock_member_busy() tells them apart.
 * Returns 0, or ADVLOCK_EINVAL (NULL) or ADVLOCK_EMISUSE (no acquire of
 * m's under way on c). Never fails for memory: each slot keeps room for
 * one such key.
 */
ADVLOCK_API int advlock_conn_cancel(advlock_conn *c, advlock_member *m, int64_t now_ms);

/* Sets the connection's lease (lease_ms 0: none; stop_ms as for
 * advlock_lease_plan_init()) while no member is busy. While members hold
 * locks, only the plan they hold under is taken (the same lease, or none
 * again): it changes nothing, the lease runs on as it is; another would
 * leave their locks unguarded. Returns 0, or ADVLOCK_EINVAL (NULL, a plan
 * refused, whatever else holds) or ADVLOCK_EMISUSE (a member busy, another
 * plan while members hold, or the lease ran out on this server session). */
ADVLOCK_API int advlock_conn_set_lease(advlock_conn *c, int64_t lease_ms, int64_t stop_ms);

/*
 * The lease's deadlines (docs/libpq.md, "Leases"). While a member holds a
 * lock under the lease (or verifies one): *stop_at_ms is the stop deadline,
 * the send time of the last heartbeat answered in time plus the plan's D,
 * by which the holders turn LOST unless a heartbeat answers, and
 * *free_by_ms is INT64_MAX; returns 1. After the lease ran out on this
 * server session (until advlock_conn_on_reset()): *stop_at_ms is the stop
 * deadline it ran out at (or before, for a heartbeat that failed), and
 * *free_by_ms the time by which the server frees the locks if it hears
 * nothing more from this client (the network died, or the connection stays
 * idle; a statement of the caller's own on it would push it later): the
 * lease after the engine saw it run out, or after the last statement the
 * engine sent since (the server heard from the client then); INT64_MAX where the
 * lease set nothing on the server (behind a proxy, or after a heartbeat
 * found the settings changed); returns 2. Otherwise (no lease, nothing
 * held, NULL) returns 0 and stores nothing. Either pointer may be NULL.
 */
ADVLOCK_API int advlock_conn_lease_deadline(const advlock_conn *c, int64_t *stop_at_ms,
                                            int64_t *free_by_ms);

/* The share of the server's lock table c may hold, 1 to 100 percent.
 * Returns 0 or ADVLOCK_EINVAL. */
ADVLOCK_API int advlock_conn_set_capacity_share(advlock_conn *c, int percent);

/*
 * The next statement to send, into *st: returns 1 (st->kind QUERY or SYNC)
 * or 0 (nothing may go now: nothing waits, the batch in flight must answer
 * first, or every slot is taken). Send it before polling again; a QUERY
 * counts as sent (its answer is due in order) unless the pump takes it back
 * with advlock_conn_unsend(). Returns 0 for NULL.
 */
ADVLOCK_API int advlock_conn_poll_statement(advlock_conn *c, advlock_statement *st, int64_t now_ms);

/*
 * The statement last polled could not be sent (words: the client's reason,
 * or NULL; broken: the connection is gone, not merely short of memory): it
 * is answered as a lost connection, and so is the member a prepare or the
 * settings' row went ahead of; a sync stays due; a give-back goes again
 * at the next poll, or with broken 1 is dropped (the session took the
 * grant with it). After an unsend with broken 0, end the turn: polling on
 * would offer the same statement again. No-op when nothing was polled
 * since the last answer.
 */
ADVLOCK_API void advlock_conn_unsend(advlock_conn *c, int broken, const char *words,
                                     int64_t now_ms);

/* The statement whose answer comes next, into *st: 1, or 0 (none in
 * flight, or NULL). */
ADVLOCK_API int advlock_conn_head(const advlock_conn *c, advlock_statement *st);

/*
 * The answer to the head statement: feeds its member, or takes it for the
 * connection (session facts, lease, capacity, prepares, give-backs). An
 * aborted statement, and a named one whose prepared statement is gone
 * (26000), goes again in the next batch. Returns 0, or ADVLOCK_EINVAL (NULL)
 * or ADVLOCK_EMISUSE (nothing in flight).
 */
ADVLOCK_API int advlock_conn_on_answer(advlock_conn *c, const advlock_answer *a, int64_t now_ms);

/* Time passed: sleeping members whose time came try again, the lease
 * beats or runs out. Early calls are harmless. No-op for NULL. */
ADVLOCK_API void advlock_conn_on_timer(advlock_conn *c, int64_t now_ms);

/* When advlock_conn_on_timer() is next due, or INT64_MAX (none). */
ADVLOCK_API int64_t advlock_conn_next_wake(const advlock_conn *c);

/*
 * The connection closed (or became readable with an error): every
 * statement in flight is answered lost, every member under way ends FAILED
 * with ADVLOCK_ECONNLOST, and every held member turns LOST with sqlstate
 * ("" or NULL: none) and words. No-op for NULL.
 */
ADVLOCK_API void advlock_conn_on_closed(advlock_conn *c, const char *sqlstate, const char *words,
                                        int64_t now_ms);

/*
 * The pump gives the connection up (its server did not answer within a
 * blocking call's bound): members under way end FAILED with failure, held
 * ones turn LOST with words, nothing stays in flight or owed. The engine
 * refuses new work until advlock_conn_on_reset() (the same connection,
 * reset). The pump may also leave it at once: closing the connection ends
 * the session and its locks, and advlock_conn_init() sets the same engine
 * up on another one, where its members (their reports and words readable
 * until they start again) start as on a new engine. No-op for NULL.
 */
ADVLOCK_API void advlock_conn_give_up(advlock_conn *c, int failure, const char *words,
                                      int64_t now_ms);

/*
 * The connection now reaches a new server session, announced as
 * client_pid (libpq: a new PQbackendPID() after PQreset()): the old
 * session's statements are answered lost, its held members turn LOST
 * (saying which session replaced which), and a fresh session value with
 * token (nonzero, new: see advlock_session_init()) is checked again, its
 * prepares and lease set up anew. Releases and verifies not yet answered,
 * by key ones waiting for the session check too, were the old session's:
 * they end FAILED (ADVLOCK_ECONNLOST); acquires holding nothing go on.
 * Returns 0, or ADVLOCK_EINVAL (NULL, token 0).
 */
ADVLOCK_API int advlock_conn_on_reset(advlock_conn *c, int client_pid, uint64_t token,
                                      int64_t now_ms);

/* The connection is (in_block 1) or is not inside a transaction block
 * before an operation (libpq: PQtransactionStatus()). Outside one, a
 * session check answered inside one was provisional (a rollback undoes its
 * claim), so it is checked again, same token, and the locks of transaction
 * scope went with the block: their members stop holding (no event: the
 * caller ended the block), their keys free. An acquire of transaction
 * scope still under way ends FAILED (ADVLOCK_ESERVER, SQLSTATE 25P01, words
 * saying the block ended), its DONE event to come; a try of it in flight
 * is left to the engine, its key kept until it answers. Inside one, a
 * grant lock-delay holds back is given back (its mark statement in flight
 * answers first, and a mark it wrote is cleared), and its acquire ends
 * FAILED (ADVLOCK_ESERVER, SQLSTATE 25001, words saying why), its DONE
 * event to come. No-op for NULL. */
ADVLOCK_API void advlock_conn_on_transaction(advlock_conn *c, int in_block);

/*
 * The caller lets go of m's held lock without releasing it: m ends its
 * watch (advlock_member_held() turns 0, no event, the report stays the
 * acquire's) and leaves the exclusion table, while the server session
 * still holds the lock. The single-lock adapter does this when its one
 * member starts another operation while holding. No-op for NULL, or an m
 * not holding on c.
 */
ADVLOCK_API void advlock_conn_let_go(advlock_conn *c, advlock_member *m);

/*
 * The caller lets go of every member (the engine is about to go): members
 * under way end CANCELLED (their events come), held members are forgotten,
 * not released (advlock_member_held() turns 0, no event, the report stays
 * the acquire's: the server session still holds their locks), and the
 * statements in flight are forgotten. No-op for NULL.
 */
ADVLOCK_API void advlock_conn_forget(advlock_conn *c, int64_t now_ms);

/* How many statements are in flight or owed (give-backs still to send):
 * 0 when the connection may be handed to anyone else. 0 for NULL. */
ADVLOCK_API size_t advlock_conn_outstanding(const advlock_conn *c);

/* 1 when the connection must be closed: the server failed the unlock giving
 * back a cancelled member's grant, or undoing an acquire's own grant, again
 * and again, so its session keeps a
 * lock nobody owns (its key stays taken; new acquires are refused with
 * ADVLOCK_EMISUSE). Closing the connection frees the lock; then
 * advlock_conn_on_closed() and advlock_conn_on_reset(). 0 for NULL. */
ADVLOCK_API int advlock_conn_must_close(const advlock_conn *c);

/* 1 when, at the last poll, a member's statement waited for nothing but a
 * free slot: more slots (advlock_conn_move_slots()) would send it now. */
ADVLOCK_API int advlock_conn_starved(const advlock_conn *c);

/*
 * Moves the engine's statements in flight to slots, nslots of them (more
 * than are in use), which the caller owns from now on instead of the old
 * ones (free those on return). Only while no cancelled member's key is
 * kept (their keepers are linked into the exclusion table where they are).
 * Returns 0, or ADVLOCK_EINVAL (NULL, too few slots) or ADVLOCK_EMISUSE
 * (a key is kept: try again later).
 */
ADVLOCK_API int advlock_conn_move_slots(advlock_conn *c, advlock_conn_slot *slots, size_t nslots);

/* The connection's session value (NULL for NULL). */
ADVLOCK_API const advlock_session *advlock_conn_session(const advlock_conn *c);

/* How many slots c has (advlock_conn_init(), advlock_conn_move_slots());
 * 0 for NULL. */
ADVLOCK_API size_t advlock_conn_slots(const advlock_conn *c);

/* Members busy (under way) on c, statements of theirs in flight included. */
ADVLOCK_API size_t advlock_conn_busy(const advlock_conn *c);

/* 1 when c has anything for the pump to read: a statement in flight or a
 * held member (whose connection it watches). */
ADVLOCK_API int advlock_conn_watching(const advlock_conn *c);

/* 1 when a statement waits to be polled (the pump wants to write). */
ADVLOCK_API int advlock_conn_wants_send(const advlock_conn *c);

typedef enum advlock_conn_event_kind {
    ADVLOCK_CONN_DONE = 1,   /* the member's operation ended: advlock_member_report() */
    ADVLOCK_CONN_LOST = 2,   /* the member's held lock is lost: advlock_member_words() */
    ADVLOCK_CONN_WARNING = 3 /* a warning about the member's statement (member NULL:
                                the connection's own): advlock_conn_warning() */
} advlock_conn_event_kind;

typedef struct advlock_conn_event {
    advlock_conn_event_kind kind;
    advlock_member *member;
} advlock_conn_event;

/* The next event, oldest first, into *ev: 1, or 0 (none, or NULL). A
 * member whose operation ended and whose lock was then lost gives DONE,
 * then LOST. A warning comes first (it came with a statement whose answer
 * the events that follow may tell): the warnings since the last poll are
 * one event, of the last one, its member NULL when that member was
 * cancelled, or started an acquire or a release or verify by key, since (a
 * release or verify of the lock it holds keeps the warning its own). */
ADVLOCK_API int advlock_conn_poll_event(advlock_conn *c, advlock_conn_event *ev);

/* What advlock_conn_turn() found, OR'ed. */
typedef enum advlock_turn {
    ADVLOCK_TURN_STATEMENT = 1, /* *st holds the next statement to send */
    ADVLOCK_TURN_EVENTS = 2,    /* an event waits: advlock_conn_poll_event() */
    ADVLOCK_TURN_REFUSED = 4    /* a came with nothing in flight: nothing done */
} advlock_turn;

/*
 * A pump's turn in one call, for bindings to whom each call into the
 * library costs (Python's ctypes): advlock_conn_on_answer(c, a, now_ms)
 * when a is not NULL, advlock_conn_on_timer(c, now_ms) when the engine's
 * wake is due by now_ms, then advlock_conn_poll_statement(c, st, now_ms).
 * Returns the ADVLOCK_TURN_* bits and, when wake is not NULL, writes
 * advlock_conn_next_wake() after the turn to *wake. ADVLOCK_TURN_REFUSED
 * alone for an a with nothing in flight (advlock_conn_on_answer()'s
 * ADVLOCK_EMISUSE), and for c or st NULL. a's strings are read during the
 * call only; nothing is allocated.
 */
ADVLOCK_API int advlock_conn_turn(advlock_conn *c, const advlock_answer *a, advlock_statement *st,
                                  int64_t now_ms, int64_t *wake);

/*
 * The server sent a notice (libpq: the notice receiver; a WARNING such as
 * an unlock's "you don't own a lock") while the head statement ran
 * (advlock_conn_head()): call it before handing that statement's answer
 * in. sqlstate ("" or NULL: none) and the first line of words are kept for
 * an ADVLOCK_CONN_WARNING event of the head's member, whose event callback
 * (advlock_options) hears ADVLOCK_EVENT_WARNING at once. Lock-delay reads
 * it too: a mark statement's "canceling wait for synchronous replication"
 * means its mark may be missing on the standby a failover would promote,
 * and the grant is given back (docs/design.md, "Lock-delay"). Returns 1
 * when a member's callback heard it, 0 when no member's statement was the
 * head (the connection's own statement, or none) and for c NULL (no-op).
 */
ADVLOCK_API int advlock_conn_on_notice(advlock_conn *c, const char *sqlstate, const char *words,
                                       int64_t now_ms);

/*
 * The cancel request the engine asked for m (ADVLOCK_STATEMENT_CANCEL)
 * could not be sent, for why (the client's words): an ADVLOCK_CONN_WARNING
 * event, "could not send a cancel request: <why>", and m's event callback
 * hears ADVLOCK_EVENT_WARNING. The engine asks again while the statement
 * is late. The warning is m's only while m is still the member whose
 * statement the server runs (its wait, or its late lock-delay mark); else (m cancelled, maybe
 * freed, since: it is compared, never read) it is the connection's, its member NULL. No-op for
 * NULL.
 */
ADVLOCK_API void advlock_conn_on_cancel_failed(advlock_conn *c, advlock_member *m, const char *why,
                                               int64_t now_ms);

/* The last warning's words and SQLSTATE ("" if none, or the client's own),
 * kept until the next warning; they point into c ("" for NULL). */
ADVLOCK_API const char *advlock_conn_warning(const advlock_conn *c);
ADVLOCK_API const char *advlock_conn_warning_sqlstate(const advlock_conn *c);

/* m busy (an operation under way), holding a lock, or holding one that was
 * lost; 0 for NULL. */
ADVLOCK_API int advlock_member_busy(const advlock_member *m);
ADVLOCK_API int advlock_member_held(const advlock_member *m);
ADVLOCK_API int advlock_member_lost(const advlock_member *m);

/* 1 when m's acquire waits between tries (it sends nothing till a timer,
 * so no answer is overdue); 0 otherwise and for NULL. */
ADVLOCK_API int advlock_member_sleeping(const advlock_member *m);

/* m's last operation's report (final once it ended), or NULL (none yet).
 * Points into m. */
ADVLOCK_API const advlock_report *advlock_member_report(const advlock_member *m);

/* The words of m's last failure or loss ("" if none), and its SQLSTATE
 * ("" if none); they point into m. */
ADVLOCK_API const char *advlock_member_words(const advlock_member *m);
ADVLOCK_API const char *advlock_member_sqlstate(const advlock_member *m);

/* Why m's held lock was lost by the lease, or ADVLOCK_LEASE_LIVE. */
ADVLOCK_API advlock_lease_expiry advlock_member_lease_expiry(const advlock_member *m);

/* The lease's words: why its setup refused the locks (words: what its
 * statement said, or ""), and why it ran out (words: what the failed
 * heartbeat said, or ""), into out (size bytes, always a C string).
 * advlock_lease_unbound(): 1 when the lease bounds nothing on the server
 * (behind a proxy, or after its settings changed). */
ADVLOCK_API void advlock_lease_say_setup_failed(const advlock_lease *l, const char *words,
                                                char *out, size_t size);
ADVLOCK_API void advlock_lease_say_expiry(const advlock_lease *l, advlock_lease_expiry why,
                                          const char *words, char *out, size_t size);
ADVLOCK_API int advlock_lease_unbound(const advlock_lease *l, advlock_lease_expiry why);

/* ---- Constants as data --------------------------------------------------- */

/* One integer constant of this header, for bindings that load the library
 * without a compiler. group is the enum's type name for an enumerator
 * ("advlock_outcome"), "limit" for a numeric #define, "sizeof" for the size
 * of a type (name is then the type's: "advlock_machine"). */
typedef struct advlock_constant {
    const char *group;
    const char *name;
    int64_t value;
} advlock_constant;

/*
 * Returns the table of every enumerator, numeric limit and caller-allocated
 * type's size this header declares, and stores its length in *count (when
 * count is not NULL). The table and its strings have static storage
 * duration; the caller frees nothing. It cannot fail.
 */
ADVLOCK_API const advlock_constant *advlock_constants(size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* ADVLOCK_H */
