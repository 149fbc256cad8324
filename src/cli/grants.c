/*
 * Which of the grants fencing tokens need (docs/operators.md, "Fencing
 * tokens") the connected role lacks: a fenced try refused for a privilege
 * (SQLSTATE 42501) names only the object the server stopped at, and the
 * fix is the GRANT statements, named here.
 */
#include <stdio.h>

#include "cli.h"

void cli_say_missing_grants(PGconn *conn, cli_bound bound)
{
    int rc;
    PGresult *last =
        cli_exec_row(conn, ADVLOCK_SQL_FENCE_GRANTS, NULL, "the grants' check", bound, &rc);
    if (rc == 0 && PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) == 1
        && !PQgetisnull(last, 0, 0))
        cli_error("fencing tokens need grants this role lacks; a DBA runs: %s",
                  PQgetvalue(last, 0, 0));
    PQclear(last);
}
