/*
 * One turn of a poll() loop for one adapter (advlock_pq_wait): the loop the
 * blocking calls run, offered to programs without an event loop of their
 * own, with room for one more descriptor (a signal self-pipe), so that such
 * a program need not copy it.
 */
#include "pq.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>

/* Milliseconds until at, as poll()'s timeout: 0 when due, capped. */
static int until(int64_t at, int64_t now)
{
    return at <= now ? 0 : at - now > INT_MAX ? INT_MAX : (int)(at - now);
}

/* The shorter of two poll() timeouts, -1 meaning none. */
static int shorter(int a, int b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static short poll_events(unsigned wants)
{
    return (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                   | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0));
}

static unsigned seen(short revents)
{
    unsigned ready = 0;
    if (revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL))
        ready |= ADVLOCK_PQ_READ;
    if (revents & POLLOUT)
        ready |= ADVLOCK_PQ_WRITE;
    return ready;
}

int advlock_pq_wait(advlock_pq *a, int extra_fd, int max_wait_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL)
        return ADVLOCK_EMISUSE;

    /* A reset connection's new socket would say nothing of the held lock's
     * end: the loss is told before the wait. */
    (void)advlock_pq_engine_notice_reset(a, advlock_pq_now_ms());
    unsigned wants = advlock_pq_async_wants(a);
    struct pollfd fds[2] = {
        {.fd = wants != 0 ? advlock_pq_async_socket(a) : -1, .events = poll_events(wants)},
        {.fd = extra_fd, .events = POLLIN},
    };
    int64_t at, now = advlock_pq_now_ms();
    int has_deadline = advlock_pq_async_deadline(a, &at);
    int timeout = shorter(has_deadline ? until(at, now) : -1, max_wait_ms < 0 ? -1 : max_wait_ms);

    if (advlock_pq_async_busy(a) && fds[0].fd < 0 && !has_deadline) {
        /* Busy with no socket any more and no deadline: nothing will ever
         * wake the wait, so let libpq say what broke. */
        (void)advlock_pq_async_process(a, ADVLOCK_PQ_READ, now);
        return 0;
    }
    if (fds[0].fd < 0 && extra_fd < 0 && timeout < 0)
        return 0; /* nothing to wait for */

    unsigned ready = 0;
    if (poll(fds, 2, timeout) < 0) {
        if (errno == EINTR)
            return 0; /* a signal: the caller turns again, for the time left */
        /* poll() itself failed: libpq's next read says whether the
         * connection did. */
        ready = fds[0].fd >= 0 ? ADVLOCK_PQ_READ : 0;
    } else {
        ready = seen(fds[0].revents);
    }
    now = advlock_pq_now_ms();
    if (ready != 0 || (has_deadline && now >= at))
        (void)advlock_pq_async_process(a, ready, now);
    return extra_fd >= 0 && fds[1].revents != 0;
}
