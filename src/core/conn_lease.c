/*
 * The connection's lease, one for every member (docs/libpq.md, "Leases").
 * The core's advlock_lease decides; this file says when its statements go:
 * the setup alone, before the first try-lock, and while any member holds a
 * lock a heartbeat at a time, each in a batch of its own, so that no other
 * statement's failure can make the server skip it. The first grant anchors
 * the lease at the send of the try that took it; later grants ride on it
 * (the server heard from this client after the anchor, so the stop
 * deadline stays early enough for them too). A grant that came long after
 * its send (a server-side wait) counts from a confirming heartbeat instead.
 */
#include "conn.h"

#include <string.h>

static int setup_holds(advlock_lease_setup s)
{
    return s == ADVLOCK_LEASE_APPLIED || s == ADVLOCK_LEASE_UNIX_SOCKET
           || s == ADVLOCK_LEASE_PROXIED;
}

void advlock_conn_lease_restart(advlock_conn *c)
{
    if (!c->lease_on_)
        return;
    advlock_lease_plan plan = *advlock_lease_plan_of(&c->lease_);
    (void)advlock_lease_init(&c->lease_, &plan);
    c->lease_query_ = LEASE_NONE;
    c->lease_holding_ = 0;
    c->lease_expired_ = 0;
}

int advlock_conn_lease_needs_setup(const advlock_conn *c, int sql)
{
    advlock_mode mode;
    return c->lease_on_ && advlock_conn_try_mode(sql, &mode)
           && !setup_holds(advlock_lease_setup_result(&c->lease_));
}

int advlock_conn_lease_beat_due(const advlock_conn *c)
{
    return c->lease_on_ && c->lease_holding_ && c->lease_query_ == LEASE_NONE
           && advlock_lease_next(&c->lease_).kind == ADVLOCK_LEASE_QUERY;
}

int advlock_conn_lease_due(advlock_conn *c, int want_setup, advlock_action *act, int64_t now_ms)
{
    if (!c->lease_on_ || c->lease_query_ != LEASE_NONE)
        return 0;
    int kind = LEASE_HEARTBEAT;
    if (want_setup) {
        /* Behind a proxy the setup ends at once, sending nothing. */
        (void)advlock_lease_start_setup(&c->lease_, c->session_.proxied, now_ms);
        kind = LEASE_SETUP;
    } else if (!c->lease_holding_) {
        return 0;
    }
    advlock_lease_action l = advlock_lease_next(&c->lease_);
    if (l.kind != ADVLOCK_LEASE_QUERY)
        return 0;
    act->kind = ADVLOCK_ACTION_QUERY;
    act->sql = l.sql;
    act->param = l.param;
    act->param2 = l.param2;
    act->param3 = 0;
    c->lease_query_ = (uint8_t)kind;
    (void)advlock_lease_on_sent(&c->lease_, now_ms);
    return 1;
}

/* The setup refused the locks: every acquire waiting to send its try ends
 * FAILED with the reason, and the next acquire sets the lease up anew. */
static void setup_refused(advlock_conn *c, const char *words, int64_t now_ms)
{
    char why[ADVLOCK_CONN_WORDS_MAX];
    advlock_lease_say_setup_failed(&c->lease_, words, why, sizeof why);
    advlock_member *m = c->lists_[CONN_QUEUE_LIST];
    while (m != NULL) {
        advlock_member *next = m->next_;
        advlock_action act = advlock_next_action(&m->machine_);
        if (act.kind == ADVLOCK_ACTION_QUERY && advlock_conn_lease_needs_setup(c, act.sql))
            advlock_conn_fail(c, m, ADVLOCK_RESULT_SERVER_ERROR, NULL, why, now_ms);
        m = next;
    }
    advlock_conn_lease_restart(c);
}

/* Why the lease ran out: its heartbeats' reason, or their deadline. */
static advlock_lease_expiry expiry_of(const advlock_conn *c)
{
    advlock_lease_expiry why = advlock_lease_expiry_reason(&c->lease_);
    return why != ADVLOCK_LEASE_LIVE ? why : ADVLOCK_LEASE_NO_ANSWER;
}

void advlock_conn_lease_end_marking(advlock_conn *c, advlock_member *m, const char *words,
                                    int64_t now_ms)
{
    char message[ADVLOCK_CONN_WORDS_MAX];
    advlock_lease_expiry why = advlock_conn_lease_loss(c, words, message, sizeof message);
    char said[ADVLOCK_CONN_WORDS_MAX];
    advlock_text t;
    advlock_text_init(&t, said, sizeof said);
    advlock_text_put(&t, "lock-delay: the lease ran out before the grant was reported: ");
    advlock_text_put(&t, message);
    advlock_conn_say(m, said);
    m->lease_expiry_ = (uint8_t)why;
    advlock_conn_end(c, m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, now_ms);
}

