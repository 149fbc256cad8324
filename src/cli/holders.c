/*
 * Who holds a lock, asked with the core's holders statement: advlock status
 * prints every row; advlock run --diagnose with the JSON log asks once
 * while it waits, so that its waiting events name the holder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

PGresult *cli_holders_query(PGconn *conn, int64_t key, cli_bound bound, int *rc)
{
    return cli_exec_row(conn, ADVLOCK_SQL_HOLDERS, &key, "the question who holds the lock", bound,
                        rc);
}

/* The holder's facts from the statement's rows: holders come first (ORDER
 * BY granted DESC). */
static void first_holder(const PGresult *res, advlock_report *into)
{
    int rows = PQntuples(res), holders = 0;
    while (holders < rows && strcmp(PQgetvalue(res, holders, ADVLOCK_HOLDERS_GRANTED), "t") == 0)
        holders++;
    into->detail = ADVLOCK_DETAIL_DIAGNOSED;
    into->holder_pid =
        holders > 0 ? (int)strtol(PQgetvalue(res, 0, ADVLOCK_HOLDERS_PID), NULL, 10) : 0;
    into->other_holders = holders > 0 ? holders - 1 : 0;
    if (holders == 0)
        return;
    into->holder_seconds = strtoll(PQgetvalue(res, 0, ADVLOCK_HOLDERS_SECONDS), NULL, 10);
    into->holder_state = advlock_backend_state_parse(PQgetvalue(res, 0, ADVLOCK_HOLDERS_STATE));
    snprintf(into->holder_application, sizeof into->holder_application, "%s",
             PQgetvalue(res, 0, ADVLOCK_HOLDERS_APPLICATION));
}

int cli_holders_ask(PGconn *conn, int64_t key, cli_bound bound, advlock_report *into)
{
    int rc;
    PGresult *res = cli_holders_query(conn, key, bound, &rc);
    if (rc != 0)
        return rc;
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
        first_holder(res, into);
    else
        cli_error("the question who holds the lock: %.*s", cli_trimmed_length(PQerrorMessage(conn)),
                  PQerrorMessage(conn));
    PQclear(res);
    return into->detail == ADVLOCK_DETAIL_DIAGNOSED ? 0 : -1;
}
