/*
 * The engine both adapters drive: the lock machine on a libpq connection,
 * never blocking on the server's socket. The nonblocking adapter hands its
 * socket, wants and deadline to the caller's event loop; the blocking
 * adapter (blocking.c) runs the same engine under a poll() loop of its own.
 *
 * libpq's nonblocking discipline, one statement in flight at a time:
 *   send (PQsend*) -> SENDING: PQflush until 0, wanting write readiness, and
 *                     consuming input when readable meanwhile
 *                  -> AWAITING: PQconsumeInput when readable; PQgetResult
 *                     only while !PQisBusy, until it returns NULL; the
 *                     query's deadline (a server-side wait) and cancel
 *                     requests are tended here
 *                  -> ANSWERED: another form of the same query (prepare,
 *                     re-prepare) or the answer goes to the machine, whose
 *                     next action starts the next query, a sleep, or ends.
 * After ACQUIRED the engine watches the idle session (HOLDING) until the
 * next operation starts, and reports LOST if the connection goes; a verify
 * that finds the lock HELD takes the watch up again.
 * Nothing here decides anything about locks: the machine does.
 */
#include "pq.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

enum phase {
    IDLE,     /* bound, no operation yet */
    SENDING,  /* a statement is queued in libpq, not all of it sent */
    AWAITING, /* a statement is sent; its results are not all in */
    ANSWERED, /* within one call only: the statement's results are all in */
    SLEEPING, /* the machine waits for its deadline */
    DONE,     /* the operation ended; the report says how */
    HOLDING,  /* DONE with ACQUIRED: watching the session that holds the lock */
    LOST      /* the session holding the lock is gone; the report says how */
};

/* An idle session's socket is read at most this many times per call, so a
 * caller's own statement streaming a large result cannot hold the loop. */
enum { MAX_IDLE_READS = 16 };

/* Whose statement is in flight when the lease's (lease_query_): its
 * setup, a heartbeat, or the heartbeat that confirms a grant which came
 * long after its statement was sent (a server-side wait: the lease counts
 * from a send, and the lock statement's is too old to count from). */
enum { MACHINE_QUERY = 0, LEASE_SETUP, LEASE_HEARTBEAT, LEASE_CONFIRM };

/* A heartbeat in flight while the lock is held belongs to the watch, not to
 * an operation: the caller sees the adapter holding, not busy. */
static int beating(const advlock_pq *a)
{
    return a->lease_query_ == LEASE_HEARTBEAT && !a->deferred_;
}

static int busy(const advlock_pq *a)
{
    return (a->phase_ == SENDING || a->phase_ == AWAITING || a->phase_ == SLEEPING) && !beating(a);
}

/* Holding a lock, heartbeat or not: what the caller sees as the watch. */
static int holding(const advlock_pq *a)
{
    return a->phase_ == HOLDING || beating(a);
}

/* A connection's token, drawn from the operating system so that no two
 * clients behind one proxy share it; 0 means "no token" to the machine, so
 * it is never drawn. */
static uint64_t new_token(void)
{
    return advlock_pq_entropy() | 1;
}

/* Binding sets only what is read before it is written: the query is
 * started with each statement, the report's facts with each ending. The
 * machine holds the same session value as the adapter from here on. */
void advlock_pq_engine_bind(advlock_pq *a, PGconn *conn)
{
    a->conn_ = conn;
    (void)advlock_session_init(&a->session_, 0, new_token());
    a->prepared_ = 0;
    a->phase_ = IDLE;
    a->scope_ = ADVLOCK_SESSION;
    a->query_.kept_ = NULL;
    memset(&a->lease_, 0, sizeof a->lease_); /* no lease */
    a->lease_on_ = 0;
    a->lease_query_ = MACHINE_QUERY;
    a->acquiring_ = 0;
    a->deferred_ = 0;
    a->held_notices_ = 0;
    a->untimed_ = 0;
    a->provisional_ = 0;
    a->sent_ms_ = 0;
    a->lease_free_ms_ = 0;
    advlock_machine_init(&a->machine_);
    (void)advlock_set_session(&a->machine_, &a->session_);
    /* Notices read while nothing runs (advlock_pq_check) count here. */
    advlock_pq_report_begin(&a->report_);
}

