/*
 * The connection engine's statements in flight: a ring of the caller's
 * slots, oldest first. Answers come back in the order sent, so the ring's
 * head says whose the next answer is. With a pipelining client statements
 * go in batches (all the members waiting when the pump polls), each ended
 * by a sync, which rides on the batch's last slot (sync_).
 *
 * An error inside a batch makes the server skip the rest of it: those
 * statements are answered "aborted" and simply go again in the next batch,
 * so one member's failure never becomes another's. Session advisory locks
 * ignore the batch's implicit transaction (a grant before the error stays
 * granted), which is why a batch can hold any members' statements. One
 * statement at a time where batches are not safe: the session check (its
 * claim is a setting, which an aborted batch would roll back, and it finds
 * out whether a proxy is there), everything behind a proxy (a transaction
 * pool may hand a batch to another server session), and the lease's setup,
 * which the first try must wait for. A fenced try and the lease's
 * heartbeats go in batches of their own.
 *
 * Statements go prepared where the client can: the first use of one sends
 * its PREPARE ahead of it in the same batch.
 *
 * A cancelled member's try stays in flight: its key stays taken in the
 * exclusion table by a keeper of the engine's (a slot's keeper part) until
 * it answers, and a grant is given back with an unlock, owed while no slot
 * is free. Keepers in use never outnumber the slots in flight plus the
 * give-backs owed, and the engine sends nothing new past its slots, so a
 * keeper is always free for a cancel.
 */
#include "conn.h"

#include <string.h>

static advlock_conn_slot *slot_at(const advlock_conn *c, uint32_t i)
{
    uint32_t at = c->head_ + i;
    return &c->slots_[at >= c->nslots_ ? at - c->nslots_ : at];
}

static advlock_conn_slot *tail(const advlock_conn *c)
{
    return c->count_ > 0 ? slot_at(c, c->count_ - 1) : NULL;
}

/* Room for n more statements, give-backs owed included. */
static int room(const advlock_conn *c, uint32_t n)
{
    return c->count_ + c->owed_count_ + n <= c->nslots_;
}

static int pipelining(const advlock_conn *c)
{
    return (c->caps_ & ADVLOCK_CAPS_PIPELINE) != 0;
}

static advlock_conn_slot *push(advlock_conn *c, int kind, int sql, int form, advlock_member *m,
                               int64_t now_ms)
{
    advlock_conn_slot *s = slot_at(c, c->count_);
    c->count_++;
    s->member_ = m;
    s->key_ = 0;
    s->sent_ms_ = now_ms;
    s->keeper_ = -1;
    s->kind_ = (uint8_t)kind;
    s->sql_ = (uint8_t)sql;
    s->form_ = (uint8_t)form;
    s->sync_ = 0;
    c->unsynced_ = (uint8_t)pipelining(c);
    c->polled_ = 1;
    return s;
}

static advlock_conn_slot pop(advlock_conn *c)
{
    advlock_conn_slot s = *slot_at(c, 0);
    c->head_ = c->head_ + 1 == c->nslots_ ? 0 : c->head_ + 1;
    c->count_--;
    return s;
}

/* ---- keepers ------------------------------------------------------------- */

static advlock_conn_slot *keeper(advlock_conn *c, int32_t k)
{
    return &c->slots_[k];
}

/* Takes p out of the table and puts a keeper of the engine's in its place,
 * in p's state (the key stays taken exactly as it was). */
static int32_t keep_peer(advlock_conn *c, advlock_peer *p, int64_t key, advlock_mode mode)
{
    int32_t k = c->free_keepers_; /* never -1: see the top of this file */
    advlock_conn_slot *kept = keeper(c, k);
    c->free_keepers_ = kept->kept_next_;
    advlock_peer_init(&kept->kept_);
    kept->kept_next_ = -1;
    kept->kept_tries_ = 0;
    int held = advlock_peer_state(p) == ADVLOCK_PEER_HELD;
    (void)advlock_peers_leave(&c->peers_, p);
    (void)advlock_peers_ask(&c->peers_, &kept->kept_, key, mode); /* p's place: free */
    if (held)
        (void)advlock_peers_granted(&c->peers_, &kept->kept_);
    return k;
}

static void drop_keeper(advlock_conn *c, int32_t k)
{
    if (k < 0)
        return;
    advlock_conn_slot *kept = keeper(c, k);
    (void)advlock_peers_leave(&c->peers_, &kept->kept_);
    kept->kept_next_ = c->free_keepers_;
    c->free_keepers_ = k;
}

/* The grant keeper k holds is to be given back: at the front (first) or at
 * the end of the owed list. */
static void owe(advlock_conn *c, int32_t k, int first)
{
    advlock_conn_slot *kept = keeper(c, k);
    if (first || c->owed_ < 0) {
        kept->kept_next_ = c->owed_;
        c->owed_ = k;
        if (c->owed_tail_ < 0)
            c->owed_tail_ = k;
    } else {
        kept->kept_next_ = -1;
        keeper(c, c->owed_tail_)->kept_next_ = k;
        c->owed_tail_ = k;
    }
    c->owed_count_++;
}

