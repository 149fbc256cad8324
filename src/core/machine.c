/*
 * The lock state machine: the reference's acquire loop and release, turned
 * inside out so that the caller performs every query, sleep and cancel.
 *
 * docs/design.md ("States") draws every transition; in outline:
 *
 *   IDLE --start--> QUERYING [session row], once per connection a driver
 *                     |  named (advlock_set_session) --row--> the first
 *                     |  statement below, or DONE (standby, claim refused)
 *                     v
 *                   QUERYING [try] --granted----------------------> DONE
 *                     ^   |--false, time left--> SLEEPING --timer--^ (query)
 *                     |   |--false at the timeout, NULL, error, lost--> DONE
 *                     |   |--false, server-side waiting--> QUERYING [wait]
 *                     |   |--the wait's 55P03/57014: unlock once, then DONE
 *                     |   |--the wait stuck past its grace, or the caller
 *                     |   |  cancels it--> CANCELLING --sent--> (waits on)
 *                     +-- a grant nobody wants any more: unlock, then DONE
 *   A release (QUERYING [unlock]) and a verify (QUERYING [held row]) are
 *   one query each; behind a proxy a guarded one that reached another
 *   server session goes to SLEEPING and is sent again, on the backoff
 *   schedule, within ADVLOCK_GUARD_RETRY_MS. After a timeout, diagnostics
 *   (if asked for) run one holders query first.
 */
#include "core.h"

#include <string.h>

/* The one check of the size the header states (8-byte pointers: exactly). */
_Static_assert(sizeof(advlock_machine) == ADVLOCK_MACHINE_SIZE
                   || (sizeof(void *) < 8 && sizeof(advlock_machine) < ADVLOCK_MACHINE_SIZE),
               "ADVLOCK_MACHINE_SIZE in include/advlock.h is the machine's size");

enum state { IDLE, QUERYING, SLEEPING, DONE, CANCELLING };
enum op { ACQUIRE = 1, RELEASE = 2, VERIFY = 3 };
/* What the outstanding query is for: a try-lock, or a server-side wait
 * (which starts only after a try in the same mode answered false). */
enum step {
    STEP_LOCK,
    STEP_RELEASE,
    STEP_UNDO,
    STEP_DIAGNOSE,
    STEP_WAIT,
    STEP_SESSION,
    STEP_VERIFY
};
enum cancel { CANCEL_NONE, CANCEL_PENDING };
enum option_flag {
    CLIP_TO_DEADLINE = 1,
    DIAGNOSE = 2,
    ALLOW_STANDBY = 4,
    FENCE = 8,
    LOCK_DELAY = 16
};

/* The reference's schedule: Task.Delay(delayMs), then
 * delayMs = Math.Min(delayMs * 2, 1000), starting from 100.
 * ADVLOCK_CANARY plants a wrong first delay so that tests can prove the
 * simulation and fuzzing gates notice a broken schedule; never ship it. */
#ifdef ADVLOCK_CANARY
enum { FIRST_DELAY_MS = 150, MAX_DELAY_MS = 1000 };
#else
enum { FIRST_DELAY_MS = 100, MAX_DELAY_MS = 1000 };
#endif

static const char query_canceled[] = "57014";
static const char lock_not_available[] = "55P03";

/* PostgreSQL ignores a cancel request that arrives before the backend has
 * read the statement (it drops cancels while idle), so until the statement
 * answers the request is repeated this often. A repeat can only meet the
 * same statement or an idle session: the driver sends nothing else meanwhile. */
enum { CANCEL_RESEND_MS = 250 };

/* now_ms_ never goes backwards, so the difference is never negative; it can
 * still exceed INT64_MAX when the caller's clock spans the whole range. */
static int64_t elapsed_ms(const advlock_machine *m)
{
    uint64_t d = (uint64_t)m->now_ms_ - (uint64_t)m->start_ms_;
    return d > INT64_MAX ? INT64_MAX : (int64_t)d;
}

static void observe_time(advlock_machine *m, int64_t now_ms)
{
    if (now_ms > m->now_ms_)
        m->now_ms_ = now_ms;
}

static void emit(const advlock_machine *m, advlock_event *e)
{
    if (m->on_event_ == NULL)
        return;
    e->now_ms = m->now_ms_;
    e->report = &m->report_;
    if (e->message == NULL)
        e->message = "";
    m->on_event_(m->event_user_, e);
}

static void emit_kind(const advlock_machine *m, advlock_event_kind kind)
{
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    emit(m, &e);
}

void advlock_notify(const advlock_machine *m, advlock_event_kind kind, const char *message,
                    int64_t now_ms)
{
    if (m == NULL || m->on_event_ == NULL)
        return;
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.now_ms = now_ms;
    e.report = &m->report_;
    e.message = message != NULL ? message : "";
    m->on_event_(m->event_user_, &e);
}

