/*
 * One turn of a poll() loop for the pump (pump.c), which an adapter
 * (advlock_pq_wait) and a lock set (advlock_pq_lockset_wait) run: the loop
 * the blocking calls run, offered to programs without an event loop of
 * their own, with room for one more descriptor (a signal self-pipe), so
 * that such a program need not copy it.
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

int advlock_pq_wait_until(int64_t until_ms, int64_t now)
{
    if (until_ms == INT64_MAX || until_ms <= now)
        return -1;
    return until_ms - now > INT_MAX ? INT_MAX : (int)(until_ms - now);
}

int advlock_pq_wait_turn(int busy, int fd, unsigned wants, const int64_t *at, int extra_fd,
                         int max_wait_ms, int64_t now, advlock_pq_turn *turn)
{
    struct pollfd fds[2] = {
        {.fd = wants != 0 ? fd : -1, .events = poll_events(wants)},
        {.fd = extra_fd, .events = POLLIN},
    };
    int timeout = shorter(at != NULL ? until(*at, now) : -1, max_wait_ms < 0 ? -1 : max_wait_ms);
    turn->ready = 0;
    turn->extra = 0;
    turn->now_ms = now;
    if (busy && (wants == 0 || fd < 0) && at == NULL) {
        /* Busy with no socket any more and no deadline: nothing will ever
         * wake the wait, so let libpq say what broke. */
        turn->ready = ADVLOCK_PQ_READ;
        return 1;
    }
    if (fds[0].fd < 0 && extra_fd < 0 && timeout < 0)
        return 0; /* nothing to wait for */
    if (poll(fds, 2, timeout) < 0) {
        if (errno == EINTR)
            return 0; /* a signal: the caller turns again, for the time left */
        /* poll() itself failed: libpq's next read says whether the
         * connection did. */
        turn->ready = fds[0].fd >= 0 ? ADVLOCK_PQ_READ : 0;
    } else {
        turn->ready = seen(fds[0].revents);
    }
    turn->extra = extra_fd >= 0 && fds[1].revents != 0;
    turn->now_ms = advlock_pq_now_ms(); /* the poll took time */
    return turn->ready != 0 || (at != NULL && turn->now_ms >= *at);
}