static void drop_owed(advlock_conn *c)
{
    while (c->owed_ >= 0) {
        int32_t next = keeper(c, c->owed_)->kept_next_;
        drop_keeper(c, c->owed_);
        c->owed_ = next;
    }
    c->owed_tail_ = -1;
    c->owed_count_ = 0;
}

/* How often a give-back the server failed goes again (a statement_timeout
 * on a busy server may pass); past that the grant stays on the session. */
enum { GIVE_BACK_TRIES = 3 };

/* The give-back of keeper k's grant failed on the server: it is owed again,
 * or, tried often enough, its key stays taken for good and the connection
 * must close (advlock_conn_must_close()), which is what frees the lock. */
static void give_back_failed(advlock_conn *c, int32_t k)
{
    advlock_conn_slot *kept = keeper(c, k);
    if (++kept->kept_tries_ >= GIVE_BACK_TRIES)
        c->must_close_ = 1;
    owe(c, k, 0);
}

/* Give-backs owed that may go: none once the connection must close. */
static int owes_now(const advlock_conn *c)
{
    return c->owed_ >= 0 && !c->must_close_;
}

/* The unlock that gives back a grant of try_sql (a try-lock or a wait). */
static advlock_sql unlock_of(int try_sql)
{
    switch (try_sql) {
    case ADVLOCK_SQL_TRY_LOCK_SHARED:
    case ADVLOCK_SQL_LOCK_SHARED: return ADVLOCK_SQL_UNLOCK_SHARED;
    case ADVLOCK_SQL_TRY_LOCK_GUARDED:
    case ADVLOCK_SQL_LOCK_GUARDED: return ADVLOCK_SQL_UNLOCK_GUARDED;
    case ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_LOCK_SHARED_GUARDED: return ADVLOCK_SQL_UNLOCK_SHARED_GUARDED;
    default: return ADVLOCK_SQL_UNLOCK; /* plain and fenced */
    }
}

void advlock_conn_detach(advlock_conn *c, advlock_member *m)
{
    for (uint32_t i = 0; i < c->count_; i++) {
        advlock_conn_slot *s = slot_at(c, i);
        if (s->kind_ != SLOT_MEMBER || s->member_ != m)
            continue;
        advlock_mode mode;
        s->kind_ = SLOT_DETACHED;
        s->member_ = NULL;
        if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_OUT)
            continue;
        if (advlock_conn_try_mode(s->sql_, &mode)) {
            /* The server may grant the try for this session until it has
             * answered: the key stays taken till then (and till a grant's
             * give-back has answered), though m may go at once. */
            s->keeper_ = keep_peer(c, &m->peer_, s->key_, mode);
        } else if (advlock_conn_is_unlock(s->sql_)) {
            /* The unlock undoing m's grant: the engine's give-back from
             * now on, sent again if its batch is aborted. */
            s->keeper_ = keep_peer(c, &m->peer_, s->key_, (advlock_mode)m->peer_.mode_);
            keeper(c, s->keeper_)->kept_unlock_ = s->sql_;
            s->kind_ = SLOT_GIVE_BACK;
        }
    }
}

advlock_member *advlock_conn_first_in_flight(const advlock_conn *c, int scope)
{
    for (uint32_t i = 0; i < c->count_; i++) {
        const advlock_conn_slot *s = slot_at(c, i);
        if (s->kind_ == SLOT_MEMBER && (scope < 0 || s->member_->machine_.scope_ == scope))
            return s->member_;
    }
    return NULL;
}

advlock_member *advlock_conn_verify_in_flight(const advlock_conn *c)
{
    for (uint32_t i = 0; i < c->count_; i++) {
        const advlock_conn_slot *s = slot_at(c, i);
        if (s->kind_ == SLOT_MEMBER && s->member_->verifying_ && !s->member_->by_key_)
            return s->member_;
    }
    return NULL;
}

advlock_member *advlock_conn_waiter(const advlock_conn *c)
{
    if (!c->waits_ || c->count_ == 0 || slot_at(c, 0)->kind_ != SLOT_MEMBER)
        return NULL;
    return slot_at(c, 0)->member_;
}

static int is_mark(int sql)
{
    return sql == ADVLOCK_SQL_MARK_TAKE || sql == ADVLOCK_SQL_MARK_WRITE;
}

/* 1 when the client can send cancel requests and a lock-delay mark
 * statement is out: it went last, and nothing more goes until it answers
 * (batch_closed()), so that a cancel request for it, once what went before
 * it has answered, finds the server running it or nothing of ours (a try it
 * stopped instead could have taken the lock first, a heartbeat would fail
 * the lease). Sent behind a blocked mark, the rest would wait on the server
 * anyway; behind one that is not, it goes a round trip later. */
static int mark_out(const advlock_conn *c)
{
    if (!(c->caps_ & ADVLOCK_CAPS_CANCEL) || c->count_ == 0)
        return 0;
    const advlock_conn_slot *s = tail(c);
    return s->kind_ == SLOT_MEMBER && is_mark(s->sql_);
}

/* The member whose lock-delay mark is late and alone in flight, where the
 * client can send cancel requests; else NULL. */
