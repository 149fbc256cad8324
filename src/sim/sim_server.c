/*
 * The server's side of the driver: a query arriving at the client's fake
 * session (or meeting an injected fault), its effect on what the lock table
 * holds for the client (server_view_), waits in the server's queue and how
 * they end (a grant handed over when a holder lets go, a cancel request
 * landing, the deadlock check after deadlock_timeout, the session
 * terminated), and dropped sessions.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* PostgreSQL's default deadlock_timeout. */
enum { DEADLOCK_TIMEOUT_MS = 1000 };

static void set_result(sim_client *cl, advlock_result r, const char *sqlstate, const char *message)
{
    cl->result_ = r;
    advlock_fake_copy(cl->result_sqlstate_, sizeof cl->result_sqlstate_, sqlstate);
    advlock_fake_copy(cl->result_message_, sizeof cl->result_message_, message);
}

/* The answer the client gets from a session pg_terminate_backend ended. */
static void terminated(sim_client *cl)
{
    cl->session_ = SESSION_LOST;
    set_result(cl, ADVLOCK_RESULT_CONNECTION_LOST, "57P01",
               "terminating connection due to administrator command");
}

static int is_command(const sim_client *cl)
{
    return cl->step_.kind >= ADVLOCK_SIM_BEGIN;
}

/* The session's transaction ended at the server: its transaction-level
 * holds are gone; the client learns with this query's answer. */
static void transaction_ended(sim_world *sim, sim_client *cl)
{
    for (int k = 0; k < sim->nkeys_; k++)
        for (int j = 0; j < KINDS; j++)
            if (advlock_sim_kind_is_xact(j))
                cl->server_view_[k][j] = 0;
    cl->txn_end_in_flight_ = 1;
}

/* The server granted the client's lock statement. Outside a block, a
 * transaction-level grant ends with its own statement: nothing is held. */
static void granted(sim_client *cl)
{
    if (advlock_sim_kind_is_xact(cl->op_kind_) && !cl->server_in_block_) {
        cl->outside_block_ = 1;
        return;
    }
    cl->transit_delta_ = 1;
    cl->server_view_[cl->key_index_][cl->op_kind_]++;
}

/* Any error inside a transaction block aborts it (PostgreSQL's
 * AbortTransaction), releasing its transaction-level locks. */
static void failed_at_server(sim_world *sim, sim_client *cl)
{
    if (cl->server_in_block_)
        transaction_ended(sim, cl);
}

static int keep_rows(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    advlock_holder rows[ADVLOCK_SIM_MAX_CLIENTS];
    size_t n =
        advlock_fake_db_holders(&sim->db_, cl->pid_, cl->key_, rows, ADVLOCK_SIM_MAX_CLIENTS);
    if (n > ADVLOCK_SIM_MAX_CLIENTS)
        return advlock_sim_record_violation(
            sim, c, "the holders answer has more rows than a client can keep");
    for (size_t i = 0; i < n; i++) {
        unsigned char state = 0;
        while (state < 3 && strcmp(advlock_sim_state_names[state], rows[i].state) != 0)
            state++;
        cl->rows_[i].pid = rows[i].pid;
        cl->rows_[i].granted = (unsigned char)rows[i].granted;
        cl->rows_[i].mode = strcmp(rows[i].mode, "ShareLock") == 0;
        cl->rows_[i].state = state;
        cl->rows_[i].seconds = rows[i].seconds;
    }
    cl->nrows_ = n;
    return 0;
}

static void command_applied(sim_world *sim, sim_client *cl, const advlock_fake_result *r)
{
    advlock_fake_copy(cl->result_tag_, sizeof cl->result_tag_, r->command_tag);
    if (cl->step_.kind == ADVLOCK_SIM_BEGIN) {
        cl->server_in_block_ = 1;
        return;
    }
    cl->server_in_block_ = 0;
    transaction_ended(sim, cl);
}

/* The query runs on the client's session; *waiting is set when it queues.
 * Its answer is TRUE unless the server says otherwise. */
static int apply(sim_world *sim, int c, int *waiting)
{
    sim_client *cl = &sim->clients_[c];
    advlock_fake_result r;
    int nparams = is_command(cl) ? 0 : cl->query_nparams_;
    if (advlock_fake_db_exec_params(&sim->db_, cl->pid_, cl->query_text_, cl->query_params_,
                                    nparams, &r)
        != 0)
        return advlock_sim_record_violation(sim, c, "the fake database refused the query");
    set_result(cl, ADVLOCK_RESULT_TRUE, "", "");
    switch (r.status) {
    case ADVLOCK_FAKE_ROW_TRUE:
    case ADVLOCK_FAKE_ROW_VOID:
        if (cl->query_is_lock_) {
            granted(cl);
        } else {
            cl->transit_delta_ = -1;
            cl->server_view_[cl->key_index_][cl->op_kind_]--;
        }
        return 0;
    case ADVLOCK_FAKE_ROW_FALSE: cl->result_ = ADVLOCK_RESULT_FALSE; return 0;
    case ADVLOCK_FAKE_ROW_NULL: cl->result_ = ADVLOCK_RESULT_NULL; return 0;
    case ADVLOCK_FAKE_WAITING: *waiting = 1; return 0;
    case ADVLOCK_FAKE_ROWS: return keep_rows(sim, c);
    case ADVLOCK_FAKE_ROW_SESSION:
        cl->session_row_.pid = r.session_pid;
        cl->session_row_.in_recovery = r.in_recovery;
        cl->session_row_.ours = r.ours;
        return 0;
    case ADVLOCK_FAKE_COMMAND_OK: command_applied(sim, cl, &r); return 0;
    case ADVLOCK_FAKE_SERVER_ERROR:
        set_result(cl, ADVLOCK_RESULT_SERVER_ERROR, r.sqlstate, r.message);
        failed_at_server(sim, cl);
        return 0;
    default: {
        char why[160];
        snprintf(why, sizeof why, "the fake database answered \"%.60s\" with status %d",
                 cl->query_text_, (int)r.status);
        return advlock_sim_record_violation(sim, c, why);
    }
    }
}

