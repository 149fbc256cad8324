/*
 * A lock set's lease: the connection's, one for every member (docs/libpq.md,
 * "Leases" and "Lock sets"). The core's advlock_lease decides; this file
 * sends its statements through the set's pipeline: the setup alone, before
 * the first try-lock, and while any member holds a lock a heartbeat at a
 * time, each in a batch of its own, so that no other statement's failure
 * can make the server skip it. The first grant anchors the lease at the
 * send of the try that took it; later grants ride on it (the server heard
 * from this client after the anchor, so the stop deadline stays early
 * enough for them too).
 */
#include "lockset.h"

#include <string.h>

static int setup_holds(advlock_lease_setup s)
{
    return s == ADVLOCK_LEASE_APPLIED || s == ADVLOCK_LEASE_UNIX_SOCKET
           || s == ADVLOCK_LEASE_PROXIED;
}

/* A fresh lease under plan p (NULL: the one running). */
static void start_lease(advlock_pq_lockset *s, const advlock_lease_plan *p)
{
    advlock_lease_plan plan = *p;
    (void)advlock_lease_init(&s->lease_, &plan);
    s->lease_query_ = LS_LEASE_NONE;
    s->lease_holding_ = 0;
    s->lease_expired_ = 0;
}

int advlock_pq_lockset_set_lease(advlock_pq_lockset *set, int64_t lease_ms, int64_t stop_ms)
{
    if (set == NULL)
        return ADVLOCK_EINVAL;
    /* A lease that ran out stays out: its connection must go. */
    if (set->conn_ == NULL || advlock_pq_lockset_busy(set) > 0 || set->lists_[LS_HELD_LIST] != NULL
        || set->lease_expired_)
        return ADVLOCK_EMISUSE;
    if (lease_ms == 0) {
        memset(&set->lease_, 0, sizeof set->lease_);
        set->lease_on_ = 0;
        return 0;
    }
    advlock_lease_plan p;
    int rc = advlock_lease_plan_init(&p, lease_ms, stop_ms);
    if (rc != 0)
        return rc;
    start_lease(set, &p);
    set->lease_on_ = 1;
    return 0;
}

void advlock_pq_ls_lease_restart(advlock_pq_lockset *s)
{
    if (s->lease_on_)
        start_lease(s, advlock_lease_plan_of(&s->lease_));
}

int advlock_pq_ls_lease_needs_setup(const advlock_pq_lockset *s, const advlock_action *act)
{
    advlock_mode mode;
    return s->lease_on_ && advlock_pq_ls_try_mode(act->sql, &mode)
           && !setup_holds(advlock_lease_setup_result(&s->lease_));
}

/* Sends the lease's statement, in a batch of its own; 0 if it could not
 * go (a broken connection), which is then its answer. */
static int send_lease_query(advlock_pq_lockset *s, int kind, int64_t now_ms)
{
    advlock_lease_action l = advlock_lease_next(&s->lease_);
    advlock_action act;
    memset(&act, 0, sizeof act);
    act.kind = ADVLOCK_ACTION_QUERY;
    act.sql = l.sql;
    act.param = l.param;
    act.param2 = l.param2;
    advlock_pq_entry_ e = {
        NULL, NULL, 0, now_ms, LS_LEASE, (uint8_t)l.sql, ADVLOCK_PQ_EXECUTE_UNNAMED};
    advlock_pq_ls_end_batch(s);
    int sent = advlock_pq_ls_send_entry(s, &e, &act, now_ms);
    if (sent) {
        s->lease_query_ = (uint8_t)kind;
        (void)advlock_lease_on_sent(&s->lease_, now_ms);
    } else {
        (void)advlock_lease_on_result(&s->lease_, ADVLOCK_RESULT_CONNECTION_LOST, now_ms);
    }
    advlock_pq_ls_end_batch(s);
    return sent;
}

static void setup_refused(advlock_pq_lockset *s, const char *words, int64_t now_ms);

void advlock_pq_ls_lease_setup(advlock_pq_lockset *s, int64_t now_ms)
{
    if (s->lease_query_ == LS_LEASE_SETUP)
        return;
    (void)advlock_lease_start_setup(&s->lease_, s->session_.proxied, now_ms);
    if (advlock_lease_next(&s->lease_).kind == ADVLOCK_LEASE_QUERY
        && !send_lease_query(s, LS_LEASE_SETUP, now_ms))
        setup_refused(s, PQerrorMessage(s->conn_), now_ms);
}

/* The setup refused the locks: every acquire waiting to send its try ends
 * FAILED with the reason, and the next acquire sets the lease up anew. */
