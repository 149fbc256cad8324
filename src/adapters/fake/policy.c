/*
 * The reference policy as an independent model: after every input the
 * simulation gives a machine, what must its next action be? The schedule
 * (sleeps 100, 200, 400, 800, 1000, ... ms from the reading that saw false),
 * the timeout rule (TIMED_OUT exactly at the first failed attempt whose
 * elapsed time reaches the timeout), the timeout message, and which result
 * leads to which outcome. Written from the design record, not from the
 * core's code, so that a wrong core shows up as a disagreement.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

enum { P_IDLE, P_TRY, P_SLEEP, P_UNLOCK, P_UNDO };

int64_t sim_policy_sleep(uint64_t n)
{
    int64_t ms = 100;
    for (uint64_t i = 1; i < n && ms < 1000; i++)
        ms *= 2;
    return ms < 1000 ? ms : 1000;
}

/* Seconds as the reference's TimeSpan.TotalSeconds prints them. */
static void seconds(int64_t ms, char *out, size_t size)
{
    int64_t frac = ms % 1000;
    if (frac == 0) {
        snprintf(out, size, "%lld", (long long)(ms / 1000));
        return;
    }
    char digits[4] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10), (char)('0' + frac % 10),
                      '\0'};
    size_t keep = 3;
    while (digits[keep - 1] == '0')
        keep--;
    digits[keep] = '\0';
    snprintf(out, size, "%lld.%s", (long long)(ms / 1000), digits);
}

typedef struct expected {
    advlock_action_kind kind;
    advlock_sql sql;
    int64_t sleep_ms, wake_at_ms;
    advlock_outcome outcome;
    int error;
} expected;

static expected query(advlock_sql sql)
{
    return (expected){ADVLOCK_ACTION_QUERY, sql, 0, 0, 0, 0};
}

static expected done(advlock_outcome outcome, int error)
{
    return (expected){ADVLOCK_ACTION_DONE, 0, 0, 0, outcome, error};
}

static expected failure(advlock_result r)
{
    return done(ADVLOCK_FAILED, r == ADVLOCK_RESULT_SERVER_ERROR ? ADVLOCK_ESERVER
                                : r == ADVLOCK_RESULT_CONNECTION_LOST ? ADVLOCK_ECONNLOST
                                                                      : ADVLOCK_ENULL);
}

static expected after_try(advlock_sim_client_ *cl, advlock_result r)
{
    if (r == ADVLOCK_RESULT_TRUE) {
        if (!cl->policy_cancel_)
            return done(ADVLOCK_ACQUIRED, 0);
        cl->policy_state_ = P_UNDO;
        return query(ADVLOCK_SQL_UNLOCK);
    }
    if (r == ADVLOCK_RESULT_SERVER_ERROR || r == ADVLOCK_RESULT_CONNECTION_LOST)
        return failure(r);
    if (cl->policy_cancel_)
        return done(ADVLOCK_CANCELLED, 0);
    if (r == ADVLOCK_RESULT_NULL)
        return failure(r);
    if (cl->policy_reading_ - cl->policy_start_ >= cl->step_.timeout_ms)
        return done(ADVLOCK_TIMED_OUT, 0);
    cl->policy_state_ = P_SLEEP;
    cl->policy_sleep_ = sim_policy_sleep(++cl->policy_sleeps_);
    cl->policy_wake_ = cl->policy_reading_ + cl->policy_sleep_;
    return (expected){ADVLOCK_ACTION_SLEEP, 0, cl->policy_sleep_, cl->policy_wake_, 0, 0};
}

static expected after_result(advlock_sim_client_ *cl, advlock_result r)
{
    switch (cl->policy_state_) {
    case P_TRY: return after_try(cl, r);
    case P_UNDO:
        /* Only a boolean proves the undoing unlock ran. */
        if (r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE)
            return done(ADVLOCK_CANCELLED, 0);
        return failure(r);
    default: /* P_UNLOCK */
        if (r == ADVLOCK_RESULT_TRUE)
            return done(ADVLOCK_RELEASED, 0);
        if (r == ADVLOCK_RESULT_FALSE || r == ADVLOCK_RESULT_NULL)
            return done(ADVLOCK_NOT_HELD, 0);
        return failure(r);
    }
}

static expected still_sleeping(const advlock_sim_client_ *cl)
{
    return (expected){ADVLOCK_ACTION_SLEEP, 0, cl->policy_sleep_, cl->policy_wake_, 0, 0};
}

