/*
 * poll_locks: several connections contending for one advisory lock, in one
 * thread, with poll().
 *
 * Each client opens a connection (from the PG* environment variables),
 * acquires the lock, holds it for a while and releases it. Three clients are
 * patient; a fourth arrives late with a short timeout and gives up. Every
 * connection gets a nonblocking adapter, and the loop below does for each
 * exactly what the adapter asks: watch its socket for the readiness it
 * wants, wake it at its deadline, and hand it what happened. That includes
 * the time a client holds the lock, when the adapter watches the session so
 * that a lost connection is noticed at once.
 *
 *     make examples && PGHOST=... build/examples/poll_locks
 *
 * Exits 0 when every client ended as its script allows.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "advlock_pq.h"

#define LOCK_NAME "BrighterMigration_public.Outbox"

enum { CLIENTS = 4, HOLD_MS = 600 };

enum step { NOT_STARTED, ACQUIRING, HOLDING, RELEASING, FINISHED };

typedef struct client {
    const char *name;
    int64_t start_ms; /* when it starts acquiring, from the program's start */
    int64_t timeout_ms;
    int may_time_out;
    PGconn *conn;
    advlock_pq lock;
    int64_t key; /* the lock's, from the acquire's report: the release reuses it */
    enum step step;
    int64_t release_at;
    uint64_t attempts_shown;
    int ok;
} client;

static client clients[CLIENTS] = {
    {.name = "alpha", .start_ms = 0, .timeout_ms = 10000},
    {.name = "bravo", .start_ms = 0, .timeout_ms = 10000},
    {.name = "charlie", .start_ms = 0, .timeout_ms = 10000},
    {.name = "impatient", .start_ms = 50, .timeout_ms = 250, .may_time_out = 1},
};

static int64_t t0;

static void say(const client *c, const char *what, const char *detail)
{
    printf("[%5lld ms] %-9s %s%s%s\n", (long long)(advlock_pq_now_ms() - t0), c->name, what,
           detail[0] != '\0' ? ": " : "", detail);
    fflush(stdout);
}

/* The report in words (advlock_pq_describe renders it on request). */
static const char *describe(const advlock_pq_report *r)
{
    static char sentence[ADVLOCK_MESSAGE_MAX];
    advlock_pq_describe(r, LOCK_NAME, strlen(LOCK_NAME), sentence, sizeof sentence);
    return sentence;
}

/* Prints a line each time the adapter starts a sleep after a failed try. */
static void show_retries(client *c)
{
    advlock_action next = advlock_next_action(advlock_pq_async_machine(&c->lock));
    if (next.kind == ADVLOCK_ACTION_SLEEP && next.report->attempts > c->attempts_shown) {
        char line[64];
        c->attempts_shown = next.report->attempts;
        snprintf(line, sizeof line, "busy (attempt %llu), retrying in %lld ms",
                 (unsigned long long)c->attempts_shown, (long long)next.sleep_ms);
        say(c, line, "");
    }
}

