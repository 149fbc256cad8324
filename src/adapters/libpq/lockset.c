/*
 * Lock sets, the members' side: starting, cancelling and ending each
 * member's operation, the lists the set keeps them in, the exclusion table
 * that answers a local conflict "busy" before anything is sent, and the
 * session the members share. The connection's side (the pipeline: sending,
 * reading answers in order) is pipeline.c. docs/libpq.md, "Lock sets".
 *
 * A member is in one phase at a time, and in the list its phase names:
 *   PENDING   waiting for the set's session check (another member's row)
 *   QUEUED    its machine's statement waits to be sent (the queue)
 *   SENT      its statement is in the pipeline (no list: the ring has it)
 *   SLEEPING  between tries (the sleepers)
 *   HELD      its acquire ended ACQUIRED (the holders, watched together)
 *   DONE, LOST, IDLE: nothing under way (no list).
 */
#include "lockset.h"

#include <stdio.h>
#include <string.h>

/* At the end: members are sent, woken and restarted in the order they
 * came, so the first to ask for a name is the first to try it. */
static void list_add(advlock_pq_lockset *s, advlock_pq_member *m, int list)
{
    m->list_ = (uint8_t)list;
    m->next_ = NULL;
    m->prev_ = s->tails_[list];
    if (m->prev_ != NULL)
        m->prev_->next_ = m;
    else
        s->lists_[list] = m;
    s->tails_[list] = m;
}

static void list_remove(advlock_pq_lockset *s, advlock_pq_member *m)
{
    if (m->list_ == LS_NO_LIST)
        return;
    if (m->prev_ != NULL)
        m->prev_->next_ = m->next_;
    else
        s->lists_[m->list_] = m->next_;
    if (m->next_ != NULL)
        m->next_->prev_ = m->prev_;
    else
        s->tails_[m->list_] = m->prev_;
    m->next_ = m->prev_ = NULL;
    m->list_ = LS_NO_LIST;
}

/* The list each phase lives in. */
static int list_of(int phase)
{
    switch (phase) {
    case LS_PENDING: return LS_PENDING_LIST;
    case LS_QUEUED: return LS_QUEUE_LIST;
    case LS_SLEEPING: return LS_SLEEP_LIST;
    case LS_HELD: return LS_HELD_LIST;
    default: return LS_NO_LIST;
    }
}

void advlock_pq_ls_move(advlock_pq_lockset *s, advlock_pq_member *m, int phase)
{
    list_remove(s, m);
    m->phase_ = (uint8_t)phase;
    if (list_of(phase) != LS_NO_LIST)
        list_add(s, m, list_of(phase));
}

int advlock_pq_ls_try_mode(int sql, advlock_mode *mode)
{
    switch (sql) {
    case ADVLOCK_SQL_TRY_LOCK:
    case ADVLOCK_SQL_TRY_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_LOCK_FENCED: *mode = ADVLOCK_EXCLUSIVE; return 1;
    case ADVLOCK_SQL_TRY_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED: *mode = ADVLOCK_SHARED; return 1;
    default: return 0;
    }
}

/* The answer the server gives a try-lock for a key another session holds
 * (docs/design.md, "Lock sets"): FALSE, the guarded rows' too (their NULL
 * would say the claimed session was missed); the member backs off exactly
 * as then. */
static void answer_busy(advlock_pq_member *m, advlock_sql sql, int64_t now_ms)
{
    if (sql == ADVLOCK_SQL_TRY_LOCK_FENCED)
        (void)advlock_on_fenced(&m->machine_, 0, 0, now_ms);
    else
        (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_FALSE, NULL, NULL, now_ms);
}

/* A try past the set's share of the server's lock table is answered by
 * the set, as the server would answer a limit of its configuration
 * (53400): FAILED, with the core's words. Every peer in the table counts,
 * a cancelled member's try kept there too: each may hold a lock. */
static int past_capacity(advlock_pq_lockset *s, advlock_pq_member *m, int64_t now_ms)
{
    if (s->capacity_read_ != LS_CAPACITY_READ
        || advlock_capacity_refuse(&s->capacity_, (int64_t)advlock_peers_count(&s->peers_),
                                   m->report_.server_message, sizeof m->report_.server_message)
               != 1)
        return 0;
    (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_SERVER_ERROR, "53400",
                            m->report_.server_message, now_ms);
    return 1;
}

