/*
 * The client's side of the driver: it starts the machine's operations and
 * does what each action asks, as a real event loop would: a QUERY goes out
 * on the session (with a deadline timer when it waits on the server), a
 * SLEEP waits on the client's own clock (which may stall or jump: an early
 * timer gets "not yet" and the loop sleeps again), a CANCEL_QUERY sends a
 * cancel request and reports it sent, and DONE settles what the client
 * believes it holds. Every input is judged against the policy model.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

static int act(sim_world *sim, int c);

/* The machine was given an input (took: the call's return, 0 when it took
 * it; refused: what a refusal means); its next action is compared with the
 * policy model's. */
static int judge(sim_world *sim, int c, int took, const char *refused, enum policy_input input,
                 advlock_result result, int64_t now_reading)
{
    if (took != 0)
        return advlock_sim_record_violation(sim, c, refused);
    sim_client *cl = &sim->clients_[c];
    advlock_action a = advlock_next_action(&cl->machine_);
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    if (advlock_sim_policy_check(cl, input, result, cl->result_sqlstate_, now_reading, &a, why,
                                 sizeof why)
        != 0)
        return advlock_sim_record_violation(sim, c, why);
    return 0;
}

/* Clock faults strike at a random moment within the next span ms. */
static void clock_faults(sim_world *sim, int c, int64_t span)
{
    const advlock_fake_faults *f = &sim->config_.faults;
    advlock_prng *p = &sim->prng_;
    if (advlock_prng_chance(p, f->stall_ppm)) {
        int64_t at = sim->now_ms_ + (int64_t)advlock_prng_below(p, (uint64_t)span + 1);
        advlock_sim_schedule(sim, at, EV_STALL, c, 0, advlock_prng_between(p, 1, f->stall_max_ms));
    }
    if (advlock_prng_chance(p, f->jump_ppm)) {
        int64_t at = sim->now_ms_ + (int64_t)advlock_prng_below(p, (uint64_t)span + 1);
        advlock_sim_schedule(sim, at, EV_JUMP, c, 0, advlock_prng_between(p, 1, f->jump_max_ms));
    }
}

/* Waits the way an event loop does: for the time left on the client's own
 * clock until wake_at, then asks the machine again. A fresh timer (a new
 * sleep, a new wait's deadline) is where clock faults may strike. */
static int arm_timer(sim_world *sim, int c, int64_t wake_at, int fresh)
{
    sim_client *cl = &sim->clients_[c];
    int64_t left = wake_at - advlock_sim_reading(sim, cl);
    if (left < 0)
        left = 0;
    left += advlock_sim_wakeup_ms(sim); /* 0 without a model */
    cl->timer_serial_++;
    int rc = advlock_sim_must_schedule(sim, sim->now_ms_ + left, EV_WAKE, c, cl->timer_serial_, 0);
    if (rc == 0 && fresh && advlock_sim_faults_on(&sim->config_.faults))
        clock_faults(sim, c, left);
    return rc;
}

static int start_sleep(sim_world *sim, int c, const advlock_action *a)
{
    advlock_sim_trace(sim, c, "sleep",
                      &(advlock_sim_trace_extra){.ms = a->sleep_ms, .wake = a->wake_at_ms});
    return arm_timer(sim, c, a->wake_at_ms, 1);
}

/* A QUERY action: a new statement to send, or the one still in flight (after
 * a cancel was sent, or an early timer), whose deadline may need a timer. */
static int query(sim_world *sim, int c, const advlock_action *a)
{
    sim_client *cl = &sim->clients_[c];
    int deadline = a->wake_at_ms != INT64_MAX;
    if (cl->query_ != QUERY_NONE)
        return deadline ? arm_timer(sim, c, a->wake_at_ms, 0) : 0;
    int rc = advlock_sim_send(sim, c, a->sql_text, a);
    return rc == 0 && deadline ? arm_timer(sim, c, a->wake_at_ms, 1) : rc;
}

/* PQcancel: a new connection to the server carries the request, so it
 * lands a round trip and a half later; the machine is told at once that it
 * was sent, and goes on waiting for the query's answer. A request drawn
 * faster than the query itself lands first and is ignored (the session is
 * idle): the machine's repeat, 250 ms on, is what ends the wait then. */
