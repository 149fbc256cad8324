/*
 * advlock_fake — deterministic simulation for advlock: a seeded random
 * generator (advlock_prng), a virtual clock (advlock_fake_clock), an
 * in-memory model of PostgreSQL's advisory lock manager answering the SQL
 * the core emits (advlock_fake_db), and a driver that runs many lock
 * machines against them, checking the lock's invariants after every event
 * (advlock_sim). Nothing here performs I/O, reads a real clock, sleeps or
 * allocates, and one seed replays a run exactly. docs/simulation.md
 * describes the layers and shows how to write a deterministic lock test.
 *
 * Library: libadvlock_fake, on top of the core's libadvlock (pkg-config
 * advlock_fake).
 *
 * Thread safety: objects are independent; one object belongs to one thread
 * at a time.
 */
#ifndef ADVLOCK_FAKE_H
#define ADVLOCK_FAKE_H

#include "advlock.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Seeded pseudo-random numbers: xoshiro256** seeded through splitmix64.
 * Integer arithmetic only, so a seed gives the same stream everywhere.
 * The generator is a plain value (copy it to fork a stream); these
 * functions cannot fail and take a non-NULL pointer to a seeded generator.
 * ====================================================================== */

typedef struct advlock_prng {
    uint64_t s_[4];
} advlock_prng;

/* Seeds the generator. Every seed, 0 included, gives a usable stream. */
ADVLOCK_API void advlock_prng_seed(advlock_prng *p, uint64_t seed);

/* Returns the next 64 random bits. */
ADVLOCK_API uint64_t advlock_prng_next(advlock_prng *p);

/* Returns a uniformly distributed value in [0, bound), without modulo bias;
 * 0 when bound is 0. */
ADVLOCK_API uint64_t advlock_prng_below(advlock_prng *p, uint64_t bound);

/* Returns a uniformly distributed value in [lo, hi]; lo when hi <= lo. */
ADVLOCK_API int64_t advlock_prng_between(advlock_prng *p, int64_t lo, int64_t hi);

/* Returns 1 with probability ppm / 1,000,000 (ppm above a million counts as
 * a million), else 0. Consumes one draw even for ppm 0, so that turning a
 * fault on or off leaves the rest of the stream where it was. */
ADVLOCK_API int advlock_prng_chance(advlock_prng *p, uint32_t ppm);

/* ======================================================================
 * Fake clock: virtual monotonic milliseconds.
 *
 * The driver owns virtual time and moves it forward, jumping to the next
 * due event. What a program reading the clock sees (advlock_fake_clock_read)
 * normally equals virtual time, but can be made to stall (stand still while
 * virtual time passes) or jump forward, as a host's CLOCK_MONOTONIC can
 * appear to do to a suspended or starved process. The reading never goes
 * backwards. A clock is a plain value; init, now and read take a non-NULL
 * pointer and cannot fail.
 * ====================================================================== */

typedef struct advlock_fake_clock {
    int64_t now_ms_;         /* virtual time */
    int64_t skew_ms_;        /* reading minus virtual time, outside a stall */
    int64_t stall_until_ms_; /* virtual time at which the current stall ends */
    int64_t frozen_ms_;      /* the reading while stalled */
    int64_t stalled_ms_;     /* total virtual time spent stalled */
    int64_t jumped_ms_;      /* total of all forward jumps */
} advlock_fake_clock;

/* Starts virtual time and the reading at start_ms, with no stall. */
ADVLOCK_API void advlock_fake_clock_init(advlock_fake_clock *c, int64_t start_ms);

/* Virtual time: what the driver has advanced the clock to. */
ADVLOCK_API int64_t advlock_fake_clock_now(const advlock_fake_clock *c);

/* What a program reading this clock sees now. */
ADVLOCK_API int64_t advlock_fake_clock_read(const advlock_fake_clock *c);

/*
 * Moves virtual time forward to now_ms (equal is allowed and changes nothing).
 * Returns 0, or ADVLOCK_EINVAL for c NULL or now_ms earlier than virtual
 * time (virtual time never goes back; nothing changes).
 */
ADVLOCK_API int advlock_fake_clock_advance_to(advlock_fake_clock *c, int64_t now_ms);

/*
 * Freezes the reading for the next ms milliseconds of virtual time; it then
 * resumes from where it froze, so the clock ends ms behind. A stall that
 * begins during another extends it. Returns 0, or ADVLOCK_EINVAL for c NULL
 * or ms < 0.
 */
ADVLOCK_API int advlock_fake_clock_stall(advlock_fake_clock *c, int64_t ms);

/*
 * Moves the reading forward by ms at once (virtual time is unchanged).
 * Returns 0, or ADVLOCK_EINVAL for c NULL or ms < 0. Saturates at INT64_MAX.
 */
ADVLOCK_API int advlock_fake_clock_jump(advlock_fake_clock *c, int64_t ms);

/* ======================================================================
 * Fake database: PostgreSQL's advisory locks, session by session.
 *
 * Faithful to PostgreSQL 15's lock manager for advisory locks: exclusive
 * (ExclusiveLock) and shared (ShareLock) modes, where shared is compatible
 * with shared and exclusive conflicts with both, and a session never
 * conflicts with itself; session-level holds stack (n acquisitions need n
 * unlocks); a session that already holds a lock in a mode gets it again at
 * once, even while others wait; otherwise a request conflicting with what
 * another session holds, or with what a waiting session asked for, is not
 * granted (try forms answer false; waiting forms join the lock's queue,
 * which is served in order as locks are released, with PostgreSQL's
 * queue-jumping and immediate deadlock rules); transaction-level holds end
 * with the transaction (COMMIT, ROLLBACK, an error inside BEGIN, or the end
 * of the statement outside BEGIN); unlocking a lock not held answers false
 * with the warning "you don't own a lock of type ExclusiveLock" (or
 * ShareLock); ending a session releases everything it holds.
 *
 * It answers exactly these statements (the text must match byte for byte;
 * $1 is one bigint parameter):
 *   SELECT pg_try_advisory_lock($1)            SELECT pg_advisory_lock($1)
 *   SELECT pg_try_advisory_lock_shared($1)     SELECT pg_advisory_lock_shared($1)
 *   SELECT pg_try_advisory_xact_lock($1)       SELECT pg_advisory_xact_lock($1)
 *   SELECT pg_try_advisory_xact_lock_shared($1) SELECT pg_advisory_xact_lock_shared($1)
 *   SELECT pg_advisory_unlock($1)              SELECT pg_advisory_unlock_shared($1)
 *   SELECT pg_advisory_unlock_all()            BEGIN   COMMIT   ROLLBACK
 *   DISCARD ALL (outside a block: the claim below reset, every advisory
 *       lock released, as PgBouncer resets a session between clients)
 *   advlock_sql_text(ADVLOCK_SQL_HOLDERS)      (rows: advlock_fake_db_holders)
 *   advlock_sql_text(ADVLOCK_SQL_LOCK) and its shared and transaction forms:
 *       the waiting function bounded by lock_timeout = $2 ms (a second
 *       bigint; 0: no bound), which ends the wait with 55P03 "canceling
 *       statement due to lock timeout" (advlock_fake_db_check_lock_timeout)
 *   advlock_sql_text(ADVLOCK_SQL_SESSION): the session's row
 *       (ADVLOCK_FAKE_ROW_SESSION: its pid, whether the database is in
 *       recovery, and whether the session is the token $1's), claiming the
 *       session for $1 as PostgreSQL would set advlock.session: only if no
 *       token claimed it and it holds no advisory lock; a claim made inside
 *       BEGIN is undone when the block fails or rolls back
 *   advlock_sql_text(ADVLOCK_SQL_HELD) and ADVLOCK_SQL_HELD_SHARED: true
 *       when the session holds key $1 in that mode, at either level (the
 *       granted row pg_locks would show), else false
 *   advlock_sql_text() of the guarded rows (ADVLOCK_SQL_TRY_LOCK_GUARDED
 *       to ADVLOCK_SQL_LOCK_SHARED_GUARDED, ADVLOCK_SQL_HELD_GUARDED and
 *       ADVLOCK_SQL_HELD_SHARED_GUARDED): their plain forms on a session
 *       the token (the last bigint) claimed, a NULL row anywhere else
 *   advlock_sql_text(ADVLOCK_SQL_LEASE_SETUP) ($1 = U ms): sets the
 *       session's TCP settings as the row's comment in advlock.h says
 *       (tcp_user_timeout U, keepalives U/1000 - 2 s, 1 s, 2;
 *       client_connection_check_interval 1 s; a SET, so a rolled-back
 *       block undoes it and DISCARD ALL resets it); true over TCP, a NULL
 *       row on a Unix socket, whose TCP settings read 0
 *       (advlock_fake_db_set_transport())
 *   advlock_sql_text(ADVLOCK_SQL_HEARTBEAT) ($1 = U ms): true while the
 *       session's tcp_user_timeout reads $1 (always on a Unix socket),
 *       else false
 *   advlock_sql_text(ADVLOCK_SQL_HEARTBEAT_GUARDED) ($2 the token): true on
 *       the session the token claimed, a NULL row anywhere else
 *   advlock_sql_text(ADVLOCK_SQL_TRY_LOCK_FENCED) and its transaction form:
 *       the exclusive try-lock that, when granted, issues key $1's next
 *       fencing token from a per-key counter starting at 1
 *       (ADVLOCK_FAKE_ROW_FENCED: fence_token, 0 when busy); in recovery
 *       25006 before anything is locked. The fake always has the schema,
 *       and its counter never rolls back (a rolled-back transaction's token
 *       is not reissued, where PostgreSQL reissues it: both increase)
 *   advlock_sql_text() of lock-delay's rows on advlock.mark ($1 the key,
 *       $2 the holder's token, $3 its stop bound; ADVLOCK_FAKE_ROW_SETTINGS):
 *       ADVLOCK_SQL_MARK_TAKE reads the key's mark of another token (its
 *       token and stop bound, else 0 and 0) and writes ours only where
 *       there is none, answering the rows written (0 or 1);
 *       ADVLOCK_SQL_MARK_WRITE writes ours over any (0, 0, 1);
 *       ADVLOCK_SQL_MARK_CLEAR deletes the key's mark if its token is $2
 *       (0, 0, rows deleted). The marks are durable: no session's end
 *       touches them (a server restart, in a world that models one, ends
 *       every session and keeps them); in recovery 25006. As with the
 *       fencing counter, the fake has the table, and a write inside a block
 *       is not undone by its rollback
 * and anything else with an error: 42883 (undefined function) for a call of
 * an unknown function, 42601 (syntax error) otherwise, 08P01 for a wrong
 * number of parameters; inside a failed transaction block, 25P02.
 * ====================================================================== */

