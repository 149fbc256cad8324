/*
 * The lock policy as an independent model: after every input the simulation
 * gives a machine, what must its next action be, under the client's
 * options? Which statement (by mode, scope and waiting strategy), the
 * schedule (the reference's sleeps 100, 200, 400, 800, 1000, ... ms from the
 * reading that saw false; with clipping, the last one cut to end at the
 * deadline; with full jitter, each drawn from its own splitmix64 stream over
 * the client's jitter seed as r mod (ceiling + 1), then clipped), the timeout
 * rule (TIMED_OUT at the first failed attempt whose elapsed time reaches the
 * timeout), server-side waiting (a try first, then, if the lock is busy and
 * time is left, one wait bounded by lock_timeout = the time left, whose own
 * deadline comes ADVLOCK_WAIT_GRACE_MS after the timeout; its cancel asked
 * for again every 250 ms until the answer comes: PostgreSQL drops a cancel
 * that overtakes its statement), the undo of a grant nobody wants (also
 * after a wait's 57014, asked for or not, or 55P03, either of which may hide
 * one), holder diagnostics, and every outcome's
 * report: outcome, failure, detail, failing statement, SQLSTATE, key,
 * timeout, elapsed time, attempts and holder facts. With a session value
 * given (advlock_set_session), the session row first, once per value (and
 * once more for a session-scoped operation behind a proxy when only
 * transaction-scoped ones, which claim nothing, asked before); then behind
 * a proxy the guarded rows with the token, refusals with nothing sent, a
 * guarded session-scoped statement's NULL as ESESSION, a guarded
 * transaction-scoped one's as busy (no server-side wait after it), and a
 * guarded unlock's NULL tried again on the backoff schedule within
 * ADVLOCK_GUARD_RETRY_MS, then ESESSION. It compares facts, never
 * sentences (advlock_describe() words them, and the core's tests check its
 * bytes). Written from the design record and the header's contract, not from
 * the core's code, so that a wrong core shows up as a disagreement.
 */
#include "../core/saturating.h"
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* P_LOCK: a try; P_WAIT: a server-side wait; P_SESSION: the session row. */
enum { P_IDLE, P_LOCK, P_SLEEP, P_UNLOCK, P_UNDO, P_DIAGNOSE, P_WAIT, P_SESSION };
enum { OP_ACQUIRE = 1, OP_RELEASE = 2 };

int64_t advlock_sim_policy_sleep(uint64_t n)
{
    int64_t ms = 100;
    for (uint64_t i = 1; i < n && ms < 1000; i++)
        ms *= 2;
    return ms < 1000 ? ms : 1000;
}

void advlock_sim_policy_seed(sim_client *cl, uint64_t jitter_seed)
{
    cl->policy_jitter_ = jitter_seed;
}

void advlock_sim_policy_new_session(sim_client *cl)
{
    cl->policy_checked_ = cl->policy_proxied_ = cl->policy_claimed_ = cl->policy_standby_ = 0;
    cl->policy_claim_asked_ = 0;
}

/* A cancel asked for is asked for again this long after it was sent. */
enum { CANCEL_REPEAT_MS = 250 };

typedef struct expected {
    advlock_action_kind kind;
    advlock_sql sql;            /* QUERY; FAILED: the statement that failed */
    int64_t wake_at_ms;         /* QUERY: its deadline (INT64_MAX: none); SLEEP: wake-up */
    int64_t sleep_lo, sleep_hi; /* SLEEP: the allowed lengths (one, unless a callback draws) */
    advlock_outcome outcome;    /* DONE */
    int failure;                /* DONE: an advlock_failure, or 0 */
    advlock_detail detail;      /* DONE */
} expected;

/* ---- the statements the options choose ---------------------------------- */

static const advlock_options *opts(const sim_client *cl)
{
    return &cl->options_;
}

static int jitter(const sim_client *cl)
{
    return opts(cl)->backoff == ADVLOCK_BACKOFF_FULL_JITTER;
}

static int clipped(const sim_client *cl)
{
    return jitter(cl) || opts(cl)->clip_to_deadline;
}

static int xact(const sim_client *cl)
{
    return opts(cl)->scope == ADVLOCK_TRANSACTION;
}

/* A zero timeout is a single try, whatever the strategy. */
static int waits_on_server(const sim_client *cl)
{
    return opts(cl)->wait == ADVLOCK_WAIT_SERVER && cl->step_.timeout_ms > 0;
}

