/*
 * advlock_pq — advisory locks on a libpq connection (PGconn).
 *
 * Two drivers for the core's lock machine (advlock.h), both on a PGconn the
 * caller opened and keeps owning:
 *
 *   blocking     advlock_pq_acquire() / advlock_pq_release() run one
 *                operation to its end, sleeping between attempts.
 *   nonblocking  advlock_pq_async binds a connection to a lock machine and
 *                tells any event loop three things: the socket, the readiness
 *                it waits for, and the next deadline. It never blocks.
 *
 * The drivers contain no lock logic: the core decides every query, sleep
 * and outcome; the drivers move bytes and time. Link with -ladvlock_pq
 * -ladvlock -lpq (pkg-config advlock_pq).
 *
 * Times are milliseconds of a monotonic clock. The blocking calls read
 * CLOCK_MONOTONIC themselves; the nonblocking calls take the caller's "now",
 * for which advlock_pq_now_ms() or the loop's own monotonic clock (libuv's
 * uv_now()) will do, as long as one adapter always gets the same clock.
 *
 * On the wire
 * -----------
 * Every statement takes its one parameter as a binary int8 (type OID 20, in
 * network byte order) and asks for its result in binary format, so neither
 * direction depends on locale or text formatting.
 *
 * Prepared statements. To spare the server a parse and plan per call, each
 * statement is prepared once per connection under the name
 * advlock_pq_statement_name() returns ("advlock_" and a hash of the SQL text,
 * so that different advlock versions sharing a pooled connection never
 * confuse each other's statements). The rule, for connections the adapter did
 * not open and that may or may not hold the statements already:
 *
 *   - Only when the connection is idle (PQtransactionStatus() is
 *     PQTRANS_IDLE, no transaction open) are named statements used. The
 *     adapter remembers, per advlock_pq_session or advlock_pq_async, which
 *     statements it has prepared. A statement it has not prepared is
 *     prepared first; "already exists" (SQLSTATE 42P05) counts as prepared.
 *     An EXECUTE that finds the statement gone (SQLSTATE 26000, after
 *     DISCARD ALL, DEALLOCATE, a reset, or a pooler switching server
 *     sessions) prepares it again and retries, once. Outside a transaction
 *     such a failure harms nothing.
 *   - Inside a transaction (PQTRANS_INTRANS or PQTRANS_INERROR) the adapter
 *     never relies on a named statement, whose absence would abort the
 *     caller's transaction: it sends the statement unnamed
 *     (PQsendQueryParams), one parse per call.
 *   - A failure to prepare for any other reason falls back to the unnamed
 *     form, which then reports the real error.
 * The statements stay prepared on the connection after the adapter is done
 * with it; they hold no locks and cost a few kilobytes of server memory.
 * DEALLOCATE them by name if that matters.
 *
 * Server notices
 * --------------
 * Releasing a lock the session does not hold makes the server send a
 * WARNING ("you don't own a lock of type ExclusiveLock"), which libpq's
 * default notice processor would print on stderr. While an adapter runs its
 * statements:
 *   - If the connection's notice receiver is libpq's default one, the adapter
 *     puts its own in place for the duration of its libpq calls, counts each
 *     notice and keeps the last one in the report (notices, notice,
 *     notice_sqlstate), and passes it on to the connection's notice processor
 *     if, and only if, that processor is not libpq's default stderr printer.
 *     Before returning to the caller, it puts libpq's default receiver back.
 *   - If the caller installed a notice receiver of its own
 *     (PQsetNoticeReceiver), the adapter leaves it untouched and that
 *     receiver gets the notices; the report's notice fields stay empty.
 *     (libpq cannot return a receiver's argument, so a receiver swapped out
 *     could not be restored exactly; leaving it alone is exact.)
 * Either way nothing is printed on stderr unless the caller's own hooks
 * print it, and the connection's hooks are as found whenever control
 * returns to the caller.
 *
 * Lost connections
 * ----------------
 * An operation ends FAILED with ADVLOCK_ECONNLOST when the connection is
 * broken (PQstatus() is CONNECTION_BAD), when a statement yields no result,
 * or when it fails with an error libpq made itself (errors from the server
 * always carry an SQLSTATE; "server closed the connection unexpectedly" does
 * not, and may come before libpq marks the connection bad). The session and
 * every lock it held are then gone on the server. The report's message ends
 * with the server's last words when it sent any ("terminating connection due
 * to administrator command"), else libpq's; its sqlstate is set when libpq
 * reports one, which libpq 14 and later do only when the session dies in the
 * middle of a statement (57P01 for pg_terminate_backend). A loss is noticed
 * when the adapter next talks to the server: at once while a statement is in
 * flight, at the next try while an acquire sleeps.
 *
 * Re-entrancy. PostgreSQL counts session advisory locks: acquiring a lock
 * the session already holds succeeds at once (ACQUIRED) and adds a hold; each
 * hold needs its own release. The first release of a lock acquired twice
 * reports RELEASED and the session still holds it; the second releases it.
 * A further release reports NOT_HELD. Another session can acquire the lock
 * only after the last hold is released (or the session ends).
 *
 * Connection poolers. Session advisory locks belong to a server session:
 * through a transaction-pooling pooler (pgbouncer pool_mode=transaction) the
 * acquire and the release may run on different server sessions, and the lock
 * protects nothing. Use a session-pooled or direct connection.
 *
 * Thread safety: an advlock_pq_session or advlock_pq_async, and its PGconn,
 * belong to one thread at a time. Different connections may be used from
 * different threads.
 */