#define ADVLOCK_FAKE_MAX_SESSIONS 256
#define ADVLOCK_FAKE_MAX_LOCKS    1024
#define ADVLOCK_FAKE_MAX_HOLDS    2048

/* Lock modes, as pg_locks names them. */
typedef enum advlock_fake_mode {
    ADVLOCK_FAKE_EXCLUSIVE = 0, /* ExclusiveLock: pg_advisory_lock */
    ADVLOCK_FAKE_SHARED = 1     /* ShareLock: pg_advisory_lock_shared */
} advlock_fake_mode;

/* What a statement produced. */
typedef enum advlock_fake_status {
    ADVLOCK_FAKE_ROW_TRUE = 0,        /* one row, boolean true */
    ADVLOCK_FAKE_ROW_FALSE = 1,       /* one row, boolean false */
    ADVLOCK_FAKE_ROW_NULL = 2,        /* one row, SQL NULL */
    ADVLOCK_FAKE_ROW_VOID = 3,        /* one row of type void (pg_advisory_lock, unlock_all) */
    ADVLOCK_FAKE_COMMAND_OK = 4,      /* BEGIN, COMMIT, ROLLBACK: no rows; see command_tag */
    ADVLOCK_FAKE_SERVER_ERROR = 5,    /* an ERROR: see sqlstate and message */
    ADVLOCK_FAKE_CONNECTION_LOST = 6, /* the session no longer exists */
    ADVLOCK_FAKE_WAITING = 7,         /* queued behind a conflicting lock: poll for the result */
    ADVLOCK_FAKE_ROWS = 8,            /* the holders query's rows: advlock_fake_db_holders() */
    ADVLOCK_FAKE_ROW_SESSION = 9,     /* the session query's row: session_pid, in_recovery, ours */
    ADVLOCK_FAKE_ROW_FENCED = 10,     /* a fenced try's row: fence_token (0: not granted) */
    ADVLOCK_FAKE_ROW_SETTINGS = 11    /* one row of three bigints: settings (the mark's rows) */
} advlock_fake_status;

#define ADVLOCK_FAKE_TEXT_MAX 160

/* A statement's result, by value; it owns its text. */
typedef struct advlock_fake_result {
    advlock_fake_status status;
    char command_tag[16];                /* "SELECT 1", "SELECT n" (rows), "BEGIN", "COMMIT",
                                            "ROLLBACK", or "" */
    char sqlstate[6];                    /* the ERROR's SQLSTATE, or "" */
    char message[ADVLOCK_FAKE_TEXT_MAX]; /* the ERROR's primary message, or "" */
    char warning_sqlstate[6];            /* a WARNING the statement raised: SQLSTATE, or "" */
    char warning[ADVLOCK_FAKE_TEXT_MAX]; /* ... and its message, or "" */
    /* ADVLOCK_FAKE_ROW_SESSION's columns (advlock_on_session's arguments),
     * else 0: pg_backend_pid(), pg_is_in_recovery(), the claim's answer. */
    int session_pid;
    int in_recovery;
    int ours;
    /* ADVLOCK_FAKE_ROW_FENCED: the token the grant issued, 0 when busy. */
    int64_t fence_token;
    /* ADVLOCK_FAKE_ROW_SETTINGS: the row's three columns, else 0. */
    int64_t settings[3];
} advlock_fake_result;

/*
 * r in the connection engine's terms (advlock_conn_on_answer()), into *out:
 * a pump of advlock_conn over the fake hands this back. rows (nrows of
 * them, NULL for none) are a holders answer's rows, read from
 * advlock_fake_db_holders() when the statement ran. *out points into r and
 * rows, which must outlive its use. No-op for r or out NULL.
 */
ADVLOCK_API void advlock_fake_answer(const advlock_fake_result *r, const advlock_holder *rows,
                                     size_t nrows, advlock_answer *out);

/* One pg_locks row of locktype advisory (objsubid 1): which session holds,
 * or waits for, a key in a mode. */
typedef struct advlock_fake_lock_row {
    int pid;
    int64_t key;
    advlock_fake_mode mode;
    int granted; /* 0 for the mode a waiting session asked for */
} advlock_fake_lock_row;

/* How a session's client reached the server: the TCP settings, and so
 * the lease's rows, answer differently (PostgreSQL reads every tcp_*
 * setting as 0 on a Unix socket). */
typedef enum advlock_fake_transport {
    ADVLOCK_FAKE_UNIX_SOCKET = 0, /* a new session's: the fidelity suite's server */
    ADVLOCK_FAKE_TCP = 1
} advlock_fake_transport;

/* A session's TCP settings as SHOW reads them back (all 0 on a Unix
 * socket; over TCP before any SET, the Linux kernel's 7200/75/9 and no user
 * timeout). */
