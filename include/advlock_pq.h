/*
 * advlock_pq — advisory locks on a libpq connection (PGconn).
 *
 * One advlock_pq binds a PGconn the caller opened and keeps owning to a
 * lock machine (advlock.h), driven blocking (advlock_pq_acquire(), ...) or
 * from any event loop (advlock_pq_async_*(): socket, wanted readiness and
 * next deadline). Link with -ladvlock_pq -ladvlock -lpq (pkg-config
 * advlock_pq).
 *
 * docs/libpq.md explains what the declarations below share; the sections
 * their comments name ("On the wire", "Server notices", "Lost connections",
 * "A server that does not answer", "The server session", "Verifying a held
 * lock", "Options", "Server-side waiting", "While a lock is held",
 * "Leases", "Events", "Lock sets") are its sections.
 *
 * Thread safety: an advlock_pq, and its PGconn, belong to one thread at a
 * time. Different connections may be used from different threads.
 */
#ifndef ADVLOCK_PQ_H
#define ADVLOCK_PQ_H

#include <libpq-fe.h>

#include "advlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the text fields of a report (server message, notice): a first
 * line longer than this is cut at a UTF-8 character boundary with "...". */
#define ADVLOCK_PQ_TEXT_MAX 256

/*
 * How an operation ended: the machine's facts and what the server said.
 * Filled by the blocking calls (into the caller's report) and by the
 * nonblocking adapter (advlock_pq_async_report()).
 */
typedef struct advlock_pq_report {
    /* The machine's report: outcome, failure, SQLSTATE, attempts, elapsed
     * time, holder facts. A call refused before anything was sent gives
     * outcome FAILED with failure 0 (the call's error is its return value). */
    advlock_report lock;
    /* FAILED (and TIMED_OUT with ADVLOCK_DETAIL_DIAGNOSIS_FAILED): the first
     * line of the server's or libpq's words about the failure ("terminating
     * connection due to administrator command"), or "". */
    char server_message[ADVLOCK_PQ_TEXT_MAX];

    /* Server notices diverted during the operation (see "Server notices"). */
    unsigned notices;                 /* how many arrived */
    char notice_sqlstate[6];          /* the last one's SQLSTATE ("01000"), or "" */
    char notice[ADVLOCK_PQ_TEXT_MAX]; /* the last one's primary message, or "" */

    /* A held lock given up because its lease ran out (see "Leases"): why,
     * else ADVLOCK_LEASE_LIVE (0). */
    advlock_lease_expiry lease_expiry;
} advlock_pq_report;

/*
 * Renders a report as the core's sentence (advlock_describe()) with the
 * server's words: name and len are the lock name the operation was started
 * with; buf and size as for snprintf (ADVLOCK_MESSAGE_MAX always holds the
 * whole sentence). A lost lock (advlock_pq_async_lost(): failure
 * ADVLOCK_ECONNLOST, detail ADVLOCK_DETAIL_LOST) renders as "Lock '<name>'
 * lost: the connection holding it closed: <words>".
 *
 * Returns the length written, or ADVLOCK_EINVAL (r NULL, name NULL with
 * len > 0, buf NULL with size > 0).
 */
ADVLOCK_API int advlock_pq_describe(const advlock_pq_report *r, const char *name, size_t len,
                                    char *buf, size_t size);

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
 * Sends row sql of the core's statement table (advlock_sql) on conn, as the
 * table says, for a program that reads the answer itself (the advlock
 * command): a row without parameters as one simple query (a script of
 * several statements runs in one implicit transaction; in pipeline mode,
 * which takes no simple query, it goes unnamed in the extended protocol and
 * must be one statement), any other unnamed in the extended protocol with
 * its advlock_sql_params(sql) values from params as binary bigints.
 * Results come as text. Does not wait: read them with PQgetResult. Returns
 * 1 if sent, 0 if libpq could not (PQerrorMessage says why),
 * ADVLOCK_EINVAL for an unknown row or params NULL where the row takes
 * some.
 */
ADVLOCK_API int advlock_pq_send_row(PGconn *conn, advlock_sql sql, const int64_t *params);

/*
 * Gives up on conn's statement in flight, for a program that will not wait
 * for its answer (a bound passed, a stop signal came): a cancel request
 * delivered as the adapters deliver theirs (a thread of its own, waited for
 * 250 ms at most, left to finish in the background past that), then conn's
 * socket shut, so that the server ends the session, and every lock it
 * holds, as soon as it gets to it. libpq finds the socket shut at its next
 * call; the caller still owns conn and PQfinish()es it. Bounded even on a
 * server that accepts connections and never answers. NULL, or a conn with
 * no socket: nothing.
 */
ADVLOCK_API void advlock_pq_abandon(PGconn *conn);

/*
 * Private to the adapter (declared here only so that it can live in the
 * caller's memory): one of the machine's queries on its way through libpq,
 * which form it is sent in, and what its results said so far. Its words
 * stay in libpq's result until the answer is final; only then are they
 * copied, once, into the report's server_message.
 */
typedef struct advlock_pq_query_ {
    uint8_t sql_;
    uint8_t form_;
    uint8_t answered_;
    uint8_t status_;
    uint8_t result_;
    uint8_t unexpected_;
    char sqlstate_[6];
    PGresult *kept_; /* the result that says the answer, from arrival until fed */
} advlock_pq_query_;

/* The pump both adapters run (pump.c): one PGconn moving one connection
 * engine's statements and answers. Private. */
typedef struct advlock_pq_pump_ {
    PGconn *conn_;
    advlock_conn engine_;
    advlock_conn_slot *slots_;
    advlock_pq_query_ query_;       /* the answer being read */
    advlock_pq_report notices_;     /* a lock set's, until the next answer's member takes them */
    advlock_pq_report *sink_;       /* where notices go: &notices_, or the one member's report */
    const advlock_machine *events_; /* whose callback hears them (NULL: none) */
    uint8_t grows_;                 /* slots_ is the pump's heap memory, grown when starved */
    uint8_t pipeline_;   /* libpq's pipeline mode (a lock set), else one statement at a time */
    uint8_t one_;        /* one member (a single adapter): its failed operation's report stands */
    uint8_t reading_;    /* the head statement's first result came */
    uint8_t committing_; /* its results are read; its answer waits for its batch's sync */
    uint8_t flushing_;   /* libpq holds output the socket did not take */
} advlock_pq_pump_;

