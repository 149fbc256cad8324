/*
 * advlock calibrate: measures the world a herd of `advlock run` processes
 * lives in, on a real server, and writes it as a profile (profile.h) for
 * `advlock simulate --profile`.
 *
 * It models N processes of the command started together by one launcher
 * (a supervisor, a deploy tool, `xargs -P`): it forks N processes that exec
 * this very program, each of which connects and takes a lock of its own the
 * way `advlock run` does (libpq, the adapter's prepared statements). Times:
 *   launch     when the launcher forked each process, after the first;
 *   startup    from its fork to its first lock statement's answer (exec,
 *              dynamic linking, connecting, the session check, preparing);
 *   statement  round trips of a lock and an unlock statement from one
 *              connection alone on the server (its service time);
 *   servers    how many statements the server works on at once: the N
 *              processes' throughput, all at once, times the lone round trip;
 *   wakeup     how late a sleep of theirs ends (poll for 10 ms, all N at once);
 *   command    a holder's cycle less --hold, the command's own work: the
 *              launcher's lock, the command the lock will guard (fork, exec,
 *              wait), the unlock, over and over while the probes run (a
 *              herd's first holders work while the rest start up);
 *              `--hold 50 -- stamp LOG sleep 0.05` for the herd's command,
 *              whose 50 ms are the simulation's --hold; by default `true`.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "advlock_pq.h"
#include "cli.h"
#include "option_table.h"
#include "profile.h"

enum { MAX_PROBES = CLI_PROFILE_MAX_CLIENTS, MAX_STATEMENTS = 1000 };
/* Each probe's sleeps, and how long each is asked for. */
enum { WAKEUPS = 20, WAKEUP_SLEEP_MS = 10 };