static advlock_member *late_mark(const advlock_conn *c)
{
    if (!(c->caps_ & ADVLOCK_CAPS_CANCEL) || c->count_ != 1)
        return NULL;
    const advlock_conn_slot *s = slot_at(c, 0);
    const advlock_member *m = s->kind_ == SLOT_MEMBER && is_mark(s->sql_) ? s->member_ : NULL;
    return m != NULL && m->delay_late_ != DELAY_ON_TIME ? s->member_ : NULL;
}

/* The member whose statement is to be cancelled now (the waiter whose
 * machine asks, or a late mark's), or NULL. */
static advlock_member *cancel_due(const advlock_conn *c)
{
    advlock_member *w = advlock_conn_waiter(c);
    if (w != NULL && advlock_next_action(&w->machine_).kind == ADVLOCK_ACTION_CANCEL_QUERY)
        return w;
    if (c->delaying_ == 0) /* a late mark is a held-back grant's */
        return NULL;
    w = late_mark(c);
    return w != NULL && w->delay_late_ == DELAY_LATE_CANCEL ? w : NULL;
}

advlock_member *advlock_conn_cancel_target(const advlock_conn *c)
{
    advlock_member *w = advlock_conn_waiter(c);
    return w != NULL ? w : late_mark(c);
}

void advlock_conn_marks_tend(advlock_conn *c, int64_t now_ms)
{
    for (uint32_t i = 0; i < c->count_; i++) {
        const advlock_conn_slot *s = slot_at(c, i);
        if (s->kind_ == SLOT_MEMBER && is_mark(s->sql_))
            advlock_conn_delay_overdue(s->member_, s->sent_ms_, now_ms);
    }
}

int64_t advlock_conn_marks_wake(const advlock_conn *c)
{
    int64_t at = INT64_MAX;
    const advlock_member *cancelling = late_mark(c);
    for (uint32_t i = 0; i < c->count_; i++) {
        const advlock_conn_slot *s = slot_at(c, i);
        if (s->kind_ != SLOT_MEMBER || !is_mark(s->sql_))
            continue;
        const advlock_member *m = s->member_;
        int64_t wake = INT64_MAX;
        if (m->delay_late_ == DELAY_ON_TIME)
            wake = advlock_conn_delay_mark_deadline(m, s->sent_ms_);
        else if (m->delay_late_ == DELAY_LATE_ASKED && m == cancelling)
            wake = m->delay_at_ms_;
        if (wake < at)
            at = wake;
    }
    return at;
}

/* 1 when a grant waits for its confirming heartbeat, not yet sent. */
static int confirm_due(const advlock_conn *c)
{
    return c->confirming_ != NULL && c->lease_query_ == LEASE_NONE;
}

size_t advlock_conn_in_flight(const advlock_conn *c)
{
    size_t n = 0;
    for (uint32_t i = 0; i < c->count_; i++)
        n += slot_at(c, i)->kind_ == SLOT_MEMBER;
    return n;
}

/* ---- answers ------------------------------------------------------------- */

void advlock_answer_init(advlock_answer *a, advlock_result result)
{
    if (a == NULL)
        return;
    memset(a, 0, sizeof *a);
    a->result = result;
}

static int sqlstate_is(const advlock_answer *a, const char *code)
{
    return a->sqlstate != NULL && strcmp(a->sqlstate, code) == 0;
}

static int failed(advlock_result r)
{
    return r == ADVLOCK_RESULT_SERVER_ERROR || r == ADVLOCK_RESULT_CONNECTION_LOST;
}

/* 1 when a detached try's answer a may have left a grant on the session:
 * granted, or a fenced try's error after its grant (the machine's rule,
 * advlock_fenced_fails_before_locking()). */
static int may_be_granted(const advlock_conn_slot *s, const advlock_answer *a)
{
    if (a->result == ADVLOCK_RESULT_TRUE)
        return 1;
    return s->sql_ == ADVLOCK_SQL_TRY_LOCK_FENCED && a->result == ADVLOCK_RESULT_SERVER_ERROR
           && !advlock_fenced_fails_before_locking(a->sqlstate);
}

/* Feeds m's machine the final answer a of its statement s. */
static void feed(advlock_member *m, const advlock_conn_slot *s, const advlock_answer *a,
                 int64_t now_ms)
{
    advlock_sql_answer_kind kind = advlock_sql_answer((advlock_sql)s->sql_);
    if (a->result == ADVLOCK_RESULT_TRUE && kind == ADVLOCK_ANSWER_HOLDERS) {
        (void)advlock_on_holders(&m->machine_, a->holders, a->nholders, now_ms);
    } else if (a->result == ADVLOCK_RESULT_TRUE && kind == ADVLOCK_ANSWER_SESSION) {
        (void)advlock_on_session(&m->machine_, a->server_pid, a->in_recovery, a->ours, now_ms);
    } else if (kind == ADVLOCK_ANSWER_FENCED
               && (a->result == ADVLOCK_RESULT_TRUE || a->result == ADVLOCK_RESULT_FALSE)) {
        int granted = a->result == ADVLOCK_RESULT_TRUE;
        (void)advlock_on_fenced(&m->machine_, granted, granted ? a->fence_token : 0, now_ms);
    } else {
        /* A success leaves the words as they are: an earlier failure of the
         * same operation may still be the one its report gives. */
        if (failed(a->result))
            advlock_conn_say(m, a->message != NULL && a->message[0] != '\0' ? a->message
                                                                            : "no answer");
        (void)advlock_on_result(&m->machine_, a->result, a->sqlstate,
                                failed(a->result) ? m->words_ : "", now_ms);
    }
}