int advlock_pq_async_init(advlock_pq *a, PGconn *conn)
{
    if (a == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    advlock_pq_engine_bind(a, NULL);
    if (PQstatus(conn) != CONNECTION_OK || PQsetnonblocking(conn, 1) != 0)
        return ADVLOCK_EMISUSE;
    a->conn_ = conn;
    return 0;
}

/* The lease's plan: the options' (lease_ms 0: no lease). */
static const advlock_lease_plan *lease_plan(const advlock_pq *a)
{
    return advlock_lease_plan_of(&a->lease_);
}

/* Read on every turn of the engine: a flag, so that a connection without
 * a lease pays no call for it. */
static int lease_on(const advlock_pq *a)
{
    return a->lease_on_;
}

/* A fresh lease for the connection under the plan for lease_ms and
 * stop_ms (lease_ms 0: none): its first acquire sets it up. */
static void start_lease(advlock_pq *a, int64_t lease_ms, int64_t stop_ms)
{
    advlock_lease_plan p;
    a->lease_on_ = lease_ms != 0 && advlock_lease_plan_init(&p, lease_ms, stop_ms) == 0
                   && advlock_lease_init(&a->lease_, &p) == 0;
    if (!a->lease_on_)
        memset(&a->lease_, 0, sizeof a->lease_);
}

int advlock_pq_set_options(advlock_pq *a, const advlock_options *o)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || busy(a))
        return ADVLOCK_EMISUSE;
    if (o == NULL)
        return ADVLOCK_EINVAL;
    /* Another lease while one runs would leave the held lock unguarded. */
    int same_lease =
        o->lease_ms == lease_plan(a)->lease_ms && o->lease_stop_ms == lease_plan(a)->stop_ms;
    if (holding(a) && lease_on(a) && !same_lease)
        return ADVLOCK_EMISUSE;
    advlock_options chosen = *o;
    advlock_pq_seed_jitter(&chosen);
    int rc = advlock_set_options(&a->machine_, &chosen);
    if (rc != 0)
        return rc;
    a->untimed_ = 0;
    a->scope_ = o->scope;
    /* The lease of a held lock runs on as it is; a lease set anew sets the
     * connection up anew (its first acquire). The machine accepted the
     * pair, so the plan does too. */
    if (!(holding(a) && same_lease))
        start_lease(a, o->lease_ms, o->lease_stop_ms);
    return 0;
}

/* The statement in flight as the machine's action: the machine's own, or
 * the lease's row with its parameters. */
static advlock_action statement_in_flight(const advlock_pq *a)
{
    if (a->lease_query_ == MACHINE_QUERY)
        return advlock_next_action(&a->machine_);
    advlock_action act;
    memset(&act, 0, sizeof act);
    act.kind = ADVLOCK_ACTION_QUERY;
    if (a->lease_query_ == LEASE_CONFIRM) {
        act.sql = a->session_.proxied ? ADVLOCK_SQL_HEARTBEAT_GUARDED : ADVLOCK_SQL_HEARTBEAT;
        act.param = lease_plan(a)->user_timeout_ms;
        act.param2 = (int64_t)a->session_.token;
        return act;
    }
    advlock_lease_action l = advlock_lease_next(&a->lease_);
    act.sql = l.sql;
    act.param = l.param;
    act.param2 = l.param2;
    return act;
}

/* Hands the current form of the query in flight (stmt: its
 * statement_in_flight(), which the caller has at hand) to libpq. A statement
 * libpq refuses to send is over at once; its answer is libpq's message. A
 * lease statement's send time is the lease's (an earlier one than the
 * wire's is safe: it only shortens the stop deadline). */
static void send_form(advlock_pq *a, const advlock_action *stmt, int64_t now_ms)
{
    int sent = advlock_pq_query_send(&a->query_, a->conn_, stmt);
    if (sent && a->lease_query_ == LEASE_CONFIRM)
        a->sent_ms_ = now_ms; /* the lease will count from this send */
    else if (sent && a->lease_query_ != MACHINE_QUERY)
        (void)advlock_lease_on_sent(&a->lease_, now_ms);
    a->phase_ = sent ? SENDING : ANSWERED;
}

/* Sends the lease's statement (kind: LEASE_SETUP, _HEARTBEAT, _CONFIRM). */
static void send_lease_query(advlock_pq *a, int kind, int64_t now_ms)
{
    a->lease_query_ = (uint8_t)kind;
    advlock_action stmt = statement_in_flight(a);
    advlock_pq_query_begin(&a->query_, stmt.sql, a->prepared_, a->session_.proxied, a->conn_);
    send_form(a, &stmt, now_ms);
}

/* A grant whose statement went out more than a heartbeat's interval ago
 * (a server-side wait) is confirmed by a heartbeat before it counts as
 * held: anchoring the lease at the grant's arrival would be unsafe (the
 * server may have stopped hearing this client while the grant came). */
static int needs_confirm(const advlock_pq *a, const advlock_report *r, int64_t now_ms)
{
    return lease_on(a) && r->outcome == ADVLOCK_ACQUIRED
           && now_ms >= advlock_add_saturating(a->sent_ms_, lease_plan(a)->heartbeat_ms);
}

static int setup_holds(advlock_lease_setup s)
{
    return s == ADVLOCK_LEASE_APPLIED || s == ADVLOCK_LEASE_UNIX_SOCKET
           || s == ADVLOCK_LEASE_PROXIED;
}

/* An acquire's lock statement goes only on a connection whose lease is set
 * up; the setup follows the session row, which tells whether a proxy is in
 * between. */