static int waits_on_server(const advlock_machine *m)
{
    return m->step_ == STEP_WAIT;
}

static int option(const advlock_machine *m, enum option_flag flag)
{
    return (m->option_flags_ & flag) != 0;
}

/* Behind a proxy every lock statement is a guarded one: a session-scoped
 * one runs only on the claimed server session, a transaction-scoped one
 * only where no other client's hold of the key is. */
static int guarded(const advlock_machine *m)
{
    return m->session_.proxied;
}

/* deadline: when to call on_timer if no answer has come (INT64_MAX: never). */
static void issue_query(advlock_machine *m, enum step step, advlock_sql sql, int64_t deadline)
{
    m->state_ = QUERYING;
    m->step_ = (uint8_t)step;
    m->report_.sql = sql;
    m->wake_at_ms_ = deadline;
    if (step == STEP_LOCK || step == STEP_WAIT) {
        m->report_.attempts++;
        emit_kind(m, ADVLOCK_EVENT_ATTEMPT);
    }
}

/* A zero timeout is one try, whatever the strategy. */
static int waits_for_grant(const advlock_machine *m)
{
    return m->wait_ == ADVLOCK_WAIT_SERVER && m->report_.timeout_ms > 0;
}

/* Every round begins with a try, server-side waiting too: it grants a lock
 * the session holds in this mode already, so a wait only ever starts for a
 * session that does not, and an unlock after the wait can only give back
 * the wait's own grant. */
static void issue_lock_query(advlock_machine *m)
{
    advlock_scope scope = (advlock_scope)m->scope_;
    issue_query(m, STEP_LOCK,
                option(m, FENCE)
                    ? advlock_sql_for_fenced(scope)
                    : advlock_sql_for_lock((advlock_mode)m->mode_, scope, 0, guarded(m)),
                INT64_MAX);
}

/* The statement the failure of a wait is reported on. */
static advlock_sql wait_statement(const advlock_machine *m)
{
    return advlock_sql_for_lock((advlock_mode)m->mode_, (advlock_scope)m->scope_, 1, guarded(m));
}

/* The statement whose error an undo precedes: a wait's, or a fenced try's
 * (a fenced acquire never waits on the server). */
static advlock_sql failed_statement(const advlock_machine *m)
{
    return option(m, FENCE) ? advlock_sql_for_fenced((advlock_scope)m->scope_) : wait_statement(m);
}

/* The server ends the wait at the deadline itself (lock_timeout, whose
 * range is 1..INT32_MAX ms; 0 would mean no bound). The machine's own
 * deadline, a grace later, is for a statement stuck before its wait began. */
