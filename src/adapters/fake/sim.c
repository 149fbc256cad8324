/*
 * The simulation driver: clients, their plans, and the event loop that runs
 * each client's lock machine against its fake session, one event at a time
 * in (virtual time, sequence) order, checking the invariants after each.
 * A driver is to the core what a real event loop is: it performs the
 * machine's queries (with latency and faults) and sleeps (on the client's
 * own clock, which may stall or jump), and feeds back results and timers.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

enum { SLOT_NONE = -1, SLOT_ORPHAN = -2 };
/* A run that takes this many events without ending is stuck in a loop. */
static const uint64_t MAX_EVENTS = 50000000;

void advlock_sim_config_default(advlock_sim_config *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = 1;
    cfg->max_virtual_ms = 24 * 3600 * 1000;
}

static int valid_config(const advlock_sim_config *c)
{
    const advlock_fake_latency *l = &c->latency;
    const advlock_fake_faults *f = &c->faults;
    return l->min_ms >= 0 && l->max_ms >= l->min_ms && l->tail_max_ms >= 0
           && f->drop_detect_max_ms >= 0 && f->kill_within_ms >= 0 && f->stall_max_ms >= 0
           && f->jump_max_ms >= 0 && c->max_virtual_ms > 0;
}

int advlock_sim_init(advlock_sim *sim, const advlock_sim_config *config)
{
    advlock_sim_config defaults;
    advlock_sim_config_default(&defaults);
    if (sim == NULL || (config != NULL && !valid_config(config)))
        return ADVLOCK_EINVAL;
    memset(sim, 0, sizeof *sim);
    sim->config_ = config != NULL ? *config : defaults;
    advlock_prng_seed(&sim->prng_, sim->config_.seed);
    advlock_fake_db_init(&sim->db_);
    sim->now_ms_ = sim->config_.start_ms;
    for (int i = 0; i < ADVLOCK_FAKE_MAX_SESSIONS; i++)
        sim->slot_owner_[i] = SLOT_NONE;
    return 0;
}

int sim_violation(advlock_sim *sim, int client, const char *what)
{
    int n = snprintf(sim->violation_, sizeof sim->violation_, "seed %llu: t=%lld ms, client %d: ",
                     (unsigned long long)sim->config_.seed, (long long)sim->now_ms_, client);
    fake_copy(sim->violation_ + n, sizeof sim->violation_ - (size_t)n, what);
    return ADVLOCK_SIM_VIOLATION;
}

int sim_key_index(const advlock_sim *sim, int64_t key)
{
    for (int i = 0; i < sim->nkeys_; i++)
        if (sim->keys_[i] == key)
            return i;
    return -1;
}

static int64_t reading(advlock_sim *sim, advlock_sim_client_ *cl)
{
    advlock_fake_clock_advance_to(&cl->clock_, sim->now_ms_);
    return advlock_fake_clock_read(&cl->clock_);
}

static void forget_holds(advlock_sim_client_ *cl)
{
    memset(cl->belief_, 0, sizeof cl->belief_);
    memset(cl->client_view_, 0, sizeof cl->client_view_);
    memset(cl->server_view_, 0, sizeof cl->server_view_);
    cl->unsure_ = 0;
}

static int open_session(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    int pid;
    if (advlock_fake_db_connect(&sim->db_, &pid) != 0)
        return sim_violation(sim, c, "the fake database has no free session slot");
    sim->slot_owner_[fake_db_slot(&sim->db_, pid)] = c;
    cl->pid_ = pid;
    cl->session_ = SESSION_OPEN;
    return 0;
}

static void close_session(advlock_sim *sim, int pid)
{
    int slot = fake_db_slot(&sim->db_, pid);
    if (slot < 0)
        return;
    sim->slot_owner_[slot] = SLOT_NONE;
    advlock_fake_db_close(&sim->db_, pid);
}

/* ---- adding clients ----------------------------------------------------- */

