/*
 * The lock policy as an independent model: after every input the simulation
 * gives a machine, what must its next action be, under the client's
 * options? Which statement (by mode, scope and waiting strategy), the
 * schedule (the reference's sleeps 100, 200, 400, 800, 1000, ... ms from the
 * reading that saw false; with clipping, the last one cut to end at the
 * deadline; with full jitter, each drawn from its own splitmix64 stream over
 * the client's jitter seed as r mod (ceiling + 1), then clipped), the timeout
 * rule (TIMED_OUT at the first failed attempt whose elapsed time reaches the
 * timeout), a server-side wait's deadline and cancel (asked for again every
 * 250 ms until the answer comes: PostgreSQL drops a cancel that overtakes its
 * statement), the undo of a grant nobody wants (also after a 57014, asked
 * for or not, which may hide one), holder diagnostics, and every outcome's
 * message and SQLSTATE. Written
 * from the design record and the header's contract, not from the core's
 * code, so that a wrong core shows up as a disagreement.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

enum { P_IDLE, P_LOCK, P_SLEEP, P_UNLOCK, P_UNDO, P_DIAGNOSE };

/* Which message an outcome must carry. */
enum message {
    M_ANY,
    M_EMPTY,
    M_FAILED,
    M_TIMEOUT,
    M_DIAGNOSED,
    M_DIAGNOSIS_FAILED,
    M_CANCELLED,
    M_TOO_LATE,
    M_ENDS_WITH_TRANSACTION,
    M_NOT_HELD
};

int64_t sim_policy_sleep(uint64_t n)
{
    int64_t ms = 100;
    for (uint64_t i = 1; i < n && ms < 1000; i++)
        ms *= 2;
    return ms < 1000 ? ms : 1000;
}

void sim_policy_seed(advlock_sim_client_ *cl, uint64_t jitter_seed)
{
    cl->policy_jitter_ = jitter_seed;
}

/* The generator the options name: splitmix64 (Steele, Lea, Flood). */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Seconds as the reference's TimeSpan.TotalSeconds prints them. */
static void seconds(int64_t ms, char *out, size_t size)
{
    int64_t frac = ms % 1000;
    if (frac == 0) {
        snprintf(out, size, "%lld", (long long)(ms / 1000));
        return;
    }
    char digits[4] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                      (char)('0' + frac % 10), '\0'};
    size_t keep = 3;
    while (keep > 1 && digits[keep - 1] == '0')
        keep--;
    digits[keep] = '\0';
    snprintf(out, size, "%lld.%s", (long long)(ms / 1000), digits);
}

/* Why an unlock follows a lock statement: said when that unlock fails. */
enum undo_reason { U_CANCELLED, U_AFTER_DEADLINE, U_AFTER_57014 };

/* A cancel asked for is asked for again this long after it was sent. */
enum { CANCEL_REPEAT_MS = 250 };

typedef struct expected {
    advlock_action_kind kind;
    advlock_sql sql;            /* QUERY; FAILED: the statement the message names */
    int64_t wake_at_ms;         /* QUERY: its deadline (INT64_MAX: none); SLEEP: wake-up */
    int64_t sleep_lo, sleep_hi; /* SLEEP: the allowed lengths (one, unless a callback draws) */
    advlock_outcome outcome;
    int error;
    enum message message;
    const char *server_message; /* FAILED: the server's words the message quotes */
    int undo_note;              /* FAILED: the undo_reason the message ends with, or -1 */
} expected;

/* ---- the statements the options choose ---------------------------------- */

static const advlock_options *opts(const advlock_sim_client_ *cl)
{
    return &cl->options_;
}

static int jitter(const advlock_sim_client_ *cl)
{
    return opts(cl)->backoff == ADVLOCK_BACKOFF_FULL_JITTER;
}

static int clipped(const advlock_sim_client_ *cl)
{
    return jitter(cl) || opts(cl)->clip_to_deadline;
}

static int xact(const advlock_sim_client_ *cl)
{
    return opts(cl)->scope == ADVLOCK_TRANSACTION;
}

