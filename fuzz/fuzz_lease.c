/*
 * Fuzzes the lease engine with opcode bytes: plans from fuzzed leases and
 * stop times, setups (direct and proxied), holds with fuzzed anchors and
 * tokens, sends, answers of every kind, timers with fuzzed (also backwards,
 * huge) times or at the wake the lease asked for, stops, misuse in every
 * state. A model of what the driver knows checks, after every event:
 *   - the stop bound: the stop deadline never exceeds the send of the last
 *     heartbeat answered TRUE (or the hold's anchor) + D, and while a lock
 *     is held it never moves backwards;
 *   - a live lease has seen no time at or after its deadline, and an
 *     expired one says why: NO_ANSWER only once the deadline was reached,
 *     any other reason only from that heartbeat answer; after EXPIRED
 *     nothing changes but the clock;
 *   - a heartbeat falls due no sooner than H after the last one's send,
 *     one at a time, and a WAIT wakes in the future, no later than the
 *     deadline;
 *   - the statements: the setup's, then the plain heartbeat on a direct
 *     connection and the guarded one with the token behind a proxy, $1 U;
 *   - refused calls change nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/saturating.h"
#include "advlock.h"
#include "fuzz_input.h"

typedef struct model {
    advlock_lease l;
    advlock_lease_plan plan;
    int64_t latest;                /* the latest time the lease has been shown */
    int held;                      /* hold() succeeded; no stop() since */
    uint64_t token;                /* the hold's */
    int64_t anchor_bound;          /* the latest a renewal's anchor can be */
    int64_t sent_arg;              /* the outstanding heartbeat's on_sent() time */
    int64_t sent_bound;            /* the latest its recorded send time can be */
    int64_t last_sent;             /* the last heartbeat's on_sent() time, or INT64_MIN */
    int64_t stop_at;               /* the last deadline seen while held */
    int heartbeat_out;             /* a heartbeat QUERY was seen and not yet answered */
    advlock_lease_expiry expected; /* the reason the last answer must give */
} model;

static void see(model *md, int64_t t)
{
    if (t > md->latest)
        md->latest = t;
}

static void reset(model *md)
{
    CHECK(advlock_lease_init(&md->l, &md->plan) == 0);
    md->latest = INT64_MIN;
    md->held = 0;
    md->heartbeat_out = 0;
    md->last_sent = INT64_MIN;
    md->expected = ADVLOCK_LEASE_LIVE;
}

static void check(model *md)
{
    advlock_lease_action a = advlock_lease_next(&md->l);
    advlock_lease_expiry why = advlock_lease_expiry_reason(&md->l);
    const int64_t d = md->plan.deadline_ms;
    if (a.kind == ADVLOCK_LEASE_QUERY) {
        CHECK(a.param == md->plan.user_timeout_ms);
        CHECK(a.sql_text == advlock_sql_text(a.sql));
    }
    if (!md->held) {
        CHECK(a.kind == ADVLOCK_LEASE_NONE || a.kind == ADVLOCK_LEASE_QUERY
              || a.kind == ADVLOCK_LEASE_EXPIRED);
        if (a.kind == ADVLOCK_LEASE_QUERY)
            CHECK(a.sql == ADVLOCK_SQL_LEASE_SETUP && a.wake_at_ms == INT64_MAX
                  && a.stop_at_ms == INT64_MAX);
        if (a.kind != ADVLOCK_LEASE_EXPIRED)
            CHECK(a.stop_at_ms == INT64_MAX && why == ADVLOCK_LEASE_LIVE);
        return;
    }
    /* Held (or expired while held): the stop bound. */
    CHECK(a.stop_at_ms <= advlock_add_saturating(md->anchor_bound, d));
    CHECK(a.stop_at_ms >= md->stop_at);
    md->stop_at = a.stop_at_ms;
    if (a.kind == ADVLOCK_LEASE_EXPIRED) {
        CHECK(why != ADVLOCK_LEASE_LIVE);
        CHECK(why == ADVLOCK_LEASE_NO_ANSWER ? md->latest >= a.stop_at_ms : why == md->expected);
        return;
    }
    CHECK(why == ADVLOCK_LEASE_LIVE);
    CHECK(md->latest < a.stop_at_ms);
    CHECK(a.kind == ADVLOCK_LEASE_QUERY || a.kind == ADVLOCK_LEASE_WAIT);
    CHECK(a.wake_at_ms <= a.stop_at_ms);
    if (a.kind == ADVLOCK_LEASE_WAIT) {
        CHECK(a.wake_at_ms > md->latest);
        CHECK(!md->heartbeat_out);
        return;
    }
    CHECK(a.sql == (md->token != 0 ? ADVLOCK_SQL_HEARTBEAT_GUARDED : ADVLOCK_SQL_HEARTBEAT));
    CHECK((uint64_t)a.param2 == md->token);
    CHECK(advlock_sql_guarded(a.sql) == (md->token != 0));
    if (!md->heartbeat_out) {
        /* Newly due: H after the last one's send, never sooner. */
        if (md->last_sent != INT64_MIN)
            CHECK(md->latest >= advlock_add_saturating(md->last_sent, md->plan.heartbeat_ms));
        md->heartbeat_out = 1;
        md->sent_bound = INT64_MIN;
    }
}

