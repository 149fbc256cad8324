/*
 * Which of the grants fencing tokens or lock-delay need (docs/operators.md,
 * "Fencing tokens", "Lock-delay") the connected role lacks: a statement
 * refused for a privilege (SQLSTATE 42501) names only the object the
 * server stopped at, and the fix is the GRANT statements, named here.
 */
#include <stdio.h>

#include "cli.h"

void cli_say_missing_grants(PGconn *conn, cli_bound bound, advlock_sql check, const char *needs)
{
    int rc;
    PGresult *last = cli_exec_row(conn, check, NULL, "the grants' check", bound, &rc);
    if (rc == 0 && PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) == 1
        && !PQgetisnull(last, 0, 0))
        cli_error("%s grants this role lacks; a DBA runs: %s", needs, PQgetvalue(last, 0, 0));
    PQclear(last);
}