int advlock_pq_ls_may_send(advlock_pq_lockset *s, advlock_pq_member *m, const advlock_action *act,
                           int64_t now_ms)
{
    advlock_mode mode;
    /* A member sent again (its statement was aborted with the batch) is
     * still in the table. */
    if (!advlock_pq_ls_try_mode(act->sql, &mode)
        || advlock_peer_state(&m->peer_) != ADVLOCK_PEER_OUT)
        return 1;
    if (past_capacity(s, m, now_ms)) {
        advlock_pq_ls_follow(s, m, now_ms);
        return 0;
    }
    if (advlock_peers_ask(&s->peers_, &m->peer_, act->param, mode) == 1)
        return 1;
    answer_busy(m, act->sql, now_ms);
    advlock_pq_ls_follow(s, m, now_ms);
    return 0;
}

/* An operation ended: a grant, or a verify that found the lock, is held
 * (and watched with the others); so is a lock whose release failed, which
 * the session may still hold (the member keeps its key till it is
 * released or lost); anything else leaves the table. */
static void finish(advlock_pq_lockset *s, advlock_pq_member *m, const advlock_report *r)
{
    advlock_pq_report_finish(&m->report_, r);
    int releasing = !m->acquiring_ && !m->verifying_;
    if (m->verifying_) {
        m->verifying_ = 0;
        s->verifying_--;
    }
    if (r->outcome == ADVLOCK_ACQUIRED || r->outcome == ADVLOCK_HELD
        || (releasing && r->outcome == ADVLOCK_FAILED)) {
        if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_ASKING)
            (void)advlock_peers_granted(&s->peers_, &m->peer_);
        advlock_pq_ls_move(s, m, LS_HELD);
    } else {
        (void)advlock_peers_leave(&s->peers_, &m->peer_);
        advlock_pq_ls_move(s, m, LS_DONE);
    }
}

void advlock_pq_ls_follow(advlock_pq_lockset *s, advlock_pq_member *m, int64_t now_ms)
{
    (void)now_ms;
    advlock_action next = advlock_next_action(&m->machine_);
    switch (next.kind) {
    case ADVLOCK_ACTION_QUERY:
        if (next.sql == ADVLOCK_SQL_SESSION)
            s->session_asked_ = 1;
        advlock_pq_ls_move(s, m, LS_QUEUED);
        break;
    case ADVLOCK_ACTION_SLEEP: advlock_pq_ls_move(s, m, LS_SLEEPING); break;
    case ADVLOCK_ACTION_DONE: finish(s, m, next.report); break;
    default:
        /* NONE or CANCEL_QUERY: never with polling, which a set requires. */
        break;
    }
}

void advlock_pq_ls_answered(advlock_pq_lockset *s, advlock_pq_member *m, advlock_pq_query_ *q,
                            int64_t sent_ms, int64_t now_ms)
{
    int granted = q->result_ == ADVLOCK_RESULT_TRUE;
    advlock_pq_ls_take_notices(s, &m->report_);
    advlock_pq_answer_feed(q, &m->machine_, s->conn_, m->report_.server_message,
                           sizeof m->report_.server_message, now_ms);
    advlock_mode mode;
    if (advlock_pq_ls_try_mode(q->sql_, &mode)) {
        if (granted) {
            (void)advlock_peers_granted(&s->peers_, &m->peer_);
            advlock_pq_ls_lease_granted(s, sent_ms, now_ms);
        } else
            (void)advlock_peers_leave(&s->peers_, &m->peer_);
    }
    if (q->sql_ == ADVLOCK_SQL_SESSION) {
        /* The row is the connection's for every member; a machine of an
         * older connection (reset since) says nothing of this one. */
        advlock_session found;
        (void)advlock_get_session(&m->machine_, &found);
        if (found.token == s->session_.token)
            s->session_ = found;
        advlock_pq_ls_follow(s, m, now_ms);
        advlock_pq_ls_session_answered(s, now_ms);
        return;
    }
    advlock_pq_ls_follow(s, m, now_ms);
}

/* Starts the machine of a member whose start was accepted, or parks it
 * until the session check in flight has answered. */
