/*
 * advlock run: flock(1) for PostgreSQL. Takes the lock (or every lock
 * named, one after another in key order) on its own session, runs the
 * command while holding it, releases, and exits with the command's status.
 * The wait and the release go through the nonblocking adapter, and every
 * wait is the adapter's (advlock_pq_wait) with a signal self-pipe beside
 * its socket, so signals are seen at once and, while the command runs, so
 * is the server closing the session (which drops the lock). Behind a proxy
 * the server session can end while the connection to the proxy stays up,
 * so there the lock is verified every --verify-interval.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "advlock_pq.h"
#include "child.h"
#include "cli.h"
#include "log.h"

typedef struct run_options {
    const char *conninfo;
    const char *application_name;
    int64_t timeout_ms;
    int conflict_exit_code;
    int quiet;
    int keep_running;
    int xact;              /* --xact: one transaction around the command */
    int64_t kill_after_ms; /* from the stop signal to SIGKILL */
    int64_t verify_ms;     /* --verify-interval: behind a proxy; 0: never */
    int64_t lease_ms;      /* --lease; 0: none */
    int lease_given;       /* --lease was on the command line */
    advlock_options lock;  /* --shared, --wait, --jitter, --diagnose, --xact, --allow-standby,
                              --fence */
    /* The names, in the order they are taken and the reverse of the order
     * they are given back: by key (order_names), so that runs naming the
     * same locks in any order take them in one order and never wait for
     * each other in a cycle. */
    cli_lock names[CLI_RUN_LOCKS_MAX];
    int name_count;
    /* The name in hand (focus): the one being acquired, released or
     * checked; while the command runs, all of them (focus_all). */
    const char *key;
    /* The key as messages show it (advlock_escape_name): one printable line
     * whatever the name holds, so no name can move the terminal's cursor. */
    char shown_key[ADVLOCK_KEY_ECHO_MAX + 4];
    char **command;
} run_options;

/* Puts name i in hand: messages from now on name it. */
static void focus(run_options *o, int i)
{
    o->key = o->names[i].name;
    advlock_escape_name(o->key, strlen(o->key), o->shown_key, sizeof o->shown_key);
}

/* Puts every name in hand, for what concerns them all (the session that
 * holds them): messages name them as 'A', 'B', cut with "..." where the
 * line would grow too long. */
static void focus_all(run_options *o)
{
    focus(o, 0);
    size_t used = strlen(o->shown_key);
    for (int i = 1; i < o->name_count; i++) {
        char one[sizeof o->shown_key];
        advlock_escape_name(o->names[i].name, strlen(o->names[i].name), one, sizeof one);
        size_t more = strlen(one) + 4; /* "', '" before it */
        if (used + more >= sizeof o->shown_key) {
            if (used + 6 < sizeof o->shown_key)
                memcpy(o->shown_key + used, "', ...", 7);
            return;
        }
        memcpy(o->shown_key + used, "', '", 4);
        memcpy(o->shown_key + used + 4, one, strlen(one) + 1);
        used += more;
    }
}

/* ---- progress on a terminal, from the machine's events ------------------- */

typedef struct progress {
    const char *lock; /* the name the events say */
    int draw;         /* a progress line on the terminal */
    /* The run's start: the line's elapsed time counts from it, as --timeout
     * does, through every name (the set shares one timeout). */
    int64_t started_ms;
    uint64_t attempt;
    int64_t retry_at_ms; /* 0: no sleep under way */
    int server_wait;
    /* --diagnose with the JSON log: each name's first waiting event is held
     * back (pending) until the holder is asked (tend_diagnosis), and names
     * it. */
    int diagnose;
    int pending;
    cli_event waiting;
    advlock_report report; /* the waiting event's */
    advlock_report holder;
} progress;

static void on_lock_event(void *user, const advlock_event *e)
{
    progress *p = user;
    cli_event event = {.lock = p->lock, .key = e->report->key, .report = e->report};
    if (e->kind == ADVLOCK_EVENT_ATTEMPT) {
        p->attempt = e->report->attempts;
        p->retry_at_ms = 0;
        event.kind = CLI_EVENT_TRYING;
        cli_log(&event);
    } else if (e->kind == ADVLOCK_EVENT_SLEEP && e->report->attempts > 0) {
        /* (a release's retries behind a proxy sleep too: no attempts) */
        p->retry_at_ms = e->now_ms + e->sleep_ms;
        event.kind = CLI_EVENT_WAITING;
        event.sleep_ms = e->sleep_ms;
        if (!p->diagnose) {
            cli_log(&event);
            return;
        }
        p->diagnose = 0; /* once */
        p->pending = 1;
        p->report = *e->report;
        p->waiting = event;
        p->waiting.report = &p->report;
    }
}