/* Moves a client along its script: acquire, hold, release. */
static void advance(client *c, int64_t now)
{
    size_t len = strlen(LOCK_NAME);
    if (c->step == NOT_STARTED && now - t0 >= c->start_ms) {
        if (advlock_pq_async_start_acquire(&c->lock, LOCK_NAME, len, c->timeout_ms, now) != 0) {
            say(c, "could not start", "");
            c->step = FINISHED;
            return;
        }
        c->step = ACQUIRING;
    }
    if (c->step == ACQUIRING) {
        show_retries(c);
        const advlock_pq_report *r = advlock_pq_async_report(&c->lock);
        if (r == NULL)
            return;
        if (r->lock.outcome == ADVLOCK_ACQUIRED) {
            char detail[64];
            snprintf(detail, sizeof detail, "after %llu attempt(s), holding it for %d ms",
                     (unsigned long long)r->lock.attempts, HOLD_MS);
            say(c, "ACQUIRED", detail);
            c->key = r->lock.key;
            c->step = HOLDING;
            c->release_at = now + HOLD_MS;
        } else {
            say(c, advlock_outcome_name(r->lock.outcome), describe(r));
            c->ok = r->lock.outcome == ADVLOCK_TIMED_OUT && c->may_time_out;
            c->step = FINISHED;
        }
    }
    if (c->step == HOLDING && advlock_pq_async_lost(&c->lock)) {
        say(c, "LOST", describe(advlock_pq_async_report(&c->lock)));
        c->step = FINISHED;
        return;
    }
    if (c->step == HOLDING && now >= c->release_at) {
        /* By the acquire's key: the name is not hashed a second time. */
        if (advlock_pq_async_start_release_key(&c->lock, c->key, now) != 0) {
            say(c, "could not start the release", "");
            c->step = FINISHED;
            return;
        }
        c->step = RELEASING;
    }
    if (c->step == RELEASING) {
        const advlock_pq_report *r = advlock_pq_async_report(&c->lock);
        if (r == NULL)
            return;
        say(c, advlock_outcome_name(r->lock.outcome), describe(r));
        c->ok = r->lock.outcome == ADVLOCK_RELEASED;
        c->step = FINISHED;
    }
}

/* The earliest time anyone needs the loop without socket activity. */
static int64_t next_wake(void)
{
    int64_t wake = INT64_MAX, at;
    for (int i = 0; i < CLIENTS; i++) {
        client *c = &clients[i];
        if (advlock_pq_async_deadline(&c->lock, &at) && at < wake)
            wake = at;
        if (c->step == NOT_STARTED && t0 + c->start_ms < wake)
            wake = t0 + c->start_ms;
        if (c->step == HOLDING && c->release_at < wake)
            wake = c->release_at;
    }
    return wake;
}

static int all_finished(void)
{
    for (int i = 0; i < CLIENTS; i++)
        if (clients[i].step != FINISHED)
            return 0;
    return 1;
}

int main(void)
{
    t0 = advlock_pq_now_ms();
    for (int i = 0; i < CLIENTS; i++) {
        client *c = &clients[i];
        c->conn = PQconnectdb("application_name=poll_locks");
        if (PQstatus(c->conn) != CONNECTION_OK || advlock_pq_async_init(&c->lock, c->conn) != 0) {
            fprintf(stderr, "poll_locks: %s: cannot connect: %s", c->name, PQerrorMessage(c->conn));
            return 1;
        }
    }
    printf("%d clients, one lock: '%s'\n", CLIENTS, LOCK_NAME);

    while (!all_finished()) {
        struct pollfd fds[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            unsigned wants = advlock_pq_async_wants(&clients[i].lock);
            fds[i].fd = wants != 0 ? advlock_pq_async_socket(&clients[i].lock) : -1;
            fds[i].events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                                    | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0));
            fds[i].revents = 0;
        }
        int64_t wake = next_wake(), now = advlock_pq_now_ms();
        int timeout = wake == INT64_MAX ? -1 : wake > now ? (int)(wake - now) : 0;
        if (poll(fds, CLIENTS, timeout) < 0) {
            perror("poll_locks: poll");
            return 1;
        }

        now = advlock_pq_now_ms();
        for (int i = 0; i < CLIENTS; i++) {
            client *c = &clients[i];
            unsigned ready = 0;
            int64_t at;
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                ready |= ADVLOCK_PQ_READ;
            if (fds[i].revents & POLLOUT)
                ready |= ADVLOCK_PQ_WRITE;
            int due = advlock_pq_async_deadline(&c->lock, &at) && now >= at;
            if (ready != 0 || due)
                advlock_pq_async_process(&c->lock, ready, now);
            advance(c, now);
        }
    }

    int failures = 0;
    for (int i = 0; i < CLIENTS; i++) {
        failures += !clients[i].ok;
        PQfinish(clients[i].conn);
    }
    printf("%s\n", failures == 0 ? "every client ended as expected" : "some clients failed");
    return failures == 0 ? 0 : 1;
}