static int send_cancel(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    advlock_sim_trace(sim, c, "cancel_query", NULL);
    sim->stats_.cancels++;
    int64_t rtt = advlock_sim_cancel_rtt(sim);
    int64_t land = sim->now_ms_ + rtt + rtt / 2;
    int rc = advlock_sim_must_schedule(sim, land, EV_CANCEL_LAND, c, 0, cl->pid_);
    if (rc != 0)
        return rc;
    rc = judge(sim, c, advlock_on_cancel_sent(&cl->machine_, now_reading),
               "the machine refused advlock_on_cancel_sent after CANCEL_QUERY", IN_CANCEL_SENT,
               ADVLOCK_RESULT_TRUE, now_reading);
    return rc != 0 ? rc : act(sim, c);
}

static void record_done(sim_client *cl, const advlock_action *a, int64_t now)
{
    advlock_sim_done *d = &cl->last_;
    d->report = *a->report;
    advlock_fake_copy(d->server_message, sizeof d->server_message, cl->failure_message_);
    d->cancel_sent = cl->cancel_sent_;
    d->ended_ms = now;
}

/* What the outcome tells the client about its holds, and whether a
 * finished operation left a hold the client does not know about. */
static int settle_beliefs(sim_world *sim, int c, const advlock_action *a)
{
    sim_client *cl = &sim->clients_[c];
    int k = cl->key_index_, kind = cl->op_kind_;
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    switch (a->report->outcome) {
    case ADVLOCK_ACQUIRED:
        if (cl->outside_block_)
            return advlock_sim_record_violation(
                sim, c,
                "a transaction-scoped lock was acquired outside a "
                "transaction block: it ended with its statement, so "
                "nothing is held (send BEGIN first)");
        cl->belief_[k][kind]++;
        break;
    case ADVLOCK_RELEASED:
        if (cl->belief_[k][kind] == 0)
            return advlock_sim_record_violation(sim, c,
                                                "released a lock the client did not know it held");
        cl->belief_[k][kind]--;
        break;
    case ADVLOCK_NOT_HELD:
        if (cl->belief_[k][kind] > 0) {
            /* The reference reads an unlock's NULL as "not held"; the hold
             * may remain. A false, though, contradicts what the client knew. */
            if (cl->result_ != ADVLOCK_RESULT_NULL)
                return advlock_sim_record_violation(
                    sim, c, "release said not held, but the client held the lock");
            cl->belief_[k][kind]--;
            cl->unsure_ = 1;
        }
        break;
    case ADVLOCK_FAILED:
        if (a->report->failure == ADVLOCK_ECONNLOST)
            advlock_sim_forget_holds(cl);
        else if (cl->step_.kind == ADVLOCK_SIM_ACQUIRE && !cl->query_is_lock_
                 && a->report->sql != ADVLOCK_SQL_SESSION)
            cl->unsure_ = 1; /* undoing an unwanted grant failed (error or NULL): documented */
        break;
    default: break; /* TIMED_OUT, CANCELLED hold nothing new; ENDS_WITH_TRANSACTION keeps it */
    }
    if (cl->unsure_)
        return 0;
    for (int i = 0; i < sim->nkeys_; i++) {
        for (int j = 0; j < KINDS && !advlock_sim_same_holds(cl->belief_[i], cl->client_view_[i]);
             j++) {
            if (cl->belief_[i][j] == cl->client_view_[i][j])
                continue;
            snprintf(why, sizeof why,
                     "leak: after %s the session holds key %lld (%s) %d time(s) per the results "
                     "it got, but the client knows of %d",
                     advlock_outcome_name(a->report->outcome), (long long)sim->keys_[i],
                     advlock_sim_kind_name(j), cl->client_view_[i][j], cl->belief_[i][j]);
            return advlock_sim_record_violation(sim, c, why);
        }
    }
    return 0;
}

