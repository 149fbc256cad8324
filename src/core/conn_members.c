/*
 * The connection engine's members: the lists each phase lives in, following
 * a member's machine, the session check they share, ending and losing
 * members, and the local answers a try gets before anything is sent (a key
 * another member holds, the lock table's share full). docs/design.md,
 * "The connection".
 */
#include "conn.h"

#include <string.h>

/* At the end: members are sent, woken and restarted in the order they
 * came, so the first to ask for a name is the first to try it. */
static void list_add(advlock_conn *c, advlock_member *m, int list)
{
    m->list_ = (uint8_t)list;
    m->next_ = NULL;
    m->prev_ = c->tails_[list];
    if (m->prev_ != NULL)
        m->prev_->next_ = m;
    else
        c->lists_[list] = m;
    c->tails_[list] = m;
}

static void list_remove(advlock_conn *c, advlock_member *m)
{
    if (m->list_ == CONN_NO_LIST)
        return;
    if (m->prev_ != NULL)
        m->prev_->next_ = m->next_;
    else
        c->lists_[m->list_] = m->next_;
    if (m->next_ != NULL)
        m->next_->prev_ = m->prev_;
    else
        c->tails_[m->list_] = m->prev_;
    m->next_ = m->prev_ = NULL;
    m->list_ = CONN_NO_LIST;
}

static int list_of(int phase)
{
    switch (phase) {
    case CONN_PENDING: return CONN_PENDING_LIST;
    case CONN_QUEUED: return CONN_QUEUE_LIST;
    case CONN_SLEEPING: return CONN_SLEEP_LIST;
    case CONN_HELD: return CONN_HELD_LIST;
    default: return CONN_NO_LIST;
    }
}

void advlock_conn_move(advlock_conn *c, advlock_member *m, int phase)
{
    list_remove(c, m);
    m->phase_ = (uint8_t)phase;
    if (list_of(phase) != CONN_NO_LIST)
        list_add(c, m, list_of(phase));
}

int advlock_conn_try_mode(int sql, advlock_mode *mode)
{
    switch (sql) {
    case ADVLOCK_SQL_TRY_LOCK:
    case ADVLOCK_SQL_TRY_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_LOCK_FENCED:
    case ADVLOCK_SQL_LOCK:
    case ADVLOCK_SQL_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK:
    case ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_FENCED:
    case ADVLOCK_SQL_XACT_LOCK:
    case ADVLOCK_SQL_XACT_LOCK_GUARDED: *mode = ADVLOCK_EXCLUSIVE; return 1;
    case ADVLOCK_SQL_TRY_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_LOCK_SHARED:
    case ADVLOCK_SQL_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED: *mode = ADVLOCK_SHARED; return 1;
    default: return 0;
    }
}

int advlock_conn_is_xact_lock(int sql)
{
    switch (sql) {
    case ADVLOCK_SQL_TRY_XACT_LOCK:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_XACT_LOCK:
    case ADVLOCK_SQL_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_FENCED: return 1;
    default: return 0;
    }
}

int advlock_conn_is_unlock(int sql)
{
    return sql == ADVLOCK_SQL_UNLOCK || sql == ADVLOCK_SQL_UNLOCK_SHARED
           || sql == ADVLOCK_SQL_UNLOCK_GUARDED || sql == ADVLOCK_SQL_UNLOCK_SHARED_GUARDED;
}

void advlock_conn_say(advlock_member *m, const char *text)
{
    advlock_text t;
    advlock_text_init(&t, m->words_, sizeof m->words_);
    if (text != NULL)
        advlock_text_putn(&t, text, strcspn(text, "\n"));
}

/* m has news for the pump (advlock_conn_poll_event()). */
static void tell(advlock_conn *c, advlock_member *m, int news)
{
    if (m->news_ == 0) {
        m->news_next_ = NULL;
        if (c->news_tail_ != NULL)
            c->news_tail_->news_next_ = m;
        else
            c->news_ = m;
        c->news_tail_ = m;
    }
    m->news_ |= (uint8_t)news;
}

void advlock_conn_untell(advlock_conn *c, advlock_member *m)
{
    if (c->warned_member_ == m)
        c->warned_member_ = NULL;
    if (m->news_ == 0)
        return;
    /* m may be on no list of c's: news left unpolled on an engine set up
     * afresh since (advlock_conn_init()) are stale, dropped with m's. */
    advlock_member *before = NULL, *at = c->news_;
    while (at != NULL && at != m) {
        before = at;
        at = at->news_next_;
    }
    if (at == m) {
        if (before != NULL)
            before->news_next_ = m->news_next_;
        else
            c->news_ = m->news_next_;
        if (c->news_tail_ == m)
            c->news_tail_ = before;
    }
    m->news_next_ = NULL;
    m->news_ = 0;
}

