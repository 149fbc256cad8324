/* What the lock set's two files share (lockset.c: the members; pipeline.c:
 * the connection). Not exported. */
#ifndef ADVLOCK_PQ_LOCKSET_INTERNAL_H
#define ADVLOCK_PQ_LOCKSET_INTERNAL_H

#include "pq.h"

/* A member's phase (advlock_pq_member.phase_); lockset.c says what each means. */
enum { LS_IDLE = 0, LS_PENDING, LS_QUEUED, LS_SENT, LS_SLEEPING, LS_HELD, LS_DONE, LS_LOST };

/* The set's member lists (advlock_pq_lockset.lists_). */
enum { LS_NO_LIST = 0, LS_PENDING_LIST, LS_QUEUE_LIST, LS_SLEEP_LIST, LS_HELD_LIST };

/* ---- lockset.c ---- */

/* Puts m in phase, and in the list that phase lives in. */
void advlock_pq_ls_move(advlock_pq_lockset *s, advlock_pq_member *m, int phase);

/* 1 if sql is a try-lock (plain, shared, guarded, fenced), with its mode. */
int advlock_pq_ls_try_mode(int sql, advlock_mode *mode);

/* Before m's statement act goes out: 1 to send it; 0 when another member
 * holds or asks for its key in a conflicting mode, in which case m has been
 * answered "busy" locally and has moved on. */
int advlock_pq_ls_may_send(advlock_pq_lockset *s, advlock_pq_member *m, const advlock_action *act,
                           int64_t now_ms);

/* Takes up m's machine's next action. */
void advlock_pq_ls_follow(advlock_pq_lockset *s, advlock_pq_member *m, int64_t now_ms);

/* m's statement has its final answer in q: feeds it, keeps the exclusion
 * table and the shared session up to date, moves m on. */
void advlock_pq_ls_answered(advlock_pq_lockset *s, advlock_pq_member *m, advlock_pq_query_ *q,
                            int64_t now_ms);

/* The session row in flight has answered (or was given up): the members
 * waiting for it start. */
void advlock_pq_ls_session_answered(advlock_pq_lockset *s, int64_t now_ms);

/* Every held lock is lost at once, with these words. */
void advlock_pq_ls_lose_held(advlock_pq_lockset *s, const char *sqlstate, const char *words,
                             int64_t now_ms);

/* Moves the notices the set collected into a member's report. */
void advlock_pq_ls_take_notices(advlock_pq_lockset *s, advlock_pq_report *to);

/* Sleepers whose time has come take up their next action. */
void advlock_pq_ls_wake_sleepers(advlock_pq_lockset *s, int64_t now_ms);

/* ---- pipeline.c ---- */

/* m's statement in the pipeline is left to the set: its answer is read and
 * dropped, a grant given back with an unlock. */
void advlock_pq_ls_detach(advlock_pq_lockset *s, advlock_pq_member *m);

/* How many members have a statement in the pipeline. */
size_t advlock_pq_ls_members_in_flight(const advlock_pq_lockset *s);

/* A connection reset since the last call (a new backend pid): the old
 * session's locks are lost, its statements fail, the set starts afresh on
 * the new one. */
void advlock_pq_ls_notice_reset(advlock_pq_lockset *s, int64_t now_ms);

#endif