/*
 * Sizes: advlock_pq, advlock_pq_member and advlock_pq_lockset embed the
 * connection engine's types (advlock_member, advlock_conn), so their sizes
 * change with the engine's, and changed in this release without a new soname:
 * code that allocates them must be rebuilt against this header
 * (docs/libpq.md, "Sizes").
 *
 * One caller of a lock set (a single adapter embeds its one): the connection engine's member (its
 * lock machine, its place in the exclusion table) and its report. Allocate it anywhere (caller
 * memory, about 1.5 KB), initialise it once with advlock_pq_member_init(), and keep it in place
 * while an operation is under way or it holds a lock. Fields are private.
 */
typedef struct advlock_pq_member {
    advlock_member member_; /* first: the engine's events name it */
    advlock_pq_report report_;
    struct advlock_pq_lockset *set_; /* NULL in a single adapter */
} advlock_pq_member;

/* The slots of a single adapter's engine: one statement in flight, a
 * give-back or the lease's behind it. */
#define ADVLOCK_PQ_SLOTS_ 4

/*
 * A connection's lock adapter: one PGconn, one lock machine, one operation
 * at a time, driven blocking or nonblocking: the connection engine with one
 * member, which pump.c pumps as it pumps a lock set. Allocate it anywhere
 * (about 3.3 KB: it embeds the engine, its member and slots; see "Sizes"
 * above) and keep it in place from init on (the engine points into it);
 * it never holds heap memory, so dropping it needs no call, though an
 * operation under way should be driven to its end first (or the connection
 * closed) so that no query is left in flight. Its fields are private: use
 * the functions below.
 *
 * The loop's side of the nonblocking contract, after every call that can
 * change it (init, start, process, cancel):
 *     fd       = advlock_pq_async_socket(a);     watch this socket
 *     wants    = advlock_pq_async_wants(a);      for these readiness bits
 *     deadline = advlock_pq_async_deadline(a, &at_ms);  and this time
 * and when any of them happens, call advlock_pq_async_process() with what
 * was seen. While busy, wants or a deadline is always set; when
 * advlock_pq_async_busy() turns 0 the operation has ended and
 * advlock_pq_async_report() says how. After ACQUIRED, wants stays
 * ADVLOCK_PQ_READ (busy 0) while the adapter watches the session that holds
 * the lock; advlock_pq_async_lost() turns 1 if it is lost. Many adapters,
 * one per connection, can run in one thread. See docs/event-loops.md.
 */
typedef struct advlock_pq {
    advlock_pq_pump_ pump_;
    advlock_pq_member member_; /* the engine's one member and its report */
    advlock_conn_slot slots_[ADVLOCK_PQ_SLOTS_];
    advlock_peer *bucket_;    /* the exclusion table's one bucket */
    advlock_options options_; /* the caller's, the lease's fields zero (the engine's) */
} advlock_pq;

/*
 * Binds an adapter to a connection for blocking use, forgetting what it knew
 * of any other, options included (the reference's behaviour again), and
 * draws the adapter's session token (see "The server session"): the first
 * operation then checks the server session. The
 * caller keeps owning conn and must keep it open while the adapter is in
 * use; the connection may be in any state (a dead one makes the operations
 * end FAILED with ADVLOCK_ECONNLOST), and its blocking mode is left as it is.
 *
 * Returns 0, or ADVLOCK_EINVAL (a or conn NULL; a is then untouched).
 */
ADVLOCK_API int advlock_pq_init(advlock_pq *a, PGconn *conn);

/*
 * Sets the options (advlock.h) for the adapter's operations from now on; o
 * is copied, its callbacks and their user pointers must stay valid while the
 * adapter runs operations or watches a held lock. Without this call, or
 * after an init, the adapter behaves as the reference does. Not allowed while
 * an operation is under way (options hold from an operation's start to its
 * end).
 *
 * Options with lease_ms > 0 run a lease (see "Leases"), set up anew at the
 * next acquire; while a lock is held under a lease, the lease's two fields
 * must stay as they are.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    a or o NULL, a value outside its enum, or a lease
 *                       advlock_lease_plan_init() refuses;
 *     ADVLOCK_EMISUSE   a unbound, an operation is under way, or another
 *                       lease for a lock held under one.
 */
ADVLOCK_API int advlock_pq_set_options(advlock_pq *a, const advlock_options *o);

/* ---- blocking ------------------------------------------------------------ */

/*
 * How long past its own schedule a blocking call, and advlock run, may wait
 * for the server: room for a round trip to a far server (the last try and
 * its answer, a diagnosis), never for a hung one. A blocking acquire whose
 * statement is still unanswered at timeout_ms + ADVLOCK_PQ_GRACE_MS after
 * its start, or a release or verify at ADVLOCK_GUARD_RETRY_MS +
 * ADVLOCK_PQ_GRACE_MS (a guarded one's retries behind a proxy), sends the
 * server a cancel request (250 ms at most) and waits 250 ms more for the
 * answer; then it ends FAILED with ADVLOCK_ENOANSWER. So a blocking call
 * returns within its bound + 0.5 s, and only a call that ends that way
 * takes longer than its bound.
 */
#define ADVLOCK_PQ_GRACE_MS 1000

