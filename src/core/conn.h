/* What the connection engine's files share; none of it is exported. The
 * files are layered, each calling only those above it in this header:
 * conn_members.c (members and their lists), conn_lease.c (the lease),
 * conn_delay.c (lock-delay's mark), conn_queue.c (the statements in
 * flight), conn.c (the API, and a pump's turn in one call). */
#ifndef ADVLOCK_CONN_INTERNAL_H
#define ADVLOCK_CONN_INTERNAL_H

#include "core.h"

/* A member's phase (advlock_member.phase_):
 *   PENDING   waiting for the session check another member's row makes
 *   QUEUED    its machine's statement waits to be polled (the queue)
 *   SENT      its statement is in flight (no list: a slot has it)
 *   SLEEPING  between tries (the sleepers)
 *   HELD      its acquire ended ACQUIRED (the holders)
 *   DONE, LOST, IDLE: nothing under way (no list). */
enum {
    CONN_IDLE = 0,
    CONN_PENDING,
    CONN_QUEUED,
    CONN_SENT,
    CONN_SLEEPING,
    CONN_HELD,
    CONN_DONE,
    CONN_LOST
};

/* The engine's member lists (advlock_conn.lists_). */
enum { CONN_NO_LIST = 0, CONN_PENDING_LIST, CONN_QUEUE_LIST, CONN_SLEEP_LIST, CONN_HELD_LIST };

/* What a slot in flight is (advlock_conn_slot.kind_). */
enum {
    SLOT_MEMBER,    /* a member's statement: its answer goes to the member */
    SLOT_DETACHED,  /* a cancelled member's: read and dropped, a grant given back */
    SLOT_PREPARE,   /* the engine's PREPARE of a statement */
    SLOT_GIVE_BACK, /* the engine's unlock of a detached member's grant */
    SLOT_LEASE,     /* the lease's setup or heartbeat */
    SLOT_CAPACITY   /* the lock table's settings */
};

/* Where the lock table's settings are (advlock_conn.capacity_read_). */
enum { CAPACITY_UNREAD = 0, CAPACITY_ASKED, CAPACITY_READ };

/* The lease's statement in flight (advlock_conn.lease_query_). */
enum { LEASE_NONE = 0, LEASE_SETUP, LEASE_HEARTBEAT, LEASE_CONFIRM };

/* Lock-delay's steps (advlock_member.delay_), docs/design.md,
 * "Lock-delay". From TAKE to UNDO the member is an acquire under way whose
 * grant the session holds (counted in advlock_conn.delaying_). */
enum {
    DELAY_OFF = 0, /* no mark of this member's: off, or not granted yet */
    DELAY_TAKE,    /* granted: the mark's read (and write) to send or in flight */
    DELAY_WAIT,    /* another holder's mark: sleeping till delay_at_ms_ */
    DELAY_WRITE,   /* waited out: our mark's write to send or in flight */
    DELAY_UNMARK,  /* giving the grant back: our mark, written, to clear first */
    DELAY_UNDO,    /* giving the grant back: the unlock to send or in flight */
    DELAY_MARKED,  /* held, our mark durable */
    DELAY_CLEAR,   /* releasing: the clear to send, alone, before the unlock */
    DELAY_CLEARED  /* releasing: the clear sent, the machine's unlock next */
};

/* How an acquire whose grant lock-delay gives back ends (delay_end_). */
enum { DELAY_END_NONE = 0, DELAY_END_TIMED_OUT, DELAY_END_CANCELLED, DELAY_END_FAILED };

/* A mark statement in flight past the acquire's timeout (delay_late_):
 * its cancel request due, or asked and due again at delay_at_ms_. */
enum { DELAY_ON_TIME = 0, DELAY_LATE_CANCEL, DELAY_LATE_ASKED };

/* A mark statement in flight is bounded by the acquire's deadline, but is
 * given at least this long from its send: one not blocked answers within a
 * round trip, and an acquire that tries once (timeout 0) still gets its
 * mark written. A cancel request the server did not act on goes again
 * after CANCEL_AGAIN (the machine's pace for a server-side wait's). */