#ifndef ADVLOCK_PQ_H
#define ADVLOCK_PQ_H

#include <libpq-fe.h>

#include "advlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * How an operation ended, with everything the server said on the way.
 * Filled by the blocking calls and by the nonblocking adapter; the caller
 * owns it (the nonblocking adapter owns the one it hands out).
 */
typedef struct advlock_pq_report {
    advlock_outcome outcome; /* ACQUIRED, RELEASED, NOT_HELD, TIMED_OUT, CANCELLED, FAILED */
    int error;               /* 0, or the advlock_error when outcome is FAILED */
    char sqlstate[6];        /* the server's SQLSTATE for a failure ("57P01"), or "" */
    char message[ADVLOCK_MESSAGE_MAX]; /* the core's sentence naming the lock key, or "" */
    uint64_t attempts;       /* try-lock queries the acquire sent (0 for a release) */

    /* Server notices diverted during the operation (see "Server notices"). */
    unsigned notices;        /* how many arrived */
    char notice_sqlstate[6]; /* the last one's SQLSTATE ("01000" for a WARNING), or "" */
    char notice[ADVLOCK_MESSAGE_MAX]; /* the last one's primary message, or "" */
} advlock_pq_report;

/*
 * Returns CLOCK_MONOTONIC in milliseconds: the clock the blocking calls use,
 * and a suitable "now" for the nonblocking adapter.
 */
ADVLOCK_API int64_t advlock_pq_now_ms(void);

/*
 * Returns the name under which a statement is prepared on connections
 * ("advlock_" followed by 16 hex digits), or NULL for an identifier outside
 * [0, ADVLOCK_SQL_COUNT). Static storage; thread-safe.
 */
ADVLOCK_API const char *advlock_pq_statement_name(advlock_sql sql);

/*
 * Private to the adapters (declared here only so that their objects can live
 * in the caller's memory): one of the machine's queries on its way through
 * libpq, which form it is sent in, and what its results said so far.
 */
typedef struct advlock_pq_query_ {
    int sql_;
    int form_;
    int reprepared_;
    int answered_;
    int status_;
    int result_;
    char sqlstate_[6];
    char message_[ADVLOCK_MESSAGE_MAX];
} advlock_pq_query_;

/* ---- blocking ------------------------------------------------------------ */

/*
 * A connection used by the blocking calls: the PGconn and which statements
 * the session has prepared on it. Allocate it anywhere; it owns nothing, so
 * dropping it needs no call. Its fields are private.
 */
typedef struct advlock_pq_session {
    PGconn *conn_;
    uint32_t prepared_;
} advlock_pq_session;

/*
 * Binds a session to a connection, forgetting what it knew of any other.
 * The caller keeps owning conn and must keep it open while the session is in
 * use; the connection may be in any state (a dead one makes the operations
 * end FAILED with ADVLOCK_ECONNLOST).
 *
 * Returns 0, or ADVLOCK_EINVAL (s or conn NULL; s is then untouched).
 */
ADVLOCK_API int advlock_pq_session_init(advlock_pq_session *s, PGconn *conn);

