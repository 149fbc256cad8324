/*
 * The lock state machine: the reference's acquire loop and release, turned
 * inside out so that the caller performs every query, sleep and cancel.
 *
 *   IDLE --start--> QUERYING --granted-----------------------------> DONE
 *                     ^   |--false, time left--> SLEEPING --timer--^ (query)
 *                     |   |--false at the timeout, NULL, error, lost--> DONE
 *                     |   |--server-side wait reaches its deadline, or the
 *                     |   |  caller cancels it--> CANCELLING --sent--> (waits on)
 *                     +-- a grant nobody wants any more: unlock, then DONE
 *   After a timeout, diagnostics (if asked for) run one holders query first.
 */
#include "core.h"

#include <string.h>

enum state { IDLE, QUERYING, SLEEPING, DONE, CANCELLING };
enum op { ACQUIRE = 1, RELEASE = 2 };
/* What the outstanding query is for. */
enum step { STEP_LOCK, STEP_RELEASE, STEP_UNDO, STEP_DIAGNOSE };
enum cancel { CANCEL_NONE, CANCEL_PENDING };

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

/* PostgreSQL ignores a cancel request that arrives before the backend has
 * read the statement (it drops cancels while idle), so until the statement
 * answers the request is repeated this often. A repeat can only meet the
 * same statement or an idle session: the driver sends nothing else meanwhile. */
enum { CANCEL_RESEND_MS = 250 };

/* Why an unlock follows a lock query, for the message if it fails. */
enum undo_reason { UNDO_CANCELLED, UNDO_AFTER_DEADLINE, UNDO_AFTER_57014 };

static int64_t add_saturating(int64_t a, int64_t b)
{
    return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

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
    if (m->options_.on_event == NULL)
        return;
    e->now_ms = m->now_ms_;
    e->key = m->key_;
    e->attempt = m->attempts_;
    if (e->message == NULL)
        e->message = "";
    m->options_.on_event(m->options_.event_user, e);
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
    if (m == NULL || m->options_.on_event == NULL)
        return;
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.now_ms = now_ms;
    e.key = m->key_;
    e.attempt = m->attempts_;
    e.message = message != NULL ? message : "";
    m->options_.on_event(m->options_.event_user, &e);
}

static int waits_on_server(const advlock_machine *m)
{
    return advlock_sql_answer((advlock_sql)m->sql_) == ADVLOCK_ANSWER_VOID;
}

/* deadline: when to call on_timer if no answer has come (INT64_MAX: never). */
static void issue_query(advlock_machine *m, enum step step, advlock_sql sql, int64_t deadline)
{
    m->state_ = QUERYING;
    m->step_ = step;
    m->sql_ = sql;
    m->wake_at_ms_ = deadline;
    if (step == STEP_LOCK) {
        m->attempts_++;
        emit_kind(m, ADVLOCK_EVENT_ATTEMPT);
    }
}