static int needs_setup(const advlock_pq *a, advlock_sql sql)
{
    return lease_on(a) && a->acquiring_ && sql != ADVLOCK_SQL_SESSION
           && !setup_holds(advlock_lease_setup_result(&a->lease_));
}

/* An acquire that took the lock, or a verify that found it held: the
 * session holding it is watched from now on. */
static int holds(const advlock_report *r)
{
    return r->outcome == ADVLOCK_ACQUIRED || r->outcome == ADVLOCK_HELD;
}

static void become_lease_lost(advlock_pq *a, const char *words, int64_t now_ms);

/* The operation ended holding the lock: an acquire's grant starts the
 * lease from the send of the statement that took it; a verify's HELD keeps
 * the lease as it runs, unless it ran out meanwhile. */
static void hold(advlock_pq *a, const advlock_report *r, int64_t now_ms)
{
    a->phase_ = HOLDING;
    if (!lease_on(a))
        return;
    if (r->outcome == ADVLOCK_ACQUIRED)
        (void)advlock_lease_hold(&a->lease_, a->sent_ms_,
                                 a->session_.proxied ? a->session_.token : 0, now_ms);
    (void)advlock_lease_on_timer(&a->lease_, now_ms);
    if (advlock_lease_next(&a->lease_).kind == ADVLOCK_LEASE_EXPIRED)
        become_lease_lost(a, "", now_ms);
}

/* Diverts the notices for one turn of the engine (g as for
 * advlock_pq_notices_divert), unless a blocking call holds them diverted
 * for all of its turns (blocking.c): then g changes nothing. */
static void divert_notices(advlock_pq *a, advlock_pq_notice_guard *g, int64_t now_ms)
{
    if (a->held_notices_) {
        g->diverted = 0;
        g->fatal = 0;
        return;
    }
    advlock_pq_notices_divert(g, a->conn_, &a->report_, &a->machine_, now_ms);
}

/* Takes up the machine's next action. Whether it is a query without a
 * deadline (most are: only a server-side wait has one) is kept, so that
 * the turns until its answer need not ask the machine again: nothing but
 * its answer, a timer when due or a cancel changes that, and each of
 * those is followed here again or clears it. */
static void follow_machine(advlock_pq *a, int64_t now_ms)
{
    advlock_action next = advlock_next_action(&a->machine_);
    a->untimed_ = next.kind == ADVLOCK_ACTION_QUERY && next.wake_at_ms == INT64_MAX;
    switch (next.kind) {
    case ADVLOCK_ACTION_QUERY:
        if (needs_setup(a, next.sql)) {
            (void)advlock_lease_start_setup(&a->lease_, a->session_.proxied, now_ms);
            if (advlock_lease_next(&a->lease_).kind == ADVLOCK_LEASE_QUERY) {
                send_lease_query(a, LEASE_SETUP, now_ms);
                break;
            }
            /* Behind a proxy the setup ends at once (PROXIED). */
        }
        a->sent_ms_ = now_ms;
        advlock_pq_query_begin(&a->query_, next.sql, a->prepared_, a->session_.proxied, a->conn_);
        send_form(a, &next, now_ms);
        break;
    case ADVLOCK_ACTION_SLEEP: a->phase_ = SLEEPING; break;
    default:
        /* DONE: a new answer or a timer never leaves the machine asking
         * for a cancel, so nothing else arrives here. */
        advlock_pq_report_finish(&a->report_, next.report);
        a->report_.lease_expiry = ADVLOCK_LEASE_LIVE;
        if (needs_confirm(a, next.report, now_ms))
            send_lease_query(a, LEASE_CONFIRM, now_ms);
        else if (holds(next.report))
            hold(a, next.report, now_ms);
        else
            a->phase_ = DONE;
        break;
    }
}

/* The setup's answer: a lease that cannot hold refuses the lock statement,
 * which is never sent; the machine is told it failed, in words. */
static void setup_answered(advlock_pq *a, const char *words, int64_t now_ms)
{
    advlock_lease_setup s = advlock_lease_setup_result(&a->lease_);
    if (!setup_holds(s)) {
        char why[ADVLOCK_PQ_TEXT_MAX];
        advlock_lease_say_setup_failed(&a->lease_, words, why, sizeof why);
        advlock_pq_copy_line(a->report_.server_message, sizeof a->report_.server_message, why);
        (void)advlock_on_result(&a->machine_, ADVLOCK_RESULT_SERVER_ERROR, NULL,
                                a->report_.server_message, now_ms);
    }
    follow_machine(a, now_ms);
}

static void become_lost(advlock_pq *a, const char *sqlstate, const char *words, int64_t now_ms);

/* A grant's confirming heartbeat answered: TRUE holds the lock from its
 * send; anything else (or no answer within D: tend_lease) loses it. */
