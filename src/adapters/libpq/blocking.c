/*
 * The blocking calls: the engine of async.c run to the end of each
 * operation on the caller's thread, one advlock_pq_wait() turn at a time,
 * each waiting for exactly what the engine asks for (its socket's readiness,
 * its deadline). So both ways of driving an adapter share every line that
 * talks to libpq or to the machine, and a server-side wait blocks in poll()
 * only until its deadline, where the engine asks the server to cancel it.
 * Every decision is the machine's.
 */
#include "pq.h"

int advlock_pq_init(advlock_pq *a, PGconn *conn)
{
    if (a == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    advlock_pq_engine_bind(a, conn);
    return 0;
}

/* Runs an operation that start_rc says started to its end, and copies out
 * its report; a refused call sent nothing. */
static int run(advlock_pq *a, int start_rc, advlock_pq_report *report)
{
    if (start_rc != 0) {
        advlock_pq_report_refuse(report);
        return start_rc;
    }
    while (advlock_pq_async_busy(a))
        (void)advlock_pq_wait(a, -1, -1);
    advlock_pq_report_copy(report, &a->report_);
    return 0;
}

int advlock_pq_acquire(advlock_pq *a, const char *lock_key, size_t len, int64_t timeout_ms,
                       advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (a == NULL)
        return run(a, ADVLOCK_EINVAL, report);
    return run(a, advlock_pq_async_start_acquire(a, lock_key, len, timeout_ms, advlock_pq_now_ms()),
               report);
}

int advlock_pq_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                           advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (a == NULL)
        return run(a, ADVLOCK_EINVAL, report);
    return run(a, advlock_pq_async_start_acquire_key(a, key, timeout_ms, advlock_pq_now_ms()),
               report);
}

int advlock_pq_release(advlock_pq *a, const char *lock_key, size_t len, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (a == NULL)
        return run(a, ADVLOCK_EINVAL, report);
    return run(a, advlock_pq_async_start_release(a, lock_key, len, advlock_pq_now_ms()), report);
}

int advlock_pq_release_key(advlock_pq *a, int64_t key, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (a == NULL)
        return run(a, ADVLOCK_EINVAL, report);
    return run(a, advlock_pq_async_start_release_key(a, key, advlock_pq_now_ms()), report);
}

/* The start refuses a NULL adapter (EINVAL), which run() reports. */
int advlock_pq_verify_key(advlock_pq *a, int64_t key, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    return run(a, advlock_pq_async_start_verify_key(a, key, advlock_pq_now_ms()), report);
}

int advlock_pq_check(advlock_pq *a)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || advlock_pq_async_busy(a))
        return ADVLOCK_EMISUSE;
    advlock_pq_engine_watch(a, advlock_pq_now_ms());
    return 0;
}