static void issue_lock_query(advlock_machine *m)
{
    /* A zero timeout is one try, whatever the strategy. */
    int wait = m->options_.wait == ADVLOCK_WAIT_SERVER && m->timeout_ms_ > 0;
    issue_query(m, STEP_LOCK, advlock_sql_for_lock(m->options_.mode, m->options_.scope, wait),
                wait ? add_saturating(m->start_ms_, m->timeout_ms_) : INT64_MAX);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int64_t next_sleep(advlock_machine *m)
{
    int64_t ceiling = m->next_delay_ms_;
    int64_t sleep = ceiling;
    int jitter = m->options_.backoff == ADVLOCK_BACKOFF_FULL_JITTER;
    if (jitter) {
        uint64_t r = m->options_.random != NULL ? m->options_.random(m->options_.random_user)
                                                : splitmix64(&m->jitter_state_);
        sleep = (int64_t)(r % (uint64_t)(ceiling + 1)); /* bias below 1e-15 */
    }
    if (jitter || m->options_.clip_to_deadline) {
        int64_t remaining = m->timeout_ms_ - elapsed_ms(m); /* > 0: not timed out yet */
        if (sleep > remaining)
            sleep = remaining;
    }
    m->next_delay_ms_ = ceiling * 2 < MAX_DELAY_MS ? ceiling * 2 : MAX_DELAY_MS;
    return sleep;
}

static void sleep_then_retry(advlock_machine *m)
{
    m->state_ = SLEEPING;
    m->sleep_ms_ = next_sleep(m);
    m->wake_at_ms_ = add_saturating(m->now_ms_, m->sleep_ms_);
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_SLEEP;
    e.sleep_ms = m->sleep_ms_;
    emit(m, &e);
}

static void finish(advlock_machine *m, advlock_outcome outcome, int error)
{
    if (outcome != ADVLOCK_FAILED)
        m->sqlstate_[0] = '\0';
    m->state_ = DONE;
    m->outcome_ = outcome;
    m->error_ = error;
    advlock_event e;
    memset(&e, 0, sizeof e);
    e.kind = ADVLOCK_EVENT_DONE;
    e.outcome = outcome;
    e.message = m->message_;
    emit(m, &e);
}

/* Starts a message with "<prefix>'<key>'". */
static void begin_message(advlock_machine *m, advlock_text *t, const char *prefix)
{
    advlock_text_init(t, m->message_, sizeof m->message_);
    advlock_text_put(t, prefix);
    advlock_text_put(t, "'");
    advlock_text_put(t, m->key_echo_);
    advlock_text_put(t, "'");
}

static void finish_with(advlock_machine *m, advlock_outcome outcome, const char *prefix,
                        const char *suffix)
{
    advlock_text t;
    begin_message(m, &t, prefix);
    advlock_text_put(&t, suffix);
    finish(m, outcome, 0);
}

static void finish_cancelled(advlock_machine *m)
{
    finish_with(m, ADVLOCK_CANCELLED, "Acquire of lock ", " was cancelled.");
}

static void timeout_message(advlock_machine *m, advlock_text *t)
{
    begin_message(m, t, "Could not acquire migration lock for ");
    advlock_text_put(t, " within ");
    advlock_text_put_seconds(t, m->timeout_ms_);
    advlock_text_put(t, "s.");
}

static void timed_out(advlock_machine *m)
{
    m->sqlstate_[0] = '\0';
    if (m->options_.diagnose) {
        issue_query(m, STEP_DIAGNOSE, ADVLOCK_SQL_HOLDERS, INT64_MAX);
        return;
    }
    advlock_text t;
    timeout_message(m, &t);
    finish(m, ADVLOCK_TIMED_OUT, 0);
}

static size_t trimmed_length(const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    return n;
}

/* ": <message>" when there is one. */
static void put_server_message(advlock_text *t, const char *message)
{
    if (message != NULL && trimmed_length(message) > 0) {
        advlock_text_put(t, ": ");
        advlock_text_putn(t, message, trimmed_length(message));
    }
}

/* "<function> for '<key>' <what went wrong>", for every FAILED outcome. */
static void compose_failure(advlock_machine *m, int error, const char *server_message)
{
    advlock_text t;
    advlock_text_init(&t, m->message_, sizeof m->message_);
    advlock_text_put(&t, advlock_sql_function((advlock_sql)m->sql_));
    advlock_text_put(&t, " for '");
    advlock_text_put(&t, m->key_echo_);
    advlock_text_put(&t, "' ");
    if (error == ADVLOCK_ENULL) {
        advlock_text_put(&t, advlock_sql_answer((advlock_sql)m->sql_) == ADVLOCK_ANSWER_VOID
                                 ? "returned null (expected void)."
                                 : "returned null (expected boolean).");
    } else {
        advlock_text_put(&t, error == ADVLOCK_ECONNLOST ? "failed: connection lost" : "failed");
        if (m->sqlstate_[0] != '\0') {
            advlock_text_put(&t, " with SQLSTATE ");
            advlock_text_put(&t, m->sqlstate_);
        }
        put_server_message(&t, server_message);
    }
    /* The server dropped the lock with a lost session; any other failure of
     * the undo leaves the grant in doubt. */
    if (m->step_ == STEP_UNDO && error != ADVLOCK_ECONNLOST) {
        static const char *const why[] = {
            [UNDO_CANCELLED] = " (undoing a cancelled acquire: the lock may still be held)",
            [UNDO_AFTER_DEADLINE] = " (giving back a grant that came after the deadline: the "
                                    "lock may still be held)",
            [UNDO_AFTER_57014] = " (giving back a grant the cancelled statement may have made: "
                                 "the lock may still be held)",
        };
        advlock_text_put(&t, why[m->undo_reason_]);
    }
}

static void finish_failed(advlock_machine *m, int error, const char *server_message)
{
    compose_failure(m, error, server_message);
    finish(m, ADVLOCK_FAILED, error);
}

static void keep_sqlstate(advlock_machine *m, const char *sqlstate)
{
    m->sqlstate_[0] = '\0';
    if (sqlstate == NULL)
        return;
    for (int i = 0; i < 5; i++) {
        char c = sqlstate[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')))
            return;
    }
    if (sqlstate[5] != '\0')
        return;
    memcpy(m->sqlstate_, sqlstate, 6);
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
    if (busy(m))
        return ADVLOCK_EMISUSE;
    m->options_ = *o;
    m->jitter_state_ = o->jitter_seed;
    return 0;
}

static int start(advlock_machine *m, enum op op, const char *lock_key, size_t len,
                 int64_t timeout_ms, int64_t now_ms)
{
    if (m == NULL || (lock_key == NULL && len > 0) || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (busy(m))
        return ADVLOCK_EMISUSE;
    int64_t key;
    int rc = advlock_derive_key(lock_key, len, &key);
    if (rc != 0)
        return rc;

    m->op_ = op;
    m->key_ = key;
    m->timeout_ms_ = timeout_ms;
    m->start_ms_ = now_ms;
    m->now_ms_ = now_ms;
    m->next_delay_ms_ = FIRST_DELAY_MS;
    m->attempts_ = 0;
    m->cancel_ = CANCEL_NONE;
    m->deadline_passed_ = 0;
    m->fail_after_undo_ = 0;
    m->undo_reason_ = UNDO_CANCELLED;
    m->error_ = 0;
    m->sqlstate_[0] = '\0';
    m->message_[0] = '\0';
    m->holder_pid_ = 0;
    m->holder_seconds_ = 0;
    m->holder_application_[0] = '\0';
    m->holder_state_[0] = '\0';
    advlock_text echo;
    advlock_text_init(&echo, m->key_echo_, sizeof m->key_echo_);
    advlock_text_put_key(&echo, lock_key, len);
    if (op == ACQUIRE)
        issue_lock_query(m);
    else if (m->options_.scope == ADVLOCK_TRANSACTION)
        finish_with(m, ADVLOCK_ENDS_WITH_TRANSACTION, "Lock ",
                    " is transaction-scoped: it is released when the transaction ends.");
    else
        issue_query(m, STEP_RELEASE, advlock_sql_for_unlock(m->options_.mode), INT64_MAX);
    return 0;
}

int advlock_start_acquire(advlock_machine *m, const char *lock_key, size_t len, int64_t timeout_ms,
                          int64_t now_ms)
{
    return start(m, ACQUIRE, lock_key, len, timeout_ms, now_ms);
}

int advlock_start_release(advlock_machine *m, const char *lock_key, size_t len, int64_t now_ms)
{
    return start(m, RELEASE, lock_key, len, 0, now_ms);
}

/* The acquire is over without the lock: why, the caller or the clock? */
static void end_unwanted(advlock_machine *m)
{
    if (m->cancel_ == CANCEL_PENDING)
        finish_cancelled(m);
    else
        timed_out(m);
}

/* A grant arrived after the caller cancelled or the deadline passed. */
static void undo(advlock_machine *m, enum undo_reason reason)
{
    m->undo_reason_ = reason;
    issue_query(m, STEP_UNDO, advlock_sql_for_unlock(m->options_.mode), INT64_MAX);
}

static void on_unwanted_grant(advlock_machine *m)
{
    if (m->options_.scope == ADVLOCK_TRANSACTION) {
        /* Transaction locks cannot be unlocked: say so rather than pretend. */
        if (m->cancel_ == CANCEL_PENDING)
            finish_with(m, ADVLOCK_ACQUIRED, "Cancel came too late for lock ",
                        ": it was granted and is held until the transaction ends.");
        else
            finish(m, ADVLOCK_ACQUIRED, 0);
        return;
    }
    undo(m, m->cancel_ == CANCEL_PENDING ? UNDO_CANCELLED : UNDO_AFTER_DEADLINE);
}

/* The cancel we asked for ended the wait. PostgreSQL can grant the lock
 * while the cancelled statement is still unwinding and then report 57014
 * all the same, leaving the session holding it; a session lock is therefore
 * unlocked once more (answering false, with a harmless WARNING, when the
 * grant did not happen). Such a hold can only come from this statement: a
 * session that already held the lock would have been granted at once. A
 * transaction lock ends with the transaction the cancel has aborted. */
static void on_cancelled_wait(advlock_machine *m)
{
    if (m->options_.scope == ADVLOCK_TRANSACTION)
        end_unwanted(m);
    else
        undo(m, UNDO_AFTER_57014);
}

/* A 57014 nobody asked for (statement_timeout, a stray cancel) can hide a
 * grant just as a requested one can: the failure is reported, but only after
 * the grant, if any, is given back. The message is composed now, while the
 * server's words are at hand. */
static void on_unrequested_57014(advlock_machine *m, const char *message)
{
    if (m->options_.scope == ADVLOCK_TRANSACTION) {
        /* The error aborted the transaction, and the lock with it. */
        finish_failed(m, ADVLOCK_ESERVER, message);
        return;
    }
    compose_failure(m, ADVLOCK_ESERVER, message);
    m->fail_after_undo_ = 1;
    undo(m, UNDO_AFTER_57014);
}

/* Only a boolean proves the undoing unlock ran; NULL (which PostgreSQL never
 * sends here, but a proxy or driver might) leaves the grant in doubt. After
 * a 57014 nobody asked for, the failure composed then is the outcome. */
static void on_undo_result(advlock_machine *m, advlock_result result, const char *message)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
    case ADVLOCK_RESULT_FALSE:
        if (m->fail_after_undo_)
            finish(m, ADVLOCK_FAILED, ADVLOCK_ESERVER);
        else
            end_unwanted(m);
        break;
    case ADVLOCK_RESULT_NULL: finish_failed(m, ADVLOCK_ENULL, NULL); break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER, message); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST, message); break;
    }
}