/*
 * Acquires a lock, blocking until the core's schedule ends: try at once,
 * then sleep 100, 200, 400, 800, 1000, 1000, ... ms between tries until the
 * lock is granted or timeout_ms has passed (0: one try only); or, as the
 * options say, another schedule, mode, scope, or a server-side wait that is
 * cancelled at the timeout. The call waits in poll() on the connection's
 * socket with CLOCK_MONOTONIC deadlines and resumes after signals, so it
 * cannot be interrupted; use the nonblocking calls to cancel.
 *
 * The call returns within timeout_ms + ADVLOCK_PQ_GRACE_MS + 0.5 s. A
 * statement the server has not answered by then (a stopped backend, a
 * pooler's queue, a hung host) ends the call FAILED with ADVLOCK_ENOANSWER
 * (see ADVLOCK_PQ_GRACE_MS and "A server that does not answer" in
 * docs/libpq.md): the statement is left in flight, so the adapter is
 * unbound (every call on it returns ADVLOCK_EMISUSE until
 * advlock_pq_init() on a new connection) and the caller must close the
 * connection (PQfinish()), which ends the server session and any lock the
 * statement may have taken. The adapter never closes it: the caller owns
 * it.
 *
 * lock_key, len: the lock's name (UTF-8; len bytes, NUL allowed), read during
 *     the call only.
 * report: receives how the operation ended (report->lock.outcome: ACQUIRED,
 *     TIMED_OUT, FAILED with report->lock.failure, ...). For a refused call
 *     it is filled as described at advlock_pq_report. Failures of the
 *     first operation on a connection include the server session check's
 *     (see "The server session"): ADVLOCK_ESTANDBY on a hot standby unless
 *     options.allow_standby, ADVLOCK_ESESSION behind a proxy that does not
 *     keep this connection on one server session.
 *
 * Returns 0 when the operation ran (whatever its outcome), or a call error,
 * nothing sent:
 *     ADVLOCK_EINVAL    a or report NULL, lock_key NULL with len > 0,
 *                       timeout_ms < 0;
 *     ADVLOCK_EUTF8     the name is not well-formed UTF-8;
 *     ADVLOCK_ECRYPTO   the key could not be derived;
 *     ADVLOCK_EMISUSE   a is not bound to a connection, or the connection is
 *                       busy (a query of the caller's in progress, or
 *                       pipeline mode), or the options ask for transaction
 *                       scope and no transaction block is open.
 */
ADVLOCK_API int advlock_pq_acquire(advlock_pq *a, const char *lock_key, size_t len,
                                   int64_t timeout_ms, advlock_pq_report *report);

/* As advlock_pq_acquire(), for a key already derived (advlock_derive_key()). */
ADVLOCK_API int advlock_pq_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                                       advlock_pq_report *report);

/*
 * Releases one hold of a lock: one statement, no sleeping. Ends RELEASED, or
 * NOT_HELD when the session held no such lock; the server's WARNING about
 * that is in report->notice (see "Server notices"), not on stderr. With
 * transaction scope nothing is sent: ENDS_WITH_TRANSACTION. Behind a proxy
 * it ends FAILED with ADVLOCK_ESESSION when the unlock reached a server
 * session other than the one this connection claimed: the lock may still
 * be held there (see "The server session"). A statement unanswered within
 * ADVLOCK_GUARD_RETRY_MS + ADVLOCK_PQ_GRACE_MS ends it FAILED with
 * ADVLOCK_ENOANSWER, the adapter unbound, as for advlock_pq_acquire().
 *
 * Arguments and errors as for advlock_pq_acquire() (without the timeout).
 */
ADVLOCK_API int advlock_pq_release(advlock_pq *a, const char *lock_key, size_t len,
                                   advlock_pq_report *report);

/* As advlock_pq_release(), for a key already derived: pass the acquire's
 * report->lock.key to release what it took without hashing the name again. */
ADVLOCK_API int advlock_pq_release_key(advlock_pq *a, int64_t key, advlock_pq_report *report);

/*
 * Verifies that this connection's server session still holds the lock key
 * in the options' mode: one statement (see "Verifying a held lock"), no
 * sleeping, nothing locked or unlocked. Ends
 *   ADVLOCK_HELD      held; if the adapter watched the lock it still does
 *                     (and a verify ending HELD starts the watch otherwise);
 *   ADVLOCK_NOT_HELD  not held (any more): the lock is gone;
 *                     advlock_pq_describe() says "Lock '<name>' is no longer
 *                     held by this session.";
 *   ADVLOCK_FAILED    ADVLOCK_ESESSION behind a proxy: the statement reached
 *                     a server session this connection did not claim, or
 *                     the claim was refused (then nothing was sent);
 *                     ADVLOCK_ECONNLOST, ADVLOCK_ESERVER as any statement;
 *                     ADVLOCK_ENOANSWER as for advlock_pq_release().
 * Anything but HELD ends the watch: act on it (stop the work the lock
 * guards). The first operation on a connection checks the server session
 * first, as for any operation. Transaction scope works too (a proxy keeps
 * the transaction on one server session).
 *
 * key: the lock's key (the acquire's report->lock.key, or
 *     advlock_derive_key()).
 * report: receives how it ended (filled as for a refused call on error).
 *
 * Returns 0 when the statement ran (whatever its outcome), or, nothing
 * sent: ADVLOCK_EINVAL (a or report NULL) or ADVLOCK_EMISUSE (a unbound,
 * the connection busy with a query of the caller's or in pipeline mode).
 */
ADVLOCK_API int advlock_pq_verify_key(advlock_pq *a, int64_t key, advlock_pq_report *report);

/*
 * Returns 1 when the connection's session row showed a proxy in between
 * (advlock_session's proxied: the server session's pid is not the
 * PQbackendPID() the connection announced: PgBouncer, say), else 0:
 * direct, not known yet (no operation has run on this connection since
 * init or a reset), or a NULL. A cheap read, no statement. Callers use it to verify held locks only
 * where that is needed (see "Verifying a held lock").
 */
ADVLOCK_API int advlock_pq_proxied(const advlock_pq *a);

/*
 * Returns the adapter's session token (see "The server session"): the value,
 * as a signed decimal bigint, that the setting advlock.session holds on the
 * server session this connection claimed (drawn at init, and again when the
 * connection's PQbackendPID() changes), or 0 for a NULL. A cheap read. A driver's helper
 * connections use it to recognise that session through a transaction pool (advlock run does, to
 * help a release reach it); it is no secret from the server, but a client that wrote it into
 * another session's setting could claim that session for this connection.
 */
