/* Declarations shared by the fake database's and simulation's files; none
 * of this is exported. */
#ifndef ADVLOCK_FAKE_INTERNAL_H
#define ADVLOCK_FAKE_INTERNAL_H

#include "advlock_fake.h"

/* The files call downwards only, never back up:
 *     db.c -> lock_table.c, deadlock.c, holders.c, statements.c, result.c,
 *             tcp_settings.c, marks.c
 *     lock_table.c, deadlock.c, holders.c, inspect.c -> lock_queue.c
 *     inspect.c (reads the database, changes nothing) -> lock_table.c
 *     holders.c, inspect.c, marks.c, statements.c, tcp_settings.c -> result.c
 * Every file finds a session's slot with advlock_fake_db_slot() below.
 * A wake-up inside the lock table only marks the sessions it grants
 * (finish_); the database finishes their statements after each call
 * (advlock_db_finish_granted). */

/* ---- sessions' states (db.c owns them; the lock manager reads them) ---- */

enum { TXN_IMPLICIT = 0, TXN_BLOCK = 1, TXN_FAILED = 2 };
enum { WAIT_NONE = 0, WAIT_QUEUED = 1, WAIT_ENDED = 2 };
enum { WAIT_GRANTED = 0, WAIT_DEADLOCK = 1, WAIT_CANCELLED = 2, WAIT_LOCK_TIMEOUT = 3 };
enum { SCOPE_SESSION = 0, SCOPE_XACT = 1 };
enum { MODE_BIT_EXCLUSIVE = 1, MODE_BIT_SHARED = 2 };

/* ---- wait queues (lock_queue.c): one per lock, in serving order ---- */

/* Fills order[] with the slots queued on lock, first first; returns how many. */
int advlock_lt_queue_order(const advlock_fake_db *db, int lock,
                           int order[ADVLOCK_FAKE_MAX_SESSIONS]);
/* Queues the session at pos (0 = first) for mode and scope on lock. */
void advlock_lt_enqueue(advlock_fake_db *db, int slot, int lock, int mode, int scope, int pos);
/* Takes the session out of its queue (no grant, no wake-up). */
void advlock_lt_dequeue(advlock_fake_db *db, int slot);

/* ---- lock manager (lock_table.c, deadlock.c) ---- */

/* Modes (as bits) that conflict with a request in `mode`: PostgreSQL's
 * conflict table restricted to the two advisory modes. */
int advlock_lt_conflicts(int mode);
int advlock_lt_mode_bit(int mode);

enum advlock_lt_outcome { LT_GRANTED, LT_BUSY, LT_QUEUED, LT_DEADLOCK, LT_FULL };

/* LockAcquire for one session slot: grant, refuse (wait 0), or queue. */
enum advlock_lt_outcome advlock_lt_request(advlock_fake_db *db, int slot, int64_t key, int mode,
                                           int scope, int wait);
/* LockRelease of one hold at one level; 1 if there was one to release. */
int advlock_lt_release(advlock_fake_db *db, int slot, int64_t key, int mode, int scope);
/* Drops every hold the session has at one level (unlock_all, end of a
 * transaction), waking whoever can then be granted. */
void advlock_lt_release_level(advlock_fake_db *db, int slot, int scope);
/* Takes a queued session out of its queue, without a grant, and wakes
 * whoever that lets through. */
void advlock_lt_leave_queue(advlock_fake_db *db, int slot);

int advlock_lt_find_lock(const advlock_fake_db *db, int64_t key);
int advlock_lt_find_hold(const advlock_fake_db *db, int slot, int lock);
int advlock_lt_hold_total(const advlock_fake_hold_ *h, int mode);
/* Modes (as bits) the session holds on the lock at any level. */
int advlock_lt_held_mask(const advlock_fake_db *db, int slot, int lock);
/* The first session queued on lock that ProcLockWakeup would grant now
 * (its mode conflicts with no holder and no waiter ahead), or -1. */
int advlock_lt_next_grant(const advlock_fake_db *db, int lock);

/* Is the queued session part of a cycle of sessions waiting for each other? */
int advlock_lt_in_deadlock(const advlock_fake_db *db, int slot);