/* The server side of the client's session is gone: it holds nothing. An
 * answer already on its way back still reaches the client. */
static void server_forgets(sim_client *cl)
{
    memset(cl->server_view_, 0, sizeof cl->server_view_);
    cl->server_in_block_ = 0;
}

/* The connection breaks: the client will see it lost; the server notices
 * within drop_detect_max_ms and ends the session then. */
static int drop(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    sim_session *s = advlock_sim_session(sim, cl->pid_);
    int64_t reap =
        sim->now_ms_ + advlock_prng_between(&sim->prng_, 0, sim->config_.faults.drop_detect_max_ms);
    if (s == NULL)
        return advlock_sim_record_violation(sim, c, "a client's session vanished behind its back");
    s->owner = SESSION_ORPHAN;
    s->reap_ms = reap;
    cl->session_ = SESSION_LOST;
    server_forgets(cl);
    set_result(cl, ADVLOCK_RESULT_CONNECTION_LOST, "", "server closed the connection unexpectedly");
    return advlock_sim_must_schedule(sim, reap, EV_REAP, c, 0, cl->pid_);
}

/* NULL means something only for the machine's boolean statements, an
 * injected error also for the holders query and the session row;
 * transaction commands meet only dropped connections. */
static enum query_fault applicable(const sim_client *cl, enum query_fault f)
{
    if (f == FAULT_NULL
        && (is_command(cl) || advlock_sim_asks(cl, ADVLOCK_SQL_HOLDERS)
            || advlock_sim_asks(cl, ADVLOCK_SQL_SESSION)))
        return FAULT_NONE;
    if (f == FAULT_ERROR && is_command(cl))
        return FAULT_NONE;
    return f;
}

static int begin_wait(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    cl->query_ = QUERY_WAITING;
    sim->waiting_++;
    sim->stats_.waits++;
    cl->wait_serial_++;
    advlock_sim_trace(sim, c, "waiting", NULL);
    int rc = advlock_sim_must_schedule(sim, sim->now_ms_ + DEADLOCK_TIMEOUT_MS, EV_DEADLOCK, c,
                                       cl->wait_serial_, 0);
    if (rc == 0 && cl->query_bound_ms_ > 0)
        rc = advlock_sim_must_schedule(sim, sim->now_ms_ + cl->query_bound_ms_, EV_LOCK_TIMEOUT, c,
                                       cl->wait_serial_, 0);
    return rc;
}

int advlock_sim_on_arrive(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    cl->query_ = QUERY_TO_CLIENT;
    cl->transit_delta_ = 0;
    cl->outside_block_ = 0;
    cl->result_fault_ = NULL;
    cl->result_tag_[0] = '\0';
    cl->nrows_ = 0;
    int rc = 0;
    if (cl->session_ == SESSION_KILLED) {
        terminated(cl);
    } else {
        enum query_fault fault =
            advlock_sim_faults_on(&sim->config_.faults)
                ? advlock_sim_draw_query_fault(&sim->prng_, &sim->config_.faults)
                : FAULT_NONE;
        fault = applicable(cl, fault);
        cl->result_fault_ = advlock_sim_fault_name(fault);
        if (fault != FAULT_NONE)
            sim->stats_.faults++;
        if (fault == FAULT_NULL) {
            set_result(cl, ADVLOCK_RESULT_NULL, "", "");
        } else if (fault == FAULT_ERROR) {
            const char *sqlstate, *message;
            advlock_sim_draw_server_error(&sim->prng_, &sqlstate, &message);
            set_result(cl, ADVLOCK_RESULT_SERVER_ERROR, sqlstate, message);
            advlock_fake_db_fail_statement(&sim->db_, cl->pid_);
            failed_at_server(sim, cl);
        } else {
            int waiting = 0;
            if (fault != FAULT_DROP_BEFORE)
                rc = apply(sim, c, &waiting);
            if (rc == 0 && (fault == FAULT_DROP_BEFORE || fault == FAULT_DROP_AFTER))
                rc = drop(sim, c);
            else if (rc == 0 && waiting)
                return begin_wait(sim, c);
        }
    }
    return rc != 0
               ? rc
               : advlock_sim_must_schedule(sim, cl->deliver_ms_, EV_DELIVER, c, cl->op_serial_, 0);
}