/* Behind a proxy every lock statement is guarded: a session-scoped one
 * runs only on the claimed server session, a transaction-scoped one there
 * or where the server session holds no grant of the key (a pooled session
 * may hold it at session level for another client). */
static int guarded(const sim_client *cl)
{
    return cl->policy_proxied_;
}

/* Only a session-scoped operation claims its server session: a
 * transaction keeps one for itself, and its claim would outlive it. */
static int claims(const sim_client *cl)
{
    return !xact(cl);
}

/* wait: the server-side wait's statement rather than the try. The third
 * index: the scope (session, transaction), plus 2 when guarded. */
static advlock_sql lock_statement(const sim_client *cl, int wait)
{
    static const advlock_sql by[2][2][4] = {
        {{ADVLOCK_SQL_TRY_LOCK, ADVLOCK_SQL_TRY_XACT_LOCK, ADVLOCK_SQL_TRY_LOCK_GUARDED,
          ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED},
         {ADVLOCK_SQL_TRY_LOCK_SHARED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED,
          ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED}},
        {{ADVLOCK_SQL_LOCK, ADVLOCK_SQL_XACT_LOCK, ADVLOCK_SQL_LOCK_GUARDED,
          ADVLOCK_SQL_XACT_LOCK_GUARDED},
         {ADVLOCK_SQL_LOCK_SHARED, ADVLOCK_SQL_XACT_LOCK_SHARED, ADVLOCK_SQL_LOCK_SHARED_GUARDED,
          ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED}},
    };
    return by[wait][opts(cl)->mode == ADVLOCK_SHARED][xact(cl) + (guarded(cl) ? 2 : 0)];
}

/* The rows whose NULL means busy: a guarded transaction-scoped try or wait
 * reached a server session holding the key, and ran nothing. */
static int null_is_busy(const sim_client *cl, advlock_sql sql)
{
    return xact(cl) && advlock_sql_guarded(sql);
}

static advlock_sql unlock_statement(const sim_client *cl)
{
    int shared = opts(cl)->mode == ADVLOCK_SHARED;
    if (cl->policy_proxied_)
        return shared ? ADVLOCK_SQL_UNLOCK_SHARED_GUARDED : ADVLOCK_SQL_UNLOCK_GUARDED;
    return shared ? ADVLOCK_SQL_UNLOCK_SHARED : ADVLOCK_SQL_UNLOCK;
}

static const char *policy_name(const sim_client *cl)
{
    if (opts(cl)->wait == ADVLOCK_WAIT_SERVER)
        return "server-wait policy";
    if (jitter(cl))
        return "full-jitter policy";
    return opts(cl)->clip_to_deadline ? "clipped reference policy" : "reference policy";
}

/* ---- expectations ------------------------------------------------------------ */

static expected query(advlock_sql sql, int64_t deadline)
{
    return (expected){ADVLOCK_ACTION_QUERY, sql, deadline, 0, 0, 0, 0, ADVLOCK_DETAIL_NONE};
}

static expected done(advlock_outcome outcome, advlock_detail detail)
{
    return (expected){ADVLOCK_ACTION_DONE, 0, 0, 0, 0, outcome, 0, detail};
}

/* The statement in flight failed: r says how. A guarded statement's NULL
 * says it reached a server session this connection did not claim. */
static expected failure(const sim_client *cl, advlock_sql sql, advlock_result r)
{
    expected e = done(ADVLOCK_FAILED, ADVLOCK_DETAIL_NONE);
    e.failure = r == ADVLOCK_RESULT_SERVER_ERROR      ? ADVLOCK_ESERVER
                : r == ADVLOCK_RESULT_CONNECTION_LOST ? ADVLOCK_ECONNLOST
                : advlock_sql_guarded(sql)            ? ADVLOCK_ESESSION
                                                      : ADVLOCK_ENULL;
    e.sql = sql;
    /* A failed undo leaves the grant in doubt, unless the session (and the
     * lock with it) is gone; the detail says why the undo ran. */
    if (cl->policy_state_ == P_UNDO && r != ADVLOCK_RESULT_CONNECTION_LOST)
        e.detail = (advlock_detail)cl->policy_undo_reason_;
    return e;
}

