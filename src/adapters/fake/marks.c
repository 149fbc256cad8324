/*
 * Lock-delay's table advlock.mark (docs/design.md, "Lock-delay"): one row
 * per key, the token of the holder that wrote it and that holder's stop
 * bound. The rows belong to the database, not to a session: ending a
 * session, or every session as a server restart does, leaves them, as
 * PostgreSQL keeps a committed row (each statement commits durably before
 * it answers).
 */
#include "fake.h"

/* The key's row, or -1. */
static int mark_of(const advlock_fake_db *db, int64_t key)
{
    for (int i = 0; i < db->marks_used_; i++)
        if (db->mark_keys_[i] == key)
            return i;
    return -1;
}

/* INSERT ... ON CONFLICT (key) DO UPDATE: 1 when written, 0 when the
 * table is full (the fake's bound, never PostgreSQL's). */
static int upsert(advlock_fake_db *db, int64_t key, int64_t token, int64_t stop_ms)
{
    int i = mark_of(db, key);
    if (i < 0) {
        if (db->marks_used_ == ADVLOCK_FAKE_MAX_LOCKS)
            return 0;
        i = db->marks_used_++;
        db->mark_keys_[i] = key;
    }
    db->mark_tokens_[i] = token;
    db->mark_stops_[i] = stop_ms;
    return 1;
}

/* The rows stay packed: the last takes the deleted one's place. */
static void delete_mark(advlock_fake_db *db, int i)
{
    int last = --db->marks_used_;
    db->mark_keys_[i] = db->mark_keys_[last];
    db->mark_tokens_[i] = db->mark_tokens_[last];
    db->mark_stops_[i] = db->mark_stops_[last];
}

void advlock_fake_run_mark(advlock_fake_db *db, enum stmt_kind kind, const int64_t params[3],
                           advlock_fake_result *out)
{
    int64_t key = params[0], token = params[1], stop_ms = params[2];
    if (db->in_recovery_) {
        advlock_fake_result_error(out, "25006",
                                  kind == ST_MARK_CLEAR
                                      ? "cannot execute DELETE in a read-only transaction"
                                      : "cannot execute INSERT in a read-only transaction");
        return;
    }
    int i = mark_of(db, key);
    int64_t row[3] = {0, 0, 0};
    if (kind == ST_MARK_CLEAR) {
        if (i >= 0 && db->mark_tokens_[i] == token) {
            delete_mark(db, i);
            row[2] = 1;
        }
    } else if (kind == ST_MARK_TAKE && i >= 0 && db->mark_tokens_[i] != token) {
        /* another holder's mark: read, left as it is */
        row[0] = db->mark_tokens_[i];
        row[1] = db->mark_stops_[i];
    } else if (!upsert(db, key, token, stop_ms)) {
        advlock_fake_result_error(out, "53100", "could not extend file: No space left on device");
        return;
    } else {
        row[2] = 1;
    }
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_SETTINGS);
    for (int k = 0; k < 3; k++)
        out->settings[k] = row[k];
}
