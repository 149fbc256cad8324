/*
 * The pump every simulated world drives its connection engines with, as a
 * real driver pumps advlock_conn: the statements the engine offers go to
 * the world (which puts them on its wire), and then the engine's events
 * (which tell the world's callers how their operations ended). A sync only
 * ends a batch, which the fake database does not need.
 */
#include "pump.h"

int advlock_sim_pump_events(advlock_conn *c, const advlock_sim_pump_ops *ops, void *user)
{
    advlock_conn_event ev;
    int rc = 0;
    while (rc == 0 && advlock_conn_poll_event(c, &ev))
        rc = ops->event(user, &ev);
    return rc;
}

int advlock_sim_pump(advlock_conn *c, int64_t now_ms, const advlock_sim_pump_ops *ops, void *user)
{
    advlock_statement st;
    int rc = 0;
    while (rc == 0 && advlock_conn_poll_statement(c, &st, now_ms))
        if (st.kind != ADVLOCK_STATEMENT_SYNC)
            rc = ops->send(user, &st);
    if (rc != 0)
        return rc;
    if (ops->sent != NULL)
        ops->sent(user);
    return advlock_sim_pump_events(c, ops, user);
}
