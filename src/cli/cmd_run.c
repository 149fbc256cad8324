/*
 * advlock run: flock(1) for PostgreSQL. Takes the lock on its own session,
 * runs the command while holding it, releases, and exits with the command's
 * status. The wait and the release go through the nonblocking adapter, and
 * every wait is the adapter's (advlock_pq_wait) with a signal self-pipe
 * beside its socket, so signals are seen at once and, while the command
 * runs, so is the server closing the session (which drops the lock).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "advlock_pq.h"
#include "cli.h"

typedef struct run_options {
    const char *conninfo;
    const char *application_name;
    int64_t timeout_ms;
    int conflict_exit_code;
    int quiet;
    int keep_running;
    advlock_options lock; /* --shared, --wait, --jitter, --diagnose */
    const char *key;
    /* The key as messages show it (advlock_escape_name): one printable line
     * whatever the name holds, so no name can move the terminal's cursor. */
    char shown_key[ADVLOCK_KEY_ECHO_MAX + 4];
    char **command;
} run_options;

/* ---- signals: a self-pipe turns them into poll() events ------------------ */

static int signal_pipe[2] = {-1, -1};

/* Each signal becomes two bytes: its number, and whether another process
 * sent it to us alone (kill) rather than the terminal to the whole process
 * group, which the child then got as well and must not get twice. */
static void on_signal(int sig, siginfo_t *info, void *context)
{
    (void)context;
    int saved = errno;
    unsigned char msg[2] = {(unsigned char)sig,
                            (unsigned char)(info != NULL && info->si_code <= 0)};
    ssize_t ignored = write(signal_pipe[1], msg, sizeof msg);
    (void)ignored;
    errno = saved;
}

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};

static int install_signal_handlers(void)
{
    if (pipe(signal_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC);
        fcntl(signal_pipe[i], F_SETFL, O_NONBLOCK);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        sigaction(forwarded_signals[i], &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void restore_default_signals(void)
{
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        signal(forwarded_signals[i], SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

/* Reads one pending signal; returns its number (0 if none) and whether it
 * was sent to this process alone. */
static int next_signal(int *sent_to_us)
{
    unsigned char msg[2];
    if (read(signal_pipe[0], msg, sizeof msg) != (ssize_t)sizeof msg)
        return 0;
    *sent_to_us = msg[1];
    return msg[0];
}

/* ---- progress on a terminal, from the machine's events ------------------- */

typedef struct progress {
    uint64_t attempt;
    int64_t retry_at_ms; /* 0: no sleep under way */
    int server_wait;
} progress;

static void on_lock_event(void *user, const advlock_event *e)
{
    progress *p = user;
    if (e->kind == ADVLOCK_EVENT_ATTEMPT) {
        p->attempt = e->report->attempts;
        p->retry_at_ms = 0;
    } else if (e->kind == ADVLOCK_EVENT_SLEEP) {
        p->retry_at_ms = e->now_ms + e->sleep_ms;
    }
}

static void show_progress(const run_options *o, const progress *p, int64_t started, int64_t now)
{
    char elapsed[32], retry[32];
    advlock_format_seconds(now - started, elapsed, sizeof elapsed);
    if (p->server_wait) {
        fprintf(stderr, "\r\033[Kadvlock: waiting for '%s' in the server's queue, %ss elapsed",
                o->shown_key, elapsed);
        return;
    }
    if (p->retry_at_ms == 0)
        return; /* a try is in flight: the line stays as it was */
    advlock_format_seconds(p->retry_at_ms > now ? p->retry_at_ms - now : 0, retry, sizeof retry);
    fprintf(stderr,
            "\r\033[Kadvlock: waiting for '%s': attempt %" PRIu64 ", %ss elapsed, "
            "next retry in %ss",
            o->shown_key, p->attempt, elapsed, retry);
}

static void clear_progress(void)
{
    fputs("\r\033[K", stderr);
}

/* ---- one lock operation, driven to its end -------------------------------- */

/* Runs the adapter's operation to its end, cancelling an acquire if a
 * forwarded signal arrives; returns that signal's number, or 0. The waiting
 * is the adapter's own (advlock_pq_wait), with the signal pipe beside it. */
static int drive(advlock_pq *a, const run_options *o, const progress *shown)
{
    int64_t started = advlock_pq_now_ms();
    int interrupted = 0;
    while (advlock_pq_async_busy(a)) {
        if (shown != NULL)
            show_progress(o, shown, started, advlock_pq_now_ms());
        /* A progress line wakes every 100 ms to keep its elapsed time ticking. */
        if (advlock_pq_wait(a, signal_pipe[0], shown != NULL ? 100 : -1) < 0)
            break;
        int sent_to_us, sig;
        while ((sig = next_signal(&sent_to_us)) != 0)
            if (sig != SIGCHLD && !interrupted) {
                interrupted = sig;
                advlock_pq_async_cancel(a, advlock_pq_now_ms());
            }
    }
    if (shown != NULL)
        clear_progress();
    return interrupted;
}

/* ---- the command, while the lock is held ------------------------------------ */

static pid_t start_command(char **command)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    restore_default_signals();
    execvp(command[0], command);
    int code = errno == ENOENT ? EXIT_NO_COMMAND : 126;
    fprintf(stderr, "advlock: cannot run '%s': %s\n", command[0], strerror(errno));
    _exit(code);
}

/* Waits for the command, forwarding signals, while the adapter watches the
 * session that holds the lock. Returns the command's wait status; *lost says
 * whether the lock was lost meanwhile. */
static int supervise(pid_t child, advlock_pq *a, const run_options *o, int *lost)
{
    *lost = 0;
    for (;;) {
        int status;
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            return status;
        if (done < 0 && errno != EINTR)
            return -1;

        /* SIGCHLD comes through the pipe too, so the command's end wakes
         * this wait; once the lock is lost, the pipe is all it waits for. */
        if (advlock_pq_wait(a, signal_pipe[0], -1) < 0)
            return -1;
        int sent_to_us, sig;
        while ((sig = next_signal(&sent_to_us)) != 0)
            if (sig != SIGCHLD && sent_to_us)
                kill(child, sig);
        if (!*lost && advlock_pq_async_lost(a)) {
            *lost = 1;
            cli_error("connection to the server lost while the command ran: lock '%s' is no "
                      "longer held%s",
                      o->shown_key,
                      o->keep_running ? " (command left running: --keep-running)"
                                      : "; terminating the command");
            if (!o->keep_running)
                kill(child, SIGTERM);
        }
    }
}

static int exit_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_LOCK_ERROR;
}

/* ---- options ------------------------------------------------------------------ */

/* Seconds with up to three decimals ("30", "0.5", "1.25") to milliseconds. */
static int parse_seconds(const char *text, int64_t *ms)
{
    int64_t whole = 0, frac = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (INT64_MAX / 1000 - 9) / 10)
            return -1;
        whole = whole * 10 + (*p - '0');
    }
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits == 3)
                return -1; /* finer than a millisecond */
            frac = frac * 10 + (*p - '0');
        }
        if (digits == 0)
            return -1;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    if (*p != '\0')
        return -1;
    *ms = whole * 1000 + frac;
    return 0;
}