/* 1 when m's acquire has an unlock to send (or in flight) undoing a grant
 * the session may hold. */
static int undoing(const advlock_member *m)
{
    advlock_action next = advlock_next_action(&m->machine_);
    return m->acquiring_ && next.kind == ADVLOCK_ACTION_QUERY && advlock_conn_is_unlock(next.sql);
}

/* The unlock undoing m's grant (s) failed: the key stays taken by a
 * keeper and the unlock is owed, or the connection must close. */
static void owe_undo(advlock_conn *c, advlock_member *m, const advlock_conn_slot *s)
{
    if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_OUT)
        return;
    int32_t k = keep_peer(c, &m->peer_, s->key_, (advlock_mode)m->peer_.mode_);
    keeper(c, k)->kept_unlock_ = s->sql_;
    give_back_failed(c, k);
}

/* The unlock undoing m's grant (s) failed (answer a), and the machine says
 * the grant is in doubt (a lost connection took it with the session): as
 * with a give-back that failed, the key stays taken by a keeper and the
 * unlock is owed, or the connection must close. An unlock that ran (true
 * or false) ended the doubt, whatever detail the report keeps of why it
 * was sent: another would take back some other hold of the key. */
static void undo_failed(advlock_conn *c, advlock_member *m, const advlock_conn_slot *s,
                        const advlock_answer *a)
{
    /* The machine is asked last: an unlock's answer is rarely a failure. */
    if (a->result == ADVLOCK_RESULT_TRUE || a->result == ADVLOCK_RESULT_FALSE || !m->acquiring_
        || !advlock_conn_is_unlock(s->sql_))
        return;
    advlock_action next = advlock_next_action(&m->machine_);
    if (next.kind != ADVLOCK_ACTION_DONE || next.report->outcome != ADVLOCK_FAILED
        || !advlock_detail_in_doubt(next.report->detail))
        return;
    owe_undo(c, m, s);
}

/* The unlock lock-delay sent to give m's held-back grant back (s) failed
 * on the server, or reached another server session behind a proxy (NULL):
 * the engine's to give back from then on, as for the machine's undo. */
static void delay_undo_failed(advlock_conn *c, advlock_member *m, const advlock_conn_slot *s,
                              const advlock_answer *a)
{
    if (m->delay_ == DELAY_UNDO && advlock_conn_is_unlock(s->sql_) && !a->aborted
        && (a->result == ADVLOCK_RESULT_SERVER_ERROR || a->result == ADVLOCK_RESULT_NULL))
        owe_undo(c, m, s);
}

/* m's statement s has its final answer a: feeds it, keeps the exclusion
 * table, the lease and the shared session up to date, moves m on. */
static void member_answered(advlock_conn *c, advlock_member *m, const advlock_conn_slot *s,
                            const advlock_answer *a, int64_t now_ms)
{
    feed(m, s, a, now_ms);
    undo_failed(c, m, s, a);
    /* Asked once: what follows touches the table and the lease, never
     * m's machine. */
    advlock_action next = advlock_next_action(&m->machine_);
    advlock_mode mode;
    if (advlock_conn_try_mode(s->sql_, &mode)) {
        /* A try the machine undoes (a fenced try's error: the server may
         * have granted it) holds the key until the unlock has answered. */
        int undo = next.kind == ADVLOCK_ACTION_QUERY && advlock_conn_is_unlock(next.sql);
        if (a->result == ADVLOCK_RESULT_TRUE || undo) {
            (void)advlock_peers_granted(&c->peers_, &m->peer_);
            if (next.kind == ADVLOCK_ACTION_DONE && next.report->outcome == ADVLOCK_ACQUIRED
                && advlock_conn_lease_confirms(c, m, s->sent_ms_, now_ms))
                return; /* m stays busy until the heartbeat answers */
            advlock_conn_lease_granted(c, s->sent_ms_, now_ms);
        } else {
            (void)advlock_peers_leave(&c->peers_, &m->peer_);
        }
    }
    if (s->sql_ != ADVLOCK_SQL_SESSION) {
        advlock_conn_take_up(c, m, &next);
        return;
    }
    /* The row is the connection's for every member; a machine of an older
     * server session (reset since) says nothing of this one. */
    advlock_session found;
    (void)advlock_get_session(&m->machine_, &found);
    if (found.token == c->session_.token && found.client_pid == c->session_.client_pid) {
        c->session_ = found;
        c->provisional_ = (uint8_t)(found.checked && a->in_transaction);
    }
    advlock_conn_follow(c, m, now_ms);
    advlock_conn_session_answered(c, now_ms);
}

