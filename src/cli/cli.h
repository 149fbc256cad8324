/* The advlock command: shared declarations of its subcommands. */
#ifndef ADVLOCK_CLI_H
#define ADVLOCK_CLI_H

/* Exit statuses, documented in advlock(1) (tests/cli/docs.sh holds the page
 * to this list; the tests read it through tests/cli/lib.sh). */
enum {
    EXIT_OK = 0,
    EXIT_BUSY = 1,        /* run: timed out; status: a lock is held; key --lookup: no match */
    EXIT_BAD_KEY = 2,     /* a key is not valid UTF-8 */
    EXIT_USAGE = 64,      /* bad command line (sysexits EX_USAGE) */
    EXIT_NO_SERVER = 69,  /* could not connect, or run: the server is a standby (EX_UNAVAILABLE) */
    EXIT_LOCK_ERROR = 70, /* the server failed a lock query, the connection broke, or run:
                           * its statements ran on different server sessions (a proxy) */
    EXIT_IO = 74,         /* reading input or writing output failed (EX_IOERR) */
    EXIT_NO_PERM = 77,    /* the server refused who connects: authentication,
                           * pg_hba.conf, no such role, no CONNECT (EX_NOPERM) */
    EXIT_NO_EXEC = 126,   /* run: the command was found but could not be executed */
    EXIT_NO_COMMAND = 127 /* run: the command was not found */
};

#include <stdint.h>

#include <libpq-fe.h>

#include "advlock.h"