typedef struct advlock_fake_tcp {
    int32_t user_timeout_ms;       /* tcp_user_timeout; 0: none */
    int32_t keepalives_idle_s;     /* tcp_keepalives_idle */
    int32_t keepalives_interval_s; /* tcp_keepalives_interval */
    int32_t keepalives_count;      /* tcp_keepalives_count */
    int32_t check_interval_ms;     /* client_connection_check_interval (any transport) */
} advlock_fake_tcp;

/* Private parts of the database; use the functions below. */
typedef struct advlock_fake_session_ {
    int pid_;       /* 0 when the slot is free */
    int txn_;       /* implicit, in a block, or in a failed block */
    int wait_;      /* none, queued, or ended with a result to poll */
    int wait_lock_; /* lock object the session is queued on */
    int wait_mode_;
    int wait_scope_;
    int wait_pos_;    /* place in that lock's queue, 0 = first */
    int wait_result_; /* how the wait ended */
    int finish_;      /* granted by a wake-up; its statement is still to finish */
    /* For the holders query, on the database's clock: */
    int64_t state_change_ms_;    /* start of the running statement, else end of the last */
    int64_t xact_start_ms_;      /* BEGIN of the block, else start of the last statement */
    int64_t wait_start_ms_;      /* when the waiting statement began to wait */
    int64_t lock_timeout_at_ms_; /* when its lock_timeout ends it (INT64_MAX: never) */
    /* advlock.session: the token that claimed the session (claimed_ 0: the
     * setting is unset), and its value when the open block began. */
    int64_t claim_;
    int claimed_;
    int claimed_at_begin_;
    int64_t claim_at_begin_;
    /* How the client reached the server (advlock_fake_transport), and the
     * TCP settings as SET (now, and when the open block began). */
    int transport_;
    advlock_fake_tcp tcp_;
    advlock_fake_tcp tcp_at_begin_;
} advlock_fake_session_;

typedef struct advlock_fake_lock_ {
    int64_t key_;
    int in_use_;
    int granted_[2]; /* sessions holding each mode */
    int waiting_[2]; /* sessions queued for each mode */
    int holders_;    /* hold records pointing here */
} advlock_fake_lock_;

typedef struct advlock_fake_hold_ {
    int session_; /* slot, -1 when the record is free */
    int lock_;
    int count_[2][2]; /* [mode][scope]: session-level and transaction-level */
} advlock_fake_hold_;

typedef struct advlock_fake_db {
    advlock_fake_session_ sessions_[ADVLOCK_FAKE_MAX_SESSIONS];
    advlock_fake_lock_ locks_[ADVLOCK_FAKE_MAX_LOCKS];
    advlock_fake_hold_ holds_[ADVLOCK_FAKE_MAX_HOLDS];
    int next_pid_;
    int64_t now_ms_;    /* the clock advlock_fake_db_set_time() moves */
    int in_recovery_;   /* a standby's answer to pg_is_in_recovery() */
    int sessions_used_; /* slots below this may be in use */
    int locks_used_;
    int holds_used_;
    /* The fencing counter (advlock.fence): keys and their last tokens. */
    int64_t fence_keys_[ADVLOCK_FAKE_MAX_LOCKS];
    int64_t fence_tokens_[ADVLOCK_FAKE_MAX_LOCKS];
    int fences_used_;
    /* Lock-delay's marks (advlock.mark): per key, its holder's token and
     * stop bound; durable, so nothing but the statements changes them. */
    int64_t mark_keys_[ADVLOCK_FAKE_MAX_LOCKS];
    int64_t mark_tokens_[ADVLOCK_FAKE_MAX_LOCKS];
    int64_t mark_stops_[ADVLOCK_FAKE_MAX_LOCKS];
    int marks_used_;
    int server_version_; /* whose lock manager rules: server_version_num */
} advlock_fake_db;

/* Empties the database: no sessions, no locks, its clock at 0, PostgreSQL
 * 15's rules. It holds no pointers, so it may be copied (to explore "what
 * if" without changing the original). */
ADVLOCK_API void advlock_fake_db_init(advlock_fake_db *db);

/*
 * Makes the lock manager follow the rules of the PostgreSQL version
 * server_version_num names (170000 for 17.0; init leaves 150000). The one
 * rule the supported versions (14 to 18) differ in: from 17 a try-lock by a
 * session that already holds the lock, in a mode a queued waiter needs, is
 * granted at once where a waiting request would be (ahead of that waiter,
 * when nothing ahead of it conflicts); before 17 it fails as soon as its
 * mode conflicts with any waiter's. The fidelity suite sets the version of
 * the server it compares with. No-op for db NULL.
 */
ADVLOCK_API void advlock_fake_db_set_server_version(advlock_fake_db *db, int server_version_num);

/*
 * Sets the database's clock, in ms. Only the holders query reads it: it
 * stamps each session's statement and transaction starts, grants and waits,
 * as pg_stat_activity and pg_locks record them. Set it before each call that
 * can change the lock table (exec, poll, cancel, close, check_deadlock). A
 * time earlier than the clock's is ignored: the clock never goes back.
 * No-op for db NULL.
 */
ADVLOCK_API void advlock_fake_db_set_time(advlock_fake_db *db, int64_t now_ms);

/*
 * Makes the database a hot standby (in_recovery 1) or a primary (0, as
 * init leaves it), for the session query's pg_is_in_recovery(): a driver's
 * test of ADVLOCK_ESTANDBY. Nothing else changes: the fake's advisory locks
 * work on a standby, as PostgreSQL's do. No-op for db NULL.
 */
ADVLOCK_API void advlock_fake_db_set_in_recovery(advlock_fake_db *db, int in_recovery);

/*
 * Opens a session. *pid_out receives its process id: unique for the
 * database's lifetime, never reused. Returns 0, or ADVLOCK_EINVAL (a NULL
 * argument) or ADVLOCK_ESERVER when ADVLOCK_FAKE_MAX_SESSIONS sessions are
 * open (PostgreSQL's 53300, "sorry, too many clients already").
 */
ADVLOCK_API int advlock_fake_db_connect(advlock_fake_db *db, int *pid_out);

/*
 * Ends a session, as a client disconnecting, a backend noticing a dropped
 * connection, or pg_terminate_backend: an open transaction is rolled back,
 * every lock it holds at either level is released (waking whoever can now
 * be granted), and a statement it is waiting in is abandoned. Returns 0, or
 * ADVLOCK_EINVAL for db NULL or a pid that is not an open session.
 */
ADVLOCK_API int advlock_fake_db_close(advlock_fake_db *db, int pid);

/* Returns 1 if pid is an open session, else 0. */
ADVLOCK_API int advlock_fake_db_is_open(const advlock_fake_db *db, int pid);

/*
 * Says how the session's client reached the server (a new session is
 * ADVLOCK_FAKE_UNIX_SOCKET); the TCP settings start over from the
 * transport's defaults. Set it right after connecting, as the transport is
 * fixed before the first statement. Returns 0, or ADVLOCK_EINVAL (db NULL,
 * pid not open, t not a transport).
 */
ADVLOCK_API int advlock_fake_db_set_transport(advlock_fake_db *db, int pid,
                                              advlock_fake_transport t);

/*
 * Reads the session's TCP settings back, as SHOW would, into *out: what a
 * model of the server's kernel needs to tell when the session ends after
 * its client fell silent. Returns 0, or ADVLOCK_EINVAL (db or out NULL, pid
 * not open).
 */
ADVLOCK_API int advlock_fake_db_tcp_settings(const advlock_fake_db *db, int pid,
                                             advlock_fake_tcp *out);

