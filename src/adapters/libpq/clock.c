/* Time for the blocking adapter and for loops: CLOCK_MONOTONIC in ms. */
#include "pq.h"

#include <time.h>

int64_t advlock_pq_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}
