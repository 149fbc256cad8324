/*
 * Sessions and statements of the fake database: transactions (implicit,
 * BEGIN ... COMMIT/ROLLBACK, failed), the advisory-lock functions on top of
 * the lock manager, waiting statements, and the public functions. The lock
 * manager below never calls back up here: sessions it grants are marked,
 * and every public function that can release a lock finishes their
 * statements before it returns (finish_granted).
 */
#include "../../core/saturating.h"
#include "fake.h"

#include <stdio.h>
#include <string.h>

void advlock_fake_db_init(advlock_fake_db *db)
{
    if (db == NULL)
        return;
    memset(db, 0, sizeof *db);
    db->next_pid_ = 1000;
    db->server_version_ = 150000;
}

void advlock_fake_db_set_server_version(advlock_fake_db *db, int server_version_num)
{
    if (db != NULL)
        db->server_version_ = server_version_num;
}

void advlock_fake_db_set_time(advlock_fake_db *db, int64_t now_ms)
{
    if (db != NULL && now_ms > db->now_ms_)
        db->now_ms_ = now_ms;
}

void advlock_fake_db_set_in_recovery(advlock_fake_db *db, int in_recovery)
{
    if (db != NULL)
        db->in_recovery_ = in_recovery != 0;
}

static void statement_failed(advlock_fake_db *db, int slot);
static void finish_granted(advlock_fake_db *db);

int advlock_fake_db_is_open(const advlock_fake_db *db, int pid)
{
    return advlock_fake_db_slot(db, pid) >= 0;
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
    /* idle since it connected */
    db->sessions_[i] = (advlock_fake_session_){
        .pid_ = db->next_pid_++, .state_change_ms_ = db->now_ms_, .xact_start_ms_ = db->now_ms_};
    *pid_out = db->sessions_[i].pid_;
    return 0;
}

int advlock_fake_db_close(advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    advlock_lt_leave_queue(db, slot);
    advlock_lt_release_level(db, slot, SCOPE_XACT);
    advlock_lt_release_level(db, slot, SCOPE_SESSION);
    db->sessions_[slot].pid_ = 0;
    db->sessions_[slot].wait_ = WAIT_NONE;
    db->sessions_[slot].finish_ = 0;
    finish_granted(db);
    return 0;
}

static void save_block_settings(advlock_fake_session_ *s)
{
    s->claimed_at_begin_ = s->claimed_;
    s->claim_at_begin_ = s->claim_;
    s->tcp_at_begin_ = s->tcp_;
}

/* The block's settings go back to what they were at its BEGIN: the claim
 * (advlock.session) and the TCP settings are settings, which PostgreSQL
 * rolls back. */
static void undo_block_settings(advlock_fake_session_ *s)
{
    s->claimed_ = s->claimed_at_begin_;
    s->claim_ = s->claim_at_begin_;
    s->tcp_ = s->tcp_at_begin_;
}

/* A statement ended with an error: a transaction block becomes failed, its
 * settings revert, and the transaction's locks are released (PostgreSQL's
 * AbortTransaction). */
static void statement_failed(advlock_fake_db *db, int slot)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->txn_ == TXN_BLOCK) {
        s->txn_ = TXN_FAILED;
        undo_block_settings(s);
    }
    advlock_lt_release_level(db, slot, SCOPE_XACT);
}

/* Outside a transaction block each statement is its own transaction, whose
 * end releases the transaction-level locks the statement took. */
static void statement_succeeded(advlock_fake_db *db, int slot)
{
    if (db->sessions_[slot].txn_ == TXN_IMPLICIT)
        advlock_lt_release_level(db, slot, SCOPE_XACT);
}

/* A waiting statement ends with an error (a deadlock, a cancel). */
static void wait_failed(advlock_fake_db *db, int slot, int how)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    advlock_lt_leave_queue(db, slot);
    s->wait_ = WAIT_ENDED;
    s->wait_result_ = how;
    s->state_change_ms_ = db->now_ms_; /* the statement ends now: idle */
    statement_failed(db, slot);
}

/* Finishes the statements of sessions the lock manager granted during a
 * call; finishing one (outside a block) can release a transaction-level hold
 * and grant others in turn, so until none is left. */
