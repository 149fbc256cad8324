/*
 * The blocking adapter: runs the lock machine to DONE on the caller's
 * thread, executing each QUERY with PQsend* and a blocking PQgetResult loop
 * (PQexec* would keep only the last result, losing the server's reason when
 * a session is terminated mid-statement) and each SLEEP with an absolute
 * monotonic sleep. Every decision is the machine's.
 */
#include "pq.h"

int advlock_pq_session_init(advlock_pq_session *s, PGconn *conn)
{
    if (s == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    s->conn_ = conn;
    s->prepared_ = 0;
    return 0;
}

/* Runs one of the machine's queries through as many forms as it takes
 * (prepare, execute, re-prepare) and feeds the final answer back. */
static void run_query(advlock_pq_session *s, advlock_machine *m, advlock_action query)
{
    advlock_pq_query_ q;
    advlock_pq_query_begin(&q, query.sql, s->prepared_, s->conn_);
    do {
        if (advlock_pq_query_send(&q, s->conn_, query.param)) {
            PGresult *res;
            while ((res = PQgetResult(s->conn_)) != NULL) {
                advlock_pq_answer_read(&q, s->conn_, res);
                PQclear(res);
            }
        }
        advlock_pq_answer_end(&q, s->conn_);
    } while (advlock_pq_query_next(&q, &s->prepared_, s->conn_));
    advlock_pq_answer_feed(&q, m, advlock_pq_now_ms());
}

static int run(advlock_pq_session *s, advlock_machine *m, advlock_pq_report *report)
{
    advlock_pq_notice_guard notices;
    advlock_pq_report_begin(report);
    advlock_pq_notices_divert(&notices, s->conn_, report);
    for (;;) {
        advlock_action next = advlock_next_action(m);
        if (next.kind == ADVLOCK_ACTION_QUERY) {
            run_query(s, m, next);
        } else if (next.kind == ADVLOCK_ACTION_SLEEP) {
            advlock_pq_sleep_until(next.wake_at_ms);
            (void)advlock_on_timer(m, advlock_pq_now_ms());
        } else {
            break;
        }
    }
    advlock_pq_notices_restore(&notices);
    advlock_pq_report_finish(report, m);
    return report->error;
}

/* Runs a machine that start_rc says started, unless the session cannot
 * take it; refused calls send nothing. */
static int run_started(advlock_pq_session *s, advlock_machine *m, int start_rc,
                       advlock_pq_report *report)
{
    int rc = start_rc;
    if (rc == 0 && s == NULL)
        rc = ADVLOCK_EINVAL;
    else if (rc == 0 && (s->conn_ == NULL || !advlock_pq_conn_free(s->conn_)))
        rc = ADVLOCK_EMISUSE;
    if (rc != 0) {
        advlock_pq_report_refuse(report, rc);
        return rc;
    }
    return run(s, m, report);
}

int advlock_pq_acquire(advlock_pq_session *s, const char *lock_key, size_t len,
                       int64_t timeout_ms, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    advlock_machine m;
    advlock_machine_init(&m);
    return run_started(s, &m,
                       advlock_start_acquire(&m, lock_key, len, timeout_ms, advlock_pq_now_ms()),
                       report);
}

int advlock_pq_release(advlock_pq_session *s, const char *lock_key, size_t len,
                       advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    advlock_machine m;
    advlock_machine_init(&m);
    return run_started(s, &m, advlock_start_release(&m, lock_key, len, advlock_pq_now_ms()),
                       report);
}
