/*
 * Wait queues: one per lock, in the order PostgreSQL serves them. A queued
 * session keeps its place (wait_pos_, 0 = first) until it is granted,
 * cancelled, deadlocked or disconnected. Bookkeeping only: who may be
 * granted is the lock table's decision (lock_table.c).
 */
#include "fake.h"

int advlock_lt_queue_order(const advlock_fake_db *db, int lock,
                           int order[ADVLOCK_FAKE_MAX_SESSIONS])
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

void advlock_lt_enqueue(advlock_fake_db *db, int slot, int lock, int mode, int scope, int pos)
{
    for (int i = 0; i < db->sessions_used_; i++) {
        advlock_fake_session_ *s = &db->sessions_[i];
        if (s->wait_ == WAIT_QUEUED && s->wait_lock_ == lock && s->wait_pos_ >= pos)
            s->wait_pos_++;
    }
    advlock_fake_session_ *s = &db->sessions_[slot];
    s->wait_ = WAIT_QUEUED;
    s->wait_lock_ = lock;
    s->wait_mode_ = mode;
    s->wait_scope_ = scope;
    s->wait_pos_ = pos;
    db->locks_[lock].waiting_[mode]++;
}

void advlock_lt_dequeue(advlock_fake_db *db, int slot)
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
