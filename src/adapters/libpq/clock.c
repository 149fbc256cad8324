/* Time for the blocking adapter and for loops: CLOCK_MONOTONIC in ms. */
#include "pq.h"

#include <errno.h>
#include <time.h>

int64_t advlock_pq_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void advlock_pq_sleep_until(int64_t at_ms)
{
    if (at_ms < 0)
        return;
    struct timespec at = {.tv_sec = (time_t)(at_ms / 1000),
                          .tv_nsec = (long)(at_ms % 1000) * 1000000};
    /* An absolute deadline makes resuming after a signal exact. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
        continue;
}
