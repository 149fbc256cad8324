/*
 * advlock run --xact: the transaction held open around the command. Its
 * lock is transaction-scoped, so the transaction's end is the release:
 * COMMIT when the command succeeded, ROLLBACK otherwise. Sent on the lock's
 * own connection while the adapter has nothing in flight, and waited for
 * under advlock run's bound and its signals like the lock's statements: a
 * server answers these at once, but a pooler makes BEGIN wait for a free
 * server connection.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "advlock_pq.h"
#include "cli.h"

int cli_await_results(PGconn *conn, const char *sql, cli_bound bound)
{
    for (;;) {
        int unsent = PQflush(conn);
        if (unsent < 0 || (unsent == 0 && (!PQconsumeInput(conn) || !PQisBusy(conn))))
            return 0;
        int64_t now = advlock_pq_now_ms();
        if (now >= bound.until_ms) {
            char seconds[32];
            advlock_format_seconds(bound.named_ms, seconds, sizeof seconds);
            advlock_pq_abandon(conn);
            cli_error("no answer from the server within %ss to %s; connection closed", seconds,
                      sql);
            return CLI_NO_ANSWER;
        }
        int64_t left = bound.until_ms == INT64_MAX ? -1 : bound.until_ms - now;
        struct pollfd fds[2] = {
            {.fd = PQsocket(conn), .events = (short)(POLLIN | (unsent ? POLLOUT : 0))},
            {.fd = cli_signals_fd(), .events = POLLIN},
        };
        if (poll(fds, 2, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR)
            return 0; /* libpq's next read says whether the connection failed */
        int stop = fds[1].revents != 0 ? cli_signals_stop() : 0;
        if (stop != 0) {
            /* Nothing is written in the transaction: whatever the statement
             * would have done, closing the session ends it and its lock. */
            advlock_pq_abandon(conn);
            return stop;
        }
    }
}

PGresult *cli_await_last_result(PGconn *conn, const char *sql, cli_bound bound, int *rc)
{
    /* On a lock set's connection (pipeline mode, the set having nothing
     * out) the statement went with a sync of its own: its results, a NULL,
     * then the sync's, which ends them. */
    int pipelined = PQpipelineStatus(conn) != PQ_PIPELINE_OFF;
    PGresult *last = NULL, *res;
    for (;;) {
        if ((*rc = cli_await_results(conn, sql, bound)) != 0) {
            PQclear(last);
            return NULL;
        }
        res = PQgetResult(conn);
        if (res != NULL && PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            return last;
        }
        if (res == NULL && (!pipelined || PQstatus(conn) == CONNECTION_BAD))
            return last;
        if (res != NULL) {
            PQclear(last);
            last = res;
        }
    }
}

PGresult *cli_exec_row(PGconn *conn, advlock_sql sql, const int64_t *params, const char *what,
                       cli_bound bound, int *rc)
{
    *rc = 0;
    int sent = advlock_pq_send_row(conn, sql, params) == 1;
    if (sent && PQpipelineStatus(conn) != PQ_PIPELINE_OFF)
        sent = PQpipelineSync(conn) == 1;
    return sent ? cli_await_last_result(conn, what, bound, rc) : PQgetResult(conn);
}

/* Runs one transaction-control row; returns 0, or as cli_xact_begin. */
static int run_statement(PGconn *conn, advlock_sql row, cli_bound bound)
{
    const char *sql = advlock_sql_text(row);
    int rc;
    PGresult *res = cli_exec_row(conn, row, NULL, sql, bound, &rc);
    if (rc != 0)
        return rc;
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK; /* as PQexec, the last result says */
    PQclear(res);
    if (!ok) {
        const char *why = PQerrorMessage(conn);
        cli_error("%s failed: %.*s", sql, cli_trimmed_length(why), why);
    }
    return ok ? 0 : -1;
}

int cli_xact_begin(PGconn *conn, cli_bound bound)
{
    return run_statement(conn, ADVLOCK_SQL_BEGIN, bound);
}

int cli_xact_drop_snapshot(PGconn *conn, cli_bound bound)
{
    /* The acquire's statements went unnamed in the extended protocol, and
     * the unnamed portal of the last one keeps its snapshot until it is
     * replaced or the transaction ends: the session's xmin would stay put
     * for the whole run, and VACUUM could remove no row deleted meanwhile
     * anywhere in the cluster (seen on PostgreSQL 15 as backend_xmin in
     * pg_stat_activity). Any statement in the simple protocol replaces that
     * portal and drops its own at once; CLOSE ALL also says what is meant. */
    return run_statement(conn, ADVLOCK_SQL_CLOSE_ALL, bound);
}

int cli_xact_end(PGconn *conn, int commit, cli_bound bound)
{
    PGTransactionStatusType state = PQtransactionStatus(conn);
    if (state == PQTRANS_INTRANS)
        return run_statement(conn, commit ? ADVLOCK_SQL_COMMIT : ADVLOCK_SQL_ROLLBACK, bound);
    int rc = state == PQTRANS_INERROR ? run_statement(conn, ADVLOCK_SQL_ROLLBACK, bound) : -1;
    if (rc > 0 || (rc == 0 && !commit))
        return rc;
    /* No transaction left open (none began, or the session is gone): no
     * ROLLBACK, which would only draw the server's WARNING. */
    if (state != PQTRANS_INERROR && !commit)
        return 0;
    if (commit)
        cli_error("the transaction holding the lock failed before COMMIT: its work is undone");
    return -1;
}
