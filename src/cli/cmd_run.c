/*
 * advlock run: flock(1) for PostgreSQL. Takes the lock (or every lock
 * named, one after another in key order) on its own session, runs the
 * command while holding it, releases, and exits with the command's status.
 * The names are the members of one lock set on the run's connection, and
 * every wait is the set's (advlock_pq_lockset_wait) with a signal self-pipe
 * beside its socket, so signals are seen at once and, while the command runs, so
 * is the server closing the session (which drops the lock). Behind a proxy
 * the server session can end while the connection to the proxy stays up,
 * so there the lock is verified every --verify-interval.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "option_table.h"
#include "run.h"

/* ---- the command, while the lock is held ------------------------------------ */

/* Starts stopping the command, unless already under way: the signal now to
 * its whole group, SIGKILL when the grace period ends (*kill_at). */
static void stop_command(const cli_child *c, const run_options *o, int sig, int64_t *kill_at)
{
    cli_child_signal(c, sig);
    cli_log(&(cli_event){.kind = CLI_EVENT_SIGNAL_SENT, .signal = sig});
    if (*kill_at < 0)
        *kill_at = advlock_pq_now_ms() + o->kill_after_ms;
}

/* The session's locks are gone, or one of them (which, else NULL) cannot
 * be shown held any more (reason, as the JSON log names it): say so, and
 * stop the command unless --keep-running. */
static void lock_gone(const cli_child *c, const run_options *o, const cli_lock *which,
                      int64_t *kill_at, const char *why, const char *reason)
{
    char said[2 * ADVLOCK_MESSAGE_MAX + 64];
    snprintf(said, sizeof said, "%s%s", why,
             o->keep_running ? " (command left running: --keep-running)"
                             : "; terminating the command");
    cli_log(&(cli_event){.kind = CLI_EVENT_LOCK_LOST,
                         .lock = which != NULL ? which->name : NULL,
                         .key = which != NULL ? which->key : 0,
                         .said = said,
                         .reason = reason,
                         .kept = o->keep_running});
    if (!o->keep_running)
        stop_command(c, o, SIGTERM, kill_at);
}

/* ---- verifying the lock behind a proxy ------------------------------------ */

/* Behind a transaction-pooling proxy the server session holding the lock
 * idles in the pool while the command runs; the proxy or an administrator
 * may close it, and the lock goes with it while advlock's own connection to
 * the proxy stays up. So there, and only there (a direct connection's end
 * is seen on its socket at no cost), every interval a round of verifies
 * asks whether the claimed server session still holds each name: all
 * started at once, which the set sends one after another there. */
typedef struct verifier {
    int64_t interval_ms; /* 0: not verifying (direct, --xact, off, or done) */
    int64_t due_ms;      /* when the next round starts */
    int in_flight;       /* verifies of the round started, its outcomes not yet read */
} verifier;

static void verifier_init(verifier *v, const run_locks *l, const run_options *o)
{
    int session_scope = o->lock.scope == ADVLOCK_SESSION;
    v->interval_ms = session_scope && run_proxied(l) ? o->verify_ms : 0;
    v->due_ms = advlock_pq_now_ms() + v->interval_ms;
    v->in_flight = 0;
}

/* How long the wait may last before the next round is due (-1: no limit). */
static int64_t verify_wait_ms(const verifier *v, int64_t now)
{
    if (v->interval_ms == 0 || v->in_flight)
        return -1; /* a verify in flight wakes the wait on its socket */
    return v->due_ms > now ? v->due_ms - now : 0;
}

/* Starts the round that is due (while the command runs), an interval after
 * the last one started, and reads its outcomes once all ended: HELD for
 * every name, the next is scheduled; else returns the first name whose
 * lock is gone or cannot be shown held, and verifies no more. Else -1. */
static int tend_verify(verifier *v, run_locks *l, const run_options *o, int command_running)
{
    if (v->interval_ms == 0)
        return -1;
    int64_t now = advlock_pq_now_ms();
    if (!v->in_flight && command_running && now >= v->due_ms) {
        v->due_ms = now + v->interval_ms; /* from this start, whatever it does */
        for (int i = 0; i < o->name_count; i++)
            v->in_flight += advlock_pq_lockset_start_verify(&l->set, &l->members[i], now) == 0;
    }
    if (!v->in_flight || advlock_pq_lockset_busy(&l->set) > 0)
        return -1;
    v->in_flight = 0;
    for (int i = 0; i < o->name_count; i++) {
        if (advlock_pq_member_report(&l->members[i])->lock.outcome != ADVLOCK_HELD) {
            v->interval_ms = 0;
            return i;
        }
    }
    return -1;
}

