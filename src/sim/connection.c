/*
 * A client's connection: a statement going out on the client's session
 * (reopened first if it was lost) with a fresh round trip, and its answer
 * coming back, which settles what the client has been told it holds and
 * goes into the trace. What the answer means is the engine's business
 * (sim_ops.c) or, for a transaction command, the step's (sim_steps.c).
 */
#include "sim.h"

#include <string.h>

const char *const advlock_sim_state_names[4] = {"idle", "active", "idle in transaction",
                                                "idle in transaction (aborted)"};

static int is_lock_statement(advlock_sql sql)
{
    switch (sql) {
    case ADVLOCK_SQL_UNLOCK:
    case ADVLOCK_SQL_UNLOCK_SHARED:
    case ADVLOCK_SQL_UNLOCK_GUARDED:
    case ADVLOCK_SQL_UNLOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_HOLDERS:
    case ADVLOCK_SQL_SESSION: return 0;
    default: return 1;
    }
}

int advlock_sim_send(sim_world *sim, int c, const char *sql, const advlock_statement *st)
{
    sim_client *cl = &sim->clients_[c];
    int is_lock = st != NULL && is_lock_statement(st->sql);
    if (cl->session_ == SESSION_LOST && advlock_sim_open_session(sim, c) != 0)
        return ADVLOCK_SIM_VIOLATION;
    advlock_sim_reading(sim, cl);
    uint64_t attempt = is_lock ? advlock_next_action(sim_machine(cl)).report->attempts : 0;
    advlock_sim_trace(sim, c, "query", &(advlock_sim_trace_extra){.sql = sql, .attempt = attempt});
    cl->query_ = QUERY_TO_SERVER;
    cl->query_text_ = sql;
    cl->query_is_lock_ = is_lock;
    cl->query_nparams_ = st != NULL ? advlock_sql_params(st->sql) : 0;
    if (st != NULL) {
        cl->query_params_[0] = st->param;
        cl->query_params_[1] = st->param2;
        cl->query_params_[2] = st->param3;
    }
    /* The waits (the rows answering void) take their bound as $2. */
    cl->query_bound_ms_ =
        st != NULL && advlock_sql_answer(st->sql) == ADVLOCK_ANSWER_VOID ? st->param2 : 0;
    advlock_sim_statement_times(sim, &cl->arrive_ms_, &cl->deliver_ms_);
    cl->return_ms_ = cl->deliver_ms_ - cl->arrive_ms_;
    sim->stats_.queries++;
    return advlock_sim_must_schedule(sim, cl->arrive_ms_, EV_ARRIVE, c, cl->op_serial_, 0);
}

void advlock_sim_receive(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    cl->query_ = QUERY_NONE;
    if (cl->result_ == ADVLOCK_RESULT_CONNECTION_LOST)
        memset(cl->client_view_, 0, sizeof cl->client_view_);
    else if (cl->transit_delta_ != 0)
        cl->client_view_[cl->key_index_][cl->op_kind_] += cl->transit_delta_;
    /* COMMIT, ROLLBACK, or an error inside a block: the client learns that
     * its transaction and the locks it held are over. */
    if (cl->txn_end_in_flight_) {
        for (int k = 0; k < sim->nkeys_; k++)
            for (int j = 0; j < KINDS; j++)
                if (advlock_sim_kind_is_xact(j))
                    cl->client_view_[k][j] = cl->belief_[k][j] = 0;
        cl->txn_end_in_flight_ = 0;
    }
    cl->transit_delta_ = 0;
    advlock_sim_reading(sim, cl);
    int failed = cl->result_ >= ADVLOCK_RESULT_SERVER_ERROR;
    advlock_sim_trace_extra x = {.rows = (int64_t)cl->nrows_};
    x.result = cl->result_tag_[0] != '\0' && !failed ? cl->result_tag_
               : advlock_sim_asks(cl, ADVLOCK_SQL_HOLDERS) && !failed
                   ? "rows"
                   : advlock_sim_result_name(cl->result_);
    x.sqlstate = failed && cl->result_sqlstate_[0] != '\0' ? cl->result_sqlstate_ : NULL;
    x.fault = cl->result_fault_;
    advlock_sim_trace(sim, c, "result", &x);
}
