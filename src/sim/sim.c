/*
 * The simulation driver: clients, their sessions and options, and the event
 * loop that runs them one event at a time in (virtual time, sequence) order,
 * checking the invariants after each. A driver is to the core what a real
 * event loop is; the parts that act for the client (sim_ops.c), for the
 * server (sim_server.c) and for the plans (sim_steps.c) live apart.
 */
#include "sim.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A run that takes this many events without ending is stuck in a loop. */
static const uint64_t MAX_EVENTS = 50000000;

void advlock_sim_config_default(advlock_sim_config *cfg)
{
    if (cfg == NULL)
        return;
    *cfg = (advlock_sim_config){.seed = 1, .max_virtual_ms = INT64_C(24) * 3600 * 1000};
}

static int valid_config(const advlock_sim_config *c)
{
    const advlock_fake_latency *l = &c->latency;
    const advlock_fake_faults *f = &c->faults;
    return l->min_ms >= 0 && l->max_ms >= l->min_ms && l->tail_max_ms >= 0
           && f->drop_detect_max_ms >= 0 && f->kill_within_ms >= 0 && f->stall_max_ms >= 0
           && f->jump_max_ms >= 0 && c->max_virtual_ms > 0
           && (unsigned)c->sessions <= ADVLOCK_SIM_SESSIONS_PROXIED;
}

int advlock_sim_init(advlock_sim *handle, const advlock_sim_config *config)
{
    advlock_sim_config defaults;
    advlock_sim_config_default(&defaults);
    if (handle == NULL || (config != NULL && !valid_config(config)))
        return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    /* Clients are cleared as they are added: most runs use a few of the
     * 64 slots, and campaigns set up a simulation per seed. */
    memset(sim, 0, offsetof(sim_world, db_));
    memset(&sim->nclients_, 0, sizeof *sim - offsetof(sim_world, nclients_));
    sim->config_ = config != NULL ? *config : defaults;
    advlock_prng_seed(&sim->prng_, sim->config_.seed);
    advlock_fake_db_init(&sim->db_);
    sim->now_ms_ = sim->config_.start_ms;
    advlock_fake_db_set_time(&sim->db_, sim->now_ms_);
    return 0;
}

/* ---- adding clients ----------------------------------------------------- */

/* A client's jitter seed: a function of the run's seed, its index and the
 * seed it was given (splitmix64's finaliser over their mix). */
static uint64_t derive_jitter_seed(uint64_t run_seed, int client, uint64_t given)
{
    return advlock_fake_mix64(run_seed ^ (UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(client + 1))
                              ^ ((given << 32) | (given >> 32)));
}

int advlock_sim_set_options(advlock_sim *handle, int client, const advlock_options *o)
{
    if (handle == NULL || o == NULL)
        return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    if (client < 0 || client >= sim->nclients_)
        return ADVLOCK_EINVAL;
    sim_client *cl = &sim->clients_[client];
    if (cl->busy_)
        return ADVLOCK_EMISUSE;
    advlock_options mine = *o;
    mine.jitter_seed = derive_jitter_seed(sim->config_.seed, client, o->jitter_seed);
    /* A machine judges the options now, as the libpq adapter's does; the
     * lease is the connection's (the engine's), not the member's. */
    advlock_machine judge;
    advlock_machine_init(&judge);
    int rc = advlock_set_options(&judge, &mine);
    if (rc == 0)
        rc = advlock_conn_set_lease(&cl->engine_, o->lease_ms, o->lease_stop_ms);
    if (rc != 0)
        return rc;
    mine.lease_ms = 0;
    mine.lease_stop_ms = 0;
    cl->options_ = mine;
    advlock_sim_policy_seed(cl, mine.jitter_seed);
    return 0;
}