static void start_machine(advlock_pq_lockset *s, advlock_pq_member *m, int64_t now_ms)
{
    if (!s->session_.checked && s->session_asked_) {
        advlock_pq_ls_move(s, m, LS_PENDING);
        return;
    }
    (void)advlock_set_session(&m->machine_, &s->session_);
    int64_t left = m->timeout_ms_ - (now_ms - m->started_ms_);
    (void)advlock_start_acquire_key(&m->machine_, m->key_, left > 0 ? left : 0, now_ms);
    advlock_pq_ls_follow(s, m, now_ms);
}

void advlock_pq_ls_session_answered(advlock_pq_lockset *s, int64_t now_ms)
{
    s->session_asked_ = 0;
    /* Taken whole first: a start may park a member again (a failed check
     * leaves the session unchecked, and the first restarted asks anew). */
    advlock_pq_member *m = s->lists_[LS_PENDING_LIST];
    s->lists_[LS_PENDING_LIST] = s->tails_[LS_PENDING_LIST] = NULL;
    while (m != NULL) {
        advlock_pq_member *next = m->next_;
        m->list_ = LS_NO_LIST;
        m->next_ = m->prev_ = NULL;
        start_machine(s, m, now_ms);
        m = next;
    }
}

void advlock_pq_ls_lose_held(advlock_pq_lockset *s, const char *sqlstate, const char *words,
                             advlock_lease_expiry expiry, int64_t now_ms)
{
    advlock_pq_member *m;
    while ((m = s->lists_[LS_HELD_LIST]) != NULL) {
        (void)advlock_peers_leave(&s->peers_, &m->peer_);
        advlock_pq_report_lost(&m->report_, sqlstate, words);
        m->report_.lease_expiry = expiry;
        advlock_pq_ls_move(s, m, LS_LOST);
        advlock_notify(&m->machine_, ADVLOCK_EVENT_LOST, m->report_.server_message, now_ms);
    }
}

void advlock_pq_ls_take_notices(advlock_pq_lockset *s, advlock_pq_report *to)
{
    advlock_pq_report *from = &s->notices_;
    if (from->notices == 0)
        return;
    to->notices += from->notices;
    memcpy(to->notice_sqlstate, from->notice_sqlstate, sizeof to->notice_sqlstate);
    memcpy(to->notice, from->notice, sizeof to->notice);
    advlock_pq_report_begin(from);
}

/* ---- the API ------------------------------------------------------------- */

void advlock_pq_member_init(advlock_pq_member *m)
{
    if (m == NULL)
        return;
    memset(m, 0, sizeof *m);
    advlock_machine_init(&m->machine_);
    advlock_peer_init(&m->peer_);
    m->phase_ = LS_IDLE;
}

static int busy(const advlock_pq_member *m)
{
    return m->phase_ == LS_PENDING || m->phase_ == LS_QUEUED || m->phase_ == LS_SENT
           || m->phase_ == LS_SLEEPING;
}

/* The options a set accepts: see advlock_pq_lockset_start_acquire(). */
static int set_options(advlock_pq_member *m, const advlock_options *o)
{
    advlock_options chosen;
    if (o != NULL)
        chosen = *o;
    else
        advlock_options_init(&chosen);
    if (chosen.scope != ADVLOCK_SESSION || chosen.wait != ADVLOCK_WAIT_POLL || chosen.lease_ms != 0)
        return ADVLOCK_EINVAL;
    advlock_pq_seed_jitter(&chosen);
    advlock_machine_init(&m->machine_);
    return advlock_set_options(&m->machine_, &chosen);
}

int advlock_pq_lockset_start_acquire_key(advlock_pq_lockset *set, advlock_pq_member *m, int64_t key,
                                         int64_t timeout_ms, const advlock_options *o,
                                         int64_t now_ms)
{
    if (set == NULL || m == NULL || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL || busy(m) || m->phase_ == LS_HELD)
        return ADVLOCK_EMISUSE;
    advlock_pq_ls_notice_reset(set, now_ms);
    if (set->lease_expired_)
        return ADVLOCK_EMISUSE;
    int rc = set_options(m, o);
    if (rc != 0)
        return rc;
    m->set_ = set;
    m->key_ = key;
    m->timeout_ms_ = timeout_ms;
    m->started_ms_ = now_ms;
    m->acquiring_ = 1;
    advlock_pq_report_begin(&m->report_);
    start_machine(set, m, now_ms);
    return 0;
}

