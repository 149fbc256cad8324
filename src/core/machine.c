/*
 * The lock state machine: the reference's acquire loop and release, turned
 * inside out so that the caller performs every query and every sleep.
 *
 *   IDLE --start--> QUERYING --true------------------------------> DONE
 *                     ^   |--false, time left--> SLEEPING --timer--^ (query)
 *                     |   |--false, timeout / null / error / lost-> DONE
 *                     +-- cancel while querying + true: unlock, then DONE
 */
#include "core.h"

#include <string.h>

enum state { IDLE, QUERYING, SLEEPING, DONE };
enum op { ACQUIRE = 1, RELEASE = 2 };
enum cancel { CANCEL_NONE, CANCEL_PENDING, CANCEL_UNDOING };

/* The reference's schedule: Task.Delay(delayMs), then
 * delayMs = Math.Min(delayMs * 2, 1000), starting from 100.
 * ADVLOCK_CANARY plants a wrong first delay so that tests can prove the
 * simulation and fuzzing gates notice a broken schedule; never ship it. */
#ifdef ADVLOCK_CANARY
enum { FIRST_DELAY_MS = 150, MAX_DELAY_MS = 1000 };
#else
enum { FIRST_DELAY_MS = 100, MAX_DELAY_MS = 1000 };
#endif

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

static void issue_query(advlock_machine *m, advlock_sql sql)
{
    m->state_ = QUERYING;
    m->sql_ = sql;
    if (sql == ADVLOCK_SQL_TRY_LOCK)
        m->attempts_++;
}