static int add(sim_world *sim, advlock_sim_plan_fn plan, void *state)
{
    if (sim->ran_)
        return ADVLOCK_EMISUSE;
    if (sim->nclients_ == ADVLOCK_SIM_MAX_CLIENTS)
        return ADVLOCK_EINVAL;
    int c = sim->nclients_++;
    sim_client *cl = &sim->clients_[c];
    memset(cl, 0, sizeof *cl);
    cl->plan_ = plan;
    cl->plan_state_ = state;
    advlock_fake_clock_init(&cl->clock_, sim->config_.start_ms);
    advlock_member_init(&cl->member_);
    advlock_options_init(&cl->options_);
    if (advlock_sim_open_session(sim, c) != 0) {
        sim->nclients_--;
        return ADVLOCK_EINVAL;
    }
    return c;
}

int advlock_sim_add_client(advlock_sim *handle, advlock_sim_plan_fn plan, void *state)
{
    if (handle == NULL || plan == NULL)
        return ADVLOCK_EINVAL;
    return add(sim_world_of(handle), plan, state);
}

int advlock_sim_add_script(advlock_sim *handle, const advlock_sim_step *steps, size_t count,
                           advlock_sim_done *done)
{
    if (handle == NULL || (steps == NULL && count > 0))
        return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    int c = add(sim, advlock_sim_script_plan, NULL);
    if (c >= 0) {
        sim->clients_[c].script_ = steps;
        sim->clients_[c].script_len_ = count;
        sim->clients_[c].script_done_ = done;
    }
    return c;
}

int advlock_sim_add_cycler(advlock_sim *handle, const advlock_sim_cycler *cycler)
{
    if (handle == NULL || cycler == NULL || cycler->lock_names == NULL || cycler->lock_count == 0
        || cycler->think_min_ms < 0 || cycler->think_max_ms < cycler->think_min_ms
        || cycler->hold_min_ms < 0 || cycler->hold_max_ms < cycler->hold_min_ms
        || cycler->timeout_min_ms < 0 || cycler->timeout_max_ms < cycler->timeout_min_ms
        || cycler->cancel_max_ms < 0)
        return ADVLOCK_EINVAL;
    for (size_t i = 0; i < cycler->lock_count; i++)
        if (cycler->lock_names[i] == NULL)
            return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    int c = add(sim, advlock_sim_cycler_plan, NULL);
    if (c >= 0)
        sim->clients_[c].cycler_ = *cycler;
    return c;
}

/* ---- the event loop ----------------------------------------------------------- */

static int handle_event(sim_world *sim, const sim_event *ev)
{
    int c = ev->client_;
    sim_client *cl = &sim->clients_[c];
    switch (ev->kind_) {
    case EV_STEP: return advlock_sim_on_step(sim, c);
    case EV_ARRIVE: return advlock_sim_on_arrive(sim, c);
    case EV_DELIVER:
        advlock_sim_receive(sim, c);
        return cl->step_.kind >= ADVLOCK_SIM_BEGIN ? advlock_sim_command_done(sim, c)
                                                   : advlock_sim_on_answer(sim, c);
    case EV_WAKE: return advlock_sim_on_wake(sim, c);
    case EV_CANCEL: return advlock_sim_on_cancel(sim, c);
    case EV_KILL: return advlock_sim_on_kill(sim, c);
    case EV_REAP: advlock_sim_close_session(sim, (int)ev->arg_); return 0;
    case EV_CANCEL_LAND: return advlock_sim_on_cancel_land(sim, (int)ev->arg_);
    case EV_DEADLOCK: return advlock_sim_on_deadlock_check(sim, c);
    case EV_RETURN: return advlock_sim_on_return(sim, c);
    case EV_LOCK_TIMEOUT: return advlock_sim_on_lock_timeout(sim, c);
    case EV_STALL:
        advlock_sim_reading(sim, cl);
        advlock_fake_clock_stall(&cl->clock_, ev->arg_);
        sim->stats_.faults++;
        return 0;
    default: /* EV_JUMP */
        advlock_sim_reading(sim, cl);
        advlock_fake_clock_jump(&cl->clock_, ev->arg_);
        sim->stats_.faults++;
        return 0;
    }
}

