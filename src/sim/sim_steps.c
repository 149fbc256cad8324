/*
 * Plans' steps: asking the plan for the next one, and carrying out pauses,
 * reconnects, the engine's operations (sim_ops.c), and the transaction
 * statements BEGIN, COMMIT and ROLLBACK, which the driver sends itself.
 */
#include "sim.h"

#include <string.h>

/* A step the engine refused to start ends at once, FAILED with the call's
 * error. */
static int refuse_step(sim_world *sim, int c, int error)
{
    advlock_sim_done *d = &sim->clients_[c].last_;
    d->report.outcome = ADVLOCK_FAILED;
    d->error = error;
    d->ended_ms = sim->now_ms_;
    return advlock_sim_must_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0);
}

static const char *command_text(advlock_sim_step_kind kind)
{
    return kind == ADVLOCK_SIM_BEGIN ? "BEGIN" : kind == ADVLOCK_SIM_COMMIT ? "COMMIT" : "ROLLBACK";
}

/* The client leaves its transaction's critical section as COMMIT or
 * ROLLBACK goes out (the server may end it before the answer is back). */
static int start_command(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    advlock_sim_begin_busy(sim, cl);
    return advlock_sim_send(sim, c, command_text(cl->step_.kind), NULL);
}

int advlock_sim_command_done(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    advlock_sim_done *d = &cl->last_;
    cl->busy_ = 0;
    d->ended_ms = sim->now_ms_;
    advlock_fake_copy(d->command_tag, sizeof d->command_tag, cl->result_tag_);
    if (cl->result_ == ADVLOCK_RESULT_CONNECTION_LOST) {
        d->report.outcome = ADVLOCK_FAILED;
        d->report.failure = ADVLOCK_ECONNLOST;
        advlock_sim_forget_holds(cl);
    } else if (cl->result_ == ADVLOCK_RESULT_SERVER_ERROR) {
        d->report.outcome = ADVLOCK_FAILED;
        d->report.failure = ADVLOCK_ESERVER;
    }
    /* A block begun, or ended by COMMIT or ROLLBACK whatever they answer;
     * a failed BEGIN inside a block leaves it open. */
    if (cl->step_.kind != ADVLOCK_SIM_BEGIN)
        cl->client_in_block_ = 0;
    else if (d->report.outcome != ADVLOCK_FAILED)
        cl->client_in_block_ = 1;
    advlock_fake_copy(d->report.sqlstate, sizeof d->report.sqlstate, cl->result_sqlstate_);
    advlock_fake_copy(d->server_message, sizeof d->server_message, cl->result_message_);
    static const char *const events[] = {"begin", "commit", "rollback"};
    advlock_sim_trace_extra x = {
        .error = d->report.outcome == ADVLOCK_FAILED ? advlock_strerror(d->report.failure) : NULL,
        .message = d->server_message[0] != '\0' ? d->server_message : NULL};
    advlock_sim_trace(sim, c, events[cl->step_.kind - ADVLOCK_SIM_BEGIN], &x);
    return advlock_sim_must_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0);
}

static int begin_step(sim_world *sim, int c, const advlock_sim_step *step)
{
    sim_client *cl = &sim->clients_[c];
    cl->step_ = *step;
    cl->last_ =
        (advlock_sim_done){.step = *step, .started_ms = sim->now_ms_, .ended_ms = sim->now_ms_};
    switch (step->kind) {
    case ADVLOCK_SIM_STOP: cl->stopped_ = 1; return 0;
    case ADVLOCK_SIM_PAUSE: {
        int64_t pause = step->pause_ms > 0 ? step->pause_ms : 0, until = sim->now_ms_ + pause;
        if (!cl->acquire_begun_)
            cl->launched_ms_ += pause;
        cl->last_.ended_ms = until;
        return advlock_sim_must_schedule(sim, until, EV_STEP, c, 0, 0);
    }
    case ADVLOCK_SIM_RECONNECT:
        if (cl->session_ == SESSION_OPEN)
            advlock_sim_close_session(sim, cl->pid_);
        advlock_sim_forget_holds(cl);
        if (advlock_sim_open_session(sim, c) != 0)
            return ADVLOCK_SIM_VIOLATION;
        return advlock_sim_must_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0);
    case ADVLOCK_SIM_ACQUIRE:
    case ADVLOCK_SIM_RELEASE: {
        cl->acquire_begun_ |= step->kind == ADVLOCK_SIM_ACQUIRE;
        int rc = advlock_sim_start_operation(sim, c);
        return rc < 0 ? refuse_step(sim, c, rc) : rc;
    }
    case ADVLOCK_SIM_BEGIN:
    case ADVLOCK_SIM_COMMIT:
    case ADVLOCK_SIM_ROLLBACK: return start_command(sim, c);
    default: return advlock_sim_record_violation(sim, c, "the plan returned an unknown step kind");
    }
}

int advlock_sim_on_step(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    if (cl->stopped_ || cl->busy_)
        return 0;
    advlock_sim_step next = {0};
    cl->plan_(cl->plan_state_, sim_handle_of(sim), c, cl->started_ ? &cl->last_ : NULL, &next);
    cl->started_ = 1;
    return begin_step(sim, c, &next);
}