int advlock_pq_lockset_start_acquire(advlock_pq_lockset *set, advlock_pq_member *m,
                                     const char *name, size_t len, int64_t timeout_ms,
                                     const advlock_options *o, int64_t now_ms)
{
    if (name == NULL && len > 0)
        return ADVLOCK_EINVAL;
    int64_t key;
    int rc = advlock_derive_key(name, len, &key);
    return rc != 0 ? rc : advlock_pq_lockset_start_acquire_key(set, m, key, timeout_ms, o, now_ms);
}

int advlock_pq_lockset_set_capacity_share(advlock_pq_lockset *set, int percent)
{
    if (set == NULL || percent < 1 || percent > 100)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    set->capacity_share_ = (uint8_t)percent;
    set->capacity_.share_percent = percent;
    return 0;
}

/* Starts a release or a verify (verify) of the lock m holds. */
static int start_on_held(advlock_pq_lockset *set, advlock_pq_member *m, int verify, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (set->conn_ != NULL)
        advlock_pq_ls_notice_reset(set, now_ms);
    if (set->conn_ == NULL || m->set_ != set || m->phase_ != LS_HELD)
        return ADVLOCK_EMISUSE;
    (void)advlock_set_session(&m->machine_, &set->session_);
    int rc = verify ? advlock_start_verify_key(&m->machine_, m->key_, now_ms)
                    : advlock_start_release_key(&m->machine_, m->key_, now_ms);
    if (rc != 0)
        return rc;
    m->started_ms_ = now_ms;
    m->acquiring_ = 0;
    m->verifying_ = (uint8_t)verify;
    set->verifying_ += (uint32_t)verify;
    advlock_pq_report_begin(&m->report_);
    advlock_pq_ls_follow(set, m, now_ms);
    return 0;
}

int advlock_pq_lockset_start_release(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    return start_on_held(set, m, 0, now_ms);
}

int advlock_pq_lockset_start_verify(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    return start_on_held(set, m, 1, now_ms);
}

void advlock_pq_ls_end(advlock_pq_lockset *s, advlock_pq_member *m, advlock_outcome outcome,
                       int failure, int64_t now_ms)
{
    advlock_report r;
    const advlock_report *live = advlock_next_action(&m->machine_).report;
    if (m->phase_ != LS_PENDING && live != NULL) {
        r = *live;
    } else {
        memset(&r, 0, sizeof r);
        r.key = m->key_;
        r.timeout_ms = m->timeout_ms_;
    }
    r.outcome = outcome;
    r.failure = failure;
    r.detail = ADVLOCK_DETAIL_NONE;
    r.sqlstate[0] = '\0';
    r.elapsed_ms = now_ms - m->started_ms_;
    finish(s, m, &r);
}

int advlock_pq_lockset_cancel(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (m->set_ != set || !busy(m) || !m->acquiring_)
        return ADVLOCK_EMISUSE;
    if (m->phase_ == LS_SLEEPING) {
        (void)advlock_cancel(&m->machine_, now_ms);
        advlock_pq_ls_follow(set, m, now_ms);
        return 0;
    }
    /* The member that was to check the session for the others lets
     * another do it (a row in flight is the set's to wait for). */
    advlock_action next = advlock_next_action(&m->machine_);
    int asked_session = m->phase_ == LS_QUEUED && next.kind == ADVLOCK_ACTION_QUERY
                        && next.sql == ADVLOCK_SQL_SESSION;
    if (m->phase_ == LS_SENT) {
        int rc = advlock_pq_ls_detach(set, m);
        if (rc != 0)
            return rc;
    }
    advlock_pq_ls_end(set, m, ADVLOCK_CANCELLED, 0, now_ms);
    if (asked_session)
        advlock_pq_ls_session_answered(set, now_ms);
    return 0;
}

int advlock_pq_member_busy(const advlock_pq_member *m)
{
    return m != NULL && busy(m);
}

int advlock_pq_member_held(const advlock_pq_member *m)
{
    return m != NULL && m->phase_ == LS_HELD;
}

int advlock_pq_member_lost(const advlock_pq_member *m)
{
    return m != NULL && m->phase_ == LS_LOST;
}

const advlock_pq_report *advlock_pq_member_report(const advlock_pq_member *m)
{
    if (m == NULL)
        return NULL;
    return m->phase_ == LS_DONE || m->phase_ == LS_HELD || m->phase_ == LS_LOST ? &m->report_
                                                                                : NULL;
}

