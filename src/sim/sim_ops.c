/*
 * The client's side of the driver: a pump for the client's connection
 * engine with one member (advlock_conn, as the single-lock libpq adapter
 * has it), as a real event loop is: it starts the member's operations,
 * sends each statement the engine offers on the session (a cancel request
 * on a connection of its own), hands back every answer, and arms one
 * timer on the client's own clock (which may stall or jump: an early
 * timer changes nothing). The member's DONE settles what the client
 * believes it holds. After every input the machine's next action is
 * judged against the policy model.
 */
#include "pump.h"
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* The machine's next action as the policy judges it: a member the engine
 * ended (a cancel while it slept) is DONE with the member's report. */
static advlock_action member_action(const sim_client *cl)
{
    advlock_action a = advlock_next_action(sim_machine(cl));
    if (!advlock_member_busy(&cl->member_) && a.kind != ADVLOCK_ACTION_DONE)
        a = (advlock_action){.kind = ADVLOCK_ACTION_DONE,
                             .report = advlock_member_report(&cl->member_)};
    return a;
}

/* The machine was given an input (took: the call's return, 0 when it took
 * it; refused: what a refusal means); its next action is compared with the
 * policy model's. */
static int judge(sim_world *sim, int c, int took, const char *refused, enum policy_input input,
                 advlock_result result, int64_t now_reading)
{
    if (took != 0)
        return advlock_sim_record_violation(sim, c, refused);
    sim_client *cl = &sim->clients_[c];
    advlock_action a = member_action(cl);
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
 * clock until the engine's next wake-up, then calls its timer. A fresh
 * timer (a new sleep, a new wait's deadline) is where clock faults may
 * strike; the one that fired is armed again, unchanged, when it came early
 * by the client's clock. */
static int arm_timer(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t wake_at = advlock_conn_next_wake(&cl->engine_);
    int fresh = wake_at != cl->timer_at_;
    if (!fresh && !cl->timer_fired_)
        return 0;
    cl->timer_fired_ = 0;
    cl->timer_at_ = wake_at;
    cl->timer_serial_++;
    if (wake_at == INT64_MAX)
        return 0;
    advlock_action a = advlock_next_action(sim_machine(cl));
    if (fresh && a.kind == ADVLOCK_ACTION_SLEEP)
        advlock_sim_trace(sim, c, "sleep",
                          &(advlock_sim_trace_extra){.ms = a.sleep_ms, .wake = a.wake_at_ms});
    int64_t left = wake_at - advlock_sim_reading(sim, cl);
    if (left < 0)
        left = 0;
    left += advlock_sim_wakeup_ms(sim); /* 0 without a model */
    int rc = advlock_sim_must_schedule(sim, sim->now_ms_ + left, EV_WAKE, c, cl->timer_serial_, 0);
    if (rc == 0 && fresh && advlock_sim_faults_on(&sim->config_.faults))
        clock_faults(sim, c, left);
    return rc;
}

/* PQcancel: a new connection to the server carries the request, so it
 * lands a round trip and a half later; the engine counted it sent when it
 * offered it, and goes on waiting for the query's answer. A request drawn
 * faster than the query itself lands first and is ignored (the session is
 * idle): the engine's repeat, 250 ms on, is what ends the wait then. */
static int send_cancel(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    advlock_sim_trace(sim, c, "cancel_query", NULL);
    sim->stats_.cancels++;
    int64_t rtt = advlock_sim_cancel_rtt(sim);
    int64_t land = sim->now_ms_ + rtt + rtt / 2;
    int rc = advlock_sim_must_schedule(sim, land, EV_CANCEL_LAND, c, 0, cl->pid_);
    return rc != 0 ? rc : judge(sim, c, 0, NULL, IN_CANCEL_SENT, ADVLOCK_RESULT_TRUE, now_reading);
}

static void record_done(sim_client *cl, const advlock_report *r, int64_t now)
{
    advlock_sim_done *d = &cl->last_;
    d->report = *r;
    advlock_fake_copy(d->server_message, sizeof d->server_message, cl->failure_message_);
    d->cancel_sent = cl->cancel_sent_;
    d->ended_ms = now;
}

/* What the outcome tells the client about its holds, and whether a
 * finished operation left a hold the client does not know about. */
static int settle_beliefs(sim_world *sim, int c, const advlock_report *r)
{
    sim_client *cl = &sim->clients_[c];
    int k = cl->key_index_, kind = cl->op_kind_;
    char why[ADVLOCK_SIM_VIOLATION_MAX];
    switch (r->outcome) {
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
        if (r->failure == ADVLOCK_ECONNLOST)
            advlock_sim_forget_holds(cl);
        else if (cl->step_.kind == ADVLOCK_SIM_ACQUIRE && !cl->query_is_lock_
                 && r->sql != ADVLOCK_SQL_SESSION)
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
                     advlock_outcome_name(r->outcome), (long long)sim->keys_[i],
                     advlock_sim_kind_name(j), cl->client_view_[i][j], cl->belief_[i][j]);
            return advlock_sim_record_violation(sim, c, why);
        }
    }
    return 0;
}