/* The lock table's settings. A server that did not give them (an error,
 * or a row out of range) is taken for one with PostgreSQL's defaults, 64 x
 * (100 + 0): the engine holds a share of those rather than no limit. */
static void capacity_answered(advlock_conn *c, const advlock_answer *a)
{
    if (a->result == ADVLOCK_RESULT_CONNECTION_LOST || a->aborted) {
        c->capacity_read_ = CAPACITY_UNREAD; /* asked again with the next check */
        return;
    }
    if (a->result != ADVLOCK_RESULT_TRUE
        || advlock_capacity_init(&c->capacity_, a->settings[0], a->settings[1], a->settings[2],
                                 c->capacity_share_)
               != 0)
        (void)advlock_capacity_init(&c->capacity_, 64, 100, 0, c->capacity_share_);
    c->capacity_read_ = CAPACITY_READ;
}

/* Whether m (the queue's head; NULL: none) is the member a prepare of sql
 * went ahead of, which that prepare's loss ends too: not one undoing a
 * grant, whose unlock goes again (the session may still hold it). */
static int ends_with_prepare(const advlock_member *m, int sql)
{
    if (m == NULL || undoing(m))
        return 0;
    advlock_action next = advlock_next_action(&m->machine_);
    return next.kind == ADVLOCK_ACTION_QUERY && (int)next.sql == sql;
}

/* sql's bit in the prepared statements' sets; 0 for the rows past them,
 * which always go unnamed. */
static uint32_t prepare_bit(int sql)
{
    return sql < 32 ? UINT32_C(1) << sql : 0;
}

/* Slot s, out of the ring, has its answer a. */
static void dispatch(advlock_conn *c, advlock_conn_slot *s, const advlock_answer *a, int64_t now_ms)
{
    int lost = a->result == ADVLOCK_RESULT_CONNECTION_LOST;
    uint32_t bit = prepare_bit(s->sql_);
    /* A prepared statement someone dropped (26000: DISCARD ALL, DEALLOCATE):
     * the statement never ran; it is prepared again and goes again. */
    int dropped = !lost && s->form_ == ADVLOCK_FORM_NAMED && sqlstate_is(a, "26000");
    int again = !lost && (a->aborted || dropped);
    if (dropped)
        c->prepared_ &= ~bit;
    switch (s->kind_) {
    case SLOT_PREPARE:
        c->preparing_ &= ~bit;
        /* 42P05: prepared already, by another driver on this connection. */
        if ((a->result == ADVLOCK_RESULT_TRUE && !a->aborted) || sqlstate_is(a, "42P05"))
            c->prepared_ |= bit;
        else if (!again && !lost)
            c->unnamed_ |= bit;
        /* One statement at a time, the member it went ahead of is still
         * queued: the lost connection's words (the server's FATAL, say)
         * are its statement's answer. (A prepare may go ahead of a
         * give-back too, which stays owed.) */
        if (lost && !pipelining(c) && ends_with_prepare(c->lists_[CONN_QUEUE_LIST], s->sql_))
            advlock_conn_fail(c, c->lists_[CONN_QUEUE_LIST], ADVLOCK_RESULT_CONNECTION_LOST,
                              a->sqlstate, a->message, now_ms);
        break;
    case SLOT_GIVE_BACK:
        if (again) {
            owe(c, s->keeper_, 0);
            return;
        }
        if (!lost && failed(a->result)) {
            give_back_failed(c, s->keeper_);
            return;
        }
        break;
    case SLOT_DETACHED:
        if (s->sql_ == ADVLOCK_SQL_SESSION) {
            advlock_conn_session_answered(c, now_ms);
        } else if (s->keeper_ >= 0 && !again && may_be_granted(s, a)
                   && !advlock_conn_is_xact_lock(s->sql_)) {
            /* The server counts holds per session: the unlock takes back
             * exactly the one granted. */
            advlock_conn_slot *kept = keeper(c, s->keeper_);
            (void)advlock_peers_granted(&c->peers_, &kept->kept_);
            kept->kept_unlock_ = (uint8_t)unlock_of(s->sql_);
            owe(c, s->keeper_, 0);
            return;
        }
        break;
    case SLOT_MEMBER:
        if (advlock_conn_delay_owns(s->member_, s->sql_)) {
            delay_undo_failed(c, s->member_, s, a);
            advlock_conn_delay_answered(c, s->member_, s->sql_, a, again, now_ms);
        } else if (again)
            advlock_conn_move(c, s->member_, CONN_QUEUED);
        else
            member_answered(c, s->member_, s, a, now_ms);
        break;
    case SLOT_LEASE: advlock_conn_lease_answered(c, a, s->sent_ms_, now_ms); break;
    case SLOT_CAPACITY: capacity_answered(c, a); break;
    default: break;
    }
    drop_keeper(c, s->keeper_);
}

/* a answers the head statement (there is one). */
static void answer_head(advlock_conn *c, const advlock_answer *a, int64_t now_ms)
{
    c->polled_ = 0;
    advlock_conn_slot s = pop(c);
    dispatch(c, &s, a, now_ms);
}

