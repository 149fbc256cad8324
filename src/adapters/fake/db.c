/*
 * Sessions and statements of the fake database: transactions (implicit,
 * BEGIN ... COMMIT/ROLLBACK, failed), the advisory-lock functions on top of
 * the lock manager, waiting statements, and the public functions.
 */
#include "fake.h"

#include <stdio.h>
#include <string.h>

void advlock_fake_db_init(advlock_fake_db *db)
{
    if (db == NULL)
        return;
    memset(db, 0, sizeof *db);
    db->next_pid_ = 1000;
}

void advlock_fake_db_set_time(advlock_fake_db *db, int64_t now_ms)
{
    if (db != NULL && now_ms > db->now_ms_)
        db->now_ms_ = now_ms;
}

int fake_db_slot(const advlock_fake_db *db, int pid)
{
    if (db == NULL || pid <= 0)
        return -1;
    for (int i = 0; i < db->sessions_used_; i++)
        if (db->sessions_[i].pid_ == pid)
            return i;
    return -1;
}

int advlock_fake_db_is_open(const advlock_fake_db *db, int pid)
{
    return fake_db_slot(db, pid) >= 0;
}

int advlock_fake_db_connect(advlock_fake_db *db, int *pid_out)
{
    if (db == NULL || pid_out == NULL)
        return ADVLOCK_EINVAL;
    int i = 0;
    while (i < db->sessions_used_ && db->sessions_[i].pid_ != 0)
        i++;
    if (i == ADVLOCK_FAKE_MAX_SESSIONS)
        return ADVLOCK_ESERVER;
    if (i == db->sessions_used_)
        db->sessions_used_++;
    advlock_fake_session_ *s = &db->sessions_[i];
    memset(s, 0, sizeof *s);
    s->pid_ = db->next_pid_++;
    s->state_change_ms_ = s->xact_start_ms_ = db->now_ms_; /* idle since it connected */
    *pid_out = s->pid_;
    return 0;
}

int advlock_fake_db_close(advlock_fake_db *db, int pid)
{
    int slot = fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    lt_leave_queue(db, slot);
    lt_release_level(db, slot, SCOPE_XACT);
    lt_release_level(db, slot, SCOPE_SESSION);
    db->sessions_[slot].pid_ = 0;
    db->sessions_[slot].wait_ = WAIT_NONE;
    return 0;
}

void db_statement_failed(advlock_fake_db *db, int slot)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->txn_ == TXN_BLOCK)
        s->txn_ = TXN_FAILED;
    lt_release_level(db, slot, SCOPE_XACT);
}

/* Outside a transaction block each statement is its own transaction, whose
 * end releases the transaction-level locks the statement took. */
static void statement_succeeded(advlock_fake_db *db, int slot)
{
    if (db->sessions_[slot].txn_ == TXN_IMPLICIT)
        lt_release_level(db, slot, SCOPE_XACT);
}

void db_wait_ended(advlock_fake_db *db, int slot, int how)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    lt_leave_queue(db, slot);
    s->wait_ = WAIT_ENDED;
    s->wait_result_ = how;
    s->state_change_ms_ = db->now_ms_; /* the statement ends now: idle */
    if (how == WAIT_GRANTED)
        statement_succeeded(db, slot);
    else
        db_statement_failed(db, slot);
}

static const char *mode_name(int mode)
{
    return mode == ADVLOCK_FAKE_EXCLUSIVE ? "ExclusiveLock" : "ShareLock";
}

static void lock_table_full(advlock_fake_result *out)
{
    fake_result_error(out, "53200", "out of shared memory");
}

static void run_try(advlock_fake_db *db, int slot, const fake_statement *st, int64_t key,
                    advlock_fake_result *out)
{
    enum lt_outcome r = lt_request(db, slot, key, st->mode, st->scope, 0);
    if (r == LT_FULL)
        lock_table_full(out);
    else
        fake_result_row(out, r == LT_GRANTED ? ADVLOCK_FAKE_ROW_TRUE : ADVLOCK_FAKE_ROW_FALSE);
}

