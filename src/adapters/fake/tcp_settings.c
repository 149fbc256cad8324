/*
 * A session's TCP settings and the lease's rows: what SET and SHOW of
 * tcp_user_timeout, tcp_keepalives_* and client_connection_check_interval
 * do on PostgreSQL over Linux. The fake keeps the values only; when a
 * silent client's session ends is its caller's model of the server's
 * kernel (the simulator reads the values back).
 */
#include "fake.h"

#include <string.h>

/* What SHOW reads before any SET: 0 on a Unix socket, the kernel's
 * keepalive defaults over TCP. */
void advlock_fake_tcp_defaults(int transport, advlock_fake_tcp *out)
{
    memset(out, 0, sizeof *out);
    if (transport == ADVLOCK_FAKE_TCP) {
        out->keepalives_idle_s = 7200;
        out->keepalives_interval_s = 75;
        out->keepalives_count = 9;
    }
}

/* The lease's setup: every setting at once, for the rest of the session.
 * The server takes a value for a Unix socket too, and reads it back as 0. */
void advlock_fake_run_lease_setup(advlock_fake_session_ *s, int64_t user_timeout_ms,
                                  advlock_fake_result *out)
{
    s->tcp_.check_interval_ms = 1000;
    if (s->transport_ != ADVLOCK_FAKE_TCP) {
        advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_NULL);
        return;
    }
    s->tcp_.user_timeout_ms = (int32_t)user_timeout_ms;
    s->tcp_.keepalives_idle_s = (int32_t)(user_timeout_ms / 1000 - 2);
    s->tcp_.keepalives_interval_s = 1;
    s->tcp_.keepalives_count = 2;
    advlock_fake_result_row(out, ADVLOCK_FAKE_ROW_TRUE);
}

/* A heartbeat compares the setting SHOW reads with the plan's; a Unix
 * socket, which needs none, always passes. */
void advlock_fake_run_heartbeat(const advlock_fake_session_ *s, int64_t user_timeout_ms,
                                advlock_fake_result *out)
{
    int ok = s->transport_ != ADVLOCK_FAKE_TCP || s->tcp_.user_timeout_ms == user_timeout_ms;
    advlock_fake_result_row(out, ok ? ADVLOCK_FAKE_ROW_TRUE : ADVLOCK_FAKE_ROW_FALSE);
}

int advlock_fake_db_set_transport(advlock_fake_db *db, int pid, advlock_fake_transport t)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0 || (t != ADVLOCK_FAKE_UNIX_SOCKET && t != ADVLOCK_FAKE_TCP))
        return ADVLOCK_EINVAL;
    advlock_fake_session_ *s = &db->sessions_[slot];
    s->transport_ = (int)t;
    advlock_fake_tcp_defaults(s->transport_, &s->tcp_);
    s->tcp_at_begin_ = s->tcp_;
    return 0;
}

int advlock_fake_db_tcp_settings(const advlock_fake_db *db, int pid, advlock_fake_tcp *out)
{
    int slot = advlock_fake_db_slot(db, pid);
    if (slot < 0 || out == NULL)
        return ADVLOCK_EINVAL;
    *out = db->sessions_[slot].tcp_;
    return 0;
}