/*
 * Acquires a lock, blocking until the core's schedule ends: try at once,
 * then sleep 100, 200, 400, 800, 1000, 1000, ... ms between tries until the
 * lock is granted or timeout_ms has passed (0: one try only). Sleeps use
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) and resume after signals,
 * so the call cannot be interrupted; use the nonblocking adapter to cancel.
 *
 * lock_key, len: the lock's name (UTF-8; len bytes, NUL allowed), read during
 *     the call only.
 * report: filled whatever happens (for a refused call: outcome FAILED, the
 *     error, and advlock_strerror()'s text as the message).
 *
 * Returns 0 when the operation ended ACQUIRED or TIMED_OUT (see
 * report->outcome), or a negative advlock_error, also in report->error:
 *     ADVLOCK_EINVAL    s or report NULL, lock_key NULL with len > 0,
 *                       timeout_ms < 0;
 *     ADVLOCK_EUTF8     the name is not well-formed UTF-8;
 *     ADVLOCK_ECRYPTO   the key could not be derived;
 *     ADVLOCK_EMISUSE   s is not bound to a connection, or the connection is
 *                       busy (a query of the caller's in progress, or
 *                       pipeline mode): nothing was sent;
 *     ADVLOCK_ESERVER   the server rejected a statement (report->sqlstate);
 *     ADVLOCK_ENULL     the server answered NULL;
 *     ADVLOCK_ECONNLOST the connection broke (report->sqlstate is, for
 *                       example, 57P01 when the session was terminated and
 *                       libpq read the server's last message); the session
 *                       and its locks are gone.
 */
ADVLOCK_API int advlock_pq_acquire(advlock_pq_session *s, const char *lock_key, size_t len,
                                   int64_t timeout_ms, advlock_pq_report *report);

/*
 * Releases one hold of a lock: one statement, no sleeping. Ends RELEASED, or
 * NOT_HELD when the session held no such lock; the server's WARNING about
 * that is in report->notice (see "Server notices"), not on stderr.
 *
 * Arguments and errors as for advlock_pq_acquire() (without the timeout);
 * returns 0 when the operation ended RELEASED or NOT_HELD.
 */
ADVLOCK_API int advlock_pq_release(advlock_pq_session *s, const char *lock_key, size_t len,
                                   advlock_pq_report *report);

/* ---- nonblocking --------------------------------------------------------- */

/* Socket readiness, both what the adapter waits for and what the loop saw. */
#define ADVLOCK_PQ_READ 1u
#define ADVLOCK_PQ_WRITE 2u

/*
 * A nonblocking adapter: one connection, one lock machine, one operation at
 * a time. Allocate it anywhere (it is a few kilobytes); it holds no heap
 * memory, so dropping it needs no call, though an operation under way should
 * be driven to its end first (or the connection closed) so that no query is
 * left in flight. Its fields are private: use the functions below.
 *
 * The loop's side of the contract, after every call that can change it
 * (init, start, process, cancel):
 *     fd       = advlock_pq_async_socket(a);     watch this socket
 *     wants    = advlock_pq_async_wants(a);      for these readiness bits
 *     deadline = advlock_pq_async_deadline(a, &at_ms);  and this time
 * and when any of them happens, call advlock_pq_async_process() with what
 * was seen. While busy, wants or a deadline is always set; when
 * advlock_pq_async_busy() turns 0 the operation has ended and
 * advlock_pq_async_report() says how. Many adapters, one per connection,
 * can run in one thread. See docs/event-loops.md.
 */
typedef struct advlock_pq_async {
    PGconn *conn_;
    uint32_t prepared_;
    int phase_;
    advlock_pq_query_ query_;
    advlock_machine machine_;
    advlock_pq_report report_;
} advlock_pq_async;

/*
 * Binds an adapter to a connected PGconn and puts the connection in
 * nonblocking mode (PQsetnonblocking(conn, 1)), where it stays. The caller
 * keeps owning conn: it must stay open while the adapter is in use, and only
 * the adapter may send on it while an operation is under way. Overwrites
 * whatever a was (do not re-initialise an adapter in the middle of an
 * operation: its query would be left in flight).
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    a or conn NULL (a untouched);
 *     ADVLOCK_EMISUSE   the connection is not ready (still connecting);
 *     ADVLOCK_ECONNLOST the connection is broken (CONNECTION_BAD) or could
 *                       not be made nonblocking.
 * On error, a is left unbound: every other call then returns EMISUSE.
 */
ADVLOCK_API int advlock_pq_async_init(advlock_pq_async *a, PGconn *conn);

