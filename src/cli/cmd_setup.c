/*
 * advlock setup: installs what fencing tokens and lock-delay need on a
 * database (the script advlock_fence_setup_sql() returns: schema advlock,
 * its counter table, its mark table and advlock.fence_ok()). Idempotent,
 * so it may run on every deploy; it needs CREATE on the database (the
 * first time), and is never run implicitly: users who take no tokens get
 * no schema. Once installed, as the script installs it, nothing is run: a
 * role with only the grants fencing needs (which the script's CREATE ...
 * IF NOT EXISTS would refuse: PostgreSQL checks CREATE on the database
 * before it looks) succeeds too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "advlock_pq.h"
#include "cli.h"
#include "option_table.h"

static void usage(FILE *to)
{
    fputs("usage: advlock setup [-d CONNINFO] [-w SECONDS]\n"
          "  Create (if missing) the schema advlock, its tables advlock.fence and\n"
          "  advlock.mark and the function advlock.fence_ok(key, token) that\n"
          "  'advlock run --fence' and 'advlock run --lock-delay' need.\n"
          "\n"
          "  -d, --dbname CONNINFO  connection string or URI (default: PG* variables)\n"
          "  -w, --timeout SECONDS  give up on a server that does not answer after this\n"
          "                         long, connecting included (default 30); exit 69\n",
          to);
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* The body the script gives advlock.fence_ok: between its dollar quotes. */
static int body_is_current(const char *installed)
{
    static const char tag[] = "$fence_ok$";
    const char *script = advlock_fence_setup_sql();
    const char *start = strstr(script, tag), *end;
    if (start == NULL || (end = strstr(start + strlen(tag), tag)) == NULL)
        return 0;
    start += strlen(tag);
    return strlen(installed) == (size_t)(end - start)
           && strncmp(installed, start, (size_t)(end - start)) == 0;
}

/* 1 if the script would change nothing, 0 if it has work to do (or the
 * question failed: the script then says why), or as cli_await_results
 * when the server did not answer within bound. */
static int already_installed(PGconn *conn, cli_bound bound)
{
    int rc;
    PGresult *res = cli_exec_row(conn, ADVLOCK_SQL_FENCE_INSTALLED, NULL, "the check of the schema",
                                 bound, &rc);
    if (rc != 0)
        return rc;
    int done = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
               && strcmp(PQgetvalue(res, 0, 0), "t") == 0 && strcmp(PQgetvalue(res, 0, 1), "t") == 0
               && !PQgetisnull(res, 0, 2) && body_is_current(PQgetvalue(res, 0, 2));
    PQclear(res);
    return done;
}

int cmd_setup(int argc, char **argv)
{
    const char *conninfo = NULL;
    int64_t timeout_ms = CLI_DEFAULT_TIMEOUT_MS;
    const cli_opt options[] = {
        CLI_TEXT("dbname", 'd', &conninfo),
        CLI_SECONDS("timeout", 'w', &timeout_ms, NULL),
    };
    int rc = CLI_PARSE(argc, argv, "setup", options, 0, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc;
    if (optind != argc)
        return cli_usage_error("setup", "unexpected argument '%s'", argv[optind]);
    /* The timeout bounds the whole command: the connect and both statements. */
    cli_bound bound = cli_bound_from(advlock_pq_now_ms(), timeout_ms);
    PGconn *conn;
    rc = cli_connect_until(conninfo, NULL, NULL, NULL, bound, &conn);
    if (rc != EXIT_OK)
        return rc;
    /* One simple-query message: the server runs the script in one implicit
     * transaction, so it installs all of it or nothing. Notices ("schema
     * already exists, skipping") say nothing an operator needs. */
    PQsetNoticeProcessor(conn, ignore_notice, NULL);
    int installed = already_installed(conn, bound);
    PGresult *res = installed == 0 ? cli_exec_row(conn, ADVLOCK_SQL_FENCE_SETUP, NULL,
                                                  "the setup script", bound, &installed)
                                   : NULL;
    if (installed != 0) {
        PQfinish(conn);
        return installed == 1 ? EXIT_OK : EXIT_NO_SERVER;
    }
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        const char *why = PQresultErrorMessage(res);
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        cli_error("setup failed: %.*s%s", cli_trimmed_length(why), why,
                  state != NULL && strcmp(state, "42501") == 0
                      ? " (installing or updating the schema needs CREATE on the database, and "
                        "to update advlock.fence_ok its ownership: run advlock setup as the "
                        "role that owns the schema)"
                      : "");
    }
    PQclear(res);
    PQfinish(conn);
    return ok ? EXIT_OK : EXIT_LOCK_ERROR;
}
