/*
 * PostgreSQL's lock manager, for advisory locks: lock objects (LOCK, one
 * per key in use), hold records (PROCLOCK, one per session and key, counting
 * holds per mode and level), grants and releases. Names in comments refer
 * to src/backend/storage/lmgr/lock.c, whose decisions this file follows.
 */
#include "fake.h"

int advlock_lt_mode_bit(int mode)
{
    return mode == ADVLOCK_FAKE_EXCLUSIVE ? MODE_BIT_EXCLUSIVE : MODE_BIT_SHARED;
}

/* ExclusiveLock conflicts with ShareLock and ExclusiveLock; ShareLock only
 * with ExclusiveLock (and with modes advisory locks never use). */
int advlock_lt_conflicts(int mode)
{
    return mode == ADVLOCK_FAKE_EXCLUSIVE ? MODE_BIT_EXCLUSIVE | MODE_BIT_SHARED
                                          : MODE_BIT_EXCLUSIVE;
}

int advlock_lt_find_lock(const advlock_fake_db *db, int64_t key)
{
    for (int i = 0; i < db->locks_used_; i++)
        if (db->locks_[i].in_use_ && db->locks_[i].key_ == key)
            return i;
    return -1;
}

static int lock_for(advlock_fake_db *db, int64_t key)
{
    int found = advlock_lt_find_lock(db, key);
    if (found >= 0)
        return found;
    int i = 0;
    while (i < db->locks_used_ && db->locks_[i].in_use_)
        i++;
    if (i == ADVLOCK_FAKE_MAX_LOCKS)
        return -1;
    if (i == db->locks_used_)
        db->locks_used_++;
    db->locks_[i] = (advlock_fake_lock_){.key_ = key, .in_use_ = 1};
    return i;
}

static void free_lock_if_unused(advlock_fake_db *db, int lock)
{
    advlock_fake_lock_ *l = &db->locks_[lock];
    if (l->holders_ == 0 && l->waiting_[0] == 0 && l->waiting_[1] == 0)
        l->in_use_ = 0;
}

int advlock_lt_find_hold(const advlock_fake_db *db, int slot, int lock)
{
    for (int i = 0; i < db->holds_used_; i++)
        if (db->holds_[i].session_ == slot && db->holds_[i].lock_ == lock)
            return i;
    return -1;
}

/* The session's hold record on the lock, created empty if missing, as
 * SetupLockInTable does before deciding anything; -1 when the table is full. */
static int hold_for(advlock_fake_db *db, int slot, int lock)
{
    int found = advlock_lt_find_hold(db, slot, lock);
    if (found >= 0)
        return found;
    int i = 0;
    while (i < db->holds_used_ && db->holds_[i].session_ >= 0)
        i++;
    if (i == ADVLOCK_FAKE_MAX_HOLDS)
        return -1;
    if (i == db->holds_used_)
        db->holds_used_++;
    db->holds_[i] = (advlock_fake_hold_){.session_ = slot, .lock_ = lock};
    db->locks_[lock].holders_++;
    return i;
}

int advlock_lt_hold_total(const advlock_fake_hold_ *h, int mode)
{
    return h->count_[mode][SCOPE_SESSION] + h->count_[mode][SCOPE_XACT];
}

/* Frees an empty hold record unless the session is queued on its lock (a
 * waiting session keeps its PROCLOCK). */
static void free_hold_if_empty(advlock_fake_db *db, int hold)
{
    advlock_fake_hold_ *h = &db->holds_[hold];
    if (advlock_lt_hold_total(h, 0) + advlock_lt_hold_total(h, 1) > 0)
        return;
    const advlock_fake_session_ *s = &db->sessions_[h->session_];
    if (s->wait_ == WAIT_QUEUED && s->wait_lock_ == h->lock_)
        return;
    int lock = h->lock_;
    h->session_ = -1;
    db->locks_[lock].holders_--;
    free_lock_if_unused(db, lock);
}

int advlock_lt_held_mask(const advlock_fake_db *db, int slot, int lock)
{
    int h = advlock_lt_find_hold(db, slot, lock);
    if (h < 0)
        return 0;
    int mask = 0;
    for (int mode = 0; mode < 2; mode++)
        if (advlock_lt_hold_total(&db->holds_[h], mode) > 0)
            mask |= advlock_lt_mode_bit(mode);
    return mask;
}