/*
 * Starts acquiring a lock with the reference schedule (see
 * advlock_pq_acquire()); sends the first try-lock query at once, without
 * blocking. The operation may already have ended when this returns (a
 * broken connection); check advlock_pq_async_busy().
 *
 * lock_key, len: as for advlock_pq_acquire(), read during the call only.
 * now_ms: the caller's monotonic time.
 *
 * Returns 0, or (nothing started, nothing sent):
 *     ADVLOCK_EINVAL    a NULL, lock_key NULL with len > 0, timeout_ms < 0;
 *     ADVLOCK_EUTF8, ADVLOCK_ECRYPTO  as for advlock_derive_key();
 *     ADVLOCK_EMISUSE   a unbound, an operation already under way, or the
 *                       connection busy with a query of the caller's or in
 *                       pipeline mode.
 */
ADVLOCK_API int advlock_pq_async_start_acquire(advlock_pq_async *a, const char *lock_key,
                                               size_t len, int64_t timeout_ms, int64_t now_ms);

/*
 * Starts releasing one hold of a lock (see advlock_pq_release()). Arguments,
 * behaviour and errors as for advlock_pq_async_start_acquire(), without the
 * timeout.
 */
ADVLOCK_API int advlock_pq_async_start_release(advlock_pq_async *a, const char *lock_key,
                                               size_t len, int64_t now_ms);

/*
 * Cancels an acquire. During a sleep it ends CANCELLED at once (busy turns
 * 0). While a try-lock query is in flight the adapter waits for its answer;
 * if the server granted the lock it is released before the operation ends
 * CANCELLED, so a cancelled acquire never leaves a lock behind. Cancelling
 * twice is harmless. Sends nothing itself.
 *
 * Returns 0, or ADVLOCK_EINVAL (a NULL) or ADVLOCK_EMISUSE (a unbound, or no
 * acquire under way: idle, ended, or a release, which always ends on its own).
 */
ADVLOCK_API int advlock_pq_async_cancel(advlock_pq_async *a, int64_t now_ms);

/*
 * Returns the socket to watch (PQsocket()), or -1 when a is NULL or unbound
 * or the connection has none (it is closed once libpq sees it broken, so
 * stop watching the old descriptor when an operation ends).
 */
ADVLOCK_API int advlock_pq_async_socket(const advlock_pq_async *a);

/*
 * Returns the readiness the adapter waits for: ADVLOCK_PQ_READ,
 * ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE (a query is still being sent), or 0
 * (sleeping, idle, ended, a NULL).
 */
ADVLOCK_API unsigned advlock_pq_async_wants(const advlock_pq_async *a);

/*
 * Returns 1 and stores in *at_ms the absolute time (the caller's clock) at
 * which advlock_pq_async_process() must be called even if the socket stays
 * quiet; returns 0 when there is no deadline (or a or at_ms is NULL).
 */
ADVLOCK_API int advlock_pq_async_deadline(const advlock_pq_async *a, int64_t *at_ms);

/*
 * Lets the adapter make progress: call it when the socket showed the
 * readiness it wanted (ready = the bits seen: ADVLOCK_PQ_READ,
 * ADVLOCK_PQ_WRITE, both; errors and hang-ups count as READ) or when the
 * deadline has come (ready = 0). Readiness it did not ask for and early
 * calls are harmless. It sends, flushes, reads, collects results, feeds the
 * core and starts the next query or sleep, never blocking. When this
 * returns, ask again for socket, wants and deadline; if busy is 0, the
 * operation has ended.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    a NULL, or ready has bits other than READ and WRITE;
 *     ADVLOCK_EMISUSE   a unbound, or no operation under way (never
 *                       started, or already ended): nothing changes.
 * Failures of the connection or the server are not errors of this call:
 * they end the operation FAILED, with the details in the report.
 */
ADVLOCK_API int advlock_pq_async_process(advlock_pq_async *a, unsigned ready, int64_t now_ms);

/* Returns 1 while an operation is under way, else 0 (also for a NULL). */
ADVLOCK_API int advlock_pq_async_busy(const advlock_pq_async *a);

/*
 * Returns the report of the operation that ended last, or NULL while one is
 * under way, before the first has ended, or for a NULL. The report belongs to
 * the adapter and stays valid and unchanged until the next start or init.
 */
ADVLOCK_API const advlock_pq_report *advlock_pq_async_report(const advlock_pq_async *a);

/*
 * Returns the adapter's lock machine, read-only, for inspection with
 * advlock_next_action() (a SLEEP's length, for progress displays) and
 * advlock_attempts(); NULL for a NULL. Drive the adapter, never the machine.
 */
ADVLOCK_API const advlock_machine *advlock_pq_async_machine(const advlock_pq_async *a);

#ifdef __cplusplus
}
#endif

#endif /* ADVLOCK_PQ_H */