/* A zero timeout is a single try, whatever the strategy. */
static int waits_on_server(const advlock_sim_client_ *cl)
{
    return opts(cl)->wait == ADVLOCK_WAIT_SERVER && cl->step_.timeout_ms > 0;
}

static advlock_sql lock_statement(const advlock_sim_client_ *cl)
{
    static const advlock_sql by[2][2][2] = {
        {{ADVLOCK_SQL_TRY_LOCK, ADVLOCK_SQL_TRY_XACT_LOCK},
         {ADVLOCK_SQL_TRY_LOCK_SHARED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED}},
        {{ADVLOCK_SQL_LOCK, ADVLOCK_SQL_XACT_LOCK},
         {ADVLOCK_SQL_LOCK_SHARED, ADVLOCK_SQL_XACT_LOCK_SHARED}},
    };
    return by[waits_on_server(cl)][opts(cl)->mode == ADVLOCK_SHARED][xact(cl)];
}

static advlock_sql unlock_statement(const advlock_sim_client_ *cl)
{
    return opts(cl)->mode == ADVLOCK_SHARED ? ADVLOCK_SQL_UNLOCK_SHARED : ADVLOCK_SQL_UNLOCK;
}

static const char *policy_name(const advlock_sim_client_ *cl)
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
    return (expected){ADVLOCK_ACTION_QUERY, sql, deadline, 0, 0, 0, 0, M_ANY, NULL, -1};
}

static expected done(advlock_outcome outcome, int error, enum message message)
{
    return (expected){ADVLOCK_ACTION_DONE, 0, 0, 0, 0, outcome, error, message, NULL, -1};
}

/* The statement in flight failed: r says how, message is the server's. */
static expected failure(const advlock_sim_client_ *cl, advlock_sql sql, advlock_result r,
                        const char *message)
{
    expected e = done(ADVLOCK_FAILED,
                      r == ADVLOCK_RESULT_SERVER_ERROR      ? ADVLOCK_ESERVER
                      : r == ADVLOCK_RESULT_CONNECTION_LOST ? ADVLOCK_ECONNLOST
                                                            : ADVLOCK_ENULL,
                      M_FAILED);
    e.sql = sql;
    e.server_message = message;
    /* A failed undo leaves the grant in doubt, unless the session (and the
     * lock with it) is gone. */
    if (cl->policy_state_ == P_UNDO && r != ADVLOCK_RESULT_CONNECTION_LOST)
        e.undo_note = cl->policy_undo_reason_;
    return e;
}

/* What the model expects in the state it is in, with no new input. */
static expected current(const advlock_sim_client_ *cl)
{
    switch (cl->policy_state_) {
    case P_LOCK:
        if (cl->policy_cancelling_)
            return (expected){
                ADVLOCK_ACTION_CANCEL_QUERY, cl->policy_sql_, 0, 0, 0, 0, 0, M_ANY, NULL, -1};
        /* Only a server-side wait has a deadline; once its cancel is sent,
         * the moment to ask for it again. */
        if (!waits_on_server(cl))
            return query(cl->policy_sql_, INT64_MAX);
        return query(cl->policy_sql_,
                     cl->policy_deadline_passed_ ? cl->policy_resend_ : cl->policy_deadline_);
    case P_SLEEP:
        return (expected){ADVLOCK_ACTION_SLEEP,
                          0,
                          cl->policy_wake_,
                          cl->policy_sleep_,
                          cl->policy_sleep_,
                          0,
                          0,
                          M_ANY,
                          NULL,
                          -1};
    case P_UNLOCK:
    case P_UNDO: return query(unlock_statement(cl), INT64_MAX);
    case P_DIAGNOSE: return query(ADVLOCK_SQL_HOLDERS, INT64_MAX);
    default: return done(ADVLOCK_FAILED, 0, M_ANY); /* idle: nothing should happen */
    }
}

static expected attempt(advlock_sim_client_ *cl)
{
    cl->policy_state_ = P_LOCK;
    cl->policy_attempts_++;
    cl->policy_sql_ = lock_statement(cl);
    return current(cl);
}