static void show_progress(const run_options *o, const progress *p, int64_t now)
{
    char elapsed[32], retry[32];
    advlock_format_seconds(now - p->started_ms, elapsed, sizeof elapsed);
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

/* How long past --timeout a run may take (see --timeout in advlock(1)): the
 * connect and every statement must end by --timeout plus the library's
 * grace (ADVLOCK_PQ_GRACE_MS), past which the connection is abandoned. A
 * statement cancelled by a stop signal has SIGNAL_GRACE_MS to answer (a
 * granted lock is then released), then it is abandoned too. */
enum { SIGNAL_GRACE_MS = 500 };

/* The bound of a phase that starts at now and may take ms (INT64_MAX: no
 * bound), grace included. */
static cli_bound bound_from(int64_t now, int64_t ms)
{
    int64_t until = ms == INT64_MAX || ms > INT64_MAX - now - ADVLOCK_PQ_GRACE_MS
                        ? INT64_MAX
                        : now + ms + ADVLOCK_PQ_GRACE_MS;
    return (cli_bound){until, ms};
}

/* The shorter of two waits in ms, -1 meaning none. */
static int64_t shorter_wait(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* How an operation driven by drive() ended for the run. */
typedef struct drive_end {
    int signal;      /* the first stop signal that arrived, or 0 */
    int abandoned;   /* it did not end by its bound: the connection is closed */
    advlock_sql sql; /* abandoned: the statement in flight (ADVLOCK_SQL_COUNT: none) */
} drive_end;

/* The statement the adapter has in flight (ADVLOCK_SQL_COUNT: none). */
static advlock_sql in_flight(const advlock_pq *a)
{
    advlock_action next = advlock_next_action(advlock_pq_async_machine(a));
    return next.kind == ADVLOCK_ACTION_QUERY || next.kind == ADVLOCK_ACTION_CANCEL_QUERY
               ? next.sql
               : ADVLOCK_SQL_COUNT;
}

/* advlock run --xact while acquiring: the transaction is open only while a
 * try is out. It ends (ROLLBACK: nothing was granted) when the acquire
 * starts a sleep and begins again when the sleep is over, so that the run
 * pins no pooled server session while it backs off: the session another
 * client holds the key on stays free for that client's unlock, and the next
 * try may land elsewhere. A try must never run outside a transaction (its
 * lock would end with its statement): if BEGIN or ROLLBACK fails, the
 * acquire is cancelled and failed set. */
typedef struct xact_pause {
    PGconn *conn; /* NULL: not --xact */
    int ended;    /* the transaction is ended for the sleep */
    int failed;   /* BEGIN or ROLLBACK failed: -1, or a stop signal's number */
} xact_pause;

/* How long to wait for signals alone before the next try (the transaction
 * ended for the sleep), or -1 for the adapter's own wait. */
static int64_t tend_xact(advlock_pq *a, xact_pause *x, cli_bound bound)
{
    if (x->conn == NULL || x->failed)
        return -1;
    advlock_action next = advlock_next_action(advlock_pq_async_machine(a));
    if (next.kind != ADVLOCK_ACTION_SLEEP)
        return -1;
    int rc = 0;
    if (!x->ended && (rc = cli_xact_end(x->conn, 0, bound)) == 0)
        x->ended = 1;
    int64_t left = next.wake_at_ms - advlock_pq_now_ms();
    if (x->ended && left > 0)
        return left;
    if (x->ended && (rc = cli_xact_begin(x->conn, bound)) == 0) {
        x->ended = 0;
        return -1;
    }
    x->failed = rc > 0 ? rc : -1;
    advlock_pq_async_cancel(a, advlock_pq_now_ms());
    return -1;
}

/* A release behind a proxy (r, else NULL): how long to wait for signals
 * alone before its retry is due, or -1 for the adapter's own wait; at the
 * retry's time, helpers occupy the server sessions PgBouncer would hand it
 * first (reach.c). */
static int64_t tend_reach(advlock_pq *a, cli_reach *r)
{
    if (r == NULL)
        return -1;
    advlock_action next = advlock_next_action(advlock_pq_async_machine(a));
    if (next.kind != ADVLOCK_ACTION_SLEEP || r->done_for_ms == next.wake_at_ms)
        return -1;
    int64_t left = next.wake_at_ms - advlock_pq_now_ms();
    if (left > 0)
        return left;
    cli_reach_occupy(r);
    r->done_for_ms = next.wake_at_ms;
    return -1;
}

/* Waits up to ms for the signal pipe alone. */
static void wait_for_signals(int64_t ms)
{
    struct pollfd p = {.fd = cli_signals_fd(), .events = POLLIN};
    (void)poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
}

/* --diagnose with the JSON log, in the acquire's first sleep: who holds the
 * lock, asked once on the lock's connection while it is idle (with --xact,
 * once the transaction is ended for the sleep: tend_xact comes first), so
 * that the first waiting event names the holder (said then, with or
 * without it). A stop signal that ends the question (its connection
 * abandoned, as for --xact's statements) is raised again for drive's own
 * wait to see; a question unanswered by the bound has said so, and the
 * next try fails on the closed connection. */
static void tend_diagnosis(advlock_pq *a, PGconn *conn, progress *p, cli_bound bound)
{
    advlock_action next = advlock_next_action(advlock_pq_async_machine(a));
    /* Idle, not only the machine: outside any transaction (an error would
     * abort --xact's), and nothing of libpq's under way (a lease's heartbeat
     * for a lock already held may be out during an acquire's sleep). */
    if (next.kind == ADVLOCK_ACTION_SLEEP && PQtransactionStatus(conn) == PQTRANS_IDLE) {
        int rc = cli_holders_ask(conn, p->waiting.key, bound, &p->holder);
        if (rc > 0)
            raise(rc);
        p->waiting.holder = rc == 0 ? &p->holder : NULL;
    }
    cli_log(&p->waiting);
    p->pending = 0;
}

/* Runs the adapter's operation to its end, or to until_ms, cancelling an
 * acquire if a forwarded signal arrives; a statement still unanswered at
 * until_ms (or SIGNAL_GRACE_MS after the signal; at once after a second one) is
 * cancelled and its connection, conn, closed. The waiting is the adapter's
 * own (advlock_pq_wait), with the signal pipe beside it; x: see xact_pause
 * (NULL but for an acquire); r: see tend_reach (NULL but for a release). */
static drive_end drive(advlock_pq *a, PGconn *conn, const run_options *o, progress *seen,
                       int64_t until_ms, xact_pause *x, cli_reach *r)
{
    drive_end end = {0, 0, ADVLOCK_SQL_COUNT};
    while (advlock_pq_async_busy(a)) {
        int64_t now = advlock_pq_now_ms();
        if (now >= until_ms) {
            end.abandoned = 1;
            end.sql = in_flight(a);
            cli_abandon(conn);
            break;
        }
        if (seen != NULL && seen->draw)
            show_progress(o, seen, now);
        int64_t paused_ms = x != NULL ? tend_xact(a, x, (cli_bound){until_ms, o->timeout_ms}) : -1;
        if (x != NULL && x->failed > 0 && end.signal == 0)
            end.signal = x->failed; /* a stop signal ended BEGIN or ROLLBACK */
        if (seen != NULL && seen->pending)
            tend_diagnosis(a, conn, seen, (cli_bound){until_ms, o->timeout_ms});
        if (paused_ms < 0)
            paused_ms = tend_reach(a, r);
        /* A progress line wakes every 100 ms to keep its elapsed time ticking. */
        int64_t wait_ms = shorter_wait(seen != NULL && seen->draw ? 100 : -1,
                                       until_ms == INT64_MAX ? -1 : until_ms - now);
        if (paused_ms >= 0)
            wait_for_signals(shorter_wait(wait_ms, paused_ms));
        else if (advlock_pq_wait(a, cli_signals_fd(), wait_ms > INT_MAX ? INT_MAX : (int)wait_ms)
                 < 0)
            break;
        int sig;
        while ((sig = cli_signals_next()) != 0) {
            if (sig == SIGCHLD)
                continue;
            now = advlock_pq_now_ms();
            if (end.signal != 0) {
                until_ms = now; /* asked twice: no more waiting for the server */
                continue;
            }
            end.signal = sig;
            until_ms = until_ms - now > SIGNAL_GRACE_MS ? now + SIGNAL_GRACE_MS : until_ms;
            advlock_pq_async_cancel(a, now);
        }
    }
    if (seen != NULL && seen->draw)
        clear_progress();
    return end;
}

/* What the statement an abandoned operation had in flight was doing, for
 * the message that says it got no answer. */
static const char *asked_for(advlock_sql sql)
{
    switch (sql) {
    case ADVLOCK_SQL_SESSION: return "the session check";
    case ADVLOCK_SQL_HOLDERS: return "the question who holds lock";
    case ADVLOCK_SQL_UNLOCK:
    case ADVLOCK_SQL_UNLOCK_SHARED:
    case ADVLOCK_SQL_UNLOCK_GUARDED:
    case ADVLOCK_SQL_UNLOCK_SHARED_GUARDED: return "the release of lock";
    case ADVLOCK_SQL_HELD:
    case ADVLOCK_SQL_HELD_SHARED:
    case ADVLOCK_SQL_HELD_GUARDED:
    case ADVLOCK_SQL_HELD_SHARED_GUARDED: return "the check of lock";
    case ADVLOCK_SQL_COUNT: return "the wait for lock";
    default: return "the attempt on lock";
    }
}

/* Says that an abandoned operation's statement got no answer within
 * bound_ms: as kind, the operation's failure (the acquire's or the
 * release's) on the lock, key. */
static void say_abandoned(const drive_end *end, const run_options *o, int64_t key, int64_t bound_ms,
                          cli_event_kind kind)
{
    char seconds[32], said[ADVLOCK_MESSAGE_MAX];
    advlock_format_seconds(bound_ms, seconds, sizeof seconds);
    const char *what = asked_for(end->sql);
    int names_lock = end->sql != ADVLOCK_SQL_SESSION;
    snprintf(said, sizeof said,
             "no answer from the server within %ss to %s%s%s%s; connection closed", seconds, what,
             names_lock ? " '" : "", names_lock ? o->shown_key : "", names_lock ? "'" : "");
    cli_log(&(cli_event){.kind = kind, .lock = o->key, .key = key, .said = said});
}

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
 * is seen on its socket at no cost), one statement every interval asks
 * whether the claimed server session still holds the lock. With several
 * names, each interval verifies them all, one statement after another. */
typedef struct verifier {
    const cli_lock *names;
    int name_count;
    int next;            /* the name the next verify asks about */
    int64_t interval_ms; /* 0: not verifying (direct, --xact, off, or done) */
    int64_t due_ms;      /* when the next verify starts */
    int64_t round_ms;    /* when the verify of the first name last started */
    int in_flight;       /* a verify started and its outcome not yet read */
} verifier;

static void verifier_init(verifier *v, const advlock_pq *a, const run_options *o)
{
    int session_scope = o->lock.scope == ADVLOCK_SESSION;
    v->names = o->names;
    v->name_count = o->name_count;
    v->next = 0;
    v->interval_ms = session_scope && advlock_pq_proxied(a) ? o->verify_ms : 0;
    v->due_ms = advlock_pq_now_ms() + v->interval_ms;
    v->round_ms = v->due_ms;
    v->in_flight = 0;
}

/* How long the wait may last before the next verify is due (-1: no limit). */
static int64_t verify_wait_ms(const verifier *v, int64_t now)
{
    if (v->interval_ms == 0 || v->in_flight)
        return -1; /* a verify in flight wakes the wait on its socket */
    return v->due_ms > now ? v->due_ms - now : 0;
}

/* Starts the verify that is due (while the command runs), and reads the
 * outcome of one that ended: HELD schedules the next (the next name at
 * once, the first an interval after the round began); anything else means
 * the lock (v->next's) is gone or cannot be shown held, and returns 1. */
static int tend_verify(verifier *v, advlock_pq *a, int command_running)
{
    if (v->interval_ms == 0)
        return 0;
    int64_t now = advlock_pq_now_ms();
    if (!v->in_flight && command_running && now >= v->due_ms) {
        v->due_ms = now + v->interval_ms; /* from this start, whatever it does */
        if (v->next == 0)
            v->round_ms = now;
        v->in_flight = advlock_pq_async_start_verify_key(a, v->names[v->next].key, now) == 0;
    }
    if (!v->in_flight || advlock_pq_async_busy(a))
        return 0;
    v->in_flight = 0;
    if (advlock_pq_async_report(a)->lock.outcome == ADVLOCK_HELD) {
        v->next = (v->next + 1) % v->name_count;
        v->due_ms = v->next != 0 ? now : v->round_ms + v->interval_ms;
        return 0;
    }
    v->interval_ms = 0;
    return 1;
}

/* Why a verify did not end HELD, as lock_gone says it. */
static void say_unverified(char *why, size_t size, const advlock_pq *a, const run_options *o)
{
    char sentence[ADVLOCK_MESSAGE_MAX];
    size_t n = (size_t)advlock_pq_describe(advlock_pq_async_report(a), o->key, strlen(o->key),
                                           sentence, sizeof sentence);
    if (n > 0 && n < sizeof sentence && sentence[n - 1] == '.')
        sentence[n - 1] = '\0'; /* lock_gone goes on after it */
    snprintf(why, size, "checking lock '%s' while the command ran: %s", o->shown_key, sentence);
}

/* Why the lock was lost, as lock_gone says it: a lease that ran out (the
 * server may hold the lock a while yet: never "no longer held"), or the
 * connection closed, which ended the session; returns which, as the JSON
 * log names it. */
static const char *say_lost(char *why, size_t size, const advlock_pq *a, const run_options *o)
{
    const advlock_pq_report *r = advlock_pq_async_report(a);
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
static void say_lease_renewed(const advlock_pq *a, int64_t *stop_at)
{
    int64_t now_stop_at;
    if (advlock_pq_lease_deadline(a, &now_stop_at, NULL) != 1)
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
 * *lost says whether the lock was lost meanwhile, and how. */
enum { LOCK_KEPT, LOCK_LOST, LOCK_UNVERIFIED };
static int supervise(cli_child *c, advlock_pq *a, run_options *o, int *lost)
{
    int status = -1, exited = 0;
    int64_t kill_at = -1; /* -1: not stopping; INT64_MAX: SIGKILL sent */
    verifier v;
    verifier_init(&v, a, o);
    *lost = LOCK_KEPT;
    int64_t lease_stop_at = 0;
    say_lease_renewed(a, &lease_stop_at);
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
        int64_t wait_ms = shorter_wait(exited ? 50 : -1, verify_wait_ms(&v, now));
        if (kill_at >= 0 && kill_at != INT64_MAX)
            wait_ms = shorter_wait(wait_ms, kill_at - now);
        if (advlock_pq_wait(a, cli_signals_fd(), wait_ms > INT_MAX ? INT_MAX : (int)wait_ms) < 0)
            return -1;
        int sig;
        while ((sig = cli_signals_next()) != 0)
            if (sig != SIGCHLD)
                stop_command(c, o, sig, &kill_at);
        char why[2 * ADVLOCK_MESSAGE_MAX]; /* a sentence and a name */
        if (!*lost && advlock_pq_async_lost(a)) {
            *lost = LOCK_LOST;
            const char *reason = say_lost(why, sizeof why, a, o);
            lock_gone(c, o, NULL, &kill_at, why, reason);
        } else if (!*lost && tend_verify(&v, a, !exited)) {
            *lost = LOCK_UNVERIFIED;
            focus(o, v.next);
            say_unverified(why, sizeof why, a, o);
            focus_all(o);
            lock_gone(c, o, &o->names[v.next], &kill_at, why, "unverified");
        }
        say_lease_renewed(a, &lease_stop_at);
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
          "      --application-name NAME  application_name of the session (default advlock)\n"
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
          "                               'advlock setup'; not with --shared or --wait\n"
          "      --lease SECONDS          over TCP, bound a cut-off run: it stops COMMAND\n"
          "                               before the server can free the lock, and the\n"
          "                               server frees it within this long (default 30;\n"
          "                               0: none; at least --kill-after + 6)\n"
          "      --verify-interval SECONDS  behind a proxy (PgBouncer), check this often\n"
          "                               that the server session still holds the lock while\n"
          "                               COMMAND runs; stop it if not (default 1; 0: never)\n"
          "      --log-format FORMAT      text (default: sentences) or json (one object per\n"
          "                               line on stderr for every event of the run)\n",
          to);
}

/* A lease must leave the stop bound room: refused before connecting. */
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

static int parse_run_options(int argc, char **argv, run_options *o)
{
    enum {
        OPT_KEEP_RUNNING = 256,
        OPT_APPLICATION_NAME,
        OPT_SHARED,
        OPT_WAIT,
        OPT_JITTER,
        OPT_DIAGNOSE,
        OPT_XACT,
        OPT_ALLOW_STANDBY,
        OPT_VERIFY_INTERVAL,
        OPT_LEASE,
        OPT_FENCE,
        OPT_LOG_FORMAT
    };
    static const struct option options[] = {
        {"dbname", required_argument, NULL, 'd'},
        {"timeout", required_argument, NULL, 'w'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"quiet", no_argument, NULL, 'q'},
        {"keep-running", no_argument, NULL, OPT_KEEP_RUNNING},
        {"kill-after", required_argument, NULL, 'k'},
        {"application-name", required_argument, NULL, OPT_APPLICATION_NAME},
        {"shared", no_argument, NULL, OPT_SHARED},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"jitter", no_argument, NULL, OPT_JITTER},
        {"diagnose", no_argument, NULL, OPT_DIAGNOSE},
        {"xact", no_argument, NULL, OPT_XACT},
        {"allow-standby", no_argument, NULL, OPT_ALLOW_STANDBY},
        {"verify-interval", required_argument, NULL, OPT_VERIFY_INTERVAL},
        {"lease", required_argument, NULL, OPT_LEASE},
        {"fence", no_argument, NULL, OPT_FENCE},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    advlock_options_init(&o->lock);
    o->timeout_ms = INT64_MAX;
    o->conflict_exit_code = EXIT_BUSY;
    o->kill_after_ms = 10000;
    o->verify_ms = 1000;
    o->lease_ms = ADVLOCK_LEASE_DEFAULT_MS;
    int opt;
    while ((opt = getopt_long(argc, argv, "+d:w:E:k:qh", options, NULL)) != -1) {
        switch (opt) {
        case 'd': o->conninfo = optarg; break;
        case 'w':
            if (parse_seconds(optarg, &o->timeout_ms) != 0) {
                cli_error("--timeout wants seconds, such as 30 or 0.5 (at most 3 decimals)");
                return -1;
            }
            break;
        case 'k':
            if (parse_seconds(optarg, &o->kill_after_ms) != 0) {
                cli_error("--kill-after wants seconds, such as 10 or 0.5 (at most 3 decimals)");
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
        case OPT_XACT:
            o->xact = 1;
            o->lock.scope = ADVLOCK_TRANSACTION;
            break;
        case OPT_ALLOW_STANDBY: o->lock.allow_standby = 1; break;
        case OPT_FENCE: o->lock.fence = 1; break;
        case OPT_VERIFY_INTERVAL:
            if (parse_seconds(optarg, &o->verify_ms) != 0) {
                cli_error("--verify-interval wants seconds, such as 1 or 0.5 (at most 3 "
                          "decimals; 0: never)");
                return -1;
            }
            break;
        case OPT_LEASE:
            if (parse_seconds(optarg, &o->lease_ms) != 0) {
                cli_error("--lease wants seconds, such as 30 (at most 3 decimals; 0: none)");
                return -1;
            }
            o->lease_given = 1;
            break;
        case OPT_LOG_FORMAT: {
            cli_log_format format;
            if (cli_log_parse_format(optarg, &format) != 0) {
                cli_error("--log-format wants text or json");
                return -1;
            }
            cli_log_set_format(format); /* the next error is said in it too */
            break;
        }
        case 'h': usage(stdout); exit(EXIT_OK);
        default: usage(stderr); return -1;
        }
    }
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
        if (cli_log_structured()) /* a usage error is a message like any other */
            cli_error("a KEY and a COMMAND are needed; see advlock run --help");
        else
            usage(stderr);
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
    return check_lease(o);
}

/* ---- the whole run -------------------------------------------------------------- */

/* An operation's outcome in the core's words (the reference's sentences). */
static const char *describe(const advlock_pq_report *r, const char *key, char *buf, size_t size)
{
    if (advlock_pq_describe(r, key, strlen(key), buf, size) <= 0)
        return advlock_strerror(r->lock.failure);
    return buf;
}

/* How a run that did not get the lock exits: the timeout's status; a
 * standby, which cannot serve the lock, as an unavailable server; any other
 * failure (a lost connection, statements on different server sessions
 * behind a proxy) as a lock error. */
static int acquire_failed_status(const advlock_report *r, const run_options *o)
{
    if (r->outcome == ADVLOCK_TIMED_OUT)
        return o->conflict_exit_code;
    return r->failure == ADVLOCK_ESTANDBY ? EXIT_NO_SERVER : EXIT_LOCK_ERROR;
}

/* How a run whose BEGIN or CLOSE ALL (--xact) did not succeed exits: as the
 * acquire would have, for a signal or no answer by the bound. */
static int setup_failed_status(int rc)
{
    return rc > 0 ? 128 + rc : rc == CLI_NO_ANSWER ? EXIT_NO_SERVER : EXIT_LOCK_ERROR;
}

/* How long a release may take, grace aside: as long as the acquire, and
 * behind a proxy never less than a guarded unlock's retries
 * (ADVLOCK_GUARD_RETRY_MS), or a short --timeout would abandon the release
 * between its tries, the lock left on the claimed server session. */
static int64_t release_ms(const advlock_pq *a, const run_options *o)
{
    int retries = advlock_pq_proxied(a) && o->timeout_ms < ADVLOCK_GUARD_RETRY_MS;
    return retries ? ADVLOCK_GUARD_RETRY_MS : o->timeout_ms;
}

/* Drives a release to its end, from now to its bound (release_ms), its
 * retries helped to the claimed server session behind a proxy. */
static drive_end drive_release(advlock_pq *a, PGconn *conn, const run_options *o, int64_t now)
{
    cli_bound bound = bound_from(now, release_ms(a, o));
    cli_reach reach;
    cli_reach_init(&reach, o->conninfo, o->application_name, advlock_pq_session_token(a), bound);
    drive_end end =
        drive(a, conn, o, NULL, bound.until_ms, NULL, advlock_pq_proxied(a) ? &reach : NULL);
    cli_reach_end(&reach);
    return end;
}

/* Releases what the acquire took, by its key: no second hash. Anything but
 * RELEASED means the lock was not where the run held it (NOT_HELD, or
 * ESESSION: the unlock reached another server session behind a proxy, and
 * the lock may be left on the one that took it), so the run fails. */
static int release(advlock_pq *a, PGconn *conn, const run_options *o, int64_t key)
{
    int64_t now = advlock_pq_now_ms();
    char said[2 * ADVLOCK_MESSAGE_MAX];
    cli_event failed = {.kind = CLI_EVENT_RELEASE_FAILED, .lock = o->key, .key = key, .said = said};
    if (advlock_pq_async_start_release_key(a, key, now) != 0) {
        snprintf(said, sizeof said, "could not release lock '%s'; closing the session releases it",
                 o->shown_key);
        cli_log(&failed);
        return -1;
    }
    drive_end end = drive_release(a, conn, o, now);
    if (end.abandoned) {
        say_abandoned(&end, o, key, end.signal != 0 ? SIGNAL_GRACE_MS : release_ms(a, o),
                      CLI_EVENT_RELEASE_FAILED);
        return -1;
    }
    const advlock_pq_report *r = advlock_pq_async_report(a);
    if (r->lock.outcome != ADVLOCK_RELEASED) {
        char message[ADVLOCK_MESSAGE_MAX];
        snprintf(said, sizeof said, "releasing lock '%s': %s", o->shown_key,
                 describe(r, o->key, message, sizeof message));
        failed.report = &r->lock;
        cli_log(&failed);
        return -1;
    }
    return 0;
}

/* After a verify that could not show the lock held, or an acquire that
 * ended with a grant in doubt: the claimed server session may still hold it
 * (busy with another client's transaction when the statement came), and it
 * outlives advlock's connection in the pool. The release (which keeps trying
 * to reach that session, within its bound) gives the lock back; unreported:
 * whatever it says, the message before has said the lock is gone or in
 * doubt. */
static void release_quietly(advlock_pq *a, PGconn *conn, const run_options *o, int64_t key)
{
    int64_t now = advlock_pq_now_ms();
    if (advlock_pq_async_start_release_key(a, key, now) == 0)
        (void)drive_release(a, conn, o, now);
}

/* An acquire that failed while giving back a grant nobody wanted (its
 * unlock failed or reached another server session): the lock may be left
 * where it was granted. */
static int grant_in_doubt(const advlock_report *r)
{
    return r->detail == ADVLOCK_DETAIL_UNDO_CANCELLED
           || r->detail == ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE
           || r->detail == ADVLOCK_DETAIL_UNDO_AFTER_57014;
}

/* Ends a run's session: with --xact its transaction rolls back first, so
 * that a pooler gets its server connection back clean. */
static void close_session(PGconn *conn, const run_options *o)
{
    if (o->xact)
        cli_xact_end(conn, 0, bound_from(advlock_pq_now_ms(), o->timeout_ms));
    PQfinish(conn);
}

/* Gives back the first taken names, the last taken first: with --xact by
 * the transaction's end, COMMIT only if commit is set; else one release
 * each, its name in hand (say_each: and said once released). A release that
 * fails (said) does not stop the others: behind a transaction pool, closing
 * the connection would leave them held on the server session that took
 * them. Only a connection that is gone ends it. Returns 0, or -1 if
 * anything failed. */
static int give_back(advlock_pq *a, PGconn *conn, run_options *o, int taken, int commit,
                     int say_each)
{
    if (o->xact && cli_xact_end(conn, commit, bound_from(advlock_pq_now_ms(), o->timeout_ms)) != 0)
        return -1;
    int failed = 0;
    for (int i = taken - 1; i >= 0; i--) {
        focus(o, i);
        if (!o->xact
            && (PQstatus(conn) != CONNECTION_OK || release(a, conn, o, o->names[i].key) != 0)) {
            failed = 1;
            continue;
        }
        char said[ADVLOCK_KEY_ECHO_MAX + 64];
        snprintf(said, sizeof said, "lock '%s' released: the run holds all its names or none",
                 o->shown_key);
        cli_log(&(cli_event){.kind = CLI_EVENT_RELEASED,
                             .lock = o->key,
                             .key = o->names[i].key,
                             .said = say_each ? said : NULL,
                             .reason = !o->xact ? "unlock"
                                       : commit ? "commit"
                                                : "rollback"});
    }
    return failed ? -1 : 0;
}

/* After a verify that could not show a name held: release_quietly, for
 * every name, the last taken first. */
static void release_all_quietly(advlock_pq *a, PGconn *conn, const run_options *o)
{
    for (int i = o->name_count - 1; i >= 0; i--)
        release_quietly(a, conn, o, o->names[i].key);
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

/* The lease the adapter runs: none on a Unix socket (said when asked for
 * one), or with --xact; else --lease, with --kill-after the stop time. */
static void take_lease(run_options *o, PGconn *conn)
{
    if (o->lease_ms > 0 && o->lease_given && (o->xact || unix_socket(conn)))
        cli_warning("--lease: %s",
                    o->xact
                        ? "not with --xact: this run has no lease"
                        : "no lease needed on a Unix socket: the kernel ends both sides at once");
    if (o->xact || unix_socket(conn))
        o->lease_ms = 0;
    o->lock.lease_ms = o->lease_ms;
    o->lock.lease_stop_ms = o->lease_ms > 0 ? o->kill_after_ms : 0;
}

/* Behind a proxy the server's socket is the proxy's: only the stop bound
 * is the lease's, said at start. */
static void say_proxied_lease(const advlock_pq *a, const run_options *o)
{
    if (o->lease_ms > 0 && advlock_pq_proxied(a))
        cli_warning("lease: behind a proxy, the release bound is the proxy's tcp settings (the "
                    "server frees lock '%s' when the proxy drops this client); COMMAND is still "
                    "stopped within the lease",
                    o->shown_key);
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

/* Derives every name's key and sorts the names by it (signed order), so
 * that every run takes the same names in the same order. Returns EXIT_OK,
 * or how the run exits, said: a name that is no lock name, or one named
 * twice (its key found twice: distinct names never share one). */
static int order_names(run_options *o)
{
    for (int i = 0; i < o->name_count; i++) {
        focus(o, i);
        int rc = advlock_derive_key(o->key, strlen(o->key), &o->names[i].key);
        if (rc != 0) {
            cli_error("lock key '%s': %s", o->shown_key, advlock_strerror(rc));
            return EXIT_BAD_KEY;
        }
    }
    /* Insertion sort: a handful of names, and no callback to write. */
    for (int i = 1; i < o->name_count; i++) {
        cli_lock n = o->names[i];
        int j = i;
        for (; j > 0 && o->names[j - 1].key > n.key; j--)
            o->names[j] = o->names[j - 1];
        o->names[j] = n;
    }
    for (int i = 1; i < o->name_count; i++) {
        if (o->names[i].key == o->names[i - 1].key) {
            focus(o, i);
            cli_error("lock '%s' is named twice", o->shown_key);
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

/* --wait with several names and a lease: a later name's wait in the
 * server's queue holds the connection, so the lease of the names taken
 * before it could send no heartbeat and would run out. Said, and refused. */
static int wait_needs_no_lease(const run_options *o)
{
    if (o->name_count < 2 || o->lock.wait != ADVLOCK_WAIT_SERVER || o->lease_ms == 0)
        return 0;
    cli_error("--wait with several names: not under a lease (no heartbeat can go while a "
              "later name waits in the server's queue); add --lease 0, or poll (no --wait)");
    return -1;
}

/* Says that a stop signal ended the acquire of the name in hand (key), and
 * returns how the run exits for it. */
static int say_cancelled(const run_options *o, int64_t key, int sig)
{
    cli_log(&(cli_event){.kind = CLI_EVENT_CANCELLED, .lock = o->key, .key = key, .signal = sig});
    return 128 + sig;
}

/* Acquires name i, put in hand (focus), on the run's connection, with what
 * is left of --timeout: all the names share it, from started, each phase
 * bounded by bound. The first name's binds the adapter to the connection
 * (one adapter takes every name, one after another: the session holds them
 * all, and its end, or the transaction's with --xact, frees them all), and
 * only its acquire may have --xact's pause give the transaction back while
 * it backs off (see xact_pause). Returns NAME_TAKEN once the lock is held,
 * else how the run exits, said, the lock not held; *gone is then set if
 * the connection was closed (its statement did not answer), which ends the
 * session and its locks. */
enum { NAME_TAKEN = -1 };
static int acquire_name(advlock_pq *a, PGconn *conn, run_options *o, progress *shown,
                        int64_t started, cli_bound bound, int i, int *gone)
{
    focus(o, i);
    int64_t key = o->names[i].key;
    int first = i == 0;
    int64_t now = advlock_pq_now_ms();
    int64_t left = o->timeout_ms == INT64_MAX          ? INT64_MAX
                   : started + o->timeout_ms - now > 0 ? started + o->timeout_ms - now
                                                       : 0;
    int rc;
    shown->lock = o->key; /* the name the events say, from its first try */
    shown->diagnose = o->lock.diagnose && cli_log_structured(); /* asked for each name */
    shown->pending = 0;
    if ((first
         && ((rc = advlock_pq_async_init(a, conn)) != 0
             || (rc = advlock_pq_set_options(a, &o->lock)) != 0))
        || (rc = advlock_pq_async_start_acquire_key(a, key, left, now)) != 0) {
        const char *why = PQerrorMessage(conn);
        char said[ADVLOCK_MESSAGE_MAX + 512];
        snprintf(said, sizeof said, "cannot start acquiring '%s': %s: %.*s", o->shown_key,
                 advlock_strerror(rc), cli_trimmed_length(why), why);
        cli_log(&(cli_event){.kind = CLI_EVENT_FAILED, .lock = o->key, .key = key, .said = said});
        return EXIT_LOCK_ERROR;
    }
    xact_pause pause = {.conn = o->xact && first ? conn : NULL};
    drive_end end = drive(a, conn, o, shown, bound.until_ms, &pause, NULL);
    if (end.abandoned) {
        say_abandoned(&end, o, key, end.signal != 0 ? SIGNAL_GRACE_MS : o->timeout_ms,
                      CLI_EVENT_FAILED);
        *gone = 1;
        if (end.signal != 0)
            return say_cancelled(o, key, end.signal);
        /* Only a diagnosis comes after the timeout: the lock was busy. */
        return end.sql == ADVLOCK_SQL_HOLDERS ? o->conflict_exit_code : EXIT_NO_SERVER;
    }
    int interrupted = end.signal;
    const advlock_pq_report *r = advlock_pq_async_report(a);
    if (pause.failed < 0 && !interrupted)
        return EXIT_LOCK_ERROR;
    /* A signal that came too late to stop the grant still means stop: the
     * rollback gives a transaction-scoped lock back, an unlock a session
     * lock (closing the connection would not, behind a pooler). */
    if (r->lock.outcome == ADVLOCK_CANCELLED
        || (interrupted && r->lock.outcome == ADVLOCK_ACQUIRED)) {
        if (r->lock.outcome == ADVLOCK_ACQUIRED && !o->xact)
            release_quietly(a, conn, o, key);
        return say_cancelled(o, key, interrupted);
    }
    if (r->lock.outcome != ADVLOCK_ACQUIRED) {
        /* The message names --timeout, all the run had, not what the
         * connect and the names before left of it for this acquire. */
        advlock_pq_report told = *r;
        told.lock.timeout_ms = o->timeout_ms;
        char message[ADVLOCK_MESSAGE_MAX];
        cli_log(&(cli_event){.kind = r->lock.outcome == ADVLOCK_TIMED_OUT ? CLI_EVENT_TIMED_OUT
                                                                          : CLI_EVENT_FAILED,
                             .lock = o->key,
                             .key = key,
                             .report = &told.lock,
                             .said = describe(&told, o->key, message, sizeof message)});
        if (grant_in_doubt(&r->lock) && !o->xact)
            release_quietly(a, conn, o, key);
        return acquire_failed_status(&r->lock, o);
    }
    cli_log(&(cli_event){.kind = CLI_EVENT_ACQUIRED,
                         .lock = o->key,
                         .key = key,
                         .report = &r->lock,
                         .lease_ms = o->lease_ms});
    return NAME_TAKEN;
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
    if (parse_run_options(argc, argv, &o) != 0)
        return EXIT_USAGE;
    int rc = order_names(&o);
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
    cli_bound bound = bound_from(started, o.timeout_ms);
    PGconn *conn;
    char lease_options[ADVLOCK_LEASE_OPTIONS_MAX];
    if ((rc = cli_connect_until(o.conninfo, o.application_name,
                                lease_startup_options(&o, lease_options, sizeof lease_options),
                                bound, &conn))
        != EXIT_OK)
        return rc;
    take_lease(&o, conn);
    if (wait_needs_no_lease(&o) != 0) {
        PQfinish(conn);
        return EXIT_USAGE;
    }

    advlock_pq a;
    progress shown = {.draw = !o.quiet && cli_log_draws_progress(),
                      .started_ms = started,
                      .server_wait = o.lock.wait == ADVLOCK_WAIT_SERVER};
    o.lock.on_event = on_lock_event;
    o.lock.event_user = &shown;
    /* The last sleep ends at the timeout, so the last attempt is made by
     * then and answered within the grace, not up to a second after it. */
    o.lock.clip_to_deadline = 1;
    /* With --xact the acquire runs inside the transaction (the adapter
     * refuses a transaction-scoped acquire outside one); a pooler pins one
     * server session to it until COMMIT or ROLLBACK. */
    if (o.xact && (rc = cli_xact_begin(conn, bound)) != 0) {
        PQfinish(conn);
        return setup_failed_status(rc);
    }
    int taken = 0, gone = 0;
    rc = NAME_TAKEN;
    while (rc == NAME_TAKEN && taken < o.name_count) {
        rc = acquire_name(&a, conn, &o, &shown, started, bound, taken, &gone);
        if (rc == NAME_TAKEN)
            taken++;
    }
    if (rc != NAME_TAKEN) {
        /* All or none: a name that could not be taken gives back those
         * taken before it (with --xact, by the ROLLBACK that ends the
         * session's transaction); closing the session gives back what a
         * failed release left. */
        if (gone || (PQstatus(conn) == CONNECTION_OK && give_back(&a, conn, &o, taken, 0, 1) == 0))
            PQfinish(conn);
        else
            close_session(conn, &o);
        return rc;
    }
    focus_all(&o);
    say_names_held(&o);
    say_proxied_lease(&a, &o);
    if (o.xact && (rc = cli_xact_drop_snapshot(conn, bound)) != 0) {
        close_session(conn, &o); /* a connection shut down sends no ROLLBACK */
        return setup_failed_status(rc);
    }

    if (o.lock.fence && export_fence(&advlock_pq_async_report(&a)->lock) != 0) {
        cli_error("cannot set ADVLOCK_FENCE: %s", strerror(errno));
        give_back(&a, conn, &o, o.name_count, 0, 0);
        PQfinish(conn);
        return EXIT_LOCK_ERROR;
    }
    cli_child child;
    if (cli_child_start(&child, o.command) != 0) {
        cli_error("cannot start '%s': %s", o.command[0], strerror(errno));
        give_back(&a, conn, &o, o.name_count, 0, 0);
        PQfinish(conn);
        return EXIT_LOCK_ERROR;
    }
    cli_log(
        &(cli_event){.kind = CLI_EVENT_COMMAND_STARTED, .pid = child.pid, .command = o.command});
    int lost;
    int status = supervise(&child, &a, &o, &lost);
    cli_child_finish(&child);
    int exit_code = status < 0 ? EXIT_LOCK_ERROR : exit_status_of(status);
    if (status >= 0)
        cli_log(&(cli_event){.kind = CLI_EVENT_COMMAND_EXITED,
                             .pid = child.pid,
                             .wait_status = status,
                             .status = exit_code});
    int given_back =
        lost == LOCK_KEPT && give_back(&a, conn, &o, o.name_count, exit_code == 0, 0) == 0;
    if (lost == LOCK_UNVERIFIED)
        release_all_quietly(&a, conn, &o);
    /* Lost, a release that found no lock or reached another server session,
     * or with --xact a COMMIT that failed after the command succeeded (the
     * session broke as it ended): not a clean run, and said so. A ROLLBACK
     * that fails after a failed command leaves the command's status. */
    if (lost || (!given_back && (!o.xact || exit_code == 0)))
        exit_code = EXIT_LOCK_ERROR;
    PQfinish(conn);
    return exit_code;
}
