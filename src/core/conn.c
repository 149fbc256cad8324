/*
 * The connection engine's API: starting, cancelling and ending members'
 * operations, the lease and the lock table's share, and what the pump
 * reports of the connection (time, a close, a reset, a transaction block).
 * Members live in conn_members.c, the lease in conn_lease.c, the statements
 * in flight in conn_queue.c. docs/design.md, "The connection".
 */
#include "conn.h"

#include <string.h>

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(advlock_member) == ADVLOCK_MEMBER_SIZE, "advlock_member's size is fixed");
_Static_assert(sizeof(advlock_conn_slot) == ADVLOCK_CONN_SLOT_SIZE, "a slot's size is fixed");
_Static_assert(sizeof(advlock_conn) == ADVLOCK_CONN_SIZE, "advlock_conn's size is fixed");
#endif

int advlock_conn_init(advlock_conn *c, advlock_conn_slot *slots, size_t nslots,
                      advlock_peer **buckets, size_t nbuckets, int client_pid, uint64_t token,
                      unsigned caps)
{
    if (c == NULL || slots == NULL || nslots < 2 || nslots > INT32_MAX || buckets == NULL
        || token == 0)
        return ADVLOCK_EINVAL;
    advlock_conn fresh;
    memset(&fresh, 0, sizeof fresh);
    if (advlock_peers_init(&fresh.peers_, buckets, nbuckets) != 0)
        return ADVLOCK_EINVAL;
    (void)advlock_session_init(&fresh.session_, client_pid, token);
    fresh.slots_ = slots;
    fresh.nslots_ = (uint32_t)nslots;
    fresh.caps_ = (uint8_t)(caps
                            & (ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL
                               | ADVLOCK_CAPS_ONE_MEMBER));
    fresh.capacity_share_ = ADVLOCK_CAPACITY_SHARE_DEFAULT;
    fresh.owed_ = fresh.owed_tail_ = -1;
    /* Every slot's keeper part starts free. */
    for (size_t i = 0; i < nslots; i++) {
        memset(&slots[i], 0, sizeof slots[i]);
        slots[i].keeper_ = -1;
        slots[i].kept_next_ = i + 1 < nslots ? (int32_t)(i + 1) : -1;
    }
    fresh.free_keepers_ = 0;
    *c = fresh;
    return 0;
}

void advlock_member_init(advlock_member *m)
{
    if (m == NULL)
        return;
    memset(m, 0, sizeof *m);
    advlock_machine_init(&m->machine_);
    advlock_peer_init(&m->peer_);
}

static int busy(const advlock_member *m)
{
    return m->phase_ == CONN_PENDING || m->phase_ == CONN_QUEUED || m->phase_ == CONN_SENT
           || m->phase_ == CONN_SLEEPING;
}

/* A member's operation begins: its report and words are the new one's. */
static void begin(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    m->conn_ = c;
    m->started_ms_ = now_ms;
    m->words_[0] = '\0';
    m->sqlstate_[0] = '\0';
    m->lease_expiry_ = ADVLOCK_LEASE_LIVE;
}

/* 1 when m, holding nothing and idle, may start an operation on c. */
static int may_start(const advlock_conn *c, const advlock_member *m)
{
    return !c->given_up_ && !c->must_close_ && !busy(m) && m->phase_ != CONN_HELD
           && (m->conn_ == NULL || m->conn_ == c);
}

/* 1 when a member of c holds key: a server-side wait for it would be
 * granted at once by the session's re-entrant lock, beside that hold. */
static int held_here(const advlock_conn *c, int64_t key)
{
    for (const advlock_member *m = c->lists_[CONN_HELD_LIST]; m != NULL; m = m->next_)
        if (m->key_ == key)
            return 1;
    return 0;
}

static advlock_options options_or_defaults(const advlock_options *o)
{
    advlock_options chosen;
    if (o != NULL)
        chosen = *o;
    else
        advlock_options_init(&chosen);
    return chosen;
}

