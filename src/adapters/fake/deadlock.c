/*
 * Deadlock detection over the wait-for graph: a queued session waits for
 * every other session holding a conflicting mode on its lock (hard edges)
 * and for every session queued ahead of it with a conflicting request (soft
 * edges). PostgreSQL's DeadLockCheck may reorder a queue to dissolve a
 * cycle made only of soft edges; this model reports every cycle.
 */
#include "fake.h"

static int waits_for(const advlock_fake_db *db, int a, int b)
{
    const advlock_fake_session_ *sa = &db->sessions_[a];
    const advlock_fake_session_ *sb = &db->sessions_[b];
    if (a == b || sb->pid_ == 0 || sa->wait_ != WAIT_QUEUED)
        return 0;
    int want = advlock_lt_conflicts(sa->wait_mode_);
    if (advlock_lt_held_mask(db, b, sa->wait_lock_) & want)
        return 1;
    return sb->wait_ == WAIT_QUEUED && sb->wait_lock_ == sa->wait_lock_
           && sb->wait_pos_ < sa->wait_pos_ && (want & advlock_lt_mode_bit(sb->wait_mode_));
}

int advlock_lt_in_deadlock(const advlock_fake_db *db, int slot)
{
    if (db->sessions_[slot].wait_ != WAIT_QUEUED)
        return 0;
    unsigned char seen[ADVLOCK_FAKE_MAX_SESSIONS] = {0};
    int stack[ADVLOCK_FAKE_MAX_SESSIONS];
    int depth = 0;
    stack[depth++] = slot;
    seen[slot] = 1;
    while (depth > 0) {
        int a = stack[--depth];
        for (int b = 0; b < db->sessions_used_; b++) {
            if (!waits_for(db, a, b))
                continue;
            if (b == slot)
                return 1;
            if (!seen[b]) {
                seen[b] = 1;
                stack[depth++] = b;
            }
        }
    }
    return 0;
}