static int finish_op(sim_world *sim, int c, const advlock_action *a)
{
    sim_client *cl = &sim->clients_[c];
    cl->busy_ = 0;
    cl->timer_serial_++;
    advlock_sim_reading(sim, cl);
    record_done(cl, a, sim->now_ms_);
    const advlock_report *r = a->report;
    sim->stats_.outcomes[r->outcome]++;
    if (sim->config_.trace != NULL) {
        /* Sentences only for the trace, rendered from the report. */
        char message[ADVLOCK_MESSAGE_MAX];
        const char *name = cl->step_.lock_name;
        const char *said = cl->failure_message_[0] != '\0' ? cl->failure_message_ : NULL;
        advlock_sim_trace_extra x = {.attempt = r->attempts};
        if (advlock_describe(r, name, strlen(name), said, message, sizeof message) > 0)
            x.message = message;
        x.sqlstate = r->sqlstate[0] != '\0' ? r->sqlstate : NULL;
        x.error = r->outcome == ADVLOCK_FAILED ? advlock_strerror(r->failure) : NULL;
        advlock_sim_trace(sim, c, advlock_sim_outcome_event(r->outcome), &x);
    }
    int rc = settle_beliefs(sim, c, a);
    if (rc != 0)
        return rc;
    const advlock_fake_faults *f = &sim->config_.faults;
    if (r->outcome == ADVLOCK_ACQUIRED && advlock_sim_faults_on(f)
        && advlock_prng_chance(&sim->prng_, f->kill_ppm))
        advlock_sim_schedule(sim,
                             sim->now_ms_ + advlock_prng_between(&sim->prng_, 0, f->kill_within_ms),
                             EV_KILL, c, 0, 0);
    return advlock_sim_must_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0);
}

static int act(sim_world *sim, int c)
{
    advlock_action a = advlock_next_action(&sim->clients_[c].machine_);
    switch (a.kind) {
    case ADVLOCK_ACTION_QUERY: return query(sim, c, &a);
    case ADVLOCK_ACTION_SLEEP: return start_sleep(sim, c, &a);
    case ADVLOCK_ACTION_CANCEL_QUERY: return send_cancel(sim, c);
    case ADVLOCK_ACTION_DONE: return finish_op(sim, c, &a);
    default:
        return advlock_sim_record_violation(sim, c,
                                            "the machine has no action during an operation");
    }
}

/* Before each operation, as the libpq adapter does: a server session the
 * machine was not given yet (the first, or a reconnect's) gets a fresh
 * value with a new token, announcing the session's pid, or behind a proxy
 * a number of the proxy's own. The machine keeps the value between
 * operations; the driver copies it back when the session row answers. */
static int tell_session(sim_world *sim, int c)
{
    enum { PROXY_PIDS = 1000000 };
    sim_client *cl = &sim->clients_[c];
    if (sim->config_.sessions == ADVLOCK_SIM_SESSIONS_NONE)
        return 0;
    if (cl->session_ == SESSION_LOST && advlock_sim_open_session(sim, c) != 0)
        return ADVLOCK_SIM_VIOLATION;
    int announced =
        sim->config_.sessions == ADVLOCK_SIM_SESSIONS_PROXIED ? cl->pid_ + PROXY_PIDS : cl->pid_;
    if (cl->session_value_.token != 0 && cl->session_value_.client_pid == announced)
        return 0;
    uint64_t token = advlock_prng_next(&sim->prng_) | 1;
    if (advlock_session_init(&cl->session_value_, announced, token) != 0
        || advlock_set_session(&cl->machine_, &cl->session_value_) != 0)
        return advlock_sim_record_violation(sim, c, "the machine refused a new session value");
    advlock_sim_policy_new_session(cl);
    return 0;
}

int advlock_sim_start_operation(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    const advlock_sim_step *s = &cl->step_;
    if (s->lock_name == NULL)
        return ADVLOCK_EINVAL;
    size_t len = strlen(s->lock_name);
    int64_t key;
    int rc = advlock_derive_key(s->lock_name, len, &key);
    if (rc != 0)
        return rc;
    int k = advlock_sim_key_index(sim, key);
    if (k < 0) {
        if (sim->nkeys_ == ADVLOCK_SIM_MAX_KEYS)
            return advlock_sim_record_violation(
                sim, c, "more distinct lock names than ADVLOCK_SIM_MAX_KEYS");
        k = sim->nkeys_++;
        sim->keys_[k] = key;
    }
    int acquire = s->kind == ADVLOCK_SIM_ACQUIRE;
    rc = tell_session(sim, c);
    if (rc != 0)
        return rc;
    int64_t now_reading = advlock_sim_reading(sim, cl);
    /* The name was hashed once above; the machine takes the key. */
    rc = acquire ? advlock_start_acquire_key(&cl->machine_, key, s->timeout_ms, now_reading)
                 : advlock_start_release_key(&cl->machine_, key, now_reading);
    if (rc != 0)
        return rc;
    cl->key_ = key;
    cl->key_index_ = k;
    cl->op_kind_ = advlock_sim_kind(cl->options_.mode, cl->options_.scope);
    advlock_sim_begin_busy(sim, cl);
    rc = judge(sim, c, 0, NULL, acquire ? IN_START_ACQUIRE : IN_START_RELEASE, ADVLOCK_RESULT_TRUE,
               now_reading);
    if (rc != 0)
        return rc;
    if (acquire && s->cancel_after_ms > 0) {
        rc = advlock_sim_must_schedule(sim, sim->now_ms_ + s->cancel_after_ms, EV_CANCEL, c,
                                       cl->op_serial_, 0);
        if (rc != 0)
            return rc;
    }
    return act(sim, c);
}