static expected advance(advlock_sim_client_ *cl, enum policy_input input, advlock_result r,
                        int64_t reading)
{
    if (reading > cl->policy_reading_)
        cl->policy_reading_ = reading;
    switch (input) {
    case IN_START_ACQUIRE:
        cl->policy_state_ = P_TRY;
        cl->policy_start_ = cl->policy_reading_ = reading;
        cl->policy_sleeps_ = 0;
        cl->policy_attempts_ = 1;
        cl->policy_cancel_ = 0;
        return query(ADVLOCK_SQL_TRY_LOCK);
    case IN_START_RELEASE:
        cl->policy_state_ = P_UNLOCK;
        cl->policy_start_ = cl->policy_reading_ = reading;
        cl->policy_attempts_ = 0;
        return query(ADVLOCK_SQL_UNLOCK);
    case IN_RESULT: return after_result(cl, r);
    case IN_TIMER:
        if (cl->policy_reading_ < cl->policy_wake_)
            return still_sleeping(cl);
        cl->policy_state_ = P_TRY;
        cl->policy_attempts_++;
        return query(ADVLOCK_SQL_TRY_LOCK);
    default: /* IN_CANCEL */
        if (cl->policy_state_ == P_SLEEP)
            return done(ADVLOCK_CANCELLED, 0);
        cl->policy_cancel_ = 1;
        return query(cl->policy_state_ == P_UNDO ? ADVLOCK_SQL_UNLOCK : ADVLOCK_SQL_TRY_LOCK);
    }
}

static int mismatch(char *why, size_t size, const char *what, long long want, long long got)
{
    snprintf(why, size, "%s: the reference policy says %lld, the machine did %lld", what, want, got);
    return -1;
}

static int check_message(const advlock_sim_client_ *cl, const advlock_action *a, char *why,
                         size_t size)
{
    const char *name = cl->step_.lock_name;
    if (strlen(name) > ADVLOCK_KEY_ECHO_MAX / 2)
        return 0; /* long names are cut in messages; the core's own tests cover that */
    char secs[32], want[ADVLOCK_MESSAGE_MAX];
    seconds(cl->step_.timeout_ms, secs, sizeof secs);
    snprintf(want, sizeof want, "Could not acquire migration lock for '%s' within %ss.", name, secs);
    if (strcmp(want, a->message) == 0)
        return 0;
    snprintf(why, size, "timeout message is \"%.200s\", expected \"%.200s\"", a->message, want);
    return -1;
}

int sim_policy_check(advlock_sim_client_ *cl, enum policy_input input, advlock_result result,
                     const char *sqlstate, int64_t reading, const advlock_action *a,
                     uint64_t attempts, char *why, size_t size)
{
    expected e = advance(cl, input, result, reading);
    if (a->kind != e.kind) {
        static const char *const kinds[] = {"nothing", "query", "sleep", "done"};
        snprintf(why, size, "after %lld ms of timeout %lld ms, attempt %llu: the reference policy "
                 "says %s, the machine did %s",
                 (long long)(cl->policy_reading_ - cl->policy_start_), (long long)cl->step_.timeout_ms,
                 (unsigned long long)cl->policy_attempts_, kinds[e.kind],
                 (unsigned)a->kind < 4 ? kinds[a->kind] : "?");
        return -1;
    }
    if (e.kind == ADVLOCK_ACTION_QUERY) {
        if (a->sql != e.sql)
            return mismatch(why, size, "statement (0 try-lock, 1 unlock)", e.sql, a->sql);
        if (a->param != cl->key_)
            return mismatch(why, size, "query parameter (the lock key)", cl->key_, a->param);
        if (strcmp(a->sql_text, advlock_sql_text(e.sql)) != 0)
            return mismatch(why, size, "SQL text differs from the statement table", 0, 1);
    } else if (e.kind == ADVLOCK_ACTION_SLEEP) {
        if (a->sleep_ms != e.sleep_ms) {
            snprintf(why, size, "schedule: sleep %llu lasted %lld ms; the reference policy says %lld ms",
                     (unsigned long long)cl->policy_sleeps_, (long long)a->sleep_ms,
                     (long long)e.sleep_ms);
            return -1;
        }
        if (a->wake_at_ms != e.wake_at_ms)
            return mismatch(why, size, "schedule: wake-up time", e.wake_at_ms, a->wake_at_ms);
    } else {
        cl->policy_state_ = P_IDLE;
        if (a->outcome != e.outcome) {
            snprintf(why, size, "outcome after %lld ms and %llu attempts of timeout %lld ms: "
                     "the reference policy says %s, the machine said %s",
                     (long long)(cl->policy_reading_ - cl->policy_start_),
                     (unsigned long long)cl->policy_attempts_, (long long)cl->step_.timeout_ms,
                     advlock_outcome_name(e.outcome), advlock_outcome_name(a->outcome));
            return -1;
        }
        if (a->error != e.error)
            return mismatch(why, size, "error code", e.error, a->error);
        if (e.error == ADVLOCK_ESERVER && strcmp(a->sqlstate, sqlstate) != 0)
            return mismatch(why, size, "SQLSTATE kept from the server (as text)", 0, 1);
        if (e.outcome == ADVLOCK_TIMED_OUT && check_message(cl, a, why, size) != 0)
            return -1;
    }
    if (attempts != cl->policy_attempts_)
        return mismatch(why, size, "try-lock attempts", (long long)cl->policy_attempts_,
                        (long long)attempts);
    return 0;
}
