/* Declarations shared by the libpq adapters' files; none of this is exported. */
#ifndef ADVLOCK_PQ_INTERNAL_H
#define ADVLOCK_PQ_INTERNAL_H

#include "../../core/saturating.h"
#include "advlock_pq.h"

/* The lock set's name for advlock_add_saturating (the caller's clock plus a
 * plan's time must never wrap into the past). */
#define advlock_pq_add_ms advlock_add_saturating

/* The server's type OIDs of the statements' parameters and answers
 * (pg_type), and libpq's code for the binary format, which both use. */
enum { BOOL_OID = 16, INT8_OID = 20, INT4_OID = 23, TEXT_OID = 25, VOID_OID = 2278, BINARY = 1 };

/* ---- query.c: sending one of the engine's statements ---------------------- */

/* Sends the engine's statement st (a query) in its form (PQsend*) with
 * its parameters (param, param2, param3: as many as the statement takes);
 * returns libpq's 1 or 0. Both adapters send this way, so both read
 * results one by one (see answer.c). */
int advlock_pq_statement_send(PGconn *conn, const advlock_statement *st);

/* ---- seed.c: randomness for jitter --------------------------------------- */

/* 64 bits from the operating system's entropy (getrandom(2)); if that
 * fails, a mix of the clock, the process id and a stack address, which
 * still differs between processes started together. */
uint64_t advlock_pq_entropy(void);

/* Seeds full jitter from advlock_pq_entropy() when o asks for it with no
 * seed and no generator of its own ("random": see advlock_options). */
void advlock_pq_seed_jitter(advlock_options *o);

/* ---- answer.c: what a statement's results mean ---------------------------- */

/* Forgets any answer: the next statement starts unanswered. */
void advlock_pq_answer_clear(advlock_pq_query_ *q);

/*
 * Reads one PGresult (not NULL) of the current statement into q's answer,
 * taking ownership of res: q keeps the result that says the answer (its
 * words, a holders query's rows) until advlock_pq_answer_clear(), and clears the others. The first
 * failure is kept (it says why), and a lost connection wins over whatever the results say.
 */
void advlock_pq_answer_read(advlock_pq_query_ *q, PGconn *conn, PGresult *res);

/*
 * Ends the current statement's results: if none was read (libpq gave no
 * result, or could not send), the answer becomes CONNECTION_LOST with
 * libpq's message; so does any answer on a connection now broken.
 */
void advlock_pq_answer_end(advlock_pq_query_ *q, PGconn *conn);

/*
 * Copies the first line of text (NULL: none) into out (size > 3), cut at a
 * UTF-8 character boundary and ended with "..." if it does not fit: libpq's
 * own messages continue with hints on further lines, and a report's fields
 * are one line each.
 */
void advlock_pq_copy_line(char *out, size_t size, const char *text);

/*
 * The final answer in q as the connection engine takes it
 * (advlock_conn_on_answer()): a failure's words written into words (size
 * bytes), a holders query's rows into *rows (free() them after the
 * engine has read them; NULL when there are none). out's strings point
 * into words, q and q's kept result, which stays until
 * advlock_pq_answer_clear().
 */
void advlock_pq_answer_export(advlock_pq_query_ *q, PGconn *conn, char *words, size_t size,
                              advlock_answer *out, advlock_holder **rows);

/* ---- notices.c: keeping server notices off stderr ------------------------- */

typedef struct advlock_pq_notice_guard {
    PGconn *conn;
    advlock_pq_report *sink;
    const advlock_machine *events;
    advlock_conn *engine; /* hears every notice first (lock-delay reads them) */
    int64_t now_ms;
    PQnoticeReceiver previous;
    int diverted;
    int fatal; /* a FATAL or PANIC notice arrived: the server ends the session */
    struct advlock_pq_notice_guard *outer; /* the guard held before this one (pump.c) */
} advlock_pq_notice_guard;

/*
 * Reads libpq's default notice hooks, once per process, from a connection
 * object made and freed for the purpose (it never connects). A pump does
 * so as it binds, before the caller's connection runs more statements:
 * made at the first diversion instead, after them, that object's freed
 * memory lay among libpq's live blocks, and each result's 2 KB block was
 * split from it and merged back (about 550 instructions of malloc's per
 * uncontended cycle, docs/performance.md). Idempotent.
 */
void advlock_pq_notices_learn(void);

/*
 * Until advlock_pq_notices_restore(g), notices on conn are counted in sink
 * and handed to engine (advlock_conn_on_notice(): the head member's event
 * callback hears it as ADVLOCK_EVENT_WARNING), else, with no member's
 * statement at the head, reported to the callback of the machine events,
 * at now_ms (see "Server notices" in docs/libpq.md). g must stay in place
 * until then.
 */
void advlock_pq_notices_divert(advlock_pq_notice_guard *g, PGconn *conn, advlock_pq_report *sink,
                               const advlock_machine *events, advlock_conn *engine, int64_t now_ms);
void advlock_pq_notices_restore(advlock_pq_notice_guard *g);

/* ---- report.c: the caller's view of an operation -------------------------- */

/* Empties a report's text and notices at the start of an operation; its
 * lock facts are the machine's, copied when the operation ends. */