static int add(advlock_sim *sim, advlock_sim_plan_fn plan, void *state)
{
    if (sim->ran_)
        return ADVLOCK_EMISUSE;
    if (sim->nclients_ == ADVLOCK_SIM_MAX_CLIENTS)
        return ADVLOCK_EINVAL;
    int c = sim->nclients_++;
    advlock_sim_client_ *cl = &sim->clients_[c];
    cl->plan_ = plan;
    cl->plan_state_ = state;
    advlock_fake_clock_init(&cl->clock_, sim->config_.start_ms);
    advlock_machine_init(&cl->machine_);
    if (open_session(sim, c) != 0) {
        sim->nclients_--;
        return ADVLOCK_EINVAL;
    }
    return c;
}

int advlock_sim_add_client(advlock_sim *sim, advlock_sim_plan_fn plan, void *state)
{
    if (sim == NULL || plan == NULL)
        return ADVLOCK_EINVAL;
    return add(sim, plan, state);
}

int advlock_sim_add_script(advlock_sim *sim, const advlock_sim_step *steps, size_t count,
                           advlock_sim_done *done)
{
    if (sim == NULL || (steps == NULL && count > 0))
        return ADVLOCK_EINVAL;
    int c = add(sim, sim_script_plan, NULL);
    if (c >= 0) {
        sim->clients_[c].script_ = steps;
        sim->clients_[c].script_len_ = count;
        sim->clients_[c].script_done_ = done;
    }
    return c;
}

int advlock_sim_add_cycler(advlock_sim *sim, const advlock_sim_cycler *cycler)
{
    if (sim == NULL || cycler == NULL || cycler->lock_names == NULL || cycler->lock_count == 0
        || cycler->think_min_ms < 0 || cycler->think_max_ms < cycler->think_min_ms
        || cycler->hold_min_ms < 0 || cycler->hold_max_ms < cycler->hold_min_ms
        || cycler->timeout_min_ms < 0 || cycler->timeout_max_ms < cycler->timeout_min_ms
        || cycler->cancel_max_ms < 0)
        return ADVLOCK_EINVAL;
    for (size_t i = 0; i < cycler->lock_count; i++)
        if (cycler->lock_names[i] == NULL)
            return ADVLOCK_EINVAL;
    int c = add(sim, sim_cycler_plan, NULL);
    if (c >= 0)
        sim->clients_[c].cycler_ = *cycler;
    return c;
}

/* ---- the machine's actions ---------------------------------------------- */

static int act(advlock_sim *sim, int c);

/* Compares the machine's action after an input with the reference model. */
static int judge(advlock_sim *sim, int c, enum policy_input input, advlock_result result,
                 int64_t now_reading)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    advlock_action a = advlock_next_action(&cl->machine_);
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    if (sim_policy_check(cl, input, result, cl->result_sqlstate_, now_reading, &a,
                         advlock_attempts(&cl->machine_), why, sizeof why)
        != 0)
        return sim_violation(sim, c, why);
    return 0;
}

static int send_query(advlock_sim *sim, int c, const advlock_action *a)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    if (cl->session_ == SESSION_LOST && open_session(sim, c) != 0)
        return ADVLOCK_SIM_VIOLATION;
    reading(sim, cl);
    sim_trace_extra x = {0};
    x.sql = a->sql_text;
    x.attempt = a->sql == ADVLOCK_SQL_TRY_LOCK ? advlock_attempts(&cl->machine_) : 0;
    sim_trace(sim, c, "query", &x);
    int64_t rtt = sim_draw_latency(&sim->prng_, &sim->config_.latency);
    cl->query_ = QUERY_TO_SERVER;
    cl->query_sql_ = a->sql;
    cl->arrive_ms_ = sim->now_ms_ + rtt / 2;
    cl->deliver_ms_ = sim->now_ms_ + rtt;
    sim->stats_.queries++;
    if (sim_schedule(sim, cl->arrive_ms_, EV_ARRIVE, c, cl->op_serial_, 0) != 0)
        return sim_violation(sim, c, "event queue full");
    return 0;
}

static void clock_faults(advlock_sim *sim, int c, int64_t sleep_ms)
{
    const advlock_fake_faults *f = &sim->config_.faults;
    advlock_prng *p = &sim->prng_;
    if (advlock_prng_chance(p, f->stall_ppm)) {
        int64_t at = sim->now_ms_ + (int64_t)advlock_prng_below(p, (uint64_t)sleep_ms + 1);
        sim_schedule(sim, at, EV_STALL, c, 0, advlock_prng_between(p, 1, f->stall_max_ms));
    }
    if (advlock_prng_chance(p, f->jump_ppm)) {
        int64_t at = sim->now_ms_ + (int64_t)advlock_prng_below(p, (uint64_t)sleep_ms + 1);
        sim_schedule(sim, at, EV_JUMP, c, 0, advlock_prng_between(p, 1, f->jump_max_ms));
    }
}