/* The set lost the session (its lease ran out, or the connection
 * ended): a verify in flight went with it, as the set ends whatever it
 * had under way, and no other starts. Nothing is left to read
 * before the command's end is waited for. */
static void verifier_stop(verifier *v)
{
    v->in_flight = 0;
    v->interval_ms = 0;
}

/* Why a verify did not end HELD, as lock_gone says it. */
static void say_unverified(char *why, size_t size, const advlock_pq_member *m, const run_options *o)
{
    char sentence[ADVLOCK_MESSAGE_MAX];
    size_t n = (size_t)advlock_pq_describe(advlock_pq_member_report(m), o->key, strlen(o->key),
                                           sentence, sizeof sentence);
    if (n > 0 && n < sizeof sentence && sentence[n - 1] == '.')
        sentence[n - 1] = '\0'; /* lock_gone goes on after it */
    snprintf(why, size, "checking lock '%s' while the command ran: %s", o->shown_key, sentence);
}

/* After the command's end a verify in flight is waited for (the release
 * needs the connection), unless a stop signal came: then, as for the
 * release itself, it has SIGNAL_GRACE_MS to answer, none after a second
 * signal (give_up_at: INT64_MAX while no signal came). Past that its
 * connection is given up (advlock_pq_abandon), which ends the session and its
 * locks, and said; returns 1 then. */
static int tend_give_up(verifier *v, run_locks *l, run_options *o, int64_t give_up_at)
{
    if (!v->in_flight || advlock_pq_now_ms() < give_up_at)
        return 0;
    advlock_pq_abandon(l->conn);
    int i = 0; /* the name whose verify is still out */
    while (i < o->name_count - 1 && !advlock_pq_member_busy(&l->members[i]))
        i++;
    run_focus(o, i);
    /* A verify is the guarded check (behind a proxy only), shared or not:
     * the words are the same. */
    run_say_abandoned(&(drive_end){.sql = ADVLOCK_SQL_HELD_GUARDED}, o, o->names[i].key,
                      SIGNAL_GRACE_MS, CLI_EVENT_RELEASE_FAILED);
    run_focus_all(o);
    verifier_stop(v);
    return 1;
}

/* The first member the set lost (its connection or lease gone: all of
 * them at once), or NULL. */
static const advlock_pq_member *lost_member(const run_locks *l, const run_options *o)
{
    for (int i = 0; i < o->name_count; i++)
        if (advlock_pq_member_lost(&l->members[i]))
            return &l->members[i];
    return NULL;
}

/* Why the lock was lost (m's report), as lock_gone says it: a lease that
 * ran out (the server may hold the lock a while yet: never "no longer
 * held"), or the connection closed, which ended the session; returns
 * which, as the JSON log names it. */
static const char *say_lost(char *why, size_t size, const advlock_pq_member *m,
                            const run_options *o)
{
    const advlock_pq_report *r = advlock_pq_member_report(m);
    if (r->lease_expiry != ADVLOCK_LEASE_LIVE) {
        snprintf(why, size, "lock '%s' lost: its lease ran out: %s", o->shown_key,
                 r->server_message);
        return "lease";
    }
    snprintf(why, size,
             "connection to the server lost while the command ran: lock '%s' is no "
             "longer held",
             o->shown_key);
    return "connection";
}

/* A lease's heartbeat answered: its stop deadline (*stop_at, 0 at first:
 * only noted) moved on. Said to the JSON log; text says nothing. */
static void say_lease_renewed(const run_locks *l, int64_t *stop_at)
{
    int64_t now_stop_at;
    if (advlock_conn_lease_deadline(advlock_pq_lockset_engine(&l->set), &now_stop_at, NULL) != 1)
        return;
    if (*stop_at != 0 && now_stop_at > *stop_at)
        cli_log(&(cli_event){.kind = CLI_EVENT_LEASE_RENEWED,
                             .deadline_ms = now_stop_at - advlock_pq_now_ms()});
    *stop_at = now_stop_at;
}