static void run_lock(advlock_fake_db *db, int slot, const fake_statement *st, int64_t key,
                     advlock_fake_result *out)
{
    switch (lt_request(db, slot, key, st->mode, st->scope, 1)) {
    case LT_GRANTED: fake_result_row(out, ADVLOCK_FAKE_ROW_VOID); break;
    case LT_QUEUED:
        out->status = ADVLOCK_FAKE_WAITING;
        db->sessions_[slot].wait_start_ms_ = db->now_ms_;
        break;
    case LT_DEADLOCK: fake_result_error(out, "40P01", "deadlock detected"); break;
    default: lock_table_full(out); break;
    }
}

static void run_unlock(advlock_fake_db *db, int slot, const fake_statement *st, int64_t key,
                       advlock_fake_result *out)
{
    if (lt_release(db, slot, key, st->mode, SCOPE_SESSION)) {
        fake_result_row(out, ADVLOCK_FAKE_ROW_TRUE);
        return;
    }
    char warning[ADVLOCK_FAKE_TEXT_MAX];
    snprintf(warning, sizeof warning, "you don't own a lock of type %s", mode_name(st->mode));
    fake_result_row(out, ADVLOCK_FAKE_ROW_FALSE);
    fake_result_warning(out, "01000", warning);
}

static void run_transaction_control(advlock_fake_db *db, int slot, enum stmt_kind kind,
                                    advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (kind == ST_BEGIN) {
        if (s->txn_ == TXN_BLOCK)
            fake_result_warning(out, "25001", "there is already a transaction in progress");
        s->txn_ = TXN_BLOCK;
        fake_result_command(out, "BEGIN");
        return;
    }
    if (s->txn_ == TXN_IMPLICIT)
        fake_result_warning(out, "25P01", "there is no transaction in progress");
    /* COMMIT of a failed block rolls it back, and says so. */
    int rolled_back = kind == ST_ROLLBACK || s->txn_ == TXN_FAILED;
    s->txn_ = TXN_IMPLICIT;
    lt_release_level(db, slot, SCOPE_XACT);
    fake_result_command(out, rolled_back ? "ROLLBACK" : "COMMIT");
}

static void run_holders(advlock_fake_db *db, int slot, int64_t key, advlock_fake_result *out)
{
    size_t n = advlock_fake_db_holders(db, db->sessions_[slot].pid_, key, NULL, 0);
    fake_result_row(out, ADVLOCK_FAKE_ROWS);
    snprintf(out->command_tag, sizeof out->command_tag, "SELECT %u", (unsigned)n);
}

/* PostgreSQL's order of checks: parse (42601), refuse work in a failed
 * block (25P02), look the function up (42883), bind the parameters (08P01). */
static void run(advlock_fake_db *db, int slot, const char *sql, const int64_t *param,
                advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    /* The statement starts now; outside a block it is its own transaction.
     * It runs in no time, so it also ends now. */
    s->state_change_ms_ = db->now_ms_;
    if (s->txn_ == TXN_IMPLICIT)
        s->xact_start_ms_ = db->now_ms_;
    const fake_statement *st = fake_statement_find(sql);
    if (st == NULL && !fake_statement_parses(sql)) {
        fake_statement_reject(sql, param != NULL, out);
        db_statement_failed(db, slot);
        return;
    }
    if (s->txn_ == TXN_FAILED
        && (st == NULL || (st->kind != ST_COMMIT && st->kind != ST_ROLLBACK))) {
        fake_result_error(out, "25P02",
                          "current transaction is aborted, commands ignored until end of "
                          "transaction block");
        return;
    }
    if (st == NULL) {
        fake_statement_reject(sql, param != NULL, out);
        db_statement_failed(db, slot);
        return;
    }
    int supplied = param != NULL;
    if (supplied != st->params) {
        char message[ADVLOCK_FAKE_TEXT_MAX];
        snprintf(message, sizeof message,
                 "bind message supplies %d parameters, but prepared statement \"\" requires %d",
                 supplied, st->params);
        fake_result_error(out, "08P01", message);
        db_statement_failed(db, slot);
        return;
    }
    int64_t key = param != NULL ? *param : 0; /* the statements that take one have it */
    switch (st->kind) {
    case ST_TRY: run_try(db, slot, st, key, out); break;
    case ST_LOCK: run_lock(db, slot, st, key, out); break;
    case ST_UNLOCK: run_unlock(db, slot, st, key, out); break;
    case ST_HOLDERS: run_holders(db, slot, key, out); break;
    case ST_UNLOCK_ALL:
        lt_release_level(db, slot, SCOPE_SESSION);
        fake_result_row(out, ADVLOCK_FAKE_ROW_VOID);
        break;
    default: run_transaction_control(db, slot, st->kind, out); return;
    }
    if (out->status == ADVLOCK_FAKE_SERVER_ERROR)
        db_statement_failed(db, slot);
    else if (out->status != ADVLOCK_FAKE_WAITING)
        statement_succeeded(db, slot);
}