static void on_lock_result(advlock_machine *m, advlock_result result, const char *message)
{
    int unwanted = m->cancel_ == CANCEL_PENDING || m->deadline_passed_;
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
        if (unwanted)
            on_unwanted_grant(m);
        else
            finish(m, ADVLOCK_ACQUIRED, 0);
        break;
    case ADVLOCK_RESULT_FALSE:
        if (m->cancel_ == CANCEL_PENDING)
            finish_cancelled(m);
        else if (elapsed_ms(m) >= m->timeout_ms_)
            timed_out(m);
        else
            sleep_then_retry(m);
        break;
    case ADVLOCK_RESULT_NULL:
        if (m->cancel_ == CANCEL_PENDING)
            finish_cancelled(m);
        else
            finish_failed(m, ADVLOCK_ENULL, NULL);
        break;
    case ADVLOCK_RESULT_SERVER_ERROR:
        if (!waits_on_server(m) || strcmp(m->sqlstate_, query_canceled) != 0)
            finish_failed(m, ADVLOCK_ESERVER, message);
        else if (unwanted)
            on_cancelled_wait(m);
        else
            on_unrequested_57014(m, message);
        break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST, message); break;
    }
}

static void on_unlock_result(advlock_machine *m, advlock_result result, const char *message)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE: finish(m, ADVLOCK_RELEASED, 0); break;
    case ADVLOCK_RESULT_FALSE:
    case ADVLOCK_RESULT_NULL:
        finish_with(m, ADVLOCK_NOT_HELD, "This session held no lock ", " to release.");
        break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER, message); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST, message); break;
    }
}

