/*
 * The lease engine: the plan's arithmetic (docs/design.md "Leases") and the
 * heartbeats that keep the stop bound, turned inside out like the machine:
 * the driver sends what it is asked to, reports the send and the answer, and
 * wakes when asked.
 *
 *   IDLE --start_setup--> SETUP --answer--> IDLE --hold--> HOLDING
 *   HOLDING: a heartbeat every H after the last one's send, one at a time;
 *            TRUE before the deadline renews (deadline = its send + D);
 *            the deadline passing, FALSE, NULL, an error or a lost
 *            connection --> EXPIRED, which nothing but a new setup or
 *            advlock_lease_init() leaves.
 *   stop: HOLDING --> IDLE.
 *
 * Every input first lets time pass (never backwards), so an answer that
 * arrives at or after the deadline finds the lease already EXPIRED.
 */
#include "core.h"

#include <string.h>

enum state { IDLE, SETUP, HOLDING, EXPIRED };

/* advlock_lease.outstanding_ */
enum outstanding { NO_QUERY, TO_SEND, SENT };

int advlock_lease_plan_init(advlock_lease_plan *p, int64_t lease_ms, int64_t stop_ms)
{
    if (p == NULL || lease_ms < 0 || lease_ms > ADVLOCK_LEASE_MAX_MS || stop_ms < 0)
        return ADVLOCK_EINVAL;
    /* Whole seconds: tcp_keepalives_idle is set in seconds, U/1000 - 2. */
    int64_t user_timeout = (lease_ms - ADVLOCK_LEASE_SERVER_SLACK_MS) / 1000 * 1000;
    /* Compared before subtracting, as stop_ms may be as large as int64_t. */
    if (lease_ms < ADVLOCK_LEASE_SERVER_SLACK_MS
        || stop_ms > user_timeout - ADVLOCK_LEASE_MARGIN_MS - ADVLOCK_LEASE_MIN_DEADLINE_MS)
        return ADVLOCK_EINVAL;
    /* Zeroed padding too: plans and leases compare byte for byte. */
    advlock_lease_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.lease_ms = lease_ms;
    plan.stop_ms = stop_ms;
    plan.user_timeout_ms = (int32_t)user_timeout;
    plan.keepalives_idle_s = (int32_t)(user_timeout / 1000 - 2);
    plan.keepalives_interval_s = 1;
    plan.keepalives_count = 2;
    plan.check_interval_ms = 1000;
    plan.deadline_ms = user_timeout - stop_ms - ADVLOCK_LEASE_MARGIN_MS;
    plan.heartbeat_ms = plan.deadline_ms / 4;
    memcpy(p, &plan, sizeof plan);
    return 0;
}

