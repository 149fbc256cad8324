/*
 * advlock setup: installs what fencing tokens need on a database (the
 * script advlock_fence_setup_sql() returns: schema advlock, its counter
 * table and advlock.fence_ok()). Idempotent, so it may run on every deploy;
 * it needs CREATE on the database (the first time), and is never run
 * implicitly: users who take no tokens get no schema.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "advlock.h"
#include "cli.h"

static void usage(FILE *to)
{
    fputs("usage: advlock setup [-d CONNINFO]\n"
          "  Create (if missing) the schema advlock, its table advlock.fence and the\n"
          "  function advlock.fence_ok(key, token) that 'advlock run --fence' needs.\n"
          "\n"
          "  -d, --dbname CONNINFO  connection string or URI (default: PG* variables)\n",
          to);
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

int cmd_setup(int argc, char **argv)
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
        default: return cli_usage_error("setup", NULL);
        }
    }
    if (optind != argc)
        return cli_usage_error("setup", "unexpected argument '%s'", argv[optind]);
    PGconn *conn;
    int rc = cli_connect(conninfo, NULL, &conn);
    if (rc != EXIT_OK)
        return rc;
    /* One simple-query message: the server runs the script in one implicit
     * transaction, so it installs all of it or nothing. Notices ("schema
     * already exists, skipping") say nothing an operator needs. */
    PQsetNoticeProcessor(conn, ignore_notice, NULL);
    PGresult *res = PQexec(conn, advlock_fence_setup_sql());
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        const char *why = PQresultErrorMessage(res);
        cli_error("setup failed: %.*s", cli_trimmed_length(why), why);
    }
    PQclear(res);
    PQfinish(conn);
    return ok ? EXIT_OK : EXIT_LOCK_ERROR;
}
