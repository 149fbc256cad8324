/* Declarations shared by the lease world's files (lease_net.c,
 * lease_world.c); none of this is exported. */
#ifndef ADVLOCK_LEASE_SIM_H
#define ADVLOCK_LEASE_SIM_H

#include "advlock_fake.h"

/* A cut as the run resolved it: its client is known once it began. */
typedef struct lease_cut {
    advlock_sim_cut_kind kind;
    int64_t start_ms, end_ms;
    int client;  /* -1 until it began, if the config left it open */
    int started; /* deliveries take it into account from its start on */
} lease_cut;

typedef struct lease_net {
    lease_cut cuts[ADVLOCK_SIM_LEASE_MAX_CUTS];
    int ncuts;
} lease_net;

/* Is client c's link cut (by a started cut) at t? */
int advlock_lease_net_cut_at(const lease_net *n, int c, int64_t t);
/* Is client c paused at t? Then its own events wait until *until. */
int advlock_lease_net_paused_at(const lease_net *n, int c, int64_t t, int64_t *until);
/* The first time from t on when client c's link is up. */
int64_t advlock_lease_net_up_from(const lease_net *n, int c, int64_t t);
/* When a segment sent at sent_ms over c's link, one way latency_ms, is
 * received: at once, or at TCP's first retransmission (200 ms after the
 * send, doubling, at most 120 s apart) that finds the link up. */
int64_t advlock_lease_net_delivery(const lease_net *n, int c, int64_t sent_ms, int64_t latency_ms);

#endif