/*
 * Runs one statement on a session, exactly as PostgreSQL would.
 *
 * sql: the statement text (see the list above); read during the call.
 * param: the value of $1, or NULL when no parameter is sent.
 * out: receives the result. A statement that must wait for a lock leaves
 *     the session queued and answers ADVLOCK_FAKE_WAITING; collect its
 *     result later with advlock_fake_db_poll(). A pid that is not an open
 *     session answers ADVLOCK_FAKE_CONNECTION_LOST (what a client of a
 *     terminated backend sees), with the rest of out empty.
 *
 * Returns 0 whatever the statement's outcome (errors are results), or:
 *     ADVLOCK_EINVAL   db, sql or out NULL;
 *     ADVLOCK_EMISUSE  the session is still in a waiting statement, or its
 *                      result has not been polled (libpq: "another command
 *                      is already in progress").
 */
ADVLOCK_API int advlock_fake_db_exec(advlock_fake_db *db, int pid, const char *sql,
                                     const int64_t *param, advlock_fake_result *out);

/*
 * As advlock_fake_db_exec(), with nparams bigint parameters (0 to 3) at
 * params ($1, $2, $3): the bounded waits and guarded rows take two, the
 * guarded waits three (advlock_sql_params()). A count the statement does
 * not take answers 08P01, as PostgreSQL's bind does. Returns as
 * advlock_fake_db_exec(), and ADVLOCK_EINVAL for params NULL with nparams
 * > 0 or nparams outside 0..3.
 */
ADVLOCK_API int advlock_fake_db_exec_params(advlock_fake_db *db, int pid, const char *sql,
                                            const int64_t *params, int nparams,
                                            advlock_fake_result *out);

/*
 * Collects the result of a session's waiting statement.
 * Returns 1 and fills out when the wait has ended: granted (a void row),
 * deadlock (40P01, "deadlock detected"), cancelled (57014, "canceling
 * statement due to user request") or timed out (55P03, "canceling
 * statement due to lock timeout"); returns 0 while it still waits (out is
 * untouched). Errors: ADVLOCK_EINVAL (db or out NULL, or pid not open),
 * ADVLOCK_EMISUSE (the session has no waiting statement).
 */
ADVLOCK_API int advlock_fake_db_poll(advlock_fake_db *db, int pid, advlock_fake_result *out);

/* Returns 1 if pid is queued in a waiting statement (not yet granted or
 * ended), else 0. */
ADVLOCK_API int advlock_fake_db_is_waiting(const advlock_fake_db *db, int pid);

/* Where a session's waiting statement stands (advlock_fake_db_wait_state). */
typedef enum advlock_fake_wait {
    ADVLOCK_FAKE_WAIT_NONE = 0,    /* in no waiting statement (or its result was polled) */
    ADVLOCK_FAKE_WAIT_QUEUED = 1,  /* queued behind a conflicting lock */
    ADVLOCK_FAKE_WAIT_GRANTED = 2, /* granted: poll collects a void row (or, if a cancel
                                      lands first, 57014 with the lock kept) */
    ADVLOCK_FAKE_WAIT_FAILED = 3   /* ended by a deadlock or a cancel: poll collects the error */
} advlock_fake_wait;

/*
 * Where session pid's waiting statement stands, without collecting its
 * result. ADVLOCK_FAKE_WAIT_NONE for db NULL or a pid that is not open.
 */
ADVLOCK_API advlock_fake_wait advlock_fake_db_wait_state(const advlock_fake_db *db, int pid);

/*
 * Ends the transaction side of a statement that failed with an error the
 * database did not produce itself (a driver injecting a server error): a
 * transaction block becomes failed (25P02 until COMMIT or ROLLBACK), and the
 * transaction-level locks are released, waking whoever can then be granted.
 * Returns 0, or ADVLOCK_EINVAL for db NULL or a pid that is not open, and
 * ADVLOCK_EMISUSE while the session is in a waiting statement.
 */
ADVLOCK_API int advlock_fake_db_fail_statement(advlock_fake_db *db, int pid);

/*
 * Called by advlock_fake_db_each_hold() for one session's holds of one key
 * in one mode: how many at session level and at transaction level (at least
 * one of them is positive). Return 0 to go on, anything else to stop.
 */
typedef int (*advlock_fake_hold_fn)(void *user, int pid, int64_t key, advlock_fake_mode mode,
                                    int session_level, int transaction_level);

/*
 * Calls fn for every hold in the lock table, in no particular order, until
 * fn returns non-zero. Cheaper than advlock_fake_db_lock_rows() (no sorting,
 * no buffer), for checks that run after every event. fn must not change db.
 * Returns fn's non-zero value, or 0 when every hold was visited (also for db
 * or fn NULL).
 */
ADVLOCK_API int advlock_fake_db_each_hold(const advlock_fake_db *db, advlock_fake_hold_fn fn,
                                          void *user);

/*
 * Cancels a session's waiting statement, as pg_cancel_backend does: the
 * session leaves the queue and its statement ends with 57014 (collect it
 * with advlock_fake_db_poll()). A statement whose wait was granted but whose
 * result has not been collected yet is still running on the server (its
 * backend has not returned from the lock wait): the cancel ends it with
 * 57014 all the same, as PostgreSQL does, and the lock stays granted (a
 * session-level one; a transaction-level one ends with the transaction the
 * error aborts). Returns 1 if a statement was cancelled, 0 if the session
 * was in none (nothing changes), or ADVLOCK_EINVAL for db NULL or a pid
 * that is not open.
 */
ADVLOCK_API int advlock_fake_db_cancel(advlock_fake_db *db, int pid);

/*
 * Runs the deadlock check PostgreSQL runs deadlock_timeout (1 s by default)
 * after a session starts waiting: if the waiting session pid is part of a
 * cycle of sessions waiting for each other, its statement ends with 40P01.
 * Drivers call it when that time has passed. (PostgreSQL may first try to
 * rearrange wait queues to break a cycle without an error; this model
 * always reports it.) Returns 1 if a deadlock ended the wait, 0 if not, or
 * ADVLOCK_EINVAL for db NULL or a pid that is not open.
 */
ADVLOCK_API int advlock_fake_db_check_deadlock(advlock_fake_db *db, int pid);

/*
 * Runs the lock timeout a bounded wait set ($2 ms after it began to wait),
 * as PostgreSQL's timer does: if the database's clock has reached it, the
 * statement ends with 55P03 (collect it with advlock_fake_db_poll()). As
 * with a cancel (advlock_fake_db_cancel), a wait granted but whose result
 * has not been collected is still in the lock wait on the server: the
 * timeout ends it with 55P03 all the same, the lock kept. Drivers call it
 * when that time has passed. Returns 1 if the timeout ended the statement,
 * 0 if not (not due, no bound, no waiting statement), or ADVLOCK_EINVAL for
 * db NULL or a pid that is not open.
 */
ADVLOCK_API int advlock_fake_db_check_lock_timeout(advlock_fake_db *db, int pid);

/*
 * How many times session pid holds key in mode, at session level and at
 * transaction level; either pointer may be NULL. Returns 0, or
 * ADVLOCK_EINVAL (db NULL, pid not open, mode invalid). A session that holds
 * nothing gets 0 and 0.
 */
ADVLOCK_API int advlock_fake_db_holds(const advlock_fake_db *db, int pid, int64_t key,
                                      advlock_fake_mode mode, int *session_level,
                                      int *transaction_level);

/*
 * The pg_locks picture: one row per session, key and mode held (whatever the
 * count or level), and one ungranted row per waiting session, ordered by
 * pid, key, mode, then granted before waiting. Writes at most max rows to
 * rows (which may be NULL when max is 0) and returns how many there are.
 */
ADVLOCK_API size_t advlock_fake_db_lock_rows(const advlock_fake_db *db, advlock_fake_lock_row *rows,
                                             size_t max);