/* The grants lock-delay holds back went with the lease too: each such
 * acquire ends FAILED, never ACQUIRED. As for the held locks, the session
 * is taken for gone (the connection must close), so nothing is given
 * back. One whose mark statement is in flight ends at its answer
 * (advlock_conn_delay_answered()); one giving its grant back already
 * ends as it was to. */
static void end_marking(advlock_conn *c, const char *words, int64_t now_ms)
{
    static const int lists[] = {CONN_QUEUE_LIST, CONN_SLEEP_LIST};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        advlock_member *m = c->lists_[lists[i]];
        while (m != NULL) {
            advlock_member *next = m->next_;
            if (m->delay_ >= DELAY_TAKE && m->delay_ <= DELAY_WRITE)
                advlock_conn_lease_end_marking(c, m, words, now_ms);
            m = next;
        }
    }
}

/* The lease ran out: every held lock is lost, in the lease's words. The
 * server frees them a lease after it last heard from this client: from
 * now, or a statement sent later (advlock_conn_lease_sent()). */
static void expired(advlock_conn *c, const char *words, int64_t now_ms)
{
    if (!c->lease_expired_)
        c->lease_mark_ms_ = now_ms;
    c->lease_expired_ = 1;
    char message[ADVLOCK_CONN_WORDS_MAX];
    advlock_lease_expiry why = advlock_conn_lease_loss(c, words, message, sizeof message);
    advlock_conn_lose_held(c, "", message, why, now_ms);
    if (c->delaying_ > 0)
        end_marking(c, words, now_ms);
    c->lease_holding_ = 0;
}

int advlock_conn_lease_confirms(advlock_conn *c, advlock_member *m, int64_t sent_ms, int64_t now_ms)
{
    /* Only a server-side wait's grant comes that late, and it is alone. */
    if (!c->lease_on_ || !c->waits_ || c->lease_holding_
        || now_ms
               < advlock_add_saturating(sent_ms, advlock_lease_plan_of(&c->lease_)->heartbeat_ms))
        return 0;
    c->confirming_ = m;
    return 1;
}

int advlock_conn_lease_confirm_due(advlock_conn *c, advlock_action *act, int64_t now_ms)
{
    if (c->confirming_ == NULL || c->lease_query_ != LEASE_NONE)
        return 0;
    act->kind = ADVLOCK_ACTION_QUERY;
    act->sql = c->session_.proxied ? ADVLOCK_SQL_HEARTBEAT_GUARDED : ADVLOCK_SQL_HEARTBEAT;
    act->param = advlock_lease_plan_of(&c->lease_)->user_timeout_ms;
    act->param2 = (int64_t)c->session_.token;
    act->param3 = 0;
    c->lease_query_ = LEASE_CONFIRM;
    c->lease_mark_ms_ = now_ms;
    return 1;
}

/* The grant waiting for its heartbeat: held from the heartbeat's send
 * (sent_ms) when it answered TRUE, else reported and lost at once. */
static void confirmed(advlock_conn *c, const advlock_answer *a, int64_t sent_ms, int64_t now_ms)
{
    advlock_member *m = c->confirming_;
    if (m == NULL)
        return; /* given up at its deadline already */
    c->confirming_ = NULL;
    int ok = a != NULL && a->result == ADVLOCK_RESULT_TRUE && !a->aborted;
    if (ok)
        advlock_conn_lease_granted(c, sent_ms, now_ms);
    advlock_conn_follow(c, m, now_ms);
    if (ok)
        return;
    const char *words = a != NULL && a->message != NULL && a->message[0] != '\0'
                            ? a->message
                            : "the server session changed";
    char why[ADVLOCK_CONN_WORDS_MAX];
    advlock_text t;
    advlock_text_init(&t, why, sizeof why);
    advlock_text_put(&t, "the heartbeat after a long wait for the grant failed (");
    advlock_text_putn(&t, words, strnlen(words, 150));
    advlock_text_put(&t, "); stop the work now");
    int lost = a == NULL || a->result == ADVLOCK_RESULT_CONNECTION_LOST;
    advlock_conn_lose_held(c, "", why, lost ? ADVLOCK_LEASE_CONNECTION : ADVLOCK_LEASE_SETTINGS,
                           now_ms);
}

void advlock_conn_lease_answered(advlock_conn *c, const advlock_answer *a, int64_t sent_ms,
                                 int64_t now_ms)
{
    const char *words = a->message != NULL ? a->message : "";
    int kind = c->lease_query_;
    c->lease_query_ = LEASE_NONE;
    if (kind == LEASE_CONFIRM) {
        confirmed(c, a, sent_ms, now_ms);
        return;
    }
    (void)advlock_lease_on_result(&c->lease_, a->result, now_ms);
    if (kind == LEASE_SETUP && !setup_holds(advlock_lease_setup_result(&c->lease_)))
        setup_refused(c, words, now_ms);
    else if (c->lease_holding_ && advlock_lease_next(&c->lease_).kind == ADVLOCK_LEASE_EXPIRED)
        expired(c, words, now_ms);
}