static void confirm_answered(advlock_pq *a, advlock_result r, const char *words, int64_t now_ms)
{
    if (r == ADVLOCK_RESULT_TRUE) {
        hold(a, &a->report_.lock, now_ms);
        return;
    }
    char why[ADVLOCK_PQ_TEXT_MAX];
    snprintf(why, sizeof why,
             "the heartbeat after a long wait for the grant failed (%.150s); stop the work now",
             words[0] != '\0' ? words : "the server session changed");
    become_lost(a, "", why, now_ms);
    a->report_.lease_expiry =
        r == ADVLOCK_RESULT_CONNECTION_LOST ? ADVLOCK_LEASE_CONNECTION : ADVLOCK_LEASE_SETTINGS;
}

/* The lease's statement answered: the setup goes on to the machine's
 * statement, a heartbeat back to the watch (or to the operation that
 * started meanwhile), unless it ended the lease. */
static void lease_answered(advlock_pq *a, int64_t now_ms)
{
    char words[ADVLOCK_PQ_TEXT_MAX];
    advlock_result r = advlock_pq_answer_take(&a->query_, a->conn_, words, sizeof words);
    int kind = a->lease_query_;
    a->lease_query_ = MACHINE_QUERY;
    if (kind == LEASE_CONFIRM) {
        confirm_answered(a, r, words, now_ms);
        return;
    }
    (void)advlock_lease_on_result(&a->lease_, r, now_ms);
    if (kind == LEASE_SETUP) {
        setup_answered(a, words, now_ms);
    } else if (a->deferred_) {
        a->deferred_ = 0;
        follow_machine(a, now_ms);
    } else if (advlock_lease_next(&a->lease_).kind == ADVLOCK_LEASE_EXPIRED) {
        become_lease_lost(a, words, now_ms);
    } else {
        a->phase_ = HOLDING;
    }
}

/* Reads the results that have arrived; returns 1 once all are in. */
static int collect_results(advlock_pq *a)
{
    while (!PQisBusy(a->conn_)) {
        PGresult *res = PQgetResult(a->conn_);
        if (res == NULL)
            return 1;
        advlock_pq_answer_read(&a->query_, a->conn_, res);
    }
    return 0;
}

static void send_cancel(advlock_pq *a, int64_t now_ms)
{
    char error[256];
    if (!advlock_pq_cancel_send(a->conn_, error, sizeof error)) {
        char message[320];
        snprintf(message, sizeof message, "could not send a cancel request: %s", error);
        advlock_notify(&a->machine_, ADVLOCK_EVENT_WARNING, message, now_ms);
    }
}

/* A server-side wait that has passed its deadline: tell the machine, which
 * then asks for the statement to be cancelled. Returns the kind of the
 * machine's next action after that. */
static advlock_action_kind check_deadline(advlock_pq *a, int64_t now_ms)
{
    if (a->untimed_)
        return ADVLOCK_ACTION_QUERY; /* never due */
    advlock_action next = advlock_next_action(&a->machine_);
    if (next.kind != ADVLOCK_ACTION_QUERY || now_ms < next.wake_at_ms)
        return next.kind;
    (void)advlock_on_timer(&a->machine_, now_ms);
    return advlock_next_action(&a->machine_).kind;
}

/* With the statement wholly sent and unanswered: sends the cancel the
 * machine asks for (it asks again while the answer is late, since the server
 * drops a cancel that overtakes its statement). A lease's statement is
 * never cancelled: its deadline is the lease's. */
static void tend_cancel(advlock_pq *a, int64_t now_ms)
{
    if (a->lease_query_ != MACHINE_QUERY)
        return;
    if (check_deadline(a, now_ms) == ADVLOCK_ACTION_CANCEL_QUERY) {
        send_cancel(a, now_ms);
        (void)advlock_on_cancel_sent(&a->machine_, now_ms);
    }
}

/* Moves on as far as possible without waiting for the socket or the clock. */
static void drive(advlock_pq *a, int64_t now_ms)
{
    for (;;) {
        switch (a->phase_) {
        case SENDING:
            /* -1 (a write error) leaves the error to be read as a result.
             * A cancel waits until the server has the whole statement. */
            if (PQflush(a->conn_) == 1) {
                if (a->lease_query_ == MACHINE_QUERY)
                    (void)check_deadline(a, now_ms);
                return;
            }
            a->phase_ = AWAITING;
            break;
        case AWAITING:
            if (!collect_results(a)) {
                tend_cancel(a, now_ms);
                return;
            }
            a->phase_ = ANSWERED;
            break;
        case ANSWERED:
            advlock_pq_answer_end(&a->query_, a->conn_);
            if (advlock_pq_query_next(&a->query_, &a->prepared_, a->conn_)) {
                advlock_action stmt = statement_in_flight(a);
                send_form(a, &stmt, now_ms);
            } else if (a->lease_query_ != MACHINE_QUERY) {
                lease_answered(a, now_ms);
            } else {
                advlock_pq_answer_feed(&a->query_, &a->machine_, a->conn_,
                                       a->report_.server_message, sizeof a->report_.server_message,
                                       now_ms);
                /* What the session row found is the connection's from now
                 * on: the statements after it choose their form by it. */
                if (a->query_.sql_ == ADVLOCK_SQL_SESSION) {
                    (void)advlock_get_session(&a->machine_, &a->session_);
                    a->provisional_ = PQtransactionStatus(a->conn_) != PQTRANS_IDLE;
                }
                follow_machine(a, now_ms);
            }
            break;
        case SLEEPING:
            /* Early calls leave the machine asleep. */
            (void)advlock_on_timer(&a->machine_, now_ms);
            if (advlock_next_action(&a->machine_).kind == ADVLOCK_ACTION_SLEEP)
                return;
            follow_machine(a, now_ms);
            break;
        default: return;
        }
    }
}