static int finish_op(sim_world *sim, int c, const advlock_report *r)
{
    sim_client *cl = &sim->clients_[c];
    cl->busy_ = 0;
    advlock_sim_reading(sim, cl);
    record_done(cl, r, sim->now_ms_);
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
    int rc = settle_beliefs(sim, c, r);
    if (rc != 0)
        return rc;
    const advlock_fake_faults *f = &sim->config_.faults;
    if (r->outcome == ADVLOCK_ACQUIRED && advlock_sim_faults_on(f)
        && advlock_prng_chance(&sim->prng_, f->kill_ppm))
        advlock_sim_schedule(sim,
                             sim->now_ms_ + advlock_prng_between(&sim->prng_, 0, f->kill_within_ms),
                             EV_KILL, c, 0, 0);
    cl->step_owed_ = 1;
    return 0;
}

/* The plan's next step comes once the operation's statements are all
 * answered (a give-back may outlive it), as the libpq adapter stays busy
 * until then. */
static int next_step_when_idle(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    if (!cl->step_owed_ || advlock_conn_outstanding(&cl->engine_) > 0)
        return 0;
    cl->step_owed_ = 0;
    return advlock_sim_must_schedule(sim, sim->now_ms_, EV_STEP, c, 0, 0);
}

/* A client, as the pump's callbacks see it. */
typedef struct pumped {
    sim_world *sim;
    int c;
} pumped;

/* What the engine tells of its member: the operation's end (a loss is
 * the client's to learn at its next statement, as a blocking client does;
 * its beliefs go with the session), and warnings, which change nothing. */
static int take_event(void *user, const advlock_conn_event *ev)
{
    sim_world *sim = ((pumped *)user)->sim;
    int c = ((pumped *)user)->c;
    sim_client *cl = &sim->clients_[c];
    if (ev->kind != ADVLOCK_CONN_DONE || !cl->busy_)
        return 0;
    return finish_op(sim, c, advlock_member_report(&cl->member_));
}

/* One statement at a time, each its own batch; a cancel request on a
 * connection of its own. */
static int send_statement(void *user, const advlock_statement *st)
{
    sim_world *sim = ((pumped *)user)->sim;
    int c = ((pumped *)user)->c;
    if (st->kind == ADVLOCK_STATEMENT_CANCEL)
        return send_cancel(sim, c);
    if (sim->clients_[c].query_ != QUERY_NONE)
        return advlock_sim_record_violation(
            sim, c, "the engine sent a statement while another was in flight");
    return advlock_sim_send(sim, c, advlock_sql_text(st->sql), st);
}

static const advlock_sim_pump_ops pump_ops = {send_statement, NULL, take_event};

/* One turn: what the engine offers goes out, its events come in, the
 * plan's next step is due once nothing is in flight, and its timer is
 * armed. */
static int pump(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int rc =
        advlock_sim_pump(&cl->engine_, advlock_sim_reading(sim, cl), &pump_ops, &(pumped){sim, c});
    if (rc == 0)
        rc = next_step_when_idle(sim, c);
    return rc != 0 ? rc : arm_timer(sim, c);
}

/* Before each operation, as the libpq adapter does: the engine is told
 * whether the session is inside a transaction block, and a lock held from
 * before is let go of unless the operation is on its key (the session
 * keeps it; the engine stops watching). */
static void prepare_engine(sim_client *cl, const int64_t *op_key)
{
    int checked = sim_session_value(cl)->checked;
    advlock_conn_on_transaction(&cl->engine_, cl->client_in_block_);
    /* A check answered inside a block that has ended is made again (a
     * rollback undid its claim): the policy model starts its session anew. */
    if (checked && !sim_session_value(cl)->checked)
        advlock_sim_policy_new_session(cl);
    if (advlock_member_held(&cl->member_) && (op_key == NULL || *op_key != cl->member_.key_))
        advlock_conn_let_go(&cl->engine_, &cl->member_);
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
    if (cl->session_ == SESSION_LOST && advlock_sim_open_session(sim, c) != 0)
        return ADVLOCK_SIM_VIOLATION;
    int64_t now_reading = advlock_sim_reading(sim, cl);
    prepare_engine(cl, acquire ? NULL : &key);
    /* The engine sets its member's machine up afresh (its jitter starting
     * again from the seed) for each operation but the release of the lock
     * the member holds, which its machine goes on with. */
    if (acquire || !advlock_member_held(&cl->member_))
        advlock_sim_policy_seed(cl, cl->options_.jitter_seed);
    /* The name was hashed once above; the engine takes the key. */
    rc = acquire ? advlock_conn_start_acquire_key(&cl->engine_, &cl->member_, key, s->timeout_ms,
                                                  &cl->options_, now_reading)
                 : advlock_conn_start_release_key(&cl->engine_, &cl->member_, key, &cl->options_,
                                                  now_reading);
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
    return pump(sim, c);
}

