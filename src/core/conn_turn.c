/*
 * A pump's turn in one call (advlock_conn_turn()): the answer in, the timer
 * when due, the next statement out. Above the engine's API, which it only
 * calls in the order a pump would.
 */
#include "conn.h"

int advlock_conn_turn(advlock_conn *c, const advlock_answer *a, advlock_statement *st,
                      int64_t now_ms, int64_t *wake)
{
    if (c == NULL || st == NULL || (a != NULL && advlock_conn_on_answer(c, a, now_ms) != 0))
        return ADVLOCK_TURN_REFUSED;
    if (advlock_conn_next_wake(c) <= now_ms)
        advlock_conn_on_timer(c, now_ms);
    int found = advlock_conn_poll_statement(c, st, now_ms) ? ADVLOCK_TURN_STATEMENT : 0;
    /* The events' queue, as advlock_conn_poll_event() reads it. */
    if (c->news_ != NULL || c->warned_)
        found |= ADVLOCK_TURN_EVENTS;
    if (wake != NULL)
        *wake = advlock_conn_next_wake(c);
    return found;
}