/* ---- sessions (db.c owns them; every file looks them up) ---- */

/* The slot of an open session, or -1. */
static inline int advlock_fake_db_slot(const advlock_fake_db *db, int pid)
{
    if (db == NULL || pid <= 0)
        return -1;
    for (int i = 0; i < db->sessions_used_; i++)
        if (db->sessions_[i].pid_ == pid)
            return i;
    return -1;
}

/* ---- SQL (statements.c) ---- */

enum stmt_kind {
    ST_TRY,
    ST_LOCK,
    ST_UNLOCK,
    ST_UNLOCK_ALL,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_HOLDERS,
    ST_SESSION,
    ST_DISCARD_ALL,
    ST_HELD,
    ST_LEASE_SETUP,
    ST_HEARTBEAT,
    ST_HEARTBEAT_GUARDED,
    ST_TRY_FENCED,
    ST_MARK_TAKE,
    ST_MARK_WRITE,
    ST_MARK_CLEAR
};

typedef struct advlock_fake_statement {
    int sql;          /* the core's row (an advlock_sql), or -1: text is PostgreSQL's own */
    const char *text; /* a call with $1, or a command */
    enum stmt_kind kind;
    int mode;
    int scope;
} advlock_fake_statement;

/* The statement with exactly this text, or NULL. */
const advlock_fake_statement *advlock_fake_statement_find(const char *sql);
/* The bigints it takes ($1 the key; then a wait's bound in ms, then a
 * guarded row's token), as the core's table has them for its rows. */
int advlock_fake_statement_params(const advlock_fake_statement *st);
/* Is the text a statement PostgreSQL could parse (a call we might not know)? */
int advlock_fake_statement_parses(const char *sql);
/* Fills out with PostgreSQL's error for text that is not a known statement:
 * 42883 for "SELECT name(...)", 42601 otherwise. */
void advlock_fake_statement_reject(const char *sql, int have_param, advlock_fake_result *out);

/* ---- TCP settings and the lease's rows (tcp_settings.c) ---- */

/* Fills out with what SHOW reads before any SET on this transport. */
void advlock_fake_tcp_defaults(int transport, advlock_fake_tcp *out);
void advlock_fake_run_lease_setup(advlock_fake_session_ *s, int64_t user_timeout_ms,
                                  advlock_fake_result *out);
void advlock_fake_run_heartbeat(const advlock_fake_session_ *s, int64_t user_timeout_ms,
                                advlock_fake_result *out);

/* ---- lock-delay's marks (marks.c) ---- */

/* Runs an ST_MARK_* statement (params: the key, the token, the stop
 * bound) on the database's mark table, as advlock_fake.h says. */
void advlock_fake_run_mark(advlock_fake_db *db, enum stmt_kind kind, const int64_t params[3],
                           advlock_fake_result *out);

/* ---- splitmix64 (Steele, Lea, Flood; prng.c) ---- */

/* The next number of the stream whose state is *state. */
uint64_t advlock_fake_splitmix64(uint64_t *state);
/* Its finaliser alone: a good 64-bit mix of z. */
uint64_t advlock_fake_mix64(uint64_t z);

/* ---- results (result.c) ---- */

void advlock_fake_result_clear(advlock_fake_result *out);
void advlock_fake_result_error(advlock_fake_result *out, const char *sqlstate, const char *message);
void advlock_fake_result_warning(advlock_fake_result *out, const char *sqlstate,
                                 const char *message);
void advlock_fake_result_row(advlock_fake_result *out, advlock_fake_status status);
void advlock_fake_result_command(advlock_fake_result *out, const char *tag);
/* Bounded copy that always terminates (cutting at size - 1 bytes). */
void advlock_fake_copy(char *dst, size_t size, const char *src);
/* Keeps rows[0..max) (each width bytes) the first max rows offered so far
 * in the order before() gives, and counts every row offered in *seen. */
void advlock_fake_offer_row(void *rows, size_t width, size_t max, size_t *seen, const void *row,
                            int (*before)(const void *a, const void *b));

#endif