/* The session row: the machine takes it, and the driver copies out the
 * value it filled in, as the libpq adapter does. */
static int answer_session(sim_world *sim, int c, int64_t now_reading)
{
    sim_client *cl = &sim->clients_[c];
    int took = advlock_on_session(&cl->machine_, cl->session_row_.pid, cl->session_row_.in_recovery,
                                  cl->session_row_.ours, now_reading)
               || advlock_get_session(&cl->machine_, &cl->session_value_);
    return judge(sim, c, took, "the machine refused the session row it had asked for", IN_SESSION,
                 ADVLOCK_RESULT_TRUE, now_reading);
}

/* Feeds the answer to the machine: rows of the holders query, the session
 * row, or a result. */
static int answer_machine(sim_world *sim, int c, int64_t now_reading)
{
    sim_client *cl = &sim->clients_[c];
    if (advlock_sim_asks(cl, ADVLOCK_SQL_SESSION) && cl->result_ == ADVLOCK_RESULT_TRUE)
        return answer_session(sim, c, now_reading);
    if (advlock_sim_asks(cl, ADVLOCK_SQL_HOLDERS) && cl->result_ == ADVLOCK_RESULT_TRUE) {
        advlock_holder rows[ADVLOCK_SIM_MAX_CLIENTS];
        for (size_t i = 0; i < cl->nrows_; i++)
            rows[i] = (advlock_holder){cl->rows_[i].pid,
                                       cl->rows_[i].granted,
                                       cl->rows_[i].mode ? "ShareLock" : "ExclusiveLock",
                                       "",
                                       "local",
                                       advlock_sim_state_names[cl->rows_[i].state],
                                       "",
                                       cl->rows_[i].seconds};
        return judge(sim, c, advlock_on_holders(&cl->machine_, rows, cl->nrows_, now_reading),
                     "the machine refused the holders it had asked for", IN_HOLDERS,
                     ADVLOCK_RESULT_TRUE, now_reading);
    }
    int failed = cl->result_ >= ADVLOCK_RESULT_SERVER_ERROR;
    /* As a driver keeps a failing result's words for advlock_describe(). */
    if (failed || cl->result_ == ADVLOCK_RESULT_NULL)
        advlock_fake_copy(cl->failure_message_, sizeof cl->failure_message_, cl->result_message_);
    int took = advlock_on_result(&cl->machine_, cl->result_, failed ? cl->result_sqlstate_ : NULL,
                                 failed ? cl->result_message_ : NULL, now_reading);
    return judge(sim, c, took, "the machine refused a result it had asked for", IN_RESULT,
                 cl->result_, now_reading);
}

int advlock_sim_on_answer(sim_world *sim, int c)
{
    int rc = answer_machine(sim, c, advlock_sim_reading(sim, &sim->clients_[c]));
    return rc != 0 ? rc : act(sim, c);
}

/* ---- timers and the plan's cancel ------------------------------------------- */

int advlock_sim_on_wake(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    int rc = judge(sim, c, advlock_on_timer(&cl->machine_, now_reading),
                   "the machine refused a timer during an operation", IN_TIMER, ADVLOCK_RESULT_TRUE,
                   now_reading);
    if (rc != 0)
        return rc;
    advlock_action a = advlock_next_action(&cl->machine_);
    return a.kind == ADVLOCK_ACTION_SLEEP ? arm_timer(sim, c, a.wake_at_ms, 0) : act(sim, c);
}

int advlock_sim_on_cancel(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    cl->cancel_sent_ = 1;
    int rc = judge(sim, c, advlock_cancel(&cl->machine_, now_reading),
                   "the machine refused a cancel during an acquire", IN_CANCEL, ADVLOCK_RESULT_TRUE,
                   now_reading);
    if (rc != 0)
        return rc;
    advlock_action a = advlock_next_action(&cl->machine_);
    if (a.kind == ADVLOCK_ACTION_DONE)
        return finish_op(sim, c, &a);
    return a.kind == ADVLOCK_ACTION_CANCEL_QUERY ? send_cancel(sim, c) : 0;
}