int advlock_pq_engine_in_flight(const advlock_pq *a)
{
    return a->phase_ == SENDING || a->phase_ == AWAITING;
}

void advlock_pq_engine_cancel_in_flight(advlock_pq *a, int64_t now_ms)
{
    send_cancel(a, now_ms);
}

/* The machine is left as it is, mid-statement: the adapter is unbound, so
 * nothing drives it again until an init starts it afresh. */
void advlock_pq_engine_give_up(advlock_pq *a, int64_t elapsed_ms)
{
    advlock_report r = *advlock_next_action(&a->machine_).report;
    r.sql = statement_in_flight(a).sql;
    r.outcome = ADVLOCK_FAILED;
    r.failure = ADVLOCK_ENOANSWER;
    r.detail = ADVLOCK_DETAIL_NONE;
    r.sqlstate[0] = '\0';
    r.elapsed_ms = elapsed_ms;
    advlock_pq_report_finish(&a->report_, &r);
    a->report_.server_message[0] = '\0'; /* the server said nothing */
    advlock_pq_answer_clear(&a->query_);
    a->lease_query_ = MACHINE_QUERY;
    a->deferred_ = 0;
    a->phase_ = DONE;
    a->conn_ = NULL;
}

/* The session that held the lock is gone: the report says so, once, in
 * words (the server's or libpq's) and, if the server said it, its SQLSTATE. */
static void become_lost(advlock_pq *a, const char *sqlstate, const char *words, int64_t now_ms)
{
    advlock_pq_report *r = &a->report_;
    advlock_pq_report_lost(r, sqlstate, words);
    /* Whatever was in flight (a verify, a heartbeat) is abandoned with the
     * connection, which the caller closes. */
    advlock_pq_answer_clear(&a->query_);
    a->lease_query_ = MACHINE_QUERY;
    a->deferred_ = 0;
    a->phase_ = LOST;
    advlock_notify(&a->machine_, ADVLOCK_EVENT_LOST, r->server_message, now_ms);
}

/* The lease ran out while the lock was held: the lock is LOST to the
 * caller, who must stop the work and close the connection (a late answer
 * must not count). The server frees it by now + the lease at the latest:
 * the last message it got from this client was sent before now. */
static void become_lease_lost(advlock_pq *a, const char *words, int64_t now_ms)
{
    advlock_lease_expiry why = advlock_lease_expiry_reason(&a->lease_);
    char message[ADVLOCK_PQ_TEXT_MAX];
    advlock_lease_say_expiry(&a->lease_, why, words, message, sizeof message);
    a->lease_free_ms_ = advlock_lease_unbound(&a->lease_, why)
                            ? INT64_MAX
                            : advlock_add_saturating(now_ms, lease_plan(a)->lease_ms);
    become_lost(a, "", message, now_ms);
    a->report_.lease_expiry = why != ADVLOCK_LEASE_LIVE ? why : ADVLOCK_LEASE_NO_ANSWER;
}

/* Time for the lease while a lock is held: a heartbeat falls due (sent
 * only while the connection is idle: one statement at a time), or the stop
 * deadline passes. Another operation asleep between its tries leaves the
 * connection idle too: the heartbeat goes then, and the operation follows
 * its answer, as begin() defers one behind a heartbeat. */
static void tend_lease(advlock_pq *a, int64_t now_ms)
{
    if (!lease_on(a) || a->phase_ == LOST || a->phase_ == DONE || a->phase_ == IDLE)
        return;
    if (a->lease_query_ == LEASE_CONFIRM) {
        if (now_ms >= advlock_add_saturating(a->sent_ms_, lease_plan(a)->deadline_ms))
            become_lease_lost(a, "", now_ms);
        return;
    }
    (void)advlock_lease_on_timer(&a->lease_, now_ms);
    advlock_lease_action next = advlock_lease_next(&a->lease_);
    if (next.kind == ADVLOCK_LEASE_EXPIRED) {
        become_lease_lost(a, "", now_ms);
    } else if (next.kind == ADVLOCK_LEASE_QUERY && next.sql != ADVLOCK_SQL_LEASE_SETUP
               && (a->phase_ == HOLDING || a->phase_ == SLEEPING)) {
        a->deferred_ = a->phase_ == SLEEPING;
        advlock_pq_notice_guard notices;
        divert_notices(a, &notices, now_ms);
        send_lease_query(a, LEASE_HEARTBEAT, now_ms);
        drive(a, now_ms);
        advlock_pq_notices_restore(&notices);
    }
}