/*
 * The rows of the holders query (advlock_sql_text(ADVLOCK_SQL_HOLDERS)) for
 * key, as session pid gets them when it runs that query now: one granted row
 * per session and mode held, then one ungranted row per waiting session,
 * ordered by granted (first), pid, mode. Call it right after
 * advlock_fake_db_exec() ran the query on pid (which answered
 * ADVLOCK_FAKE_ROWS, "SELECT n"), before anything else changes.
 *
 * Columns as PostgreSQL fills them: pid; granted; mode "ExclusiveLock" or
 * "ShareLock"; application_name ""; client "local"; state "active" (pid
 * itself, and sessions waiting in a statement), "idle", "idle in
 * transaction" or "idle in transaction (aborted)"; backend_start ""; seconds
 * = floor((now() - since) / 1 s), where now() is the start of pid's
 * transaction (its BEGIN inside a block, so it can be negative) and since is
 * the session's state_change for a holder (the end of its last statement,
 * the start of a running one) and the wait's start for a waiter. The strings
 * are static. pid may be 0 or a closed session: an outside observer, whose
 * now() is the clock.
 *
 * Writes at most max rows to rows (NULL when max is 0) and returns how many
 * there are; 0 for db NULL.
 */
ADVLOCK_API size_t advlock_fake_db_holders(const advlock_fake_db *db, int pid, int64_t key,
                                           advlock_holder *rows, size_t max);

/*
 * Checks the database's internal consistency: grants never conflict between
 * sessions, granted counts match the hold records, and no queued session
 * could be granted now (no missed wake-up). Returns 0 if all hold; else
 * ADVLOCK_EINVAL and, when why is not NULL, a one-line reason in why (cut to
 * size bytes).
 */
ADVLOCK_API int advlock_fake_db_check(const advlock_fake_db *db, char *why, size_t size);

/* ======================================================================
 * Faults and latency, for the simulation driver.
 * ====================================================================== */

/*
 * Round-trip time of one query, in virtual ms: uniform in [min_ms, max_ms],
 * except that with probability tail_ppm / 1e6 it is uniform in
 * [max_ms, tail_max_ms] instead (slow outliers). The request reaches the
 * server after half of it (rounded down).
 */
typedef struct advlock_fake_latency {
    int64_t min_ms;
    int64_t max_ms;
    uint32_t tail_ppm;
    int64_t tail_max_ms;
} advlock_fake_latency;

/*
 * Faults, each with a probability in parts per million. All zero: none.
 * Per query, at most one of: the result is SQL NULL (the statement is not
 * applied, as for a strict function given NULL); a server error, 57014,
 * 40001 or XX000 in turn at random (not applied; inside a transaction block
 * it aborts the block, as any error does); the connection drops before the
 * server applies the query, or right after it did. NULL applies only to the
 * machine's lock and unlock statements, errors also to the holders query;
 * BEGIN, COMMIT and ROLLBACK only meet drops. After a drop the client sees a
 * lost connection, and the server notices within drop_detect_max_ms and ends
 * the session then, releasing its locks.
 * Per lock a client acquires: the session is terminated (pg_terminate_backend)
 * at a random moment within kill_within_ms while the client holds it.
 * Per sleep a client starts, and per server-side wait (its deadline timer):
 * its clock stalls for up to stall_max_ms, or jumps forward by up to
 * jump_max_ms, at a random moment within the sleep (or before the deadline).
 */
typedef struct advlock_fake_faults {
    uint32_t null_ppm;
    uint32_t error_ppm;
    uint32_t drop_before_ppm;
    uint32_t drop_after_ppm;
    int64_t drop_detect_max_ms;
    uint32_t kill_ppm;
    int64_t kill_within_ms;
    uint32_t stall_ppm;
    int64_t stall_max_ms;
    uint32_t jump_ppm;
    int64_t jump_max_ms;
} advlock_fake_faults;

/* ======================================================================
 * The world the clients live in (optional; advlock_sim_set_model): when
 * their processes start, how long they take to get to their first
 * statement, each statement's time at the server and the server's queue,
 * and what running the held command adds to a hold. Each is an empirical
 * distribution, as measured on a real server by `advlock calibrate`
 * (docs/simulation.md). Integer arithmetic only: a seed gives the same run
 * on every platform and compiler.
 * ====================================================================== */

#define ADVLOCK_SIM_DIST_POINTS 21

/*
 * An empirical distribution of durations in microseconds, given by count
 * values at evenly spaced quantiles: us[0] is the least, us[count - 1] the
 * greatest, us[i] the i / (count - 1) quantile; non-decreasing. count 0
 * means always 0, count 1 always us[0]. A plain value.
 */
typedef struct advlock_sim_dist {
    uint32_t count;
    int64_t us[ADVLOCK_SIM_DIST_POINTS];
} advlock_sim_dist;

/* The largest value a distribution may hold: one hour, in microseconds. */
#define ADVLOCK_SIM_DIST_MAX_US (INT64_C(3600) * 1000000)

/*
 * Checks d: count at most ADVLOCK_SIM_DIST_POINTS, every value from 0 to
 * ADVLOCK_SIM_DIST_MAX_US, none less than the one before. Returns 0, or
 * ADVLOCK_EINVAL (also for d NULL).
 */
ADVLOCK_API int advlock_sim_dist_check(const advlock_sim_dist *d);

/*
 * Draws a value from a checked distribution, in microseconds: a uniform
 * quantile, linear between the two points around it. Takes one
 * advlock_prng_below() of p whatever the count (0 and 1 included), so that
 * a constant leaves the stream where any other distribution would. Returns
 * 0 for d or p NULL.
 */
ADVLOCK_API int64_t advlock_sim_dist_draw(const advlock_sim_dist *d, advlock_prng *p);

/*
 * The world: each client's process starts `launch` after the run's start
 * and sends its first statement `startup` later (exec, connect, prepare);
 * every statement takes `statement` at the server (replacing the
 * configuration's latency: it reaches the server halfway through, and the
 * answer is back at the end), where at most `servers` statements are
 * worked on at once and the rest queue in the order they were sent (0: no
 * queue); every timer a client sets (a sleep, a wait's deadline) fires
 * `wakeup` late (a sleeping process waits to be scheduled again); and the
 * built-in cycler adds `command` to each hold (starting and reaping the
 * command that runs while the lock is held). A cancel request takes one and
 * a half `statement` draws, queueing for nothing.
 */
typedef struct advlock_sim_model {
    advlock_sim_dist launch;
    advlock_sim_dist startup;
    advlock_sim_dist statement;
    uint32_t servers;
    advlock_sim_dist wakeup;
    advlock_sim_dist command;
} advlock_sim_model;

/* ======================================================================
 * Simulation driver.
 *
 * Clients run plans: sequences of steps (acquire, release, pause,
 * reconnect, BEGIN, COMMIT, ROLLBACK) chosen by a script, by the built-in
 * random cycler, or by your own function. Each client has its own lock
 * machine (with its own advlock_options: advlock_sim_set_options), fake
 * session and clock; one event queue ordered by (virtual time, sequence
 * number) runs them all, so a seed determines the whole run. The driver
 * does what a real one does for every action: queries with latency,
 * sleeps on the client's clock, server-side waits (the answer comes when
 * the server grants the lock; PostgreSQL's deadlock check runs after
 * deadlock_timeout, 1 s), cancel requests at a wait's deadline (they reach
 * the server one and a half round trips later, over a new connection, and
 * cancel whatever the session is waiting in then, as pg_cancel_backend
 * does; one that arrives before the query is ignored, as PostgreSQL ignores
 * a cancel for an idle session), and holder diagnostics answered from the
 * fake's lock table. After every event the driver checks the invariants
 * listed in docs/simulation.md and stops at the first violation.
 * ====================================================================== */

#define ADVLOCK_SIM_MAX_CLIENTS   64
#define ADVLOCK_SIM_MAX_KEYS      16
#define ADVLOCK_SIM_VIOLATION_MAX 512

/* advlock_sim_run() returns this (a positive value, not an advlock_error)
 * when an invariant failed; advlock_sim_violation() says which. */
#define ADVLOCK_SIM_VIOLATION 1

