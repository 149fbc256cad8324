/*
 * Who holds a lock, asked with the core's holders statement: advlock status
 * prints every row; advlock run --diagnose with the JSON log asks once
 * while it waits, so that its waiting events name the holder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { INT8_OID = 20 };

/* Sends the holders statement for key, its parameter a binary int8 as the
 * adapters send it; rows come back as text. Returns PQsendQueryParams's. */
static int send_holders(PGconn *conn, int64_t key)
{
    char param[8];
    uint64_t v = (uint64_t)key;
    for (int i = 7; i >= 0; i--, v >>= 8)
        param[i] = (char)(v & 0xFF);
    const Oid types[] = {INT8_OID};
    const char *values[] = {param};
    const int lengths[] = {sizeof param}, formats[] = {1};
    return PQsendQueryParams(conn, advlock_sql_text(ADVLOCK_SQL_HOLDERS), 1, types, values, lengths,
                             formats, 0);
}

PGresult *cli_holders_query(PGconn *conn, int64_t key, cli_bound bound, int *rc)
{
    *rc = 0;
    return send_holders(conn, key)
               ? cli_await_last_result(conn, "the question who holds the lock", bound, rc)
               : PQgetResult(conn);
}

/* The holder's facts from the statement's rows: holders come first (ORDER
 * BY granted DESC). */
static void first_holder(const PGresult *res, advlock_report *into)
{
    int rows = PQntuples(res), holders = 0;
    while (holders < rows && strcmp(PQgetvalue(res, holders, COL_GRANTED), "t") == 0)
        holders++;
    into->detail = ADVLOCK_DETAIL_DIAGNOSED;
    into->holder_pid = holders > 0 ? (int)strtol(PQgetvalue(res, 0, COL_PID), NULL, 10) : 0;
    into->other_holders = holders > 0 ? holders - 1 : 0;
    if (holders == 0)
        return;
    into->holder_seconds = strtoll(PQgetvalue(res, 0, COL_SECONDS), NULL, 10);
    into->holder_state = advlock_backend_state_parse(PQgetvalue(res, 0, COL_STATE));
    snprintf(into->holder_application, sizeof into->holder_application, "%s",
             PQgetvalue(res, 0, COL_APPLICATION));
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