/* What the model expects in the state it is in, with no new input. */
static expected current(const sim_client *cl)
{
    switch (cl->policy_state_) {
    case P_LOCK: return query(cl->policy_sql_, INT64_MAX);
    case P_WAIT:
        if (cl->policy_cancelling_)
            return (expected){ADVLOCK_ACTION_CANCEL_QUERY, cl->policy_sql_, 0, 0, 0, 0, 0,
                              ADVLOCK_DETAIL_NONE};
        /* Only a server-side wait has a deadline, a grace after the
         * timeout; once its cancel is sent, the moment to ask again. */
        return query(cl->policy_sql_,
                     cl->policy_deadline_passed_ ? cl->policy_resend_ : cl->policy_deadline_);
    case P_SLEEP:
        return (expected){
            ADVLOCK_ACTION_SLEEP, 0, cl->policy_wake_, cl->policy_sleep_, cl->policy_sleep_, 0, 0,
            ADVLOCK_DETAIL_NONE};
    case P_UNLOCK:
    case P_UNDO: return query(unlock_statement(cl), INT64_MAX);
    case P_DIAGNOSE: return query(ADVLOCK_SQL_HOLDERS, INT64_MAX);
    case P_SESSION: return query(ADVLOCK_SQL_SESSION, INT64_MAX);
    default: return done(ADVLOCK_FAILED, ADVLOCK_DETAIL_NONE); /* idle: nothing should happen */
    }
}

static expected attempt(sim_client *cl)
{
    cl->policy_state_ = P_LOCK;
    cl->policy_attempts_++;
    cl->policy_sql_ = lock_statement(cl, 0);
    return current(cl);
}

/* After a busy try with time left: the wait, bounded by the time left
 * (lock_timeout's range ends at INT32_MAX ms). */
static expected wait_on_server(sim_client *cl)
{
    int64_t left = cl->step_.timeout_ms - (cl->policy_reading_ - cl->policy_start_);
    cl->policy_state_ = P_WAIT;
    cl->policy_attempts_++;
    cl->policy_sql_ = lock_statement(cl, 1);
    cl->policy_bound_ = left < INT32_MAX ? left : INT32_MAX;
    return current(cl);
}

static expected timed_out(sim_client *cl)
{
    if (!opts(cl)->diagnose)
        return done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_NONE);
    cl->policy_state_ = P_DIAGNOSE;
    return current(cl);
}

/* An unlock gives back a grant the lock statement may have made; reason is
 * the detail a failure of that unlock reports. */
static expected undo(sim_client *cl, advlock_detail reason)
{
    cl->policy_state_ = P_UNDO;
    cl->policy_undo_reason_ = (int)reason;
    return current(cl);
}

static expected sleep_next(sim_client *cl);

/* Neither the caller nor the clock wants the lock any more; or the server
 * ended a wait early (its bound tops out at INT32_MAX ms): the next round. */
static expected end_unwanted(sim_client *cl)
{
    if (cl->policy_cancel_)
        return done(ADVLOCK_CANCELLED, ADVLOCK_DETAIL_NONE);
    if (cl->policy_deadline_passed_
        || cl->policy_reading_ - cl->policy_start_ >= cl->step_.timeout_ms)
        return timed_out(cl);
    return sleep_next(cl);
}

/* How long the operation goes on trying from its start: an acquire until
 * its timeout, a guarded release that reached another server session
 * within ADVLOCK_GUARD_RETRY_MS. */
static int64_t retry_bound(const sim_client *cl)
{
    return cl->policy_op_ == OP_ACQUIRE ? cl->step_.timeout_ms : ADVLOCK_GUARD_RETRY_MS;
}

/* The n-th sleep: its ceiling, drawn (jitter) or not, then cut to the time
 * left (clipping, jitter, and always a release's retries). A caller's
 * random callback cannot be replayed here, so then any length up to that
 * bound is allowed. */
static expected sleep_next(sim_client *cl)
{
    int64_t ceiling = advlock_sim_policy_sleep(++cl->policy_sleeps_);
    int64_t lo = ceiling, hi = ceiling;
    if (jitter(cl) && opts(cl)->random != NULL) {
        lo = 0;
    } else if (jitter(cl)) {
        lo = hi = (int64_t)(advlock_fake_splitmix64(&cl->policy_jitter_) % (uint64_t)(ceiling + 1));
    }
    if (clipped(cl) || cl->policy_op_ != OP_ACQUIRE) {
        int64_t left = retry_bound(cl) - (cl->policy_reading_ - cl->policy_start_);
        lo = lo < left ? lo : left;
        hi = hi < left ? hi : left;
    }
    cl->policy_state_ = P_SLEEP;
    cl->policy_sleep_ = lo;
    cl->policy_wake_ = cl->policy_reading_ + lo;
    return (expected){ADVLOCK_ACTION_SLEEP, 0, cl->policy_wake_, lo, hi, 0, 0, ADVLOCK_DETAIL_NONE};
}