/* ---- how waits end ------------------------------------------------------------ */

/* The answer of an ended wait leaves the server now and takes the rest of
 * the query's round trip to reach the client. */
static int send_back(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    cl->query_ = QUERY_TO_CLIENT;
    cl->deliver_ms_ = sim->now_ms_ + cl->return_ms_;
    return advlock_sim_must_schedule(sim, cl->deliver_ms_, EV_DELIVER, c, cl->op_serial_, 0);
}

/* How the statement ended, now that it has: granted (TRUE), or an error. */
int advlock_sim_on_return(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    advlock_fake_result r;
    if (advlock_fake_db_poll(&sim->db_, cl->pid_, &r) != 1)
        return advlock_sim_record_violation(sim, c,
                                            "a waiting client's session vanished behind its back");
    if (r.status == ADVLOCK_FAKE_ROW_VOID) {
        set_result(cl, ADVLOCK_RESULT_TRUE, "", "");
    } else {
        set_result(cl, ADVLOCK_RESULT_SERVER_ERROR, r.sqlstate, r.message);
        failed_at_server(sim, cl);
    }
    return send_back(sim, c);
}

/* A grant is in the lock table the moment a holder lets go; the waiter's
 * backend then wakes and finishes its statement, later in the same
 * millisecond. A cancel that lands first still ends the statement with
 * 57014, the lock granted all the same (PostgreSQL's ProcSleep checks for
 * interrupts after waking): the race the machine's undo after a 57014 is
 * for. Cancels and deadlocks end the statement at once. */
int advlock_sim_collect_waits(sim_world *sim)
{
    for (int c = 0; c < sim->nclients_; c++) {
        sim_client *cl = &sim->clients_[c];
        if (cl->query_ != QUERY_WAITING || advlock_fake_db_is_waiting(&sim->db_, cl->pid_))
            continue;
        sim->waiting_--;
        advlock_fake_wait wait = advlock_fake_db_wait_state(&sim->db_, cl->pid_);
        int rc;
        if (wait == ADVLOCK_FAKE_WAIT_NONE)
            return advlock_sim_record_violation(
                sim, c, "a waiting client's session vanished behind its back");
        if (wait == ADVLOCK_FAKE_WAIT_GRANTED) {
            granted(cl);
            cl->query_ = QUERY_RETURNING;
            rc = advlock_sim_must_schedule(sim, sim->now_ms_, EV_RETURN, c, cl->wait_serial_, 0);
        } else {
            rc = advlock_sim_on_return(sim, c);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A statement granted but not yet finished that a cancel or its lock
 * timeout ended: its error aborts the transaction block now, and the
 * transaction's locks with it. */
static void interrupted(sim_world *sim, int pid)
{
    const sim_session *s = advlock_sim_session(sim, pid);
    int c = s != NULL ? s->owner : -1;
    if (c >= 0 && sim->clients_[c].query_ == QUERY_RETURNING)
        failed_at_server(sim, &sim->clients_[c]);
}

/* pg_cancel_backend: it cancels whatever statement the session is in when
 * the request lands (a later one, even), and nothing if it is idle. */
int advlock_sim_on_cancel_land(sim_world *sim, int pid)
{
    if (advlock_fake_db_cancel(&sim->db_, pid) == 1)
        interrupted(sim, pid);
    return 0;
}

/* The server's timer for a bounded wait: like a cancel it may land in the
 * same millisecond as a grant, before the statement has finished (the race
 * the machine's undo after a 55P03 is for). */
int advlock_sim_on_lock_timeout(sim_world *sim, int c)
{
    int pid = sim->clients_[c].pid_;
    if (advlock_fake_db_check_lock_timeout(&sim->db_, pid) == 1)
        interrupted(sim, pid);
    return 0;
}

int advlock_sim_on_deadlock_check(sim_world *sim, int c)
{
    advlock_fake_db_check_deadlock(&sim->db_, sim->clients_[c].pid_);
    return 0;
}

/* pg_terminate_backend while the client believes it holds a lock: the
 * server releases everything now; the client learns at its next query, or
 * at once if it is waiting in one. */
int advlock_sim_on_kill(sim_world *sim, int c)
{
    sim_client *cl = &sim->clients_[c];
    int holding = 0;
    for (int k = 0; k < sim->nkeys_; k++)
        for (int j = 0; j < KINDS; j++)
            holding |= cl->belief_[k][j] > 0;
    if (cl->session_ != SESSION_OPEN || !holding)
        return 0;
    advlock_sim_close_session(sim, cl->pid_);
    cl->session_ = SESSION_KILLED;
    server_forgets(cl);
    sim->stats_.faults++;
    if (cl->query_ != QUERY_WAITING && cl->query_ != QUERY_RETURNING)
        return 0;
    if (cl->query_ == QUERY_WAITING)
        sim->waiting_--;
    cl->transit_delta_ = 0;
    terminated(cl);
    return send_back(sim, c);
}
