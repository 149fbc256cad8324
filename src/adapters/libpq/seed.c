/*
 * Entropy for jitter. The core is sans-I/O and cannot seed itself, so the
 * contract in advlock.h (full jitter, jitter_seed 0, no random: random) is
 * kept here, with getrandom(2): clients that start together must not draw
 * the same sleeps, or jitter does nothing.
 */
#include "pq.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* splitmix64's finalizer: spreads the fallback's few changing bits. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t advlock_pq_entropy(void)
{
    uint64_t seed = 0;
    ssize_t got;
    do
        got = getrandom(&seed, sizeof seed, GRND_NONBLOCK);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof seed)
        return seed;
    /* No entropy yet (early boot) or no getrandom (ENOSYS): time, pid and
     * an address (ASLR) differ between processes, which is what jitter
     * needs; it is not a secret. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return mix((uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ ((uint64_t)getpid() << 17)
               ^ (uint64_t)(uintptr_t)&now);
}

/* Jitter asked for with nothing to draw from means random (advlock.h): the
 * core has no entropy, so it is given some here. */
void advlock_pq_seed_jitter(advlock_options *o)
{
    if (o->backoff == ADVLOCK_BACKOFF_FULL_JITTER && o->jitter_seed == 0 && o->random == NULL)
        o->jitter_seed = advlock_pq_entropy();
}
