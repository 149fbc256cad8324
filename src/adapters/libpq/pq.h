/* Declarations shared by the libpq adapters' files; none of this is exported. */
#ifndef ADVLOCK_PQ_INTERNAL_H
#define ADVLOCK_PQ_INTERNAL_H

#include "advlock_pq.h"

/* ---- query.c: sending one of the machine's queries ------------------------ */

/* The form a statement goes in; see "Prepared statements" in advlock_pq.h. */
enum advlock_pq_form {
    ADVLOCK_PQ_PREPARE = 1,    /* prepare it under its name, then execute */
    ADVLOCK_PQ_EXECUTE_NAMED,  /* execute the prepared statement */
    ADVLOCK_PQ_EXECUTE_UNNAMED /* parse, bind and execute in one go */
};

/* Chooses the first form for the machine's query sql on conn. */
void advlock_pq_query_begin(advlock_pq_query_ *q, advlock_sql sql, uint32_t prepared, PGconn *conn);

/* Sends the current form (PQsend*); returns libpq's 1 or 0. Both adapters
 * send this way, so both read results one by one (see answer.c). */
int advlock_pq_query_send(const advlock_pq_query_ *q, PGconn *conn, int64_t param);

/*
 * Given the answer to the current form, decides whether another form must
 * follow (returns 1: send it; the answer is cleared) or the answer is the
 * query's result for the machine (returns 0). Updates *prepared.
 */
int advlock_pq_query_next(advlock_pq_query_ *q, uint32_t *prepared, PGconn *conn);

/* ---- answer.c: what a statement's results mean ---------------------------- */

/* Forgets any answer: the next statement starts unanswered. */
void advlock_pq_answer_clear(advlock_pq_query_ *q);

/*
 * Reads one PGresult (not NULL) of the current statement into q's answer,
 * taking ownership of res: it is cleared, or kept in q (the rows of a
 * holders query) until advlock_pq_answer_feed() or advlock_pq_answer_clear().
 * The first failure is kept (it says why), and a lost connection wins over
 * whatever the results say.
 */
void advlock_pq_answer_read(advlock_pq_query_ *q, PGconn *conn, PGresult *res);

/*
 * Ends the current statement's results: if none was read (libpq gave no
 * result, or could not send), the answer becomes CONNECTION_LOST with
 * libpq's message; so does any answer on a connection now broken.
 */
void advlock_pq_answer_end(advlock_pq_query_ *q, PGconn *conn);

/*
 * Copies the first line of text (NULL: none) into out, cut at a UTF-8
 * character boundary if it does not fit: libpq's own messages continue with
 * hints on further lines, and a report's fields are one line each.
 */
void advlock_pq_copy_line(char *out, size_t size, const char *text);

/* Feeds the final answer to the machine (a result, or a holders query's
 * rows) and lets go of any result q kept. */
void advlock_pq_answer_feed(advlock_pq_query_ *q, advlock_machine *m, int64_t now_ms);

/* ---- notices.c: keeping server notices off stderr ------------------------- */

typedef struct advlock_pq_notice_guard {
    PGconn *conn;
    advlock_pq_report *sink;
    const advlock_machine *events;
    int64_t now_ms;
    PQnoticeReceiver previous;
    int diverted;
    int forward;
    int fatal; /* a FATAL or PANIC notice arrived: the server ends the session */
} advlock_pq_notice_guard;

/*
 * Until advlock_pq_notices_restore(g), notices on conn are counted in sink
 * and reported as ADVLOCK_EVENT_WARNING to the callback of the machine
 * events, at now_ms (see "Server notices" in advlock_pq.h). g must stay in
 * place until then.
 */
void advlock_pq_notices_divert(advlock_pq_notice_guard *g, PGconn *conn, advlock_pq_report *sink,
                               const advlock_machine *events, int64_t now_ms);
void advlock_pq_notices_restore(advlock_pq_notice_guard *g);

/* ---- report.c: the caller's view of an operation -------------------------- */

/* Clears a report at the start of an operation. */
void advlock_pq_report_begin(advlock_pq_report *r);

/* Fills the outcome fields from a machine whose action is DONE. */
void advlock_pq_report_finish(advlock_pq_report *r, const advlock_machine *m);

/* Fills a report for a call refused with error (nothing was sent). */
void advlock_pq_report_refuse(advlock_pq_report *r, int error);

/* ---- cancel.c: asking the server to cancel the statement in flight --------- */

/*
 * Sends a cancel request for conn's statement in flight; returns 1 if the
 * server took it, else 0 with the reason in error (size bytes). Blocks for
 * one connection to the server (see "Server-side waiting" in advlock_pq.h).
 */
int advlock_pq_cancel_send(PGconn *conn, char *error, size_t size);

/* ---- async.c: the one engine both adapters drive ----------------------------- */

/* Binds an engine to conn, whatever its state, without changing the
 * connection's blocking mode (the blocking adapter's init). */
void advlock_pq_engine_bind(advlock_pq_async *a, PGconn *conn);

/*
 * Reads whatever the server sent to a session with no statement of the
 * engine's in flight, without blocking: notices are routed as usual, and a
 * connection found closed or failed ends a held lock's watch with LOST.
 * Returns 1 if the connection is gone, else 0.
 */
int advlock_pq_engine_watch(advlock_pq_async *a, int64_t now_ms);

/* ---- shared checks ------------------------------------------------------- */

/* 1 when conn can take a new statement from an adapter: no query of the
 * caller's in progress and not in pipeline mode. A broken connection counts
 * as free: the operation then fails with CONNECTION_LOST. */
int advlock_pq_conn_free(PGconn *conn);

#endif