ADVLOCK_API uint64_t advlock_pq_session_token(const advlock_pq *a);

/*
 * Checks, without blocking, that the adapter's connection is still there:
 * reads whatever the server sent (poll with no wait, PQconsumeInput), so a
 * terminated session or a closed connection is noticed now rather than at
 * the next statement. Call it as often as suits (every second while a lock
 * guards work, say). Server notices read on the way are routed as during an
 * operation; notifications and the results of the caller's own statements
 * stay in libpq for the caller. If an acquire ended ACQUIRED and no
 * operation but verifies ending HELD has run since, a loss is also reported
 * to the event callback as ADVLOCK_EVENT_LOST and the report becomes the
 * loss's. Sends nothing.
 *
 * Returns 0 (alive as far as can be told without a round trip, or lost:
 * see advlock_pq_async_lost()), or ADVLOCK_EINVAL (a NULL) or
 * ADVLOCK_EMISUSE (a is not bound to a connection, or an operation is under
 * way).
 */
ADVLOCK_API int advlock_pq_check(advlock_pq *a);

/* ---- nonblocking --------------------------------------------------------- */

/* Socket readiness, both what the adapter waits for and what the loop saw. */
#define ADVLOCK_PQ_READ  1u
#define ADVLOCK_PQ_WRITE 2u

/*
 * Binds an adapter to a connected PGconn for nonblocking use and puts the
 * connection in nonblocking mode (PQsetnonblocking(conn, 1)), where it
 * stays. As advlock_pq_init() otherwise; only the adapter may send on conn
 * while an operation is under way.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    a or conn NULL (a untouched);
 *     ADVLOCK_EMISUSE   the connection is not ready (still connecting), or
 *                       is broken (CONNECTION_BAD) or could not be made
 *                       nonblocking.
 * On error, a is left unbound: every other call then returns EMISUSE.
 */
ADVLOCK_API int advlock_pq_async_init(advlock_pq *a, PGconn *conn);

/*
 * Starts acquiring a lock (see advlock_pq_acquire()); sends the first lock
 * query at once, without blocking. Ends the watch of a lock held from
 * before. The operation may already have ended when this returns (a broken
 * connection); check advlock_pq_async_busy().
 *
 * lock_key, len: as for advlock_pq_acquire(), read during the call only.
 * now_ms: the caller's monotonic time.
 *
 * Returns 0, or (nothing started, nothing sent):
 *     ADVLOCK_EINVAL    a NULL, lock_key NULL with len > 0, timeout_ms < 0;
 *     ADVLOCK_EUTF8, ADVLOCK_ECRYPTO  as for advlock_derive_key();
 *     ADVLOCK_EMISUSE   a unbound, an operation already under way, the
 *                       connection busy with a query of the caller's or in
 *                       pipeline mode, or transaction scope asked for with
 *                       no transaction block open.
 */
ADVLOCK_API int advlock_pq_async_start_acquire(advlock_pq *a, const char *lock_key, size_t len,
                                               int64_t timeout_ms, int64_t now_ms);

/* As advlock_pq_async_start_acquire(), for a key already derived. */
ADVLOCK_API int advlock_pq_async_start_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                                                   int64_t now_ms);

/*
 * Starts releasing one hold of a lock (see advlock_pq_release()); ends the
 * watch of the held lock. Arguments, behaviour and errors as for
 * advlock_pq_async_start_acquire(), without the timeout (and transaction
 * scope is no error: the release ends ENDS_WITH_TRANSACTION at once).
 */
ADVLOCK_API int advlock_pq_async_start_release(advlock_pq *a, const char *lock_key, size_t len,
                                               int64_t now_ms);

/* As advlock_pq_async_start_release(), for a key already derived. */
ADVLOCK_API int advlock_pq_async_start_release_key(advlock_pq *a, int64_t key, int64_t now_ms);

/*
 * Starts verifying that the connection's server session still holds the
 * lock key (see advlock_pq_verify_key() for the outcomes); sends its one
 * statement at once, without blocking. While it runs the adapter is busy
 * (wants, socket and process as for any operation); when it ends HELD the
 * watch of the held lock goes on (wants READ, busy 0), and a loss noticed
 * afterwards is reported as before (advlock_pq_async_lost()). Ending
 * NOT_HELD or FAILED it ends the watch: advlock_pq_async_report() says
 * why, and the machine's ADVLOCK_EVENT_DONE carries that report to the
 * event callback. Not cancellable (one statement that ends on its own).
 *
 * Returns 0, or (nothing started, nothing sent): ADVLOCK_EINVAL (a NULL) or
 * ADVLOCK_EMISUSE (a unbound, an operation under way, the connection busy
 * with a query of the caller's or in pipeline mode).
 */
ADVLOCK_API int advlock_pq_async_start_verify_key(advlock_pq *a, int64_t key, int64_t now_ms);

/*
 * Cancels an acquire. During a sleep it ends CANCELLED at once (busy turns
 * 0). While a try-lock query is in flight the adapter waits for its answer;
 * if the server granted the lock it is released before the operation ends
 * CANCELLED, so a cancelled acquire never leaves a lock behind. During a
 * server-side wait it first sends the server a cancel request (PQcancel(),
 * which blocks for one connection to the server, 250 ms at most; see
 * "Server-side waiting"),
 * at once, or as soon as the statement is all sent. Cancelling twice is
 * harmless.
 *
 * Returns 0, or ADVLOCK_EINVAL (a NULL) or ADVLOCK_EMISUSE (a unbound, or no
 * acquire under way: idle, ended, or a release or verify, which always ends
 * on its own).
 */
ADVLOCK_API int advlock_pq_async_cancel(advlock_pq *a, int64_t now_ms);

/*
 * Returns the socket to watch (PQsocket()), or -1 when a is NULL or unbound
 * or the connection has none (it is closed once libpq sees it broken, so
 * stop watching the old descriptor when an operation ends).
 */
ADVLOCK_API int advlock_pq_async_socket(const advlock_pq *a);

