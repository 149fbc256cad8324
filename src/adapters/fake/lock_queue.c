/*
 * Wait queues: one per lock, in the order PostgreSQL serves them. A queued
 * session keeps its place (wait_pos_, 0 = first) until it is granted,
 * cancelled, deadlocked or disconnected.
 */
#include "fake.h"

int lt_queue_order(const advlock_fake_db *db, int lock, int order[ADVLOCK_FAKE_MAX_SESSIONS])
{
    int n = 0;
    for (int i = 0; i < db->sessions_used_; i++) {
        const advlock_fake_session_ *s = &db->sessions_[i];
        if (s->pid_ != 0 && s->wait_ == WAIT_QUEUED && s->wait_lock_ == lock) {
            order[s->wait_pos_] = i;
            n++;
        }
    }
    return n;
}

static void dequeue(advlock_fake_db *db, int slot)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    for (int i = 0; i < db->sessions_used_; i++) {
        advlock_fake_session_ *o = &db->sessions_[i];
        if (o->wait_ == WAIT_QUEUED && o->wait_lock_ == s->wait_lock_
            && o->wait_pos_ > s->wait_pos_)
            o->wait_pos_--;
    }
    db->locks_[s->wait_lock_].waiting_[s->wait_mode_]--;
    s->wait_ = WAIT_NONE;
}

/* ProcLockWakeup: walk the queue in order, granting each waiter that
 * conflicts neither with what is held nor with an earlier waiter still
 * queued. Granted statements finish afterwards, outside the walk, because
 * finishing one outside a transaction block releases its transaction-level
 * hold and wakes this queue again. */
void lt_wake(advlock_fake_db *db, int lock)
{
    int order[ADVLOCK_FAKE_MAX_SESSIONS] = {0};
    int granted[ADVLOCK_FAKE_MAX_SESSIONS] = {0};
    int n = lt_queue_order(db, lock, order);
    int ngranted = 0;
    int ahead = 0;
    for (int i = 0; i < n; i++) {
        int slot = order[i];
        advlock_fake_session_ *s = &db->sessions_[slot];
        int mode = s->wait_mode_;
        if (!(lt_conflicts(mode) & ahead) && !lt_others_conflict(db, slot, lock, mode)) {
            int hold = lt_find_hold(db, slot, lock);
            dequeue(db, slot);
            advlock_fake_hold_ *h = &db->holds_[hold];
            if (lt_hold_total(h, mode) == 0)
                db->locks_[lock].granted_[mode]++;
            h->count_[mode][s->wait_scope_]++;
            granted[ngranted++] = slot;
        } else {
            ahead |= lt_mode_bit(mode);
        }
    }
    for (int i = 0; i < ngranted; i++)
        db_wait_ended(db, granted[i], WAIT_GRANTED);
}

/* RemoveFromWaitQueue, then the wake-up pass CleanUpLock makes after it. */
void lt_leave_queue(advlock_fake_db *db, int slot)
{
    advlock_fake_session_ *s = &db->sessions_[slot];
    if (s->wait_ != WAIT_QUEUED)
        return;
    int lock = s->wait_lock_;
    dequeue(db, slot);
    int hold = lt_find_hold(db, slot, lock);
    if (hold >= 0) {
        advlock_fake_hold_ *h = &db->holds_[hold];
        if (lt_hold_total(h, 0) + lt_hold_total(h, 1) == 0) {
            h->session_ = -1;
            db->locks_[lock].holders_--;
        }
    }
    lt_wake(db, lock);
    lt_free_lock_if_unused(db, lock);
}