/* A timer, cancel or deadlock check whose moment has passed it by (the
 * operation or wait it was for is over) does nothing; it must not move
 * virtual time either, or a long timeout's deadline timer would keep a run
 * going long after its last client stopped. */
static int stale(const sim_world *sim, const sim_event *ev)
{
    if (advlock_sim_event_outdated(sim, ev))
        return 1;
    const sim_client *cl = &sim->clients_[ev->client_];
    switch (ev->kind_) {
    case EV_WAKE:
    case EV_CANCEL: return !cl->busy_;
    case EV_DEADLOCK: return cl->query_ != QUERY_WAITING;
    case EV_RETURN: return cl->query_ != QUERY_RETURNING;
    case EV_LOCK_TIMEOUT: return cl->query_ != QUERY_WAITING && cl->query_ != QUERY_RETURNING;
    default: return 0;
    }
}

int advlock_sim_run(advlock_sim *handle)
{
    if (handle == NULL)
        return ADVLOCK_EINVAL;
    sim_world *sim = sim_world_of(handle);
    if (sim->ran_)
        return ADVLOCK_EMISUSE;
    sim->ran_ = 1;
    int rc = 0;
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    rc = advlock_sim_launch_clients(sim);
    sim_event ev;
    while (rc == 0 && advlock_sim_next_event(sim, &ev)) {
        if (stale(sim, &ev))
            continue;
        sim->now_ms_ = ev.at_ms_;
        advlock_fake_db_set_time(&sim->db_, sim->now_ms_);
        if (sim->now_ms_ - sim->config_.start_ms > sim->config_.max_virtual_ms) {
            rc = advlock_sim_record_violation(
                sim, ev.client_, "progress: the run is still going after max_virtual_ms");
            break;
        }
        if (++sim->stats_.events > MAX_EVENTS) {
            rc = advlock_sim_record_violation(sim, ev.client_,
                                              "progress: too many events; the plans never end");
            break;
        }
        rc = handle_event(sim, &ev);
        /* A release or a cancel may have ended waits at the server. */
        if (rc == 0 && sim->waiting_ > 0)
            rc = advlock_sim_collect_waits(sim);
        if (rc == 0 && advlock_sim_check_world(sim, why, sizeof why) != 0)
            rc = advlock_sim_record_violation(sim, ev.client_, why);
    }
    if (rc == 0 && advlock_sim_check_end(sim, why, sizeof why) != 0)
        rc = advlock_sim_record_violation(sim, -1, why);
    while (sim->nsessions_ > 0)
        advlock_sim_close_session(sim, sim->sessions_[sim->nsessions_ - 1].pid);
    sim->stats_.end_ms = sim->now_ms_;
    return rc;
}

const char *advlock_sim_violation(const advlock_sim *sim)
{
    return sim != NULL ? sim_world_of_const(sim)->violation_ : "";
}

advlock_sim_stats advlock_sim_get_stats(const advlock_sim *sim)
{
    return sim != NULL ? sim_world_of_const(sim)->stats_ : (advlock_sim_stats){0};
}

advlock_prng *advlock_sim_prng(advlock_sim *sim)
{
    return sim != NULL ? &sim_world_of(sim)->prng_ : NULL;
}

advlock_fake_db *advlock_sim_db(advlock_sim *sim)
{
    return sim != NULL ? &sim_world_of(sim)->db_ : NULL;
}

int advlock_sim_client_pid(const advlock_sim *sim, int client)
{
    if (sim == NULL || client < 0 || client >= sim_world_of_const(sim)->nclients_)
        return ADVLOCK_EINVAL;
    return sim_world_of_const(sim)->clients_[client].pid_;
}

int64_t advlock_sim_now(const advlock_sim *sim)
{
    return sim != NULL ? sim_world_of_const(sim)->now_ms_ : 0;
}