/* Lock-delay's first step (the rest: conn_delay.c): m's acquire was
 * granted, but is not reported ACQUIRED before its mark is durable, and
 * another holder's lease waited out. The session holds the grant
 * meanwhile, in the exclusion table too; the time of its answer is where
 * the wait counts from. */
static int held_back(advlock_conn *c, advlock_member *m, const advlock_report *r)
{
    if (!m->acquiring_ || r->outcome != ADVLOCK_ACQUIRED || m->delay_ != DELAY_OFF
        || !advlock_machine_lock_delay(&m->machine_))
        return 0;
    m->delay_ = DELAY_TAKE;
    m->delay_end_ = DELAY_END_NONE;
    m->delay_late_ = DELAY_ON_TIME; /* a mark of an acquire given up may have been late */
    m->delay_at_ms_ = m->machine_.now_ms_;
    c->delaying_++;
    if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_ASKING)
        (void)advlock_peers_granted(&c->peers_, &m->peer_);
    advlock_conn_move(c, m, CONN_QUEUED);
    return 1;
}

/* m's operation ends with r: a grant lock-delay held back is marked (or
 * given back), a release's clear is over. */
static void delay_settle(advlock_conn *c, advlock_member *m, const advlock_report *r)
{
    if (m->delay_ == DELAY_OFF || m->delay_ == DELAY_MARKED)
        return;
    if (m->delay_ < DELAY_MARKED)
        c->delaying_--;
    m->delay_ = m->acquiring_ && r->outcome == ADVLOCK_ACQUIRED ? DELAY_MARKED : DELAY_OFF;
}

/* An operation ended: a grant, or a verify that found the lock, is held;
 * so is a lock whose release or verify failed (but on a connection given
 * up), which the session may still hold, and a transaction's lock
 * released, which its block holds (the
 * member keeps its key till it is released, lost or the block ends);
 * anything else leaves the table. */
static void finish(advlock_conn *c, advlock_member *m, const advlock_report *r)
{
    /* A server-side wait had the connection to itself: its end frees it. */
    if (m->acquiring_)
        c->waits_ = 0;
    if (held_back(c, m, r))
        return;
    delay_settle(c, m, r);
    m->report_ = *r;
    int on_held = !m->acquiring_ && !m->by_key_;
    if (m->verifying_) {
        m->verifying_ = 0;
        c->verifying_--;
    }
    /* A connection given up is closed by the pump, which ends the session
     * and its locks: nothing is held in doubt on it. */
    int in_doubt = r->outcome == ADVLOCK_FAILED && !c->given_up_;
    if (r->outcome == ADVLOCK_ACQUIRED || r->outcome == ADVLOCK_HELD
        || (on_held && (in_doubt || r->outcome == ADVLOCK_ENDS_WITH_TRANSACTION))) {
        /* A verify by key found the lock: held from now on, in its mode
         * (it asked as EXCLUSIVE, and no other member has the key). */
        if (m->by_key_ && advlock_peer_state(&m->peer_) == ADVLOCK_PEER_ASKING) {
            (void)advlock_peers_leave(&c->peers_, &m->peer_);
            (void)advlock_peers_ask(&c->peers_, &m->peer_, m->key_,
                                    (advlock_mode)m->machine_.mode_);
        }
        if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_ASKING)
            (void)advlock_peers_granted(&c->peers_, &m->peer_);
        advlock_conn_move(c, m, CONN_HELD);
    } else {
        (void)advlock_peers_leave(&c->peers_, &m->peer_);
        advlock_conn_move(c, m, CONN_DONE);
    }
    tell(c, m, NEWS_DONE);
}

void advlock_conn_follow(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    (void)now_ms;
    advlock_action next = advlock_next_action(&m->machine_);
    advlock_conn_take_up(c, m, &next);
}

void advlock_conn_take_up(advlock_conn *c, advlock_member *m, const advlock_action *next)
{
    switch (next->kind) {
    case ADVLOCK_ACTION_QUERY:
        if (next->sql == ADVLOCK_SQL_SESSION)
            c->session_asked_ = 1;
        advlock_conn_move(c, m, CONN_QUEUED);
        break;
    case ADVLOCK_ACTION_SLEEP: advlock_conn_move(c, m, CONN_SLEEPING); break;
    case ADVLOCK_ACTION_DONE: finish(c, m, next->report); break;
    default:
        /* NONE, or CANCEL_QUERY: a server-side wait's statement stays in
         * flight, its cancel request the queue's (advlock_conn_waiter()). */
        break;
    }
}