int advlock_fake_db_exec(advlock_fake_db *db, int pid, const char *sql, const int64_t *param,
                         advlock_fake_result *out)
{
    if (db == NULL || sql == NULL || out == NULL)
        return ADVLOCK_EINVAL;
    int slot = fake_db_slot(db, pid);
    if (slot >= 0 && db->sessions_[slot].wait_ != WAIT_NONE)
        return ADVLOCK_EMISUSE;
    fake_result_clear(out);
    if (slot < 0) {
        out->status = ADVLOCK_FAKE_CONNECTION_LOST;
        return 0;
    }
    run(db, slot, sql, param, out);
    return 0;
}

int advlock_fake_db_poll(advlock_fake_db *db, int pid, advlock_fake_result *out)
{
    int slot = fake_db_slot(db, pid);
    if (slot < 0 || out == NULL)
        return ADVLOCK_EINVAL;
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_NONE)
        return ADVLOCK_EMISUSE;
    if (s->wait_ == WAIT_QUEUED)
        return 0;
    fake_result_clear(out);
    if (s->wait_result_ == WAIT_GRANTED)
        fake_result_row(out, ADVLOCK_FAKE_ROW_VOID);
    else if (s->wait_result_ == WAIT_DEADLOCK)
        fake_result_error(out, "40P01", "deadlock detected");
    else
        fake_result_error(out, "57014", "canceling statement due to user request");
    s->wait_ = WAIT_NONE;
    return 1;
}

int advlock_fake_db_is_waiting(const advlock_fake_db *db, int pid)
{
    int slot = fake_db_slot(db, pid);
    return slot >= 0 && db->sessions_[slot].wait_ == WAIT_QUEUED;
}

int advlock_fake_db_cancel(advlock_fake_db *db, int pid)
{
    int slot = fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_ENDED && s->wait_result_ == WAIT_GRANTED) {
        /* ProcSleep's CHECK_FOR_INTERRUPTS after the wake-up: the grant is
         * in the lock table already, and the error only aborts the
         * transaction. */
        s->wait_result_ = WAIT_CANCELLED;
        db_statement_failed(db, slot);
        return 1;
    }
    if (s->wait_ != WAIT_QUEUED)
        return 0;
    db_wait_ended(db, slot, WAIT_CANCELLED);
    return 1;
}

int advlock_fake_db_check_deadlock(advlock_fake_db *db, int pid)
{
    int slot = fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    if (!lt_in_deadlock(db, slot))
        return 0;
    db_wait_ended(db, slot, WAIT_DEADLOCK);
    return 1;
}

int advlock_fake_db_holds(const advlock_fake_db *db, int pid, int64_t key, advlock_fake_mode mode,
                          int *session_level, int *transaction_level)
{
    int slot = fake_db_slot(db, pid);
    if (slot < 0 || (mode != ADVLOCK_FAKE_EXCLUSIVE && mode != ADVLOCK_FAKE_SHARED))
        return ADVLOCK_EINVAL;
    int lock = lt_find_lock(db, key);
    int hold = lock < 0 ? -1 : lt_find_hold(db, slot, lock);
    if (session_level != NULL)
        *session_level = hold < 0 ? 0 : db->holds_[hold].count_[mode][SCOPE_SESSION];
    if (transaction_level != NULL)
        *transaction_level = hold < 0 ? 0 : db->holds_[hold].count_[mode][SCOPE_XACT];
    return 0;
}