size_t advlock_pq_lockset_busy(const advlock_pq_lockset *set)
{
    if (set == NULL)
        return 0;
    size_t n = 0;
    static const int lists[] = {LS_PENDING_LIST, LS_QUEUE_LIST, LS_SLEEP_LIST};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (const advlock_pq_member *m = set->lists_[lists[i]]; m != NULL; m = m->next_)
            n++;
    return n + advlock_pq_ls_members_in_flight(set);
}

int advlock_pq_lockset_deadline(const advlock_pq_lockset *set, int64_t *at_ms)
{
    if (set == NULL || at_ms == NULL)
        return 0;
    int64_t at = advlock_pq_ls_lease_wake(set);
    for (const advlock_pq_member *m = set->lists_[LS_SLEEP_LIST]; m != NULL; m = m->next_) {
        int64_t wake = advlock_next_action(&m->machine_).wake_at_ms;
        if (wake < at)
            at = wake;
    }
    if (at == INT64_MAX)
        return 0;
    *at_ms = at;
    return 1;
}

void advlock_pq_ls_wake_sleepers(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_pq_member *m = s->lists_[LS_SLEEP_LIST];
    while (m != NULL) {
        advlock_pq_member *next = m->next_;
        (void)advlock_on_timer(&m->machine_, now_ms);
        if (advlock_next_action(&m->machine_).kind != ADVLOCK_ACTION_SLEEP)
            advlock_pq_ls_follow(s, m, now_ms);
        m = next;
    }
}

/* ---- blocking ------------------------------------------------------------ */

int advlock_pq_lockset_wait(advlock_pq_lockset *set, int extra_fd, int max_wait_ms)
{
    if (set == NULL)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    int64_t now = advlock_pq_now_ms();
    advlock_pq_ls_notice_reset(set, now);
    int64_t at;
    int has_deadline = advlock_pq_lockset_deadline(set, &at);
    advlock_pq_turn turn;
    if (advlock_pq_wait_turn(advlock_pq_lockset_busy(set) > 0, advlock_pq_lockset_socket(set),
                             advlock_pq_lockset_wants(set), has_deadline ? &at : NULL, extra_fd,
                             max_wait_ms, now, &turn))
        (void)advlock_pq_lockset_process(set, turn.ready, turn.now_ms);
    return turn.extra;
}

/* How long past its schedule a blocking call waits for the server: the
 * single adapter's grace plus the wait it gives its cancel request (see
 * ADVLOCK_PQ_GRACE_MS). A set sends no cancel request: it would cancel
 * whichever member's statement the server is running. */
static const int64_t NO_ANSWER_GRACE_MS = ADVLOCK_PQ_GRACE_MS + 500;

/* Drives the set until m's operation, which start_rc says started, ends;
 * one still waiting for the server bound_ms after its start (a statement
 * unanswered, or queued behind one) gives the connection up. */
static int run(advlock_pq_lockset *set, advlock_pq_member *m, int start_rc, int64_t bound_ms,
               advlock_pq_report *report)
{
    if (start_rc != 0) {
        advlock_pq_report_refuse(report);
        return start_rc;
    }
    int64_t until = advlock_pq_add_ms(m->started_ms_, bound_ms);
    while (advlock_pq_member_busy(m)) {
        int64_t now = advlock_pq_now_ms();
        if (now >= until && m->phase_ != LS_SLEEPING) {
            advlock_pq_ls_give_up(set, now);
            break;
        }
        (void)advlock_pq_lockset_wait(set, -1, advlock_pq_wait_until(until, now));
    }
    advlock_pq_report_copy(report, &m->report_);
    return 0;
}

int advlock_pq_lockset_acquire(advlock_pq_lockset *set, advlock_pq_member *m, const char *name,
                               size_t len, int64_t timeout_ms, const advlock_options *o,
                               advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    return run(
        set, m,
        advlock_pq_lockset_start_acquire(set, m, name, len, timeout_ms, o, advlock_pq_now_ms()),
        advlock_pq_add_ms(timeout_ms, NO_ANSWER_GRACE_MS), report);
}

int advlock_pq_lockset_release(advlock_pq_lockset *set, advlock_pq_member *m,
                               advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    return run(set, m, advlock_pq_lockset_start_release(set, m, advlock_pq_now_ms()),
               NO_ANSWER_GRACE_MS, report);
}