int advlock_conn_on_answer(advlock_conn *c, const advlock_answer *a, int64_t now_ms)
{
    if (c == NULL || a == NULL)
        return ADVLOCK_EINVAL;
    if (c->count_ == 0)
        return ADVLOCK_EMISUSE;
    answer_head(c, a, now_ms);
    return 0;
}

void advlock_conn_drain(advlock_conn *c, const char *words, int64_t now_ms)
{
    advlock_answer lost;
    advlock_answer_init(&lost, ADVLOCK_RESULT_CONNECTION_LOST);
    lost.message = words;
    c->polled_ = 0;
    while (c->count_ > 0) {
        advlock_conn_slot s = pop(c);
        dispatch(c, &s, &lost, now_ms);
    }
    drop_owed(c);
    c->unsynced_ = c->close_batch_ = c->follow_ = 0;
    /* A grant whose heartbeat never went: lost with the session. */
    if (c->confirming_ != NULL) {
        c->lease_query_ = LEASE_CONFIRM;
        advlock_conn_lease_answered(c, &lost, 0, now_ms);
    }
}

/* ---- sending ------------------------------------------------------------- */

static void fill(advlock_statement *st, const advlock_conn_slot *s)
{
    st->kind = ADVLOCK_STATEMENT_QUERY;
    st->sql = (advlock_sql)s->sql_;
    st->form = (advlock_form)s->form_;
    st->member = s->member_;
    st->sync_follows = s->sync_;
}

int advlock_conn_head(const advlock_conn *c, advlock_statement *st)
{
    if (c == NULL || st == NULL || c->count_ == 0)
        return 0;
    /* Called for every result the pump reads: only the fields a head has. */
    fill(st, slot_at(c, 0));
    st->param = st->param2 = st->param3 = 0;
    return 1;
}

/* Ends the batch: the sync rides on its last slot. A batch whose
 * statements were all answered before its sync was polled (a pump that
 * reads before it syncs) has none to ride on: it is over. */
static int emit_sync(advlock_conn *c, advlock_statement *st)
{
    if (c->count_ == 0) {
        c->unsynced_ = c->close_batch_ = 0;
        return 0;
    }
    tail(c)->sync_ = 1;
    c->unsynced_ = 0;
    c->close_batch_ = 0;
    c->polled_ = 2;
    st->kind = ADVLOCK_STATEMENT_SYNC;
    return 1;
}

static int emit(advlock_statement *st, const advlock_conn_slot *s, const advlock_action *act)
{
    fill(st, s);
    st->param = act->param;
    st->param2 = act->param2;
    st->param3 = act->param3;
    return 1;
}

/* Nothing more may join the batch in flight until it has answered. */
static int batch_closed(const advlock_conn *c)
{
    return c->count_ > 0
           && (!pipelining(c) || mark_out(c)
               || (!c->follow_
                   && (c->session_.proxied || !c->session_.checked
                       || c->lease_query_ == LEASE_SETUP)));
}

static int give_back(advlock_conn *c, advlock_statement *st, int64_t now_ms)
{
    int32_t k = c->owed_;
    advlock_conn_slot *kept = keeper(c, k);
    c->owed_ = kept->kept_next_;
    if (c->owed_ < 0)
        c->owed_tail_ = -1;
    c->owed_count_--;
    advlock_action act;
    memset(&act, 0, sizeof act);
    act.sql = (advlock_sql)kept->kept_unlock_;
    act.param = kept->kept_.key_;
    act.param2 = (int64_t)c->session_.token;
    advlock_conn_slot *s = push(c, SLOT_GIVE_BACK, act.sql, ADVLOCK_FORM_UNNAMED, NULL, now_ms);
    s->keeper_ = k;
    s->key_ = act.param;
    return emit(st, s, &act);
}

/* The form of sql on this connection. */
static int form_of(const advlock_conn *c, int sql)
{
    uint32_t bit = prepare_bit(sql);
    /* Inside a transaction block a statement found missing would abort
     * the caller's transaction. */
    if (!(c->caps_ & ADVLOCK_CAPS_PREPARE) || c->session_.proxied || sql == ADVLOCK_SQL_SESSION
        || c->in_block_ || bit == 0 || (c->unnamed_ & bit))
        return ADVLOCK_FORM_UNNAMED;
    return ADVLOCK_FORM_NAMED;
}