static void sleep_then_retry(advlock_machine *m)
{
    m->state_ = SLEEPING;
    m->sleep_ms_ = m->next_delay_ms_;
    m->wake_at_ms_ = add_saturating(m->now_ms_, m->sleep_ms_);
    m->next_delay_ms_ = m->next_delay_ms_ * 2 < MAX_DELAY_MS ? m->next_delay_ms_ * 2 : MAX_DELAY_MS;
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

static void finish(advlock_machine *m, advlock_outcome outcome, int error)
{
    m->state_ = DONE;
    m->outcome_ = outcome;
    m->error_ = error;
}

static void finish_with(advlock_machine *m, advlock_outcome outcome, const char *prefix,
                        const char *suffix)
{
    advlock_text t;
    begin_message(m, &t, prefix);
    advlock_text_put(&t, suffix);
    finish(m, outcome, 0);
}

static void finish_timed_out(advlock_machine *m)
{
    advlock_text t;
    begin_message(m, &t, "Could not acquire migration lock for ");
    advlock_text_put(&t, " within ");
    advlock_text_put_seconds(&t, m->timeout_ms_);
    advlock_text_put(&t, "s.");
    finish(m, ADVLOCK_TIMED_OUT, 0);
}

static size_t trimmed_length(const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    return n;
}

/* "<function> for '<key>' <what went wrong>", for every FAILED outcome. */
static void finish_failed(advlock_machine *m, int error, const char *server_message)
{
    advlock_text t;
    advlock_text_init(&t, m->message_, sizeof m->message_);
    advlock_text_put(&t, advlock_sql_function(m->sql_));
    advlock_text_put(&t, " for '");
    advlock_text_put(&t, m->key_echo_);
    advlock_text_put(&t, "' ");
    if (error == ADVLOCK_ENULL) {
        advlock_text_put(&t, "returned null (expected boolean).");
    } else {
        advlock_text_put(&t, error == ADVLOCK_ECONNLOST ? "failed: connection lost" : "failed");
        if (m->sqlstate_[0] != '\0') {
            advlock_text_put(&t, " with SQLSTATE ");
            advlock_text_put(&t, m->sqlstate_);
        }
        if (server_message != NULL && trimmed_length(server_message) > 0) {
            advlock_text_put(&t, ": ");
            advlock_text_putn(&t, server_message, trimmed_length(server_message));
        }
    }
    /* The server dropped the lock with a lost session; any other failure of
     * the undo leaves the grant in doubt. */
    if (m->cancel_ == CANCEL_UNDOING && error != ADVLOCK_ECONNLOST)
        advlock_text_put(&t, " (undoing a cancelled acquire: the lock may still be held)");
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

void advlock_machine_init(advlock_machine *m)
{
    if (m != NULL)
        memset(m, 0, sizeof *m);
}

static int start(advlock_machine *m, enum op op, const char *lock_key, size_t len,
                 int64_t timeout_ms, int64_t now_ms)
{
    if (m == NULL || (lock_key == NULL && len > 0) || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (m->state_ == QUERYING || m->state_ == SLEEPING)
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
    m->error_ = 0;
    m->sqlstate_[0] = '\0';
    m->message_[0] = '\0';
    advlock_text echo;
    advlock_text_init(&echo, m->key_echo_, sizeof m->key_echo_);
    advlock_text_put_key(&echo, lock_key, len);
    issue_query(m, op == ACQUIRE ? ADVLOCK_SQL_TRY_LOCK : ADVLOCK_SQL_UNLOCK);
    return 0;
}

int advlock_start_acquire(advlock_machine *m, const char *lock_key, size_t len,
                          int64_t timeout_ms, int64_t now_ms)
{
    return start(m, ACQUIRE, lock_key, len, timeout_ms, now_ms);
}

int advlock_start_release(advlock_machine *m, const char *lock_key, size_t len, int64_t now_ms)
{
    return start(m, RELEASE, lock_key, len, 0, now_ms);
}

/* Only a boolean answer proves the unlock ran; NULL (which PostgreSQL never
 * sends here, but a proxy or driver might) leaves the grant in doubt. */
static void on_undo_result(advlock_machine *m, advlock_result result, const char *message)
{
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
    case ADVLOCK_RESULT_FALSE:
        finish_with(m, ADVLOCK_CANCELLED, "Acquire of lock ", " was cancelled.");
        break;
    case ADVLOCK_RESULT_NULL: finish_failed(m, ADVLOCK_ENULL, NULL); break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER, message); break;
    case ADVLOCK_RESULT_CONNECTION_LOST: finish_failed(m, ADVLOCK_ECONNLOST, message); break;
    }
}

static void on_try_lock_result(advlock_machine *m, advlock_result result, const char *message)
{
    int cancelling = m->cancel_ == CANCEL_PENDING;
    switch (result) {
    case ADVLOCK_RESULT_TRUE:
        if (cancelling) {
            m->cancel_ = CANCEL_UNDOING;
            issue_query(m, ADVLOCK_SQL_UNLOCK);
        } else {
            finish(m, ADVLOCK_ACQUIRED, 0);
        }
        break;
    case ADVLOCK_RESULT_FALSE:
        if (cancelling)
            finish_with(m, ADVLOCK_CANCELLED, "Acquire of lock ", " was cancelled.");
        else if (elapsed_ms(m) >= m->timeout_ms_)
            finish_timed_out(m);
        else
            sleep_then_retry(m);
        break;
    case ADVLOCK_RESULT_NULL:
        if (cancelling)
            finish_with(m, ADVLOCK_CANCELLED, "Acquire of lock ", " was cancelled.");
        else
            finish_failed(m, ADVLOCK_ENULL, NULL);
        break;
    case ADVLOCK_RESULT_SERVER_ERROR: finish_failed(m, ADVLOCK_ESERVER, message); break;
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

int advlock_on_result(advlock_machine *m, advlock_result result, const char *sqlstate,
                      const char *message, int64_t now_ms)
{
    if (m == NULL || (int)result < ADVLOCK_RESULT_TRUE
        || (int)result > ADVLOCK_RESULT_CONNECTION_LOST)
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    keep_sqlstate(m, result >= ADVLOCK_RESULT_SERVER_ERROR ? sqlstate : NULL);
    if (m->cancel_ == CANCEL_UNDOING)
        on_undo_result(m, result, message);
    else if (m->op_ == ACQUIRE)
        on_try_lock_result(m, result, message);
    else
        on_unlock_result(m, result, message);
    return 0;
}

int advlock_on_timer(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if (m->state_ != QUERYING && m->state_ != SLEEPING)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    if (m->state_ == SLEEPING && m->now_ms_ >= m->wake_at_ms_)
        issue_query(m, ADVLOCK_SQL_TRY_LOCK);
    return 0;
}

int advlock_cancel(advlock_machine *m, int64_t now_ms)
{
    if (m == NULL)
        return ADVLOCK_EINVAL;
    if ((m->state_ != QUERYING && m->state_ != SLEEPING) || m->op_ != ACQUIRE)
        return ADVLOCK_EMISUSE;
    observe_time(m, now_ms);
    if (m->state_ == SLEEPING)
        finish_with(m, ADVLOCK_CANCELLED, "Acquire of lock ", " was cancelled.");
    else if (m->cancel_ == CANCEL_NONE)
        m->cancel_ = CANCEL_PENDING;
    return 0;
}

advlock_action advlock_next_action(const advlock_machine *m)
{
    advlock_action a;
    memset(&a, 0, sizeof a);
    a.sqlstate = "";
    a.message = "";
    if (m == NULL)
        return a;
    switch (m->state_) {
    case QUERYING:
        a.kind = ADVLOCK_ACTION_QUERY;
        a.sql = (advlock_sql)m->sql_;
        a.sql_text = advlock_sql_text(a.sql);
        a.param = m->key_;
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
        break;
    default: a.kind = ADVLOCK_ACTION_NONE; break;
    }
    return a;
}

uint64_t advlock_attempts(const advlock_machine *m)
{
    return m != NULL && m->op_ == ACQUIRE ? m->attempts_ : 0;
}
