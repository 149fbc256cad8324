/*
 * One operation of a member of advlock run's lock set (an acquire, a
 * release), driven to its end with the signal pipe beside its socket, and
 * the progress line an acquire draws on a terminal (run.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "run.h"

/* How the engine's lock-delay words begin (src/core/conn_delay.c). */
#define LOCK_DELAY_WORDS "lock-delay: "

void run_on_lock_event(void *user, const advlock_event *e)
{
    progress *p = user;
    cli_event event = {.lock = p->lock, .key = e->report->key, .report = e->report};
    if (e->kind == ADVLOCK_EVENT_ATTEMPT) {
        p->attempt = e->report->attempts;
        p->retry_at_ms = 0;
        event.kind = CLI_EVENT_TRYING;
        cli_log(&event);
    } else if (e->kind == ADVLOCK_EVENT_WARNING && e->message != NULL
               && strncmp(e->message, LOCK_DELAY_WORDS, strlen(LOCK_DELAY_WORDS)) == 0) {
        /* The engine's own warning: why a granted acquire takes this long.
         * (The server's notices reach the report, not the log.) */
        event.kind = CLI_EVENT_MESSAGE;
        event.level = CLI_INFO;
        event.said = e->message;
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

int64_t run_shorter_wait(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* What m's machine does next: its statement (in flight, or queued behind
 * others'), its sleep. */
static advlock_action next_of(const advlock_pq_member *m)
{
    return advlock_next_action(&m->member_.machine_);
}

/* The statement m has in flight (ADVLOCK_SQL_COUNT: none). */
static advlock_sql in_flight(const advlock_pq_member *m)
{
    advlock_action next = next_of(m);
    return next.kind == ADVLOCK_ACTION_QUERY || next.kind == ADVLOCK_ACTION_CANCEL_QUERY
               ? next.sql
               : ADVLOCK_SQL_COUNT;
}

/* How long to wait for signals alone before the next try (the transaction
 * ended for the sleep), or -1 for the adapter's own wait. */
static int64_t tend_xact(run_locks *l, advlock_pq_member *m, xact_pause *x, cli_bound bound)
{
    if (x->conn == NULL || x->failed)
        return -1;
    advlock_action next = next_of(m);
    if (next.kind != ADVLOCK_ACTION_SLEEP)
        return -1;
    int rc = 0;
    if (!x->ended)
        run_settle(l, bound.until_ms);
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
    (void)advlock_pq_lockset_cancel(&l->set, m, advlock_pq_now_ms());
    return -1;
}

/* A release behind a proxy (r, else NULL): how long to wait for signals
 * alone before its retry is due, or -1 for the adapter's own wait; at the
 * retry's time, helpers occupy the server sessions PgBouncer would hand it
 * first (reach.c). */
static int64_t tend_reach(const advlock_pq_member *m, cli_reach *r)
{
    if (r == NULL)
        return -1;
    advlock_action next = next_of(m);
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
 * abandoned, as for --xact's statements) is raised again for run_drive's own
 * wait to see; a question unanswered by the bound has said so, and the
 * next try fails on the closed connection. */
static void tend_diagnosis(const advlock_pq_member *m, PGconn *conn, progress *p, cli_bound bound)
{
    advlock_action next = next_of(m);
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

drive_end run_drive(run_locks *l, int i, const run_options *o, progress *seen, int64_t until_ms,
                    xact_pause *x, cli_reach *r)
{
    drive_end end = {0, 0, ADVLOCK_SQL_COUNT};
    advlock_pq_member *m = &l->members[i];
    PGconn *conn = l->conn;
    while (advlock_pq_member_busy(m)) {
        int64_t now = advlock_pq_now_ms();
        /* The session check has the handshake's bound too. */
        int checking = in_flight(m) == ADVLOCK_SQL_SESSION;
        if (now >= until_ms || (checking && now >= o->handshake.until_ms)) {
            end.abandoned = 1;
            end.sql = in_flight(m);
            advlock_pq_abandon(conn);
            break;
        }
        if (seen != NULL && seen->draw)
            show_progress(o, seen, now);
        int64_t paused_ms =
            x != NULL ? tend_xact(l, m, x, (cli_bound){until_ms, o->timeout_ms}) : -1;
        if (x != NULL && x->failed > 0 && end.signal == 0)
            end.signal = x->failed; /* a stop signal ended BEGIN or ROLLBACK */
        if (seen != NULL && seen->pending)
            tend_diagnosis(m, conn, seen, (cli_bound){until_ms, o->timeout_ms});
        if (paused_ms < 0)
            paused_ms = tend_reach(m, r);
        /* A progress line wakes every 100 ms to keep its elapsed time ticking. */
        int64_t until =
            checking && o->handshake.until_ms < until_ms ? o->handshake.until_ms : until_ms;
        int64_t wait_ms = run_shorter_wait(seen != NULL && seen->draw ? 100 : -1,
                                           until == INT64_MAX ? -1 : until - now);
        if (paused_ms >= 0)
            wait_for_signals(run_shorter_wait(wait_ms, paused_ms));
        else if (advlock_pq_lockset_wait(&l->set, cli_signals_fd(),
                                         wait_ms > INT_MAX ? INT_MAX : (int)wait_ms)
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
            (void)advlock_pq_lockset_cancel(&l->set, m, now);
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

void run_say_abandoned(const drive_end *end, const run_options *o, int64_t key, int64_t bound_ms,
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