/* The lock is busy: cancelled, timed out, a server-side wait (only after a
 * try that may_wait), or the next sleep. */
static expected busy(sim_client *cl, int may_wait)
{
    if (cl->policy_cancel_)
        return done(ADVLOCK_CANCELLED, ADVLOCK_DETAIL_NONE);
    if (cl->policy_reading_ - cl->policy_start_ >= cl->step_.timeout_ms)
        return timed_out(cl);
    if (may_wait && waits_on_server(cl))
        return wait_on_server(cl);
    return sleep_next(cl);
}

static expected after_lock(sim_client *cl, advlock_result r, const char *sqlstate)
{
    int unwanted = cl->policy_cancel_ || cl->policy_deadline_passed_;
    switch (r) {
    case ADVLOCK_RESULT_TRUE:
        if (!unwanted)
            return done(ADVLOCK_ACQUIRED, ADVLOCK_DETAIL_NONE);
        if (xact(cl)) /* cannot be given back before the transaction ends */
            return done(ADVLOCK_ACQUIRED,
                        cl->policy_cancel_ ? ADVLOCK_DETAIL_CANCEL_TOO_LATE : ADVLOCK_DETAIL_NONE);
        return undo(cl, cl->policy_cancel_ ? ADVLOCK_DETAIL_UNDO_CANCELLED
                                           : ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE);
    case ADVLOCK_RESULT_FALSE: return busy(cl, cl->policy_state_ == P_LOCK);
    case ADVLOCK_RESULT_NULL:
        /* Busy at this server session: as false, but polled, never waited
         * for there (the transaction pins that same session). */
        if (null_is_busy(cl, cl->policy_sql_))
            return busy(cl, 0);
        /* A guarded NULL is no answer to a cancel: the connection is unfit. */
        return cl->policy_cancel_ && !advlock_sql_guarded(cl->policy_sql_)
                   ? done(ADVLOCK_CANCELLED, ADVLOCK_DETAIL_NONE)
                   : failure(cl, cl->policy_sql_, r);
    case ADVLOCK_RESULT_SERVER_ERROR: {
        /* A wait's 57014 or 55P03: the cancel this machine asked for (the
         * caller's, or the grace after the deadline), the wait's own
         * lock_timeout, or nobody's 57014 (a statement_timeout, a stray
         * cancel: a failure). Each may have landed just as the lock was
         * granted, so a session lock is unlocked once first (and the
         * failure reported after it); a transaction lock went with the
         * transaction the error aborted, which cannot wait again. Any
         * other error fails. */
        int cancelled = strcmp(sqlstate, "57014") == 0;
        if (cl->policy_state_ != P_WAIT || (!cancelled && strcmp(sqlstate, "55P03") != 0))
            return failure(cl, cl->policy_sql_, r);
        int fails = cancelled && !unwanted;
        if (xact(cl))
            return fails
                           || (!unwanted
                               && cl->policy_reading_ - cl->policy_start_ < cl->step_.timeout_ms)
                       ? failure(cl, cl->policy_sql_, r)
                       : end_unwanted(cl);
        cl->policy_fail_after_undo_ = fails;
        return undo(cl, ADVLOCK_DETAIL_UNDO_AFTER_57014);
    }
    default: return failure(cl, cl->policy_sql_, r);
    }
}

/* The SQLSTATE an outcome reports: an error's, kept (if well formed) until
 * another error replaces it or the operation ends. */
static void keep_sqlstate(sim_client *cl, advlock_result r, const char *sqlstate)
{
    if (r != ADVLOCK_RESULT_SERVER_ERROR && r != ADVLOCK_RESULT_CONNECTION_LOST)
        return;
    cl->policy_sqlstate_[0] = '\0';
    for (int i = 0; i < 5; i++)
        if (!((sqlstate[i] >= '0' && sqlstate[i] <= '9')
              || (sqlstate[i] >= 'A' && sqlstate[i] <= 'Z')))
            return;
    if (sqlstate[5] == '\0')
        memcpy(cl->policy_sqlstate_, sqlstate, 6);
}