static void finish_granted(advlock_fake_db *db)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < db->sessions_used_; i++) {
            advlock_fake_session_ *s = &db->sessions_[i];
            if (!s->finish_)
                continue;
            s->finish_ = 0;
            s->state_change_ms_ = db->now_ms_; /* the statement ends now: idle */
            statement_succeeded(db, i);
            again = 1;
        }
    }
}

static const char *mode_name(int mode)
{
    return mode == ADVLOCK_FAKE_EXCLUSIVE ? "ExclusiveLock" : "ShareLock";
}

static void lock_table_full(advlock_fake_result *out)
{
    advlock_fake_result_error(out, "53200", "out of shared memory");
}

static void run_try(advlock_fake_db *db, int slot, const advlock_fake_statement *st, int64_t key,
                    advlock_fake_result *out)
{
    enum advlock_lt_outcome r = advlock_lt_request(db, slot, key, st->mode, st->scope, 0);
    if (r == LT_FULL)
        lock_table_full(out);
    else
        advlock_fake_result_row(out,
                                r == LT_GRANTED ? ADVLOCK_FAKE_ROW_TRUE : ADVLOCK_FAKE_ROW_FALSE);
}

/* The key's counter row: its slot in the fence table, a new one (token 0)
 * if the key has none yet, or -1 when the table is full. */
static int fence_slot(advlock_fake_db *db, int64_t key)
{
    for (int i = 0; i < db->fences_used_; i++)
        if (db->fence_keys_[i] == key)
            return i;
    if (db->fences_used_ == ADVLOCK_FAKE_MAX_LOCKS)
        return -1;
    db->fence_keys_[db->fences_used_] = key;
    db->fence_tokens_[db->fences_used_] = 0;
    return db->fences_used_++;
}

/* The fenced try: a standby refuses the upsert at executor start, before
 * the lock is taken; a grant bumps the key's counter. */
static void run_try_fenced(advlock_fake_db *db, int slot, const advlock_fake_statement *st,
                           int64_t key, advlock_fake_result *out)
{
    if (db->in_recovery_) {
        advlock_fake_result_error(out, "25006", "cannot execute INSERT in a read-only transaction");
        return;
    }
    int row = fence_slot(db, key);
    enum advlock_lt_outcome r =
        row < 0 ? LT_FULL : advlock_lt_request(db, slot, key, st->mode, st->scope, 0);
    if (r == LT_FULL) {
        lock_table_full(out);
        return;
    }
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_FENCED);
    out->fence_token = r == LT_GRANTED ? ++db->fence_tokens_[row] : 0;
}

/* bound: the lock_timeout in ms a bounded wait sets (0: none), checked as
 * set_config checks it before the wait begins. */
static void run_lock(advlock_fake_db *db, int slot, const advlock_fake_statement *st, int64_t key,
                     int64_t bound, advlock_fake_result *out)
{
    if (bound < 0 || bound > INT32_MAX) {
        char message[ADVLOCK_FAKE_TEXT_MAX];
        snprintf(message, sizeof message, "invalid value for parameter \"lock_timeout\": \"%lld\"",
                 (long long)bound);
        advlock_fake_result_error(out, "22023", message);
        return;
    }
    advlock_fake_session_ *s = &db->sessions_[slot];
    switch (advlock_lt_request(db, slot, key, st->mode, st->scope, 1)) {
    case LT_GRANTED: advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_VOID); break;
    case LT_QUEUED:
        out->status = ADVLOCK_FAKE_WAITING;
        s->wait_start_ms_ = db->now_ms_;
        s->lock_timeout_at_ms_ =
            bound == 0 ? INT64_MAX : advlock_add_saturating(db->now_ms_, bound);
        break;
    case LT_DEADLOCK: advlock_fake_result_error(out, "40P01", "deadlock detected"); break;
    default: lock_table_full(out); break;
    }
}

static void run_unlock(advlock_fake_db *db, int slot, const advlock_fake_statement *st, int64_t key,
                       advlock_fake_result *out)
{
    if (advlock_lt_release(db, slot, key, st->mode, SCOPE_SESSION)) {
        advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_TRUE);
        return;
    }
    char warning[ADVLOCK_FAKE_TEXT_MAX];
    snprintf(warning, sizeof warning, "you don't own a lock of type %s", mode_name(st->mode));
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_FALSE);
    advlock_fake_result_warning(out, "01000", warning);
}

