/*
 * Lock-delay (docs/design.md, "Lock-delay"): a grant is not reported
 * ACQUIRED until this holder's mark is durable in advlock.mark, and, where
 * a holder that never released left its mark, until that holder's stop
 * bound has passed since the grant. conn_members.c holds the grant back
 * (held_back()); this file sends the mark's statements for the member, in
 * place of its machine's, takes their answers, sleeps out the wait and
 * gives the grant back when the acquire ends otherwise. A release clears
 * the member's own mark, alone in its batch, before the machine's unlock
 * goes in the next: the clear commits before anyone can be granted the
 * lock, and no round trip is added.
 */
#include "conn.h"

#include <string.h>

/* PostgreSQL's words when a commit stops waiting for its synchronous
 * standby (a cancel): committed locally, maybe not on the standby a
 * failover would promote. A server speaking another language
 * (lc_messages) says them otherwise, but with a warning's SQLSTATE, class
 * 01, which a mark's plain statement has no other cause to send: either
 * is read as the mark not being durable. */
static const char sync_cancelled[] = "canceling wait for synchronous replication";

int advlock_conn_delay_action(const advlock_conn *c, const advlock_member *m, advlock_action *act)
{
    int sql;
    switch (m->delay_) {
    case DELAY_TAKE: sql = ADVLOCK_SQL_MARK_TAKE; break;
    case DELAY_WRITE: sql = ADVLOCK_SQL_MARK_WRITE; break;
    case DELAY_CLEAR:
    case DELAY_UNMARK: sql = ADVLOCK_SQL_MARK_CLEAR; break;
    case DELAY_UNDO: sql = advlock_sql_for_unlock(ADVLOCK_EXCLUSIVE, c->session_.proxied); break;
    default: return 0;
    }
    memset(act, 0, sizeof *act);
    act->kind = ADVLOCK_ACTION_QUERY;
    act->sql = (advlock_sql)sql;
    act->param = m->key_;
    act->param2 = (int64_t)c->session_.token;
    /* This holder's stop bound U = D + K + M: its work is stopped and
     * reaped by a heartbeat's send + U (docs/design.md, "The arithmetic"). */
    if (sql == ADVLOCK_SQL_MARK_CLEAR)
        act->param3 = c->in_block_; /* the caller's block keeps its durability */
    else if (m->delay_ != DELAY_UNDO)
        act->param3 = advlock_lease_plan_of(&c->lease_)->user_timeout_ms;
    return 1;
}

int advlock_conn_delay_alone(int sql)
{
    return sql == ADVLOCK_SQL_MARK_TAKE || sql == ADVLOCK_SQL_MARK_WRITE
           || sql == ADVLOCK_SQL_MARK_CLEAR;
}

int advlock_conn_delay_sent(advlock_member *m, int sql)
{
    if (sql != ADVLOCK_SQL_MARK_CLEAR)
        return 0;
    /* The unlock follows in the next batch, after the clear's sync. */
    m->delay_ = m->delay_ == DELAY_UNMARK ? DELAY_UNDO : DELAY_CLEARED;
    return 1;
}

int advlock_conn_delay_holding(const advlock_member *m)
{
    return m->delay_ >= DELAY_TAKE && m->delay_ <= DELAY_UNDO;
}

int advlock_conn_delay_owns(const advlock_member *m, int sql)
{
    return advlock_conn_delay_alone(sql)
           || (m->delay_ == DELAY_UNDO && advlock_conn_is_unlock(sql));
}

/* 1 while lock-delay may still report m's grant ACQUIRED: granted, its
 * mark not yet durable, its end not yet decided otherwise. */
static int marking(const advlock_member *m)
{
    return m->delay_ >= DELAY_TAKE && m->delay_ <= DELAY_WRITE;
}

/* The grant goes back with an unlock of m's own, then m ends as
 * m->delay_end_ says. Where our mark was written (written) it is cleared
 * first, alone in its batch as a release's clear, so that it commits
 * before the unlock runs. Left behind it would be safe but slow: the next
 * holder would wait out this holder's stop bound, though no work of ours
 * ever began under the grant (it was never reported); cleared, it owes
 * nobody a wait, and the grant still excludes everyone until the unlock. */
static void give_back(advlock_conn *c, advlock_member *m, int written)
{
    m->delay_ = written ? DELAY_UNMARK : DELAY_UNDO;
    m->delay_late_ = DELAY_ON_TIME;
    advlock_conn_move(c, m, CONN_QUEUED);
}