static void issue_wait(advlock_machine *m)
{
    int64_t left = m->report_.timeout_ms - elapsed_ms(m); /* > 0: not timed out */
    issue_query(m, STEP_WAIT, wait_statement(m),
                advlock_add_saturating(advlock_add_saturating(m->start_ms_, m->report_.timeout_ms),
                                       ADVLOCK_WAIT_GRACE_MS));
    m->span_ms_ = left > INT32_MAX ? INT32_MAX : (int32_t)left;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* An acquire retries until its timeout; a release or verify that reached
 * the wrong server session until its own bound. */
static int64_t retry_bound_ms(const advlock_machine *m)
{
    return m->op_ == ACQUIRE ? m->report_.timeout_ms : ADVLOCK_GUARD_RETRY_MS;
}

static int32_t next_sleep(advlock_machine *m)
{
    int32_t ceiling = m->next_delay_ms_;
    int64_t sleep = ceiling; /* never above MAX_DELAY_MS */
    int jitter = m->backoff_ == ADVLOCK_BACKOFF_FULL_JITTER;
    if (jitter) {
        uint64_t r =
            m->random_ != NULL ? m->random_(m->random_user_) : splitmix64(&m->jitter_state_);
        sleep = (int64_t)(r % (uint64_t)(ceiling + 1)); /* bias below 1e-15 */
    }
    if (jitter || option(m, CLIP_TO_DEADLINE) || m->op_ != ACQUIRE) {
        int64_t remaining = retry_bound_ms(m) - elapsed_ms(m); /* > 0: not timed out yet */
        if (sleep > remaining)
            sleep = remaining;
    }
    m->next_delay_ms_ = ceiling * 2 < MAX_DELAY_MS ? ceiling * 2 : MAX_DELAY_MS;
    return (int32_t)sleep;
}

static void sleep_then_retry(advlock_machine *m)
{
    m->state_ = SLEEPING;
    m->span_ms_ = next_sleep(m);
    m->wake_at_ms_ = advlock_add_saturating(m->now_ms_, m->span_ms_);
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_SLEEP;
    e.sleep_ms = m->span_ms_;
    emit(m, &e);
}

static void finish(advlock_machine *m, advlock_outcome outcome, int failure, advlock_detail detail)
{
    advlock_report *r = &m->report_;
    if (outcome != ADVLOCK_FAILED)
        r->sqlstate[0] = '\0';
    m->state_ = DONE;
    r->outcome = outcome;
    r->failure = failure;
    r->detail = detail;
    r->elapsed_ms = elapsed_ms(m);
    if (outcome != ADVLOCK_ACQUIRED)
        r->fence = 0; /* a token whose grant was given back proves nothing */
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_DONE;
    emit(m, &e);
}

static void timed_out(advlock_machine *m)
{
    m->report_.sqlstate[0] = '\0';
    if (option(m, DIAGNOSE)) {
        issue_query(m, STEP_DIAGNOSE, ADVLOCK_SQL_HOLDERS, INT64_MAX);
        return;
    }
    finish(m, ADVLOCK_TIMED_OUT, 0, ADVLOCK_DETAIL_NONE);
}

int advlock_detail_in_doubt(advlock_detail detail)
{
    return detail == ADVLOCK_DETAIL_UNDO_CANCELLED || detail == ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE
           || detail == ADVLOCK_DETAIL_UNDO_AFTER_57014
           || detail == ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR;
}

/* The statement in flight failed. The server dropped the lock with a lost
 * session; any other failure of an undo leaves the grant in doubt. */
static void finish_failed(advlock_machine *m, int failure)
{
    int in_doubt = m->step_ == STEP_UNDO && failure != ADVLOCK_ECONNLOST;
    finish(m, ADVLOCK_FAILED, failure,
           in_doubt ? (advlock_detail)m->undo_reason_ : ADVLOCK_DETAIL_NONE);
}

static void keep_sqlstate(advlock_machine *m, const char *sqlstate)
{
    char *kept = m->report_.sqlstate;
    kept[0] = '\0';
    if (sqlstate == NULL)
        return;
    for (int i = 0; i < 5; i++) {
        char c = sqlstate[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')))
            return;
    }
    if (sqlstate[5] != '\0')
        return;
    memcpy(kept, sqlstate, 6);
}

void advlock_options_init(advlock_options *o)
{
    if (o != NULL)
        memset(o, 0, sizeof *o);
}

void advlock_machine_init(advlock_machine *m)
{
    if (m != NULL)
        memset(m, 0, sizeof *m);
}

static int busy(const advlock_machine *m)
{
    return m->state_ == QUERYING || m->state_ == SLEEPING || m->state_ == CANCELLING;
}

int advlock_set_options(advlock_machine *m, const advlock_options *o)
{
    if (m == NULL || o == NULL || (unsigned)o->mode > ADVLOCK_SHARED
        || (unsigned)o->scope > ADVLOCK_TRANSACTION || (unsigned)o->wait > ADVLOCK_WAIT_SERVER
        || (unsigned)o->backoff > ADVLOCK_BACKOFF_FULL_JITTER)
        return ADVLOCK_EINVAL;
    /* Only an exclusive hold excludes a newer holder, and a token is issued
     * in the try's statement, which a server-side wait is not. */
    if (o->fence && (o->mode != ADVLOCK_EXCLUSIVE || o->wait != ADVLOCK_WAIT_POLL))
        return ADVLOCK_EINVAL;
    /* A mark excludes like an exclusive hold, and must outlive the
     * caller's transaction. */
    if (o->lock_delay && (o->mode != ADVLOCK_EXCLUSIVE || o->scope != ADVLOCK_SESSION))
        return ADVLOCK_EINVAL;
    advlock_lease_plan plan;
    if (o->lease_ms != 0 && advlock_lease_plan_init(&plan, o->lease_ms, o->lease_stop_ms) != 0)
        return ADVLOCK_EINVAL;
    if (busy(m))
        return ADVLOCK_EMISUSE;
    m->jitter_state_ = o->jitter_seed;
    m->random_ = o->random;
    m->random_user_ = o->random_user;
    m->on_event_ = o->on_event;
    m->event_user_ = o->event_user;
    m->mode_ = (uint8_t)o->mode;
    m->scope_ = (uint8_t)o->scope;
    m->wait_ = (uint8_t)o->wait;
    m->backoff_ = (uint8_t)o->backoff;
    m->option_flags_ =
        (uint8_t)((o->clip_to_deadline ? CLIP_TO_DEADLINE : 0) | (o->diagnose ? DIAGNOSE : 0)
                  | (o->allow_standby ? ALLOW_STANDBY : 0) | (o->fence ? FENCE : 0)
                  | (o->lock_delay ? LOCK_DELAY : 0));
    return 0;
}

int advlock_session_init(advlock_session *s, int client_pid, uint64_t token)
{
    if (s == NULL || token == 0)
        return ADVLOCK_EINVAL;
    memset(s, 0, sizeof *s);
    s->token = token;
    s->client_pid = client_pid;
    return 0;
}

/* Each fact is a boolean byte: anything else is not a value the machine or
 * advlock_session_init() wrote. */
static int facts_valid(const advlock_session *s)
{
    return (s->checked | s->proxied | s->claimed | s->standby | s->claim_asked) <= 1;
}

int advlock_set_session(advlock_machine *m, const advlock_session *s)
{
    if (m == NULL || s == NULL || s->token == 0 || !facts_valid(s))
        return ADVLOCK_EINVAL;
    if (busy(m))
        return ADVLOCK_EMISUSE;
    m->session_ = *s;
    return 0;
}

int advlock_get_session(const advlock_machine *m, advlock_session *out)
{
    if (m == NULL || out == NULL)
        return ADVLOCK_EINVAL;
    *out = m->session_;
    return 0;
}

/* The one statement of a release or a verify. */
static advlock_sql single_statement(const advlock_machine *m)
{
    advlock_mode mode = (advlock_mode)m->mode_;
    return m->op_ == RELEASE ? advlock_sql_for_unlock(mode, guarded(m))
                             : advlock_sql_for_held(mode, (advlock_scope)m->scope_, guarded(m));
}

static void issue_single(advlock_machine *m)
{
    issue_query(m, m->op_ == RELEASE ? STEP_RELEASE : STEP_VERIFY, single_statement(m), INT64_MAX);
}

/* The operation's first lock statement, once the session is known. A
 * session lock needs the claimed server session behind a proxy; a refusal
 * sends nothing. A refused release or verify names the statement it did
 * not send: a release's message must say the lock may still be held, as a
 * guarded unlock's NULL does, and a verify's that it cannot tell. */
static void begin(advlock_machine *m)
{
    int session_scope = m->scope_ == ADVLOCK_SESSION;
    if (m->op_ == ACQUIRE && m->session_.standby && !option(m, ALLOW_STANDBY)) {
        m->report_.sql = ADVLOCK_SQL_SESSION;
        finish(m, ADVLOCK_FAILED, ADVLOCK_ESTANDBY, ADVLOCK_DETAIL_NONE);
    } else if (m->op_ == ACQUIRE && option(m, FENCE) && guarded(m)) {
        /* The fenced rows have no guarded form: fencing needs a direct
         * connection. */
        m->report_.sql = advlock_sql_for_fenced((advlock_scope)m->scope_);
        finish(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    } else if (session_scope && guarded(m) && !m->session_.claimed) {
        m->report_.sql = m->op_ == ACQUIRE ? ADVLOCK_SQL_SESSION : single_statement(m);
        finish(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    } else if (m->op_ == ACQUIRE) {
        issue_lock_query(m);
    } else {
        issue_single(m);
    }
}

/* A session-scoped operation claims the server session, a transaction-scoped
 * one does not: its transaction keeps one server session for itself, and a
 * claim left behind (committed with the transaction) would refuse every
 * later session-scoped client there. */
static int claims(const advlock_machine *m)
{
    return m->scope_ == ADVLOCK_SESSION;
}

/* Nothing known of the session yet, or a session-scoped operation behind a
 * proxy where no claim was asked for (only transaction-scoped ones ran). */
static int needs_session_query(const advlock_machine *m)
{
    const advlock_session *s = &m->session_;
    if (s->token == 0)
        return 0;
    return !s->checked || (claims(m) && guarded(m) && !s->claim_asked);
}

static int start(advlock_machine *m, enum op op, int64_t key, int64_t timeout_ms, int64_t now_ms)
{
    if (m == NULL || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (busy(m))
        return ADVLOCK_EMISUSE;
    m->op_ = (uint8_t)op;
    m->start_ms_ = now_ms;
    m->now_ms_ = now_ms;
    m->next_delay_ms_ = FIRST_DELAY_MS;
    m->cancel_ = CANCEL_NONE;
    m->deadline_passed_ = 0;
    m->fail_after_undo_ = 0;
    m->undo_reason_ = ADVLOCK_DETAIL_UNDO_CANCELLED;
    advlock_report *r = &m->report_;
    /* Field by field: the holder's name is cleared by its first byte. */
    r->failure = 0;
    r->detail = ADVLOCK_DETAIL_NONE;
    r->sqlstate[0] = '\0';
    r->key = key;
    r->timeout_ms = timeout_ms;
    r->elapsed_ms = 0;
    r->attempts = 0;
    r->holder_pid = 0;
    r->other_holders = 0;
    r->holder_seconds = 0;
    r->holder_state = ADVLOCK_BACKEND_UNKNOWN;
    r->holder_application[0] = '\0';
    r->fence = 0;
    if (op == RELEASE && m->scope_ == ADVLOCK_TRANSACTION)
        finish(m, ADVLOCK_ENDS_WITH_TRANSACTION, 0, ADVLOCK_DETAIL_NONE);
    else if (needs_session_query(m))
        issue_query(m, STEP_SESSION, ADVLOCK_SQL_SESSION, INT64_MAX);
    else
        begin(m);
    return 0;
}

/* Checks the arguments a start refuses before hashing anything. */
static int start_named(advlock_machine *m, enum op op, const char *lock_key, size_t len,
                       int64_t timeout_ms, int64_t now_ms)
{
    if (m == NULL || (lock_key == NULL && len > 0) || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (busy(m))
        return ADVLOCK_EMISUSE;
    int64_t key;
    int rc = advlock_derive_key(lock_key, len, &key);
    return rc != 0 ? rc : start(m, op, key, timeout_ms, now_ms);
}

int advlock_start_acquire(advlock_machine *m, const char *lock_key, size_t len, int64_t timeout_ms,
                          int64_t now_ms)
{
    return start_named(m, ACQUIRE, lock_key, len, timeout_ms, now_ms);
}

int advlock_start_release(advlock_machine *m, const char *lock_key, size_t len, int64_t now_ms)
{
    return start_named(m, RELEASE, lock_key, len, 0, now_ms);
}

int advlock_start_acquire_key(advlock_machine *m, int64_t key, int64_t timeout_ms, int64_t now_ms)
{
    return start(m, ACQUIRE, key, timeout_ms, now_ms);
}

int advlock_start_release_key(advlock_machine *m, int64_t key, int64_t now_ms)
{
    return start(m, RELEASE, key, 0, now_ms);
}

int advlock_start_verify_key(advlock_machine *m, int64_t key, int64_t now_ms)
{
    return start(m, VERIFY, key, 0, now_ms);
}

/* The acquire is over without the lock (a grant given back, or none): why,
 * the caller or the clock? A wait the server ended before the deadline
 * (lock_timeout tops out at INT32_MAX ms) goes on with the next round. */
static void end_unwanted(advlock_machine *m)
{
    if (m->cancel_ == CANCEL_PENDING)
        finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
    else if (m->deadline_passed_ || elapsed_ms(m) >= m->report_.timeout_ms)
        timed_out(m);
    else
        sleep_then_retry(m);
}

/* A grant arrived after the caller cancelled or the deadline passed. */
static void undo(advlock_machine *m, advlock_detail reason)
{
    m->undo_reason_ = (uint8_t)reason;
    issue_query(m, STEP_UNDO, advlock_sql_for_unlock((advlock_mode)m->mode_, guarded(m)),
                INT64_MAX);
}

static void on_unwanted_grant(advlock_machine *m)
{
    if (m->scope_ == ADVLOCK_TRANSACTION) {
        /* Transaction locks cannot be unlocked: say so rather than pretend. */
        finish(m, ADVLOCK_ACQUIRED, 0,
               m->cancel_ == CANCEL_PENDING ? ADVLOCK_DETAIL_CANCEL_TOO_LATE : ADVLOCK_DETAIL_NONE);
        return;
    }
    undo(m, m->cancel_ == CANCEL_PENDING ? ADVLOCK_DETAIL_UNDO_CANCELLED
                                         : ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE);
}

/* The server ended a wait with an error. A cancel (57014) or the wait's own
 * lock_timeout (55P03) can land in the instant the lock is granted, and
 * PostgreSQL then reports the error with the lock held (its lock-wait
 * cleanup keeps a grant it finds), so a session lock is unlocked once
 * (answering false, with a harmless WARNING, when there was no grant). That
 * unlock can only give back this wait's grant: the wait began after a try
 * in the same mode answered false, which it never does for a session that
 * holds the lock in that mode. A 57014 nobody asked for (statement_timeout,
 * a stray cancel) is reported as a failure, once the undo has answered. A
 * transaction lock went with the transaction the error aborted, which no
 * further wait can use. */
static void on_wait_error(advlock_machine *m)
{
    int cancelled = strcmp(m->report_.sqlstate, query_canceled) == 0;
    int unwanted = m->cancel_ == CANCEL_PENDING || m->deadline_passed_;
    if (!cancelled && strcmp(m->report_.sqlstate, lock_not_available) != 0) {
        finish_failed(m, ADVLOCK_ESERVER);
        return;
    }
    int failure = cancelled && !unwanted;
    if (m->scope_ == ADVLOCK_TRANSACTION) {
        if (failure || (!unwanted && elapsed_ms(m) < m->report_.timeout_ms))
            finish_failed(m, ADVLOCK_ESERVER);
        else
            end_unwanted(m);
        return;
    }
    m->fail_after_undo_ = (uint8_t)failure;
    undo(m, ADVLOCK_DETAIL_UNDO_AFTER_57014);
}

int advlock_machine_lock_delay(const advlock_machine *m)
{
    return option(m, LOCK_DELAY);
}

int advlock_fenced_fails_before_locking(const char *sqlstate)
{
    if (sqlstate == NULL)
        return 0;
    return strncmp(sqlstate, "42", 2) == 0 || strcmp(sqlstate, "3F000") == 0
           || strcmp(sqlstate, "25006") == 0;
}

/* A fenced try failed on the server. Its session lock outlives the
 * statement's rolled-back transaction, so one that may have been taken
 * (the upsert failed after the grant: a statement_timeout while a
 * fence_ok caller holds the row, a full disk) is given back before the
 * failure is reported. Unlike a wait's, this try may have failed before
 * its grant on a session that already held the lock (re-entrant), whose
 * older hold the unlock then gives back: the outcome says the session's
 * holds are in doubt. A transaction lock goes with the caller's aborted
 * transaction. */
static void on_fenced_error(advlock_machine *m)
{
    if (m->scope_ == ADVLOCK_TRANSACTION
        || advlock_fenced_fails_before_locking(m->report_.sqlstate)) {
        finish_failed(m, ADVLOCK_ESERVER);
        return;
    }
    m->fail_after_undo_ = 1;
    undo(m, ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR);
}

/* A guarded statement answers NULL when it reached a server session this
 * connection did not claim, and ran nothing there. */
static int null_failure(const advlock_machine *m)
{
    return advlock_sql_guarded(m->report_.sql) ? ADVLOCK_ESESSION : ADVLOCK_ENULL;
}

/* Only a boolean proves the undoing unlock ran; NULL (which PostgreSQL never
 * sends here, but a proxy or driver might) leaves the grant in doubt. After
 * a 57014 nobody asked for, the failure composed then is the outcome. */
static void on_undo_result(advlock_machine *m, advlock_result result)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
    case ADVLOCK_RESULT_FALSE:
        if (m->fail_after_undo_) {
            /* The failure to report is the wait's 57014, or the fenced try's
             * (whose unlock may have given back an older hold instead). */
            m->report_.sql = failed_statement(m);
            finish(m, ADVLOCK_FAILED, ADVLOCK_ESERVER,
                   option(m, FENCE) ? ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR : ADVLOCK_DETAIL_NONE);
        } else {
            end_unwanted(m);
        }
        break;
    case ADVLOCK_RESULT_NULL: finish_failed(m, null_failure(m)); break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST); break;
    }
}

/* A guarded transaction-scoped statement found another client's hold of
 * the key on its server session and ran nothing: busy, as a try's false,
 * except that no server-side wait follows (it would land on that same
 * session, pinned by the caller's transaction); the next round polls. */
static void on_busy_here(advlock_machine *m)
{
    if (m->cancel_ == CANCEL_PENDING)
        finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
    else if (elapsed_ms(m) >= m->report_.timeout_ms)
        timed_out(m);
    else
        sleep_then_retry(m);
}

/* The answer of a try, or of a wait (which only a broken driver could
 * answer false or NULL: they count as a try's). */
static void on_lock_result(advlock_machine *m, advlock_result result)
{
    int unwanted = m->cancel_ == CANCEL_PENDING || m->deadline_passed_;
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
        if (unwanted)
            on_unwanted_grant(m);
        else
            finish(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
        break;
    case ADVLOCK_RESULT_FALSE:
        if (m->cancel_ == CANCEL_PENDING)
            finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
        else if (elapsed_ms(m) >= m->report_.timeout_ms)
            timed_out(m);
        else if (waits_for_grant(m) && m->step_ == STEP_LOCK)
            issue_wait(m);
        else
            sleep_then_retry(m);
        break;
    case ADVLOCK_RESULT_NULL:
        if (advlock_sql_null_is_busy(m->report_.sql))
            on_busy_here(m);
        else if (m->cancel_ == CANCEL_PENDING && !advlock_sql_guarded(m->report_.sql))
            finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
        else
            finish_failed(m, null_failure(m));
        break;
    case ADVLOCK_RESULT_SERVER_ERROR:
        if (waits_on_server(m))
            on_wait_error(m);
        else if (advlock_sql_fenced(m->report_.sql))
            on_fenced_error(m);
        else
            finish_failed(m, ADVLOCK_ESERVER);
        break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST); break;
    }
}

/* A guarded release or verify reached a server session other than the
 * claimed one, which may be busy with another client's transaction: try
 * again on the backoff schedule, within the bound. */
static void retry_guarded(advlock_machine *m)
{
    if (elapsed_ms(m) < ADVLOCK_GUARD_RETRY_MS)
        sleep_then_retry(m);
    else
        finish_failed(m, ADVLOCK_ESESSION);
}

static void on_unlock_result(advlock_machine *m, advlock_result result)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE: finish(m, ADVLOCK_RELEASED, 0, ADVLOCK_DETAIL_NONE); break;
    case ADVLOCK_RESULT_FALSE: finish(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE); break;
    case ADVLOCK_RESULT_NULL:
        /* PostgreSQL's unlock never answers NULL; a guarded one off its
         * session does, and the claimed session, busy with another client's
         * transaction now, may be free at the next try: giving up at once
         * would leave the lock there until the proxy closes the session. */
        if (!advlock_sql_guarded(m->report_.sql))
            finish(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE);
        else
            retry_guarded(m);
        break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST); break;
    }
}

