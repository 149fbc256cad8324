/*
 * Looking inside the fake database: every hold, the pg_locks picture, and a
 * consistency check of the lock manager's bookkeeping that simulations run
 * after every event.
 */
#include "fake.h"

#include <stdio.h>

static int row_before(const void *x, const void *y)
{
    const advlock_fake_lock_row *a = x, *b = y;
    if (a->pid != b->pid)
        return a->pid < b->pid;
    if (a->key != b->key)
        return a->key < b->key;
    if (a->mode != b->mode)
        return a->mode < b->mode;
    return a->granted > b->granted;
}

/* Keeps rows[0..max) the smallest rows seen so far, in order. */
static void offer(advlock_fake_lock_row *rows, size_t max, size_t *seen, advlock_fake_lock_row row)
{
    advlock_fake_offer_row(rows, sizeof row, max, seen, &row, row_before);
}

int advlock_fake_db_each_hold(const advlock_fake_db *db, advlock_fake_hold_fn fn, void *user)
{
    if (db == NULL || fn == NULL)
        return 0;
    for (int i = 0; i < db->holds_used_; i++) {
        const advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ < 0)
            continue;
        for (int mode = 0; mode < 2; mode++) {
            if (advlock_lt_hold_total(h, mode) == 0)
                continue;
            int rc = fn(user, db->sessions_[h->session_].pid_, db->locks_[h->lock_].key_,
                        (advlock_fake_mode)mode, h->count_[mode][SCOPE_SESSION],
                        h->count_[mode][SCOPE_XACT]);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Where advlock_fake_db_lock_rows() offers the granted rows. */
typedef struct row_sink {
    advlock_fake_lock_row *rows;
    size_t max, seen;
} row_sink;

static int offer_hold(void *user, int pid, int64_t key, advlock_fake_mode mode, int session,
                      int xact)
{
    (void)session;
    (void)xact;
    row_sink *sink = user;
    advlock_fake_lock_row row = {pid, key, mode, 1};
    offer(sink->rows, sink->max, &sink->seen, row);
    return 0;
}

size_t advlock_fake_db_lock_rows(const advlock_fake_db *db, advlock_fake_lock_row *rows, size_t max)
{
    if (db == NULL)
        return 0;
    if (rows == NULL)
        max = 0;
    row_sink granted = {rows, max, 0};
    advlock_fake_db_each_hold(db, offer_hold, &granted);
    size_t seen = granted.seen;
    for (int i = 0; i < db->sessions_used_; i++) {
        const advlock_fake_session_ *s = &db->sessions_[i];
        if (s->pid_ == 0 || s->wait_ != WAIT_QUEUED)
            continue;
        advlock_fake_lock_row row = {s->pid_, db->locks_[s->wait_lock_].key_,
                                     (advlock_fake_mode)s->wait_mode_, 0};
        offer(rows, max, &seen, row);
    }
    return seen;
}

static int fail(char *why, size_t size, const char *what, int64_t key)
{
    if (why != NULL && size > 0)
        snprintf(why, size, "fake database inconsistent: %s (key %lld)", what, (long long)key);
    return ADVLOCK_EINVAL;
}

/* What the records say about each lock, recounted in one pass. */
typedef struct recount {
    int granted[2], waiting[2], holders, sessions_holding, exclusive, positions;
} recount;

static int recount_all(const advlock_fake_db *db, recount *rc, char *why, size_t size)
{
    for (int i = 0; i < db->locks_used_; i++)
        rc[i] = (recount){{0, 0}, {0, 0}, 0, 0, 0, 0};
    for (int i = 0; i < db->holds_used_; i++) {
        const advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ < 0)
            continue;
        recount *c = &rc[h->lock_];
        int64_t key = db->locks_[h->lock_].key_;
        if (!db->locks_[h->lock_].in_use_)
            return fail(why, size, "a hold record on a free lock object", key);
        if (db->sessions_[h->session_].pid_ == 0)
            return fail(why, size, "a closed session holds a lock", key);
        c->holders++;
        int any = 0;
        for (int mode = 0; mode < 2; mode++) {
            if (h->count_[mode][0] < 0 || h->count_[mode][1] < 0)
                return fail(why, size, "negative hold count", key);
            if (advlock_lt_hold_total(h, mode) > 0) {
                c->granted[mode]++;
                any = 1;
            }
        }
        c->sessions_holding += any;
        c->exclusive += advlock_lt_hold_total(h, ADVLOCK_FAKE_EXCLUSIVE) > 0;
    }
    for (int i = 0; i < db->sessions_used_; i++) {
        const advlock_fake_session_ *s = &db->sessions_[i];
        if (s->pid_ != 0 && s->wait_ == WAIT_QUEUED) {
            rc[s->wait_lock_].waiting[s->wait_mode_]++;
            rc[s->wait_lock_].positions += s->wait_pos_;
        }
    }
    return 0;
}

static int check_counts(const advlock_fake_db *db, int lock, const recount *c, char *why,
                        size_t size)
{
    const advlock_fake_lock_ *l = &db->locks_[lock];
    int nwait = c->waiting[0] + c->waiting[1];
    if (c->granted[0] != l->granted_[0] || c->granted[1] != l->granted_[1])
        return fail(why, size, "granted counts disagree with hold records", l->key_);
    if (c->waiting[0] != l->waiting_[0] || c->waiting[1] != l->waiting_[1])
        return fail(why, size, "waiting counts disagree with the queue", l->key_);
    if (c->holders != l->holders_)
        return fail(why, size, "holder count disagrees with hold records", l->key_);
    if (c->positions != nwait * (nwait - 1) / 2)
        return fail(why, size, "queue positions are not 0..n-1", l->key_);
    if (c->exclusive > 0 && c->sessions_holding > 1)
        return fail(why, size, "an exclusive hold shares the lock with another session", l->key_);
    if (c->holders == 0 && nwait == 0)
        return fail(why, size, "a lock object with neither holders nor waiters", l->key_);
    return 0;
}

int advlock_fake_db_check(const advlock_fake_db *db, char *why, size_t size)
{
    if (db == NULL)
        return fail(why, size, "no database", 0);
    recount counts[ADVLOCK_FAKE_MAX_LOCKS];
    int rc = recount_all(db, counts, why, size);
    if (rc != 0)
        return rc;
    for (int lock = 0; lock < db->locks_used_; lock++) {
        if (!db->locks_[lock].in_use_)
            continue;
        rc = check_counts(db, lock, &counts[lock], why, size);
        /* A session still queued that ProcLockWakeup would grant now. */
        const advlock_fake_lock_ *l = &db->locks_[lock];
        if (rc == 0 && (l->waiting_[0] | l->waiting_[1]) && advlock_lt_next_grant(db, lock) >= 0)
            rc = fail(why, size, "a queued session could be granted (missed wake-up)", l->key_);
        if (rc != 0)
            return rc;
    }
    if (why != NULL && size > 0)
        why[0] = '\0';
    return 0;
}