/* Diagnostics are a courtesy: their failure never hides the timeout. */
static void on_diagnose_failed(advlock_machine *m, const char *message)
{
    advlock_text t;
    timeout_message(m, &t);
    advlock_text_put(&t, " (holder diagnostics failed");
    put_server_message(&t, message);
    advlock_text_put(&t, ")");
    m->sqlstate_[0] = '\0';
    finish(m, ADVLOCK_TIMED_OUT, 0);
}

int advlock_on_result(advlock_machine *m, advlock_result result, const char *sqlstate,
                      const char *message, int64_t now_ms)
{
    if (m == NULL || (int)result < ADVLOCK_RESULT_TRUE
        || (int)result > ADVLOCK_RESULT_CONNECTION_LOST)
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING && m->state_ != CANCELLING)
        return ADVLOCK_EMISUSE;
    /* A holders query answers with rows (advlock_on_holders) or fails. */
    if (m->step_ == STEP_DIAGNOSE && result < ADVLOCK_RESULT_SERVER_ERROR)
        return ADVLOCK_EMISUSE;
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
    case STEP_LOCK: on_lock_result(m, result, message); break;
    case STEP_UNDO: on_undo_result(m, result, message); break;
    case STEP_RELEASE: on_unlock_result(m, result, message); break;
    default: on_diagnose_failed(m, message); break;
    }
    return 0;
}