/* A verify's NULL is the guard's: the plain row's EXISTS is never NULL. */
static void on_verify_result(advlock_machine *m, advlock_result result)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE: finish(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE); break;
    case ADVLOCK_RESULT_FALSE: finish(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE); break;
    case ADVLOCK_RESULT_NULL:
        if (advlock_sql_guarded(m->report_.sql))
            retry_guarded(m);
        else
            finish_failed(m, ADVLOCK_ENULL);
        break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST); break;
    }
}

/* Diagnostics are a courtesy: their failure never hides the timeout. */
static void on_diagnose_failed(advlock_machine *m)
{
    m->report_.sqlstate[0] = '\0';
    finish(m, ADVLOCK_TIMED_OUT, 0, ADVLOCK_DETAIL_DIAGNOSIS_FAILED);
}

/* The try in flight is a fenced row, whose answer is (granted, token). */
static int fenced_outstanding(const advlock_machine *m)
{
    return m->step_ == STEP_LOCK && advlock_sql_fenced(m->report_.sql);
}

int advlock_on_result(advlock_machine *m, advlock_result result, const char *sqlstate,
                      const char *message, int64_t now_ms)
{
    if (m == NULL || (int)result < ADVLOCK_RESULT_TRUE
        || (int)result > ADVLOCK_RESULT_CONNECTION_LOST)
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING && m->state_ != CANCELLING)
        return ADVLOCK_EMISUSE;
    /* The holders and session queries answer with rows, or fail. */
    if ((m->step_ == STEP_DIAGNOSE || m->step_ == STEP_SESSION)
        && result < ADVLOCK_RESULT_SERVER_ERROR)
        return ADVLOCK_EMISUSE;
    if (fenced_outstanding(m) && result < ADVLOCK_RESULT_NULL)
        return ADVLOCK_EMISUSE; /* its answer is a row: advlock_on_fenced() */
    observe_time(m, now_ms);
    /* Only errors carry a SQLSTATE; a boolean answer to the unlock after a
     * 57014 keeps that 57014 for the failure it will report. */
    if (result >= ADVLOCK_RESULT_SERVER_ERROR)
        keep_sqlstate(m, sqlstate);
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_RESULT;
    e.result = result;
    e.message = message;
    emit(m, &e);
    switch (m->step_) {
    case STEP_LOCK:
    case STEP_WAIT: on_lock_result(m, result); break;
    case STEP_UNDO: on_undo_result(m, result); break;
    case STEP_RELEASE: on_unlock_result(m, result); break;
    case STEP_VERIFY: on_verify_result(m, result); break;
    case STEP_SESSION:
        finish_failed(m,
                      result == ADVLOCK_RESULT_SERVER_ERROR ? ADVLOCK_ESERVER : ADVLOCK_ECONNLOST);
        break;
    default: on_diagnose_failed(m); break;
    }
    return 0;
}

