/*
 * advlock status: is a lock free, and if not, who holds it and who waits.
 * Reads pg_locks joined with pg_stat_activity for the current database
 * (advisory locks are per database).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "cli.h"

/* PostgreSQL does not record when a lock was granted. For an idle holder
 * the end of its last statement (state_change) is the moment advlock's
 * try-lock succeeded; for a session that ran statements since, it is a lower
 * bound. Waiters have had waitstart since PostgreSQL 14. */
#define HOLDERS_SQL(waitstart)                                                                 \
    "SELECT l.granted, l.mode, l.pid, coalesce(a.application_name, ''),"                       \
    "       coalesce(host(a.client_addr), CASE WHEN a.pid IS NULL THEN '' ELSE 'local' END),"  \
    "       coalesce(a.state, ''),"                                                            \
    "       coalesce(to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), ''),"               \
    "       coalesce(floor(extract(epoch FROM now() - CASE WHEN l.granted THEN a.state_change" \
    "                                                    ELSE " waitstart " END))::bigint, 0)" \
    "  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"                          \
    " WHERE l.locktype = 'advisory' AND l.objsubid = 1"                                        \
    "   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"     \
    "   AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint"                        \
    " ORDER BY l.granted DESC, l.pid"

static void format_duration(long long seconds, char *buf, size_t size)
{
    if (seconds < 0)
        seconds = 0;
    snprintf(buf, size, "%lld:%02lld:%02lld", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

/* Prints one key's holders and waiters; returns 1 if held, 0 if free, -1 on error. */
static int show_key(PGconn *conn, const char *sql, const char *name)
{
    int64_t key;
    int rc = advlock_derive_key(name, strlen(name), &key);
    if (rc != 0) {
        cli_error("'%s': %s", name, advlock_strerror(rc));
        return -2;
    }
    char key_text[24];
    snprintf(key_text, sizeof key_text, "%" PRId64, key);
    const char *params[] = {key_text};
    PGresult *res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        cli_error("status of '%s': %s", name, PQerrorMessage(conn));
        PQclear(res);
        return -1;
    }
    int rows = PQntuples(res);
    int held = rows > 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    printf("%s\t%s\tkey %s\n", name,
           held       ? "held"
           : rows > 0 ? "free, with waiters"
                      : "free",
           key_text);
    for (int i = 0; i < rows; i++) {
        int granted = strcmp(PQgetvalue(res, i, 0), "t") == 0;
        char duration[32];
        format_duration(strtoll(PQgetvalue(res, i, 7), NULL, 10), duration, sizeof duration);
        printf("  %s\tpid %s\tmode %s\tapplication '%s'\tclient %s\tstate %s\t"
               "backend start %s\t%s %s\n",
               granted ? "holder" : "waiter", PQgetvalue(res, i, 2), PQgetvalue(res, i, 1),
               PQgetvalue(res, i, 3), PQgetvalue(res, i, 4)[0] ? PQgetvalue(res, i, 4) : "?",
               PQgetvalue(res, i, 5)[0] ? PQgetvalue(res, i, 5) : "?", PQgetvalue(res, i, 6),
               granted ? "held for" : "waiting for", duration);
    }
    PQclear(res);
    return held;
}

static void usage(FILE *to)
{
    fputs("usage: advlock status [-d CONNINFO] KEY...\n"
          "  For each key: free or held, and every holder and waiter (pid, application,\n"
          "  client, state, backend start, how long). Exit 0 if all free, 1 if any held.\n",
          to);
}

int cmd_status(int argc, char **argv)
{
    static const struct option options[] = {
        {"dbname", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *conninfo = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "+d:h", options, NULL)) != -1) {
        switch (opt) {
        case 'd': conninfo = optarg; break;
        case 'h': usage(stdout); return EXIT_OK;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind == argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    PGconn *conn = cli_connect(conninfo, NULL);
    if (conn == NULL)
        return EXIT_NO_SERVER;

    const char *sql = PQserverVersion(conn) >= 140000 ? HOLDERS_SQL("l.waitstart")
                                                      : HOLDERS_SQL("NULL::timestamptz");
    int any_held = 0, failed = 0, bad_key = 0;
    for (int i = optind; i < argc; i++) {
        int held = show_key(conn, sql, argv[i]);
        if (held == -2)
            bad_key = 1;
        else if (held < 0)
            failed = 1;
        else
            any_held |= held;
    }
    PQfinish(conn);
    if (failed)
        return EXIT_LOCK_ERROR;
    if (bad_key)
        return EXIT_BAD_KEY;
    return any_held ? EXIT_BUSY : EXIT_OK;
}