/* The connection is inside the caller's transaction block, where m's mark
 * would commit or roll back with the block: m's acquire ends FAILED, after
 * its grant is given back, as the server refuses a statement that cannot
 * run inside a block (25001). */
static void refuse_in_block(advlock_member *m)
{
    advlock_conn_say(m, "lock-delay: the connection is inside a transaction block, where this "
                        "holder's mark would commit or roll back with the block; the grant was "
                        "given back");
    advlock_text t;
    advlock_text_init(&t, m->sqlstate_, sizeof m->sqlstate_);
    advlock_text_put(&t, "25001");
    m->delay_end_ = DELAY_END_FAILED;
}

/* m's acquire ends FAILED for a mark that could not be written (words: the
 * server's), after its grant is given back. */
static void failed_mark(advlock_member *m, const advlock_answer *a)
{
    char words[ADVLOCK_CONN_WORDS_MAX];
    advlock_text t;
    advlock_text_init(&t, words, sizeof words);
    const char *why = a->message != NULL && a->message[0] != '\0' ? a->message : "no answer";
    advlock_text_put(&t, "lock-delay: writing this holder's mark in advlock.mark failed (");
    advlock_text_putn(&t, why, strnlen(why, 160));
    advlock_text_put(&t, "); the grant was given back");
    /* No table, or no schema: not installed on this database. */
    if (a->sqlstate != NULL
        && (strcmp(a->sqlstate, "42P01") == 0 || strcmp(a->sqlstate, "3F000") == 0))
        advlock_text_put(&t, " (advlock setup creates it)");
    advlock_conn_say(m, words);
    advlock_text_init(&t, m->sqlstate_, sizeof m->sqlstate_);
    if (a->sqlstate != NULL)
        advlock_text_put(&t, a->sqlstate);
    m->delay_end_ = DELAY_END_FAILED;
}

/* The unlock giving m's grant back answered: m ends as decided. One the
 * server failed is the engine's give-back from then on (conn_queue.c). */
static void given_back(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    char sqlstate[sizeof m->sqlstate_];
    memcpy(sqlstate, m->sqlstate_, sizeof sqlstate);
    switch (m->delay_end_) {
    case DELAY_END_TIMED_OUT: advlock_conn_end(c, m, ADVLOCK_TIMED_OUT, 0, now_ms); return;
    case DELAY_END_CANCELLED: advlock_conn_end(c, m, ADVLOCK_CANCELLED, 0, now_ms); return;
    default: break;
    }
    advlock_conn_end(c, m, ADVLOCK_FAILED, ADVLOCK_ESERVER, now_ms);
    advlock_text t;
    advlock_text_init(&t, m->report_.sqlstate, sizeof m->report_.sqlstate);
    advlock_text_put(&t, sqlstate);
    memcpy(m->sqlstate_, sqlstate, sizeof sqlstate);
}

/* "waiting out the previous holder's lease until <ms> (U_old + margin
 * after the grant)", as a warning of m's: its event callback and the
 * pump's log hear why the acquire takes that long. */
static void say_waiting(advlock_conn *c, advlock_member *m, int64_t stop_ms, int64_t now_ms)
{
    advlock_text t;
    advlock_text_init(&t, c->warning_, sizeof c->warning_);
    advlock_text_put(&t, "lock-delay: waiting out the previous holder's lease until ");
    advlock_text_put_seconds(&t, advlock_sub_saturating(m->delay_at_ms_, m->started_ms_));
    advlock_text_put(&t, "s into the acquire (its stop bound ");
    advlock_text_put_seconds(&t, stop_ms);
    advlock_text_put(&t, "s + ");
    advlock_text_put_seconds(&t, ADVLOCK_LEASE_MARGIN_MS);
    advlock_text_put(&t, "s from the grant): it left the lock without releasing it");
    advlock_conn_warn(c, m, NULL, c->warning_, now_ms);
}

/* The mark of another holder (its token, stop bound stop_ms) was there at
 * the grant: m sleeps till the grant + stop_ms + the margin, on this
 * holder's own clock. The grant came after that holder's session ended,
 * which came after the server ran its last heartbeat, which came after
 * that heartbeat's send, from which its work was stopped within stop_ms:
 * no clocks are compared. A stop bound out of range is read as the
 * longest a lease allows. */