/*
 * Returns the readiness the adapter waits for: ADVLOCK_PQ_READ (a query's
 * results, or, with busy 0, the watch of a held lock), ADVLOCK_PQ_READ |
 * ADVLOCK_PQ_WRITE (a query is still being sent), or 0 (sleeping, idle,
 * ended without a lock, lost, a NULL).
 */
ADVLOCK_API unsigned advlock_pq_async_wants(const advlock_pq *a);

/*
 * Returns 1 and stores in *at_ms the absolute time (the caller's clock) at
 * which advlock_pq_async_process() must be called even if the socket stays
 * quiet: the end of a sleep, a server-side wait's deadline (the acquire's
 * timeout, when the adapter asks the server to cancel the statement), or
 * the next repeat of a cancel request. Returns 0 when there is no deadline
 * (or a or at_ms is NULL).
 */
ADVLOCK_API int advlock_pq_async_deadline(const advlock_pq *a, int64_t *at_ms);

/*
 * Lets the adapter make progress: call it when the socket showed the
 * readiness it wanted (ready = the bits seen: ADVLOCK_PQ_READ,
 * ADVLOCK_PQ_WRITE, both; errors and hang-ups count as READ) or when the
 * deadline has come (ready = 0). Readiness it did not ask for and early
 * calls are harmless. It sends, flushes, reads, collects results, feeds the
 * core and starts the next query or sleep, never blocking on the socket
 * (a cancel request the machine asks for blocks for one connection to the
 * server; see "Server-side waiting"). While a lock is held (busy 0, wants
 * READ) it reads what the server sent and notices a lost connection
 * (advlock_pq_async_lost()). When this returns, ask again for socket, wants
 * and deadline; if busy is 0, the operation has ended.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    a NULL, or ready has bits other than READ and WRITE;
 *     ADVLOCK_EMISUSE   a unbound, or no operation under way and no lock
 *                       watched (never started, ended without a lock, or
 *                       lost): nothing changes.
 * Failures of the connection or the server are not errors of this call:
 * they end the operation FAILED, with the details in the report.
 */
ADVLOCK_API int advlock_pq_async_process(advlock_pq *a, unsigned ready, int64_t now_ms);

/* Returns 1 while an operation is under way, else 0 (also for a NULL). */
ADVLOCK_API int advlock_pq_async_busy(const advlock_pq *a);

/*
 * Returns 1 if the lock the last acquire took was lost: the connection
 * closed or failed (a terminated session, a server stopped) while the
 * adapter watched it, before any other operation started. The report then
 * describes the loss (outcome FAILED, failure ADVLOCK_ECONNLOST, sqlstate
 * "57P01" when the server said it terminated the session, server_message
 * with the server's or libpq's words), and ADVLOCK_EVENT_LOST has gone to
 * the event callback. Returns 0 otherwise (also for a NULL). Stop watching
 * the socket: libpq has closed it. A connection reset since the lock was
 * taken (see "While a lock is held") is noticed by this call itself, which
 * then turns the report into the loss's and sends the event (timed with
 * advlock_pq_now_ms()).
 */
ADVLOCK_API int advlock_pq_async_lost(advlock_pq *a);

/*
 * Returns the report of the operation that ended last, or NULL while one is
 * under way, before the first has ended, or for a NULL. The report belongs to
 * the adapter and stays valid until the next start or init; it changes only
 * while a held lock is watched: notices that arrive are counted in it, and a
 * lost lock turns it into the loss's report (advlock_pq_async_lost()).
 */
ADVLOCK_API const advlock_pq_report *advlock_pq_async_report(const advlock_pq *a);

/*
 * Returns the adapter's lock machine, read-only, for inspection with
 * advlock_next_action() (a SLEEP's length, the attempts so far in its
 * report, for progress displays); NULL for a NULL. Drive the adapter, never
 * the machine.
 */
ADVLOCK_API const advlock_machine *advlock_pq_async_machine(const advlock_pq *a);

/*
 * The lease's deadlines (see "Leases"). While a lock is held under a lease
 * (options.lease_ms > 0; busy 0, or a verify under way): *stop_at_ms is
 * the stop deadline, the send time of the last heartbeat answered in time
 * plus the plan's D, by which the adapter turns LOST unless a heartbeat
 * answers (*free_by_ms is INT64_MAX); returns 1. After the lease ran out
 * (advlock_pq_async_lost(), report.lease_expiry set): *stop_at_ms is the
 * stop deadline it ran out at (or before, for a heartbeat that failed),
 * *free_by_ms the time by which the server frees the lock at the latest
 * (when the adapter saw the lease run out, + the lease; INT64_MAX where the
 * lease set nothing on the server: behind a proxy, whose own TCP settings
 * bound that, or after a heartbeat found the settings changed); returns 2.
 * Otherwise (no lease, nothing held, a or NULL) returns 0 and stores
 * nothing. Either pointer may be NULL. Times are the adapter's clock (the
 * nonblocking calls' now_ms).
 */
ADVLOCK_API int advlock_pq_lease_deadline(const advlock_pq *a, int64_t *stop_at_ms,
                                          int64_t *free_by_ms);

/* ---- waiting without an event loop -------------------------------------- */

/*
 * One turn of a poll() loop for one adapter, for programs without an event
 * loop of their own: waits once for what the adapter waits for, then lets
 * it process what came. The blocking calls are
 *     while (advlock_pq_async_busy(a)) advlock_pq_wait(a, -1, -1);
 * under their bound (see ADVLOCK_PQ_GRACE_MS), and a program that must also react to signals
 * (advlock run) passes the read end of a self-pipe its handlers write to as extra_fd, then cancels
 * or forwards as it sees fit before the next turn.
 *
 * The wait is one poll() on the adapter's socket for the readiness it wants
 * (advlock_pq_async_wants()) and on extra_fd for input, up to the adapter's
 * deadline (advlock_pq_async_deadline()) and no longer than max_wait_ms. It
 * ends at the first of these or at a signal (EINTR). Then, if the socket
 * showed readiness or the deadline has come, advlock_pq_async_process()
 * runs with what was seen; otherwise nothing else happens. Times are read
 * from advlock_pq_now_ms(), so an adapter waited on this way must be driven
 * with that clock throughout.
 *
 * a: an adapter, busy, watching a held lock, or neither; one with nothing
 *     to wait for (idle, ended without a lock, lost) waits only for
 *     extra_fd and max_wait_ms, and returns at once without either. A busy
 *     adapter whose socket libpq has closed is processed at once (libpq then
 *     says why: the operation ends FAILED).
 * extra_fd: a descriptor to wake for when it is readable (or has an error or
 *     hang-up), or -1. It is polled only, never read.
 * max_wait_ms: the longest wait in milliseconds (0: only look), or -1 for no
 *     limit but the adapter's own deadline (a progress display that must
 *     tick passes its interval).
 *
 * Returns 1 if extra_fd is readable, else 0 (the adapter may or may not
 * have moved on: ask it), or ADVLOCK_EINVAL (a NULL) or ADVLOCK_EMISUSE (a
 * unbound).
 */
