/*
 * The nonblocking adapter: the lock machine driven from any event loop.
 *
 * libpq's nonblocking discipline, one statement in flight at a time:
 *   send (PQsend*) -> SENDING: PQflush until 0, wanting write readiness, and
 *                     consuming input when readable meanwhile
 *                  -> AWAITING: PQconsumeInput when readable; PQgetResult
 *                     only while !PQisBusy, every result PQclear()ed, until
 *                     it returns NULL
 *                  -> ANSWERED: another form of the same query (prepare,
 *                     re-prepare) or the answer goes to the machine, whose
 *                     next action starts the next query, a sleep, or ends.
 * Nothing here decides anything about locks: the machine does.
 */
#include "pq.h"

#include <string.h>

enum phase {
    IDLE,     /* bound, no operation yet */
    SENDING,  /* a statement is queued in libpq, not all of it sent */
    AWAITING, /* a statement is sent; its results are not all in */
    ANSWERED, /* within one call only: the statement's results are all in */
    SLEEPING, /* the machine waits for its deadline */
    DONE      /* the operation ended; the report says how */
};

static int busy(const advlock_pq_async *a)
{
    return a->phase_ == SENDING || a->phase_ == AWAITING || a->phase_ == SLEEPING;
}

int advlock_pq_async_init(advlock_pq_async *a, PGconn *conn)
{
    if (a == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    memset(a, 0, sizeof *a);
    advlock_machine_init(&a->machine_);
    a->phase_ = IDLE;
    if (PQstatus(conn) == CONNECTION_BAD)
        return ADVLOCK_ECONNLOST;
    if (PQstatus(conn) != CONNECTION_OK)
        return ADVLOCK_EMISUSE;
    if (PQsetnonblocking(conn, 1) != 0)
        return ADVLOCK_ECONNLOST;
    a->conn_ = conn;
    return 0;
}

/* Hands the current form of the query in flight to libpq. A statement libpq
 * refuses to send is over at once; its answer is libpq's message. */
static void send_form(advlock_pq_async *a)
{
    int64_t param = advlock_next_action(&a->machine_).param;
    a->phase_ = advlock_pq_query_send(&a->query_, a->conn_, param) ? SENDING : ANSWERED;
}

/* Takes up the machine's next action. */
static void follow_machine(advlock_pq_async *a)
{
    advlock_action next = advlock_next_action(&a->machine_);
    switch (next.kind) {
    case ADVLOCK_ACTION_QUERY:
        advlock_pq_query_begin(&a->query_, next.sql, a->prepared_, a->conn_);
        send_form(a);
        break;
    case ADVLOCK_ACTION_SLEEP: a->phase_ = SLEEPING; break;
    default:
        a->phase_ = DONE;
        advlock_pq_report_finish(&a->report_, &a->machine_);
        break;
    }
}

/* Reads the results that have arrived; returns 1 once all are in. */
static int collect_results(advlock_pq_async *a)
{
    while (!PQisBusy(a->conn_)) {
        PGresult *res = PQgetResult(a->conn_);
        if (res == NULL)
            return 1;
        advlock_pq_answer_read(&a->query_, a->conn_, res);
        PQclear(res);
    }
    return 0;
}

/* Moves on as far as possible without waiting for the socket or the clock. */
static void drive(advlock_pq_async *a, int64_t now_ms)
{
    for (;;) {
        switch (a->phase_) {
        case SENDING:
            /* -1 (a write error) leaves the error to be read as a result. */
            if (PQflush(a->conn_) == 1)
                return;
            a->phase_ = AWAITING;
            break;
        case AWAITING:
            if (!collect_results(a))
                return;
            a->phase_ = ANSWERED;
            break;
        case ANSWERED:
            advlock_pq_answer_end(&a->query_, a->conn_);
            if (advlock_pq_query_next(&a->query_, &a->prepared_, a->conn_)) {
                send_form(a);
            } else {
                advlock_pq_answer_feed(&a->query_, &a->machine_, now_ms);
                follow_machine(a);
            }
            break;
        case SLEEPING:
            /* Early calls leave the machine asleep. */
            (void)advlock_on_timer(&a->machine_, now_ms);
            if (advlock_next_action(&a->machine_).kind == ADVLOCK_ACTION_SLEEP)
                return;
            follow_machine(a);
            break;
        default: return;
        }
    }
}

static int check_can_start(const advlock_pq_async *a)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || busy(a) || !advlock_pq_conn_free(a->conn_))
        return ADVLOCK_EMISUSE;
    return 0;
}

