/*
 * A lock holder on the nonblocking libpq adapter with a lease, for the
 * partition test (tests/partition/lease.sh): the "work" is this program's
 * own loop, which appends the wall clock to WORK_FILE every 50 ms while the
 * lock is held, driven by nothing but advlock_pq_async_socket / _wants /
 * _deadline in a poll() loop, as any event loop would. When the adapter
 * turns LOST the work stops at once (the last stamp is written before the
 * loss is even looked at again), the loss's time and words go to stdout,
 * and only then is the connection closed.
 *
 * Usage: lease_holder CONNINFO KEY LEASE_MS STOP_MS WORK_FILE
 * Exits 0 if the lock was still held after 120 s (never in the test), 3
 * after LOST (stdout: "lost <epoch seconds> <expiry> <stop_at - now ms>
 * <free_by - now ms> <words>"), 1 on any other failure (said on stderr).
 */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "advlock_pq.h"

enum { WORK_EVERY_MS = 50, RUN_MS = 120000 };

static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void stamp(const char *path)
{
    FILE *f = fopen(path, "a");
    if (f != NULL) {
        fprintf(f, "%.6f\n", wall_seconds());
        fclose(f);
    }
}

/* One poll() turn for what the adapter waits for, no longer than max_ms. */
static void turn(advlock_pq *a, int64_t max_ms)
{
    unsigned wants = advlock_pq_async_wants(a);
    struct pollfd p = {.fd = wants != 0 ? advlock_pq_async_socket(a) : -1,
                       .events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                                         | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0))};
    int64_t now = advlock_pq_now_ms(), at;
    int64_t wait_ms = max_ms;
    if (advlock_pq_async_deadline(a, &at) && at - now < wait_ms)
        wait_ms = at > now ? at - now : 0;
    int n = poll(&p, 1, (int)wait_ms);
    unsigned ready = 0;
    if (n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)))
        ready |= ADVLOCK_PQ_READ;
    if (n > 0 && (p.revents & POLLOUT))
        ready |= ADVLOCK_PQ_WRITE;
    now = advlock_pq_now_ms();
    if (ready != 0 || (advlock_pq_async_deadline(a, &at) && now >= at))
        (void)advlock_pq_async_process(a, ready, now);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s CONNINFO KEY LEASE_MS STOP_MS WORK_FILE\n", argv[0]);
        return 1;
    }
    PGconn *conn = PQconnectdb(argv[1]);
    advlock_pq a;
    advlock_options o;
    advlock_options_init(&o);
    o.lease_ms = atoll(argv[3]);
    o.lease_stop_ms = atoll(argv[4]);
    if (PQstatus(conn) != CONNECTION_OK || advlock_pq_async_init(&a, conn) != 0
        || advlock_pq_set_options(&a, &o) != 0
        || advlock_pq_async_start_acquire(&a, argv[2], strlen(argv[2]), 10000, advlock_pq_now_ms())
               != 0) {
        fprintf(stderr, "lease_holder: cannot start: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return 1;
    }
    while (advlock_pq_async_busy(&a))
        turn(&a, 1000);
    const advlock_pq_report *r = advlock_pq_async_report(&a);
    if (r->lock.outcome != ADVLOCK_ACQUIRED) {
        char sentence[ADVLOCK_MESSAGE_MAX];
        advlock_pq_describe(r, argv[2], strlen(argv[2]), sentence, sizeof sentence);
        fprintf(stderr, "lease_holder: %s\n", sentence);
        PQfinish(conn);
        return 1;
    }
    int64_t end = advlock_pq_now_ms() + RUN_MS, next_work = 0;
    while (advlock_pq_now_ms() < end && !advlock_pq_async_lost(&a)) {
        int64_t now = advlock_pq_now_ms();
        if (now >= next_work) {
            stamp(argv[5]);
            next_work = now + WORK_EVERY_MS;
        }
        turn(&a, next_work - now);
    }
    if (!advlock_pq_async_lost(&a)) {
        PQfinish(conn);
        return 0;
    }
    /* The work has stopped (this loop was the work): now say so, then close. */
    double lost_at = wall_seconds();
    int64_t now = advlock_pq_now_ms(), stop_at = 0, free_by = 0;
    (void)advlock_pq_lease_deadline(&a, &stop_at, &free_by);
    r = advlock_pq_async_report(&a);
    printf("lost %.6f %d %lld %lld %s\n", lost_at, (int)r->lease_expiry, (long long)(stop_at - now),
           (long long)(free_by - now), r->server_message);
    PQfinish(conn);
    return 3;
}