ADVLOCK_API int advlock_pq_wait(advlock_pq *a, int extra_fd, int max_wait_ms);

/* ---- lock sets: many locks over one connection ------------------------------ */

/*
 * A lock set shares one connection (one server session) among many
 * in-process callers, each a member with its own lock machine, report and
 * deadline: see "Lock sets" in docs/libpq.md, and docs/design.md for why.
 * Statements of many members go out together in libpq's pipeline mode and
 * their answers come back to the member whose statement each was. A member
 * whose key another member holds or asks for in a conflicting mode is
 * answered "busy", with no statement sent, as if another process held it
 * (docs/design.md, "Lock sets", says why).
 *
 * The lease is the connection's
 * (advlock_pq_lockset_set_lease()). Transaction scope takes its locks in
 * the caller's transaction block on the set's connection (docs/libpq.md,
 * "Lock sets"), and the block's end ends their holds.
 */

/*
 * The set: one PGconn in pipeline mode driven by one connection engine
 * (advlock_conn: the members, their exclusion table, the session check
 * for all of them, the lease, the statements in flight), which this
 * adapter pumps. Allocate it anywhere; advlock_pq_lockset_init() allocates
 * the engine's slots and buckets on the heap and advlock_pq_lockset_finish()
 * frees them. Fields are private.
 *
 * The loop's side is the single adapter's (see advlock_pq): one socket
 * (advlock_pq_lockset_socket()), one readiness (advlock_pq_lockset_wants()),
 * one next deadline (advlock_pq_lockset_deadline(), the earliest of the
 * members'), one advlock_pq_lockset_process(). One thread at a time.
 */
typedef struct advlock_pq_lockset {
    advlock_pq_pump_ pump_;
    advlock_peer **buckets_;
} advlock_pq_lockset;

/*
 * Binds a set to a connected PGconn, puts the connection in nonblocking
 * mode and in pipeline mode (PQenterPipelineMode()), where it stays until
 * advlock_pq_lockset_finish(); only the set may send on it meanwhile. The
 * caller keeps owning conn. The first operation checks the server session
 * (see "The server session"), once for every member.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL    set or conn NULL (nothing touched);
 *     ADVLOCK_ENOMEM    the tables could not be allocated;
 *     ADVLOCK_EMISUSE   the connection is not ready, busy with a query, in
 *                       a transaction block (every member's statements
 *                       would run in it, and one error would fail them
 *                       all), or cannot be made nonblocking or pipelined.
 * On ENOMEM and EMISUSE the set is left unbound (zeroed: its calls return
 * ADVLOCK_EMISUSE, advlock_pq_lockset_finish() does nothing) and conn as
 * it was, in its blocking mode.
 *
 * A set and a single adapter (advlock_pq) must not share a PGconn: they
 * would share one server session, whose locks are re-entrant, so a lock
 * the adapter holds would be granted to a member too. While the set is
 * bound the adapter's calls are refused (the connection is in pipeline
 * mode), but the set cannot tell that an adapter bound to its connection,
 * or the caller's own SQL, holds locks from before: bind a set to a
 * connection of its own. (Their prepared statements may coexist: the
 * names are shared, and so are the statements behind them.)
 */
ADVLOCK_API int advlock_pq_lockset_init(advlock_pq_lockset *set, PGconn *conn);

/*
 * Frees the set's tables and lets go of every member: the set keeps no
 * pointer to one, and each may start in another set (or be freed).
 * Members under way end CANCELLED. A held member's lock is forgotten, not
 * released: advlock_pq_member_held() turns 0, its report stays the
 * acquire's, and the session still holds the lock, so release held
 * members first, or close the connection, which ends the session and its
 * locks. Leaves pipeline mode when nothing is in flight and no cancelled
 * grant is still to be given back; otherwise the connection should be
 * closed. No-op for NULL and for a set whose init failed.
 */
ADVLOCK_API void advlock_pq_lockset_finish(advlock_pq_lockset *set);

/*
 * Runs a lease on the set's connection (docs/libpq.md, "Leases"; lease_ms
 * 0: none, the default): one setup before the first try-lock goes out, then,
 * while any member holds a lock, one heartbeat at a time in the pipeline
 * for all of them, and one stop deadline. A lease that runs out makes every
 * held member LOST at once (report.lease_expiry says why, the words say
 * when the server frees the locks); then close the connection: the set
 * refuses new acquires and a new lease (ADVLOCK_EMISUSE) until the
 * connection is reset (PQreset()) or the set is bound anew.
 * A setup the server refuses ends the acquires waiting for it FAILED, in
 * words; the next acquire tries again.
 *
 * Returns 0, or ADVLOCK_EINVAL (set NULL, a pair advlock_lease_plan_init()
 * refuses) or ADVLOCK_EMISUSE (set unbound, a member busy or holding, the
 * lease ran out).
 */
ADVLOCK_API int advlock_pq_lockset_set_lease(advlock_pq_lockset *set, int64_t lease_ms,
                                             int64_t stop_ms);