enum { ADVLOCK_CONN_MARK_GRACE_MS = 1000, ADVLOCK_CONN_CANCEL_AGAIN_MS = 250 };

/* The member's news_ bits. */
enum { NEWS_DONE = 1, NEWS_LOST = 2 };

/* 1 unless nothing sleeps, no wait may need its cancel and no lease
 * runs (or ran out): then no timer is armed, nothing wakes
 * (advlock_conn_next_wake() is INT64_MAX). Inline: a pump's every turn
 * asks. */
static inline int advlock_conn_timer_armed(const advlock_conn *c)
{
    return c->lists_[CONN_SLEEP_LIST] != NULL || c->waits_ || c->lease_on_ || c->lease_expired_;
}

/* ---- conn_members.c ---- */

/* Puts m in phase, and in the list that phase lives in (at its end). */
void advlock_conn_move(advlock_conn *c, advlock_member *m, int phase);

/* 1 if sql asks for a lock: a try-lock (plain, shared, guarded, fenced) or
 * a server-side wait; with its mode. */
int advlock_conn_try_mode(int sql, advlock_mode *mode);

/* 1 if sql is an unlock (plain, shared, guarded). */
int advlock_conn_is_unlock(int sql);

/* Copies text's first line into m's words (NULL: ""). */
void advlock_conn_say(advlock_member *m, const char *text);

/* Drops m's events not yet polled (advlock_conn_poll_event()); a warning
 * of m's not yet polled is the connection's from then on. */
void advlock_conn_untell(advlock_conn *c, advlock_member *m);

/* Takes up m's machine's next action. */
void advlock_conn_follow(advlock_conn *c, advlock_member *m, int64_t now_ms);

/* Takes up next, which m's machine's advlock_next_action() returned and
 * nothing has moved since: advlock_conn_follow() without asking again. */
void advlock_conn_take_up(advlock_conn *c, advlock_member *m, const advlock_action *next);

/* Starts m's machine on the connection's session, or parks m until the
 * session check in flight has answered. */
void advlock_conn_start_machine(advlock_conn *c, advlock_member *m, int64_t now_ms);

/* The session row in flight answered (or was given up): the members
 * waiting for it start. */
void advlock_conn_session_answered(advlock_conn *c, int64_t now_ms);

/* 1 when a member queued is to send the session check. */
int advlock_conn_session_queued(const advlock_conn *c);

/* Ends m's operation without its machine: outcome, failure, the machine's
 * facts so far, the peer out of the table. */
void advlock_conn_end(advlock_conn *c, advlock_member *m, advlock_outcome outcome, int failure,
                      int64_t now_ms);

/* Ends every member waiting (pending, queued, sleeping) this way. */
void advlock_conn_end_waiting(advlock_conn *c, advlock_outcome outcome, int failure,
                              int64_t now_ms);

/* Every held member turns LOST at once, with these words. */
void advlock_conn_lose_held(advlock_conn *c, const char *sqlstate, const char *words,
                            advlock_lease_expiry expiry, int64_t now_ms);

/* Feeds m's machine a failure result with words for its statement, never
 * sent, and follows it; a try let through leaves the table, and the unlock
 * a fenced try's machine would undo it with is answered here. */
void advlock_conn_fail(advlock_conn *c, advlock_member *m, advlock_result r, const char *sqlstate,
                       const char *words, int64_t now_ms);

/* Before m's try act goes out: 1 to send it; 0 when the share of the lock
 * table is full or another member holds or asks for its key in a
 * conflicting mode: m was answered locally and has moved on. */
int advlock_conn_may_send(advlock_conn *c, advlock_member *m, const advlock_action *act,
                          int64_t now_ms);

/* Records a warning of m's (NULL: the connection's) for the next event;
 * m's event callback hears it at once. */
void advlock_conn_warn(advlock_conn *c, advlock_member *m, const char *sqlstate, const char *words,
                       int64_t now_ms);

/* ---- conn_lease.c ---- */

/* 1 when the lease is still to be set up before the statement sql. */
int advlock_conn_lease_needs_setup(const advlock_conn *c, int sql);