/* Sleeps the way an event loop does: for the time left on the client's own
 * clock, then asks again; a stalled clock makes the machine say "not yet". */
static int arm_timer(advlock_sim *sim, int c, const advlock_action *a, int fresh)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    int64_t left = a->wake_at_ms - reading(sim, cl);
    cl->timer_serial_++;
    if (sim_schedule(sim, sim->now_ms_ + (left > 0 ? left : 0), EV_WAKE, c, cl->timer_serial_, 0)
        != 0)
        return sim_violation(sim, c, "event queue full");
    if (fresh) {
        sim_trace_extra x = {0};
        x.ms = a->sleep_ms;
        x.wake = a->wake_at_ms;
        sim_trace(sim, c, "sleep", &x);
        if (sim_faults_on(&sim->config_.faults))
            clock_faults(sim, c, a->sleep_ms);
    }
    return 0;
}

static void record_done(advlock_sim_client_ *cl, const advlock_action *a, int64_t now)
{
    advlock_sim_done *d = &cl->last_;
    d->key = cl->key_;
    d->outcome = a->outcome;
    d->error = a->error;
    fake_copy(d->sqlstate, sizeof d->sqlstate, a->sqlstate);
    fake_copy(d->message, sizeof d->message, a->message);
    d->attempts = advlock_attempts(&cl->machine_);
    d->cancel_sent = cl->cancel_sent_;
    d->ended_ms = now;
}

/* What the outcome tells the client about its holds, and whether a
 * finished operation left a hold the client does not know about. */
static int settle_beliefs(advlock_sim *sim, int c, const advlock_action *a)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    int k = cl->key_index_;
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    switch (a->outcome) {
    case ADVLOCK_ACQUIRED: cl->belief_[k]++; break;
    case ADVLOCK_RELEASED:
        if (cl->belief_[k] == 0)
            return sim_violation(sim, c, "released a lock the client did not know it held");
        cl->belief_[k]--;
        break;
    case ADVLOCK_NOT_HELD:
        if (cl->belief_[k] > 0) {
            /* The reference reads an unlock's NULL as "not held"; the hold
             * may remain. A false, though, contradicts what the client knew. */
            if (cl->result_ != ADVLOCK_RESULT_NULL)
                return sim_violation(sim, c, "release said not held, but the client held the lock");
            cl->belief_[k]--;
            cl->unsure_ = 1;
        }
        break;
    case ADVLOCK_FAILED:
        if (a->error == ADVLOCK_ECONNLOST)
            forget_holds(cl);
        else if (cl->cancel_sent_ && cl->client_view_[k] > cl->belief_[k])
            cl->unsure_ = 1; /* undoing a cancelled acquire failed (error or NULL): documented */
        break;
    default: break;
    }
    if (cl->unsure_)
        return 0;
    for (int i = 0; i < sim->nkeys_; i++) {
        if (cl->belief_[i] == cl->client_view_[i])
            continue;
        snprintf(why, sizeof why,
                 "leak: after %s the session holds key %lld %d time(s) per the results it got, "
                 "but the client knows of %d",
                 advlock_outcome_name(a->outcome), (long long)sim->keys_[i], cl->client_view_[i],
                 cl->belief_[i]);
        return sim_violation(sim, c, why);
    }
    return 0;
}