/*
 * The share of the server's lock table the set may hold, in percent (1 to
 * 100; ADVLOCK_CAPACITY_SHARE_DEFAULT, 25, unless set): with the session
 * check the set reads the server's settings (ADVLOCK_SQL_CAPACITY), and a
 * member's try that would make the set hold or ask for more locks than the
 * share of the table's nominal size ends FAILED (ADVLOCK_ESERVER, SQLSTATE
 * 53400, configuration_limit_exceeded, answered by the set: nothing is
 * sent) with words that name the settings and the numbers; the others are
 * unaffected. Why: docs/design.md, "The server's lock table". Any time
 * while bound. Returns 0, ADVLOCK_EINVAL (set NULL, percent out of range)
 * or ADVLOCK_EMISUSE (set unbound).
 */
ADVLOCK_API int advlock_pq_lockset_set_capacity_share(advlock_pq_lockset *set, int percent);

/* Sets m to a member of no set, with nothing under way. No-op for NULL. */
ADVLOCK_API void advlock_pq_member_init(advlock_pq_member *m);

/*
 * Starts acquiring the lock name (len bytes, UTF-8) for member m, as
 * advlock_pq_async_start_acquire() does for an adapter: the machine's
 * schedule, timeout and report are m's own. The statement goes out at the
 * set's next advlock_pq_lockset_process() (wants includes WRITE), together
 * with the other members' statements. Ends the watch of a lock m held and
 * lost before.
 *
 * o: the options (NULL: the reference's), copied; its callbacks must stay
 *     valid until the operation and the hold end. No lease of its own;
 *     transaction scope only inside a transaction block (the set reads
 *     PQtransactionStatus() before each operation); ADVLOCK_WAIT_SERVER
 *     only with the connection to itself (docs/libpq.md, "Lock sets").
 *
 * Returns 0, or (nothing started):
 *     ADVLOCK_EINVAL    set or m NULL, name NULL with len > 0, timeout_ms
 *                       < 0, an option the machine refuses, or options a
 *                       set refuses: lease_ms > 0 (the lease is the
 *                       connection's: advlock_pq_lockset_set_lease());
 *     ADVLOCK_EUTF8, ADVLOCK_ECRYPTO  as for advlock_derive_key();
 *     ADVLOCK_EMISUSE   the set unbound, m busy or holding a lock, the
 *                       set's lease ran out (close the connection),
 *                       ADVLOCK_TRANSACTION scope outside a transaction
 *                       block, another member's server-side wait under
 *                       way, or a server-side wait while the connection
 *                       is not its alone.
 */
ADVLOCK_API int advlock_pq_lockset_start_acquire(advlock_pq_lockset *set, advlock_pq_member *m,
                                                 const char *name, size_t len, int64_t timeout_ms,
                                                 const advlock_options *o, int64_t now_ms);

/* As advlock_pq_lockset_start_acquire(), for a key already derived
 * (advlock_derive_key()). */
ADVLOCK_API int advlock_pq_lockset_start_acquire_key(advlock_pq_lockset *set, advlock_pq_member *m,
                                                     int64_t key, int64_t timeout_ms,
                                                     const advlock_options *o, int64_t now_ms);

/*
 * Starts releasing the lock m holds (its acquire ended ACQUIRED): one
 * unlock statement in the acquire's mode, pipelined like the others.
 * Ends RELEASED or NOT_HELD as advlock_pq_release() does. A release that
 * ends FAILED (the server refused the unlock, or libpq could not send it)
 * leaves the lock in doubt, so m still holds (advlock_pq_member_held(),
 * its key taken in the set, the lease running): start the release again,
 * or close the connection, which ends the session and its locks (m then
 * turns LOST).
 *
 * Returns 0, or ADVLOCK_EINVAL (NULLs) or ADVLOCK_EMISUSE (the set
 * unbound, m not holding a lock in this set).
 */
ADVLOCK_API int advlock_pq_lockset_start_release(advlock_pq_lockset *set, advlock_pq_member *m,
                                                 int64_t now_ms);

/*
 * Starts releasing key, which m need not hold (a grant in doubt, a lock a
 * verify could not show held behind a proxy, whose claimed server session
 * may still hold it), as advlock_pq_async_start_release_key() does, with
 * o's mode and scope (NULL: the reference's): the session may hold it
 * without the set knowing. m must be idle and holding nothing, or hold
 * key (then as advlock_pq_lockset_start_release()).
 *
 * Returns 0, or ADVLOCK_EINVAL (NULLs, o refused) or ADVLOCK_EMISUSE (the
 * set unbound, m busy or holding another key, another member's
 * server-side wait under way, a member holding or asking for key).
 */
ADVLOCK_API int advlock_pq_lockset_start_release_key(advlock_pq_lockset *set, advlock_pq_member *m,
                                                     int64_t key, const advlock_options *o,
                                                     int64_t now_ms);

/*
 * Starts verifying that the set's server session still holds the lock m
 * holds (see advlock_pq_verify_key() and "Verifying a held lock"): one
 * statement, pipelined like the others. Ending HELD, m holds on
 * (advlock_pq_member_held()); NOT_HELD or FAILED end its hold, and the
 * report says why. Meanwhile m is busy, and counts as holding for the
 * lease.
 *
 * Returns 0, or ADVLOCK_EINVAL (NULLs) or ADVLOCK_EMISUSE (the set
 * unbound, m not holding a lock in this set).
 */
ADVLOCK_API int advlock_pq_lockset_start_verify(advlock_pq_lockset *set, advlock_pq_member *m,
                                                int64_t now_ms);

/*
 * Cancels m's acquire, ending it CANCELLED at once (busy turns 0), without
 * touching any other member's statements. A try-lock of m's already in the
 * pipeline is left to the set: if the server grants it, the set gives it
 * back with an unlock of its own, so a cancelled acquire never leaves a
 * lock behind. Until that try has been answered (and a grant given back),
 * its key stays taken in the set's exclusion table, in one of its slots:
 * a member asking for it meanwhile is answered "busy", as while m asked.
 * m may start again, or go, as soon as this returns.
 *
 * Returns 0, or ADVLOCK_EINVAL (NULLs) or ADVLOCK_EMISUSE (m not acquiring
 * in this set: idle, ended, or releasing). It needs no memory (the key's
 * place is one of the slots the set allocated at init), so it no longer
 * returns ADVLOCK_ENOMEM.
 */