int cmd_key(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_setup(int argc, char **argv);

/* A bound on a phase of advlock run: when it passes (advlock_pq_now_ms's
 * clock; INT64_MAX: never), and the time its messages name (--timeout's:
 * the bound itself includes a grace, see run.h). */
typedef struct cli_bound {
    int64_t until_ms;
    int64_t named_ms;
} cli_bound;

/* The bound of a phase that starts at now and may take ms (INT64_MAX: no
 * bound), the library's grace (ADVLOCK_PQ_GRACE_MS) included: a statement
 * unanswered by then is given up (option_values.c). */
cli_bound cli_bound_from(int64_t now, int64_t ms);

/*
 * The default of --timeout for status, setup and calibrate, and advlock
 * run's bound on connecting and its session check when no --timeout is
 * given (it may wait for the lock forever, but not for a server that does
 * not answer): 30 s.
 */
enum { CLI_DEFAULT_TIMEOUT_MS = 30000 };

/* Seconds with up to three decimals ("30", "0.5", "1.25") to milliseconds
 * in *ms; returns 0, or -1 for anything else (nothing said). */
int cli_parse_seconds(const char *text, int64_t *ms);

/* --timeout's argument, as cli_parse_seconds reads it; returns 0, or -1
 * after saying what it wants. */
int cli_timeout_option(const char *text, int64_t *ms);

/* A decimal whole number from lo to hi, and nothing else, in *out;
 * returns 0, or -1 for anything else (nothing said). */
int cli_parse_whole(const char *text, long long lo, long long hi, long long *out);

/* Option --name's argument, as cli_parse_whole reads it; returns 0, or -1
 * after saying what it wants and what it was given. */
int cli_whole_option(const char *name, const char *text, long long lo, long long hi,
                     long long *out);

/*
 * Connects with libpq: conninfo may be NULL (then PG* variables and service
 * files decide), application_name the user's (NULL: none) and fallback_name
 * the name for a session the user did not name (in conninfo or PGAPPNAME
 * either; NULL: "advlock"). Sets TCP
 * keepalives where conninfo does not. Returns EXIT_OK with *out set, or
 * prints why on stderr and returns EXIT_USAGE (conninfo does not parse),
 * EXIT_NO_PERM (the server refused the user: authentication, pg_hba.conf,
 * no such role, no CONNECT) or EXIT_NO_SERVER. Gives up when bound passes
 * (INT64_MAX: never), saying "could not connect within S" (S:
 * bound.named_ms), and returns EXIT_NO_SERVER. A
 * connect_timeout of the user's (conninfo or PGCONNECT_TIMEOUT) that ends
 * sooner bounds it instead, named in the message. A stop signal on advlock
 * run's signal pipe (cli_signals_install) ends it too: returns 128 + the
 * signal's number, nothing printed. server_options (a lease's startup
 * options, advlock_lease_options(); NULL: none) go after the user's own
 * (options= in conninfo, else PGOPTIONS); user options that set one of the
 * lease's settings are refused (EXIT_USAGE, said). Keepalive parameters in
 * conninfo win over advlock's defaults.
 */
int cli_connect_until(const char *conninfo, const char *application_name, const char *fallback_name,
                      const char *server_options, cli_bound bound, PGconn **out);

/* The length of text without its trailing newlines and blanks: libpq's
 * messages end with a newline, which would print as a blank line. */
int cli_trimmed_length(const char *text);

/*
 * advlock run's signals (signals.c): SIGINT, SIGTERM, SIGHUP, SIGQUIT and
 * SIGCHLD become bytes on a pipe; install once, read the pipe's fd with
 * poll, take each pending signal with cli_signals_next (0: none left).
 * cli_signals_restore puts the defaults back, for a forked process.
 */
int cli_signals_install(void);
void cli_signals_restore(void);
int cli_signals_fd(void);
int cli_signals_next(void);
/* Takes every pending signal; returns the first stop signal, or 0. */
int cli_signals_stop(void);

/*
 * advlock run --xact (xact.c): BEGIN on conn; and its end, COMMIT if commit
 * is set and the transaction has not failed, else ROLLBACK. Each waits for
 * its statement until bound passes (then the connection is given up with
 * advlock_pq_abandon and CLI_NO_ANSWER returned after saying so) or a stop
 * signal arrives on advlock run's signal pipe (the same, and the signal's number
 * returned, nothing printed). Else each returns 0, or -1 after printing why
 * (cli_xact_end: also when commit was asked for and no transaction was left
 * to commit).
 */
enum { CLI_NO_ANSWER = -2 };
/* Waits until conn's statement (sql: what the message calls it) is all
 * sent and its results are all in, the bound passes, or a stop signal
 * arrives. Returns 0 when the results are in (or the connection failed:
 * they say so), else as cli_xact_begin after shutting the connection down
 * (advlock_pq_abandon). */
int cli_await_results(PGconn *conn, const char *sql, cli_bound bound);
/* cli_await_results, then the statement's last result (the others cleared,
 * as PQexec; the caller PQclear()s it), or NULL with *rc set as
 * cli_await_results returns (said, or a stop signal's number). */
PGresult *cli_await_last_result(PGconn *conn, const char *sql, cli_bound bound, int *rc);
/* Sends row sql of the core's table with its params as the table says
 * (advlock_pq_send_row) and returns as cli_await_last_result, what naming
 * it in messages; a statement libpq could not send gives its failed result,
 * *rc 0. */
PGresult *cli_exec_row(PGconn *conn, advlock_sql sql, const int64_t *params, const char *what,
                       cli_bound bound, int *rc);
int cli_xact_begin(PGconn *conn, cli_bound bound);
/* After the acquire: lets go of the snapshot its last statement kept, so
 * that the transaction held open holds no xmin. Returns as cli_xact_begin. */
int cli_xact_drop_snapshot(PGconn *conn, cli_bound bound);
int cli_xact_end(PGconn *conn, int commit, cli_bound bound);

/*
 * Reaching the claimed server session through a transaction pool (reach.c):
 * before each retry of a release that landed elsewhere, cli_reach_occupy()
 * has helper connections (one more each time, up to CLI_REACH_HELPERS,
 * opened with conninfo and application_name) take the server sessions
 * PgBouncer hands out first: each occupies one that is not the session the
 * token claimed for a moment (ADVLOCK_SQL_OCCUPY), and gives the claimed
 * one back at once, so that the retry gets it. A helper connects within
 * bound (the release's), and a stop signal that ends its connect is raised
 * again for the release's own wait to see. cli_reach_end() waits for the
 * helpers' statements and closes them; neither waits for a helper past
 * bound: a helper's statement still unanswered then is given up
 * (advlock_pq_abandon). The strings are borrowed, not copied.
 */
enum { CLI_REACH_HELPERS = 4 };
typedef struct cli_reach {
    const char *conninfo;
    const char *application_name;
    int64_t token; /* as the setting holds it (a signed decimal) */
    cli_bound bound;
    PGconn *helper[CLI_REACH_HELPERS];
    int helpers;
    int64_t done_for_ms; /* the retry (its wake time) already prepared for */
} cli_reach;
void cli_reach_init(cli_reach *r, const char *conninfo, const char *application_name,
                    uint64_t token, cli_bound bound);
void cli_reach_occupy(cli_reach *r);
void cli_reach_end(cli_reach *r);

/*
 * Who holds a lock (holders.c), with the core's own statement
 * (ADVLOCK_SQL_HOLDERS), so that status, run --diagnose and the library
 * never disagree. cli_holders_query runs it under bound and returns libpq's
 * result (the caller PQclear()s it), or NULL as cli_await_last_result.
 * cli_holders_ask sends it on conn,
 * waits for it as cli_await_results does (and returns the same), and
 * puts the first holder's facts in into's holder fields (detail
 * ADVLOCK_DETAIL_DIAGNOSED; holder_pid 0: nobody holds it), or returns -1
 * after saying why the question failed.
 */
PGresult *cli_holders_query(PGconn *conn, int64_t key, cli_bound bound, int *rc);
int cli_holders_ask(PGconn *conn, int64_t key, cli_bound bound, advlock_report *into);

/*
 * A usage error of the subcommand command (NULL: of advlock itself): says
 * what is wrong (fmt; NULL when getopt has said it already) and where help
 * is ("try 'advlock run --help'"), in two lines, never the whole usage.
 * Returns EXIT_USAGE.
 */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * After a fenced try or a lock-delay mark refused for a privilege
 * (SQLSTATE 42501): asks the server which grants the feature needs
 * (docs/operators.md) the connected role lacks (check: ADVLOCK_SQL_FENCE_GRANTS
 * or ADVLOCK_SQL_MARK_GRANTS), and says them, after needs ("fencing tokens
 * need"), as the GRANT statements a DBA runs. Waits for its statement as cli_await_results does;
 * says nothing if the question fails or nothing is missing.
 */
void cli_say_missing_grants(PGconn *conn, cli_bound bound, advlock_sql check, const char *needs);

/* Prints "advlock: " and the formatted message to stderr (in the format
 * --log-format chose: log.h). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* As cli_error, for what does not stop the run (level warning in the JSON
 * log). */
void cli_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