int advlock_lease_options(const advlock_lease_plan *p, char *buf, size_t size)
{
    if (p == NULL || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    char out[ADVLOCK_LEASE_OPTIONS_MAX];
    advlock_text t;
    advlock_text_init(&t, out, sizeof out);
    advlock_text_put(&t, "-c tcp_user_timeout=");
    advlock_text_put_int(&t, p->user_timeout_ms);
    advlock_text_put(&t, " -c tcp_keepalives_idle=");
    advlock_text_put_int(&t, p->keepalives_idle_s);
    advlock_text_put(&t, " -c tcp_keepalives_interval=");
    advlock_text_put_int(&t, p->keepalives_interval_s);
    advlock_text_put(&t, " -c tcp_keepalives_count=");
    advlock_text_put_int(&t, p->keepalives_count);
    advlock_text_put(&t, " -c client_connection_check_interval=");
    advlock_text_put_int(&t, p->check_interval_ms);
    if (size > 0) {
        size_t copy = t.len < size - 1 ? t.len : size - 1;
        memcpy(buf, out, copy);
        buf[copy] = '\0';
    }
    return (int)t.len;
}

/* A plan advlock_lease_plan_init() made: the engine relies on D >= 2 s and
 * H > 0, and the heartbeat's $1 must be the U the setup set. */
static int plan_valid(const advlock_lease_plan *p)
{
    advlock_lease_plan made;
    return advlock_lease_plan_init(&made, p->lease_ms, p->stop_ms) == 0
           && made.user_timeout_ms == p->user_timeout_ms
           && made.keepalives_idle_s == p->keepalives_idle_s
           && made.keepalives_interval_s == p->keepalives_interval_s
           && made.keepalives_count == p->keepalives_count
           && made.check_interval_ms == p->check_interval_ms && made.deadline_ms == p->deadline_ms
           && made.heartbeat_ms == p->heartbeat_ms;
}

int advlock_lease_init(advlock_lease *l, const advlock_lease_plan *p)
{
    if (l == NULL || p == NULL || !plan_valid(p))
        return ADVLOCK_EINVAL;
    memset(l, 0, sizeof *l);
    memcpy(&l->plan_, p, sizeof *p);
    l->now_ms_ = INT64_MIN;
    l->state_ = IDLE;
    return 0;
}

static void observe_time(advlock_lease *l, int64_t now_ms)
{
    if (now_ms > l->now_ms_)
        l->now_ms_ = now_ms;
}

static int64_t stop_deadline(const advlock_lease *l)
{
    return advlock_add_saturating(l->anchor_ms_, l->plan_.deadline_ms);
}

static void expire(advlock_lease *l, advlock_lease_expiry why)
{
    l->state_ = EXPIRED;
    l->expiry_ = (uint8_t)why;
    l->outstanding_ = NO_QUERY;
}

static void ask(advlock_lease *l)
{
    l->outstanding_ = TO_SEND;
}

/* Time passes for a held lease: the deadline (reached exactly at anchor +
 * D, answered or not), then a heartbeat that has fallen due. */
static void let_time_pass(advlock_lease *l, int64_t now_ms)
{
    observe_time(l, now_ms);
    if (l->state_ != HOLDING)
        return;
    if (l->now_ms_ >= stop_deadline(l))
        expire(l, ADVLOCK_LEASE_NO_ANSWER);
    else if (l->outstanding_ == NO_QUERY && l->now_ms_ >= l->next_beat_ms_)
        ask(l);
}

int advlock_lease_start_setup(advlock_lease *l, int proxied, int64_t now_ms)
{
    if (l == NULL)
        return ADVLOCK_EINVAL;
    if (l->outstanding_ || l->state_ == HOLDING)
        return ADVLOCK_EMISUSE;
    observe_time(l, now_ms);
    l->expiry_ = ADVLOCK_LEASE_LIVE;
    if (proxied) {
        l->state_ = IDLE;
        l->setup_ = ADVLOCK_LEASE_PROXIED;
        return 0;
    }
    l->state_ = SETUP;
    l->setup_ = ADVLOCK_LEASE_SETUP_PENDING;
    ask(l);
    return 0;
}

advlock_lease_setup advlock_lease_setup_result(const advlock_lease *l)
{
    return l == NULL ? ADVLOCK_LEASE_SETUP_PENDING : (advlock_lease_setup)l->setup_;
}

int advlock_lease_hold(advlock_lease *l, int64_t anchor_ms, uint64_t token, int64_t now_ms)
{
    if (l == NULL)
        return ADVLOCK_EINVAL;
    if (l->state_ != IDLE)
        return ADVLOCK_EMISUSE;
    observe_time(l, now_ms);
    /* An anchor after now cannot be a send time already made: any earlier
     * time is safe, so take now. */
    l->anchor_ms_ = anchor_ms < l->now_ms_ ? anchor_ms : l->now_ms_;
    l->next_beat_ms_ = advlock_add_saturating(l->anchor_ms_, l->plan_.heartbeat_ms);
    l->token_ = token;
    l->state_ = HOLDING;
    l->expiry_ = ADVLOCK_LEASE_LIVE;
    let_time_pass(l, l->now_ms_);
    return 0;
}

int advlock_lease_on_sent(advlock_lease *l, int64_t now_ms)
{
    if (l == NULL)
        return ADVLOCK_EINVAL;
    if (l->state_ == EXPIRED)
        return 0;
    if (l->outstanding_ != TO_SEND)
        return ADVLOCK_EMISUSE;
    let_time_pass(l, now_ms);
    if (l->state_ == EXPIRED)
        return 0;
    l->outstanding_ = SENT;
    l->sent_ms_ = l->now_ms_;
    l->next_beat_ms_ = advlock_add_saturating(l->now_ms_, l->plan_.heartbeat_ms);
    return 0;
}

static advlock_lease_setup setup_answer(advlock_result r)
{
    switch (r) {
    case ADVLOCK_RESULT_TRUE: return ADVLOCK_LEASE_APPLIED;
    case ADVLOCK_RESULT_FALSE: return ADVLOCK_LEASE_NOT_APPLIED;
    case ADVLOCK_RESULT_NULL: return ADVLOCK_LEASE_UNIX_SOCKET;
    default: return ADVLOCK_LEASE_SETUP_FAILED;
    }
}

static advlock_lease_expiry heartbeat_failure(advlock_result r)
{
    switch (r) {
    case ADVLOCK_RESULT_FALSE:
    case ADVLOCK_RESULT_NULL: return ADVLOCK_LEASE_SETTINGS;
    case ADVLOCK_RESULT_SERVER_ERROR: return ADVLOCK_LEASE_SERVER_ERROR;
    default: return ADVLOCK_LEASE_CONNECTION;
    }
}

int advlock_lease_on_result(advlock_lease *l, advlock_result r, int64_t now_ms)
{
    if (l == NULL || (unsigned)r > ADVLOCK_RESULT_CONNECTION_LOST)
        return ADVLOCK_EINVAL;
    if (l->state_ == EXPIRED)
        return 0;
    /* A renewal is anchored at the heartbeat's send: without it, none. */
    if (l->outstanding_ == NO_QUERY
        || (l->state_ == HOLDING && r == ADVLOCK_RESULT_TRUE && l->outstanding_ != SENT))
        return ADVLOCK_EMISUSE;
    let_time_pass(l, now_ms);
    if (l->state_ == SETUP) {
        l->setup_ = (uint8_t)setup_answer(r);
        l->state_ = IDLE;
        l->outstanding_ = NO_QUERY;
    } else if (l->state_ == HOLDING) {
        if (r != ADVLOCK_RESULT_TRUE) {
            expire(l, heartbeat_failure(r));
            return 0;
        }
        l->anchor_ms_ = l->sent_ms_;
        l->outstanding_ = NO_QUERY;
        let_time_pass(l, l->now_ms_);
    }
    return 0;
}

int advlock_lease_on_timer(advlock_lease *l, int64_t now_ms)
{
    if (l == NULL)
        return ADVLOCK_EINVAL;
    let_time_pass(l, now_ms);
    return 0;
}

int advlock_lease_stop(advlock_lease *l)
{
    if (l == NULL)
        return ADVLOCK_EINVAL;
    if (l->state_ == HOLDING) {
        l->state_ = IDLE;
        l->outstanding_ = NO_QUERY;
        l->token_ = 0;
    }
    return 0;
}

advlock_lease_action advlock_lease_next(const advlock_lease *l)
{
    advlock_lease_action a = {
        .kind = ADVLOCK_LEASE_NONE, .wake_at_ms = INT64_MAX, .stop_at_ms = INT64_MAX};
    if (l == NULL)
        return a;
    if (l->state_ == HOLDING || l->state_ == EXPIRED)
        a.stop_at_ms = stop_deadline(l);
    if (l->state_ == EXPIRED) {
        a.kind = ADVLOCK_LEASE_EXPIRED;
    } else if (l->state_ == SETUP) {
        a.kind = ADVLOCK_LEASE_QUERY;
        a.sql = ADVLOCK_SQL_LEASE_SETUP;
    } else if (l->state_ == HOLDING) {
        a.kind = l->outstanding_ != NO_QUERY ? ADVLOCK_LEASE_QUERY : ADVLOCK_LEASE_WAIT;
        a.sql = l->token_ != 0 ? ADVLOCK_SQL_HEARTBEAT_GUARDED : ADVLOCK_SQL_HEARTBEAT;
        a.param2 = (int64_t)l->token_;
        a.wake_at_ms = l->outstanding_ != NO_QUERY || l->next_beat_ms_ > a.stop_at_ms
                           ? a.stop_at_ms
                           : l->next_beat_ms_;
    }
    if (a.kind == ADVLOCK_LEASE_QUERY) {
        a.sql_text = advlock_sql_text(a.sql);
        a.param = l->plan_.user_timeout_ms;
    }
    return a;
}

advlock_lease_expiry advlock_lease_expiry_reason(const advlock_lease *l)
{
    return l == NULL ? ADVLOCK_LEASE_LIVE : (advlock_lease_expiry)l->expiry_;
}

const advlock_lease_plan *advlock_lease_plan_of(const advlock_lease *l)
{
    return l != NULL ? &l->plan_ : NULL;
}