static int parse_exit_code(const char *text, int *code)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 0 || v > 255)
        return -1;
    *code = (int)v;
    return 0;
}

static void usage(FILE *to)
{
    fputs("usage: advlock run [OPTIONS] KEY [--] COMMAND [ARGS...]\n"
          "  Run COMMAND while holding the advisory lock named KEY, like flock(1).\n"
          "\n"
          "  -d, --dbname CONNINFO        connection string or URI (default: PG* variables)\n"
          "  -w, --timeout SECONDS        give up after this long (default: wait forever);\n"
          "                               0 tries once\n"
          "  -E, --conflict-exit-code N   exit status when the lock stays busy (default 1)\n"
          "  -q, --quiet                  no progress line while waiting\n"
          "      --keep-running           if the connection is lost, let COMMAND go on\n"
          "      --application-name NAME  application_name of the session (default advlock)\n"
          "      --shared                 a shared lock: other --shared runs may hold it too\n"
          "      --wait                   wait in the server's queue (pg_advisory_lock) instead\n"
          "                               of polling: the lock is handed over at once\n"
          "      --jitter                 randomise the sleeps between polls (full jitter)\n"
          "      --diagnose               on timeout, say who holds the lock\n",
          to);
}

static int parse_run_options(int argc, char **argv, run_options *o)
{
    enum {
        OPT_KEEP_RUNNING = 256,
        OPT_APPLICATION_NAME,
        OPT_SHARED,
        OPT_WAIT,
        OPT_JITTER,
        OPT_DIAGNOSE
    };
    static const struct option options[] = {
        {"dbname", required_argument, NULL, 'd'},
        {"timeout", required_argument, NULL, 'w'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"quiet", no_argument, NULL, 'q'},
        {"keep-running", no_argument, NULL, OPT_KEEP_RUNNING},
        {"application-name", required_argument, NULL, OPT_APPLICATION_NAME},
        {"shared", no_argument, NULL, OPT_SHARED},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"jitter", no_argument, NULL, OPT_JITTER},
        {"diagnose", no_argument, NULL, OPT_DIAGNOSE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    advlock_options_init(&o->lock);
    o->timeout_ms = INT64_MAX;
    o->conflict_exit_code = EXIT_BUSY;
    int opt;
    while ((opt = getopt_long(argc, argv, "+d:w:E:qh", options, NULL)) != -1) {
        switch (opt) {
        case 'd': o->conninfo = optarg; break;
        case 'w':
            if (parse_seconds(optarg, &o->timeout_ms) != 0) {
                cli_error("--timeout wants seconds, such as 30 or 0.5 (at most 3 decimals)");
                return -1;
            }
            break;
        case 'E':
            if (parse_exit_code(optarg, &o->conflict_exit_code) != 0) {
                cli_error("--conflict-exit-code wants a number from 0 to 255");
                return -1;
            }
            break;
        case 'q': o->quiet = 1; break;
        case OPT_KEEP_RUNNING: o->keep_running = 1; break;
        case OPT_APPLICATION_NAME: o->application_name = optarg; break;
        case OPT_SHARED: o->lock.mode = ADVLOCK_SHARED; break;
        case OPT_WAIT: o->lock.wait = ADVLOCK_WAIT_SERVER; break;
        case OPT_JITTER: o->lock.backoff = ADVLOCK_BACKOFF_FULL_JITTER; break;
        case OPT_DIAGNOSE: o->lock.diagnose = 1; break;
        case 'h': usage(stdout); exit(EXIT_OK);
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc)
        o->key = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (o->key == NULL || optind == argc) {
        usage(stderr);
        return -1;
    }
    advlock_escape_name(o->key, strlen(o->key), o->shown_key, sizeof o->shown_key);
    o->command = argv + optind;
    return 0;
}

/* ---- the whole run -------------------------------------------------------------- */

/* An operation's outcome in the core's words (the reference's sentences). */
static const char *describe(const advlock_pq_report *r, const char *key, char *buf, size_t size)
{
    if (advlock_pq_describe(r, key, strlen(key), buf, size) <= 0)
        return advlock_strerror(r->lock.failure);
    return buf;
}

/* Releases what the acquire took, by its key: no second hash. */
static int release(advlock_pq *a, const run_options *o, int64_t key)
{
    if (advlock_pq_async_start_release_key(a, key, advlock_pq_now_ms()) != 0) {
        cli_error("could not release lock '%s'; closing the session releases it", o->shown_key);
        return -1;
    }
    drive(a, o, NULL);
    const advlock_pq_report *r = advlock_pq_async_report(a);
    if (r->lock.outcome != ADVLOCK_RELEASED) {
        char message[ADVLOCK_MESSAGE_MAX];
        cli_error("releasing lock '%s': %s", o->shown_key,
                  describe(r, o->key, message, sizeof message));
        return -1;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    run_options o;
    if (parse_run_options(argc, argv, &o) != 0)
        return EXIT_USAGE;
    int64_t key;
    int rc = advlock_derive_key(o.key, strlen(o.key), &key);
    if (rc != 0) {
        cli_error("lock key '%s': %s", o.shown_key, advlock_strerror(rc));
        return EXIT_BAD_KEY;
    }
    if (install_signal_handlers() != 0) {
        cli_error("cannot set up signal handling: %s", strerror(errno));
        return EXIT_LOCK_ERROR;
    }
    PGconn *conn = cli_connect(o.conninfo, o.application_name);
    if (conn == NULL)
        return EXIT_NO_SERVER;

    advlock_pq a;
    progress shown = {.server_wait = o.lock.wait == ADVLOCK_WAIT_SERVER};
    o.lock.on_event = on_lock_event;
    o.lock.event_user = &shown;
    /* Jitter needs randomness that differs between the runs racing for a
     * lock; the time and pid are enough to break their lockstep. */
    o.lock.jitter_seed = (uint64_t)advlock_pq_now_ms() * 1000003u ^ (uint64_t)getpid();
    if ((rc = advlock_pq_async_init(&a, conn)) != 0
        || (rc = advlock_pq_set_options(&a, &o.lock)) != 0
        || (rc = advlock_pq_async_start_acquire_key(&a, key, o.timeout_ms, advlock_pq_now_ms()))
               != 0) {
        cli_error("cannot start acquiring '%s': %s: %s", o.shown_key, advlock_strerror(rc),
                  PQerrorMessage(conn));
        PQfinish(conn);
        return EXIT_LOCK_ERROR;
    }
    int interrupted = drive(&a, &o, !o.quiet && isatty(STDERR_FILENO) ? &shown : NULL);
    const advlock_pq_report *r = advlock_pq_async_report(&a);
    if (r->lock.outcome == ADVLOCK_CANCELLED) {
        PQfinish(conn);
        return 128 + interrupted;
    }
    if (r->lock.outcome != ADVLOCK_ACQUIRED) {
        char message[ADVLOCK_MESSAGE_MAX];
        cli_error("%s", describe(r, o.key, message, sizeof message));
        PQfinish(conn);
        return r->lock.outcome == ADVLOCK_TIMED_OUT ? o.conflict_exit_code : EXIT_LOCK_ERROR;
    }

    pid_t child = start_command(o.command);
    if (child < 0) {
        cli_error("cannot start '%s': %s", o.command[0], strerror(errno));
        release(&a, &o, key);
        PQfinish(conn);
        return EXIT_LOCK_ERROR;
    }
    int lost;
    int status = supervise(child, &a, &o, &lost);
    int exit_code = status < 0 ? EXIT_LOCK_ERROR : exit_status_of(status);
    if (lost)
        exit_code = EXIT_LOCK_ERROR;
    else
        release(&a, &o, key);
    PQfinish(conn);
    return exit_code;
}
