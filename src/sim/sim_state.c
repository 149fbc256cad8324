/*
 * The run's bookkeeping every part of the driver shares: violations, the
 * scheduling that must not fail, the keys in play, each client's clock, the
 * driver's sessions on the fake database (kept by pid, for the server's side
 * and the invariants), and what a client forgets when its session is gone.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

int advlock_sim_record_violation(sim_world *sim, int client, const char *what)
{
    int n = snprintf(sim->violation_, sizeof sim->violation_,
                     "seed %llu: t=%lld ms, client %d: ", (unsigned long long)sim->config_.seed,
                     (long long)sim->now_ms_, client);
    advlock_fake_copy(sim->violation_ + n, sizeof sim->violation_ - (size_t)n, what);
    return ADVLOCK_SIM_VIOLATION;
}

int advlock_sim_must_schedule(sim_world *sim, int64_t at_ms, enum advlock_sim_event_kind kind,
                              int client, uint64_t serial, int64_t arg)
{
    if (advlock_sim_schedule(sim, at_ms, kind, client, serial, arg) != 0)
        return advlock_sim_record_violation(sim, client, "event queue full");
    return 0;
}

int advlock_sim_key_index(const sim_world *sim, int64_t key)
{
    for (int i = 0; i < sim->nkeys_; i++)
        if (sim->keys_[i] == key)
            return i;
    return -1;
}

int64_t advlock_sim_reading(sim_world *sim, sim_client *cl)
{
    advlock_fake_clock_advance_to(&cl->clock_, sim->now_ms_);
    return advlock_fake_clock_read(&cl->clock_);
}

void advlock_sim_forget_holds(sim_client *cl)
{
    memset(cl->belief_, 0, sizeof cl->belief_);
    memset(cl->client_view_, 0, sizeof cl->client_view_);
    memset(cl->server_view_, 0, sizeof cl->server_view_);
    cl->server_in_block_ = cl->client_in_block_ = 0;
    cl->txn_end_in_flight_ = 0;
    cl->unsure_ = 0;
}

const sim_session *advlock_sim_session_const(const sim_world *sim, int pid)
{
    int lo = 0, hi = sim->nsessions_;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sim->sessions_[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sim->nsessions_ && sim->sessions_[lo].pid == pid ? &sim->sessions_[lo] : NULL;
}

sim_session *advlock_sim_session(sim_world *sim, int pid)
{
    return (sim_session *)advlock_sim_session_const(sim, pid);
}

/* The client's connection reaches a new server session: its engine is set
 * up on it (the first) or told of the reset, with a fresh token, the
 * session announced by its pid or, behind a proxy, a number of the
 * proxy's own. */
static int engine_on_session(sim_world *sim, sim_client *cl, int first)
{
    enum { PROXY_PIDS = 1000000 };
    int announced =
        sim->config_.sessions == ADVLOCK_SIM_SESSIONS_PROXIED ? cl->pid_ + PROXY_PIDS : cl->pid_;
    uint64_t token = advlock_prng_next(&sim->prng_) | 1;
    int rc =
        first ? advlock_conn_init(&cl->engine_, cl->slots_, SIM_SLOTS, &cl->bucket_, 1, announced,
                                  token, ADVLOCK_CAPS_CANCEL | ADVLOCK_CAPS_ONE_MEMBER)
              : advlock_conn_on_reset(&cl->engine_, announced, token, advlock_sim_reading(sim, cl));
    if (rc == 0)
        advlock_sim_policy_new_session(cl);
    return rc;
}

int advlock_sim_open_session(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int pid, first = cl->pid_ == 0;
    if (advlock_fake_db_connect(&sim->db_, &pid) != 0)
        return advlock_sim_record_violation(sim, c, "the fake database has no free session slot");
    /* The fake hands out ever larger pids: appending keeps the order. */
    sim->sessions_[sim->nsessions_++] = (sim_session){pid, c, 0};
    cl->pid_ = pid;
    cl->session_ = SESSION_OPEN;
    cl->client_in_block_ = 0;
    if (engine_on_session(sim, cl, first) != 0)
        return advlock_sim_record_violation(sim, c, "the engine refused a new session");
    return 0;
}

void advlock_sim_close_session(sim_world *sim, int pid)
{
    sim_session *s = advlock_sim_session(sim, pid);
    if (s == NULL)
        return;
    size_t after = (size_t)(sim->sessions_ + sim->nsessions_ - (s + 1));
    memmove(s, s + 1, after * sizeof *s);
    sim->nsessions_--;
    advlock_fake_db_close(&sim->db_, pid);
}

void advlock_sim_begin_busy(sim_world *sim, sim_client *cl)
{
    cl->busy_ = 1;
    cl->op_serial_++;
    cl->started_ms_ = sim->now_ms_;
    cl->started_reading_ = advlock_sim_reading(sim, cl);
    cl->jumped_at_start_ = cl->clock_.jumped_ms_;
    cl->cancel_sent_ = 0;
    cl->result_sqlstate_[0] = '\0';
    cl->result_message_[0] = '\0';
    cl->failure_message_[0] = '\0';
}