int advlock_on_session(advlock_machine *m, int server_pid, int in_recovery, int ours,
                       int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING || m->step_ != STEP_SESSION)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    /* A proxy shows the client a pid of its own; 0 (unknown) counts as one. */
    advlock_session *s = &m->session_;
    s->checked = 1;
    s->proxied = server_pid != s->client_pid || server_pid == 0;
    s->claim_asked = (uint8_t)claims(m);
    s->claimed = s->claim_asked && ours != 0;
    s->standby = in_recovery != 0;
    if (m->cancel_ == CANCEL_PENDING)
        finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
    else
        begin(m);
    return 0;
}

int advlock_on_fenced(advlock_machine *m, int granted, int64_t token, int64_t now_ms)
{
    if (m == NULL || (granted != 0 && granted != 1) || (granted && token < 1))
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING || !fenced_outstanding(m))
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    advlock_result result = granted ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_RESULT;
    e.result = result;
    emit(m, &e);
    m->report_.fence = granted ? token : 0;
    on_lock_result(m, result);
    return 0;
}

int advlock_on_holders(advlock_machine *m, const advlock_holder *rows, size_t n, int64_t now_ms)
{
    if (m == NULL || (rows == NULL && n > 0))
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING || m->step_ != STEP_DIAGNOSE)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    advlock_report *r = &m->report_;
    const advlock_holder *first = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].granted)
            continue;
        if (first == NULL)
            first = &rows[i];
        else if (r->other_holders < INT32_MAX)
            r->other_holders++;
    }
    if (first != NULL) {
        r->holder_pid = first->pid;
        r->holder_seconds = first->seconds < 0 ? 0 : first->seconds;
        r->holder_state = advlock_backend_state_parse(first->state);
        advlock_text t;
        advlock_text_init(&t, r->holder_application, sizeof r->holder_application);
        if (first->application_name != NULL)
            advlock_text_put(&t, first->application_name);
    }
    finish(m, ADVLOCK_TIMED_OUT, 0, ADVLOCK_DETAIL_DIAGNOSED);
    return 0;
}