typedef enum advlock_sim_step_kind {
    ADVLOCK_SIM_STOP = 0,      /* the client's plan is over */
    ADVLOCK_SIM_ACQUIRE = 1,   /* acquire lock_name within timeout_ms */
    ADVLOCK_SIM_RELEASE = 2,   /* release one hold of lock_name */
    ADVLOCK_SIM_PAUSE = 3,     /* do nothing for pause_ms (think, or hold) */
    ADVLOCK_SIM_RECONNECT = 4, /* close the session (releasing its locks), open another */
    ADVLOCK_SIM_BEGIN = 5,     /* send BEGIN: transaction-scoped locks last until its end */
    ADVLOCK_SIM_COMMIT = 6,    /* send COMMIT, releasing the transaction's locks */
    ADVLOCK_SIM_ROLLBACK = 7   /* send ROLLBACK, likewise */
} advlock_sim_step_kind;

/* One step of a plan. Designated initializers read well:
 *     {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "migrations", .timeout_ms = 5000} */
typedef struct advlock_sim_step {
    advlock_sim_step_kind kind;
    const char *lock_name;   /* ACQUIRE, RELEASE: a NUL-terminated name */
    int64_t timeout_ms;      /* ACQUIRE */
    int64_t cancel_after_ms; /* ACQUIRE: if > 0, cancel this long after the start */
    int64_t pause_ms;        /* PAUSE */
} advlock_sim_step;

/*
 * How a client's step ended, as its plan (or a script's record) sees it.
 * The outcome is read in one place, report.outcome; advlock_describe(&report,
 * name, len, server_message, buf, size) renders it as the core's sentence.
 */
typedef struct advlock_sim_done {
    advlock_sim_step step; /* the step, as given */
    /* ACQUIRE, RELEASE: the machine's final report (outcome, failure,
     * SQLSTATE, key, attempts, holder facts...). BEGIN, COMMIT, ROLLBACK:
     * outcome FAILED with failure and sqlstate when the statement failed,
     * else all zero. */
    advlock_report report;
    /* 0, or the advlock_error with which the machine refused to start the
     * step (an invalid name: ADVLOCK_EUTF8); report.outcome is then FAILED
     * with failure 0. */
    int error;
    char command_tag[16]; /* BEGIN, COMMIT, ROLLBACK: the server's tag (a COMMIT
                             of a failed block answers "ROLLBACK"), else "" */
    /* The server's or driver's words with the last failing result, for
     * advlock_describe(), or "". */
    char server_message[ADVLOCK_FAKE_TEXT_MAX];
    int cancel_sent;    /* ACQUIRE: the driver cancelled it */
    int64_t started_ms; /* virtual time the step began */
    int64_t ended_ms;   /* ... and ended */
} advlock_sim_done;

struct advlock_sim;

/*
 * A plan: called when client starts (last NULL) and whenever its previous
 * step ends; fills *next. It may draw randomness from advlock_sim_prng(sim)
 * and look at the database through advlock_sim_db(sim); whatever it changes
 * there behind the clients' backs, the invariants will judge.
 */
typedef void (*advlock_sim_plan_fn)(void *state, struct advlock_sim *sim, int client,
                                    const advlock_sim_done *last, advlock_sim_step *next);

/*
 * The built-in random plan: `cycles` times, think, acquire a lock chosen
 * uniformly from lock_names with a timeout uniform in [timeout_min_ms,
 * timeout_max_ms] (cancelled with probability cancel_ppm after up to
 * cancel_max_ms), hold it for a time uniform in [hold_min_ms, hold_max_ms],
 * release it. It reconnects when a step leaves it unsure what its session
 * holds, and retries a release that failed with a server error (the lock is
 * still held) up to 3 times. When the client's options are
 * transaction-scoped, each cycle runs inside BEGIN ... COMMIT (ROLLBACK when
 * the acquire did not succeed), since such a lock lasts only as long as its
 * transaction. lock_names must outlive the run.
 */
typedef struct advlock_sim_cycler {
    const char *const *lock_names;
    size_t lock_count;
    unsigned cycles;
    int64_t think_min_ms, think_max_ms;
    int64_t hold_min_ms, hold_max_ms;
    int64_t timeout_min_ms, timeout_max_ms;
    uint32_t cancel_ppm;
    int64_t cancel_max_ms;
} advlock_sim_cycler;

/*
 * The trace: one JSON object per line, handed to write() as it happens.
 * line is not NUL-terminated, ends with '\n', and is valid during the call.
 */
typedef void (*advlock_sim_trace_fn)(void *user, const char *line, size_t len);

/*
 * What each client's connection engine announces of its server sessions
 * (advlock_sim_config.sessions): the engine checks every server session it
 * reaches, with a fresh token after each reconnect, as the libpq adapter's.
 */
typedef enum advlock_sim_sessions {
    /* As DIRECT (kept for the callers that name it). */
    ADVLOCK_SIM_SESSIONS_NONE = 0,
    /* A direct connection: the session's pid is announced; the engine
     * checks it once, then sends the plain rows. */
    ADVLOCK_SIM_SESSIONS_DIRECT = 1,
    /* Behind a session-pooling proxy: the same, but the pid announced is the
     * proxy's own, so the machine claims the server session and sends the
     * guarded rows, which the fake runs only where the claim holds (a claim
     * made inside a block that rolls back is undone: then they fail
     * ADVLOCK_ESESSION). */
    ADVLOCK_SIM_SESSIONS_PROXIED = 2
} advlock_sim_sessions;

typedef struct advlock_sim_config {
    uint64_t seed;    /* the whole run follows from it */
    int64_t start_ms; /* virtual time at the start */
    advlock_fake_latency latency;
    advlock_fake_faults faults;
    int64_t max_virtual_ms;     /* a run still busy after this long fails (progress) */
    advlock_sim_trace_fn trace; /* NULL: no trace */
    void *trace_user;
    int sessions; /* an advlock_sim_sessions value */
} advlock_sim_config;

/* Counters of a run. */
typedef struct advlock_sim_stats {
    uint64_t events;                          /* events processed */
    uint64_t queries;                         /* queries sent */
    uint64_t outcomes[ADVLOCK_OUTCOME_COUNT]; /* DONE outcomes by advlock_outcome */
    uint64_t faults;  /* faults injected (query faults, kills, stalls, jumps) */
    uint64_t waits;   /* lock statements that waited at the server */
    uint64_t cancels; /* cancel requests sent (a server-side wait's deadline, or cancel) */
    int64_t end_ms;   /* virtual time when the run ended */
} advlock_sim_stats;

/*
 * A simulation: ADVLOCK_SIM_SIZE bytes of storage that only the functions
 * below read or write (the clients' connection engines and plans, the event
 * queue, the fake database, and the policy model that judges each machine:
 * none of it is part of the ABI, only the size is): 512 KiB, of which the
 * simulation uses about 470 KB, the rest room to grow without an ABI break: declare it
 * static or allocate it, rather than put it on a small stack. It holds
 * pointers only to what the caller passed (plans' states, scripts, lock
 * names, the trace callback), so it may not be copied while it runs.
 */
#define ADVLOCK_SIM_SIZE ((size_t)512 * 1024)

typedef struct advlock_sim {
    union {
        unsigned char bytes_[ADVLOCK_SIM_SIZE];
        int64_t align_int_; /* aligned for whatever the simulation keeps */
        void *align_pointer_;
        double align_double_;
    } opaque_;
} advlock_sim;

/*
 * Fills a configuration with the defaults: seed 1, start at 0 ms, zero
 * latency, no faults, max_virtual_ms one day, no trace.
 */
ADVLOCK_API void advlock_sim_config_default(advlock_sim_config *cfg);

/*
 * Prepares a simulation with no clients. config NULL means the defaults;
 * it is copied. Returns 0, or ADVLOCK_EINVAL for sim NULL or a config with
 * negative durations, a latency range with max < min, or max_virtual_ms <= 0.
 */
