/* How the lease and lock-set worlds find their next event: their events
 * are few per client and connection, so each looks at every candidate and
 * takes the earliest (the first looked at, on a tie). None of this is
 * exported. */
#ifndef ADVLOCK_SIM_SCAN_H
#define ADVLOCK_SIM_SCAN_H

#include <stdint.h>

/* No time at all: an event not scheduled. */
#define NEVER INT64_MAX

/* The earliest event looked at so far: its time, a world's kind (0:
 * none), and whose it is (a client's, a connection's, a session's). */
typedef struct sim_next {
    int64_t at;
    int kind;
    int index;
} sim_next;

static inline void sim_consider(sim_next *e, int64_t at, int kind, int index)
{
    if (at < e->at)
        *e = (sim_next){at, kind, index};
}

#endif