/* The statement the queue's first member needs next, or 0. */
static int member_statement(advlock_conn *c, advlock_statement *st, int64_t now_ms)
{
    advlock_member *m;
    while ((m = c->lists_[CONN_QUEUE_LIST]) != NULL) {
        if (!room(c, 2)) {
            c->starved_ = 1;
            return 0;
        }
        /* Inside the caller's block a mark would commit or roll back
         * with it: the grant goes back instead. */
        int delayed = m->delay_ != DELAY_OFF; /* most members: no lock-delay step */
        if (delayed && advlock_conn_delay_refused(c, m))
            continue;
        advlock_action act;
        if (!delayed || !advlock_conn_delay_action(c, m, &act))
            act = advlock_next_action(&m->machine_);
        if (act.kind != ADVLOCK_ACTION_QUERY) {
            advlock_conn_move(c, m, CONN_IDLE);
            advlock_conn_follow(c, m, now_ms);
            continue;
        }
        /* Outside a block (it ended, or a reset) a transaction's try
         * would lock for its own statement only. */
        if (advlock_conn_is_xact_lock(act.sql) && !c->in_block_) {
            advlock_conn_move(c, m, CONN_IDLE);
            advlock_conn_end_outside_block(c, m);
            continue;
        }
        if (advlock_conn_lease_needs_setup(c, act.sql)) {
            if (c->unsynced_)
                return emit_sync(c, st); /* the setup goes alone */
            advlock_action setup;
            if (advlock_conn_lease_due(c, 1, &setup, now_ms)) {
                c->close_batch_ = (uint8_t)pipelining(c);
                return emit(st, push(c, SLOT_LEASE, setup.sql, ADVLOCK_FORM_UNNAMED, NULL, now_ms),
                            &setup);
            }
            if (advlock_conn_lease_needs_setup(c, act.sql))
                return 0;
        }
        /* The lock table's settings are read once per server session, just
         * ahead of its session check, so they are known before any try. */
        if (act.sql == ADVLOCK_SQL_SESSION && c->capacity_read_ == CAPACITY_UNREAD
            && !(c->caps_ & ADVLOCK_CAPS_ONE_MEMBER)) {
            advlock_action read;
            memset(&read, 0, sizeof read);
            read.sql = ADVLOCK_SQL_CAPACITY;
            c->capacity_read_ = CAPACITY_ASKED;
            c->follow_ = 1;
            return emit(st, push(c, SLOT_CAPACITY, read.sql, ADVLOCK_FORM_UNNAMED, NULL, now_ms),
                        &read);
        }
        if (!advlock_conn_may_send(c, m, &act, now_ms))
            continue;
        /* A fenced try writes its token in the batch's implicit transaction,
         * which a later failure in the batch would roll back after the token
         * was handed out: it goes in a batch of its own. */
        int alone = advlock_sql_answer(act.sql) == ADVLOCK_ANSWER_FENCED
                    || advlock_conn_delay_alone(act.sql);
        if (alone && c->unsynced_ && !c->follow_)
            return emit_sync(c, st);
        int form = form_of(c, act.sql);
        uint32_t bit = prepare_bit(act.sql);
        if (form == ADVLOCK_FORM_NAMED && !(c->prepared_ & bit) && !(c->preparing_ & bit)) {
            c->preparing_ |= bit;
            c->follow_ = 1;
            return emit(st, push(c, SLOT_PREPARE, act.sql, ADVLOCK_FORM_PREPARE, NULL, now_ms),
                        &act);
        }
        c->follow_ = 0;
        c->close_batch_ = (uint8_t)(alone && pipelining(c));
        advlock_conn_slot *s = push(c, SLOT_MEMBER, act.sql, form, m, now_ms);
        s->key_ = act.param;
        if (!advlock_conn_delay_sent(m, act.sql))
            advlock_conn_move(c, m, CONN_SENT);
        return emit(st, s, &act);
    }
    return 0;
}

/* 1 when nothing can be due: no wait to cancel, no lease, no batch to
 * end, no give-back owed, no member queued (most polls of one lock, after
 * its answer). */
static int quiet(const advlock_conn *c)
{
    return !c->waits_ && !c->lease_on_ && !c->unsynced_ && c->owed_ < 0 && c->confirming_ == NULL
           && c->lists_[CONN_QUEUE_LIST] == NULL;
}

static int poll(advlock_conn *c, advlock_statement *st, int64_t now_ms)
{
    memset(st, 0, sizeof *st);
    c->polled_ = 0;
    c->starved_ = 0;
    if (c->given_up_)
        return 0;
    if (quiet(c)) {
        c->follow_ = 0;
        return 0;
    }
    advlock_member *w = cancel_due(c);
    if (w != NULL) {
        st->kind = ADVLOCK_STATEMENT_CANCEL;
        st->member = w;
        if (w == advlock_conn_waiter(c)) {
            st->sql = advlock_next_action(&w->machine_).sql;
            (void)advlock_on_cancel_sent(&w->machine_, now_ms);
        } else {
            st->sql = (advlock_sql)slot_at(c, 0)->sql_;
            advlock_conn_delay_cancel_sent(w, now_ms);
        }
        return 1;
    }
    advlock_conn_lease_tend(c, now_ms);
    if (c->close_batch_ && c->unsynced_)
        return emit_sync(c, st);
    if (!batch_closed(c)) {
        if (owes_now(c))
            return give_back(c, st, now_ms);
        advlock_action beat;
        if (confirm_due(c)) {
            if (c->unsynced_)
                return emit_sync(c, st);
            if (room(c, 1) && advlock_conn_lease_confirm_due(c, &beat, now_ms)) {
                c->close_batch_ = (uint8_t)pipelining(c);
                return emit(
                    st, push(c, SLOT_LEASE, beat.sql, ADVLOCK_FORM_UNNAMED, c->confirming_, now_ms),
                    &beat);
            }
        }
        if (advlock_conn_lease_beat_due(c)) {
            if (c->unsynced_)
                return emit_sync(c, st);
            if (room(c, 1) && advlock_conn_lease_due(c, 0, &beat, now_ms)) {
                c->close_batch_ = (uint8_t)pipelining(c);
                return emit(st, push(c, SLOT_LEASE, beat.sql, ADVLOCK_FORM_UNNAMED, NULL, now_ms),
                            &beat);
            }
        }
        if (member_statement(c, st, now_ms))
            return 1;
    }
    c->follow_ = 0;
    return c->unsynced_ ? emit_sync(c, st) : 0;
}