void advlock_conn_start_machine(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    if (!c->session_.checked && c->session_asked_) {
        advlock_conn_move(c, m, CONN_PENDING);
        return;
    }
    (void)advlock_set_session(&m->machine_, &c->session_);
    int64_t left =
        advlock_sub_saturating(m->timeout_ms_, advlock_sub_saturating(now_ms, m->started_ms_));
    if (m->acquiring_)
        (void)advlock_start_acquire_key(&m->machine_, m->key_, left > 0 ? left : 0, now_ms);
    else if (m->verifying_)
        (void)advlock_start_verify_key(&m->machine_, m->key_, now_ms);
    else
        (void)advlock_start_release_key(&m->machine_, m->key_, now_ms);
    advlock_conn_follow(c, m, now_ms);
}

void advlock_conn_session_answered(advlock_conn *c, int64_t now_ms)
{
    c->session_asked_ = 0;
    /* Taken whole first: a start may park a member again (a failed check
     * leaves the session unchecked, and the first restarted asks anew). */
    advlock_member *m = c->lists_[CONN_PENDING_LIST];
    c->lists_[CONN_PENDING_LIST] = c->tails_[CONN_PENDING_LIST] = NULL;
    while (m != NULL) {
        advlock_member *next = m->next_;
        m->list_ = CONN_NO_LIST;
        m->next_ = m->prev_ = NULL;
        advlock_conn_start_machine(c, m, now_ms);
        m = next;
    }
}

/* 1 when m's next statement, not yet sent, is the session check the
 * members parked behind it wait for: if m ends or fails before sending it,
 * another member asks (a row in flight is the engine's to wait for). */
static int asks_session(const advlock_member *m)
{
    advlock_action next = advlock_next_action(&m->machine_);
    return m->phase_ == CONN_QUEUED && next.kind == ADVLOCK_ACTION_QUERY
           && next.sql == ADVLOCK_SQL_SESSION;
}

int advlock_conn_session_queued(const advlock_conn *c)
{
    for (advlock_member *m = c->lists_[CONN_QUEUE_LIST]; m != NULL; m = m->next_)
        if (asks_session(m))
            return 1;
    return 0;
}