/* Runs the first action of a machine that has just started. */
static void begin(advlock_pq_async *a, int64_t now_ms)
{
    advlock_pq_notice_guard notices;
    advlock_pq_report_begin(&a->report_);
    advlock_pq_notices_divert(&notices, a->conn_, &a->report_);
    follow_machine(a);
    drive(a, now_ms);
    advlock_pq_notices_restore(&notices);
}

int advlock_pq_async_start_acquire(advlock_pq_async *a, const char *lock_key, size_t len,
                                   int64_t timeout_ms, int64_t now_ms)
{
    int rc = check_can_start(a);
    if (rc == 0)
        rc = advlock_start_acquire(&a->machine_, lock_key, len, timeout_ms, now_ms);
    if (rc == 0)
        begin(a, now_ms);
    return rc;
}

int advlock_pq_async_start_release(advlock_pq_async *a, const char *lock_key, size_t len,
                                   int64_t now_ms)
{
    int rc = check_can_start(a);
    if (rc == 0)
        rc = advlock_start_release(&a->machine_, lock_key, len, now_ms);
    if (rc == 0)
        begin(a, now_ms);
    return rc;
}

int advlock_pq_async_cancel(advlock_pq_async *a, int64_t now_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || !busy(a))
        return ADVLOCK_EMISUSE;
    int rc = advlock_cancel(&a->machine_, now_ms);
    if (rc != 0)
        return rc;
    /* Asleep, the machine ends at once; with a query in flight it waits for
     * the answer (and undoes a granted lock), which process() delivers. */
    if (a->phase_ == SLEEPING)
        follow_machine(a);
    return 0;
}

int advlock_pq_async_process(advlock_pq_async *a, unsigned ready, int64_t now_ms)
{
    if (a == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (a->conn_ == NULL || !busy(a))
        return ADVLOCK_EMISUSE;
    advlock_pq_notice_guard notices;
    advlock_pq_notices_divert(&notices, a->conn_, &a->report_);
    /* A failure here breaks the connection, which the results then report. */
    if ((ready & ADVLOCK_PQ_READ) && (a->phase_ == SENDING || a->phase_ == AWAITING))
        (void)PQconsumeInput(a->conn_);
    drive(a, now_ms);
    advlock_pq_notices_restore(&notices);
    return 0;
}

int advlock_pq_async_socket(const advlock_pq_async *a)
{
    return a != NULL && a->conn_ != NULL ? PQsocket(a->conn_) : -1;
}

unsigned advlock_pq_async_wants(const advlock_pq_async *a)
{
    if (a == NULL)
        return 0;
    if (a->phase_ == SENDING)
        return ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE;
    return a->phase_ == AWAITING ? ADVLOCK_PQ_READ : 0;
}

int advlock_pq_async_deadline(const advlock_pq_async *a, int64_t *at_ms)
{
    if (a == NULL || at_ms == NULL || a->phase_ != SLEEPING)
        return 0;
    *at_ms = advlock_next_action(&a->machine_).wake_at_ms;
    return 1;
}

int advlock_pq_async_busy(const advlock_pq_async *a)
{
    return a != NULL && busy(a);
}

const advlock_pq_report *advlock_pq_async_report(const advlock_pq_async *a)
{
    return a != NULL && a->phase_ == DONE ? &a->report_ : NULL;
}

const advlock_machine *advlock_pq_async_machine(const advlock_pq_async *a)
{
    return a != NULL ? &a->machine_ : NULL;
}
