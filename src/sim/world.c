/*
 * The world the clients live in: empirical distributions (drawn with
 * integers only), when each client's process starts and reaches its first
 * statement, each statement's time at the server behind the server's queue,
 * and what the held command adds to a hold. Without a model the driver keeps
 * its old world: every client at once, the configuration's latency.
 */
#include "sim.h"

#include <string.h>

/* Quantiles are drawn in millionths of a segment. */
enum { SEGMENT_STEPS = 1000000 };

int advlock_sim_dist_check(const advlock_sim_dist *d)
{
    if (d == NULL || d->count > ADVLOCK_SIM_DIST_POINTS)
        return ADVLOCK_EINVAL;
    for (uint32_t i = 0; i < d->count; i++)
        if (d->us[i] < 0 || d->us[i] > ADVLOCK_SIM_DIST_MAX_US
            || (i > 0 && d->us[i] < d->us[i - 1]))
            return ADVLOCK_EINVAL;
    return 0;
}

int64_t advlock_sim_dist_draw(const advlock_sim_dist *d, advlock_prng *p)
{
    if (d == NULL || p == NULL)
        return 0;
    uint64_t segments = d->count > 1 ? d->count - 1 : 1;
    uint64_t u = advlock_prng_below(p, segments * SEGMENT_STEPS);
    if (d->count == 0)
        return 0;
    if (d->count == 1)
        return d->us[0];
    uint64_t i = u / SEGMENT_STEPS, frac = u % SEGMENT_STEPS;
    /* At most an hour (3.6e9 us) times a million: far inside int64. */
    return d->us[i] + (d->us[i + 1] - d->us[i]) * (int64_t)frac / SEGMENT_STEPS;
}

int advlock_sim_set_model(advlock_sim *handle, const advlock_sim_model *m)
{
    if (handle == NULL || m == NULL || advlock_sim_dist_check(&m->launch) != 0
        || advlock_sim_dist_check(&m->startup) != 0 || advlock_sim_dist_check(&m->statement) != 0
        || advlock_sim_dist_check(&m->wakeup) != 0 || advlock_sim_dist_check(&m->command) != 0
        || m->servers > ADVLOCK_SIM_MAX_CLIENTS)
        return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    if (sim->ran_)
        return ADVLOCK_EMISUSE;
    sim->model_ = *m;
    sim->modelled_ = 1;
    return 0;
}

int64_t advlock_sim_client_launched(const advlock_sim *handle, int client)
{
    if (handle == NULL)
        return ADVLOCK_EINVAL;
    const sim_world *sim = sim_world_of_const(handle);
    if (client < 0 || client >= sim->nclients_)
        return ADVLOCK_EINVAL;
    return sim->clients_[client].launched_ms_;
}

int advlock_sim_launch_clients(sim_world *sim)
{
    for (int c = 0; c < sim->nclients_; c++) {
        sim_client *cl = &sim->clients_[c];
        int64_t launch = 0, startup = 0;
        if (sim->modelled_) {
            launch = advlock_sim_dist_draw(&sim->model_.launch, &sim->prng_) / 1000;
            startup = advlock_sim_dist_draw(&sim->model_.startup, &sim->prng_) / 1000;
        }
        cl->launched_ms_ = sim->now_ms_ + launch;
        int rc = advlock_sim_must_schedule(sim, cl->launched_ms_ + startup, EV_STEP, c, 0, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The server slot free first (the lowest index among equals). */
static int first_free_slot(const sim_world *sim)
{
    int best = 0;
    for (uint32_t s = 1; s < sim->model_.servers; s++)
        if (sim->server_free_us_[s] < sim->server_free_us_[best])
            best = (int)s;
    return best;
}

void advlock_sim_statement_times(sim_world *sim, int64_t *arrive_ms, int64_t *deliver_ms)
{
    if (!sim->modelled_) {
        int64_t rtt = advlock_sim_draw_latency(&sim->prng_, &sim->config_.latency);
        *arrive_ms = sim->now_ms_ + rtt / 2;
        *deliver_ms = *arrive_ms + (rtt - rtt / 2);
        return;
    }
    int64_t took = advlock_sim_dist_draw(&sim->model_.statement, &sim->prng_);
    int64_t start = sim->now_ms_ * 1000;
    if (sim->model_.servers > 0) {
        int slot = first_free_slot(sim);
        if (sim->server_free_us_[slot] > start)
            start = sim->server_free_us_[slot];
        sim->server_free_us_[slot] = start + took;
    }
    *arrive_ms = (start + took / 2) / 1000;
    *deliver_ms = (start + took) / 1000;
}

int64_t advlock_sim_cancel_rtt(sim_world *sim)
{
    if (!sim->modelled_)
        return advlock_sim_draw_latency(&sim->prng_, &sim->config_.latency);
    return advlock_sim_dist_draw(&sim->model_.statement, &sim->prng_) / 1000;
}

static int64_t greatest(const advlock_sim_dist *d)
{
    return d->count > 0 ? d->us[d->count - 1] : 0;
}

int64_t advlock_sim_rtt_bound(const sim_world *sim)
{
    if (!sim->modelled_)
        return advlock_sim_latency_bound(&sim->config_.latency);
    int64_t most = greatest(&sim->model_.statement);
    /* Queued behind every other client's statement, shared among the slots;
     * and the timer that sent it may have fired late. */
    int64_t servers = sim->model_.servers > 0 ? sim->model_.servers : 1;
    int64_t queue = sim->model_.servers > 0 ? (sim->nclients_ * most + servers - 1) / servers : 0;
    return (most + queue + greatest(&sim->model_.wakeup)) / 1000 + 1;
}

int64_t advlock_sim_wakeup_ms(sim_world *sim)
{
    if (!sim->modelled_)
        return 0;
    return advlock_sim_dist_draw(&sim->model_.wakeup, &sim->prng_) / 1000;
}

int64_t advlock_sim_command_ms(sim_world *sim)
{
    if (!sim->modelled_)
        return 0;
    return (advlock_sim_dist_draw(&sim->model_.command, &sim->prng_) + 500) / 1000;
}