void advlock_conn_end(advlock_conn *c, advlock_member *m, advlock_outcome outcome, int failure,
                      int64_t now_ms)
{
    /* The machine may be waiting for an answer that now goes to the engine,
     * or was never started (pending): the report is its facts so far. */
    advlock_report r;
    const advlock_report *live = advlock_next_action(&m->machine_).report;
    if (m->phase_ != CONN_PENDING && live != NULL) {
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
    r.elapsed_ms = advlock_sub_saturating(now_ms, m->started_ms_);
    int asked = asks_session(m);
    finish(c, m, &r);
    if (asked)
        advlock_conn_session_answered(c, now_ms);
}

void advlock_conn_end_outside_block(advlock_conn *c, advlock_member *m)
{
    int64_t now_ms = m->machine_.now_ms_ > m->started_ms_ ? m->machine_.now_ms_ : m->started_ms_;
    advlock_conn_say(m, "a lock of transaction scope needs a transaction block, and the "
                        "connection is in none (the block ended, or a reset began a new session)");
    advlock_conn_end(c, m, ADVLOCK_FAILED, ADVLOCK_ESERVER, now_ms);
    advlock_text t;
    advlock_text_init(&t, m->report_.sqlstate, sizeof m->report_.sqlstate);
    advlock_text_put(&t, "25P01");
    advlock_text_init(&t, m->sqlstate_, sizeof m->sqlstate_);
    advlock_text_put(&t, "25P01");
}

void advlock_conn_end_waiting(advlock_conn *c, advlock_outcome outcome, int failure, int64_t now_ms)
{
    static const int waiting[] = {CONN_PENDING_LIST, CONN_QUEUE_LIST, CONN_SLEEP_LIST};
    for (size_t i = 0; i < sizeof waiting / sizeof waiting[0]; i++)
        while (c->lists_[waiting[i]] != NULL)
            advlock_conn_end(c, c->lists_[waiting[i]], outcome, failure, now_ms);
}

void advlock_conn_lose_held(advlock_conn *c, const char *sqlstate, const char *words,
                            advlock_lease_expiry expiry, int64_t now_ms)
{
    advlock_member *m;
    while ((m = c->lists_[CONN_HELD_LIST]) != NULL) {
        (void)advlock_peers_leave(&c->peers_, &m->peer_);
        advlock_conn_say(m, words);
        advlock_text t;
        advlock_text_init(&t, m->sqlstate_, sizeof m->sqlstate_);
        if (sqlstate != NULL)
            advlock_text_put(&t, sqlstate);
        m->lease_expiry_ = (uint8_t)expiry;
        advlock_conn_move(c, m, CONN_LOST);
        tell(c, m, NEWS_LOST);
        advlock_notify(&m->machine_, ADVLOCK_EVENT_LOST, m->words_, now_ms);
    }
}

void advlock_conn_fail(advlock_conn *c, advlock_member *m, advlock_result r, const char *sqlstate,
                       const char *words, int64_t now_ms)
{
    advlock_conn_say(m, words);
    /* A try let through but not sent leaves; a held key (a release's, an
     * undo's) stays taken as the machine's end decides. */
    if (advlock_peer_state(&m->peer_) == ADVLOCK_PEER_ASKING)
        (void)advlock_peers_leave(&c->peers_, &m->peer_);
    int asked = asks_session(m);
    advlock_mode mode;
    int try = advlock_conn_try_mode(advlock_next_action(&m->machine_).sql, &mode);
    (void)advlock_on_result(&m->machine_, r, sqlstate, m->words_, now_ms);
    /* A fenced try's machine undoes a failed try with an unlock, as the
     * server may have run it; this one never left the process, and an
     * unlock would take another member's hold of the key: it is answered
     * here, nothing held. */
    advlock_action undo = advlock_next_action(&m->machine_);
    if (try && undo.kind == ADVLOCK_ACTION_QUERY && advlock_conn_is_unlock(undo.sql))
        (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_FALSE, NULL, NULL, now_ms);
    advlock_conn_follow(c, m, now_ms);
    if (asked && !asks_session(m))
        advlock_conn_session_answered(c, now_ms);
}

/* The answer the server gives a try-lock for a key another session holds:
 * FALSE, the guarded rows' too (their NULL would say the claimed session
 * was missed); the member backs off exactly as then. */
static void answer_busy(advlock_member *m, advlock_sql sql, int64_t now_ms)
{
    if (advlock_sql_answer(sql) == ADVLOCK_ANSWER_FENCED)
        (void)advlock_on_fenced(&m->machine_, 0, 0, now_ms);
    else
        (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_FALSE, NULL, NULL, now_ms);
}

/* A try past the share of the server's lock table is answered as the
 * server would answer a limit of its configuration (53400): FAILED, with
 * the core's words. Every peer in the table counts, a cancelled member's
 * kept key too: each may hold a lock. */
static int past_capacity(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    char words[ADVLOCK_CONN_WORDS_MAX];
    if (c->capacity_read_ != CAPACITY_READ
        || advlock_capacity_refuse(&c->capacity_, (int64_t)advlock_peers_count(&c->peers_), words,
                                   sizeof words)
               != 1)
        return 0;
    advlock_conn_fail(c, m, ADVLOCK_RESULT_SERVER_ERROR, "53400", words, now_ms);
    return 1;
}

int advlock_conn_may_send(advlock_conn *c, advlock_member *m, const advlock_action *act,
                          int64_t now_ms)
{
    advlock_mode mode;
    /* A member sent again (its statement was aborted with the batch) is
     * still in the table. */
    if (!advlock_conn_try_mode(act->sql, &mode)
        || advlock_peer_state(&m->peer_) != ADVLOCK_PEER_OUT)
        return 1;
    if (past_capacity(c, m, now_ms))
        return 0;
    if (advlock_peers_ask(&c->peers_, &m->peer_, act->param, mode) == 1)
        return 1;
    answer_busy(m, act->sql, now_ms);
    advlock_conn_follow(c, m, now_ms);
    return 0;
}

void advlock_conn_warn(advlock_conn *c, advlock_member *m, const char *sqlstate, const char *words,
                       int64_t now_ms)
{
    c->warned_ = 1;
    c->warned_member_ = m;
    advlock_text t;
    advlock_text_init(&t, c->warning_sqlstate_, sizeof c->warning_sqlstate_);
    if (sqlstate != NULL && strlen(sqlstate) == 5)
        advlock_text_put(&t, sqlstate);
    if (m != NULL)
        advlock_notify(&m->machine_, ADVLOCK_EVENT_WARNING, words, now_ms);
}
