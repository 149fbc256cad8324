/* The one pump the simulator's worlds run their connection engines with
 * (the single-lock driver, the lease and lock-set worlds); none of this is
 * exported. */
#ifndef ADVLOCK_SIM_PUMP_H
#define ADVLOCK_SIM_PUMP_H

#include "advlock_fake.h"

/* What a world does with what its engine says; each returns 0 to go on. */
typedef struct advlock_sim_pump_ops {
    /* A statement offered: a QUERY, or a CANCEL request (a sync never comes
     * here: the fake runs each statement on its own). */
    int (*send)(void *user, const advlock_statement *st);
    /* After the last statement offered, before the events (NULL: none). */
    void (*sent)(void *user);
    /* An event of the engine's: a member's DONE or LOST, or a warning. */
    int (*event)(void *user, const advlock_conn_event *ev);
} advlock_sim_pump_ops;

/* Sends what c offers at now_ms, then hands on its events. Returns 0, or
 * the first nonzero value a callback returned (the pump stops there). */
int advlock_sim_pump(advlock_conn *c, int64_t now_ms, const advlock_sim_pump_ops *ops, void *user);

/* Hands on c's events alone (the connection closed: nothing to send). */
int advlock_sim_pump_events(advlock_conn *c, const advlock_sim_pump_ops *ops, void *user);

#endif