int advlock_conn_start_acquire_key(advlock_conn *c, advlock_member *m, int64_t key,
                                   int64_t timeout_ms, const advlock_options *o, int64_t now_ms)
{
    if (c == NULL || m == NULL || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (!may_start(c, m) || c->lease_expired_)
        return ADVLOCK_EMISUSE;
    advlock_options chosen = options_or_defaults(o);
    /* The lease is the connection's. A server-side wait holds its session
     * up: no other member may use it meanwhile. Held members need nothing
     * of it but the watch, unless a lease wants heartbeats: a caller taking
     * names one after another (advlock run --wait A B) waits for the next
     * while holding the first. */
    int server_wait = chosen.wait == ADVLOCK_WAIT_SERVER;
    /* Lock-delay records this holder's stop bound, which only the
     * connection's lease gives. */
    if (chosen.lease_ms != 0 || (server_wait && !(c->caps_ & ADVLOCK_CAPS_CANCEL))
        || (chosen.lock_delay && !c->lease_on_))
        return ADVLOCK_EINVAL;
    /* Inside the caller's transaction block lock-delay's mark would commit
     * or roll back with the block (transaction scope with it is refused as
     * an option, below). */
    if (c->waits_ || (chosen.scope == ADVLOCK_TRANSACTION && !c->in_block_)
        || (chosen.lock_delay && chosen.scope == ADVLOCK_SESSION && c->in_block_)
        || (server_wait
            && (advlock_conn_busy(c) > 0 || advlock_conn_outstanding(c) > 0
                || (c->lists_[CONN_HELD_LIST] != NULL && (c->lease_on_ || held_here(c, key))))))
        return ADVLOCK_EMISUSE;
    advlock_machine_init(&m->machine_);
    int rc = advlock_set_options(&m->machine_, &chosen);
    if (rc != 0)
        return rc;
    c->xact_ |= (uint8_t)(chosen.scope == ADVLOCK_TRANSACTION);
    /* The last operation's events, unpolled, would come after the new
     * one's and say the wrong thing of it (an old loss after a new grant). */
    advlock_conn_untell(c, m);
    begin(c, m, now_ms);
    m->key_ = key;
    m->timeout_ms_ = timeout_ms;
    m->acquiring_ = 1;
    m->by_key_ = 0;
    m->delay_ = DELAY_OFF;
    c->waits_ = (uint8_t)server_wait;
    advlock_conn_start_machine(c, m, now_ms);
    return 0;
}

int advlock_conn_start_acquire(advlock_conn *c, advlock_member *m, const char *name, size_t len,
                               int64_t timeout_ms, const advlock_options *o, int64_t now_ms)
{
    int64_t key; /* a NULL name of len > 0: EINVAL from the derivation */
    int rc = advlock_derive_key(name, len, &key);
    return rc != 0 ? rc : advlock_conn_start_acquire_key(c, m, key, timeout_ms, o, now_ms);
}

/* Starts a release or a verify (verify) of the lock m holds. */
static int start_on_held(advlock_conn *c, advlock_member *m, int verify, int64_t now_ms)
{
    if (c == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (c->given_up_ || c->waits_ || m->conn_ != c || m->phase_ != CONN_HELD)
        return ADVLOCK_EMISUSE;
    m->by_key_ = 0;
    (void)advlock_set_session(&m->machine_, &c->session_);
    int rc = verify ? advlock_start_verify_key(&m->machine_, m->key_, now_ms)
                    : advlock_start_release_key(&m->machine_, m->key_, now_ms);
    if (rc != 0)
        return rc;
    begin(c, m, now_ms);
    m->acquiring_ = 0;
    m->verifying_ = (uint8_t)verify;
    c->verifying_ += (uint32_t)verify;
    /* Lock-delay: the release clears the holder's mark before its unlock. */
    if (!verify && m->delay_ == DELAY_MARKED)
        m->delay_ = DELAY_CLEAR;
    advlock_conn_follow(c, m, now_ms);
    return 0;
}

int advlock_conn_start_release(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    return start_on_held(c, m, 0, now_ms);
}

int advlock_conn_start_verify(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    return start_on_held(c, m, 1, now_ms);
}

/* Starts a release or a verify (verify) of key, which m does not hold:
 * the session may hold it without the engine knowing (taken by a statement
 * of the caller's, or before the engine). While it runs, m asks for the key
 * in the exclusion table as EXCLUSIVE, whatever its mode: a release must
 * not take another member's hold, and a verify must not find one (a
 * member's shared grant meanwhile would be counted twice). */
static int start_by_key(advlock_conn *c, advlock_member *m, int64_t key, const advlock_options *o,
                        int verify, int64_t now_ms)
{
    if (c == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (m->phase_ == CONN_HELD && m->conn_ == c && m->key_ == key)
        return start_on_held(c, m, verify, now_ms);
    if (!may_start(c, m) || c->waits_)
        return ADVLOCK_EMISUSE;
    advlock_options chosen = options_or_defaults(o);
    if (chosen.lease_ms != 0)
        return ADVLOCK_EINVAL;
    /* Outside a block there is no transaction's lock to release or find;
     * a verify that found one would hold it past the block. Under the
     * lease a lock found would be held with no heartbeat to keep it. */
    if ((chosen.scope == ADVLOCK_TRANSACTION && !c->in_block_) || (verify && c->lease_on_))
        return ADVLOCK_EMISUSE;
    advlock_machine_init(&m->machine_);
    int rc = advlock_set_options(&m->machine_, &chosen);
    if (rc != 0)
        return rc;
    if (advlock_peers_ask(&c->peers_, &m->peer_, key, ADVLOCK_EXCLUSIVE) != 1)
        return ADVLOCK_EMISUSE;
    c->xact_ |= (uint8_t)(chosen.scope == ADVLOCK_TRANSACTION);
    advlock_conn_untell(c, m);
    begin(c, m, now_ms);
    m->key_ = key;
    m->timeout_ms_ = 0;
    m->acquiring_ = 0;
    m->by_key_ = 1;
    m->verifying_ = (uint8_t)verify;
    c->verifying_ += (uint32_t)verify;
    advlock_conn_start_machine(c, m, now_ms);
    return 0;
}

int advlock_conn_start_release_key(advlock_conn *c, advlock_member *m, int64_t key,
                                   const advlock_options *o, int64_t now_ms)
{
    return start_by_key(c, m, key, o, 0, now_ms);
}

int advlock_conn_start_verify_key(advlock_conn *c, advlock_member *m, int64_t key,
                                  const advlock_options *o, int64_t now_ms)
{
    return start_by_key(c, m, key, o, 1, now_ms);
}

int advlock_conn_cancel(advlock_conn *c, advlock_member *m, int64_t now_ms)
{
    if (c == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (m->conn_ != c || !busy(m) || !m->acquiring_)
        return ADVLOCK_EMISUSE;
    if (m->delay_ != DELAY_OFF) {
        advlock_conn_delay_cancel(c, m, now_ms);
        return 0;
    }
    if (m->phase_ == CONN_SLEEPING) {
        (void)advlock_cancel(&m->machine_, now_ms);
        advlock_conn_follow(c, m, now_ms);
    } else {
        /* The machine ends these itself, and m's DONE event comes then: a
         * statement of an acquire that may wait on the server (its cancel
         * request goes out when the server runs it, advlock_conn_waiter(),
         * and a grant meanwhile is unlocked), and an unlock still to send
         * that undoes a grant the session may hold. So does a try of
         * transaction scope in flight: its grant cannot be unlocked. */
        advlock_action next = advlock_next_action(&m->machine_);
        int undoing = m->phase_ == CONN_QUEUED && next.kind == ADVLOCK_ACTION_QUERY
                      && advlock_conn_is_unlock(next.sql);
        int xact = m->machine_.scope_ == ADVLOCK_TRANSACTION;
        /* One statement at a time, the caller waits for the answer as it
         * waits for any (the single-lock adapter's cancel). */
        int alone = !(c->caps_ & ADVLOCK_CAPS_PIPELINE);
        if (((c->waits_ || xact || alone) && m->phase_ == CONN_SENT) || undoing) {
            (void)advlock_cancel(&m->machine_, now_ms);
            return 0;
        }
        if (m->phase_ == CONN_SENT)
            advlock_conn_detach(c, m);
        advlock_conn_end(c, m, ADVLOCK_CANCELLED, 0, now_ms);
    }
    /* The caller knows the outcome and may free m now: no event of it. */
    advlock_conn_untell(c, m);
    return 0;
}

int advlock_conn_set_lease(advlock_conn *c, int64_t lease_ms, int64_t stop_ms)
{
    if (c == NULL)
        return ADVLOCK_EINVAL;
    advlock_lease_plan p;
    memset(&p, 0, sizeof p);
    if (lease_ms != 0) {
        int rc = advlock_lease_plan_init(&p, lease_ms, stop_ms);
        if (rc != 0)
            return rc;
    }
    /* A lease that ran out stays out: its connection must go. */
    if (advlock_conn_busy(c) > 0 || c->lease_expired_)
        return ADVLOCK_EMISUSE;
    /* Held locks keep the lease they were taken under as it runs: the same
     * plan again changes nothing. Another would leave them unguarded (a
     * lease set for the next acquire, whose setup bounds the whole session,
     * while nothing beats for the locks held before it). */
    if (c->lists_[CONN_HELD_LIST] != NULL) {
        const advlock_lease_plan *now = advlock_lease_plan_of(&c->lease_);
        int same =
            c->lease_on_ ? now->lease_ms == lease_ms && now->stop_ms == stop_ms : lease_ms == 0;
        return same ? 0 : ADVLOCK_EMISUSE;
    }
    if (lease_ms == 0) {
        memset(&c->lease_, 0, sizeof c->lease_);
        c->lease_on_ = 0;
        return 0;
    }
    (void)advlock_lease_init(&c->lease_, &p);
    c->lease_on_ = 1;
    advlock_conn_lease_restart(c);
    return 0;
}

int advlock_conn_set_capacity_share(advlock_conn *c, int percent)
{
    if (c == NULL || percent < 1 || percent > 100)
        return ADVLOCK_EINVAL;
    c->capacity_share_ = (uint8_t)percent;
    c->capacity_.share_percent = percent;
    return 0;
}

/* The lists of members under way with no statement in flight. */
static const int waiting_lists[] = {CONN_PENDING_LIST, CONN_QUEUE_LIST, CONN_SLEEP_LIST};
#define WAITING_LISTS (sizeof waiting_lists / sizeof waiting_lists[0])

/* A lease that ran out while a member verified its lock (behind a proxy
 * the heartbeat waits behind the verify): a verify counts as holding, so
 * that lock is lost with the others, the verify's answer nobody's. */
static void lose_verifies(advlock_conn *c, int64_t now_ms)
{
    if (!c->lease_expired_ || c->verifying_ == 0)
        return;
    advlock_member *m;
    while ((m = advlock_conn_verify_in_flight(c)) != NULL) {
        advlock_conn_detach(c, m);
        advlock_conn_move(c, m, CONN_HELD);
    }
    for (size_t i = 0; i < WAITING_LISTS; i++) {
        m = c->lists_[waiting_lists[i]];
        while (m != NULL) {
            advlock_member *next = m->next_;
            if (m->verifying_ && !m->by_key_)
                advlock_conn_move(c, m, CONN_HELD);
            m = next;
        }
    }
    for (m = c->lists_[CONN_HELD_LIST]; m != NULL; m = m->next_) {
        c->verifying_ -= m->verifying_;
        m->verifying_ = 0;
    }
    char message[ADVLOCK_CONN_WORDS_MAX];
    advlock_lease_expiry why = advlock_conn_lease_loss(c, "", message, sizeof message);
    advlock_conn_lose_held(c, "", message, why, now_ms);
}

/* What advlock_conn_on_timer() does with a timer armed. Kept out of line
 * (the compiler would merge it back), so that the call of every turn with
 * none armed costs its test only, not this body's saved registers. */
__attribute__((noinline)) static void on_timer(advlock_conn *c, int64_t now_ms)
{
    advlock_member *m = c->lists_[CONN_SLEEP_LIST];
    while (m != NULL) {
        advlock_member *next = m->next_;
        if (m->delay_ == DELAY_WAIT) {
            advlock_conn_delay_tend(c, m, now_ms);
            m = next;
            continue;
        }
        (void)advlock_on_timer(&m->machine_, now_ms);
        if (advlock_next_action(&m->machine_).kind != ADVLOCK_ACTION_SLEEP)
            advlock_conn_follow(c, m, now_ms);
        m = next;
    }
    advlock_member *w = advlock_conn_waiter(c);
    if (w != NULL)
        (void)advlock_on_timer(&w->machine_, now_ms);
    if (c->delaying_ > 0)
        advlock_conn_marks_tend(c, now_ms);
    advlock_conn_lease_tend(c, now_ms);
    lose_verifies(c, now_ms);
}

void advlock_conn_on_timer(advlock_conn *c, int64_t now_ms)
{
    if (c != NULL && advlock_conn_timer_armed(c))
        on_timer(c, now_ms);
}

int64_t advlock_conn_next_wake(const advlock_conn *c)
{
    if (c == NULL || !advlock_conn_timer_armed(c))
        return INT64_MAX;
    int64_t at = advlock_conn_lease_wake(c);
    for (const advlock_member *m = c->lists_[CONN_SLEEP_LIST]; m != NULL; m = m->next_) {
        int64_t wake = m->delay_ == DELAY_WAIT ? advlock_conn_delay_wake(m)
                                               : advlock_next_action(&m->machine_).wake_at_ms;
        if (wake < at)
            at = wake;
    }
    /* A lock-delay mark's deadline, or its cancel request's next. */
    if (c->delaying_ > 0) {
        int64_t wake = advlock_conn_marks_wake(c);
        if (wake < at)
            at = wake;
    }
    /* A wait's deadline; a cancel it asks for is a statement to poll. */
    const advlock_member *w = advlock_conn_waiter(c);
    if (w != NULL) {
        advlock_action next = advlock_next_action(&w->machine_);
        if (next.kind == ADVLOCK_ACTION_QUERY && next.wake_at_ms < at)
            at = next.wake_at_ms;
    }
    return at;
}

/* The server session is gone: a member waiting to release or verify the
 * lock it held there (or a key there, parked behind the session check), or
 * to undo a grant it got there, has nothing left to act on; it ends FAILED
 * as a lost connection (and a releaser, whose lock was in doubt, turns
 * LOST with the others). Acquirers holding nothing go on, on the next
 * session. */
static void end_dead_waiting(advlock_conn *c, int64_t now_ms)
{
    for (size_t i = 0; i < WAITING_LISTS; i++) {
        advlock_member *m = c->lists_[waiting_lists[i]];
        while (m != NULL) {
            advlock_member *next = m->next_;
            if (!m->acquiring_ || advlock_peer_state(&m->peer_) != ADVLOCK_PEER_OUT)
                advlock_conn_end(c, m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, now_ms);
            m = next;
        }
    }
}

void advlock_conn_on_closed(advlock_conn *c, const char *sqlstate, const char *words,
                            int64_t now_ms)
{
    if (c == NULL)
        return;
    advlock_conn_drain(c, words, now_ms);
    /* Nothing waiting can go anywhere now (a later start fails as its
     * statement's send does): each ends in the close's words. */
    for (size_t i = 0; i < WAITING_LISTS; i++)
        for (advlock_member *m = c->lists_[waiting_lists[i]]; m != NULL; m = m->next_)
            advlock_conn_say(m, words);
    advlock_conn_end_waiting(c, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, now_ms);
    advlock_conn_lose_held(c, sqlstate, words, ADVLOCK_LEASE_LIVE, now_ms);
}

void advlock_conn_give_up(advlock_conn *c, int failure, const char *words, int64_t now_ms)
{
    if (c == NULL)
        return;
    /* Closing the connection ends the session and its locks: nothing is
     * held in doubt from here on (advlock_conn_end()). */
    c->given_up_ = 1;
    /* Every member with a statement in flight ends here, its statement
     * left to the engine, which forgets it below. */
    advlock_member *m;
    while ((m = advlock_conn_first_in_flight(c, -1)) != NULL) {
        advlock_conn_detach(c, m);
        advlock_conn_end(c, m, ADVLOCK_FAILED, failure, now_ms);
    }
    advlock_conn_end_waiting(c, ADVLOCK_FAILED, failure, now_ms);
    advlock_conn_lose_held(c, "", words, ADVLOCK_LEASE_LIVE, now_ms);
    advlock_conn_drain(c, words, now_ms);
}

void advlock_conn_let_go(advlock_conn *c, advlock_member *m)
{
    if (c == NULL || m == NULL || m->conn_ != c || m->phase_ != CONN_HELD)
        return;
    (void)advlock_peers_leave(&c->peers_, &m->peer_);
    advlock_conn_move(c, m, CONN_DONE);
}

void advlock_conn_forget(advlock_conn *c, int64_t now_ms)
{
    if (c == NULL)
        return;
    advlock_member *m;
    while ((m = advlock_conn_first_in_flight(c, -1)) != NULL) {
        advlock_conn_detach(c, m);
        advlock_conn_end(c, m, ADVLOCK_CANCELLED, 0, now_ms);
    }
    advlock_conn_end_waiting(c, ADVLOCK_CANCELLED, 0, now_ms);
    while ((m = c->lists_[CONN_HELD_LIST]) != NULL)
        advlock_conn_let_go(c, m);
    advlock_conn_drain(c, "", now_ms);
}

int advlock_conn_on_reset(advlock_conn *c, int client_pid, uint64_t token, int64_t now_ms)
{
    if (c == NULL || token == 0)
        return ADVLOCK_EINVAL;
    char words[ADVLOCK_CONN_WORDS_MAX];
    advlock_text t;
    advlock_text_init(&t, words, sizeof words);
    advlock_text_put(&t, "the connection was reset: server session ");
    advlock_text_put_int(&t, c->session_.client_pid);
    advlock_text_put(&t, ", which held it, was replaced by ");
    advlock_text_put_int(&t, client_pid);
    /* The new session first, so that members restarted below check it. */
    (void)advlock_session_init(&c->session_, client_pid, token);
    c->prepared_ = c->unnamed_ = c->preparing_ = 0;
    c->capacity_read_ = CAPACITY_UNREAD;
    c->provisional_ = c->in_block_ = 0;
    c->given_up_ = c->must_close_ = 0;
    advlock_conn_lease_restart(c);
    /* The old session's statements died with it: each is answered lost
     * before the holders hear of the loss, so that nothing the old session
     * said (a grant, a failed release) counts on the new one. */
    advlock_conn_drain(c, words, now_ms);
    end_dead_waiting(c, now_ms);
    advlock_conn_lose_held(c, "", words, ADVLOCK_LEASE_LIVE, now_ms);
    /* The check the parked members waited for died with the old session
     * unless a member still queued is to send it. */
    if (c->session_asked_ && !advlock_conn_session_queued(c))
        advlock_conn_session_answered(c, now_ms);
    return 0;
}

/* The transaction block ended: an acquire of transaction scope still under
 * way has no block to take its lock in any more, and ends so. A try in
 * flight is the engine's, its key kept until it answers (a grant went with
 * the block: nothing to give back). */
static void end_transaction_acquires(advlock_conn *c)
{
    advlock_member *m;
    while ((m = advlock_conn_first_in_flight(c, ADVLOCK_TRANSACTION)) != NULL) {
        advlock_conn_detach(c, m);
        advlock_conn_move(c, m, CONN_IDLE);
        advlock_conn_end_outside_block(c, m);
    }
    for (size_t i = 0; i < WAITING_LISTS; i++) {
        m = c->lists_[waiting_lists[i]];
        while (m != NULL) {
            advlock_member *next = m->next_;
            if (m->machine_.scope_ == ADVLOCK_TRANSACTION)
                advlock_conn_end_outside_block(c, m);
            m = next;
        }
    }
}

/* 1 when a member of transaction scope is in flight, waiting or held. */
static int any_of_transaction_scope(const advlock_conn *c)
{
    if (advlock_conn_first_in_flight(c, ADVLOCK_TRANSACTION) != NULL)
        return 1;
    static const int lists[] = {CONN_PENDING_LIST, CONN_QUEUE_LIST, CONN_SLEEP_LIST,
                                CONN_HELD_LIST};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (const advlock_member *m = c->lists_[lists[i]]; m != NULL; m = m->next_)
            if (m->machine_.scope_ == ADVLOCK_TRANSACTION)
                return 1;
    return 0;
}

void advlock_conn_on_transaction(advlock_conn *c, int in_block)
{
    if (c == NULL)
        return;
    c->in_block_ = (uint8_t)(in_block != 0);
    if (in_block && c->delaying_ > 0)
        advlock_conn_delay_block_began(c);
    /* With no member of transaction scope started since a block last
     * ended, there is none to end (most calls: before each operation). */
    if (in_block || (!c->xact_ && !c->provisional_))
        return;
    end_transaction_acquires(c);
    advlock_member *m = c->lists_[CONN_HELD_LIST];
    while (m != NULL) {
        advlock_member *next = m->next_;
        if (m->machine_.scope_ == ADVLOCK_TRANSACTION)
            advlock_conn_let_go(c, m);
        m = next;
    }
    c->xact_ = (uint8_t)any_of_transaction_scope(c);
    if (!c->provisional_)
        return;
    c->provisional_ = 0;
    (void)advlock_session_init(&c->session_, c->session_.client_pid, c->session_.token);
}

const advlock_session *advlock_conn_session(const advlock_conn *c)
{
    return c != NULL ? &c->session_ : NULL;
}

size_t advlock_conn_slots(const advlock_conn *c)
{
    return c != NULL ? c->nslots_ : 0;
}

size_t advlock_conn_busy(const advlock_conn *c)
{
    if (c == NULL)
        return 0;
    size_t n = 0;
    static const int lists[] = {CONN_PENDING_LIST, CONN_QUEUE_LIST, CONN_SLEEP_LIST};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (const advlock_member *m = c->lists_[lists[i]]; m != NULL; m = m->next_)
            n++;
    return n + advlock_conn_in_flight(c);
}

int advlock_conn_watching(const advlock_conn *c)
{
    return c != NULL && (c->count_ > 0 || c->lists_[CONN_HELD_LIST] != NULL);
}

/* A warning for m (NULL: the connection's statement) in words, kept for
 * its event; m's event callback hears it at once. */
int advlock_conn_on_notice(advlock_conn *c, const char *sqlstate, const char *words, int64_t now_ms)
{
    if (c == NULL)
        return 0;
    advlock_statement head;
    advlock_member *m = advlock_conn_head(c, &head) ? head.member : NULL;
    if (m != NULL)
        advlock_conn_delay_notice(m, head.sql, sqlstate, words);
    advlock_text t;
    advlock_text_init(&t, c->warning_, sizeof c->warning_);
    if (words != NULL)
        advlock_text_putn(&t, words, strcspn(words, "\n"));
    advlock_conn_warn(c, m, sqlstate, c->warning_, now_ms);
    return m != NULL;
}

void advlock_conn_on_cancel_failed(advlock_conn *c, advlock_member *m, const char *why,
                                   int64_t now_ms)
{
    if (c == NULL)
        return;
    advlock_text t;
    advlock_text_init(&t, c->warning_, sizeof c->warning_);
    advlock_text_put(&t, "could not send a cancel request: ");
    if (why != NULL)
        advlock_text_putn(&t, why, strcspn(why, "\n"));
    /* m is the pump's word, and may be freed since (cancelled): it is
     * read only when it is the member whose cancel request this was. */
    advlock_member *w = advlock_conn_cancel_target(c);
    advlock_conn_warn(c, m != NULL && m == w ? w : NULL, NULL, c->warning_, now_ms);
}

const char *advlock_conn_warning(const advlock_conn *c)
{
    return c != NULL ? c->warning_ : "";
}

const char *advlock_conn_warning_sqlstate(const advlock_conn *c)
{
    return c != NULL ? c->warning_sqlstate_ : "";
}

int advlock_conn_poll_event(advlock_conn *c, advlock_conn_event *ev)
{
    if (c == NULL || ev == NULL)
        return 0;
    if (c->warned_) {
        c->warned_ = 0;
        ev->kind = ADVLOCK_CONN_WARNING;
        ev->member = c->warned_member_;
        c->warned_member_ = NULL;
        return 1;
    }
    if (c->news_ == NULL)
        return 0;
    advlock_member *m = c->news_;
    ev->member = m;
    if (m->news_ & NEWS_DONE) {
        ev->kind = ADVLOCK_CONN_DONE;
        m->news_ &= (uint8_t)~NEWS_DONE;
    } else {
        ev->kind = ADVLOCK_CONN_LOST;
        m->news_ = 0;
    }
    if (m->news_ == 0) {
        c->news_ = m->news_next_;
        if (c->news_ == NULL)
            c->news_tail_ = NULL;
        m->news_next_ = NULL;
    }
    return 1;
}

int advlock_member_busy(const advlock_member *m)
{
    return m != NULL && busy(m);
}

int advlock_member_sleeping(const advlock_member *m)
{
    return m != NULL && m->phase_ == CONN_SLEEPING;
}

int advlock_member_held(const advlock_member *m)
{
    return m != NULL && m->phase_ == CONN_HELD;
}

int advlock_member_lost(const advlock_member *m)
{
    return m != NULL && m->phase_ == CONN_LOST;
}

const advlock_report *advlock_member_report(const advlock_member *m)
{
    if (m == NULL)
        return NULL;
    return m->phase_ == CONN_DONE || m->phase_ == CONN_HELD || m->phase_ == CONN_LOST ? &m->report_
                                                                                      : NULL;
}

const char *advlock_member_words(const advlock_member *m)
{
    return m != NULL ? m->words_ : "";
}

const char *advlock_member_sqlstate(const advlock_member *m)
{
    return m != NULL ? m->sqlstate_ : "";
}

advlock_lease_expiry advlock_member_lease_expiry(const advlock_member *m)
{
    return m != NULL ? (advlock_lease_expiry)m->lease_expiry_ : ADVLOCK_LEASE_LIVE;
}

/* A pump's turn in one call: here, over the API, as a pump would make the
 * same steps (conn_queue.c, below, never calls back up for the timer). */
int advlock_conn_turn(advlock_conn *c, const advlock_answer *a, advlock_statement *st,
                      int64_t now_ms, int64_t *wake)
{
    if (c == NULL || st == NULL || (a != NULL && advlock_conn_on_answer(c, a, now_ms) != 0))
        return ADVLOCK_TURN_REFUSED;
    if (advlock_conn_timer_armed(c) && advlock_conn_next_wake(c) <= now_ms)
        on_timer(c, now_ms);
    int found = advlock_conn_poll_statement(c, st, now_ms) ? ADVLOCK_TURN_STATEMENT : 0;
    /* The events' queue, as advlock_conn_poll_event() reads it. */
    if (c->news_ != NULL || c->warned_)
        found |= ADVLOCK_TURN_EVENTS;
    if (wake != NULL)
        *wake = advlock_conn_next_wake(c);
    return found;
}
