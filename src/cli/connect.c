/*
 * One way to open a connection for every subcommand: libpq's own rules for
 * conninfo strings, PG* variables and service files (so no password need be
 * on the command line), plus the settings a lock holder needs.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_trimmed_length(const char *text)
{
    size_t n = strlen(text);
    while (n > 0 && strchr(" \t\r\n", text[n - 1]) != NULL)
        n--;
    return (int)n;
}

/* libpq's own test (recognized_connection_string): a URI or key=value
 * pairs; anything else is a database name. */
static int is_conninfo(const char *text)
{
    return strncmp(text, "postgresql://", 13) == 0 || strncmp(text, "postgres://", 11) == 0
           || strchr(text, '=') != NULL;
}

int cli_connect(const char *conninfo, const char *application_name, PGconn **out)
{
    *out = NULL;
    /* A mistyped conninfo is a usage error, found before any connection. */
    char *error = NULL;
    PQconninfoOption *parsed;
    if (conninfo != NULL && is_conninfo(conninfo)) {
        if ((parsed = PQconninfoParse(conninfo, &error)) == NULL) {
            const char *why = error != NULL ? error : "out of memory";
            cli_error("bad connection string: %.*s", cli_trimmed_length(why), why);
            PQfreemem(error);
            return EXIT_USAGE;
        }
        PQconninfoFree(parsed);
    }
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
        return EXIT_NO_SERVER;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        const char *why = PQerrorMessage(conn);
        cli_error("cannot connect: %.*s", cli_trimmed_length(why), why);
        PQfinish(conn);
        return EXIT_NO_SERVER;
    }
    *out = conn;
    return EXIT_OK;
}