static expected timed_out(advlock_sim_client_ *cl)
{
    if (!opts(cl)->diagnose)
        return done(ADVLOCK_TIMED_OUT, 0, M_TIMEOUT);
    cl->policy_state_ = P_DIAGNOSE;
    return current(cl);
}

/* An unlock gives back a grant the lock statement may have made. */
static expected undo(advlock_sim_client_ *cl, enum undo_reason reason)
{
    cl->policy_state_ = P_UNDO;
    cl->policy_undo_reason_ = reason;
    return current(cl);
}

/* Neither the caller nor the clock wants the lock any more. */
static expected end_unwanted(advlock_sim_client_ *cl)
{
    return cl->policy_cancel_ ? done(ADVLOCK_CANCELLED, 0, M_CANCELLED) : timed_out(cl);
}

/* The n-th sleep: its ceiling, drawn (jitter) or not, then cut to the time
 * left (clipping, jitter). A caller's random callback cannot be replayed
 * here, so then any length up to that bound is allowed. */
static expected sleep_next(advlock_sim_client_ *cl)
{
    int64_t ceiling = sim_policy_sleep(++cl->policy_sleeps_);
    int64_t lo = ceiling, hi = ceiling;
    if (jitter(cl) && opts(cl)->random != NULL) {
        lo = 0;
    } else if (jitter(cl)) {
        lo = hi = (int64_t)(splitmix64(&cl->policy_jitter_) % (uint64_t)(ceiling + 1));
    }
    if (clipped(cl)) {
        int64_t left = cl->step_.timeout_ms - (cl->policy_reading_ - cl->policy_start_);
        lo = lo < left ? lo : left;
        hi = hi < left ? hi : left;
    }
    cl->policy_state_ = P_SLEEP;
    cl->policy_sleep_ = lo;
    cl->policy_wake_ = cl->policy_reading_ + lo;
    return (expected){ADVLOCK_ACTION_SLEEP, 0, cl->policy_wake_, lo, hi, 0, 0, M_ANY, NULL, -1};
}

static expected after_lock(advlock_sim_client_ *cl, advlock_result r, const char *sqlstate,
                           const char *message)
{
    int unwanted = cl->policy_cancel_ || cl->policy_deadline_passed_;
    switch (r) {
    case ADVLOCK_RESULT_TRUE:
        if (!unwanted)
            return done(ADVLOCK_ACQUIRED, 0, M_EMPTY);
        if (xact(cl)) /* cannot be given back before the transaction ends */
            return done(ADVLOCK_ACQUIRED, 0, cl->policy_cancel_ ? M_TOO_LATE : M_EMPTY);
        return undo(cl, cl->policy_cancel_ ? U_CANCELLED : U_AFTER_DEADLINE);
    case ADVLOCK_RESULT_FALSE:
        if (cl->policy_cancel_)
            return done(ADVLOCK_CANCELLED, 0, M_CANCELLED);
        if (cl->policy_reading_ - cl->policy_start_ >= cl->step_.timeout_ms)
            return timed_out(cl);
        return sleep_next(cl);
    case ADVLOCK_RESULT_NULL:
        return cl->policy_cancel_ ? done(ADVLOCK_CANCELLED, 0, M_CANCELLED)
                                  : failure(cl, cl->policy_sql_, r, message);
    case ADVLOCK_RESULT_SERVER_ERROR:
        /* A waiting statement's 57014: after the cancel this machine asked
         * for, the timeout (or the caller's cancel); nobody's (a
         * statement_timeout, a stray cancel), a failure. Either way
         * PostgreSQL may have granted the lock just before the cancel ended
         * the statement, so a session lock is unlocked once first (and the
         * failure reported after it); a transaction lock went with the
         * transaction the error aborted. Any other error fails. */
        if (!waits_on_server(cl) || strcmp(sqlstate, "57014") != 0)
            return failure(cl, cl->policy_sql_, r, message);
        if (unwanted)
            return xact(cl) ? end_unwanted(cl) : undo(cl, U_AFTER_57014);
        if (xact(cl))
            return failure(cl, cl->policy_sql_, r, message);
        cl->policy_fail_after_undo_ = 1;
        snprintf(cl->policy_failure_, sizeof cl->policy_failure_, "%s", message);
        return undo(cl, U_AFTER_57014);
    default: return failure(cl, cl->policy_sql_, r, message);
    }
}

