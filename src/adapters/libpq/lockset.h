/* What lockset.c (the API) asks of pipeline.c (the pump that moves the
 * engine's statements and answers through libpq). Not exported. */
#ifndef ADVLOCK_PQ_LOCKSET_INTERNAL_H
#define ADVLOCK_PQ_LOCKSET_INTERNAL_H

#include "pq.h"

/* One turn of the pump: reads what arrived, sends what the engine asks
 * for, reports time and a broken connection to the engine. */
void advlock_pq_ls_pump(advlock_pq_lockset *s, unsigned ready, int64_t now_ms);

/* A connection reset since the last call (a new backend pid) is told to
 * the engine, which starts afresh on the new session; the pump's libpq
 * state starts afresh too. */
void advlock_pq_ls_notice_reset(advlock_pq_lockset *s, int64_t now_ms);

/* m's operation ended: its report takes the engine's. */
void advlock_pq_ls_take_done(advlock_pq_member *m);

/* Moves the engine's events into the members' reports. */
void advlock_pq_ls_take_events(advlock_pq_lockset *s);

/* The server did not answer within a blocking call's bound: the engine
 * gives the connection up (members under way FAILED ADVLOCK_ENOANSWER,
 * held ones LOST) and the set is unbound; the caller closes it. */
void advlock_pq_ls_give_up(advlock_pq_lockset *s, int64_t now_ms);

#endif