static void run_transaction_control(advlock_fake_db *db, int slot, enum stmt_kind kind,
                                    advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (kind == ST_BEGIN) {
        if (s->txn_ == TXN_BLOCK)
            advlock_fake_result_warning(out, "25001", "there is already a transaction in progress");
        else
            save_block_settings(s);
        s->txn_ = TXN_BLOCK;
        advlock_fake_result_command(out, "BEGIN");
        return;
    }
    if (s->txn_ == TXN_IMPLICIT)
        advlock_fake_result_warning(out, "25P01", "there is no transaction in progress");
    /* COMMIT of a failed block rolls it back, and says so. */
    int rolled_back = kind == ST_ROLLBACK || s->txn_ == TXN_FAILED;
    if (rolled_back && s->txn_ != TXN_IMPLICIT)
        undo_block_settings(s);
    s->txn_ = TXN_IMPLICIT;
    advlock_lt_release_level(db, slot, SCOPE_XACT);
    advlock_fake_result_command(out, rolled_back ? "ROLLBACK" : "COMMIT");
}

/* What PgBouncer runs between session-mode clients: settings reset (the
 * claim with them) and every advisory lock released; not inside a block. */
static void run_discard_all(advlock_fake_db *db, int slot, advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->txn_ != TXN_IMPLICIT) {
        advlock_fake_result_error(out, "25001",
                                  "DISCARD ALL cannot run inside a transaction block");
        return;
    }
    s->claimed_ = 0;
    s->claim_ = 0;
    advlock_fake_tcp_defaults(s->transport_, &s->tcp_);
    advlock_lt_release_level(db, slot, SCOPE_SESSION);
    advlock_fake_result_command(out, "DISCARD ALL");
}

static void run_holders(advlock_fake_db *db, int slot, int64_t key, advlock_fake_result *out)
{
    size_t n = advlock_fake_db_holders(db, db->sessions_[slot].pid_, key, NULL, 0);
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROWS);
    snprintf(out->command_tag, sizeof out->command_tag, "SELECT %u", (unsigned)n);
}

/* ADVLOCK_SQL_HELD: pg_locks has one granted row per session, lock and
 * mode, whatever the level (session or transaction) of its holds. */
static void run_held(advlock_fake_db *db, int slot, int mode, int64_t key, advlock_fake_result *out)
{
    int lock = advlock_lt_find_lock(db, key);
    int held = lock >= 0 && (advlock_lt_held_mask(db, slot, lock) & advlock_lt_mode_bit(mode));
    advlock_fake_result_row(out, held ? ADVLOCK_FAKE_ROW_TRUE : ADVLOCK_FAKE_ROW_FALSE);
}

/* Does the session hold any advisory lock, at either level (pg_locks)? */
static int holds_any(const advlock_fake_db *db, int slot)
{
    for (int i = 0; i < db->holds_used_; i++) {
        const advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ == slot
            && advlock_lt_hold_total(h, ADVLOCK_FAKE_EXCLUSIVE)
                       + advlock_lt_hold_total(h, ADVLOCK_FAKE_SHARED)
                   > 0)
            return 1;
    }
    return 0;
}

/* Does the session hold the key granted, in any mode, at either level? */
static int holds_key(const advlock_fake_db *db, int slot, int64_t key)
{
    int lock = advlock_lt_find_lock(db, key);
    return lock >= 0 && advlock_lt_held_mask(db, slot, lock) != 0;
}

/* ADVLOCK_SQL_SESSION, as its CASE decides: token 0 claims nothing; the
 * session's own token is ours; another's, or a session holding a lock
 * (someone else's, whose claim may have rolled back), is not; else the
 * session is claimed now. */
static void run_session(advlock_fake_db *db, int slot, int64_t token, advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    int ours;
    if (token == 0 || (s->claimed_ && s->claim_ == token))
        ours = 1;
    else if (s->claimed_ || holds_any(db, slot))
        ours = 0;
    else {
        s->claimed_ = ours = 1;
        s->claim_ = token;
    }
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_SESSION);
    out->session_pid = s->pid_;
    out->in_recovery = db->in_recovery_;
    out->ours = ours;
}

/* PostgreSQL's order of checks: parse (42601), refuse work in a failed
 * block (25P02), look the function up (42883), bind the parameters (08P01). */