static int64_t time_from(input *in, model *md)
{
    int64_t base = md->latest == INT64_MIN ? 0 : md->latest;
    switch (byte(in) % 4) {
    case 0: return number(in); /* anything: backwards, huge */
    case 1: return advlock_add_saturating(base, (int64_t)(byte(in) % 8) - 4);
    default: return advlock_add_saturating(base, (int64_t)byte(in) * 100);
    }
}

/* A call the lease may refuse: refused, it must change nothing. */
#define REFUSABLE(md, call)                                         \
    do {                                                            \
        advlock_lease before_;                                      \
        memcpy(&before_, &(md)->l, sizeof before_);                 \
        rc = (call);                                                \
        if (rc != 0)                                                \
            CHECK(memcmp(&before_, &(md)->l, sizeof before_) == 0); \
    } while (0)

static void plan_from(input *in, model *md)
{
    static const int64_t leases[] = {30000, 60000, 16000, 6000, ADVLOCK_LEASE_MAX_MS};
    static const int64_t stops[] = {10000, 0, 2500, 10500};
    uint8_t pick = byte(in);
    int64_t lease = pick & 8 ? number(in) : leases[pick % 5];
    int64_t stop = pick & 16 ? number(in) : stops[(pick >> 5) % 4];
    advlock_lease_plan p, before;
    memcpy(&p, &md->plan, sizeof p);
    memcpy(&before, &p, sizeof p);
    if (advlock_lease_plan_init(&p, lease, stop) != 0) {
        CHECK(memcmp(&p, &before, sizeof p) == 0);
        return;
    }
    CHECK(p.deadline_ms >= ADVLOCK_LEASE_MIN_DEADLINE_MS);
    CHECK(p.deadline_ms + stop + ADVLOCK_LEASE_MARGIN_MS <= p.user_timeout_ms);
    CHECK(p.user_timeout_ms + ADVLOCK_LEASE_SERVER_SLACK_MS <= lease);
    CHECK(p.user_timeout_ms % 1000 == 0 && p.keepalives_idle_s >= 1);
    CHECK(p.heartbeat_ms * 4 <= p.deadline_ms);
    md->plan = p;
    reset(md);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    static model md;
    CHECK(advlock_lease_plan_init(&md.plan, ADVLOCK_LEASE_DEFAULT_MS, 10000) == 0);
    reset(&md);
    while (in.size > 0) {
        uint8_t op = byte(&in);
        int expired = advlock_lease_next(&md.l).kind == ADVLOCK_LEASE_EXPIRED;
        advlock_lease before;
        memcpy(&before, &md.l, sizeof before);
        int rc = 0;
        int64_t t = time_from(&in, &md);
        switch (op % 8) {
        case 0: plan_from(&in, &md); break;
        case 1:
            REFUSABLE(&md, advlock_lease_start_setup(&md.l, op & 8, t));
            if (rc == 0) {
                see(&md, t);
                md.held = 0;
                md.heartbeat_out = 0;
            }
            break;
        case 2: {
            int64_t anchor = advlock_add_saturating(t, -(int64_t)byte(&in) * 100);
            uint64_t token = op & 8 ? (uint64_t)number(&in) : 0;
            REFUSABLE(&md, advlock_lease_hold(&md.l, anchor, token, t));
            if (rc == 0) {
                see(&md, t);
                md.held = 1;
                md.token = token;
                md.anchor_bound = anchor < md.latest ? anchor : md.latest;
                md.stop_at = INT64_MIN;
                md.last_sent = INT64_MIN;
                md.heartbeat_out = 0;
            }
            break;
        }
        case 3:
            REFUSABLE(&md, advlock_lease_on_sent(&md.l, t));
            if (rc == 0 && !expired) {
                see(&md, t);
                md.sent_arg = t;
                md.sent_bound = md.latest;
            }
            break;
        case 4: {
            advlock_result r = (advlock_result)(byte(&in) % 6);
            int was_out = md.heartbeat_out;
            REFUSABLE(&md, advlock_lease_on_result(&md.l, r, t));
            if (rc != 0 || expired)
                break;
            see(&md, t);
            if (!md.held || !was_out)
                break;
            md.heartbeat_out = 0;
            if (r == ADVLOCK_RESULT_TRUE) {
                /* Renewed only from a send the model saw. */
                CHECK(md.sent_bound != INT64_MIN);
                md.last_sent = md.sent_arg;
                if (md.sent_bound > md.anchor_bound)
                    md.anchor_bound = md.sent_bound;
            } else {
                md.expected = r == ADVLOCK_RESULT_SERVER_ERROR      ? ADVLOCK_LEASE_SERVER_ERROR
                              : r == ADVLOCK_RESULT_CONNECTION_LOST ? ADVLOCK_LEASE_CONNECTION
                                                                    : ADVLOCK_LEASE_SETTINGS;
            }
            break;
        }
        case 5:
        case 7:
            if (op % 8 == 7)
                t = advlock_lease_next(&md.l).wake_at_ms;
            CHECK(advlock_lease_on_timer(&md.l, t) == 0);
            see(&md, t);
            break;
        case 6:
            CHECK(advlock_lease_stop(&md.l) == 0);
            if (!expired) {
                md.held = 0;
                md.heartbeat_out = 0;
            }
            break;
        }
        if (expired && op % 8 != 0 && !(op % 8 == 1 && rc == 0)) {
            /* After EXPIRED nothing changes but the clock. */
            before.now_ms_ = md.l.now_ms_;
            CHECK(memcmp(&before, &md.l, sizeof before) == 0);
        }
        check(&md);
    }
    return 0;
}
