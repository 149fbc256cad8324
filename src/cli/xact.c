/*
 * advlock run --xact: the transaction held open around the command. Its
 * lock is transaction-scoped, so the transaction's end is the release:
 * COMMIT when the command succeeded, ROLLBACK otherwise. Run with PQexec on
 * the lock's own connection while the adapter has nothing in flight (it
 * blocks, whatever the connection's nonblocking mode; the server answers
 * these at once).
 */
#include <stdio.h>

#include "cli.h"

/* Runs one transaction-control statement; returns 0 or prints why. */
static int run_statement(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        const char *why = PQerrorMessage(conn);
        cli_error("%s failed: %.*s", sql, cli_trimmed_length(why), why);
    }
    PQclear(res);
    return ok ? 0 : -1;
}

int cli_xact_begin(PGconn *conn)
{
    return run_statement(conn, "BEGIN");
}

int cli_xact_drop_snapshot(PGconn *conn)
{
    /* The acquire's statements went unnamed in the extended protocol, and
     * the unnamed portal of the last one keeps its snapshot until it is
     * replaced or the transaction ends: the session's xmin would stay put
     * for the whole run, and VACUUM could remove no row deleted meanwhile
     * anywhere in the cluster (seen on PostgreSQL 15 as backend_xmin in
     * pg_stat_activity). Any statement in the simple protocol replaces that
     * portal and drops its own at once; CLOSE ALL also says what is meant. */
    return run_statement(conn, "CLOSE ALL");
}

int cli_xact_end(PGconn *conn, int commit)
{
    PGTransactionStatusType state = PQtransactionStatus(conn);
    if (state == PQTRANS_INTRANS)
        return run_statement(conn, commit ? "COMMIT" : "ROLLBACK");
    if (state == PQTRANS_INERROR && run_statement(conn, "ROLLBACK") == 0 && !commit)
        return 0;
    /* No transaction left open (none began, or the session is gone): no
     * ROLLBACK, which would only draw the server's WARNING. */
    if (state != PQTRANS_INERROR && !commit)
        return 0;
    if (commit)
        cli_error("the transaction holding the lock failed before COMMIT: its work is undone");
    return -1;
}
