/*
 * Keeping server notices (the WARNING of an unlock that found no lock) off
 * stderr and in the caller's report, and telling the event callback about
 * them, leaving the connection's hooks exactly as found. The policy is
 * stated in docs/libpq.md under "Server notices".
 *
 * libpq's PQsetNoticeReceiver() returns the previous receiver but not its
 * argument, so only a receiver whose argument does not matter can be swapped
 * out and put back exactly: libpq's default one, which ignores its argument
 * and hands the notice to the connection's notice processor. libpq does not
 * export its defaults, so they are read once from a connection object that
 * never connects.
 */
#include "pq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static PQnoticeReceiver default_receiver;
static PQnoticeProcessor default_processor;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
/* Set once the defaults are read: every blocking call diverts, and this
 * test costs less than pthread_once()'s call. */
static atomic_int defaults_known;

static void learn_defaults(void)
{
    /* An unknown option fails PQconnectStartParams() before any I/O, and
     * still returns a fresh connection object with libpq's default hooks. */
    static const char *const keywords[] = {"advlock_probe_no_such_option", NULL};
    static const char *const values[] = {"", NULL};
    PGconn *probe = PQconnectStartParams(keywords, values, 0);
    if (probe == NULL)
        return;
    default_receiver = PQsetNoticeReceiver(probe, NULL, NULL);
    default_processor = PQsetNoticeProcessor(probe, NULL, NULL);
    PQfinish(probe);
    atomic_store_explicit(&defaults_known, 1, memory_order_release);
}

static void receive_notice(void *arg, const PGresult *res)
{
    advlock_pq_notice_guard *g = arg;
    advlock_pq_report *r = g->sink;
    const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *text = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

    r->notices++;
    advlock_pq_copy_line(r->notice, sizeof r->notice,
                         text != NULL ? text : PQresultErrorMessage(res));
    advlock_pq_copy_line(r->notice_sqlstate, sizeof r->notice_sqlstate,
                         sqlstate != NULL && strlen(sqlstate) == 5 ? sqlstate : "");
    /* An idle session's FATAL ("terminating connection due to administrator
     * command") reaches libpq as a notice: the server is ending the session. */
    if (severity != NULL && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
        g->fatal = 1;
    if (!advlock_conn_on_notice(g->engine, r->notice_sqlstate, r->notice, g->now_ms))
        advlock_notify(g->events, ADVLOCK_EVENT_WARNING, r->notice, g->now_ms);
    /* libpq's default receiver passes the notice to the processor the
     * caller installed, with the caller's argument (the result carries
     * both); it ignores its own argument. Which processor that is, is
     * asked here, where a notice came, not at every diversion. */
    PQnoticeProcessor processor = PQsetNoticeProcessor(g->conn, NULL, NULL); /* NULL: just ask */
    if (processor != NULL && processor != default_processor)
        g->previous(NULL, res);
}

void advlock_pq_notices_learn(void)
{
    if (!atomic_load_explicit(&defaults_known, memory_order_acquire))
        pthread_once(&defaults_once, learn_defaults);
}

void advlock_pq_notices_divert(advlock_pq_notice_guard *g, PGconn *conn, advlock_pq_report *sink,
                               const advlock_machine *events, advlock_conn *engine, int64_t now_ms)
{
    advlock_pq_notices_learn();
    g->conn = conn;
    g->sink = sink;
    g->events = events;
    g->engine = engine;
    g->now_ms = now_ms;
    g->fatal = 0;
    g->previous = PQsetNoticeReceiver(conn, NULL, NULL); /* NULL: just ask */
    g->diverted = g->previous != NULL && g->previous == default_receiver;
    if (!g->diverted)
        return;
    PQsetNoticeReceiver(conn, receive_notice, g);
}

void advlock_pq_notices_restore(advlock_pq_notice_guard *g)
{
    /* The default receiver's argument is NULL on every new connection. */
    if (g->diverted)
        PQsetNoticeReceiver(g->conn, g->previous, NULL);
    g->diverted = 0;
}