static expected after_result(sim_client *cl, advlock_result r, const char *sqlstate)
{
    cl->policy_cancelling_ = 0;
    keep_sqlstate(cl, r, sqlstate);
    switch (cl->policy_state_) {
    case P_LOCK:
    case P_WAIT: return after_lock(cl, r, sqlstate);
    case P_UNDO:
        /* Only a boolean proves the undoing unlock ran. After a 57014
         * nobody asked for, that 57014 is the outcome then. */
        if ((r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE)
            && cl->policy_fail_after_undo_) {
            expected e = failure(cl, cl->policy_sql_, ADVLOCK_RESULT_SERVER_ERROR);
            e.detail = ADVLOCK_DETAIL_NONE; /* the lock statement's failure, not the undo's */
            return e;
        }
        if (r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE)
            return end_unwanted(cl);
        return failure(cl, unlock_statement(cl), r);
    case P_DIAGNOSE:
        /* Rows come through on_holders; a failed query still times out. */
        return done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_DIAGNOSIS_FAILED);
    case P_SESSION:
        /* The row comes through on_session; a failed query fails. */
        return failure(cl, ADVLOCK_SQL_SESSION, r);
    default: /* P_UNLOCK */
        if (r == ADVLOCK_RESULT_TRUE)
            return done(ADVLOCK_RELEASED, ADVLOCK_DETAIL_NONE);
        if (r == ADVLOCK_RESULT_FALSE
            || (r == ADVLOCK_RESULT_NULL && !advlock_sql_guarded(unlock_statement(cl))))
            return done(ADVLOCK_NOT_HELD, ADVLOCK_DETAIL_NONE);
        /* Another server session answered: the claimed one may be busy
         * with another client's transaction for a moment. */
        if (r == ADVLOCK_RESULT_NULL
            && cl->policy_reading_ - cl->policy_start_ < ADVLOCK_GUARD_RETRY_MS)
            return sleep_next(cl);
        return failure(cl, unlock_statement(cl), r);
    }
}

static expected on_timer(sim_client *cl)
{
    if (cl->policy_state_ == P_SLEEP && cl->policy_reading_ < cl->policy_wake_)
        return current(cl);
    if (cl->policy_state_ == P_SLEEP && cl->policy_op_ == OP_RELEASE) {
        cl->policy_state_ = P_UNLOCK;
        return current(cl);
    }
    if (cl->policy_state_ == P_SLEEP)
        return attempt(cl);
    /* The deadline, or the moment to ask again for a cancel sent (a request
     * that overtook its statement was dropped). A request not yet sent is
     * not asked for twice; INT64_MAX is no deadline at all. */
    if (cl->policy_state_ == P_WAIT && !cl->policy_cancelling_) {
        int64_t due = cl->policy_deadline_passed_ ? cl->policy_resend_ : cl->policy_deadline_;
        if (due != INT64_MAX && cl->policy_reading_ >= due) {
            cl->policy_deadline_passed_ = 1;
            cl->policy_cancelling_ = 1;
        }
    }
    return current(cl);
}

static expected on_cancel(sim_client *cl)
{
    if (cl->policy_state_ == P_SLEEP)
        return done(ADVLOCK_CANCELLED, ADVLOCK_DETAIL_NONE);
    if ((cl->policy_state_ == P_LOCK || cl->policy_state_ == P_WAIT
         || cl->policy_state_ == P_SESSION)
        && !cl->policy_cancel_) {
        cl->policy_cancel_ = 1;
        /* A server-side wait could last forever: it must be cancelled, once. */
        if (cl->policy_state_ == P_WAIT && !cl->policy_deadline_passed_) {
            cl->policy_deadline_passed_ = 1;
            cl->policy_cancelling_ = 1;
        }
    }
    return current(cl);
}

/* The operation's first statement, once the session is known: a standby
 * refuses acquires, and behind a proxy a session-scoped operation needs the
 * claimed server session; a refusal sends nothing, and names the statement
 * it did not send (an acquire: the session row). */
static expected begin(sim_client *cl)
{
    int acquire = cl->policy_op_ == OP_ACQUIRE;
    if (acquire && cl->policy_standby_ && !opts(cl)->allow_standby) {
        expected e = done(ADVLOCK_FAILED, ADVLOCK_DETAIL_NONE);
        e.failure = ADVLOCK_ESTANDBY;
        e.sql = ADVLOCK_SQL_SESSION;
        return e;
    }
    if (claims(cl) && guarded(cl) && !cl->policy_claimed_) {
        expected e = done(ADVLOCK_FAILED, ADVLOCK_DETAIL_NONE);
        e.failure = ADVLOCK_ESESSION;
        e.sql = acquire ? ADVLOCK_SQL_SESSION : unlock_statement(cl);
        return e;
    }
    if (acquire)
        return attempt(cl);
    cl->policy_state_ = P_UNLOCK;
    return current(cl);
}

