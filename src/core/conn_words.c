/*
 * A lease's failures in words, for every driver: what a refused setup and
 * an expiry tell the caller (docs/libpq.md, "Leases"). Never "no longer
 * held" for an expiry: the server may hold the lock until it frees it.
 */
#include "core.h"

#include <string.h>

/* words, at most max bytes of it, cut at a character boundary. */
static void put_at_most(advlock_text *t, const char *words, size_t max)
{
    size_t n = strlen(words);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)words[n] & 0xC0) == 0x80)
            n--;
    }
    advlock_text_putn(t, words, n);
}

void advlock_lease_say_setup_failed(const advlock_lease *l, const char *words, char *out,
                                    size_t size)
{
    advlock_text t;
    advlock_text_init(&t, out, size);
    if (advlock_lease_setup_result(l) == ADVLOCK_LEASE_NOT_APPLIED) {
        advlock_text_put(&t, "lease: the server did not apply tcp_user_timeout=");
        advlock_text_put_int(&t, advlock_lease_plan_of(l)->user_timeout_ms);
        advlock_text_put(&t, " and the keepalive settings, so it could hold the lock for hours "
                             "after losing this client");
        return;
    }
    advlock_text_put(&t, "lease: setting the server session up failed: ");
    put_at_most(&t, words != NULL && words[0] != '\0' ? words : "no answer", 200);
}

int advlock_lease_unbound(const advlock_lease *l, advlock_lease_expiry why)
{
    return why == ADVLOCK_LEASE_SETTINGS || advlock_lease_setup_result(l) == ADVLOCK_LEASE_PROXIED;
}

/* When the server frees the lock, as far as the lease bounds it. */
static void put_frees(advlock_text *t, const advlock_lease *l, advlock_lease_expiry why)
{
    if (advlock_lease_unbound(l, why)) {
        advlock_text_put(t, "behind a proxy the server frees the lock when the proxy drops this "
                            "connection: its own tcp settings bound that");
        return;
    }
    int failed = why == ADVLOCK_LEASE_CONNECTION || why == ADVLOCK_LEASE_SERVER_ERROR;
    advlock_text_put(t, failed ? "the server frees the lock within "
                               : "the server will free the lock within ");
    advlock_text_put_seconds(t, advlock_lease_plan_of(l)->lease_ms);
    advlock_text_put(t, failed ? "s (lease) at the latest" : "s");
}

void advlock_lease_say_expiry(const advlock_lease *l, advlock_lease_expiry why, const char *words,
                              char *out, size_t size)
{
    const advlock_lease_plan *p = advlock_lease_plan_of(l);
    advlock_text t;
    advlock_text_init(&t, out, size);
    switch (why) {
    case ADVLOCK_LEASE_SETTINGS:
        advlock_text_put(&t, "a heartbeat found the server session's lease settings changed (or "
                             "another server session answering), so the server may free the "
                             "lock early or late (lease ");
        advlock_text_put_seconds(&t, p->lease_ms);
        advlock_text_put(&t, "s); stop the work now");
        return;
    case ADVLOCK_LEASE_CONNECTION:
    case ADVLOCK_LEASE_SERVER_ERROR:
        advlock_text_put(&t, "a heartbeat failed (");
        put_at_most(&t, words != NULL && words[0] != '\0' ? words : "no answer", 80);
        advlock_text_put(&t, "): ");
        break;
    default:
        advlock_text_put(&t, "no heartbeat answered within ");
        advlock_text_put_seconds(&t, p->deadline_ms);
        advlock_text_put(&t, "s (lease ");
        advlock_text_put_seconds(&t, p->lease_ms);
        advlock_text_put(&t, "s): ");
        break;
    }
    put_frees(&t, l, why);
    advlock_text_put(&t, "; stop the work now");
}
