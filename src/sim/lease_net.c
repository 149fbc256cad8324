/*
 * The lease world's links: which client is cut off when, and when a TCP
 * segment sent into a cut arrives. A silent partition loses segments; TCP
 * sends them again, the gaps doubling from 0.2 s (as measured on Linux in
 * docs/design.md "Leases"), so a segment arrives at the first
 * retransmission after the link is back: a blip of b delays an answer by
 * up to about 2b.
 */
#include "lease_sim.h"

enum { FIRST_RTO_MS = 200, MAX_RTO_MS = 120000, MAX_TRIES = 64 };

static int covers(const lease_cut *k, int c, int64_t from, int64_t to)
{
    return k->started && k->client == c && k->start_ms <= to && from < k->end_ms;
}

int advlock_lease_net_cut_at(const lease_net *n, int c, int64_t t)
{
    for (int i = 0; i < n->ncuts; i++)
        if (covers(&n->cuts[i], c, t, t))
            return 1;
    return 0;
}

int advlock_lease_net_paused_at(const lease_net *n, int c, int64_t t, int64_t *until)
{
    for (int i = 0; i < n->ncuts; i++)
        if (n->cuts[i].kind == ADVLOCK_SIM_CUT_PAUSE && covers(&n->cuts[i], c, t, t)) {
            *until = n->cuts[i].end_ms;
            return 1;
        }
    return 0;
}

int64_t advlock_lease_net_up_from(const lease_net *n, int c, int64_t t)
{
    /* Cuts may overlap or follow each other: step to each one's end. */
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < n->ncuts; i++)
            if (covers(&n->cuts[i], c, t, t)) {
                t = n->cuts[i].end_ms;
                moved = 1;
            }
    }
    return t;
}

static int cut_between(const lease_net *n, int c, int64_t from, int64_t to)
{
    for (int i = 0; i < n->ncuts; i++)
        if (covers(&n->cuts[i], c, from, to))
            return 1;
    return 0;
}

int64_t advlock_lease_net_delivery(const lease_net *n, int c, int64_t sent_ms, int64_t latency_ms)
{
    int64_t at = sent_ms, rto = FIRST_RTO_MS;
    for (int i = 0; i < MAX_TRIES; i++) {
        if (!cut_between(n, c, at, at + latency_ms))
            return at + latency_ms;
        at += rto;
        rto = rto * 2 > MAX_RTO_MS ? MAX_RTO_MS : rto * 2;
    }
    return at + latency_ms;
}