static void copy_field(char *out, size_t size, const char *value)
{
    advlock_text t;
    advlock_text_init(&t, out, size);
    if (value != NULL)
        advlock_text_put(&t, value);
}

int advlock_on_holders(advlock_machine *m, const advlock_holder *rows, size_t n, int64_t now_ms)
{
    if (m == NULL || (rows == NULL && n > 0))
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING || m->step_ != STEP_DIAGNOSE)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    const advlock_holder *first = NULL;
    size_t holders = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].granted && holders++ == 0)
            first = &rows[i];

    advlock_text t;
    timeout_message(m, &t);
    if (first == NULL) {
        advlock_text_put(&t, " No session holds it now.");
    } else {
        m->holder_pid_ = first->pid;
        m->holder_seconds_ = first->seconds < 0 ? 0 : first->seconds;
        copy_field(m->holder_application_, sizeof m->holder_application_, first->application_name);
        copy_field(m->holder_state_, sizeof m->holder_state_, first->state);
        advlock_text_put(&t, " Held by pid ");
        advlock_text_put_int(&t, first->pid);
        advlock_text_put(&t, " (application '");
        advlock_text_put(&t, m->holder_application_);
        advlock_text_put(&t, "', state ");
        advlock_text_put(&t, m->holder_state_[0] ? m->holder_state_ : "unknown");
        advlock_text_put(&t, ") for ");
        advlock_text_put_int(&t, m->holder_seconds_);
        advlock_text_put(&t, "s");
        if (holders > 1) {
            advlock_text_put(&t, " and by ");
            advlock_text_put_int(&t, (int64_t)(holders - 1));
            advlock_text_put(&t, holders == 2 ? " other session" : " other sessions");
        }
        advlock_text_put(&t, ".");
    }
    finish(m, ADVLOCK_TIMED_OUT, 0);
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
    if (m->state_ == SLEEPING) {
        issue_lock_query(m);
    } else if (m->state_ == QUERYING && m->step_ == STEP_LOCK && waits_on_server(m)) {
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
    m->wake_at_ms_ = add_saturating(m->now_ms_, CANCEL_RESEND_MS);
    return 0;
}

int advlock_cancel(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (!busy(m) || m->op_ != ACQUIRE)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    if (m->state_ == SLEEPING) {
        finish_cancelled(m);
        return 0;
    }
    if (m->step_ != STEP_LOCK || m->cancel_ == CANCEL_PENDING)
        return 0; /* already on its way out */
    m->cancel_ = CANCEL_PENDING;
    /* A server-side wait could last forever: ask for it to stop, once. */
    if (m->state_ == QUERYING && waits_on_server(m) && !m->deadline_passed_) {
        m->deadline_passed_ = 1;
        request_cancel(m);
    }
    return 0;
}

advlock_action advlock_next_action(const advlock_machine *m)
{
    advlock_action a;
    memset(&a, 0, sizeof a);
    a.sqlstate = "";
    a.message = "";
    a.holder_application = "";
    a.holder_state = "";
    if (m == NULL)
        return a;
    switch (m->state_) {
    case QUERYING:
    case CANCELLING:
        a.kind = m->state_ == QUERYING ? ADVLOCK_ACTION_QUERY : ADVLOCK_ACTION_CANCEL_QUERY;
        a.sql = (advlock_sql)m->sql_;
        a.sql_text = advlock_sql_text(a.sql);
        a.param = m->key_;
        a.wake_at_ms = m->wake_at_ms_;
        break;
    case SLEEPING:
        a.kind = ADVLOCK_ACTION_SLEEP;
        a.wake_at_ms = m->wake_at_ms_;
        a.sleep_ms = m->sleep_ms_;
        break;
    case DONE:
        a.kind = ADVLOCK_ACTION_DONE;
        a.outcome = (advlock_outcome)m->outcome_;
        a.error = m->error_;
        a.sqlstate = m->sqlstate_;
        a.message = m->message_;
        a.holder_pid = m->holder_pid_;
        a.holder_seconds = m->holder_seconds_;
        a.holder_application = m->holder_application_;
        a.holder_state = m->holder_state_;
        break;
    default: a.kind = ADVLOCK_ACTION_NONE; break;
    }
    return a;
}

uint64_t advlock_attempts(const advlock_machine *m)
{
    return m != NULL && m->op_ == ACQUIRE ? m->attempts_ : 0;
}
