/* The pump (pump.c): what the libpq adapters, the lock set and the single
 * lock, ask of the one file that moves the connection engine's statements
 * and answers through libpq. Not exported. */
#ifndef ADVLOCK_PQ_PUMP_H
#define ADVLOCK_PQ_PUMP_H

#include "pq.h"

/* Binds p to conn and starts its engine afresh with slots (nslots of
 * them; grows: the pump may move them to larger heap memory, which the
 * caller frees from p->slots_) and buckets; caps as for
 * advlock_conn_init(). Returns advlock_conn_init()'s result. */
int advlock_pq_pump_bind(advlock_pq_pump_ *p, PGconn *conn, advlock_conn_slot *slots, size_t nslots,
                         int grows, advlock_peer **buckets, size_t nbuckets, unsigned caps);

/* Diverts p's notices (into its sink, to its events' callback) for every
 * turn until advlock_pq_pump_release_notices(g), rather than once per
 * turn: for a blocking call, between whose turns nothing of the caller's
 * runs. g stays in place until then; holds end in the reverse order. */
void advlock_pq_pump_hold_notices(advlock_pq_pump_ *p, advlock_pq_notice_guard *g, int64_t now_ms);

/* Puts back the hooks the hold of g found (if it diverted them). */
void advlock_pq_pump_release_notices(advlock_pq_notice_guard *g);

/* One turn of the pump: reads what arrived, sends what the engine asks
 * for, reports time and a broken connection to the engine. */
void advlock_pq_pump_turn(advlock_pq_pump_ *s, unsigned ready, int64_t now_ms);

/* A connection reset since the last call (a new backend pid) is told to
 * the engine, which starts afresh on the new session; the pump's libpq
 * state starts afresh too. */
void advlock_pq_pump_notice_reset(advlock_pq_pump_ *s, int64_t now_ms);

/* m's operation ended: its report takes the engine's. */
void advlock_pq_pump_take_done(advlock_pq_member *m);

/* Moves the engine's events into the members' reports. */
void advlock_pq_pump_take_events(advlock_pq_pump_ *s);

/* The server did not answer within a blocking call's bound: the engine
 * gives the connection up (members under way FAILED ADVLOCK_ENOANSWER,
 * held ones LOST) and the pump is unbound; the caller closes it. */
void advlock_pq_pump_give_up(advlock_pq_pump_ *s, int64_t now_ms);

/* The loop's side of a bound pump: the readiness it wants (0: none), its
 * next deadline (0: none, else 1 with *at_ms). */
unsigned advlock_pq_pump_wants(const advlock_pq_pump_ *p);
int advlock_pq_pump_deadline(const advlock_pq_pump_ *p, int64_t *at_ms);

/* One advlock_pq_wait_turn() for the pump from *now (the clock's reading
 * just before), processing what it saw; sets *now to the reading after
 * the wait (the one its turn ran at); returns whether extra_fd became
 * readable. A reset is the caller's to tell first
 * (advlock_pq_pump_notice_reset()), where the caller may have made one: a
 * blocking call's loop, which runs nothing of the caller's, tells it once. */
int advlock_pq_pump_wait(advlock_pq_pump_ *p, int extra_fd, int max_wait_ms, int64_t *now);

#endif
