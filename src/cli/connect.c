/*
 * One way to open a connection for every subcommand: libpq's own rules for
 * conninfo strings, PG* variables and service files (so no password need be
 * on the command line), plus the settings a lock holder needs, under a
 * bound and ended by a stop signal (advlock run's).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_pq.h"
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

/* libpq's reading of connect_timeout (connectDBComplete): whole seconds, 0
 * or less for none, and at least 2, since rounding could otherwise end a
 * connection hardly begun. Returns the bound in ms, or -1 for none. */
static int64_t own_connect_timeout_ms(PGconn *conn)
{
    int64_t ms = -1;
    PQconninfoOption *options = PQconninfo(conn);
    for (PQconninfoOption *o = options; o != NULL && o->keyword != NULL; o++) {
        if (strcmp(o->keyword, "connect_timeout") != 0 || o->val == NULL)
            continue;
        char *end;
        long seconds = strtol(o->val, &end, 10);
        if (end != o->val && seconds > 0)
            ms = (seconds < 2 ? 2 : seconds > INT32_MAX ? INT32_MAX : seconds) * (int64_t)1000;
    }
    PQconninfoFree(options);
    return ms;
}

/* Milliseconds from now until at, as poll()'s timeout (-1: no bound). */
static int poll_timeout(int64_t at, int64_t now)
{
    if (at == INT64_MAX)
        return -1;
    return at <= now ? 0 : at - now > INT_MAX ? INT_MAX : (int)(at - now);
}

/* Whether libpq's message for a failed connect says the server refused who
 * connects rather than could not be reached: the server's FATAL for
 * SQLSTATE 28P01 (a wrong password) and 28000 (no pg_hba.conf entry, no
 * such role, an ident or peer mismatch), 42501 at connect (no CONNECT
 * privilege), or libpq's own "no password supplied". libpq gives a failed
 * connect's SQLSTATE only inside its message, so its words are read (as
 * the server and libpq send them untranslated, lc_messages C). */