/* A connection reset since the lock was taken (PQreset(), or anything else
 * that gives it a new backend pid) reached a new server session, which
 * holds none of the old one's locks, and the old one has ended (its locks
 * with it). */
int advlock_pq_engine_notice_reset(advlock_pq *a, int64_t now_ms)
{
    if (a->phase_ != HOLDING || PQstatus(a->conn_) != CONNECTION_OK
        || PQbackendPID(a->conn_) == a->session_.client_pid)
        return 0;
    char words[160];
    snprintf(words, sizeof words,
             "the connection was reset: server session %d, which held it, was replaced by %d",
             a->session_.client_pid, PQbackendPID(a->conn_));
    become_lost(a, "", words, now_ms);
    return 1;
}

/* Before every operation: after a reset (a new backend pid) the
 * connection gets a fresh session value, which the machine checks again,
 * and the statements prepared on the old one are gone. A session row
 * answered inside a transaction block is provisional: a rollback undoes
 * what it set (the timeouts turned off, the claim), so an acquire outside
 * any block checks again, with the same token (docs/design.md, "Limits").
 * Otherwise the machine's copy is the adapter's value already (the
 * adapter copies it out when the session row answers). A broken
 * connection (PQbackendPID() 0) is no new backend: whatever is sent fails
 * as a lost connection, reported on the statement the machine would
 * send. */
static int tell_session(advlock_pq *a, int acquire)
{
    advlock_session *s = &a->session_;
    int pid = PQstatus(a->conn_) == CONNECTION_OK ? PQbackendPID(a->conn_) : s->client_pid;
    if (pid == s->client_pid) {
        if (!acquire || !a->provisional_ || PQtransactionStatus(a->conn_) != PQTRANS_IDLE)
            return 0;
        a->provisional_ = 0;
        (void)advlock_session_init(s, pid, s->token);
        return advlock_set_session(&a->machine_, s);
    }
    /* A new connection gets a new token: behind a pooler, one token
     * checked on two connections could claim two server sessions, and a
     * lock on one would look released from the other. */
    (void)advlock_session_init(s, pid, new_token());
    a->provisional_ = 0;
    a->prepared_ = 0;
    /* A new server session has none of the old one's lease settings. */
    if (lease_on(a))
        start_lease(a, lease_plan(a)->lease_ms, lease_plan(a)->stop_ms);
    return advlock_set_session(&a->machine_, s);
}

/* 0 when an operation may start; tells the machine its session then. A
 * held lock's reset connection is reported lost first (its event), as at
 * any other call. */
static int check_can_start(advlock_pq *a, int acquire, int64_t now_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    /* A heartbeat in flight is the adapter's own statement: the operation
     * waits for its answer (begin()). */
    if (a->conn_ == NULL || busy(a) || (!beating(a) && !advlock_pq_conn_free(a->conn_)))
        return ADVLOCK_EMISUSE;
    /* A transaction-scoped lock taken outside a transaction block would be
     * released as soon as its own statement ends. */
    if (acquire && a->scope_ == ADVLOCK_TRANSACTION && PQstatus(a->conn_) == CONNECTION_OK
        && PQtransactionStatus(a->conn_) == PQTRANS_IDLE)
        return ADVLOCK_EMISUSE;
    (void)advlock_pq_engine_notice_reset(a, now_ms);
    return tell_session(a, acquire);
}

/* Runs the first action of a machine that has just started; behind a
 * heartbeat in flight, once it has answered (the connection runs one
 * statement at a time). */
static void begin(advlock_pq *a, int64_t now_ms)
{
    advlock_pq_notice_guard notices;
    advlock_pq_report_begin(&a->report_);
    a->report_.lease_expiry = ADVLOCK_LEASE_LIVE;
    divert_notices(a, &notices, now_ms);
    if (a->lease_query_ == LEASE_HEARTBEAT)
        a->deferred_ = 1;
    else
        follow_machine(a, now_ms);
    drive(a, now_ms);
    advlock_pq_notices_restore(&notices);
}

/* Starts what start_rc says the machine started (acquire: an acquire, which
 * sets the lease up first; a release ends the lease's heartbeats); a
 * refused start sent nothing and changed nothing. */