ADVLOCK_API int advlock_sim_init(advlock_sim *sim, const advlock_sim_config *config);

/*
 * Adds a client that follows plan(state, ...). Returns the client's index
 * (0, 1, ...), or ADVLOCK_EINVAL (sim or plan NULL, ADVLOCK_SIM_MAX_CLIENTS
 * reached) or ADVLOCK_EMISUSE (the simulation has already run).
 */
ADVLOCK_API int advlock_sim_add_client(advlock_sim *sim, advlock_sim_plan_fn plan, void *state);

/*
 * Adds a client that runs steps[0..count) in order, then stops. When done
 * is not NULL, done[i] records how step i ended. steps, the names they
 * point to, and done must outlive the run. Returns as advlock_sim_add_client.
 */
ADVLOCK_API int advlock_sim_add_script(advlock_sim *sim, const advlock_sim_step *steps,
                                       size_t count, advlock_sim_done *done);

/*
 * Adds a client that follows the random cycler (copied). Returns as
 * advlock_sim_add_client, also ADVLOCK_EINVAL for no lock names, a NULL name,
 * or inverted ranges.
 */
ADVLOCK_API int advlock_sim_add_cycler(advlock_sim *sim, const advlock_sim_cycler *cycler);

/*
 * Sets the options of client's lock machine (see advlock_set_options) for
 * its operations from now on; o is copied. To keep the run a function of its
 * seed, the machine's jitter generator is seeded from the run's seed, the
 * client's index and o->jitter_seed together; a random callback in o is
 * used as given (the schedule invariant then checks each sleep's range
 * rather than its exact value). o->on_event is called as usual. Call it
 * before the run, or from the client's plan (between steps).
 *
 * Returns 0, or ADVLOCK_EINVAL (sim or o NULL, an unknown client, a value
 * outside its enum) or ADVLOCK_EMISUSE (the client is in the middle of a
 * step).
 */
ADVLOCK_API int advlock_sim_set_options(advlock_sim *sim, int client, const advlock_options *o);

/*
 * Puts the clients in the world m describes (copied), instead of starting
 * them all at once with the configuration's latency. Call it after
 * advlock_sim_init and before the run. Without it, nothing changes: a seed
 * gives the run it gave before models existed. Returns 0, or ADVLOCK_EINVAL
 * (sim or m NULL, a distribution advlock_sim_dist_check refuses, servers
 * above ADVLOCK_SIM_MAX_CLIENTS) or ADVLOCK_EMISUSE (the simulation has
 * already run).
 */
ADVLOCK_API int advlock_sim_set_model(advlock_sim *sim, const advlock_sim_model *m);

/*
 * When the process that makes client's first acquire started, in virtual
 * ms: the run's start plus its launch draw under a model (known once the
 * run began), else the run's start; plus the pauses (think time) its plan
 * took before that acquire, which a process spends before it starts, not
 * waiting for the lock. ADVLOCK_EINVAL for sim NULL or an unknown client.
 */
ADVLOCK_API int64_t advlock_sim_client_launched(const advlock_sim *sim, int client);

/*
 * Runs the simulation until every plan has stopped and every event has been
 * handled, checking the invariants after every event; then closes every
 * session. Returns 0 when all held, ADVLOCK_SIM_VIOLATION at the first that
 * did not (see advlock_sim_violation), or ADVLOCK_EINVAL (sim NULL),
 * ADVLOCK_EMISUSE (it has already run).
 */
ADVLOCK_API int advlock_sim_run(advlock_sim *sim);

/* The violation that stopped the run, one line starting "seed <seed>: ",
 * or "" if none. Valid as long as sim. */
ADVLOCK_API const char *advlock_sim_violation(const advlock_sim *sim);

/* The run's counters so far. */
ADVLOCK_API advlock_sim_stats advlock_sim_get_stats(const advlock_sim *sim);

/* The seeded stream plans draw from; NULL for sim NULL. */
ADVLOCK_API advlock_prng *advlock_sim_prng(advlock_sim *sim);

/* The fake database the clients' sessions live in; NULL for sim NULL. */
ADVLOCK_API advlock_fake_db *advlock_sim_db(advlock_sim *sim);

/* The process id of client's current session, or ADVLOCK_EINVAL for an
 * unknown client. */
ADVLOCK_API int advlock_sim_client_pid(const advlock_sim *sim, int client);

/* Virtual time now; during a plan call, the time its previous step ended. */
ADVLOCK_API int64_t advlock_sim_now(const advlock_sim *sim);

/* ======================================================================
 * The lease world: a few clients take turns holding one lock over TCP to
 * the fake database, each connection the core's connection engine
 * (advlock_conn) with the lease set and one member, the world its pump,
 * while a link is cut silently (a partition: every segment both ways
 * lost, TCP retransmitting) or a client is paused (a frozen VM: its link
 * cut and its timers held). The server ends a silent client's session as
 * Linux does from its TCP settings (advlock_fake_db_tcp_settings():
 * keepalive ticks; at the first tick U after the last segment it received,
 * plus an overshoot of 0 to 750 ms, the timer lateness measured in
 * docs/design.md "Leases"). A holder's work runs from its ACQUIRED to its
 * stop: the release's start, or the engine's LOST plus a stop time of 0
 * to K; it closes its connection only then. The server may also end
 * sessions on its own (advlock_sim_end): a terminate of the lock holder's
 * session, a crash and restart ending every session; the client hears of
 * it only from the reset its next statement meets. docs/simulation.md
 * describes the world.
 * ====================================================================== */

#define ADVLOCK_SIM_LEASE_MAX_CLIENTS 4
#define ADVLOCK_SIM_LEASE_MAX_CUTS    4
#define ADVLOCK_SIM_LEASE_MAX_ENDS    4

typedef enum advlock_sim_cut_kind {
    ADVLOCK_SIM_CUT_PARTITION = 0, /* the client's link drops every segment */
    ADVLOCK_SIM_CUT_PAUSE = 1      /* the client (and its kernel) is frozen */
} advlock_sim_cut_kind;

typedef struct advlock_sim_cut {
    advlock_sim_cut_kind kind;
    int64_t at_ms, length_ms;
    int client; /* which client, or -1: the one working at at_ms (else client 0) */
} advlock_sim_cut;

typedef enum advlock_sim_end_kind {
    /* pg_terminate_backend of the session holding the lock at at_ms (none
     * holding: nothing happens); its locks are free at once */
    ADVLOCK_SIM_END_TERMINATE = 0,
    /* the server crashes: every session ends, and no connection is taken
     * for length_ms; durable rows (the marks) stay */
    ADVLOCK_SIM_END_RESTART = 1
} advlock_sim_end_kind;

/* A session ending on the server's side, at a chosen time. */
typedef struct advlock_sim_end {
    advlock_sim_end_kind kind;
    int64_t at_ms, length_ms; /* length_ms: a restart's time down (a terminate: unused) */
} advlock_sim_end;

typedef struct advlock_sim_lease_config {
    uint64_t seed;
    int clients;               /* 2 to ADVLOCK_SIM_LEASE_MAX_CLIENTS */
    int64_t lease_ms, stop_ms; /* the plan's L and K (advlock_lease_plan_init) */
    /* 1: the engines run the lease. 0: no lease; the connection's startup
     * options set the server's keepalives (advlock_lease_options()), as a
     * driver that only sets keepalives: the release bound holds, the stop
     * bound does not, and cuts make holders overlap. */
    int heartbeats;
    /* 1: a holder closes its connection as soon as its lock is lost, not
     * once its work stopped: the close can free the lock under the
     * stopping work (a driver's mistake, shown by the campaign). */
    int close_at_expiry;
    int64_t run_ms;                   /* no hold starts after this virtual time */
    int64_t hold_min_ms, hold_max_ms; /* each hold's work, drawn */
    int64_t latency_max_ms;           /* one way, drawn from 0 */
    advlock_sim_cut cuts[ADVLOCK_SIM_LEASE_MAX_CUTS];
    int ncuts;
    /* 1: every acquire asks for lock-delay (options.lock_delay; needs
     * heartbeats), its timeout lengthened by U + M, the longest wait. */
    int lock_delay;
    /* the server's own ends of sessions, in any order */
    advlock_sim_end ends[ADVLOCK_SIM_LEASE_MAX_ENDS];
    int nends;
    /* Called with each line of the run's timeline, or NULL. */
    void (*trace)(void *user, const char *line);
    void *trace_user;
} advlock_sim_lease_config;