/* The lease statement to send now, if any (want_setup: the setup, else a
 * due heartbeat), counted as sent: 1 with *act filled. */
int advlock_conn_lease_due(advlock_conn *c, int want_setup, advlock_action *act, int64_t now_ms);

/* 1 when a heartbeat is due and none is in flight. */
int advlock_conn_lease_beat_due(const advlock_conn *c);

/* The lease's statement, sent at sent_ms, answered. */
void advlock_conn_lease_answered(advlock_conn *c, const advlock_answer *a, int64_t sent_ms,
                                 int64_t now_ms);

/* m's statement sent at sent_ms ended its acquire ACQUIRED: 1 when the
 * grant, a server-side wait's, must wait for a heartbeat (it came more
 * than a heartbeat's
 * interval after the send: the server may have stopped hearing this client
 * meanwhile, so the lease cannot count from that send, nor from the
 * grant's arrival); m waits in c->confirming_. */
int advlock_conn_lease_confirms(advlock_conn *c, advlock_member *m, int64_t sent_ms,
                                int64_t now_ms);

/* The heartbeat confirming a grant, if one is due: 1 with *act filled,
 * counted as sent. */
int advlock_conn_lease_confirm_due(advlock_conn *c, advlock_action *act, int64_t now_ms);

/* A member's try sent at sent_ms was granted: the first hold anchors the
 * lease's heartbeats at that send. */
void advlock_conn_lease_granted(advlock_conn *c, int64_t sent_ms, int64_t now_ms);

/* Time for the lease: the stop deadline passed, or nothing held any more. */
void advlock_conn_lease_tend(advlock_conn *c, int64_t now_ms);

/* Why the lease ran out, and its words (the heartbeat's words, if any,
 * within them) into message. */
advlock_lease_expiry advlock_conn_lease_loss(const advlock_conn *c, const char *words,
                                             char *message, size_t size);

/* The lease's next wake-up, or INT64_MAX. */
int64_t advlock_conn_lease_wake(const advlock_conn *c);

/* A statement went out at now_ms: after the lease ran out, the server's
 * freeing of the locks counts from it. */
void advlock_conn_lease_sent(advlock_conn *c, int64_t now_ms);

/* A fresh lease under the same plan (a new server session). */
void advlock_conn_lease_restart(advlock_conn *c);

/* m's acquire of transaction scope has no transaction block to take its
 * lock in: it ends FAILED at once, as the server answers a statement that
 * needs a block outside one (ADVLOCK_ESERVER, 25P01), at the last time m's
 * machine saw (the pump may give no time). Nothing of m's is in flight
 * (detached first). */
void advlock_conn_end_outside_block(advlock_conn *c, advlock_member *m);

/* 1 when sql is a try or a wait of transaction scope. */
int advlock_conn_is_xact_lock(int sql);

/* m's grant, which lock-delay held back and never reported, went with the
 * lease that ran out (words: the heartbeat's, if any): m's acquire ends
 * FAILED (ADVLOCK_ECONNLOST) in the lease's words, nothing given back, as
 * the held locks are lost. Nothing of m's is in flight. */
void advlock_conn_lease_end_marking(advlock_conn *c, advlock_member *m, const char *words,
                                    int64_t now_ms);

/* ---- conn_delay.c ---- */

/* The statement m's lock-delay step sends instead of its machine's next
 * one, into *act: 1, or 0 (none: the machine's). */
int advlock_conn_delay_action(const advlock_conn *c, const advlock_member *m, advlock_action *act);

/* 1 when the statement sql goes in a batch of its own (a mark's write
 * commits at the batch's end, and must not roll back with another's
 * failure, nor commit after the unlock that follows a clear). */
int advlock_conn_delay_alone(int sql);

/* m's lock-delay statement sql was sent: 1 when m stays queued (a clear,
 * whose release's unlock goes next, after the sync). */
int advlock_conn_delay_sent(advlock_member *m, int sql);

/* 1 when lock-delay holds m's grant back (the session holds it). */
int advlock_conn_delay_holding(const advlock_member *m);

/* 1 when the answer to m's statement sql is lock-delay's to take. */
int advlock_conn_delay_owns(const advlock_member *m, int sql);