static int started(advlock_pq *a, int start_rc, int acquire, int64_t now_ms)
{
    a->untimed_ = 0; /* until follow_machine() looks at what started */
    if (start_rc != 0)
        return start_rc;
    a->acquiring_ = (uint8_t)(acquire > 0);
    if (acquire < 0 && lease_on(a))
        (void)advlock_lease_stop(&a->lease_);
    begin(a, now_ms);
    return 0;
}

/* What an operation does to the lease (started()'s acquire). */
enum { RELEASES = -1, VERIFIES = 0, ACQUIRES = 1 };

int advlock_pq_async_start_acquire(advlock_pq *a, const char *lock_key, size_t len,
                                   int64_t timeout_ms, int64_t now_ms)
{
    int rc = check_can_start(a, 1, now_ms);
    if (rc != 0)
        return rc;
    return started(a, advlock_start_acquire(&a->machine_, lock_key, len, timeout_ms, now_ms),
                   ACQUIRES, now_ms);
}

int advlock_pq_async_start_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                                       int64_t now_ms)
{
    int rc = check_can_start(a, 1, now_ms);
    if (rc != 0)
        return rc;
    return started(a, advlock_start_acquire_key(&a->machine_, key, timeout_ms, now_ms), ACQUIRES,
                   now_ms);
}

int advlock_pq_async_start_release(advlock_pq *a, const char *lock_key, size_t len, int64_t now_ms)
{
    int rc = check_can_start(a, 0, now_ms);
    if (rc != 0)
        return rc;
    return started(a, advlock_start_release(&a->machine_, lock_key, len, now_ms), RELEASES, now_ms);
}

int advlock_pq_async_start_release_key(advlock_pq *a, int64_t key, int64_t now_ms)
{
    int rc = check_can_start(a, 0, now_ms);
    if (rc != 0)
        return rc;
    return started(a, advlock_start_release_key(&a->machine_, key, now_ms), RELEASES, now_ms);
}

int advlock_pq_async_start_verify_key(advlock_pq *a, int64_t key, int64_t now_ms)
{
    int rc = check_can_start(a, 0, now_ms);
    if (rc != 0)
        return rc;
    return started(a, advlock_start_verify_key(&a->machine_, key, now_ms), VERIFIES, now_ms);
}

int advlock_pq_proxied(const advlock_pq *a)
{
    return a != NULL && a->session_.proxied;
}

uint64_t advlock_pq_session_token(const advlock_pq *a)
{
    return a != NULL ? a->session_.token : 0;
}

int advlock_pq_async_cancel(advlock_pq *a, int64_t now_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || !busy(a))
        return ADVLOCK_EMISUSE;
    int rc = advlock_cancel(&a->machine_, now_ms);
    if (rc != 0)
        return rc;
    a->untimed_ = 0;
    /* Asleep, the machine ends at once; with a query in flight it waits for
     * the answer (and undoes a granted lock), which process() delivers. A
     * server-side wait is asked to stop first: at once if the statement is
     * all sent, else as soon as it is. */
    if (a->phase_ == SLEEPING)
        follow_machine(a, now_ms);
    else if (a->phase_ == AWAITING)
        tend_cancel(a, now_ms);
    return 0;
}

/* 1 if fd has input waiting (or an error or hang-up to report) right now. */
static int readable_now(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) > 0 && p.revents != 0;
}

/* The server's last words and the end of the connection often
 * arrive together, so the socket is read until it has nothing more. */
int advlock_pq_read_idle(PGconn *conn)
{
    for (int reads = 0; reads < MAX_IDLE_READS; reads++) {
        if (PQstatus(conn) == CONNECTION_BAD || !PQconsumeInput(conn))
            break;
        /* Parses what arrived: notices go to the receiver; a caller's own
         * statement's results wait in libpq for the caller. */
        (void)PQisBusy(conn);
        if (!readable_now(PQsocket(conn)))
            break;
    }
    return PQstatus(conn) == CONNECTION_BAD;
}

void advlock_pq_engine_watch(advlock_pq *a, int64_t now_ms)
{
    if (advlock_pq_engine_notice_reset(a, now_ms))
        return;
    advlock_pq_notice_guard notices;
    advlock_pq_notices_divert(&notices, a->conn_, &a->report_, &a->machine_, now_ms);
    int gone = 0;
    if (beating(a)) {
        /* The heartbeat's answer is read as any statement's is. */
        (void)PQconsumeInput(a->conn_);
        drive(a, now_ms);
    } else {
        gone = advlock_pq_read_idle(a->conn_) || notices.fatal;
    }
    advlock_pq_notices_restore(&notices);
    /* The server's FATAL says why better than libpq's "server closed the
     * connection unexpectedly". */
    if (gone && a->phase_ == HOLDING)
        become_lost(a, notices.fatal ? a->report_.notice_sqlstate : "",
                    notices.fatal ? a->report_.notice : PQerrorMessage(a->conn_), now_ms);
    tend_lease(a, now_ms);
}