static int finish_op(advlock_sim *sim, int c, const advlock_action *a)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    cl->busy_ = 0;
    cl->timer_serial_++;
    reading(sim, cl);
    record_done(cl, a, sim->now_ms_);
    sim->stats_.outcomes[a->outcome]++;
    sim_trace_extra x = {0};
    x.attempt = cl->last_.attempts;
    x.message = a->message[0] != '\0' ? a->message : NULL;
    x.sqlstate = a->sqlstate[0] != '\0' ? a->sqlstate : NULL;
    x.error = a->outcome == ADVLOCK_FAILED ? advlock_strerror(a->error) : NULL;
    sim_trace(sim, c, sim_outcome_event(a->outcome), &x);
    int rc = settle_beliefs(sim, c, a);
    if (rc != 0)
        return rc;
    const advlock_fake_faults *f = &sim->config_.faults;
    if (a->outcome == ADVLOCK_ACQUIRED && sim_faults_on(f)
        && advlock_prng_chance(&sim->prng_, f->kill_ppm))
        sim_schedule(sim, sim->now_ms_ + advlock_prng_between(&sim->prng_, 0, f->kill_within_ms),
                     EV_KILL, c, 0, 0);
    if (sim_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0) != 0)
        return sim_violation(sim, c, "event queue full");
    return 0;
}

static int act(advlock_sim *sim, int c)
{
    advlock_action a = advlock_next_action(&sim->clients_[c].machine_);
    switch (a.kind) {
    case ADVLOCK_ACTION_QUERY: return send_query(sim, c, &a);
    case ADVLOCK_ACTION_SLEEP: return arm_timer(sim, c, &a, 1);
    case ADVLOCK_ACTION_DONE: return finish_op(sim, c, &a);
    default: return sim_violation(sim, c, "the machine has no action during an operation");
    }
}

/* ---- steps -------------------------------------------------------------- */

/* A step that could not even start ends at once, FAILED with the error. */
static int refuse_step(advlock_sim *sim, int c, int error)
{
    advlock_sim_done *d = &sim->clients_[c].last_;
    d->outcome = ADVLOCK_FAILED;
    d->error = error;
    fake_copy(d->message, sizeof d->message, advlock_strerror(error));
    d->ended_ms = sim->now_ms_;
    return sim_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0) == 0
               ? 0
               : sim_violation(sim, c, "event queue full");
}

static int start_operation(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    const advlock_sim_step *s = &cl->step_;
    if (s->lock_name == NULL)
        return refuse_step(sim, c, ADVLOCK_EINVAL);
    size_t len = strlen(s->lock_name);
    int64_t key;
    int rc = advlock_derive_key(s->lock_name, len, &key);
    if (rc != 0)
        return refuse_step(sim, c, rc);
    int k = sim_key_index(sim, key);
    if (k < 0) {
        if (sim->nkeys_ == ADVLOCK_SIM_MAX_KEYS)
            return sim_violation(sim, c, "more distinct lock names than ADVLOCK_SIM_MAX_KEYS");
        k = sim->nkeys_++;
        sim->keys_[k] = key;
    }
    int acquire = s->kind == ADVLOCK_SIM_ACQUIRE;
    int64_t now_reading = reading(sim, cl);
    rc = acquire ? advlock_start_acquire(&cl->machine_, s->lock_name, len, s->timeout_ms, now_reading)
                 : advlock_start_release(&cl->machine_, s->lock_name, len, now_reading);
    if (rc != 0)
        return refuse_step(sim, c, rc);
    cl->key_ = key;
    cl->key_index_ = k;
    cl->busy_ = 1;
    cl->op_serial_++;
    cl->started_ms_ = sim->now_ms_;
    cl->jumped_at_start_ = cl->clock_.jumped_ms_;
    cl->cancel_sent_ = 0;
    cl->result_sqlstate_[0] = '\0';
    rc = judge(sim, c, acquire ? IN_START_ACQUIRE : IN_START_RELEASE, ADVLOCK_RESULT_TRUE,
               now_reading);
    if (rc != 0)
        return rc;
    if (acquire && s->cancel_after_ms > 0
        && sim_schedule(sim, sim->now_ms_ + s->cancel_after_ms, EV_CANCEL, c, cl->op_serial_, 0) != 0)
        return sim_violation(sim, c, "event queue full");
    return act(sim, c);
}

