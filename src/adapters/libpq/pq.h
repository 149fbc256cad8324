/* Declarations shared by the libpq adapters' files; none of this is exported. */
#ifndef ADVLOCK_PQ_INTERNAL_H
#define ADVLOCK_PQ_INTERNAL_H

#include "advlock_pq.h"

/* ---- query.c: sending one of the machine's queries ------------------------ */

/* The form a statement goes in; see "Prepared statements" in advlock_pq.h. */
enum advlock_pq_form {
    ADVLOCK_PQ_PREPARE = 1,      /* prepare it under its name, then execute */
    ADVLOCK_PQ_EXECUTE_NAMED,    /* execute the prepared statement */
    ADVLOCK_PQ_EXECUTE_UNNAMED   /* parse, bind and execute in one go */
};

/* Chooses the first form for the machine's query sql on conn. */
void advlock_pq_query_begin(advlock_pq_query_ *q, advlock_sql sql, uint32_t prepared,
                            PGconn *conn);

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
 * Reads one PGresult (not NULL) of the current statement into q's answer.
 * The first failure is kept (it says why), and a lost connection wins over
 * whatever the results say.
 */
void advlock_pq_answer_read(advlock_pq_query_ *q, PGconn *conn, const PGresult *res);

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

/* Feeds the final answer to the machine. */
void advlock_pq_answer_feed(const advlock_pq_query_ *q, advlock_machine *m, int64_t now_ms);

/* ---- notices.c: keeping server notices off stderr ------------------------- */

typedef struct advlock_pq_notice_guard {
    PGconn *conn;
    advlock_pq_report *sink;
    PQnoticeReceiver previous;
    int diverted;
    int forward;
} advlock_pq_notice_guard;

/*
 * Until advlock_pq_notices_restore(g), notices on conn are counted in sink
 * (see "Server notices" in advlock_pq.h). g must stay in place until then.
 */
void advlock_pq_notices_divert(advlock_pq_notice_guard *g, PGconn *conn,
                               advlock_pq_report *sink);
void advlock_pq_notices_restore(advlock_pq_notice_guard *g);

/* ---- report.c: the caller's view of an operation -------------------------- */

/* Clears a report at the start of an operation. */
void advlock_pq_report_begin(advlock_pq_report *r);

/* Fills the outcome fields from a machine whose action is DONE. */
void advlock_pq_report_finish(advlock_pq_report *r, const advlock_machine *m);

/* Fills a report for a call refused with error (nothing was sent). */
void advlock_pq_report_refuse(advlock_pq_report *r, int error);

/* ---- clock.c ------------------------------------------------------------- */

/* Sleeps until CLOCK_MONOTONIC reaches at_ms, resuming after signals. */
void advlock_pq_sleep_until(int64_t at_ms);

/* ---- shared checks ------------------------------------------------------- */

/* 1 when conn can take a new statement from an adapter: no query of the
 * caller's in progress and not in pipeline mode. A broken connection counts
 * as free: the operation then fails with CONNECTION_LOST. */
int advlock_pq_conn_free(PGconn *conn);

#endif