/* Does a request by slot in mode conflict with what other sessions hold?
 * LockCheckConflicts: a session never conflicts with itself, so its own
 * grant of a mode is taken out of that mode's count. */
static int others_conflict(const advlock_fake_db *db, int slot, int lock, int mode)
{
    int mine = advlock_lt_held_mask(db, slot, lock);
    const advlock_fake_lock_ *l = &db->locks_[lock];
    for (int other = 0; other < 2; other++) {
        if (!(advlock_lt_conflicts(mode) & advlock_lt_mode_bit(other)))
            continue;
        int others = l->granted_[other] - ((mine & advlock_lt_mode_bit(other)) ? 1 : 0);
        if (others > 0)
            return 1;
    }
    return 0;
}

static int wait_mask(const advlock_fake_db *db, int lock)
{
    const advlock_fake_lock_ *l = &db->locks_[lock];
    return (l->waiting_[0] > 0 ? advlock_lt_mode_bit(0) : 0)
           | (l->waiting_[1] > 0 ? advlock_lt_mode_bit(1) : 0);
}

/* GrantLock + GrantLockLocal on an existing hold record. */
static void grant(advlock_fake_db *db, int hold, int mode, int scope)
{
    advlock_fake_hold_ *h = &db->holds_[hold];
    if (advlock_lt_hold_total(h, mode) == 0)
        db->locks_[h->lock_].granted_[mode]++;
    h->count_[mode][scope]++;
}

/* Where ProcSleep queues a session that already holds something on the lock:
 * ahead of the first waiter that must wait for it. Returns LT_GRANTED when
 * nothing ahead of that point conflicts, LT_DEADLOCK when that waiter also
 * holds what the session waits for, else LT_QUEUED with *pos set. */
static enum advlock_lt_outcome place_in_queue(const advlock_fake_db *db, int slot, int lock,
                                              int mode, int *pos)
{
    int order[ADVLOCK_FAKE_MAX_SESSIONS];
    int n = advlock_lt_queue_order(db, lock, order);
    *pos = n;
    int mine = advlock_lt_held_mask(db, slot, lock);
    if (mine == 0)
        return LT_QUEUED;
    int ahead = 0;
    for (int i = 0; i < n; i++) {
        const advlock_fake_session_ *p = &db->sessions_[order[i]];
        if (advlock_lt_conflicts(p->wait_mode_) & mine) {
            if (advlock_lt_conflicts(mode) & advlock_lt_held_mask(db, order[i], lock))
                return LT_DEADLOCK;
            if (!(advlock_lt_conflicts(mode) & ahead) && !others_conflict(db, slot, lock, mode))
                return LT_GRANTED;
            *pos = i;
            return LT_QUEUED;
        }
        ahead |= advlock_lt_mode_bit(p->wait_mode_);
    }
    return LT_QUEUED;
}

enum advlock_lt_outcome advlock_lt_request(advlock_fake_db *db, int slot, int64_t key, int mode,
                                           int scope, int wait)
{
    int lock = lock_for(db, key);
    if (lock < 0)
        return LT_FULL;
    /* The local lock table: a mode this session already holds is granted
     * again without looking at anyone else. */
    int existing = advlock_lt_find_hold(db, slot, lock);
    if (existing >= 0 && advlock_lt_hold_total(&db->holds_[existing], mode) > 0) {
        db->holds_[existing].count_[mode][scope]++;
        return LT_GRANTED;
    }
    int hold = hold_for(db, slot, lock);
    if (hold < 0) {
        free_lock_if_unused(db, lock);
        return LT_FULL;
    }
    /* A request that conflicts with a waiter's request queues behind it,
     * even if the lock itself is free: no barging past waiters. */
    if (!(advlock_lt_conflicts(mode) & wait_mask(db, lock))
        && !others_conflict(db, slot, lock, mode)) {
        grant(db, hold, mode, scope);
        return LT_GRANTED;
    }
    int pos;
    if (!wait) {
        /* PostgreSQL 17 sends a try-lock through the queue's placement as a
         * waiting request (JoinWaitQueue with dontWait), which may grant it
         * at once; anything else, a deadlock found early too, is busy.
         * Before 17 it was busy as soon as it conflicted with a waiter. */
        if (db->server_version_ >= 170000
            && place_in_queue(db, slot, lock, mode, &pos) == LT_GRANTED) {
            grant(db, hold, mode, scope);
            return LT_GRANTED;
        }
        free_hold_if_empty(db, hold);
        return LT_BUSY;
    }
    enum advlock_lt_outcome placed = place_in_queue(db, slot, lock, mode, &pos);
    if (placed == LT_GRANTED)
        grant(db, hold, mode, scope);
    else if (placed == LT_QUEUED)
        advlock_lt_enqueue(db, slot, lock, mode, scope, pos);
    return placed;
}

