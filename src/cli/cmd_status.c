/*
 * advlock status: is a lock free, and if not, who holds it and who waits.
 * Runs the core's own holders statement (ADVLOCK_SQL_HOLDERS, the one that
 * `run --diagnose` runs), so the two can never disagree about a holder,
 * after the session row `run` starts with, which refuses a server older
 * than advlock supports (that statement needs pg_locks.waitstart). A hot
 * standby's pg_locks show only its own sessions' locks, never the
 * primary's, so a standby is refused as `run` refuses it (exit 69) unless
 * --allow-standby asks for the standby's own. With no name (or --all,
 * --names-from, --format, --watch) it lists every advisory lock of the
 * database instead: locks.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "advlock_pq.h"
#include "cli.h"
#include "option_table.h"
#include "status.h"

static void format_duration(long long seconds, char *buf, size_t size)
{
    if (seconds < 0)
        seconds = 0;
    snprintf(buf, size, "%lld:%02lld:%02lld", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

/* An empty column as "?": the session has left pg_stat_activity. */
static const char *or_unknown(const PGresult *res, int row, int col)
{
    const char *v = PQgetvalue(res, row, col);
    return v[0] != '\0' ? v : "?";
}

/* How show_key and in_recovery end when the server did not answer within
 * the bound (said): the connection is closed. */
enum { NO_ANSWER = -3 };

/* Prints one key's holders and waiters; returns 1 if held, 0 if free, -1 on
 * a failed query, -2 for a name that is not a lock name, NO_ANSWER. */
static int show_key(PGconn *conn, const char *raw_name, cli_bound bound)
{
    /* One printable line whatever the name holds: a tab or a newline in it
     * cannot break the tab-separated output. */
    char name[ADVLOCK_KEY_ECHO_MAX + 4];
    advlock_escape_name(raw_name, strlen(raw_name), name, sizeof name);
    int64_t key;
    int rc = advlock_derive_key(raw_name, strlen(raw_name), &key);
    if (rc != 0) {
        cli_error("'%s': %s", name, advlock_strerror(rc));
        return -2;
    }
    int rc_wait;
    PGresult *res = cli_holders_query(conn, key, bound, &rc_wait);
    if (rc_wait != 0)
        return NO_ANSWER;
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        const char *why = PQerrorMessage(conn);
        cli_error("status of '%s': %.*s", name, cli_trimmed_length(why), why);
        PQclear(res);
        return -1;
    }
    int rows = PQntuples(res);
    /* Holders come first (ORDER BY granted DESC). */
    int held = rows > 0 && strcmp(PQgetvalue(res, 0, ADVLOCK_HOLDERS_GRANTED), "t") == 0;
    printf("%s\t%s\tkey %" PRId64 "\n", name,
           held       ? "held"
           : rows > 0 ? "free, with waiters"
                      : "free",
           key);
    for (int i = 0; i < rows; i++) {
        int granted = strcmp(PQgetvalue(res, i, ADVLOCK_HOLDERS_GRANTED), "t") == 0;
        char duration[32];
        format_duration(strtoll(PQgetvalue(res, i, ADVLOCK_HOLDERS_SECONDS), NULL, 10), duration,
                        sizeof duration);
        printf("  %s\tpid %s\tmode %s\tapplication '%s'\tclient %s\tstate %s\t"
               "backend start %s\t%s %s\n",
               granted ? "holder" : "waiter", PQgetvalue(res, i, ADVLOCK_HOLDERS_PID),
               PQgetvalue(res, i, ADVLOCK_HOLDERS_MODE),
               PQgetvalue(res, i, ADVLOCK_HOLDERS_APPLICATION),
               or_unknown(res, i, ADVLOCK_HOLDERS_CLIENT),
               or_unknown(res, i, ADVLOCK_HOLDERS_STATE), PQgetvalue(res, i, ADVLOCK_HOLDERS_START),
               granted ? "held for" : "waiting for", duration);
    }
    PQclear(res);
    return held;
}

/* 1 if the server is in recovery (a hot standby), 0 if not, -1 if the
 * question failed (said on stderr, in the core's words: a server older
 * than advlock supports is named so), NO_ANSWER. The question is the core's
 * session row with every parameter 0: $1 0 claims nothing, and $2 0 (a
 * client pid unknown) turns the timeouts off for its own transaction alone,
 * so status leaves its session as it found it; the same check `run` makes. */
static int in_recovery(PGconn *conn, const char *name, cli_bound bound)
{
    static const int64_t zeros[3] = {0, 0, 0}; /* as many as any row takes */
    int rc_wait;
    PGresult *res =
        cli_exec_row(conn, ADVLOCK_SQL_SESSION, zeros, "the server session check", bound, &rc_wait);
    if (rc_wait != 0)
        return NO_ANSWER;
    int rc = -1;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        rc = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    } else {
        advlock_report r;
        memset(&r, 0, sizeof r);
        r.outcome = ADVLOCK_FAILED;
        r.failure = ADVLOCK_ESERVER;
        r.sql = ADVLOCK_SQL_SESSION;
        const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (sqlstate != NULL)
            snprintf(r.sqlstate, sizeof r.sqlstate, "%s", sqlstate);
        char words[1024];
        (void)advlock_describe(&r, name, strlen(name), PQerrorMessage(conn), words, sizeof words);
        cli_error("status: %s", words);
    }
    PQclear(res);
    return rc;
}