static int refused_user(const char *why)
{
    static const char *const refusals[] = {
        "authentication failed",         /* 28P01, and ident/peer/gss: 28000 */
        "no password supplied",          /* libpq: the server asked for one */
        "no pg_hba.conf entry",          /* 28000 */
        "pg_hba.conf rejects",           /* 28000 */
        "permission denied for database" /* 42501: no CONNECT */
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        if (strstr(why, refusals[i]) != NULL)
            return 1;
    return strstr(why, "FATAL:  role \"") != NULL && strstr(why, "\" does not exist") != NULL;
}

/* Drives libpq's nonblocking connect (PQconnectPoll) until it ends, the
 * bound passes, or a stop signal arrives. PQconnectdb's own wait would
 * honour connect_timeout only, and no signal: a host that never answers
 * (a stopped postmaster, a full accept queue) held it for minutes. */
/* complete_connect's status for a server that refuses the lease's startup
 * options, when asked to say nothing of it: a proxy (PgBouncer) refuses
 * any, PostgreSQL 13 and older the one setting they lack (whatever the
 * server's language, the message quotes its name). Connected without them,
 * the adapter's first statement says what holds: the proxy's lease, or
 * the server's version refused (docs/operators.md, "Supported servers"). */
enum { OPTIONS_REFUSED = -1 };

static int options_refused(const char *why)
{
    return strstr(why, "unsupported startup parameter: options") != NULL
           || strstr(why, "\"client_connection_check_interval\"") != NULL;
}

static int complete_connect(PGconn *conn, cli_bound bound, const char *bound_name,
                            int options_may_be_refused)
{
    /* Before the first PQconnectPoll, as if it had asked to write. */
    PostgresPollingStatusType state =
        PQstatus(conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
    while (state != PGRES_POLLING_OK) {
        if (state == PGRES_POLLING_FAILED) {
            const char *why = PQerrorMessage(conn);
            if (options_may_be_refused && options_refused(why))
                return OPTIONS_REFUSED;
            cli_error("cannot connect: %.*s", cli_trimmed_length(why), why);
            return refused_user(why) ? EXIT_NO_PERM : EXIT_NO_SERVER;
        }
        int64_t now = advlock_pq_now_ms();
        if (now >= bound.until_ms) {
            char seconds[32];
            advlock_format_seconds(bound.named_ms, seconds, sizeof seconds);
            cli_error("could not connect within %ss%s", seconds, bound_name);
            return EXIT_NO_SERVER;
        }
        /* The socket may change between calls: libpq tries host after host. */
        struct pollfd fds[2] = {
            {.fd = PQsocket(conn), .events = state == PGRES_POLLING_READING ? POLLIN : POLLOUT},
            {.fd = cli_signals_fd(), .events = POLLIN},
        };
        if (poll(fds, 2, poll_timeout(bound.until_ms, now)) < 0 && errno != EINTR) {
            cli_error("cannot connect: poll: %s", strerror(errno));
            return EXIT_NO_SERVER;
        }
        int sig = fds[1].revents != 0 ? cli_signals_stop() : 0;
        if (sig != 0)
            return 128 + sig;
        if (fds[0].revents != 0)
            state = PQconnectPoll(conn);
    }
    return EXIT_OK;
}

/* The settings a lease sets for itself: the user's startup options must
 * not set them too (which value would the server keep?). */
static const char *const lease_settings[] = {"tcp_user_timeout", "tcp_keepalives_idle",
                                             "tcp_keepalives_interval", "tcp_keepalives_count",
                                             "client_connection_check_interval"};

/* The user's startup options: the conninfo's options=, else PGOPTIONS (as
 * libpq takes them), or NULL; *parsed is freed by the caller. */
static const char *user_options(PQconninfoOption *parsed)
{
    for (PQconninfoOption *o = parsed; o != NULL && o->keyword != NULL; o++)
        if (strcmp(o->keyword, "options") == 0 && o->val != NULL)
            return o->val;
    return getenv("PGOPTIONS");
}

/* The user's options and the server's (a lease's) together, or NULL with
 * why said (a conflict: EXIT_USAGE in *rc; out of memory: EXIT_NO_SERVER). */
static char *merged_options(const char *user, const char *server, int *rc)
{
    for (size_t i = 0; user != NULL && i < sizeof lease_settings / sizeof lease_settings[0]; i++) {
        if (strstr(user, lease_settings[i]) != NULL) {
            cli_error("the connection's options (options= or PGOPTIONS) set %s, which the lease "
                      "sets itself (%s): leave it out, or turn the lease off with --lease 0",
                      lease_settings[i], server);
            *rc = EXIT_USAGE;
            return NULL;
        }
    }
    size_t size = (user != NULL ? strlen(user) + 1 : 0) + strlen(server) + 1;
    char *both = malloc(size);
    if (both == NULL) {
        cli_error("cannot connect: out of memory");
        *rc = EXIT_NO_SERVER;
        return NULL;
    }
    snprintf(both, size, "%s%s%s", user != NULL ? user : "", user != NULL ? " " : "", server);
    return both;
}

/* Who connects, as libpq's parameters name it. */
typedef struct naming {
    const char *conninfo, *application_name, *fallback_name;
} naming;

static int open_connection(naming who, const char *options, cli_bound bound, int64_t started,
                           PGconn **out);

int cli_connect_until(const char *conninfo, const char *application_name, const char *fallback_name,
                      const char *server_options, cli_bound bound, PGconn **out)
{
    naming who = {conninfo, application_name, fallback_name != NULL ? fallback_name : "advlock"};
    *out = NULL;
    int64_t started = advlock_pq_now_ms();
    /* A mistyped conninfo is a usage error, found before any connection. */
    char *error = NULL;
    PQconninfoOption *parsed = NULL;
    if (conninfo != NULL && is_conninfo(conninfo)
        && (parsed = PQconninfoParse(conninfo, &error)) == NULL) {
        const char *why = error != NULL ? error : "out of memory";
        cli_error("bad connection string: %.*s", cli_trimmed_length(why), why);
        PQfreemem(error);
        return EXIT_USAGE;
    }
    int rc = EXIT_OK;
    char *options =
        server_options != NULL ? merged_options(user_options(parsed), server_options, &rc) : NULL;
    PQconninfoFree(parsed);
    if (rc != EXIT_OK)
        return rc;
    rc = open_connection(who, options, bound, started, out);
    free(options);
    /* A proxy (PgBouncer) refuses startup options: without them, the
     * adapter's setup statement finds the proxy and says what holds. */
    if (rc == OPTIONS_REFUSED)
        rc = open_connection(who, NULL, bound, started, out);
    return rc;
}

/* Connects with options (NULL: the user's own, as libpq finds them);
 * returns OPTIONS_REFUSED, said nowhere, if the server refuses them. */
static int open_connection(naming who, const char *options, cli_bound bound, int64_t started,
                           PGconn **out)
{
    /* Client keepalives let advlock notice a dead server sooner; the
     * server's side is the lease's (startup options). They come before the
     * conninfo, so that keepalive parameters the user put there win. (No
     * effect on Unix-domain sockets, which need none.) A NULL value is
     * skipped: an unset conninfo means "from the environment", and no
     * lease leaves the user's options as they are. */
    const char *keys[] = {
        "keepalives", "keepalives_idle",  "keepalives_interval",       "keepalives_count",
        "dbname",     "application_name", "fallback_application_name", "options",
        NULL};
    const char *values[] = {
        "1", "30", "10", "3", who.conninfo, who.application_name, who.fallback_name, options, NULL};
    PGconn *conn = PQconnectStartParams(keys, values, 1);
    if (conn == NULL) {
        cli_error("cannot connect: out of memory");
        return EXIT_NO_SERVER;
    }
    /* The user's own connect_timeout (conninfo or PGCONNECT_TIMEOUT) still
     * bounds the connect, here over all hosts together, when it is the
     * shorter bound. */
    const char *bound_name = "";
    int64_t own_ms = own_connect_timeout_ms(conn);
    if (own_ms >= 0 && (bound.until_ms == INT64_MAX || started + own_ms < bound.until_ms)) {
        bound = (cli_bound){started + own_ms, own_ms};
        bound_name = " (connect_timeout)";
    }
    int rc = complete_connect(conn, bound, bound_name, options != NULL);
    if (rc != EXIT_OK) {
        PQfinish(conn);
        return rc;
    }
    *out = conn;
    return EXIT_OK;
}