/* ProcLockWakeup: walk the queue in order, granting each waiter that
 * conflicts neither with what is held nor with an earlier waiter still
 * queued (advlock_lt_next_grant, again after each grant). A granted session's statement is only
 * marked (finish_): the database finishes it after the call that led here (db.c), because finishing
 * one outside a transaction block releases its transaction-level hold and wakes this queue again.
 */
int advlock_lt_next_grant(const advlock_fake_db *db, int lock)
{
    int order[ADVLOCK_FAKE_MAX_SESSIONS];
    int n = advlock_lt_queue_order(db, lock, order);
    int ahead = 0;
    for (int i = 0; i < n; i++) {
        int mode = db->sessions_[order[i]].wait_mode_;
        if (!(advlock_lt_conflicts(mode) & ahead) && !others_conflict(db, order[i], lock, mode))
            return order[i];
        ahead |= advlock_lt_mode_bit(mode);
    }
    return -1;
}

static void wake_waiters(advlock_fake_db *db, int lock)
{
    for (int slot; (slot = advlock_lt_next_grant(db, lock)) >= 0;) {
        advlock_fake_session_ *s = &db->sessions_[slot];
        int hold = advlock_lt_find_hold(db, slot, lock);
        advlock_lt_dequeue(db, slot);
        grant(db, hold, s->wait_mode_, s->wait_scope_);
        s->wait_ = WAIT_ENDED;
        s->wait_result_ = WAIT_GRANTED;
        s->finish_ = 1;
    }
}

/* RemoveFromWaitQueue, then the wake-up pass CleanUpLock makes after it. */
void advlock_lt_leave_queue(advlock_fake_db *db, int slot)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ != WAIT_QUEUED)
        return;
    int lock = s->wait_lock_;
    advlock_lt_dequeue(db, slot);
    int hold = advlock_lt_find_hold(db, slot, lock);
    if (hold >= 0) {
        advlock_fake_hold_ *h = &db->holds_[hold];
        if (advlock_lt_hold_total(h, 0) + advlock_lt_hold_total(h, 1) == 0) {
            h->session_ = -1;
            db->locks_[lock].holders_--;
        }
    }
    wake_waiters(db, lock);
    free_lock_if_unused(db, lock);
}

/* Takes one level's holds of one mode away; reports whether a waiter may
 * now be grantable (UnGrantLock's wakeupNeeded). */
static int ungrant(advlock_fake_db *db, int hold, int mode, int scope, int count)
{
    advlock_fake_hold_ *h = &db->holds_[hold];
    h->count_[mode][scope] -= count;
    if (advlock_lt_hold_total(h, mode) > 0 || count == 0)
        return 0;
    db->locks_[h->lock_].granted_[mode]--;
    return (advlock_lt_conflicts(mode) & wait_mask(db, h->lock_)) != 0;
}

int advlock_lt_release(advlock_fake_db *db, int slot, int64_t key, int mode, int scope)
{
    int lock = advlock_lt_find_lock(db, key);
    int hold = lock < 0 ? -1 : advlock_lt_find_hold(db, slot, lock);
    if (hold < 0 || db->holds_[hold].count_[mode][scope] == 0)
        return 0;
    int wake = ungrant(db, hold, mode, scope, 1);
    free_hold_if_empty(db, hold);
    if (wake)
        wake_waiters(db, lock);
    return 1;
}

/* LockReleaseAll / LockReleaseSession: per lock, every mode at once, then
 * one wake-up pass. */
void advlock_lt_release_level(advlock_fake_db *db, int slot, int scope)
{
    for (int i = 0; i < db->holds_used_; i++) {
        advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ != slot)
            continue;
        int lock = h->lock_;
        int wake = 0;
        for (int mode = 0; mode < 2; mode++)
            wake |= ungrant(db, i, mode, scope, h->count_[mode][scope]);
        free_hold_if_empty(db, i);
        if (wake)
            wake_waiters(db, lock);
    }
}