/* The SQLSTATE an outcome reports: an error's, kept (if well formed) until
 * another error replaces it or the operation ends. */
static void keep_sqlstate(advlock_sim_client_ *cl, advlock_result r, const char *sqlstate)
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

static expected after_result(advlock_sim_client_ *cl, advlock_result r, const char *sqlstate,
                             const char *message)
{
    cl->policy_cancelling_ = 0;
    keep_sqlstate(cl, r, sqlstate);
    switch (cl->policy_state_) {
    case P_LOCK: return after_lock(cl, r, sqlstate, message);
    case P_UNDO:
        /* Only a boolean proves the undoing unlock ran. After a 57014
         * nobody asked for, that 57014 is the outcome then. */
        if ((r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE)
            && cl->policy_fail_after_undo_) {
            expected e =
                failure(cl, cl->policy_sql_, ADVLOCK_RESULT_SERVER_ERROR, cl->policy_failure_);
            e.undo_note = -1; /* the lock statement's failure, not the undo's */
            return e;
        }
        if (r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE)
            return end_unwanted(cl);
        return failure(cl, unlock_statement(cl), r, message);
    case P_DIAGNOSE:
        /* Rows come through on_holders; a failed query still times out. */
        return done(ADVLOCK_TIMED_OUT, 0, M_DIAGNOSIS_FAILED);
    default: /* P_UNLOCK */
        if (r == ADVLOCK_RESULT_TRUE)
            return done(ADVLOCK_RELEASED, 0, M_EMPTY);
        if (r == ADVLOCK_RESULT_FALSE || r == ADVLOCK_RESULT_NULL)
            return done(ADVLOCK_NOT_HELD, 0, M_NOT_HELD);
        return failure(cl, unlock_statement(cl), r, message);
    }
}

static expected on_timer(advlock_sim_client_ *cl)
{
    if (cl->policy_state_ == P_SLEEP)
        return cl->policy_reading_ < cl->policy_wake_ ? current(cl) : attempt(cl);
    /* The deadline, or the moment to ask again for a cancel sent (a request
     * that overtook its statement was dropped). A request not yet sent is
     * not asked for twice; INT64_MAX is no deadline at all. */
    if (cl->policy_state_ == P_LOCK && waits_on_server(cl) && !cl->policy_cancelling_) {
        int64_t due = cl->policy_deadline_passed_ ? cl->policy_resend_ : cl->policy_deadline_;
        if (due != INT64_MAX && cl->policy_reading_ >= due) {
            cl->policy_deadline_passed_ = 1;
            cl->policy_cancelling_ = 1;
        }
    }
    return current(cl);
}

static expected on_cancel(advlock_sim_client_ *cl)
{
    if (cl->policy_state_ == P_SLEEP)
        return done(ADVLOCK_CANCELLED, 0, M_CANCELLED);
    if (cl->policy_state_ == P_LOCK && !cl->policy_cancel_) {
        cl->policy_cancel_ = 1;
        /* A server-side wait could last forever: it must be cancelled, once. */
        if (waits_on_server(cl) && !cl->policy_deadline_passed_) {
            cl->policy_deadline_passed_ = 1;
            cl->policy_cancelling_ = 1;
        }
    }
    return current(cl);
}

static expected start_acquire(advlock_sim_client_ *cl, int64_t reading)
{
    cl->policy_start_ = cl->policy_reading_ = reading;
    cl->policy_sleeps_ = 0;
    cl->policy_attempts_ = 0;
    cl->policy_cancel_ = cl->policy_deadline_passed_ = cl->policy_cancelling_ = 0;
    cl->policy_fail_after_undo_ = 0;
    cl->policy_resend_ = INT64_MAX;
    cl->policy_sqlstate_[0] = '\0';
    cl->policy_deadline_ =
        reading > INT64_MAX - cl->step_.timeout_ms ? INT64_MAX : reading + cl->step_.timeout_ms;
    return attempt(cl);
}