static int64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int compare_us(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The samples' 21 quantiles (nearest rank), least to greatest; sorts them. */
static advlock_sim_dist quantiles(int64_t *samples, size_t n)
{
    advlock_sim_dist d = {0};
    if (n == 0)
        return d;
    qsort(samples, n, sizeof *samples, compare_us);
    d.count = ADVLOCK_SIM_DIST_POINTS;
    for (size_t i = 0; i < ADVLOCK_SIM_DIST_POINTS; i++) {
        int64_t v = samples[(n - 1) * i / (ADVLOCK_SIM_DIST_POINTS - 1)];
        d.us[i] = v < ADVLOCK_SIM_DIST_MAX_US ? v : ADVLOCK_SIM_DIST_MAX_US;
    }
    return d;
}

/* A lock of this process's own, so that nobody waits: its name holds the pid. */
static void own_lock_name(char *buf, size_t size)
{
    snprintf(buf, size, "advlock-calibrate-%ld", (long)getpid());
}

/* Takes (release 0) or gives back (release 1, r's key) a lock of this
 * process's own. 0, or -1 with the adapter's words printed. */
static int lock_step(advlock_pq *a, const char *name, int release, advlock_pq_report *r)
{
    int rc = release ? advlock_pq_release_key(a, r->lock.key, r)
                     : advlock_pq_acquire(a, name, strlen(name), 10000, r);
    if (rc == 0 && r->lock.outcome == (release ? ADVLOCK_RELEASED : ADVLOCK_ACQUIRED))
        return 0;
    cli_error("calibrate: %s '%s' failed: %s", release ? "releasing" : "acquiring", name,
              advlock_strerror(r->lock.failure));
    return -1;
}

/* One acquire and one release of a free lock, each timed into samples[0], [1].
 * 0, or -1 with the adapter's words printed. */
static int lock_and_unlock(advlock_pq *a, const char *name, int64_t samples[2])
{
    advlock_pq_report r;
    int64_t t0 = now_us();
    if (lock_step(a, name, 0, &r) != 0)
        return -1;
    int64_t t1 = now_us();
    if (lock_step(a, name, 1, &r) != 0)
        return -1;
    samples[0] = t1 - t0;
    samples[1] = now_us() - t1;
    return 0;
}

/* --timeout: how long each connection (the launcher's, each probe's) may
 * take to open; the lock statements have their own bound (the blocking
 * adapter's, 10 s and its grace). */
static int64_t timeout_ms = CLI_DEFAULT_TIMEOUT_MS;

static int connect_bounded(const char *conninfo, PGconn **conn)
{
    return cli_connect_until(conninfo, "advlock calibrate", NULL, NULL,
                             cli_bound_from(advlock_pq_now_ms(), timeout_ms), conn);
}

/* ---- a probe: one of the N processes ------------------------------------------ */

/* Runs in the exec'd process: startup, then (after the launcher's go, the
 * end of its pipe) `statements` lock/unlock pairs, then WAKEUPS sleeps,
 * reported on out as
 *   S <startup_us>
 *   P <first_us> <last_us> <statements>
 *   W <how late one sleep ended, us>   (WAKEUPS lines)
 * or "E <why>" when it could not connect or lock. */
static int probe(const char *conninfo, int out_fd, int go_fd, int64_t forked_us, int statements)
{
    FILE *out = fdopen(out_fd, "w");
    if (out == NULL)
        return EXIT_IO;
    PGconn *conn;
    advlock_pq a;
    char name[64];
    own_lock_name(name, sizeof name);
    int64_t pair[2];
    int rc = connect_bounded(conninfo, &conn);
    if (rc != EXIT_OK) {
        fprintf(out, "E cannot connect\n");
        fclose(out);
        return rc;
    }
    advlock_pq_init(&a, conn);
    int64_t asked = now_us();
    if (lock_and_unlock(&a, name, pair) != 0) {
        fprintf(out, "E cannot lock\n");
        fclose(out);
        PQfinish(conn);
        return EXIT_LOCK_ERROR;
    }
    /* The first acquire checks the session, prepares, then executes, each
     * a round trip on a busy machine: all of it is start-up but for the
     * last statement's lone round trip, which the simulation adds. */
    fprintf(out, "S %lld\n", (long long)(asked + pair[0] - forked_us));
    fflush(out);
    /* The launcher closes its end once every probe has started; a minute
     * at most, should one of them never get there. */
    struct pollfd go = {go_fd, POLLIN, 0};
    char byte;
    while (poll(&go, 1, 60000) > 0 && read(go_fd, &byte, 1) > 0)
        ;
    int64_t first = now_us();
    for (int i = 0; i < statements && rc == EXIT_OK; i++)
        if (lock_and_unlock(&a, name, pair) != 0)
            rc = EXIT_LOCK_ERROR;
    fprintf(out, "P %lld %lld %d\n", (long long)first, (long long)now_us(),
            rc == EXIT_OK ? 2 * statements : 0);
    for (int i = 0; i < WAKEUPS && rc == EXIT_OK; i++) {
        int64_t asleep = now_us();
        poll(NULL, 0, WAKEUP_SLEEP_MS);
        int64_t late = now_us() - asleep - (int64_t)WAKEUP_SLEEP_MS * 1000;
        fprintf(out, "W %lld\n", (long long)(late > 0 ? late : 0));
    }
    PQfinish(conn);
    return fclose(out) == 0 ? rc : EXIT_IO;
}

/* ---- the launcher -------------------------------------------------------------- */

enum { MAX_COMMANDS = 1000 };

typedef struct measured {
    int64_t launch[MAX_PROBES], startup[MAX_PROBES];
    int64_t alone[2 * MAX_STATEMENTS];
    int64_t command[MAX_COMMANDS];
    size_t commands;
    int64_t wakeup[MAX_PROBES * WAKEUPS];
    size_t wakeups;
    int64_t first, last, statements; /* the N at once */
    int started, finished;
} measured;

/* The launcher's own session: the lone round trips, then a holder's cycles. */
typedef struct holder {
    PGconn *conn;
    advlock_pq a;
    char name[64];
    char **command;
    int64_t hold_us;
} holder;

/* Connects, and times round trips alone. */
static int measure_alone(holder *h, const char *conninfo, int statements, measured *m)
{
    int rc = connect_bounded(conninfo, &h->conn);
    if (rc != EXIT_OK)
        return rc;
    advlock_pq_init(&h->a, h->conn);
    own_lock_name(h->name, sizeof h->name);
    int64_t warm[2];
    if (lock_and_unlock(&h->a, h->name, warm) != 0) /* prepares both statements */
        return EXIT_LOCK_ERROR;
    for (int i = 0; i < statements; i++)
        if (lock_and_unlock(&h->a, h->name, m->alone + (size_t)2 * (size_t)i) != 0)
            return EXIT_LOCK_ERROR;
    return EXIT_OK;
}

/* A holder's cycle, as `advlock run` does it: the lock, the command (fork,
 * exec, wait; it must succeed), the unlock. Records its time less the
 * command's own work (hold_us). */
static int holder_cycle(holder *h, measured *m)
{
    advlock_pq_report r;
    if (lock_step(&h->a, h->name, 0, &r) != 0)
        return EXIT_LOCK_ERROR;
    int64_t t0 = now_us();
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("calibrate: fork: %s", strerror(errno));
        return EXIT_LOCK_ERROR;
    }
    if (pid == 0) {
        execvp(h->command[0], h->command);
        _exit(EXIT_NO_COMMAND);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        cli_error("calibrate: the command '%s' failed (status %d)", h->command[0],
                  WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return EXIT_NO_COMMAND;
    }
    if (lock_step(&h->a, h->name, 1, &r) != 0)
        return EXIT_LOCK_ERROR;
    int64_t took = now_us() - t0 - h->hold_us;
    m->command[m->commands++] = took > 0 ? took : 0;
    return EXIT_OK;
}

/* Forks the N probes; each execs this program. */
static int launch(const char *conninfo, int clients, int statements, int out_fd, int go_fd,
                  measured *m, pid_t *pids)
{
    char fd_text[2][16], stmts[16], timeout[32];
    snprintf(timeout, sizeof timeout, "%lld.%03lld", (long long)(timeout_ms / 1000),
             (long long)(timeout_ms % 1000));
    snprintf(fd_text[0], sizeof fd_text[0], "%d", out_fd);
    snprintf(fd_text[1], sizeof fd_text[1], "%d", go_fd);
    snprintf(stmts, sizeof stmts, "%d", statements);
    int64_t t0 = now_us();
    for (int i = 0; i < clients; i++) {
        int64_t forked = now_us();
        char forked_text[32];
        snprintf(forked_text, sizeof forked_text, "%lld", (long long)forked);
        m->launch[i] = forked - t0;
        pids[i] = fork();
        if (pids[i] < 0) {
            cli_error("calibrate: fork: %s", strerror(errno));
            return EXIT_LOCK_ERROR;
        }
        if (pids[i] == 0) {
            char *argv[] = {"advlock",
                            "calibrate",
                            "--probe",
                            fd_text[0],
                            fd_text[1],
                            forked_text,
                            "--statements",
                            stmts,
                            "--timeout",
                            timeout,
                            "-d",
                            (char *)(conninfo != NULL ? conninfo : ""),
                            NULL};
            /* This very program: the file the kernel's link names (valgrind
             * names the program it runs, not itself), else advlock on PATH. */
            char self[4096];
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n > 0) {
                self[n] = '\0';
                execv(self, argv);
            }
            execvp("advlock", argv);
            _exit(EXIT_NO_COMMAND);
        }
    }
    return EXIT_OK;
}