/* A session value not checked yet, or behind a proxy a session-scoped
 * operation whose claim no row asked for yet: the row comes first. */
static expected first_statement(sim_client *cl)
{
    if (sim_session_value(cl)->token != 0
        && (!cl->policy_checked_
            || (claims(cl) && cl->policy_proxied_ && !cl->policy_claim_asked_))) {
        cl->policy_state_ = P_SESSION;
        return current(cl);
    }
    return begin(cl);
}

/* The row: a proxy shows the client a pid of its own (0, unknown, counts
 * as one); then the operation begins, unless it was cancelled meanwhile. */
static expected on_session(sim_client *cl)
{
    int pid = cl->session_row_.pid;
    cl->policy_checked_ = 1;
    cl->policy_proxied_ = pid != sim_session_value(cl)->client_pid || pid == 0;
    cl->policy_claim_asked_ = claims(cl);
    cl->policy_claimed_ = claims(cl) && cl->session_row_.ours != 0;
    cl->policy_standby_ = cl->session_row_.in_recovery != 0;
    if (cl->policy_cancel_)
        return done(ADVLOCK_CANCELLED, ADVLOCK_DETAIL_NONE);
    return begin(cl);
}

static expected start_acquire(sim_client *cl, int64_t reading)
{
    cl->policy_start_ = cl->policy_reading_ = reading;
    cl->policy_sleeps_ = 0;
    cl->policy_attempts_ = 0;
    cl->policy_cancel_ = cl->policy_deadline_passed_ = cl->policy_cancelling_ = 0;
    cl->policy_fail_after_undo_ = 0;
    cl->policy_resend_ = INT64_MAX;
    cl->policy_sqlstate_[0] = '\0';
    /* The wait's own deadline: the grace after the timeout. */
    cl->policy_deadline_ = advlock_add_saturating(
        advlock_add_saturating(reading, cl->step_.timeout_ms), ADVLOCK_WAIT_GRACE_MS);
    cl->policy_op_ = OP_ACQUIRE;
    return first_statement(cl);
}

static expected advance(sim_client *cl, enum policy_input input, advlock_result r,
                        const char *sqlstate, int64_t reading)
{
    if (reading > cl->policy_reading_)
        cl->policy_reading_ = reading;
    switch (input) {
    case IN_START_ACQUIRE: return start_acquire(cl, reading);
    case IN_START_RELEASE:
        cl->policy_start_ = cl->policy_reading_ = reading;
        cl->policy_attempts_ = 0;
        cl->policy_sleeps_ = 0;
        cl->policy_cancel_ = 0;
        cl->policy_sqlstate_[0] = '\0';
        if (xact(cl))
            return done(ADVLOCK_ENDS_WITH_TRANSACTION, ADVLOCK_DETAIL_NONE);
        cl->policy_op_ = OP_RELEASE;
        return first_statement(cl);
    case IN_RESULT: return after_result(cl, r, sqlstate);
    case IN_TIMER: return on_timer(cl);
    case IN_CANCEL: return on_cancel(cl);
    case IN_CANCEL_SENT:
        cl->policy_cancelling_ = 0;
        cl->policy_resend_ = advlock_add_saturating(cl->policy_reading_, CANCEL_REPEAT_MS);
        return current(cl);
    case IN_SESSION: return on_session(cl);
    default: /* IN_HOLDERS */ return done(ADVLOCK_TIMED_OUT, ADVLOCK_DETAIL_DIAGNOSED);
    }
}

/* ---- comparing ------------------------------------------------------------------ */

static int mismatch(char *why, size_t size, const char *what, long long want, long long got)
{
    snprintf(why, size, "%s: the policy model says %lld, the machine did %lld", what, want, got);
    return -1;
}

/* The holder facts a diagnosed timeout reports, from the rows the holders
 * query answered: the first granted row's session (pid 0: none), how many
 * others hold the lock, and the first one's age (never negative), state and
 * application (always "" in the fake). */