/* poll(), the statement found counted as sent. */
static int poll_sent(advlock_conn *c, advlock_statement *st, int64_t now_ms)
{
    if (!poll(c, st, now_ms))
        return 0;
    /* A cancel request goes on a connection of its own: the server hears
     * nothing on this one. */
    if (st->kind != ADVLOCK_STATEMENT_CANCEL)
        advlock_conn_lease_sent(c, now_ms);
    return 1;
}

int advlock_conn_poll_statement(advlock_conn *c, advlock_statement *st, int64_t now_ms)
{
    return c != NULL && st != NULL && poll_sent(c, st, now_ms);
}

void advlock_conn_unsend(advlock_conn *c, int broken, const char *words, int64_t now_ms)
{
    if (c == NULL || c->polled_ == 0)
        return;
    int was = c->polled_;
    c->polled_ = 0;
    if (was == 2) { /* the sync: due again, unless nothing will answer */
        if (!broken) {
            tail(c)->sync_ = 0;
            c->unsynced_ = 1;
        }
        return;
    }
    c->count_--;
    advlock_conn_slot s = *slot_at(c, c->count_);
    advlock_conn_slot *last = tail(c);
    c->unsynced_ = (uint8_t)(pipelining(c) && last != NULL && !last->sync_);
    c->follow_ = 0;
    if (s.kind_ == SLOT_GIVE_BACK && !broken) {
        owe(c, s.keeper_, 1); /* again at the next turn */
        return;
    }
    /* An unlock undoing a grant the session still holds goes again at the
     * next turn, as a give-back does: failing it would free the key; so
     * does a statement of a grant lock-delay holds back. */
    if (!broken && s.kind_ == SLOT_MEMBER
        && (undoing(s.member_) || advlock_conn_delay_holding(s.member_))) {
        advlock_conn_move(c, s.member_, CONN_QUEUED);
        return;
    }
    advlock_answer lost;
    advlock_answer_init(&lost, ADVLOCK_RESULT_CONNECTION_LOST);
    lost.message = words;
    advlock_member *next = c->lists_[CONN_QUEUE_LIST];
    dispatch(c, &s, &lost, now_ms);
    /* The member a prepare or the settings went ahead of goes nowhere
     * either (unless the prepare's answer failed it already), but for an
     * undo's unlock (again at the next turn). */
    if ((s.kind_ == SLOT_PREPARE || s.kind_ == SLOT_CAPACITY) && next != NULL
        && next == c->lists_[CONN_QUEUE_LIST] && (broken || !undoing(next)))
        advlock_conn_fail(c, next, ADVLOCK_RESULT_CONNECTION_LOST, NULL, words, now_ms);
}

int advlock_conn_wants_send(const advlock_conn *c)
{
    if (c == NULL || c->given_up_)
        return 0;
    /* What advlock_conn_poll_statement() would give: a cancel request and
     * a sync due go whatever else waits; the rest only past a batch that
     * may grow, each with the room it needs there. */
    if (c->unsynced_ || cancel_due(c) != NULL)
        return 1;
    if (batch_closed(c))
        return 0;
    return owes_now(c) || ((confirm_due(c) || advlock_conn_lease_beat_due(c)) && room(c, 1))
           || (c->lists_[CONN_QUEUE_LIST] != NULL && room(c, 2));
}

int advlock_conn_must_close(const advlock_conn *c)
{
    return c != NULL && c->must_close_;
}

size_t advlock_conn_outstanding(const advlock_conn *c)
{
    return c != NULL ? (size_t)c->count_ + c->owed_count_ : 0;
}

int advlock_conn_starved(const advlock_conn *c)
{
    return c != NULL && c->starved_;
}

int advlock_conn_move_slots(advlock_conn *c, advlock_conn_slot *slots, size_t nslots)
{
    if (c == NULL || slots == NULL || nslots < 2 || nslots <= c->count_ || nslots > INT32_MAX)
        return ADVLOCK_EINVAL;
    uint32_t free_keepers = 0;
    for (int32_t k = c->free_keepers_; k >= 0; k = keeper(c, k)->kept_next_)
        free_keepers++;
    if (free_keepers != c->nslots_)
        return ADVLOCK_EMISUSE;
    for (uint32_t i = 0; i < c->count_; i++)
        slots[i] = *slot_at(c, i);
    for (size_t i = 0; i < nslots; i++)
        slots[i].kept_next_ = i + 1 < nslots ? (int32_t)(i + 1) : -1;
    c->slots_ = slots;
    c->nslots_ = (uint32_t)nslots;
    c->head_ = 0;
    c->free_keepers_ = 0;
    return 0;
}