ADVLOCK_API int advlock_pq_lockset_cancel(advlock_pq_lockset *set, advlock_pq_member *m,
                                          int64_t now_ms);

/*
 * Lets the set make progress, as advlock_pq_async_process() does for an
 * adapter: call it when the socket showed the readiness it wanted (ready:
 * ADVLOCK_PQ_READ, ADVLOCK_PQ_WRITE, both) or the deadline came (ready 0).
 * It sends the members' statements waiting to go, with one pipeline sync
 * after them; reads the answers and hands each to its member, whose machine
 * then sleeps, sends again or ends; wakes members whose sleep is over; and
 * watches the held locks' session. A connection found closed or reset
 * ends every member: those holding a lock turn LOST at once
 * (advlock_pq_member_lost()), those under way end FAILED with
 * ADVLOCK_ECONNLOST. Never blocks.
 *
 * Returns 0, or ADVLOCK_EINVAL (set NULL, ready has other bits) or
 * ADVLOCK_EMISUSE (set unbound).
 */
ADVLOCK_API int advlock_pq_lockset_process(advlock_pq_lockset *set, unsigned ready, int64_t now_ms);

/* The socket to watch (PQsocket()), or -1 (NULL, unbound, closed). */
ADVLOCK_API int advlock_pq_lockset_socket(const advlock_pq_lockset *set);

/*
 * The readiness the set waits for: READ | WRITE while statements wait to
 * be sent, READ while answers are due or any member holds a lock (the
 * watch), else 0.
 */
ADVLOCK_API unsigned advlock_pq_lockset_wants(const advlock_pq_lockset *set);

/*
 * Returns 1 and stores in *at_ms the earliest time at which
 * advlock_pq_lockset_process() must be called even if the socket stays
 * quiet: the end of the first member's sleep, or the lease's next heartbeat
 * or stop deadline. Returns 0 when there is none (or for NULLs).
 */
ADVLOCK_API int advlock_pq_lockset_deadline(const advlock_pq_lockset *set, int64_t *at_ms);

/* How many members have an operation under way (0 for NULL). */
ADVLOCK_API size_t advlock_pq_lockset_busy(const advlock_pq_lockset *set);

/*
 * Returns 1 when the set has nothing in flight on its connection, the end
 * of its last batch included (a member's report may come before that end
 * has been read): statements of the caller's own may then go on the
 * connection. 0 while something is out (call advlock_pq_lockset_wait() or
 * _process() until it is read), and for NULL or a set not bound.
 */
ADVLOCK_API int advlock_pq_lockset_quiet(const advlock_pq_lockset *set);

/*
 * The set's connection engine, to read (advlock_conn_session(),
 * advlock_conn_lease_deadline(), advlock_conn_must_close(), ...), or NULL
 * for NULL. Owned by the set, valid as long as it is; never to be driven
 * by the caller (the set's own calls do).
 */
ADVLOCK_API const advlock_conn *advlock_pq_lockset_engine(const advlock_pq_lockset *set);

/*
 * One turn of a poll() loop for the whole set: as advlock_pq_wait() is for
 * one adapter (extra_fd, max_wait_ms and the return value alike). Times come
 * from advlock_pq_now_ms().
 */
ADVLOCK_API int advlock_pq_lockset_wait(advlock_pq_lockset *set, int extra_fd, int max_wait_ms);

/* 1 while m has an operation under way, else 0 (also for NULL). */
ADVLOCK_API int advlock_pq_member_busy(const advlock_pq_member *m);

/* 1 while m holds a lock (its acquire ended ACQUIRED, not released, not
 * lost), else 0 (also for NULL). */
ADVLOCK_API int advlock_pq_member_held(const advlock_pq_member *m);

/*
 * 1 when the lock m held was lost with the set's connection (closed,
 * terminated, reset): its report then says so as advlock_pq_async_lost()'s
 * does (FAILED, ADVLOCK_ECONNLOST, ADVLOCK_DETAIL_LOST), and
 * ADVLOCK_EVENT_LOST went to its event callback. Else 0 (also for NULL).
 */
ADVLOCK_API int advlock_pq_member_lost(const advlock_pq_member *m);

/*
 * m's report of the operation that ended last (the member's memory, valid
 * until its next start), or NULL while one is under way or before the
 * first ended, or for NULL.
 */
ADVLOCK_API const advlock_pq_report *advlock_pq_member_report(const advlock_pq_member *m);

/*
 * Blocking forms: start the operation and drive the whole set (every
 * member, advlock_pq_lockset_wait()) until m's has ended, then copy m's
 * report into report. Other members' operations go on meanwhile; other
 * threads must not touch the set. As for advlock_pq_acquire(), an
 * operation still waiting for the server ADVLOCK_PQ_GRACE_MS + 0.5 s past
 * its schedule (timeout_ms for an acquire, 0 for a release) ends FAILED
 * with ADVLOCK_ENOANSWER; since every member's statements wait behind the
 * unanswered one, the set gives the connection up: every member under way
 * ends so too, every held one turns LOST, and the set is unbound (calls
 * return ADVLOCK_EMISUSE; advlock_pq_lockset_finish() still frees it):
 * close the connection. No cancel request is sent (it would cancel
 * whichever member's statement the server is running).
 *
 * Returns 0 when the operation ran (whatever its outcome), or the start's
 * error (report filled as for a refused call), or ADVLOCK_EINVAL (report
 * NULL).
 */
ADVLOCK_API int advlock_pq_lockset_acquire(advlock_pq_lockset *set, advlock_pq_member *m,
                                           const char *name, size_t len, int64_t timeout_ms,
                                           const advlock_options *o, advlock_pq_report *report);
ADVLOCK_API int advlock_pq_lockset_release(advlock_pq_lockset *set, advlock_pq_member *m,
                                           advlock_pq_report *report);

#ifdef __cplusplus
}
#endif

#endif /* ADVLOCK_PQ_H */