static void setup_refused(advlock_pq_lockset *s, const char *words, int64_t now_ms)
{
    char why[ADVLOCK_PQ_TEXT_MAX];
    advlock_lease_say_setup_failed(&s->lease_, words, why, sizeof why);
    advlock_pq_member *m = s->lists_[LS_QUEUE_LIST];
    while (m != NULL) {
        advlock_pq_member *next = m->next_;
        advlock_action act = advlock_next_action(&m->machine_);
        if (act.kind == ADVLOCK_ACTION_QUERY && advlock_pq_ls_lease_needs_setup(s, &act)) {
            advlock_pq_copy_line(m->report_.server_message, sizeof m->report_.server_message, why);
            (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_SERVER_ERROR, NULL,
                                    m->report_.server_message, now_ms);
            advlock_pq_ls_follow(s, m, now_ms);
        }
        m = next;
    }
    advlock_pq_ls_lease_restart(s);
}

/* The lease ran out: every held lock is lost, in the lease's words. */
static void expired(advlock_pq_lockset *s, const char *words, int64_t now_ms)
{
    advlock_lease_expiry why = advlock_lease_expiry_reason(&s->lease_);
    if (why == ADVLOCK_LEASE_LIVE)
        why = ADVLOCK_LEASE_NO_ANSWER;
    char message[ADVLOCK_PQ_TEXT_MAX];
    advlock_lease_say_expiry(&s->lease_, why, words, message, sizeof message);
    advlock_pq_ls_lose_held(s, "", message, why, now_ms);
    s->lease_holding_ = 0;
    s->lease_expired_ = 1;
}

void advlock_pq_ls_lease_answered(advlock_pq_lockset *s, advlock_pq_query_ *q, int64_t now_ms)
{
    char words[ADVLOCK_PQ_TEXT_MAX];
    advlock_result r = advlock_pq_answer_take(q, s->conn_, words, sizeof words);
    int kind = s->lease_query_;
    s->lease_query_ = LS_LEASE_NONE;
    (void)advlock_lease_on_result(&s->lease_, r, now_ms);
    if (kind == LS_LEASE_SETUP && !setup_holds(advlock_lease_setup_result(&s->lease_)))
        setup_refused(s, words, now_ms);
    else if (s->lease_holding_ && advlock_lease_next(&s->lease_).kind == ADVLOCK_LEASE_EXPIRED)
        expired(s, words, now_ms);
}

void advlock_pq_ls_lease_granted(advlock_pq_lockset *s, int64_t sent_ms, int64_t now_ms)
{
    if (!s->lease_on_ || s->lease_holding_)
        return;
    (void)advlock_lease_hold(&s->lease_, sent_ms, s->session_.proxied ? s->session_.token : 0,
                             now_ms);
    s->lease_holding_ = 1;
}

void advlock_pq_ls_lease_tend(advlock_pq_lockset *s, int64_t now_ms)
{
    if (!s->lease_on_)
        return;
    /* A hold that ended after the lease ran out (a verify in flight then)
     * is lost like the others. */
    if (s->lease_expired_ && s->lists_[LS_HELD_LIST] != NULL)
        expired(s, "", now_ms);
    if (!s->lease_holding_)
        return;
    if (s->lists_[LS_HELD_LIST] == NULL && s->verifying_ == 0) {
        /* Nothing held (released, or lost with the connection): no more
         * heartbeats until the next grant. */
        (void)advlock_lease_stop(&s->lease_);
        s->lease_holding_ = 0;
        return;
    }
    (void)advlock_lease_on_timer(&s->lease_, now_ms);
    advlock_lease_action next = advlock_lease_next(&s->lease_);
    if (next.kind == ADVLOCK_LEASE_EXPIRED)
        expired(s, "", now_ms);
    else if (next.kind == ADVLOCK_LEASE_QUERY && s->lease_query_ == LS_LEASE_NONE)
        (void)send_lease_query(s, LS_LEASE_HEARTBEAT, now_ms);
}

int64_t advlock_pq_ls_lease_wake(const advlock_pq_lockset *s)
{
    if (!s->lease_on_ || !s->lease_holding_)
        return INT64_MAX;
    advlock_lease_action l = advlock_lease_next(&s->lease_);
    if (l.kind == ADVLOCK_LEASE_EXPIRED)
        return 0; /* at once: the loss is still to be told */
    return l.kind == ADVLOCK_LEASE_QUERY || l.kind == ADVLOCK_LEASE_WAIT ? l.wake_at_ms : INT64_MAX;
}