/* Exactly n blank-separated whole numbers in text, into v; 0, or -1. */
static int numbers(const char *text, long long *v, int n)
{
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        v[i] = strtoll(text, &end, 10);
        if (errno != 0 || end == text)
            return -1;
        text = end;
    }
    return *text == '\0' ? 0 : -1;
}

/* One probe's line; closes the go pipe once all have started, or one failed. */
static int take_line(const char *line, int clients, int *go_fd, measured *m)
{
    long long v[3];
    int failed = 0;
    if (line[0] == 'S' && numbers(line + 1, v, 1) == 0 && m->started < clients) {
        m->startup[m->started++] = v[0];
    } else if (line[0] == 'W' && numbers(line + 1, v, 1) == 0) {
        if (m->wakeups < sizeof m->wakeup / sizeof m->wakeup[0])
            m->wakeup[m->wakeups++] = v[0];
    } else if (line[0] == 'P' && numbers(line + 1, v, 3) == 0) {
        m->first = v[0] < m->first ? v[0] : m->first;
        m->last = v[1] > m->last ? v[1] : m->last;
        m->statements += v[2];
        m->finished++;
    } else {
        failed = 1;
        cli_error("calibrate: a probe failed: %.*s", cli_trimmed_length(line), line);
    }
    if ((m->started == clients || failed) && *go_fd >= 0) {
        close(*go_fd); /* go: every probe's read ends at once */
        *go_fd = -1;
    }
    return failed ? EXIT_NO_SERVER : EXIT_OK;
}