static int check_holder(const sim_client *cl, const advlock_report *r, char *why, size_t size)
{
    static const advlock_backend_state states[4] = {ADVLOCK_BACKEND_IDLE, ADVLOCK_BACKEND_ACTIVE,
                                                    ADVLOCK_BACKEND_IDLE_IN_TRANSACTION,
                                                    ADVLOCK_BACKEND_IDLE_IN_TRANSACTION_ABORTED};
    size_t first = cl->nrows_, holders = 0;
    for (size_t i = 0; i < cl->nrows_; i++)
        if (cl->rows_[i].granted && holders++ == 0)
            first = i;
    if (holders == 0)
        return r->holder_pid == 0
                   ? 0
                   : mismatch(why, size, "holder pid (nobody holds it)", 0, r->holder_pid);
    int64_t held = cl->rows_[first].seconds > 0 ? cl->rows_[first].seconds : 0;
    if (r->holder_pid != cl->rows_[first].pid)
        return mismatch(why, size, "holder pid", cl->rows_[first].pid, r->holder_pid);
    if (r->other_holders != (int)holders - 1)
        return mismatch(why, size, "other holders", (long long)holders - 1, r->other_holders);
    if (r->holder_seconds != held)
        return mismatch(why, size, "holder seconds", held, r->holder_seconds);
    if (r->holder_state != states[cl->rows_[first].state])
        return mismatch(why, size, "holder state", states[cl->rows_[first].state], r->holder_state);
    if (r->holder_application[0] != '\0') {
        snprintf(why, size, "holder application is '%.60s', the fake names none",
                 r->holder_application);
        return -1;
    }
    return 0;
}

static int check_sleep(sim_client *cl, const expected *e, const advlock_action *a, char *why,
                       size_t size)
{
    if (a->sleep_ms < e->sleep_lo || a->sleep_ms > e->sleep_hi) {
        if (e->sleep_lo == e->sleep_hi)
            snprintf(why, size, "schedule: sleep %llu lasted %lld ms; the %s says %lld ms",
                     (unsigned long long)cl->policy_sleeps_, (long long)a->sleep_ms,
                     policy_name(cl), (long long)e->sleep_lo);
        else
            snprintf(why, size, "schedule: sleep %llu lasted %lld ms; the %s allows %lld..%lld ms",
                     (unsigned long long)cl->policy_sleeps_, (long long)a->sleep_ms,
                     policy_name(cl), (long long)e->sleep_lo, (long long)e->sleep_hi);
        return -1;
    }
    /* Within a range (a new sleep drawn by the caller's callback), the
     * machine's draw decides, and the wake-up follows from it. */
    if (e->sleep_lo != e->sleep_hi) {
        cl->policy_sleep_ = a->sleep_ms;
        cl->policy_wake_ = cl->policy_reading_ + a->sleep_ms;
    }
    if (a->wake_at_ms != cl->policy_wake_)
        return mismatch(why, size, "schedule: wake-up time", cl->policy_wake_, a->wake_at_ms);
    return 0;
}

/* The final report, field by field. */
static int check_done(sim_client *cl, const expected *e, const advlock_report *r, char *why,
                      size_t size)
{
    cl->policy_state_ = P_IDLE;
    if (r->outcome != e->outcome) {
        snprintf(why, size,
                 "outcome after %lld ms and %llu attempts of timeout %lld ms: "
                 "the %s says %s, the machine said %s",
                 (long long)(cl->policy_reading_ - cl->policy_start_),
                 (unsigned long long)cl->policy_attempts_, (long long)cl->step_.timeout_ms,
                 policy_name(cl), advlock_outcome_name(e->outcome),
                 advlock_outcome_name(r->outcome));
        return -1;
    }
    if (r->failure != e->failure)
        return mismatch(why, size, "failure (advlock_failure)", e->failure, r->failure);
    if (r->detail != e->detail)
        return mismatch(why, size, "detail (advlock_detail)", e->detail, r->detail);
    if (e->outcome == ADVLOCK_FAILED && r->sql != e->sql)
        return mismatch(why, size, "the failed statement (advlock_sql)", e->sql, r->sql);
    /* A failure carries the last error's SQLSTATE (after an unrequested
     * 57014, that 57014 even when the undo answered); nothing else any. */
    if (e->outcome == ADVLOCK_FAILED && strcmp(r->sqlstate, cl->policy_sqlstate_) != 0) {
        snprintf(why, size, "SQLSTATE of the failure is \"%.5s\", expected \"%.5s\"", r->sqlstate,
                 cl->policy_sqlstate_);
        return -1;
    }
    if (e->outcome != ADVLOCK_FAILED && r->sqlstate[0] != '\0') {
        snprintf(why, size, "%s carries SQLSTATE \"%.5s\": only a failure may",
                 advlock_outcome_name(r->outcome), r->sqlstate);
        return -1;
    }
    if (r->elapsed_ms != cl->policy_reading_ - cl->policy_start_)
        return mismatch(why, size, "elapsed time (ms)", cl->policy_reading_ - cl->policy_start_,
                        r->elapsed_ms);
    if (e->detail == ADVLOCK_DETAIL_DIAGNOSED)
        return check_holder(cl, r, why, size);
    return r->holder_pid == 0 ? 0
                              : mismatch(why, size, "holder pid (no diagnosis)", 0, r->holder_pid);
}