static void wait_out(advlock_conn *c, advlock_member *m, int64_t stop_ms, int64_t now_ms)
{
#ifdef ADVLOCK_DELAY_CANARY
    /* The lock-delay campaign's canary (mk/fake.mk) plants an engine that
     * waits out half the old holder's stop bound: the campaign must catch
     * two holders at work. */
    stop_ms /= 2;
#endif
    if (stop_ms < 0 || stop_ms > ADVLOCK_LEASE_MAX_MS)
        stop_ms = ADVLOCK_LEASE_MAX_MS;
    m->delay_at_ms_ = advlock_add_saturating(m->delay_at_ms_, stop_ms + ADVLOCK_LEASE_MARGIN_MS);
    m->delay_ = DELAY_WAIT;
    advlock_conn_move(c, m, CONN_SLEEPING);
    say_waiting(c, m, stop_ms, now_ms);
    advlock_conn_delay_tend(c, m, now_ms);
}

/* m's mark is durable: the acquire ends ACQUIRED, its time counted to now. */
static void marked(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    m->machine_.report_.elapsed_ms = advlock_sub_saturating(now_ms, m->started_ms_);
    advlock_conn_follow(c, m, now_ms);
}

void advlock_conn_delay_answered(advlock_conn *c, advlock_member *m, int sql,
                                 const advlock_answer *a, int again, int64_t now_ms)
{
    int lost = a->result == ADVLOCK_RESULT_CONNECTION_LOST;
    /* A clear that did not run leaves the mark: the next holder waits it
     * out, which is safe. The release, or the give-back, goes on with its
     * unlock. */
    if (sql == ADVLOCK_SQL_MARK_CLEAR)
        return;
    if (m->delay_ == DELAY_UNDO) {
        if (again)
            advlock_conn_move(c, m, CONN_QUEUED);
        else
            given_back(c, m, now_ms);
        return;
    }
    m->delay_late_ = DELAY_ON_TIME;
    if (lost) {
        /* The session, and the grant with it, is gone. */
        advlock_conn_say(m, a->message != NULL && a->message[0] != '\0' ? a->message : "no answer");
        advlock_conn_end(c, m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, now_ms);
        return;
    }
    /* The lease ran out while the statement was out: the grant went with
     * it, as the held locks did. */
    if (c->lease_expired_) {
        advlock_conn_lease_end_marking(c, m, "", now_ms);
        return;
    }
    /* The statement did not run (aborted with its batch, or a prepared one
     * dropped): it goes again, unless the acquire's end is decided (a
     * cancel, the timeout), and then nothing was written: the grant goes
     * straight back. */
    if (again) {
        if (m->delay_end_ != DELAY_END_NONE)
            give_back(c, m, 0);
        else
            advlock_conn_move(c, m, CONN_QUEUED);
        return;
    }
    int written = a->result == ADVLOCK_RESULT_TRUE && a->settings[2] != 0;
    /* An end decided before the answer (a cancel, the timeout, a commit
     * the standby did not confirm) stands: a statement cancelled for it
     * fails, and that failure is not the acquire's reason. */
    if (a->result != ADVLOCK_RESULT_TRUE && m->delay_end_ == DELAY_END_NONE)
        failed_mark(m, a);
    /* The caller's block began while the statement was out: it may have
     * run inside it. */
    if (c->in_block_ && m->delay_end_ == DELAY_END_NONE)
        refuse_in_block(m);
    if (m->delay_end_ != DELAY_END_NONE) {
        give_back(c, m, written);
        return;
    }
    if (sql == ADVLOCK_SQL_MARK_TAKE && a->settings[0] != 0) {
        wait_out(c, m, a->settings[1], now_ms);
        return;
    }
    marked(c, m, now_ms);
}

void advlock_conn_delay_tend(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    int64_t deadline = advlock_add_saturating(m->started_ms_, m->timeout_ms_);
    if (m->delay_at_ms_ <= deadline && now_ms >= m->delay_at_ms_) {
        m->delay_ = DELAY_WRITE;
        advlock_conn_move(c, m, CONN_QUEUED);
    } else if (now_ms >= deadline) {
        /* The timeout first: the mark stays as it was, for the next. */
        m->delay_end_ = DELAY_END_TIMED_OUT;
        give_back(c, m, 0);
    }
}