static int begin_step(advlock_sim *sim, int c, const advlock_sim_step *step)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    cl->step_ = *step;
    memset(&cl->last_, 0, sizeof cl->last_);
    cl->last_.step = *step;
    cl->last_.started_ms = sim->now_ms_;
    cl->last_.ended_ms = sim->now_ms_;
    switch (step->kind) {
    case ADVLOCK_SIM_STOP: cl->stopped_ = 1; return 0;
    case ADVLOCK_SIM_PAUSE: {
        int64_t until = sim->now_ms_ + (step->pause_ms > 0 ? step->pause_ms : 0);
        cl->last_.ended_ms = until;
        return sim_schedule(sim, until, EV_STEP, c, 0, 0) == 0
                   ? 0
                   : sim_violation(sim, c, "event queue full");
    }
    case ADVLOCK_SIM_RECONNECT:
        if (cl->session_ == SESSION_OPEN)
            close_session(sim, cl->pid_);
        forget_holds(cl);
        if (open_session(sim, c) != 0)
            return ADVLOCK_SIM_VIOLATION;
        return sim_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0) == 0
                   ? 0
                   : sim_violation(sim, c, "event queue full");
    case ADVLOCK_SIM_ACQUIRE:
    case ADVLOCK_SIM_RELEASE: return start_operation(sim, c);
    default: return sim_violation(sim, c, "the plan returned an unknown step kind");
    }
}

static int on_step(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    if (cl->stopped_ || cl->busy_)
        return 0;
    advlock_sim_step next;
    memset(&next, 0, sizeof next);
    cl->plan_(cl->plan_state_, sim, c, cl->started_ ? &cl->last_ : NULL, &next);
    cl->started_ = 1;
    return begin_step(sim, c, &next);
}

/* ---- queries at the server and back -------------------------------------- */

static void set_result(advlock_sim_client_ *cl, advlock_result r, const char *sqlstate,
                       const char *message)
{
    cl->result_ = r;
    fake_copy(cl->result_sqlstate_, sizeof cl->result_sqlstate_, sqlstate);
    fake_copy(cl->result_message_, sizeof cl->result_message_, message);
}

/* The query runs on the client's session; its effect on the lock table is
 * what server_view_ follows. */
static int apply(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    advlock_fake_result r;
    if (advlock_fake_db_exec(&sim->db_, cl->pid_, advlock_sql_text(cl->query_sql_), &cl->key_, &r) != 0)
        return sim_violation(sim, c, "the fake database refused the query");
    switch (r.status) {
    case ADVLOCK_FAKE_ROW_TRUE:
        cl->transit_delta_ = cl->query_sql_ == ADVLOCK_SQL_TRY_LOCK ? 1 : -1;
        cl->server_view_[cl->key_index_] += cl->transit_delta_;
        set_result(cl, ADVLOCK_RESULT_TRUE, "", "");
        return 0;
    case ADVLOCK_FAKE_ROW_FALSE: set_result(cl, ADVLOCK_RESULT_FALSE, "", ""); return 0;
    case ADVLOCK_FAKE_ROW_NULL: set_result(cl, ADVLOCK_RESULT_NULL, "", ""); return 0;
    case ADVLOCK_FAKE_SERVER_ERROR:
        set_result(cl, ADVLOCK_RESULT_SERVER_ERROR, r.sqlstate, r.message);
        return 0;
    default: {
        char why[160];
        snprintf(why, sizeof why, "the core sent \"%s\", whose result (status %d) is not a boolean",
                 advlock_sql_text(cl->query_sql_), (int)r.status);
        return sim_violation(sim, c, why);
    }
    }
}

/* The connection breaks: the client will see it lost; the server notices
 * within drop_detect_max_ms and ends the session then. */
static int drop(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    int slot = fake_db_slot(&sim->db_, cl->pid_);
    int64_t reap = sim->now_ms_
                   + advlock_prng_between(&sim->prng_, 0, sim->config_.faults.drop_detect_max_ms);
    sim->slot_owner_[slot] = SLOT_ORPHAN;
    sim->slot_reap_ms_[slot] = reap;
    cl->session_ = SESSION_LOST;
    memset(cl->server_view_, 0, sizeof cl->server_view_);
    cl->transit_delta_ = 0;
    set_result(cl, ADVLOCK_RESULT_CONNECTION_LOST, "", "server closed the connection unexpectedly");
    if (sim_schedule(sim, reap, EV_REAP, c, 0, cl->pid_) != 0)
        return sim_violation(sim, c, "event queue full");
    return 0;
}

