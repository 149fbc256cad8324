/*
 * The blocking adapter: the engine of async.c run to the end of each
 * operation on the caller's thread, under a poll() loop that waits for
 * exactly what the engine asks for (its socket's readiness, its deadline).
 * So both adapters share every line that talks to libpq or to the machine,
 * and a server-side wait blocks in poll() only until its deadline, where the
 * engine asks the server to cancel it. Every decision is the machine's.
 */
#include "pq.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>

int advlock_pq_session_init(advlock_pq_session *s, PGconn *conn)
{
    if (s == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    advlock_pq_engine_bind(&s->engine_, conn);
    return 0;
}

int advlock_pq_session_set_options(advlock_pq_session *s, const advlock_options *o)
{
    return s != NULL ? advlock_pq_async_set_options(&s->engine_, o) : ADVLOCK_EINVAL;
}

/* Waits once for what the engine wants, then lets it process what came. */
static void wait_and_process(advlock_pq_async *e)
{
    unsigned wants = advlock_pq_async_wants(e);
    struct pollfd p = {.fd = advlock_pq_async_socket(e), .events = 0, .revents = 0};
    p.events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                       | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0));
    nfds_t n = wants != 0 && p.fd >= 0 ? 1 : 0;
    int64_t at, now = advlock_pq_now_ms();
    int timeout = -1;
    if (advlock_pq_async_deadline(e, &at))
        timeout = at <= now ? 0 : at - now > INT_MAX ? INT_MAX : (int)(at - now);

    unsigned ready = 0;
    if (n == 0 && timeout < 0) {
        /* Nothing to wait for (no socket any more): let libpq say why. */
        ready = ADVLOCK_PQ_READ;
    } else if (poll(&p, n, timeout) < 0) {
        if (errno == EINTR)
            return; /* a signal: wait again, for the time left */
        ready = ADVLOCK_PQ_READ;
    } else {
        if (p.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL))
            ready |= ADVLOCK_PQ_READ;
        if (p.revents & POLLOUT)
            ready |= ADVLOCK_PQ_WRITE;
    }
    (void)advlock_pq_async_process(e, ready, advlock_pq_now_ms());
}

/* Runs an operation that start_rc says started to its end; a refused call
 * sent nothing. */
static int run(advlock_pq_session *s, int start_rc, advlock_pq_report *report)
{
    if (start_rc != 0) {
        advlock_pq_report_refuse(report, start_rc);
        return start_rc;
    }
    while (advlock_pq_async_busy(&s->engine_))
        wait_and_process(&s->engine_);
    *report = *advlock_pq_async_report(&s->engine_);
    return report->error;
}

int advlock_pq_acquire(advlock_pq_session *s, const char *lock_key, size_t len, int64_t timeout_ms,
                       advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (s == NULL)
        return run(s, ADVLOCK_EINVAL, report);
    return run(
        s,
        advlock_pq_async_start_acquire(&s->engine_, lock_key, len, timeout_ms, advlock_pq_now_ms()),
        report);
}

int advlock_pq_release(advlock_pq_session *s, const char *lock_key, size_t len,
                       advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    if (s == NULL)
        return run(s, ADVLOCK_EINVAL, report);
    return run(s, advlock_pq_async_start_release(&s->engine_, lock_key, len, advlock_pq_now_ms()),
               report);
}

int advlock_pq_check(advlock_pq_session *s)
{
    if (s == NULL)
        return ADVLOCK_EINVAL;
    if (s->engine_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    return advlock_pq_engine_watch(&s->engine_, advlock_pq_now_ms()) ? ADVLOCK_ECONNLOST : 0;
}