typedef struct advlock_sim_lease_stats {
    uint64_t holds;      /* works started */
    uint64_t heartbeats; /* sent */
    uint64_t expiries;   /* held locks lost: the lease ran out, or the connection closed */
    uint64_t releases;   /* sessions the server ended for silence */
    uint64_t partitions, pauses;
    /* partitions that cut a working holder for no longer than the blip the
     * plan tolerates (advlock_sim_lease_tolerated_blip_ms()) */
    uint64_t blips;
    uint64_t spurious_stops;  /* losses with no pause and no cut longer than the tolerated blip */
    uint64_t overlaps;        /* a work began while another's went on, neither paused */
    uint64_t paused_overlaps; /* the same with the other holder paused during its work */
    int64_t max_overlap_ms;   /* of the counted overlaps */
    /* a silent session's end after the last segment it received: the
     * longest, and the least time left of the lease then (INT64_MAX if none) */
    int64_t max_release_ms, min_lease_left_ms;
    /* a silent session's end freeing a lock, minus the stop of the work it
     * guarded, for holders never paused (negative: a lock freed under
     * running work); INT64_MAX if none */
    int64_t min_stop_margin_ms;
    /* sessions a terminate ended, restarts, and acquires that waited out
     * another holder's mark (lock-delay's warning) */
    uint64_t terminates, restarts, delay_waits;
    /* the next work's start minus the stop of a work whose session the
     * server ended (terminate, restart) under it: the least (negative: an
     * overlap), INT64_MAX if none */
    int64_t min_handover_ms;
    char violation[ADVLOCK_SIM_VIOLATION_MAX]; /* the first, or "" */
} advlock_sim_lease_stats;

/*
 * The longest partition a holder rides out with no stop, by the plan's
 * arithmetic: a heartbeat sent just before the cut is answered at TCP's
 * first retransmission after it, at most twice the cut later, so
 * (D - H - 400 ms) / 2. 0 for p NULL.
 */
ADVLOCK_API int64_t advlock_sim_lease_tolerated_blip_ms(const advlock_lease_plan *p);

/*
 * Runs one lease world to its end (every hold stopped or released, every
 * session ended) and fills *out. Violations: two holders' work overlapping
 * with neither paused, a stop no cut and no server end explains, a
 * session the server ended later than L after its client fell silent, an
 * engine refusing what its pump hands it; overlaps a pause explains are
 * counted, not violations (only fencing covers a paused holder). Needs no
 * heap (about 185 KiB of stack).
 *
 * Returns 0, ADVLOCK_SIM_VIOLATION (out->violation has the first), or
 * ADVLOCK_EINVAL (cfg or out NULL, clients out of range, a plan
 * advlock_lease_plan_init() refuses, a negative duration, ncuts or nends
 * out of range, a cut naming no client, an end of no kind, lock_delay
 * without heartbeats).
 */
ADVLOCK_API int advlock_sim_lease_run(const advlock_sim_lease_config *cfg,
                                      advlock_sim_lease_stats *out);

/* ======================================================================
 * The lock-set world: lock sets (docs/design.md "Lock sets") against the
 * fake database. Each set is one connection, one server session, shared
 * by several callers, each with its own machine; their statements go out
 * in order on that connection (pipelined, or one at a time behind a
 * proxy) and come back in order, and the set answers local conflicts
 * through its advlock_peers table as the drivers must. Ordinary clients,
 * one caller per connection, contend for the same keys. Callers lock and
 * release in cycles, shared or exclusive, with timeouts and cancels;
 * faults kill sessions (every held member of a set must then be LOST at
 * once) and fail statements. Checked after every event: no two callers
 * whose sessions live believe they hold one key in conflicting modes; per
 * connection, key and mode, the server's hold count equals the holds its
 * callers were told of (a set: its HELD peers) plus the answers still on
 * their way. At the end nothing is held and every peers table is empty.
 * ====================================================================== */

#define ADVLOCK_SIM_LOCKSET_MAX_SETS    4
#define ADVLOCK_SIM_LOCKSET_MAX_MEMBERS 16
#define ADVLOCK_SIM_LOCKSET_MAX_LONERS  8
#define ADVLOCK_SIM_LOCKSET_MAX_KEYS    4

typedef struct advlock_sim_lockset_config {
    uint64_t seed;
    int sets;        /* connections shared by callers: 1 to ADVLOCK_SIM_LOCKSET_MAX_SETS */
    int members;     /* callers per set: 1 to ADVLOCK_SIM_LOCKSET_MAX_MEMBERS */
    int loners;      /* ordinary clients, a connection each: 0 to ..._MAX_LONERS */
    int keys;        /* lock names they share: 1 to ADVLOCK_SIM_LOCKSET_MAX_KEYS */
    unsigned cycles; /* acquire (and release, if acquired) per caller: 1 or more */
    /* Every connection announces a proxy's pid: the session check claims
     * its server session, the guarded rows run, and each connection sends
     * one statement at a time. 0: direct, sets pipeline. */
    int proxied;
    int diagnose;           /* callers that time out ask who holds the key */
    uint32_t shared_ppm;    /* an acquire is shared */
    uint32_t fence_ppm;     /* a direct exclusive acquire takes a fencing token */
    uint32_t cancel_ppm;    /* an acquire is cancelled at a random time */
    uint32_t kill_ppm;      /* per connection: its session is terminated once */
    uint32_t error_ppm;     /* a lock, session or holders statement fails */
    int64_t latency_max_ms; /* one way, drawn from 0 */
    int64_t think_max_ms, hold_max_ms, timeout_max_ms;
    /* Called with each line of the run's timeline, or NULL. */
    void (*trace)(void *user, const char *line);
    void *trace_user;
} advlock_sim_lockset_config;

typedef struct advlock_sim_lockset_stats {
    uint64_t events;
    uint64_t statements;  /* sent to the server */
    uint64_t local_busy;  /* tries a set answered itself: a peer conflicted */
    uint64_t server_busy; /* tries the server refused */
    uint64_t acquired, timed_out, cancelled, failed, released;
    uint64_t kills, lost;                      /* sessions terminated; held locks told LOST */
    int max_in_flight;                         /* most statements out at once on one connection */
    char violation[ADVLOCK_SIM_VIOLATION_MAX]; /* the first, or "" */
} advlock_sim_lockset_stats;

/*
 * Runs one lock-set world to its end (every caller done its cycles, every
 * statement answered) and fills *out. Needs no heap (about 480 KiB of
 * stack). Returns 0, ADVLOCK_SIM_VIOLATION (out->violation has the first),
 * or ADVLOCK_EINVAL (cfg or out NULL, a count out of range, a negative
 * duration).
 */
ADVLOCK_API int advlock_sim_lockset_run(const advlock_sim_lockset_config *cfg,
                                        advlock_sim_lockset_stats *out);

/*
 * Returns the table of every enumerator, numeric limit and caller-allocated
 * type's size this header declares (advlock_constant, as advlock_constants()
 * gives advlock.h's), and stores its length in *count (when count is not
 * NULL). Static storage; the caller frees nothing. It cannot fail.
 */
ADVLOCK_API const advlock_constant *advlock_fake_constants(size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* ADVLOCK_FAKE_H */