static int on_arrive(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    cl->query_ = QUERY_TO_CLIENT;
    cl->transit_delta_ = 0;
    cl->result_fault_ = NULL;
    int rc = 0;
    if (cl->session_ == SESSION_KILLED) {
        cl->session_ = SESSION_LOST;
        set_result(cl, ADVLOCK_RESULT_CONNECTION_LOST, "57P01",
                   "terminating connection due to administrator command");
    } else {
        enum query_fault fault = sim_faults_on(&sim->config_.faults)
                                     ? sim_draw_query_fault(&sim->prng_, &sim->config_.faults)
                                     : FAULT_NONE;
        cl->result_fault_ = sim_fault_name(fault);
        if (fault != FAULT_NONE)
            sim->stats_.faults++;
        if (fault == FAULT_NULL) {
            set_result(cl, ADVLOCK_RESULT_NULL, "", "");
        } else if (fault == FAULT_ERROR) {
            const char *sqlstate, *message;
            sim_draw_server_error(&sim->prng_, &sqlstate, &message);
            set_result(cl, ADVLOCK_RESULT_SERVER_ERROR, sqlstate, message);
        } else {
            if (fault != FAULT_DROP_BEFORE)
                rc = apply(sim, c);
            if (rc == 0 && (fault == FAULT_DROP_BEFORE || fault == FAULT_DROP_AFTER))
                rc = drop(sim, c);
        }
    }
    if (rc == 0 && sim_schedule(sim, cl->deliver_ms_, EV_DELIVER, c, cl->op_serial_, 0) != 0)
        return sim_violation(sim, c, "event queue full");
    return rc;
}

static int on_deliver(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    cl->query_ = QUERY_NONE;
    if (cl->result_ == ADVLOCK_RESULT_CONNECTION_LOST)
        memset(cl->client_view_, 0, sizeof cl->client_view_);
    else
        cl->client_view_[cl->key_index_] += cl->transit_delta_;
    cl->transit_delta_ = 0;
    int64_t now_reading = reading(sim, cl);
    int failed = cl->result_ >= ADVLOCK_RESULT_SERVER_ERROR;
    sim_trace_extra x = {0};
    x.result = sim_result_name(cl->result_);
    x.sqlstate = failed && cl->result_sqlstate_[0] != '\0' ? cl->result_sqlstate_ : NULL;
    x.fault = cl->result_fault_;
    sim_trace(sim, c, "result", &x);
    if (advlock_on_result(&cl->machine_, cl->result_, failed ? cl->result_sqlstate_ : NULL,
                          failed ? cl->result_message_ : NULL, now_reading)
        != 0)
        return sim_violation(sim, c, "the machine refused a result it had asked for");
    int rc = judge(sim, c, IN_RESULT, cl->result_, now_reading);
    return rc != 0 ? rc : act(sim, c);
}

/* ---- timers, cancels, faults -------------------------------------------- */

static int on_wake(advlock_sim *sim, int c, uint64_t serial)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    if (!cl->busy_ || serial != cl->timer_serial_)
        return 0;
    int64_t now_reading = reading(sim, cl);
    if (advlock_on_timer(&cl->machine_, now_reading) != 0)
        return sim_violation(sim, c, "the machine refused a timer during a sleep");
    int rc = judge(sim, c, IN_TIMER, ADVLOCK_RESULT_TRUE, now_reading);
    if (rc != 0)
        return rc;
    advlock_action a = advlock_next_action(&cl->machine_);
    return a.kind == ADVLOCK_ACTION_SLEEP ? arm_timer(sim, c, &a, 0) : act(sim, c);
}

static int on_cancel(advlock_sim *sim, int c, uint64_t serial)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    if (!cl->busy_ || serial != cl->op_serial_)
        return 0;
    int64_t now_reading = reading(sim, cl);
    if (advlock_cancel(&cl->machine_, now_reading) != 0)
        return sim_violation(sim, c, "the machine refused a cancel during an acquire");
    cl->cancel_sent_ = 1;
    int rc = judge(sim, c, IN_CANCEL, ADVLOCK_RESULT_TRUE, now_reading);
    if (rc != 0)
        return rc;
    advlock_action a = advlock_next_action(&cl->machine_);
    return a.kind == ADVLOCK_ACTION_DONE ? finish_op(sim, c, &a) : 0;
}

/* pg_terminate_backend while the client believes it holds a lock: the
 * server releases everything now; the client learns at its next query. */
