/*
 * A lease's failures in words, for the single adapter (async.c) and the
 * lock set (lockset_lease.c) alike: what a refused setup and an expiry tell
 * the caller. docs/libpq.md, "Leases".
 */
#include "pq.h"

#include <stdio.h>

void advlock_pq_lease_say_setup_failed(const advlock_lease *l, const char *words, char *out,
                                       size_t size)
{
    if (advlock_lease_setup_result(l) == ADVLOCK_LEASE_NOT_APPLIED)
        snprintf(out, size,
                 "lease: the server did not apply tcp_user_timeout=%d and the keepalive "
                 "settings, so it could hold the lock for hours after losing this client",
                 (int)advlock_lease_plan_of(l)->user_timeout_ms);
    else
        snprintf(out, size, "lease: setting the server session up failed: %.200s",
                 words[0] != '\0' ? words : "no answer");
}

int advlock_pq_lease_unbound(const advlock_lease *l, advlock_lease_expiry why)
{
    return why == ADVLOCK_LEASE_SETTINGS || advlock_lease_setup_result(l) == ADVLOCK_LEASE_PROXIED;
}

/* The lease's words for why it ran out (words: what the failed heartbeat
 * said, or ""). Never "no longer held": the server may hold the lock until
 * it frees it. */
void advlock_pq_lease_say_expiry(const advlock_lease *lease, advlock_lease_expiry why,
                                 const char *words, char *out, size_t size)
{
    const advlock_lease_plan *p = advlock_lease_plan_of(lease);
    char d[32], l[32], frees[112];
    advlock_format_seconds(p->deadline_ms, d, sizeof d);
    advlock_format_seconds(p->lease_ms, l, sizeof l);
    int failed = why == ADVLOCK_LEASE_CONNECTION || why == ADVLOCK_LEASE_SERVER_ERROR;
    if (advlock_pq_lease_unbound(lease, why))
        snprintf(frees, sizeof frees,
                 "behind a proxy the server frees the lock when the proxy drops this connection: "
                 "its own tcp settings bound that");
    else
        snprintf(frees, sizeof frees, "the server %s the lock within %ss%s",
                 failed ? "frees" : "will free", l, failed ? " (lease) at the latest" : "");
    switch (why) {
    case ADVLOCK_LEASE_SETTINGS:
        snprintf(out, size,
                 "a heartbeat found the server session's lease settings changed (or another "
                 "server session answering), so the server may free the lock early or late "
                 "(lease %ss); stop the work now",
                 l);
        break;
    case ADVLOCK_LEASE_CONNECTION:
    case ADVLOCK_LEASE_SERVER_ERROR:
        snprintf(out, size, "a heartbeat failed (%.80s): %s; stop the work now",
                 words[0] != '\0' ? words : "no answer", frees);
        break;
    default:
        snprintf(out, size, "no heartbeat answered within %ss (lease %ss): %s; stop the work now",
                 d, l, frees);
        break;
    }
}