/* The answer a to m's lock-delay statement sql (again: aborted or to be
 * sent again). */
void advlock_conn_delay_answered(advlock_conn *c, advlock_member *m, int sql,
                                 const advlock_answer *a, int again, int64_t now_ms);

/* m sleeps out another holder's lease: its time came (the wait's end, or
 * the acquire's timeout first). */
void advlock_conn_delay_tend(advlock_conn *c, advlock_member *m, int64_t now_ms);

/* When m's lock-delay sleep ends. */
int64_t advlock_conn_delay_wake(const advlock_member *m);

/* The caller cancels m's acquire, whose grant lock-delay holds back: the
 * grant is given back first, m's DONE (CANCELLED) comes then. */
void advlock_conn_delay_cancel(advlock_conn *c, advlock_member *m, int64_t now_ms);

/* m's lock-delay statement is about to go while the connection is inside
 * the caller's transaction block: 1 when it was not sent, the grant given
 * back instead and the acquire to end FAILED (25001). */
int advlock_conn_delay_refused(advlock_conn *c, advlock_member *m);

/* The caller's transaction block began: every grant lock-delay holds back
 * and has no statement in flight is given back, its acquire to end FAILED
 * (25001); one in flight is at its answer. */
void advlock_conn_delay_block_began(advlock_conn *c);

/* When m's mark statement, sent at sent_ms, is late. */
int64_t advlock_conn_delay_mark_deadline(const advlock_member *m, int64_t sent_ms);

/* m's mark statement, sent at sent_ms, is still in flight at now_ms: past
 * its deadline the acquire is to end TIMED_OUT, and a cancel request is
 * due (again, once CANCEL_AGAIN has passed since the last). */
void advlock_conn_delay_overdue(advlock_member *m, int64_t sent_ms, int64_t now_ms);

/* The cancel request for m's late mark statement was polled at now_ms. */
void advlock_conn_delay_cancel_sent(advlock_member *m, int64_t now_ms);

/* The server warned about m's statement in flight (head: its sql) with
 * words, of SQLSTATE sqlstate: a mark whose commit stopped waiting for the
 * synchronous standby is not durable, and the acquire gives its grant
 * back. */
void advlock_conn_delay_notice(advlock_member *m, int sql, const char *sqlstate, const char *words);

/* ---- conn_queue.c ---- */

/* m's statements in flight are left to the engine: their answers are read
 * and dropped, a grant given back; a try's key stays taken meanwhile. */
void advlock_conn_detach(advlock_conn *c, advlock_member *m);

/* Every statement in flight is answered lost (words), owed give-backs are
 * forgotten: the session they belonged to is gone. */
void advlock_conn_drain(advlock_conn *c, const char *words, int64_t now_ms);

/* The first member with a statement in flight, of scope (an advlock_scope,
 * or -1: any), or NULL. */
advlock_member *advlock_conn_first_in_flight(const advlock_conn *c, int scope);

/* The first member whose verify of the lock it holds is in flight, or NULL. */
advlock_member *advlock_conn_verify_in_flight(const advlock_conn *c);

/* How many members have a statement in flight. */
size_t advlock_conn_in_flight(const advlock_conn *c);

/* The lock-delay marks in flight at now_ms: each late one is to end its
 * acquire TIMED_OUT, its cancel request due (advlock_conn_delay_overdue()). */
void advlock_conn_marks_tend(advlock_conn *c, int64_t now_ms);

/* When a mark in flight turns late, or its cancel request is due again;
 * INT64_MAX if none. */
int64_t advlock_conn_marks_wake(const advlock_conn *c);

/* The member whose statement a cancel request would stop: the waiter, or
 * one whose late mark statement is alone in flight; else NULL. */
advlock_member *advlock_conn_cancel_target(const advlock_conn *c);

/* The member whose acquire may wait on the server, when its statement is
 * the one the server runs now (the head); else NULL. Its machine's timer
 * is the wait's deadline, and only then may a cancel request reach it. */
advlock_member *advlock_conn_waiter(const advlock_conn *c);

#endif