static void request_cancel(advlock_machine *m)
{
    m->state_ = CANCELLING;
    emit_kind(m, ADVLOCK_EVENT_CANCEL_QUERY);
}

int advlock_on_timer(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (!busy(m))
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    /* Early; or a query with no deadline at all (a sleep's INT64_MAX is a
     * deadline that saturated, and does come). */
    if (m->now_ms_ < m->wake_at_ms_ || (m->state_ != SLEEPING && m->wake_at_ms_ == INT64_MAX))
        return 0;
    if (m->state_ == SLEEPING && m->op_ != ACQUIRE) {
        issue_single(m);
    } else if (m->state_ == SLEEPING) {
        issue_lock_query(m);
    } else if (m->state_ == QUERYING && waits_on_server(m)) {
        m->deadline_passed_ = 1; /* the deadline, or a cancel to repeat */
        request_cancel(m);
    }
    return 0;
}

int advlock_on_cancel_sent(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (m->state_ != CANCELLING)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    m->state_ = QUERYING;
    m->wake_at_ms_ = advlock_add_saturating(m->now_ms_, CANCEL_RESEND_MS);
    return 0;
}

int advlock_cancel(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (!busy(m) || (m->op_ != ACQUIRE && m->state_ != SLEEPING))
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    if (m->state_ == SLEEPING && m->op_ != ACQUIRE) {
        finish_failed(m, ADVLOCK_ESESSION);
        return 0;
    }
    if (m->state_ == SLEEPING) {
        finish(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
        return 0;
    }
    if ((m->step_ != STEP_LOCK && m->step_ != STEP_WAIT && m->step_ != STEP_SESSION)
        || m->cancel_ == CANCEL_PENDING)
        return 0; /* already on its way out */
    m->cancel_ = CANCEL_PENDING;
    /* A server-side wait could last forever: ask for it to stop, once. */
    if (m->state_ == QUERYING && waits_on_server(m) && !m->deadline_passed_) {
        m->deadline_passed_ = 1;
        request_cancel(m);
    }
    return 0;
}

/* $1 the key (the session query's: the token, then the pid the client was
 * told), then a wait's bound, then a guarded statement's token. */
static void set_params(const advlock_machine *m, advlock_action *a)
{
    int64_t token = (int64_t)m->session_.token;
    if (a->sql == ADVLOCK_SQL_SESSION) {
        a->param = claims(m) ? token : 0;
        a->param2 = m->session_.client_pid;
        return;
    }
    a->param = m->report_.key;
    int64_t guard = advlock_sql_guarded(a->sql) ? token : 0;
    if (waits_on_server(m)) {
        a->param2 = m->span_ms_;
        a->param3 = guard;
    } else {
        a->param2 = guard;
    }
}

advlock_action advlock_next_action(const advlock_machine *m)
{
    advlock_action a;
    memset(&a, 0, sizeof a);
    if (m == NULL || m->state_ == IDLE)
        return a;
    a.report = &m->report_;
    switch (m->state_) {
    case QUERYING:
    case CANCELLING:
        a.kind = m->state_ == QUERYING ? ADVLOCK_ACTION_QUERY : ADVLOCK_ACTION_CANCEL_QUERY;
        a.sql = m->report_.sql;
        a.sql_text = advlock_sql_text(a.sql);
        set_params(m, &a);
        a.wake_at_ms = m->wake_at_ms_;
        break;
    case SLEEPING:
        a.kind = ADVLOCK_ACTION_SLEEP;
        a.wake_at_ms = m->wake_at_ms_;
        a.sleep_ms = m->span_ms_;
        break;
    default: a.kind = ADVLOCK_ACTION_DONE; break;
    }
    return a;
}