void advlock_conn_lease_granted(advlock_conn *c, int64_t sent_ms, int64_t now_ms)
{
#ifdef ADVLOCK_LEASE_CANARY
    /* The lease campaign's canary (mk/fake.mk) plants an engine whose
     * grants never start the lease: set up, it sends no heartbeat and
     * stops nobody. The campaign must catch two holders at work. */
    (void)c, (void)sent_ms, (void)now_ms;
    return;
#endif
    if (!c->lease_on_ || c->lease_holding_)
        return;
    (void)advlock_lease_hold(&c->lease_, sent_ms, c->session_.proxied ? c->session_.token : 0,
                             now_ms);
    c->lease_holding_ = 1;
}

void advlock_conn_lease_tend(advlock_conn *c, int64_t now_ms)
{
    if (!c->lease_on_)
        return;
    /* A confirming heartbeat unanswered within the lease's deadline: the
     * grant is lost (its answer, when it comes, changes nothing). */
    if (c->confirming_ != NULL && c->lease_query_ == LEASE_CONFIRM
        && now_ms >= advlock_add_saturating(c->lease_mark_ms_,
                                            advlock_lease_plan_of(&c->lease_)->deadline_ms))
        confirmed(c, NULL, 0, now_ms);
    /* A hold that ended after the lease ran out (a verify in flight then),
     * or a grant lock-delay holds back since, is lost like the others. */
    if (c->lease_expired_ && (c->lists_[CONN_HELD_LIST] != NULL || c->delaying_ > 0))
        expired(c, "", now_ms);
    if (!c->lease_holding_)
        return;
    if (c->lists_[CONN_HELD_LIST] == NULL && c->verifying_ == 0 && c->delaying_ == 0) {
        /* Nothing held (released, or lost with the connection): no more
         * heartbeats until the next grant. */
        (void)advlock_lease_stop(&c->lease_);
        c->lease_holding_ = 0;
        return;
    }
    (void)advlock_lease_on_timer(&c->lease_, now_ms);
    if (advlock_lease_next(&c->lease_).kind == ADVLOCK_LEASE_EXPIRED)
        expired(c, "", now_ms);
}

advlock_lease_expiry advlock_conn_lease_loss(const advlock_conn *c, const char *words,
                                             char *message, size_t size)
{
    advlock_lease_expiry why = expiry_of(c);
    advlock_lease_say_expiry(&c->lease_, why, words, message, size);
    return why;
}

int64_t advlock_conn_lease_wake(const advlock_conn *c)
{
    if (c->lease_expired_ && c->verifying_ > 0)
        return 0; /* at once: a verify's loss is still to be told */
    if (c->lease_on_ && c->confirming_ != NULL && c->lease_query_ == LEASE_CONFIRM)
        return advlock_add_saturating(c->lease_mark_ms_,
                                      advlock_lease_plan_of(&c->lease_)->deadline_ms);
    if (!c->lease_on_ || !c->lease_holding_)
        return INT64_MAX;
    advlock_lease_action l = advlock_lease_next(&c->lease_);
    if (l.kind == ADVLOCK_LEASE_EXPIRED)
        return 0; /* at once: the loss is still to be told */
    return l.kind == ADVLOCK_LEASE_QUERY || l.kind == ADVLOCK_LEASE_WAIT ? l.wake_at_ms : INT64_MAX;
}

void advlock_conn_lease_sent(advlock_conn *c, int64_t now_ms)
{
    if (c->lease_expired_ && now_ms > c->lease_mark_ms_)
        c->lease_mark_ms_ = now_ms;
}

int advlock_conn_lease_deadline(const advlock_conn *c, int64_t *stop_at_ms, int64_t *free_by_ms)
{
    if (c == NULL || !c->lease_on_ || !(c->lease_expired_ || c->lease_holding_))
        return 0;
    advlock_lease_action l = advlock_lease_next(&c->lease_);
    int64_t free_by = INT64_MAX;
    if (c->lease_expired_) {
        if (!advlock_lease_unbound(&c->lease_, expiry_of(c)))
            free_by = advlock_add_saturating(c->lease_mark_ms_,
                                             advlock_lease_plan_of(&c->lease_)->lease_ms);
    } else if (l.kind != ADVLOCK_LEASE_QUERY && l.kind != ADVLOCK_LEASE_WAIT) {
        return 0;
    }
    if (stop_at_ms != NULL)
        *stop_at_ms = l.stop_at_ms;
    if (free_by_ms != NULL)
        *free_by_ms = free_by;
    return c->lease_expired_ ? 2 : 1;
}
