/*
 * One way to open a connection for every subcommand: libpq's own rules for
 * conninfo strings, PG* variables and service files (so no password need be
 * on the command line), plus the settings a lock holder needs.
 */
#include <stdio.h>

#include "cli.h"

PGconn *cli_connect(const char *conninfo, const char *application_name)
{
    /* Keepalives let the server notice a dead holder within about a minute
     * and release its locks; without them a lost client can keep a lock
     * for hours. (No effect on Unix-domain sockets, which need none.) */
    const char *keys[] = {
        "dbname",          "application_name",    "fallback_application_name", "keepalives",
        "keepalives_idle", "keepalives_interval", "keepalives_count",          NULL};
    const char *values[] = {conninfo, application_name, "advlock", "1", "30", "10", "3", NULL};
    /* A NULL value is skipped, so an unset conninfo means "from the environment". */
    PGconn *conn = PQconnectdbParams(keys, values, 1);
    if (conn == NULL) {
        cli_error("cannot connect: out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        cli_error("cannot connect: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    return conn;
}