static expected advance(advlock_sim_client_ *cl, enum policy_input input, advlock_result r,
                        const char *sqlstate, const char *message, int64_t reading)
{
    if (reading > cl->policy_reading_)
        cl->policy_reading_ = reading;
    switch (input) {
    case IN_START_ACQUIRE: return start_acquire(cl, reading);
    case IN_START_RELEASE:
        cl->policy_start_ = cl->policy_reading_ = reading;
        cl->policy_attempts_ = 0;
        cl->policy_sqlstate_[0] = '\0';
        if (xact(cl))
            return done(ADVLOCK_ENDS_WITH_TRANSACTION, 0, M_ENDS_WITH_TRANSACTION);
        cl->policy_state_ = P_UNLOCK;
        return current(cl);
    case IN_RESULT: return after_result(cl, r, sqlstate, message);
    case IN_TIMER: return on_timer(cl);
    case IN_CANCEL: return on_cancel(cl);
    case IN_CANCEL_SENT:
        cl->policy_cancelling_ = 0;
        cl->policy_resend_ = cl->policy_reading_ > INT64_MAX - CANCEL_REPEAT_MS
                                 ? INT64_MAX
                                 : cl->policy_reading_ + CANCEL_REPEAT_MS;
        return current(cl);
    default: /* IN_HOLDERS */ return done(ADVLOCK_TIMED_OUT, 0, M_DIAGNOSED);
    }
}

/* ---- comparing ------------------------------------------------------------------ */

static int mismatch(char *why, size_t size, const char *what, long long want, long long got)
{
    snprintf(why, size, "%s: the policy model says %lld, the machine did %lld", what, want, got);
    return -1;
}

/* Appends to a NUL-terminated buffer, cutting at its end. */
static void append(char *out, size_t size, const char *text)
{
    size_t n = strlen(out);
    snprintf(out + n, size - n, "%s", text);
}

/* " Held by pid P (application 'A', state S) for Ns[ and by n other
 * session(s)]." from the first granted row, or " No session holds it now.";
 * and whether the action's holder fields name that row. */
static int diagnosis(const advlock_sim_client_ *cl, const advlock_action *a, char *want,
                     size_t size)
{
    size_t first = cl->nrows_, holders = 0;
    for (size_t i = 0; i < cl->nrows_; i++)
        if (cl->rows_[i].granted && holders++ == 0)
            first = i;
    if (holders == 0) {
        append(want, size, " No session holds it now.");
        return a->holder_pid == 0;
    }
    char secs[32], text[ADVLOCK_MESSAGE_MAX];
    int64_t held = cl->rows_[first].seconds > 0 ? cl->rows_[first].seconds : 0;
    const char *state = sim_state_names[cl->rows_[first].state];
    seconds(held * 1000, secs, sizeof secs);
    snprintf(text, sizeof text, " Held by pid %d (application '', state %s) for %ss",
             cl->rows_[first].pid, state, secs);
    append(want, size, text);
    if (holders > 1) {
        snprintf(text, sizeof text, " and by %u other session%s", (unsigned)(holders - 1),
                 holders == 2 ? "" : "s");
        append(want, size, text);
    }
    append(want, size, ".");
    return a->holder_pid == cl->rows_[first].pid && a->holder_seconds == held
           && strcmp(a->holder_application, "") == 0 && strcmp(a->holder_state, state) == 0;
}

static size_t trimmed(const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    return n;
}

