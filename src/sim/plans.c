/*
 * The built-in plans: a script (a fixed list of steps) and the random
 * cycler the campaigns run (think, acquire, hold, release, again; inside
 * BEGIN ... COMMIT when the client's locks are transaction-scoped).
 */
#include "sim.h"

void advlock_sim_script_plan(void *state, advlock_sim *sim, int client,
                             const advlock_sim_done *last, advlock_sim_step *next)
{
    (void)state;
    sim_client *cl = &sim_world_of(sim)->clients_[client];
    if (last != NULL && cl->script_done_ != NULL && cl->script_pos_ > 0)
        cl->script_done_[cl->script_pos_ - 1] = *last;
    if (cl->script_pos_ < cl->script_len_)
        *next = cl->script_[cl->script_pos_++];
    else
        next->kind = ADVLOCK_SIM_STOP;
}

/* What the cycler's current PAUSE is for. */
enum { CY_THINKING, CY_HOLDING };

static void think(sim_client *cl, advlock_prng *p, advlock_sim_step *next)
{
    if (cl->cycles_done_ >= cl->cycler_.cycles) {
        next->kind = ADVLOCK_SIM_STOP;
        return;
    }
    cl->cycler_phase_ = CY_THINKING;
    next->kind = ADVLOCK_SIM_PAUSE;
    next->pause_ms = advlock_prng_between(p, cl->cycler_.think_min_ms, cl->cycler_.think_max_ms);
}

static void end_cycle(sim_client *cl, advlock_prng *p, advlock_sim_step *next)
{
    cl->cycles_done_++;
    think(cl, p, next);
}

/* Closing the session is the one sure way back to a known state when a
 * step left the client unsure what the session holds. */
static void reset(advlock_sim_step *next)
{
    next->kind = ADVLOCK_SIM_RECONNECT;
}

static void release(sim_client *cl, advlock_sim_step *next)
{
    next->kind = ADVLOCK_SIM_RELEASE;
    next->lock_name = cl->cycler_.lock_names[cl->cycler_key_];
}

static void acquire(sim_client *cl, advlock_prng *p, advlock_sim_step *next)
{
    const advlock_sim_cycler *cy = &cl->cycler_;
    cl->cycler_key_ = (int)advlock_prng_below(p, cy->lock_count);
    next->kind = ADVLOCK_SIM_ACQUIRE;
    next->lock_name = cy->lock_names[cl->cycler_key_];
    next->timeout_ms = advlock_prng_between(p, cy->timeout_min_ms, cy->timeout_max_ms);
    int cancel = advlock_prng_chance(p, cy->cancel_ppm);
    int64_t after = advlock_prng_between(p, 1, cy->cancel_max_ms > 0 ? cy->cancel_max_ms : 1);
    next->cancel_after_ms = cancel ? after : 0;
}

static int transactional(const sim_client *cl)
{
    return cl->options_.scope == ADVLOCK_TRANSACTION;
}

static void after_pause(sim_client *cl, advlock_prng *p, advlock_sim_step *next)
{
    if (cl->cycler_phase_ == CY_HOLDING) {
        cl->release_tries_ = 0;
        release(cl, next);
    } else if (transactional(cl)) {
        next->kind = ADVLOCK_SIM_BEGIN; /* a transaction lock lasts as long as its block */
    } else {
        acquire(cl, p, next);
    }
}

static void after_acquire(sim_world *world, sim_client *cl, advlock_prng *p,
                          const advlock_sim_done *last, advlock_sim_step *next)
{
    if (last->report.outcome == ADVLOCK_ACQUIRED) {
        cl->cycler_phase_ = CY_HOLDING;
        next->kind = ADVLOCK_SIM_PAUSE;
        next->pause_ms = advlock_prng_between(p, cl->cycler_.hold_min_ms, cl->cycler_.hold_max_ms);
        next->pause_ms += advlock_sim_command_ms(world); /* 0 without a model */
    } else if (transactional(cl)) {
        next->kind = ADVLOCK_SIM_ROLLBACK; /* whatever went wrong, end the block */
    } else if (last->report.outcome == ADVLOCK_FAILED
               && (last->report.failure == ADVLOCK_ESESSION
                   || (last->report.failure != ADVLOCK_ECONNLOST
                       && (last->cancel_sent || cl->options_.wait == ADVLOCK_WAIT_SERVER)))) {
        /* Undoing a grant that came after the cancel or the deadline may
         * have failed or got NULL: the lock may still be held; and a
         * connection that cannot reach its claimed server session is unfit
         * for session locks. A new connection. */
        reset(next);
    } else {
        end_cycle(cl, p, next);
    }
}

static void after_release(sim_client *cl, advlock_prng *p, const advlock_sim_done *last,
                          advlock_sim_step *next)
{
    if (last->report.outcome == ADVLOCK_ENDS_WITH_TRANSACTION)
        next->kind = ADVLOCK_SIM_COMMIT;
    else if (last->report.outcome == ADVLOCK_FAILED && last->report.failure == ADVLOCK_ESERVER
             && ++cl->release_tries_ < 3)
        release(cl, next); /* the unlock was not applied: the lock is still held */
    else if (last->report.outcome == ADVLOCK_NOT_HELD
             || (last->report.outcome == ADVLOCK_FAILED
                 && (last->report.failure == ADVLOCK_ESERVER
                     || last->report.failure == ADVLOCK_ESESSION)))
        reset(next); /* NULL read as "not held", tries spent, or the lock left on a server
                        session the connection no longer reaches: the hold may remain */
    else
        end_cycle(cl, p, next);
}

void advlock_sim_cycler_plan(void *state, advlock_sim *sim, int client,
                             const advlock_sim_done *last, advlock_sim_step *next)
{
    (void)state;
    sim_world *world = sim_world_of(sim);
    sim_client *cl = &world->clients_[client];
    advlock_prng *p = &world->prng_;
    if (last == NULL) {
        think(cl, p, next);
        return;
    }
    switch (last->step.kind) {
    case ADVLOCK_SIM_PAUSE: after_pause(cl, p, next); return;
    case ADVLOCK_SIM_ACQUIRE: after_acquire(world, cl, p, last, next); return;
    case ADVLOCK_SIM_RELEASE: after_release(cl, p, last, next); return;
    case ADVLOCK_SIM_BEGIN:
        if (last->report.outcome == ADVLOCK_FAILED)
            end_cycle(cl, p, next);
        else
            acquire(cl, p, next);
        return;
    default: end_cycle(cl, p, next); return; /* RECONNECT, COMMIT, ROLLBACK */
    }
}