static void usage(FILE *to)
{
    fputs("usage: advlock status [-d CONNINFO] [-w SECONDS] [--allow-standby] KEY...\n"
          "       advlock status [-d CONNINFO] [-w SECONDS] [--allow-standby] [--all]\n"
          "                      [--names-from FILE] [--format text|json|prometheus]\n"
          "                      [--watch SECONDS] [KEY...]\n"
          "  For each key: free or held, and every holder and waiter (pid, application,\n"
          "  client, state, backend start, how long). Exit 0 if all free, 1 if any held,\n"
          "  69 if the server is a hot standby (whose locks say nothing of the primary's).\n"
          "  With no KEY, or any of the options below but -d, -w and --allow-standby:\n"
          "  every advisory lock of the database, named where a KEY or a name of\n"
          "  --names-from maps to it, else shown by key. Needs PostgreSQL 14 or later.\n"
          "\n"
          "  -w, --timeout SECONDS  give up on a server that does not answer after this\n"
          "                   long, connecting included (default 30); exit 69\n"
          "  --allow-standby  on a hot standby, show its own locks (local to it)\n"
          "  --all            list every advisory lock, the KEYs only naming them\n"
          "  --names-from FILE  names to recognise, one a line (- for standard input)\n"
          "  --format F       text (default), json (one document) or prometheus\n"
          "  --watch SECONDS  redraw the list every SECONDS until SIGINT or SIGTERM\n",
          to);
}

/* --format's argument into *out; 0, or -1 after saying what it wants. */
static int parse_format(const char *arg, status_format *out)
{
    static const struct {
        const char *name;
        status_format format;
    } formats[] = {{"text", STATUS_TEXT}, {"json", STATUS_JSON}, {"prometheus", STATUS_PROMETHEUS}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(arg, formats[i].name) == 0) {
            *out = formats[i].format;
            return 0;
        }
    cli_usage_error("status", "--format wants text, json or prometheus, not '%s'", arg);
    return -1;
}

/* The names the list shows: the command line's, then the file's, read
 * before connecting, so that a file that cannot be read costs no server.
 * EXIT_OK with *out set, or as status_names_read (said). */
static int known_names(char **keys, int count, const char *names_from, status_names **out)
{
    status_names *names = status_names_new();
    if (names == NULL) {
        cli_error("out of memory");
        return EXIT_LOCK_ERROR;
    }
    int rc = EXIT_OK;
    for (int i = 0; i < count && rc == EXIT_OK; i++)
        if (status_names_add(names, keys[i]) != 0)
            rc = EXIT_LOCK_ERROR;
    if (rc == EXIT_OK && names_from != NULL)
        rc = status_names_read(names, names_from);
    if (rc != EXIT_OK) {
        status_names_free(names);
        return rc;
    }
    *out = names;
    return EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
    int allow_standby = 0, all = 0;
    const char *conninfo = NULL, *names_from = NULL, *format = NULL;
    int64_t timeout_ms = CLI_DEFAULT_TIMEOUT_MS, watch_ms = -1;
    const cli_opt options[] = {
        CLI_TEXT("dbname", 'd', &conninfo),
        CLI_SET("allow-standby", 0, &allow_standby),
        CLI_SECONDS("timeout", 'w', &timeout_ms, NULL),
        CLI_SET("all", 0, &all),
        CLI_TEXT("names-from", 0, &names_from),
        CLI_TEXT("format", 0, &format),
        CLI_SECONDS("watch", 0, &watch_ms, "--watch wants seconds above 0 (up to three decimals)"),
    };
    int rc = CLI_PARSE(argc, argv, "status", options, 0, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc;
    status_listing list = {STATUS_TEXT, watch_ms > 0 ? watch_ms : 0, timeout_ms};
    if (format != NULL && parse_format(format, &list.format) != 0)
        return EXIT_USAGE;
    if (watch_ms == 0)
        return cli_usage_error("status", "--watch wants seconds above 0 (up to three decimals)");
    status_names *names = NULL;
    if (optind == argc || all || names_from != NULL || format != NULL || watch_ms > 0) {
        rc = known_names(argv + optind, argc - optind, names_from, &names);
        if (rc != EXIT_OK)
            return rc;
    }
    /* The timeout bounds the whole command: the connect and every question. */
    cli_bound bound = cli_bound_from(advlock_pq_now_ms(), timeout_ms);
    PGconn *conn;
    rc = cli_connect_until(conninfo, NULL, NULL, NULL, bound, &conn);
    if (rc != EXIT_OK) {
        status_names_free(names);
        return rc;
    }
    int standby = in_recovery(conn, optind < argc ? argv[optind] : "", bound);
    if (standby == NO_ANSWER) {
        status_names_free(names);
        PQfinish(conn);
        return EXIT_NO_SERVER;
    }
    if (standby > 0 && allow_standby)
        standby = 0;
    if (standby != 0) {
        status_names_free(names);
        if (standby > 0)
            cli_error("status refused: the server is a standby in recovery; its advisory "
                      "locks are local to it and say nothing about the primary's (connect "
                      "to the primary, or --allow-standby for the standby's own)");
        PQfinish(conn);
        return standby > 0 ? EXIT_NO_SERVER : EXIT_LOCK_ERROR;
    }

    if (names != NULL) {
        rc = status_list(conn, &list, names);
        PQfinish(conn);
        /* A name skipped as not a lock name: said, the list shown, exit 2
         * as for a KEY that is not one, unless something worse happened. */
        if ((rc == EXIT_OK || rc == EXIT_BUSY) && status_names_bad(names))
            rc = EXIT_BAD_KEY;
        status_names_free(names);
        return rc;
    }
    int any_held = 0, failed = 0, bad_key = 0;
    for (int i = optind; i < argc; i++) {
        int held = show_key(conn, argv[i], bound);
        if (held == NO_ANSWER) {
            PQfinish(conn);
            return EXIT_NO_SERVER;
        }
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