/* "<function> for '<key>' <what went wrong>[ (<why the undo ran>...)]". */
static void failed_message(const advlock_sim_client_ *cl, const expected *e, char *want,
                           size_t size)
{
    static const char *const notes[] = {
        [U_CANCELLED] = " (undoing a cancelled acquire: the lock may still be held)",
        [U_AFTER_DEADLINE] = " (giving back a grant that came after the deadline: the lock may "
                             "still be held)",
        [U_AFTER_57014] = " (giving back a grant the cancelled statement may have made: the lock "
                          "may still be held)",
    };
    /* PostgreSQL's function names; the waiting lock functions return void,
     * every other one boolean. */
    static const char *const functions[ADVLOCK_SQL_COUNT] = {
        [ADVLOCK_SQL_TRY_LOCK] = "pg_try_advisory_lock",
        [ADVLOCK_SQL_UNLOCK] = "pg_advisory_unlock",
        [ADVLOCK_SQL_TRY_LOCK_SHARED] = "pg_try_advisory_lock_shared",
        [ADVLOCK_SQL_UNLOCK_SHARED] = "pg_advisory_unlock_shared",
        [ADVLOCK_SQL_TRY_XACT_LOCK] = "pg_try_advisory_xact_lock",
        [ADVLOCK_SQL_TRY_XACT_LOCK_SHARED] = "pg_try_advisory_xact_lock_shared",
        [ADVLOCK_SQL_LOCK] = "pg_advisory_lock",
        [ADVLOCK_SQL_LOCK_SHARED] = "pg_advisory_lock_shared",
        [ADVLOCK_SQL_XACT_LOCK] = "pg_advisory_xact_lock",
        [ADVLOCK_SQL_XACT_LOCK_SHARED] = "pg_advisory_xact_lock_shared",
        [ADVLOCK_SQL_HOLDERS] = "holders",
    };
    int is_void = e->sql == ADVLOCK_SQL_LOCK || e->sql == ADVLOCK_SQL_LOCK_SHARED
                  || e->sql == ADVLOCK_SQL_XACT_LOCK || e->sql == ADVLOCK_SQL_XACT_LOCK_SHARED;
    const char *function = (unsigned)e->sql < ADVLOCK_SQL_COUNT ? functions[e->sql] : "?";
    snprintf(want, size, "%s for '%s' ", function, cl->step_.lock_name);
    if (e->error == ADVLOCK_ENULL) {
        append(want, size,
               is_void ? "returned null (expected void)." : "returned null (expected boolean).");
    } else {
        append(want, size, e->error == ADVLOCK_ECONNLOST ? "failed: connection lost" : "failed");
        if (cl->policy_sqlstate_[0] != '\0') {
            append(want, size, " with SQLSTATE ");
            append(want, size, cl->policy_sqlstate_);
        }
        const char *said = e->server_message != NULL ? e->server_message : "";
        if (trimmed(said) > 0) {
            char text[ADVLOCK_FAKE_TEXT_MAX + 4];
            snprintf(text, sizeof text, ": %.*s", (int)trimmed(said), said);
            append(want, size, text);
        }
    }
    if (e->undo_note >= 0)
        append(want, size, notes[e->undo_note]);
}

/* The sentence an outcome must carry, written from the header's contract. */
static int expected_message(const advlock_sim_client_ *cl, const expected *e,
                            const advlock_action *a, const char *server_message, char *want,
                            size_t size)
{
    enum message m = e->message;
    const char *name = cl->step_.lock_name;
    char secs[32];
    seconds(cl->step_.timeout_ms, secs, sizeof secs);
    want[0] = '\0';
    switch (m) {
    case M_TIMEOUT:
    case M_DIAGNOSED:
    case M_DIAGNOSIS_FAILED:
        snprintf(want, size, "Could not acquire migration lock for '%s' within %ss.", name, secs);
        if (m == M_DIAGNOSED)
            return diagnosis(cl, a, want, size);
        if (m == M_DIAGNOSIS_FAILED) {
            char said[ADVLOCK_FAKE_TEXT_MAX + 40];
            snprintf(said, sizeof said, " (holder diagnostics failed%s%.*s)",
                     trimmed(server_message) > 0 ? ": " : "", (int)trimmed(server_message),
                     server_message);
            append(want, size, said);
        }
        break;
    case M_CANCELLED: snprintf(want, size, "Acquire of lock '%s' was cancelled.", name); break;
    case M_TOO_LATE:
        snprintf(want, size,
                 "Cancel came too late for lock '%s': it was granted and is held until "
                 "the transaction ends.",
                 name);
        break;
    case M_ENDS_WITH_TRANSACTION:
        snprintf(want, size,
                 "Lock '%s' is transaction-scoped: it is released when the transaction "
                 "ends.",
                 name);
        break;
    case M_NOT_HELD:
        snprintf(want, size, "This session held no lock '%s' to release.", name);
        break;
    case M_FAILED: failed_message(cl, e, want, size); break;
    default: break; /* M_EMPTY */
    }
    return a->holder_pid == 0;
}

