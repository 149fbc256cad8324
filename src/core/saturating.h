/*
 * The one saturating add of times and spans. Internal, never installed:
 * every layer includes it by its path (the core through core.h, the
 * adapters, the fake, the simulator and the command directly), so that a
 * clock plus a span never wraps, whoever computes it.
 */
#ifndef ADVLOCK_SATURATING_H
#define ADVLOCK_SATURATING_H

#include <stdint.h>

/* a + b, either of which may be negative, clamped to INT64_MAX or INT64_MIN
 * where the sum would overflow: callers' clocks and spans may be anything,
 * and INT64_MAX stands for "never". */
static inline int64_t advlock_add_saturating(int64_t a, int64_t b)
{
    int64_t sum;
    /* One add and a test of its overflow flag (gcc and clang): it runs on
     * every timer a machine sets. */
    if (__builtin_add_overflow(a, b, &sum))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return sum;
}

/* a - b, clamped the same way: a span between two readings of clocks that
 * may be anything. */
static inline int64_t advlock_sub_saturating(int64_t a, int64_t b)
{
    int64_t diff;
    if (__builtin_sub_overflow(a, b, &diff))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return diff;
}

#endif