static int on_kill(advlock_sim *sim, int c)
{
    advlock_sim_client_ *cl = &sim->clients_[c];
    int holding = 0;
    for (int k = 0; k < sim->nkeys_; k++)
        holding |= cl->belief_[k] > 0;
    if (cl->session_ != SESSION_OPEN || !holding)
        return 0;
    close_session(sim, cl->pid_);
    cl->session_ = SESSION_KILLED;
    memset(cl->server_view_, 0, sizeof cl->server_view_);
    sim->stats_.faults++;
    return 0;
}

static int on_reap(advlock_sim *sim, int pid)
{
    close_session(sim, (int)pid);
    return 0;
}

static int handle(advlock_sim *sim, const advlock_sim_event_ *ev)
{
    int c = ev->client_;
    advlock_sim_client_ *cl = &sim->clients_[c];
    switch (ev->kind_) {
    case EV_STEP: return on_step(sim, c);
    case EV_ARRIVE: return on_arrive(sim, c);
    case EV_DELIVER: return on_deliver(sim, c);
    case EV_WAKE: return on_wake(sim, c, ev->serial_);
    case EV_CANCEL: return on_cancel(sim, c, ev->serial_);
    case EV_KILL: return on_kill(sim, c);
    case EV_REAP: return on_reap(sim, (int)ev->arg_);
    case EV_STALL:
        reading(sim, cl);
        advlock_fake_clock_stall(&cl->clock_, ev->arg_);
        sim->stats_.faults++;
        return 0;
    default: /* EV_JUMP */
        reading(sim, cl);
        advlock_fake_clock_jump(&cl->clock_, ev->arg_);
        sim->stats_.faults++;
        return 0;
    }
}

int advlock_sim_run(advlock_sim *sim)
{
    if (sim == NULL)
        return ADVLOCK_EINVAL;
    if (sim->ran_)
        return ADVLOCK_EMISUSE;
    sim->ran_ = 1;
    int rc = 0;
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    for (int c = 0; c < sim->nclients_ && rc == 0; c++)
        if (sim_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0) != 0)
            rc = sim_violation(sim, c, "event queue full");
    advlock_sim_event_ ev;
    while (rc == 0 && sim_next_event(sim, &ev)) {
        sim->now_ms_ = ev.at_ms_;
        if (sim->now_ms_ - sim->config_.start_ms > sim->config_.max_virtual_ms) {
            rc = sim_violation(sim, ev.client_, "progress: the run is still going after max_virtual_ms");
            break;
        }
        if (++sim->stats_.events > MAX_EVENTS) {
            rc = sim_violation(sim, ev.client_, "progress: too many events; the plans never end");
            break;
        }
        rc = handle(sim, &ev);
        if (rc == 0 && sim_check_world(sim, why, sizeof why) != 0)
            rc = sim_violation(sim, ev.client_, why);
    }
    if (rc == 0 && sim_check_end(sim, why, sizeof why) != 0)
        rc = sim_violation(sim, -1, why);
    for (int slot = 0; slot < sim->db_.sessions_used_; slot++)
        if (sim->db_.sessions_[slot].pid_ != 0)
            close_session(sim, sim->db_.sessions_[slot].pid_);
    sim->stats_.end_ms = sim->now_ms_;
    return rc;
}

const char *advlock_sim_violation(const advlock_sim *sim)
{
    return sim != NULL ? sim->violation_ : "";
}

advlock_sim_stats advlock_sim_get_stats(const advlock_sim *sim)
{
    advlock_sim_stats none;
    memset(&none, 0, sizeof none);
    return sim != NULL ? sim->stats_ : none;
}

advlock_prng *advlock_sim_prng(advlock_sim *sim)
{
    return sim != NULL ? &sim->prng_ : NULL;
}

advlock_fake_db *advlock_sim_db(advlock_sim *sim)
{
    return sim != NULL ? &sim->db_ : NULL;
}

int advlock_sim_client_pid(const advlock_sim *sim, int client)
{
    if (sim == NULL || client < 0 || client >= sim->nclients_)
        return ADVLOCK_EINVAL;
    return sim->clients_[client].pid_;
}

int64_t advlock_sim_now(const advlock_sim *sim)
{
    return sim != NULL ? sim->now_ms_ : 0;
}