void advlock_pq_report_begin(advlock_pq_report *r);

/* Copies the final report of a machine whose action is DONE. The server's
 * words stay only where the outcome quotes them. */
void advlock_pq_report_finish(advlock_pq_report *r, const advlock_report *lock);

/* Turns a report into a lost lock's: FAILED, ADVLOCK_ECONNLOST,
 * ADVLOCK_DETAIL_LOST, with the server's sqlstate ("" if none) and words. */
void advlock_pq_report_lost(advlock_pq_report *r, const char *sqlstate, const char *words);

/* Fills a report for a refused call: outcome FAILED, failure 0, no text. */
void advlock_pq_report_refuse(advlock_pq_report *r);

/* Copies a report, its strings only as far as they go. */
void advlock_pq_report_copy(advlock_pq_report *to, const advlock_pq_report *from);

/* ---- cancel.c: asking the server to cancel the statement in flight --------- */

/*
 * Sends a cancel request for conn's statement in flight; returns 1 if the
 * server took it, else 0 with the reason in error (size bytes). Blocks for
 * one connection to the server, 250 ms at most: a request the server has
 * not taken by then goes on in a thread of its own and counts as not sent
 * (see "Server-side waiting" in docs/libpq.md).
 */
int advlock_pq_cancel_send(PGconn *conn, char *error, size_t size);

/* ---- async.c: the single adapter's engine, for blocking.c -------------------- */

/* Binds an adapter to conn, whatever its state, without changing the
 * connection's blocking mode (the blocking adapter's init). */
void advlock_pq_engine_bind(advlock_pq *a, PGconn *conn);

/*
 * Reads whatever the server sent to a session with no statement of the
 * engine's in flight, without blocking: notices are routed as usual, and a
 * connection found closed or failed ends a held lock's watch with LOST.
 */
void advlock_pq_engine_watch(advlock_pq *a, int64_t now_ms);

/* 1 while a statement of the engine's is sent and not yet answered (a
 * sleep between tries is no statement). */
int advlock_pq_engine_in_flight(const advlock_pq *a);

/* Asks the server to cancel the statement in flight (cancel.c's request,
 * 250 ms at most); a request not taken is the engine's warning. */
void advlock_pq_engine_cancel_in_flight(advlock_pq *a, int64_t now_ms);

/*
 * Ends the operation whose statement got no answer within the caller's
 * bound: the engine gives the connection up (FAILED, ADVLOCK_ENOANSWER),
 * and the adapter is unbound, its connection left with a statement in
 * flight (every call but init then returns ADVLOCK_EMISUSE). The
 * connection is the caller's to close.
 */
void advlock_pq_engine_give_up(advlock_pq *a, int64_t now_ms);

/* advlock_pq_wait() on an adapter (not NULL), with the clock read at
 * *now_ms by the caller just before (a blocking call's loop has it), a
 * reset told by the caller (a blocking call's start tells it, once); sets
 * *now_ms to the clock's reading after the wait, before its turn. */
int advlock_pq_engine_wait(advlock_pq *a, int extra_fd, int max_wait_ms, int64_t *now_ms);

/* ---- wait.c: one poll() turn ------------------------------------------------ */

/* What one turn saw: the readiness to process with, whether extra_fd is
 * readable. */
typedef struct advlock_pq_turn {
    unsigned ready;
    int extra;
    int64_t now_ms; /* the clock once the turn ended: the time to process at */
} advlock_pq_turn;

/* One turn of a driver's poll() loop (advlock_pq_wait(),
 * advlock_pq_lockset_wait()), from what the driver says of itself at now:
 * busy, its socket fd and the readiness it wants (0: not fd), its deadline
 * *at (NULL: none). Polls fd and extra_fd (-1: none) until *at and no longer
 * than max_wait_ms (-1: no limit); returns at once when there is nothing
 * to wait for, and a signal ends it with nothing seen. Returns 1 when the
 * driver must process now, with turn->ready: the socket was ready or the
 * deadline came, or (READ, without polling) the driver is busy with
 * nothing that could ever wake the wait, and libpq's read says what
 * broke. */
int advlock_pq_wait_turn(int busy, int fd, unsigned wants, const int64_t *at, int extra_fd,
                         int max_wait_ms, int64_t now, advlock_pq_turn *turn);

/* A blocking call's max_wait_ms until until_ms (INT_MAX at most), or -1
 * (only the driver's own deadline) when there is none or it has passed. */
int advlock_pq_wait_until(int64_t until_ms, int64_t now);

/* Reads what an idle session's socket holds, without blocking; returns 1
 * if the connection is gone (pump.c). */
int advlock_pq_read_idle(PGconn *conn);

/* ---- shared checks ------------------------------------------------------- */

/* 1 when conn can take a new statement from an adapter: no query of the
 * caller's in progress and not in pipeline mode. A broken connection counts
 * as free: the operation then fails with CONNECTION_LOST. When in_block is
 * not NULL it says, for an adapter's start, whether a sound connection is
 * inside a transaction block (1 or 0), or -1 for a broken one. */
int advlock_pq_conn_free(PGconn *conn, int *in_block);

#endif
