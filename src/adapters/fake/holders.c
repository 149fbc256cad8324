/*
 * The holders query (ADVLOCK_SQL_HOLDERS) as PostgreSQL answers it: pg_locks
 * rows for one key joined with pg_stat_activity, with how long each holder
 * has held (since its state_change) and each waiter has waited (since its
 * waitstart), measured from now(), the querying transaction's start.
 */
#include "fake.h"

static const char *const mode_names[2] = {"ExclusiveLock", "ShareLock"};

static const char *state_of(const advlock_fake_db *db, int slot, int querying)
{
    const advlock_fake_session_ *s = &db->sessions_[slot];
    if (slot == querying || s->wait_ == WAIT_QUEUED)
        return "active";
    if (s->txn_ == TXN_BLOCK)
        return "idle in transaction";
    if (s->txn_ == TXN_FAILED)
        return "idle in transaction (aborted)";
    return "idle";
}

/* floor(ms / 1000), also for negative ms, as floor(extract(epoch ...)). */
static int64_t floor_seconds(int64_t ms)
{
    return ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
}

static int before(const void *x, const void *y)
{
    const advlock_holder *a = x, *b = y;
    if (a->granted != b->granted)
        return a->granted > b->granted;
    if (a->pid != b->pid)
        return a->pid < b->pid;
    return a->mode == mode_names[0] && b->mode == mode_names[1];
}

/* One row in rows[0..max), kept in order; counts every row offered. */
static void offer(advlock_holder *rows, size_t max, size_t *seen, advlock_holder row)
{
    advlock_fake_offer_row(rows, sizeof row, max, seen, &row, before);
}

static advlock_holder row_for(const advlock_fake_db *db, int slot, int querying, int mode,
                              int granted, int64_t now)
{
    const advlock_fake_session_ *s = &db->sessions_[slot];
    advlock_holder r = {
        .pid = s->pid_,
        .granted = granted,
        .mode = mode_names[mode],
        .application_name = "",
        .client = "local",
        .state = state_of(db, slot, querying),
        .backend_start = "",
        .seconds = floor_seconds(now - (granted ? s->state_change_ms_ : s->wait_start_ms_)),
    };
    return r;
}

size_t advlock_fake_db_holders(const advlock_fake_db *db, int pid, int64_t key,
                               advlock_holder *rows, size_t max)
{
    if (db == NULL)
        return 0;
    if (rows == NULL)
        max = 0;
    int querying = advlock_fake_db_slot(db, pid);
    int64_t now = querying >= 0 ? db->sessions_[querying].xact_start_ms_ : db->now_ms_;
    int lock = advlock_lt_find_lock(db, key);
    size_t seen = 0;
    if (lock < 0)
        return 0;
    for (int i = 0; i < db->holds_used_; i++) {
        const advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ < 0 || h->lock_ != lock)
            continue;
        for (int mode = 0; mode < 2; mode++)
            if (advlock_lt_hold_total(h, mode) > 0)
                offer(rows, max, &seen, row_for(db, h->session_, querying, mode, 1, now));
    }
    for (int i = 0; i < db->sessions_used_; i++) {
        const advlock_fake_session_ *s = &db->sessions_[i];
        if (s->pid_ != 0 && s->wait_ == WAIT_QUEUED && s->wait_lock_ == lock)
            offer(rows, max, &seen, row_for(db, i, querying, s->wait_mode_, 0, now));
    }
    return seen;
}