/* Reads the probes' lines until they have all ended; meanwhile, and until
 * it has `runs` of them, the launcher runs holder's cycles: the command
 * runs while the others start, as a herd's first holders' do. */
static int collect(int fd, int clients, int runs, int *go_fd, holder *h, measured *m)
{
    char buf[4096];
    size_t have = 0;
    int open = 1, rc = EXIT_OK;
    m->first = INT64_MAX;
    for (;;) {
        int sampling =
            rc == EXIT_OK && m->commands < MAX_COMMANDS && (open || m->commands < (size_t)runs);
        if (!open && !sampling)
            break;
        if (sampling && (rc = holder_cycle(h, m)) != EXIT_OK && *go_fd >= 0) {
            close(*go_fd);
            *go_fd = -1;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (!open || poll(&p, 1, sampling ? 0 : -1) <= 0)
            continue;
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) {
            open = n < 0 && errno == EINTR;
            continue;
        }
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            int line_rc = take_line(line, clients, go_fd, m);
            rc = rc == EXIT_OK ? line_rc : rc;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    if (rc == EXIT_OK && (m->started < clients || m->finished < clients)) {
        cli_error("calibrate: %d of %d probes reported", m->finished, clients);
        rc = EXIT_LOCK_ERROR;
    }
    return rc;
}

static int run_probes(const char *conninfo, int clients, int statements, holder *h, measured *m)
{
    int out[2], go[2];
    if (pipe(out) != 0 || pipe(go) != 0) {
        cli_error("calibrate: pipe: %s", strerror(errno));
        return EXIT_IO;
    }
    /* The probes keep only their ends: the go pipe must end when ours closes. */
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    fcntl(go[1], F_SETFD, FD_CLOEXEC);
    static pid_t pids[MAX_PROBES];
    int rc = launch(conninfo, clients, statements, out[1], go[0], m, pids);
    close(out[1]);
    close(go[0]);
    int go_fd = go[1];
    if (rc == EXIT_OK)
        rc = collect(out[0], clients, statements, &go_fd, h, m);
    if (go_fd >= 0)
        close(go_fd);
    close(out[0]);
    for (int i = 0; i < clients; i++) {
        int st;
        if (pids[i] > 0)
            while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
                ;
    }
    return rc;
}

/* Statements the server works on at once: the N probes' throughput times
 * the mean lone round trip, rounded, from 1 to N. */
static uint32_t servers_of(const measured *m, size_t alone, int clients)
{
    int64_t sum = 0;
    for (size_t i = 0; i < alone; i++)
        sum += m->alone[i];
    int64_t span = m->last - m->first;
    if (span <= 0 || alone == 0)
        return 1;
    int64_t s = (m->statements * sum / (int64_t)alone + span / 2) / span;
    return (uint32_t)(s < 1 ? 1 : s > clients ? clients : s);
}

/* ---- options ---------------------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: advlock calibrate [-d CONNINFO] [--clients N] [--statements K] [-o FILE]\n"
            "                         [--hold MS] [-w SECONDS] [-- CMD...]\n"
            "  Measures a real server as a herd of N `advlock run` processes meets it, and\n"
            "  writes a profile for `advlock simulate --profile FILE`.\n"
            "\n"
            "  -d, --dbname CONNINFO  the server (libpq conninfo; default: PG* variables)\n"
            "  --clients N            processes started together (1-%d, default 10)\n"
            "  --statements K         lock/unlock pairs each measures (1-%d, default 20)\n"
            "  -o, --output FILE      write the profile to FILE (default: standard output)\n"
            "  --hold MS              the command's own work, left out of its cost\n"
            "                         (0-3600000, default 0)\n"
            "  -w, --timeout SECONDS  how long each connection may take to open (default\n"
            "                         30); a server that does not answer: exit 69\n"
            "  -- CMD...              the command the lock will guard (default: true); its\n"
            "                         run less --hold is what it adds to a hold\n",
            MAX_PROBES, MAX_STATEMENTS);
}

static int write_profile(const char *path, const measured *m, int clients, int statements,
                         long long hold, const char *conninfo, char **command)
{
    static measured sorted;
    sorted = *m;
    cli_profile p = {.clients = clients};
    size_t alone = (size_t)statements * 2;
    p.model.servers = servers_of(m, alone, clients);
    p.model.launch = quantiles(sorted.launch, (size_t)clients);
    p.model.startup = quantiles(sorted.startup, (size_t)clients);
    p.model.statement = quantiles(sorted.alone, alone);
    p.model.wakeup = quantiles(sorted.wakeup, m->wakeups);
    p.model.command = quantiles(sorted.command, m->commands);
    char comment[1024], what[512] = "";
    for (char **c = command; *c != NULL; c++) {
        size_t n = strlen(what);
        snprintf(what + n, sizeof what - n, " %s", *c);
    }
    snprintf(comment, sizeof comment,
             "advlock calibrate --clients %d --statements %d --hold %lld%s%s --%s\n"
             "values: microseconds at the 0, 5, 10, ... 100th percentiles",
             clients, statements, hold, conninfo != NULL ? " -d " : "",
             conninfo != NULL ? conninfo : "", what);
    FILE *out = path != NULL ? fopen(path, "w") : stdout;
    if (out == NULL) {
        cli_error("cannot write profile '%s': %s", path, strerror(errno));
        return EXIT_IO;
    }
    int failed = cli_profile_write(out, &p, comment) != 0;
    if (path != NULL)
        failed |= fclose(out) != 0;
    else
        failed |= fflush(out) != 0;
    if (failed) {
        cli_error("writing profile '%s' failed", path != NULL ? path : "(standard output)");
        return EXIT_IO;
    }
    return EXIT_OK;
}

int cmd_calibrate(int argc, char **argv)
{
    const char *conninfo = NULL, *output = NULL;
    long long clients = 10, statements = 20, hold = 0;
    int is_probe = 0;
    const cli_opt options[] = {
        CLI_TEXT("dbname", 'd', &conninfo),
        CLI_WHOLE("clients", 0, &clients, 1, MAX_PROBES, NULL),
        CLI_WHOLE("statements", 0, &statements, 1, MAX_STATEMENTS, NULL),
        CLI_TEXT("output", 'o', &output),
        CLI_WHOLE("hold", 0, &hold, 0, 3600000, NULL),
        CLI_SECONDS("timeout", 'w', &timeout_ms, NULL),
        CLI_SET("probe", 0, &is_probe), /* internal: one of the N processes */
    };
    int rc = CLI_PARSE(argc, argv, "calibrate", options, 1, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc;
    if (conninfo != NULL && conninfo[0] == '\0')
        conninfo = NULL;
    if (is_probe) {
        long long out_fd, go_fd, forked;
        if (argc - optind != 3 || cli_whole_option("probe", argv[optind], 0, 1 << 20, &out_fd) != 0
            || cli_whole_option("probe", argv[optind + 1], 0, 1 << 20, &go_fd) != 0
            || numbers(argv[optind + 2], &forked, 1) != 0)
            return EXIT_USAGE;
        return probe(conninfo, (int)out_fd, (int)go_fd, forked, (int)statements);
    }
    static char *no_command[] = {"true", NULL};
    char **command = optind < argc ? argv + optind : no_command;
    signal(SIGPIPE, SIG_IGN);
    static measured m;
    memset(&m, 0, sizeof m);
    holder h = {.command = command, .hold_us = (int64_t)hold * 1000};
    rc = measure_alone(&h, conninfo, (int)statements, &m);
    if (rc == EXIT_OK)
        rc = run_probes(conninfo, (int)clients, (int)statements, &h, &m);
    PQfinish(h.conn);
    if (rc != EXIT_OK)
        return rc;
    return write_profile(output, &m, (int)clients, (int)statements, hold, conninfo, command);
}