int advlock_pq_async_process(advlock_pq *a, unsigned ready, int64_t now_ms)
{
    if (a == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    if (a->phase_ == HOLDING) {
        if (!advlock_pq_engine_notice_reset(a, now_ms)
            && ((ready & ADVLOCK_PQ_READ) || PQstatus(a->conn_) == CONNECTION_BAD))
            advlock_pq_engine_watch(a, now_ms);
        else
            tend_lease(a, now_ms);
        return 0;
    }
    if (!busy(a) && !beating(a))
        return ADVLOCK_EMISUSE;
    advlock_pq_notice_guard notices;
    divert_notices(a, &notices, now_ms);
    /* A failure here breaks the connection, which the results then report. */
    if ((ready & ADVLOCK_PQ_READ) && (a->phase_ == SENDING || a->phase_ == AWAITING))
        (void)PQconsumeInput(a->conn_);
    drive(a, now_ms);
    advlock_pq_notices_restore(&notices);
    tend_lease(a, now_ms);
    return 0;
}

int advlock_pq_async_socket(const advlock_pq *a)
{
    return a != NULL && a->conn_ != NULL ? PQsocket(a->conn_) : -1;
}

unsigned advlock_pq_async_wants(const advlock_pq *a)
{
    if (a == NULL)
        return 0;
    if (a->phase_ == SENDING)
        return ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE;
    return a->phase_ == AWAITING || a->phase_ == HOLDING ? ADVLOCK_PQ_READ : 0;
}

/* The lease's next wake-up while it runs: a heartbeat or the stop deadline
 * (INT64_MAX: none). */
static int64_t lease_wake(const advlock_pq *a)
{
    if (!lease_on(a) || a->phase_ == LOST || a->phase_ == DONE || a->phase_ == IDLE)
        return INT64_MAX;
    if (a->lease_query_ == LEASE_CONFIRM)
        return advlock_add_saturating(a->sent_ms_, lease_plan(a)->deadline_ms);
    advlock_lease_action l = advlock_lease_next(&a->lease_);
    if (l.kind == ADVLOCK_LEASE_EXPIRED)
        return 0; /* at once: the loss is still to be told */
    return l.kind == ADVLOCK_LEASE_QUERY || l.kind == ADVLOCK_LEASE_WAIT ? l.wake_at_ms : INT64_MAX;
}

int advlock_pq_lease_deadline(const advlock_pq *a, int64_t *stop_at_ms, int64_t *free_by_ms)
{
    if (a == NULL || !lease_on(a))
        return 0;
    if (a->phase_ == LOST && a->report_.lease_expiry != ADVLOCK_LEASE_LIVE) {
        if (stop_at_ms != NULL)
            *stop_at_ms = advlock_lease_next(&a->lease_).stop_at_ms;
        if (free_by_ms != NULL)
            *free_by_ms = a->lease_free_ms_;
        return 2;
    }
    advlock_lease_action l = advlock_lease_next(&a->lease_);
    if (!holding(a) && !(busy(a) && !a->acquiring_))
        return 0;
    if (l.kind != ADVLOCK_LEASE_QUERY && l.kind != ADVLOCK_LEASE_WAIT)
        return 0;
    if (stop_at_ms != NULL)
        *stop_at_ms = l.stop_at_ms;
    if (free_by_ms != NULL)
        *free_by_ms = INT64_MAX;
    return 1;
}

int advlock_pq_async_deadline(const advlock_pq *a, int64_t *at_ms)
{
    if (a == NULL || at_ms == NULL)
        return 0;
    int64_t at = INT64_MAX;
    if (a->phase_ == SLEEPING) {
        at = advlock_next_action(&a->machine_).wake_at_ms;
    } else if ((a->phase_ == SENDING || a->phase_ == AWAITING) && !a->untimed_) {
        /* A server-side wait's deadline or its next cancel repeat
         * (INT64_MAX for every other query). */
        advlock_action next = advlock_next_action(&a->machine_);
        if (next.kind == ADVLOCK_ACTION_QUERY)
            at = next.wake_at_ms;
    }
    int64_t lease = lease_wake(a);
    if (lease < at)
        at = lease;
    if (at == INT64_MAX)
        return 0;
    *at_ms = at;
    return 1;
}

int advlock_pq_async_busy(const advlock_pq *a)
{
    return a != NULL && busy(a);
}

int advlock_pq_async_lost(advlock_pq *a)
{
    if (a != NULL)
        (void)advlock_pq_engine_notice_reset(a, advlock_pq_now_ms());
    return a != NULL && a->phase_ == LOST;
}

const advlock_pq_report *advlock_pq_async_report(const advlock_pq *a)
{
    return a != NULL && (a->phase_ == DONE || holding(a) || a->phase_ == LOST) ? &a->report_ : NULL;
}

const advlock_machine *advlock_pq_async_machine(const advlock_pq *a)
{
    return a != NULL ? &a->machine_ : NULL;
}