/* Waits for the command while the adapter watches the session that holds
 * the lock (and, behind a proxy, verifies it). advlock stops the command
 * when the lock is lost (unless --keep-running) or when a stop signal comes
 * (forwarded): its group gets that signal, then SIGKILL after --kill-after,
 * and advlock waits until the whole group is gone, not just the command.
 * Returns the command's wait status (-1 if it could not be waited for);
 * *lost says whether the lock was lost meanwhile, and how (LOCK_ABANDONED:
 * a verify out after the command's end was given up on a signal, its
 * connection shut: see tend_give_up). */
enum { LOCK_KEPT, LOCK_LOST, LOCK_UNVERIFIED, LOCK_ABANDONED };
static int supervise(cli_child *c, run_locks *l, run_options *o, int *lost)
{
    int status = -1, exited = 0;
    int64_t kill_at = -1;           /* -1: not stopping; INT64_MAX: SIGKILL sent */
    int64_t give_up_at = INT64_MAX; /* see tend_give_up */
    verifier v;
    verifier_init(&v, l, o);
    *lost = LOCK_KEPT;
    int64_t lease_stop_at = 0;
    say_lease_renewed(l, &lease_stop_at);
    for (;;) {
        int st, changed;
        while ((changed = cli_child_reap(c, &st)) > 0) {
            if (WIFSTOPPED(st)) {
                cli_child_stopped(c, WSTOPSIG(st));
            } else {
                status = st;
                exited = 1;
            }
        }
        if (changed < 0)
            return -1;
        /* A verify in flight is read to its end first: the release after
         * it needs the connection. */
        if (exited && !v.in_flight && (kill_at < 0 || cli_child_group_gone(c)))
            return status;
        int64_t now = advlock_pq_now_ms();
        if (kill_at >= 0 && kill_at != INT64_MAX && now >= kill_at) {
            cli_child_signal(c, SIGKILL);
            cli_log(&(cli_event){.kind = CLI_EVENT_SIGNAL_SENT, .signal = SIGKILL});
            kill_at = INT64_MAX;
        }
        /* The command's end wakes the wait (SIGCHLD), and so does the end of
         * each of its orphans that advlock reaps (child.c); the group is
         * still looked for, as a process can be in it without being
         * advlock's descendant, or advlock no reaper (not Linux). */
        int64_t wait_ms = run_shorter_wait(exited ? 50 : -1, verify_wait_ms(&v, now));
        if (kill_at >= 0 && kill_at != INT64_MAX)
            wait_ms = run_shorter_wait(wait_ms, kill_at - now);
        if (give_up_at != INT64_MAX)
            wait_ms = run_shorter_wait(wait_ms, give_up_at > now ? give_up_at - now : 0);
        if (advlock_pq_lockset_wait(&l->set, cli_signals_fd(),
                                    wait_ms > INT_MAX ? INT_MAX : (int)wait_ms)
            < 0)
            return -1;
        int sig;
        while ((sig = cli_signals_next()) != 0) {
            if (sig == SIGCHLD)
                continue;
            stop_command(c, o, sig, &kill_at);
            if (exited && v.in_flight) {
                now = advlock_pq_now_ms();
                give_up_at = give_up_at == INT64_MAX ? now + SIGNAL_GRACE_MS : now;
            }
        }
        char why[2 * ADVLOCK_MESSAGE_MAX]; /* a sentence and a name */
        const advlock_pq_member *gone = lost_member(l, o);
        int unverified = -1;
        if (!*lost && tend_give_up(&v, l, o, give_up_at)) {
            *lost = LOCK_ABANDONED;
        } else if (!*lost && gone != NULL) {
            *lost = LOCK_LOST;
            verifier_stop(&v);
            const char *reason = say_lost(why, sizeof why, gone, o);
            lock_gone(c, o, NULL, &kill_at, why, reason);
        } else if (!*lost && (unverified = tend_verify(&v, l, o, !exited)) >= 0) {
            *lost = LOCK_UNVERIFIED;
            run_focus(o, unverified);
            say_unverified(why, sizeof why, &l->members[unverified], o);
            run_focus_all(o);
            lock_gone(c, o, &o->names[unverified], &kill_at, why, "unverified");
        }
        say_lease_renewed(l, &lease_stop_at);
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

static void usage(FILE *to)
{
    fputs("usage: advlock run [OPTIONS] KEY [--] COMMAND [ARGS...]\n"
          "       advlock run [OPTIONS] KEY... -- COMMAND [ARGS...]\n"
          "  Run COMMAND while holding the advisory lock named KEY, like flock(1); with\n"
          "  several KEYs (up to 64, before a \"--\"), all of them, taken in one order (by\n"
          "  key) under one --timeout, all given back if one cannot be taken.\n"
          "\n"
          "  -d, --dbname CONNINFO        connection string or URI (default: PG* variables)\n"
          "  -w, --timeout SECONDS        give up after this long, connecting included\n"
          "                               (default: wait forever); 0 tries once; a server\n"
          "                               that does not answer is left 1 s later\n"
          "  -E, --conflict-exit-code N   exit status when the lock stays busy (default 1)\n"
          "  -q, --quiet                  no progress line while waiting\n"
          "      --keep-running           if the lock is lost, let COMMAND go on\n"
          "  -k, --kill-after SECONDS     when stopping COMMAND (lost session, a signal),\n"
          "                               send KILL this long after the first signal\n"
          "                               if its process group is still running (default 10)\n"
          "      --application-name NAME  application_name of the session (default: \"advlock: \"\n"
          "                               and the names)\n"
          "      --shared                 a shared lock: other --shared runs may hold it too\n"
          "      --wait                   wait in the server's queue (pg_advisory_lock) instead\n"
          "                               of polling: the lock is handed over at once\n"
          "      --jitter                 randomise the sleeps between polls (full jitter)\n"
          "      --diagnose               on timeout, say who holds the lock\n"
          "      --xact                   hold a transaction-scoped lock in one transaction\n"
          "                               around COMMAND: COMMIT if it exits 0, else\n"
          "                               ROLLBACK (works through transaction pooling)\n"
          "      --allow-standby          lock on a hot standby too (refused by default: its\n"
          "                               locks exclude nobody on the primary)\n"
          "      --fence                  take a fencing token with the lock: COMMAND gets it\n"
          "                               as ADVLOCK_FENCE (and the key as ADVLOCK_KEY); needs\n"
          "                               'advlock setup'; not with --shared, --wait, --xact\n"
          "      --lock-delay             a run whose holder left without releasing (its\n"
          "                               session ended by the server during a partition)\n"
          "                               waits out that holder's lease before COMMAND\n"
          "                               starts; needs 'advlock setup' and the lease; not\n"
          "                               with --shared, --xact, --lease 0\n"
          "      --lease SECONDS          over TCP, bound a cut-off run: it stops COMMAND\n"
          "                               before the server can free the lock, and the\n"
          "                               server frees it within this long (default 30;\n"
          "                               0: none; at least --kill-after + 6)\n"
          "      --verify-interval SECONDS  behind a proxy (PgBouncer), check this often\n"
          "                               that the server session still holds the lock while\n"
          "                               COMMAND runs; stop it if not (default 1; 0: never)\n"
          "      --log-format FORMAT      text (default: sentences) or json (one object per\n"
          "                               line on stderr for every event of the run)\n"
          "      --capacity-share PERCENT with several KEYs, hold at most this share of the\n"
          "                               server's lock table (default 25)\n",
          to);
}

/* A lease must leave the stop bound room. */
static int check_lease(const run_options *o)
{
    advlock_lease_plan plan;
    if (o->lease_ms == 0 || advlock_lease_plan_init(&plan, o->lease_ms, o->kill_after_ms) == 0)
        return 0;
    char lease[32], kill[32], least[32];
    advlock_format_seconds(o->lease_ms, lease, sizeof lease);
    if (o->lease_ms > ADVLOCK_LEASE_MAX_MS) {
        advlock_format_seconds(ADVLOCK_LEASE_MAX_MS, least, sizeof least);
        cli_error("--lease %s is too long: at most %s s", lease, least);
        return -1;
    }
    int64_t minimum = o->kill_after_ms + ADVLOCK_LEASE_SERVER_SLACK_MS + ADVLOCK_LEASE_MARGIN_MS
                      + ADVLOCK_LEASE_MIN_DEADLINE_MS;
    advlock_format_seconds(o->kill_after_ms, kill, sizeof kill);
    advlock_format_seconds((minimum + 999) / 1000 * 1000, least, sizeof least);
    cli_error("--lease %s is too short for --kill-after %s: the lease must be at least %s s "
              "(kill-after + 3 s for the server's timers, 1 s margin, 2 s to notice a loss); "
              "raise --lease or lower --kill-after, or turn the lease off with --lease 0",
              lease, kill, least);
    return -1;
}

/* parse_run_options's status after --help: the usage is on stdout. */
enum { HELP_SHOWN = 1 };

/* --log-format: said in at once, the next error too. */
static int take_log_format(const char *arg)
{
    cli_log_format format;
    if (cli_log_parse_format(arg, &format) != 0) {
        cli_error("--log-format wants text or json");
        return -1;
    }
    cli_log_set_format(format);
    return 0;
}

/* Lock-delay records the run's stop bound, which the lease gives, in a mark
 * that must outlive the run's transaction and exclude like an exclusive
 * hold (docs/design.md, "Lock-delay"): 1 if the options allow it, else 0,
 * said. */
static int lock_delay_holds(const run_options *o)
{
    const char *why = o->lock.mode == ADVLOCK_SHARED ? "--shared (a mark is an exclusive holder's)"
                      : o->xact ? "--xact (the mark would commit or roll back with the run's "
                                  "transaction, after COMMAND)"
                      : o->lease_ms == 0 ? "--lease 0 (the mark records the lease's stop bound)"
                                         : NULL;
    if (why != NULL)
        cli_error("--lock-delay: not with %s", why);
    return why == NULL;
}

static int parse_run_options(int argc, char **argv, run_options *o)
{
    memset(o, 0, sizeof *o);
    advlock_options_init(&o->lock);
    o->timeout_ms = INT64_MAX;
    o->kill_after_ms = 10000;
    o->verify_ms = 1000;
    o->lease_ms = -1; /* not given: the default, below */
    long long conflict = EXIT_BUSY, share = ADVLOCK_CAPACITY_SHARE_DEFAULT;
    int shared = 0, wait = 0, jitter = 0;
    const cli_opt options[] = {
        CLI_TEXT("dbname", 'd', &o->conninfo),
        CLI_SECONDS("timeout", 'w', &o->timeout_ms, NULL),
        CLI_WHOLE("conflict-exit-code", 'E', &conflict, 0, 255, "a number from 0 to 255"),
        CLI_SET("quiet", 'q', &o->quiet),
        CLI_SET("keep-running", 0, &o->keep_running),
        CLI_SECONDS("kill-after", 'k', &o->kill_after_ms,
                    "seconds, such as 10 or 0.5 (at most 3 decimals)"),
        CLI_TEXT("application-name", 0, &o->application_name),
        CLI_SET("shared", 0, &shared),
        CLI_SET("wait", 0, &wait),
        CLI_SET("jitter", 0, &jitter),
        CLI_SET("diagnose", 0, &o->lock.diagnose),
        CLI_SET("xact", 0, &o->xact),
        CLI_SET("allow-standby", 0, &o->lock.allow_standby),
        CLI_SECONDS("verify-interval", 0, &o->verify_ms,
                    "seconds, such as 1 or 0.5 (at most 3 decimals; 0: never)"),
        CLI_SECONDS("lease", 0, &o->lease_ms, "seconds, such as 30 (at most 3 decimals; 0: none)"),
        CLI_SET("fence", 0, &o->lock.fence),
        CLI_SET("lock-delay", 0, &o->lock.lock_delay),
        CLI_CALL("log-format", take_log_format),
        CLI_WHOLE("capacity-share", 0, &share, 1, 100, "a percentage from 1 to 100"),
    };
    int rc = CLI_PARSE(argc, argv, "run", options, 0, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc == EXIT_OK ? HELP_SHOWN : -1;
    o->conflict_exit_code = (int)conflict;
    o->capacity_share = (int)share;
    o->lease_given = o->lease_ms >= 0;
    o->lease_ms = o->lease_given ? o->lease_ms : ADVLOCK_LEASE_DEFAULT_MS;
    o->lock.mode = shared ? ADVLOCK_SHARED : o->lock.mode;
    o->lock.wait = wait ? ADVLOCK_WAIT_SERVER : o->lock.wait;
    o->lock.backoff = jitter ? ADVLOCK_BACKOFF_FULL_JITTER : o->lock.backoff;
    o->lock.scope = o->xact ? ADVLOCK_TRANSACTION : o->lock.scope;
    /* KEY [--] COMMAND, or KEY... -- COMMAND: with a "--" the names are the
     * words before it, without one the first word alone. */
    int names_end = optind;
    while (names_end < argc && strcmp(argv[names_end], "--") != 0)
        names_end++;
    if (names_end == argc)
        names_end = optind < argc ? optind + 1 : optind;
    if (names_end - optind > CLI_RUN_LOCKS_MAX) {
        cli_error("at most %d names", CLI_RUN_LOCKS_MAX);
        return -1;
    }
    for (; optind < names_end; optind++)
        o->names[o->name_count++].name = argv[optind];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (o->name_count == 0 || optind == argc) {
        cli_usage_error("run", "a KEY and a COMMAND are needed");
        return -1;
    }
    o->command = argv + optind;
    if (o->lock.fence && o->name_count > 1) {
        cli_error("--fence: one name only (a token fences one lock)");
        return -1;
    }
    /* A token is issued by the try's own statement, and only an exclusive
     * hold excludes a newer holder (advlock_options.fence). */
    if (o->lock.fence && (o->lock.mode == ADVLOCK_SHARED || o->lock.wait == ADVLOCK_WAIT_SERVER)) {
        cli_error("--fence: not with --%s (tokens are for exclusive locks, taken by polling)",
                  o->lock.mode == ADVLOCK_SHARED ? "shared" : "wait");
        return -1;
    }
    /* With --xact the token's row is written in the run's transaction,
     * which ends only after the command: the command's own sessions would
     * not see the token, and advlock.fence_ok() would wait for that row's
     * writer, advlock, which waits for the command. */
    if (o->lock.fence && o->xact) {
        cli_error("--fence: not with --xact (the token would commit only when the run's "
                  "transaction ends, after COMMAND: COMMAND's guarded writes would wait for it "
                  "in advlock.fence_ok())");
        return -1;
    }
    if (o->lock.lock_delay && !lock_delay_holds(o))
        return -1;
    /* A --lease given is checked before connecting; the default one only
     * once the connection shows it applies (TCP, no --xact): --kill-after
     * alone must not refuse a run over a Unix socket, which has none. */
    return o->lease_given ? check_lease(o) : 0;
}

/* ---- the whole run -------------------------------------------------------------- */

/* How a run whose BEGIN or CLOSE ALL (--xact) did not succeed exits: as the
 * acquire would have, for a signal or no answer by the bound. */
static int setup_failed_status(int rc)
{
    return rc > 0 ? 128 + rc : rc == CLI_NO_ANSWER ? EXIT_NO_SERVER : EXIT_LOCK_ERROR;
}

/* Ends a run's session: with --xact its transaction rolls back first, so
 * that a pooler gets its server connection back clean. */
static void close_session(run_locks *l, const run_options *o)
{
    if (o->xact) {
        cli_bound bound = cli_bound_from(advlock_pq_now_ms(), o->timeout_ms);
        run_settle(l, bound.until_ms);
        cli_xact_end(l->conn, 0, bound);
    }
    run_close(l);
}

/* ---- the lease ------------------------------------------------------------ */

/* The server settings of the run's lease as startup options (they hold for
 * the whole session, whatever it runs), or NULL without a lease. --xact
 * holds no lease: its transaction's statements are advlock run's own, sent
 * beside the adapter's, where a heartbeat could be in flight. */
static const char *lease_startup_options(const run_options *o, char *buf, size_t size)
{
    advlock_lease_plan plan;
    if (o->lease_ms == 0 || o->xact
        || advlock_lease_plan_init(&plan, o->lease_ms, o->kill_after_ms) != 0
        || advlock_lease_options(&plan, buf, size) >= (int)size)
        return NULL;
    return buf;
}

/* A Unix-domain socket (a path or an abstract name: libpq's host) cannot
 * be cut off silently: the kernel tells both ends at once. */
static int unix_socket(PGconn *conn)
{
    const char *host = PQhost(conn);
    return host == NULL || host[0] == '\0' || host[0] == '/' || host[0] == '@';
}

/* The lease the set runs: none on a Unix socket (said when asked for
 * one), or with --xact; else --lease, with --kill-after the stop time.
 * Returns -1, said, if the default lease is too short for --kill-after. */
static int take_lease(run_options *o, PGconn *conn)
{
    /* Lock-delay keeps the lease on a Unix socket: its mark records the
     * stop bound, and the heartbeats cost little there. */
    int none = o->xact || (unix_socket(conn) && !o->lock.lock_delay);
    if (o->lease_ms > 0 && o->lease_given && none)
        cli_warning("--lease: %s",
                    o->xact
                        ? "not with --xact: this run has no lease"
                        : "no lease needed on a Unix socket: the kernel ends both sides at once");
    if (none)
        o->lease_ms = 0;
    if (!o->lease_given && check_lease(o) != 0)
        return -1;
    return 0;
}

/* Behind a proxy the server's socket is the proxy's: only the stop bound
 * is the lease's. Said at start, with the proxy's settings that keep its
 * release after this run's stop: the plan's own server settings, as
 * docs/operators.md, "Leases behind PgBouncer", derives them. */
static void say_proxied_lease(const run_locks *l, const run_options *o)
{
    advlock_lease_plan p;
    if (o->lease_ms == 0 || !run_proxied(l)
        || advlock_lease_plan_init(&p, o->lease_ms, o->kill_after_ms) != 0)
        return;
    char lease[32];
    advlock_format_seconds(p.lease_ms, lease, sizeof lease);
    cli_warning("lease: behind a proxy the server frees lock '%s' when the proxy drops this "
                "client, which only the proxy's settings bound: for a lease of %ss PgBouncer "
                "needs tcp_keepalive=1 tcp_keepidle=%d tcp_keepintvl=%d tcp_keepcnt=%d "
                "tcp_user_timeout=%d client_idle_timeout=0 (set for the longest lease used "
                "through it; see --lease in advlock(1)); COMMAND is still stopped "
                "within the lease",
                o->shown_key, lease, (int)p.keepalives_idle_s, (int)p.keepalives_interval_s,
                (int)p.keepalives_count, (int)p.user_timeout_ms);
}

/* The command's proof of which holder it is: the token and the key it
 * belongs to, as advlock.fence_ok(key, token) takes them. */
static int export_fence(const advlock_report *r)
{
    char token[24], key[24];
    snprintf(token, sizeof token, "%" PRId64, r->fence);
    snprintf(key, sizeof key, "%" PRId64, r->key);
    return setenv("ADVLOCK_FENCE", token, 1) != 0 || setenv("ADVLOCK_KEY", key, 1) != 0 ? -1 : 0;
}

/* With several names, text says which it holds once it holds them all
 * (unless --quiet): every word before "--" is a name, so a command line
 * written for one name with a "--" among the command's arguments (advlock
 * run K cmd -- x) shows that K and cmd are both held and x runs. JSON says
 * each name's acquired event already. */
static void say_names_held(const run_options *o)
{
    if (o->name_count < 2 || o->quiet || cli_log_structured())
        return;
    char said[sizeof o->shown_key + 32];
    snprintf(said, sizeof said, "holding locks '%s'", o->shown_key);
    cli_log(&(cli_event){.kind = CLI_EVENT_MESSAGE, .level = CLI_INFO, .said = said});
}

int cmd_run(int argc, char **argv)
{
    run_options o;
    int parsed = parse_run_options(argc, argv, &o);
    if (parsed != 0)
        return parsed == HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
    int rc = run_order_names(&o);
    if (rc != EXIT_OK)
        return rc;
    cli_log_set_locks(o.names, o.name_count);
    if (cli_signals_install() != 0) {
        cli_error("cannot set up signal handling: %s", strerror(errno));
        return EXIT_LOCK_ERROR;
    }
    /* --timeout counts from here: the connect, the session check and every
     * attempt spend it together, and each must end by its bound. */
    int64_t started = advlock_pq_now_ms();
    cli_bound bound = cli_bound_from(started, o.timeout_ms);
    o.handshake =
        o.timeout_ms != INT64_MAX ? bound : cli_bound_from(started, CLI_DEFAULT_TIMEOUT_MS);
    PGconn *conn;
    char lease_options[ADVLOCK_LEASE_OPTIONS_MAX], session_name[RUN_SESSION_NAME_SIZE];
    run_session_name(o.names, o.name_count, session_name);
    if ((rc = cli_connect_until(o.conninfo, o.application_name, session_name,
                                lease_startup_options(&o, lease_options, sizeof lease_options),
                                o.handshake, &conn))
        != EXIT_OK)
        return rc;
    if (take_lease(&o, conn) != 0 || run_wait_needs_no_lease(&o) != 0) {
        PQfinish(conn);
        return EXIT_USAGE;
    }

    static run_locks l; /* 64 members of about 1.5 KB: not on the stack */
    progress shown = {.draw = !o.quiet && cli_log_draws_progress(),
                      .started_ms = started,
                      .server_wait = o.lock.wait == ADVLOCK_WAIT_SERVER};
    o.lock.on_event = run_on_lock_event;
    o.lock.event_user = &shown;
    /* The last sleep ends at the timeout, so the last attempt is made by
     * then and answered within the grace, not up to a second after it. */
    o.lock.clip_to_deadline = 1;
    /* With --xact the acquires run inside the transaction (the set refuses
     * a transaction-scoped acquire outside one); a pooler pins one server
     * session to it until COMMIT or ROLLBACK. */
    l.conn = conn;
    if ((rc = run_check_capacity(conn, &o, o.handshake)) != 0 || run_bind(&l, conn, &o) != 0
        || (o.xact && (rc = cli_xact_begin(conn, o.handshake)) != 0)) {
        run_close(&l);
        return setup_failed_status(rc);
    }
    int taken = 0, gone = 0;
    rc = NAME_TAKEN;
    while (rc == NAME_TAKEN && taken < o.name_count) {
        rc = run_acquire_name(&l, &o, &shown, started, bound, taken, &gone);
        if (rc == NAME_TAKEN)
            taken++;
    }
    if (rc != NAME_TAKEN) {
        /* All or none: a name that could not be taken gives back those
         * taken before it (with --xact, by the ROLLBACK that ends the
         * session's transaction); closing the session gives back what a
         * failed release left. */
        if (gone || (PQstatus(conn) == CONNECTION_OK && run_give_back(&l, &o, taken, 0, 1) == 0))
            run_close(&l);
        else
            close_session(&l, &o);
        return rc;
    }
    run_focus_all(&o);
    say_names_held(&o);
    say_proxied_lease(&l, &o);
    if (o.xact)
        run_settle(&l, bound.until_ms);
    if (o.xact && (rc = cli_xact_drop_snapshot(conn, bound)) != 0) {
        close_session(&l, &o); /* a connection shut down sends no ROLLBACK */
        return setup_failed_status(rc);
    }

    if (o.lock.fence && export_fence(&advlock_pq_member_report(&l.members[0])->lock) != 0) {
        cli_error("cannot set ADVLOCK_FENCE: %s", strerror(errno));
        run_give_back(&l, &o, o.name_count, 0, 0);
        run_close(&l);
        return EXIT_LOCK_ERROR;
    }
    cli_child child;
    if (cli_child_start(&child, o.command) != 0) {
        cli_error("cannot start '%s': %s", o.command[0], strerror(errno));
        run_give_back(&l, &o, o.name_count, 0, 0);
        run_close(&l);
        return EXIT_LOCK_ERROR;
    }
    cli_log(
        &(cli_event){.kind = CLI_EVENT_COMMAND_STARTED, .pid = child.pid, .command = o.command});
    int lost;
    int status = supervise(&child, &l, &o, &lost);
    cli_child_finish(&child);
    int exit_code = status < 0 ? EXIT_LOCK_ERROR : exit_status_of(status);
    if (status >= 0)
        cli_log(&(cli_event){.kind = CLI_EVENT_COMMAND_EXITED,
                             .pid = child.pid,
                             .wait_status = status,
                             .status = exit_code});
    int given_back =
        lost == LOCK_KEPT && run_give_back(&l, &o, o.name_count, exit_code == 0, 0) == 0;
    if (lost == LOCK_UNVERIFIED)
        run_release_all_quietly(&l, &o);
    /* Lost, a release that found no lock or reached another server session,
     * or with --xact a COMMIT that failed after the command succeeded (the
     * session broke as it ended): not a clean run, and said so. A ROLLBACK
     * that fails after a failed command leaves the command's status. */
    if (lost || (!given_back && (!o.xact || exit_code == 0)))
        exit_code = EXIT_LOCK_ERROR;
    /* A lease that ran out left its statement (a heartbeat, a verify) with
     * no answer: given up on as any statement past its bound is. */
    if (lost == LOCK_LOST && PQtransactionStatus(conn) == PQTRANS_ACTIVE)
        advlock_pq_abandon(conn);
    run_close(&l);
    return exit_code;
}