static void run(advlock_fake_db *db, int slot, const char *sql, const int64_t *params, int nparams,
                advlock_fake_result *out)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    /* The statement starts now; outside a block it is its own transaction.
     * It runs in no time, so it also ends now. */
    s->state_change_ms_ = db->now_ms_;
    if (s->txn_ == TXN_IMPLICIT)
        s->xact_start_ms_ = db->now_ms_;
    const advlock_fake_statement *st = advlock_fake_statement_find(sql);
    if (st == NULL && !advlock_fake_statement_parses(sql)) {
        advlock_fake_statement_reject(sql, nparams > 0, out);
        statement_failed(db, slot);
        return;
    }
    if (s->txn_ == TXN_FAILED
        && (st == NULL || (st->kind != ST_COMMIT && st->kind != ST_ROLLBACK))) {
        advlock_fake_result_error(out, "25P02",
                                  "current transaction is aborted, commands ignored until end of "
                                  "transaction block");
        return;
    }
    if (st == NULL) {
        advlock_fake_statement_reject(sql, nparams > 0, out);
        statement_failed(db, slot);
        return;
    }
    int wanted = advlock_fake_statement_params(st);
    if (nparams != wanted) {
        char message[ADVLOCK_FAKE_TEXT_MAX];
        snprintf(message, sizeof message,
                 "bind message supplies %d parameters, but prepared statement \"\" requires %d",
                 nparams, wanted);
        advlock_fake_result_error(out, "08P01", message);
        statement_failed(db, slot);
        return;
    }
    int64_t key = nparams > 0 ? params[0] : 0; /* the statements that take one have it */
    /* A guarded row off its claimed session runs nothing: NULL; a
     * transaction-scoped one runs also where the key is not held. Its
     * token is the last parameter. */
    if (st->sql >= 0 && advlock_sql_guarded((advlock_sql)st->sql) && nparams > 0
        && !(s->claimed_ && s->claim_ == params[nparams - 1])
        && !(st->scope == SCOPE_XACT && !holds_key(db, slot, key))) {
        advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_NULL);
        statement_succeeded(db, slot);
        return;
    }
    switch (st->kind) {
    case ST_TRY: run_try(db, slot, st, key, out); break;
    case ST_TRY_FENCED: run_try_fenced(db, slot, st, key, out); break;
    case ST_LOCK: run_lock(db, slot, st, key, nparams > 1 ? params[1] : 0, out); break;
    case ST_UNLOCK: run_unlock(db, slot, st, key, out); break;
    case ST_HOLDERS: run_holders(db, slot, key, out); break;
    case ST_SESSION: run_session(db, slot, key, out); break;
    case ST_HELD: run_held(db, slot, st->mode, key, out); break;
    case ST_DISCARD_ALL: run_discard_all(db, slot, out); break;
    case ST_LEASE_SETUP: advlock_fake_run_lease_setup(s, key, out); break;
    case ST_HEARTBEAT: advlock_fake_run_heartbeat(s, key, out); break;
    case ST_HEARTBEAT_GUARDED: advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_TRUE); break;
    case ST_MARK_TAKE:
    case ST_MARK_WRITE:
    case ST_MARK_CLEAR: advlock_fake_run_mark(db, st->kind, params, out); break;
    case ST_UNLOCK_ALL:
        advlock_lt_release_level(db, slot, SCOPE_SESSION);
        advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_VOID);
        break;
    default: run_transaction_control(db, slot, st->kind, out); return;
    }
    if (out->status == ADVLOCK_FAKE_SERVER_ERROR)
        statement_failed(db, slot);
    else if (out->status != ADVLOCK_FAKE_WAITING)
        statement_succeeded(db, slot);
}

int advlock_fake_db_exec(advlock_fake_db *db, int pid, const char *sql, const int64_t *param,
                         advlock_fake_result *out)
{
    return advlock_fake_db_exec_params(db, pid, sql, param, param != NULL, out);
}

int advlock_fake_db_exec_params(advlock_fake_db *db, int pid, const char *sql,
                                const int64_t *params, int nparams, advlock_fake_result *out)
{
    if (db == NULL || sql == NULL || out == NULL || nparams < 0 || nparams > 3
        || (params == NULL && nparams > 0))
        return ADVLOCK_EINVAL;
    int slot = advlock_fake_db_slot(db, pid);
    if (slot >= 0 && db->sessions_[slot].wait_ != WAIT_NONE)
        return ADVLOCK_EMISUSE;
    advlock_fake_result_clear(out);
    if (slot < 0) {
        out->status = ADVLOCK_FAKE_CONNECTION_LOST;
        return 0;
    }
    run(db, slot, sql, params, nparams, out);
    finish_granted(db);
    return 0;
}