/* The answer as the engine takes it: the session row, the holders' rows,
 * or a result with a failure's words. */
static advlock_answer answer_of(const sim_client *cl, advlock_holder *rows)
{
    advlock_answer a;
    advlock_answer_init(&a, cl->result_);
    if (cl->result_ >= ADVLOCK_RESULT_SERVER_ERROR) {
        a.sqlstate = cl->result_sqlstate_;
        a.message = cl->result_message_;
    }
    a.server_pid = cl->session_row_.pid;
    a.in_recovery = cl->session_row_.in_recovery;
    a.ours = cl->session_row_.ours;
    a.in_transaction = cl->server_in_block_; /* as the server reports it */
    for (size_t i = 0; i < cl->nrows_; i++)
        rows[i] = (advlock_holder){cl->rows_[i].pid,
                                   cl->rows_[i].granted,
                                   cl->rows_[i].mode ? "ShareLock" : "ExclusiveLock",
                                   "",
                                   "local",
                                   advlock_sim_state_names[cl->rows_[i].state],
                                   "",
                                   cl->rows_[i].seconds};
    a.holders = rows;
    a.nholders = cl->nrows_;
    return a;
}

/* The input the member's machine was given for an answer to its
 * statement. */
static enum policy_input input_of(const sim_client *cl)
{
    if (cl->result_ != ADVLOCK_RESULT_TRUE)
        return IN_RESULT;
    return advlock_sim_asks(cl, ADVLOCK_SQL_SESSION)   ? IN_SESSION
           : advlock_sim_asks(cl, ADVLOCK_SQL_HOLDERS) ? IN_HOLDERS
                                                       : IN_RESULT;
}

/* The answer reached the client: the engine takes it (a lost connection
 * then closes, as a pump reads it), and the member's machine is
 * judged when the statement was its own. */
int advlock_sim_on_answer(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    advlock_statement head;
    int mine = advlock_conn_head(&cl->engine_, &head) && head.member == &cl->member_;
    int failed = cl->result_ >= ADVLOCK_RESULT_SERVER_ERROR;
    /* As a driver keeps a failing result's words for advlock_describe(). */
    if (mine && (failed || cl->result_ == ADVLOCK_RESULT_NULL))
        advlock_fake_copy(cl->failure_message_, sizeof cl->failure_message_, cl->result_message_);
    advlock_holder rows[ADVLOCK_SIM_MAX_CLIENTS];
    advlock_answer a = answer_of(cl, rows);
    int took = advlock_conn_on_answer(&cl->engine_, &a, now_reading);
    /* The head's answer tells the server's words; the rest is the close. */
    if (cl->result_ == ADVLOCK_RESULT_CONNECTION_LOST)
        advlock_conn_on_closed(&cl->engine_, cl->result_sqlstate_, cl->result_message_,
                               now_reading);
    int rc = 0;
    if (mine)
        rc = judge(sim, c, took, "the engine refused an answer it had asked for", input_of(cl),
                   cl->result_, now_reading);
    else if (took != 0)
        rc = advlock_sim_record_violation(sim, c, "the engine refused an answer");
    return rc != 0 ? rc : pump(sim, c);
}

/* ---- timers and the plan's cancel ------------------------------------------- */

int advlock_sim_on_wake(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    cl->timer_fired_ = 1;
    advlock_conn_on_timer(&cl->engine_, now_reading);
    int rc = judge(sim, c, 0, NULL, IN_TIMER, ADVLOCK_RESULT_TRUE, now_reading);
    return rc != 0 ? rc : pump(sim, c);
}

int advlock_sim_on_cancel(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int64_t now_reading = advlock_sim_reading(sim, cl);
    cl->cancel_sent_ = 1;
    int rc = judge(sim, c, advlock_conn_cancel(&cl->engine_, &cl->member_, now_reading),
                   "the engine refused a cancel during an acquire", IN_CANCEL, ADVLOCK_RESULT_TRUE,
                   now_reading);
    if (rc != 0)
        return rc;
    /* The engine tells no event of a cancel it ended at once. */
    if (!advlock_member_busy(&cl->member_))
        rc = finish_op(sim, c, advlock_member_report(&cl->member_));
    return rc != 0 ? rc : pump(sim, c);
}