int64_t advlock_conn_delay_wake(const advlock_member *m)
{
    int64_t deadline = advlock_add_saturating(m->started_ms_, m->timeout_ms_);
    return m->delay_at_ms_ < deadline ? m->delay_at_ms_ : deadline;
}

void advlock_conn_delay_cancel(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    (void)now_ms;
    if (m->delay_end_ == DELAY_END_NONE)
        m->delay_end_ = DELAY_END_CANCELLED;
    /* A statement in flight answers first, then the grant goes back. */
    if (m->phase_ != CONN_SENT && marking(m))
        give_back(c, m, 0);
}

int advlock_conn_delay_refused(advlock_conn *c, advlock_member *m)
{
    if (!c->in_block_ || (m->delay_ != DELAY_TAKE && m->delay_ != DELAY_WRITE))
        return 0;
    if (m->delay_end_ == DELAY_END_NONE)
        refuse_in_block(m);
    give_back(c, m, 0);
    return 1;
}

void advlock_conn_delay_block_began(advlock_conn *c)
{
    static const int lists[] = {CONN_QUEUE_LIST, CONN_SLEEP_LIST};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        advlock_member *m = c->lists_[lists[i]];
        while (m != NULL) {
            /* m may go to the queue's end: visited again there, no longer
             * marking. */
            advlock_member *next = m->next_;
            if (marking(m)) {
                if (m->delay_end_ == DELAY_END_NONE)
                    refuse_in_block(m);
                give_back(c, m, 0);
            }
            m = next;
        }
    }
}

int64_t advlock_conn_delay_mark_deadline(const advlock_member *m, int64_t sent_ms)
{
    int64_t deadline = advlock_add_saturating(m->started_ms_, m->timeout_ms_);
    int64_t least = advlock_add_saturating(sent_ms, ADVLOCK_CONN_MARK_GRACE_MS);
    return deadline > least ? deadline : least;
}

void advlock_conn_delay_overdue(advlock_member *m, int64_t sent_ms, int64_t now_ms)
{
    if (!marking(m))
        return;
    if (m->delay_late_ == DELAY_LATE_ASKED && now_ms >= m->delay_at_ms_) {
        m->delay_late_ = DELAY_LATE_CANCEL;
        return;
    }
    if (m->delay_late_ != DELAY_ON_TIME || now_ms < advlock_conn_delay_mark_deadline(m, sent_ms))
        return;
    m->delay_late_ = DELAY_LATE_CANCEL;
    if (m->delay_end_ != DELAY_END_NONE)
        return;
    m->delay_end_ = DELAY_END_TIMED_OUT;
    advlock_conn_say(m, "lock-delay: the acquire's timeout passed while this holder's mark was "
                        "still being written (blocked on another transaction, or on a standby's "
                        "confirmation); the grant is given back when it answers");
}

void advlock_conn_delay_cancel_sent(advlock_member *m, int64_t now_ms)
{
    m->delay_late_ = DELAY_LATE_ASKED;
    /* The grant's time is not needed any more: the acquire ends TIMED_OUT
     * whatever the mark's answer says. */
    m->delay_at_ms_ = advlock_add_saturating(now_ms, ADVLOCK_CONN_CANCEL_AGAIN_MS);
}

void advlock_conn_delay_notice(advlock_member *m, int sql, const char *sqlstate, const char *words)
{
    int warning = sqlstate != NULL && strncmp(sqlstate, "01", 2) == 0;
    int cancelled = words != NULL && strncmp(words, sync_cancelled, sizeof sync_cancelled - 1) == 0;
    /* An end decided before (the timeout, whose cancel ended the standby's
     * wait and drew this warning) stands. */
    if ((sql != ADVLOCK_SQL_MARK_TAKE && sql != ADVLOCK_SQL_MARK_WRITE) || !(warning || cancelled)
        || m->delay_end_ != DELAY_END_NONE)
        return;
    char said[ADVLOCK_CONN_WORDS_MAX];
    advlock_text t;
    advlock_text_init(&t, said, sizeof said);
    advlock_text_put(&t, "lock-delay: the server warned as this holder's mark was written (");
    if (words != NULL)
        advlock_text_putn(&t, words, strnlen(words, 120));
    advlock_text_put(&t, "): the mark may not be on the synchronous standby a failover would "
                         "promote; the grant was given back");
    advlock_conn_say(m, said);
    m->delay_end_ = DELAY_END_FAILED;
}