/* What every action's report says from the start: the key, the timeout,
 * the lock attempts so far. */
static int check_live_report(const sim_client *cl, const advlock_report *r, char *why, size_t size)
{
    if (r == NULL) {
        snprintf(why, size, "the machine's action during an operation has no report");
        return -1;
    }
    if (r->key != cl->key_)
        return mismatch(why, size, "report key", cl->key_, r->key);
    int64_t timeout = cl->step_.kind == ADVLOCK_SIM_ACQUIRE ? cl->step_.timeout_ms : 0;
    if (r->timeout_ms != timeout)
        return mismatch(why, size, "report timeout (ms)", timeout, r->timeout_ms);
    if (r->attempts != cl->policy_attempts_)
        return mismatch(why, size, "lock attempts", (long long)cl->policy_attempts_,
                        (long long)r->attempts);
    return 0;
}

/* $1 the key (the session row's: the token, or 0 to claim nothing), then
 * a wait's bound, then a guarded statement's token. */
static int check_params(const sim_client *cl, const advlock_action *a, char *why, size_t size)
{
    int64_t token = (int64_t)sim_session_value(cl)->token;
    if (a->sql == ADVLOCK_SQL_SESSION) {
        int64_t claim = claims(cl) ? token : 0;
        return a->param == claim
                   ? 0
                   : mismatch(why, size, "the session row's token ($1)", claim, a->param);
    }
    if (a->param != cl->key_)
        return mismatch(why, size, "query parameter (the lock key)", cl->key_, a->param);
    int64_t guard = advlock_sql_guarded(a->sql) ? token : 0;
    int64_t bound = cl->policy_state_ == P_WAIT ? cl->policy_bound_ : 0;
    int64_t second = bound != 0 ? bound : guard, third = bound != 0 ? guard : 0;
    if (a->param2 != second)
        return mismatch(why, size, "the wait's bound or the token ($2)", second, a->param2);
    if (a->param3 != third)
        return mismatch(why, size, "a guarded wait's token ($3)", third, a->param3);
    return 0;
}

int advlock_sim_policy_check(sim_client *cl, enum policy_input input, advlock_result result,
                             const char *sqlstate, int64_t reading, const advlock_action *a,
                             char *why, size_t size)
{
    expected e = advance(cl, input, result, sqlstate, reading);
    if (a->kind != e.kind) {
        static const char *const kinds[] = {"nothing", "query", "sleep", "done",
                                            "cancel the query"};
        snprintf(why, size,
                 "after %lld ms of timeout %lld ms, attempt %llu: the %s says %s, the "
                 "machine did %s",
                 (long long)(cl->policy_reading_ - cl->policy_start_),
                 (long long)cl->step_.timeout_ms, (unsigned long long)cl->policy_attempts_,
                 policy_name(cl), kinds[e.kind], (unsigned)a->kind < 5 ? kinds[a->kind] : "?");
        return -1;
    }
    if (e.kind == ADVLOCK_ACTION_QUERY || e.kind == ADVLOCK_ACTION_CANCEL_QUERY) {
        if (a->sql != e.sql)
            return mismatch(why, size, "statement (advlock_sql)", e.sql, a->sql);
        if (check_params(cl, a, why, size) != 0)
            return -1;
        if (a->sql_text == NULL || strcmp(a->sql_text, advlock_sql_text(e.sql)) != 0)
            return mismatch(why, size, "SQL text differs from the statement table", 0, 1);
        if (e.kind == ADVLOCK_ACTION_QUERY && a->wake_at_ms != e.wake_at_ms)
            return mismatch(why, size, "the query's deadline (wake_at_ms)", e.wake_at_ms,
                            a->wake_at_ms);
    } else if (e.kind == ADVLOCK_ACTION_SLEEP) {
        if (check_sleep(cl, &e, a, why, size) != 0)
            return -1;
    }
    if (check_live_report(cl, a->report, why, size) != 0)
        return -1;
    return e.kind == ADVLOCK_ACTION_DONE ? check_done(cl, &e, a->report, why, size) : 0;
}
