/* What the lock set's two files share (lockset.c: the members; pipeline.c:
 * the connection). Not exported. */
#ifndef ADVLOCK_PQ_LOCKSET_INTERNAL_H
#define ADVLOCK_PQ_LOCKSET_INTERNAL_H

#include "pq.h"

/* A member's phase (advlock_pq_member.phase_); lockset.c says what each means. */
enum { LS_IDLE = 0, LS_PENDING, LS_QUEUED, LS_SENT, LS_SLEEPING, LS_HELD, LS_DONE, LS_LOST };

/* The set's member lists (advlock_pq_lockset.lists_). */
enum { LS_NO_LIST = 0, LS_PENDING_LIST, LS_QUEUE_LIST, LS_SLEEP_LIST, LS_HELD_LIST };

/* What a pipeline entry is (advlock_pq_entry_.kind_). */
enum {
    LS_MEMBER,    /* a member's statement: its answer goes to the member */
    LS_DETACHED,  /* a cancelled member's: read and dropped, a grant given back */
    LS_PREPARE,   /* the set's PREPARE of a statement */
    LS_GIVE_BACK, /* the set's unlock of a detached member's grant */
    LS_LEASE,     /* the lease's setup or heartbeat */
    LS_CAPACITY,  /* the set's read of the lock table's settings */
    LS_SYNC       /* the end of a batch */
};

/* The set's place in the exclusion table for a cancelled member's try
 * (advlock_pq_entry_.kept_); once the try is granted, the give-back it
 * owes, in the set's owed list (advlock_pq_lockset.owed_) while its unlock
 * could not be sent. */
typedef struct advlock_pq_kept_ {
    advlock_peer peer;
    struct advlock_pq_kept_ *next;
    int64_t key;
    uint8_t unlock_sql;
} advlock_pq_kept_;

/* Where the lock table's settings are (advlock_pq_lockset.capacity_read_). */
enum { LS_CAPACITY_UNREAD = 0, LS_CAPACITY_ASKED, LS_CAPACITY_READ };

/* The lease's statement in flight (advlock_pq_lockset.lease_query_). */
enum { LS_LEASE_NONE = 0, LS_LEASE_SETUP, LS_LEASE_HEARTBEAT };

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

/* m's statement, sent at sent_ms, has its final answer in q: feeds it, keeps the exclusion
 * table and the shared session up to date, moves m on. */
void advlock_pq_ls_answered(advlock_pq_lockset *s, advlock_pq_member *m, advlock_pq_query_ *q,
                            int64_t sent_ms, int64_t now_ms);

/* The session row in flight has answered (or was given up): the members
 * waiting for it start. */
void advlock_pq_ls_session_answered(advlock_pq_lockset *s, int64_t now_ms);

/* Every held lock is lost at once, with these words (expiry: the lease's
 * reason, or ADVLOCK_LEASE_LIVE for a lost connection). */
void advlock_pq_ls_lose_held(advlock_pq_lockset *s, const char *sqlstate, const char *words,
                             advlock_lease_expiry expiry, int64_t now_ms);

/* Moves the notices the set collected into a member's report. */
void advlock_pq_ls_take_notices(advlock_pq_lockset *s, advlock_pq_report *to);

/* Ends m's operation here, without its machine (which may be waiting for
 * an answer that now goes to the set, or was never started): outcome and
 * failure, the machine's facts so far, the peer out of the table. */
void advlock_pq_ls_end(advlock_pq_lockset *s, advlock_pq_member *m, advlock_outcome outcome,
                       int failure, int64_t now_ms);

/* Sleepers whose time has come take up their next action. */
void advlock_pq_ls_wake_sleepers(advlock_pq_lockset *s, int64_t now_ms);

/* ---- pipeline.c ---- */

/* m's statement in the pipeline is left to the set: its answer is read and
 * dropped, a grant given back with an unlock. A try's place in the
 * exclusion table moves to the set's memory and stays until that answer (a
 * grant's: until the give-back's). 0, or ADVLOCK_ENOMEM (nothing changed). */
int advlock_pq_ls_detach(advlock_pq_lockset *s, advlock_pq_member *m);

/* The server did not answer within a blocking call's bound: every member
 * under way ends FAILED with ADVLOCK_ENOANSWER, every held one is LOST,
 * and the set is unbound; the caller closes the connection. */
void advlock_pq_ls_give_up(advlock_pq_lockset *s, int64_t now_ms);

/* How many members have a statement in the pipeline. */
size_t advlock_pq_ls_members_in_flight(const advlock_pq_lockset *s);

/* A connection reset since the last call (a new backend pid): the old
 * session's locks are lost, its statements fail, the set starts afresh on
 * the new one. */
void advlock_pq_ls_notice_reset(advlock_pq_lockset *s, int64_t now_ms);

/* Appends entry e and sends its statement (act's parameters), stamped
 * now_ms; 0 if libpq refused it or memory ran out: nothing sent. */
int advlock_pq_ls_send_entry(advlock_pq_lockset *s, advlock_pq_entry_ *e, const advlock_action *act,
                             int64_t now_ms);

/* Ends the batch sent since the last sync with a sync, and flushes. */
void advlock_pq_ls_end_batch(advlock_pq_lockset *s);

/* ---- lockset_lease.c ---- */

/* 1 when the lease is still to be set up before the try-lock act. */
int advlock_pq_ls_lease_needs_setup(const advlock_pq_lockset *s, const advlock_action *act);

/* Sends the lease's setup, alone in its batch (a setting an aborted batch
 * would roll back); behind a proxy it ends at once, sending nothing. */
void advlock_pq_ls_lease_setup(advlock_pq_lockset *s, int64_t now_ms);

/* The lease's statement answered (q: its final answer). */
void advlock_pq_ls_lease_answered(advlock_pq_lockset *s, advlock_pq_query_ *q, int64_t now_ms);

/* A member's try sent at sent_ms was granted: the first hold starts the
 * lease's heartbeats, counted from that send. */
void advlock_pq_ls_lease_granted(advlock_pq_lockset *s, int64_t sent_ms, int64_t now_ms);

/* Time for the lease: a heartbeat due, the stop deadline passed, or no
 * lock held any more (the heartbeats stop). */
void advlock_pq_ls_lease_tend(advlock_pq_lockset *s, int64_t now_ms);

/* The lease's next wake-up, or INT64_MAX. */
int64_t advlock_pq_ls_lease_wake(const advlock_pq_lockset *s);

/* A fresh lease for a new server session (after a reset). */
void advlock_pq_ls_lease_restart(advlock_pq_lockset *s);

#endif
