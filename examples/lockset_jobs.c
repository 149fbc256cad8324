/*
 * lockset_jobs: forty jobs at once in one thread, each guarded by an
 * advisory lock of its own, all over one connection: a lock set.
 *
 * Every job is a member of the set, with its own lock, timeout and report;
 * the set sends their statements together (libpq's pipeline mode) and the
 * loop below watches one socket, one readiness and one deadline for all of
 * them. The last two jobs share a name: the set keeps them apart (the
 * server alone would grant both, its locks being re-entrant per session),
 * so the second waits for the first, exactly as if another process held
 * the lock.
 *
 *     make examples && PGHOST=... build/examples/lockset_jobs
 *
 * Exits 0 when every job ran under its lock and gave it back.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "advlock_pq.h"

enum { JOBS = 40, WORK_MS = 200, TIMEOUT_MS = 5000 };

typedef struct job {
    char name[32];
    advlock_pq_member lock;
    int64_t work_ends; /* 0 until it holds its lock and works */
    int finished;
} job;

static job jobs[JOBS];

/* The loop's wake-up: the set's deadline or the first job's end of work. */
static int64_t next_wake(const advlock_pq_lockset *set)
{
    int64_t wake = INT64_MAX, at;
    if (advlock_pq_lockset_deadline(set, &at))
        wake = at;
    for (int i = 0; i < JOBS; i++)
        if (jobs[i].work_ends != 0 && advlock_pq_member_held(&jobs[i].lock)
            && jobs[i].work_ends < wake)
            wake = jobs[i].work_ends;
    return wake;
}

/* What a job does when its member is not busy; returns 1 once it ended. */
static int tend(advlock_pq_lockset *set, job *j, int64_t now)
{
    if (advlock_pq_member_held(&j->lock)) {
        if (j->work_ends == 0) {
            j->work_ends = now + WORK_MS; /* it holds the lock: work */
            if (strcmp(j->name, "nightly report") == 0)
                printf("%s: acquired after %lld ms\n", j->name,
                       (long long)advlock_pq_member_report(&j->lock)->lock.elapsed_ms);
        } else if (now >= j->work_ends) {
            (void)advlock_pq_lockset_start_release(set, &j->lock, now);
        }
        return 0;
    }
    /* Released, or never held (timed out, failed) or lost. */
    const advlock_pq_report *r = advlock_pq_member_report(&j->lock);
    if (r->lock.outcome != ADVLOCK_RELEASED) {
        char why[ADVLOCK_MESSAGE_MAX];
        advlock_pq_describe(r, j->name, strlen(j->name), why, sizeof why);
        fprintf(stderr, "%s: %s\n", j->name, why);
    }
    j->finished = 1;
    return r->lock.outcome == ADVLOCK_RELEASED ? 1 : -1;
}

int main(void)
{
    PGconn *conn = PQconnectdb(""); /* from the PG* environment */
    advlock_pq_lockset set;
    if (PQstatus(conn) != CONNECTION_OK || advlock_pq_lockset_init(&set, conn) != 0) {
        fprintf(stderr, "lockset_jobs: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return 1;
    }
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < JOBS; i++) {
        job *j = &jobs[i];
        if (i < JOBS - 2)
            snprintf(j->name, sizeof j->name, "job %d", i);
        else
            snprintf(j->name, sizeof j->name, "nightly report");
        advlock_pq_member_init(&j->lock);
        (void)advlock_pq_lockset_start_acquire(&set, &j->lock, j->name, strlen(j->name), TIMEOUT_MS,
                                               NULL, now);
    }

    int ended = 0, ok = 1;
    while (ended < JOBS) {
        unsigned wants = advlock_pq_lockset_wants(&set);
        struct pollfd p = {.fd = wants != 0 ? advlock_pq_lockset_socket(&set) : -1,
                           .events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                                             | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0))};
        int64_t wake = next_wake(&set);
        now = advlock_pq_now_ms();
        (void)poll(&p, 1, wake == INT64_MAX ? -1 : wake > now ? (int)(wake - now) : 0);

        now = advlock_pq_now_ms();
        unsigned ready = ((p.revents & (POLLIN | POLLHUP | POLLERR)) ? ADVLOCK_PQ_READ : 0)
                         | ((p.revents & POLLOUT) ? ADVLOCK_PQ_WRITE : 0);
        (void)advlock_pq_lockset_process(&set, ready, now); /* also when only time passed */
        for (int i = 0; i < JOBS; i++) {
            if (jobs[i].finished || advlock_pq_member_busy(&jobs[i].lock))
                continue;
            int end = tend(&set, &jobs[i], now);
            ended += end != 0;
            ok &= end >= 0;
        }
    }
    printf("%d jobs ran under their locks over one connection (server session %d)\n", JOBS,
           PQbackendPID(conn));
    advlock_pq_lockset_finish(&set);
    PQfinish(conn);
    return ok ? 0 : 1;
}