int advlock_fake_db_poll(advlock_fake_db *db, int pid, advlock_fake_result *out)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0 || out == NULL)
        return ADVLOCK_EINVAL;
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_NONE)
        return ADVLOCK_EMISUSE;
    if (s->wait_ == WAIT_QUEUED)
        return 0;
    advlock_fake_result_clear(out);
    if (s->wait_result_ == WAIT_GRANTED)
        advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_VOID);
    else if (s->wait_result_ == WAIT_DEADLOCK)
        advlock_fake_result_error(out, "40P01", "deadlock detected");
    else if (s->wait_result_ == WAIT_LOCK_TIMEOUT)
        advlock_fake_result_error(out, "55P03", "canceling statement due to lock timeout");
    else
        advlock_fake_result_error(out, "57014", "canceling statement due to user request");
    s->wait_ = WAIT_NONE;
    return 1;
}

int advlock_fake_db_is_waiting(const advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    return slot >= 0 && db->sessions_[slot].wait_ == WAIT_QUEUED;
}

/* A cancel, the lock timeout (which PostgreSQL delivers as a cancel of its
 * own) or the deadlock check ends the waiting statement with the error how
 * names. */
static int interrupt_wait(advlock_fake_db *db, int slot, int how)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_ENDED && s->wait_result_ == WAIT_GRANTED) {
        /* ProcSleep's CHECK_FOR_INTERRUPTS after the wake-up: the grant is
         * in the lock table already, and the error only aborts the
         * transaction. */
        s->wait_result_ = how;
        statement_failed(db, slot);
        finish_granted(db);
        return 1;
    }
    if (s->wait_ != WAIT_QUEUED)
        return 0;
    wait_failed(db, slot, how);
    finish_granted(db);
    return 1;
}

int advlock_fake_db_cancel(advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    return interrupt_wait(db, slot, WAIT_CANCELLED);
}

int advlock_fake_db_check_lock_timeout(advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    const advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_NONE || db->now_ms_ < s->lock_timeout_at_ms_)
        return 0;
    return interrupt_wait(db, slot, WAIT_LOCK_TIMEOUT);
}

int advlock_fake_db_check_deadlock(advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    return advlock_lt_in_deadlock(db, slot) ? interrupt_wait(db, slot, WAIT_DEADLOCK) : 0;
}

advlock_fake_wait advlock_fake_db_wait_state(const advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0 || db->sessions_[slot].wait_ == WAIT_NONE)
        return ADVLOCK_FAKE_WAIT_NONE;
    const advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ == WAIT_QUEUED)
        return ADVLOCK_FAKE_WAIT_QUEUED;
    return s->wait_result_ == WAIT_GRANTED ? ADVLOCK_FAKE_WAIT_GRANTED : ADVLOCK_FAKE_WAIT_FAILED;
}

int advlock_fake_db_fail_statement(advlock_fake_db *db, int pid)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0)
        return ADVLOCK_EINVAL;
    if (db->sessions_[slot].wait_ != WAIT_NONE)
        return ADVLOCK_EMISUSE;
    statement_failed(db, slot);
    finish_granted(db);
    return 0;
}

int advlock_fake_db_holds(const advlock_fake_db *db, int pid, int64_t key, advlock_fake_mode mode,
                          int *session_level, int *transaction_level)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0 || (mode != ADVLOCK_FAKE_EXCLUSIVE && mode != ADVLOCK_FAKE_SHARED))
        return ADVLOCK_EINVAL;
    int lock = advlock_lt_find_lock(db, key);
    int hold = lock < 0 ? -1 : advlock_lt_find_hold(db, slot, lock);
    if (session_level != NULL)
        *session_level = hold < 0 ? 0 : db->holds_[hold].count_[mode][SCOPE_SESSION];
    if (transaction_level != NULL)
        *transaction_level = hold < 0 ? 0 : db->holds_[hold].count_[mode][SCOPE_XACT];
    return 0;
}