static int check_message(const advlock_sim_client_ *cl, const expected *e, const advlock_action *a,
                         const char *server_message, char *why, size_t size)
{
    if (e->message == M_ANY || strlen(cl->step_.lock_name) > ADVLOCK_KEY_ECHO_MAX / 2)
        return 0; /* long names are cut in messages; the core's own tests cover that */
    char want[ADVLOCK_MESSAGE_MAX];
    int holder_ok = expected_message(cl, e, a, server_message, want, sizeof want);
    if (strcmp(want, a->message) != 0) {
        snprintf(why, size, "message is \"%.200s\", expected \"%.200s\"", a->message, want);
        return -1;
    }
    if (!holder_ok) {
        snprintf(why, size,
                 "holder fields (pid %d, %lld s, '%.40s', '%.40s') disagree with the "
                 "message \"%.200s\"",
                 a->holder_pid, (long long)a->holder_seconds, a->holder_application,
                 a->holder_state, want);
        return -1;
    }
    return 0;
}

static int check_sleep(advlock_sim_client_ *cl, const expected *e, const advlock_action *a,
                       char *why, size_t size)
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

static int check_done(advlock_sim_client_ *cl, const expected *e, const advlock_action *a,
                      const char *message, char *why, size_t size)
{
    cl->policy_state_ = P_IDLE;
    if (a->outcome != e->outcome) {
        snprintf(why, size,
                 "outcome after %lld ms and %llu attempts of timeout %lld ms: "
                 "the %s says %s, the machine said %s",
                 (long long)(cl->policy_reading_ - cl->policy_start_),
                 (unsigned long long)cl->policy_attempts_, (long long)cl->step_.timeout_ms,
                 policy_name(cl), advlock_outcome_name(e->outcome),
                 advlock_outcome_name(a->outcome));
        return -1;
    }
    if (a->error != e->error)
        return mismatch(why, size, "error code", e->error, a->error);
    /* A failure carries the last error's SQLSTATE (after an unrequested
     * 57014, that 57014 even when the undo answered); nothing else any. */
    if (e->outcome == ADVLOCK_FAILED && strcmp(a->sqlstate, cl->policy_sqlstate_) != 0) {
        snprintf(why, size, "SQLSTATE of the failure is \"%.5s\", expected \"%.5s\"", a->sqlstate,
                 cl->policy_sqlstate_);
        return -1;
    }
    if (e->outcome != ADVLOCK_FAILED && a->sqlstate[0] != '\0') {
        snprintf(why, size, "%s carries SQLSTATE \"%.5s\": only a failure may",
                 advlock_outcome_name(a->outcome), a->sqlstate);
        return -1;
    }
    return check_message(cl, e, a, message, why, size);
}

int sim_policy_check(advlock_sim_client_ *cl, enum policy_input input, advlock_result result,
                     const char *sqlstate, const char *message, int64_t reading,
                     const advlock_action *a, uint64_t attempts, char *why, size_t size)
{
    expected e = advance(cl, input, result, sqlstate, message, reading);
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
        if (a->param != cl->key_)
            return mismatch(why, size, "query parameter (the lock key)", cl->key_, a->param);
        if (a->sql_text == NULL || strcmp(a->sql_text, advlock_sql_text(e.sql)) != 0)
            return mismatch(why, size, "SQL text differs from the statement table", 0, 1);
        if (e.kind == ADVLOCK_ACTION_QUERY && a->wake_at_ms != e.wake_at_ms)
            return mismatch(why, size, "the query's deadline (wake_at_ms)", e.wake_at_ms,
                            a->wake_at_ms);
    } else if (e.kind == ADVLOCK_ACTION_SLEEP) {
        if (check_sleep(cl, &e, a, why, size) != 0)
            return -1;
    } else if (check_done(cl, &e, a, message, why, size) != 0) {
        return -1;
    }
    if (attempts != cl->policy_attempts_)
        return mismatch(why, size, "lock attempts", (long long)cl->policy_attempts_,
                        (long long)attempts);
    return 0;
}
