/*
 * The blocking calls: the single adapter's engine (async.c) pumped to the
 * end of each operation on the caller's thread, one wait turn of the pump
 * (pump.c) at a time, each waiting for exactly what the engine asks for
 * (its socket's readiness, its next wake-up). So both ways of driving an
 * adapter share every line that talks to libpq or to the engine, and a
 * server-side wait blocks in poll() only until its deadline, where the
 * engine asks the server to cancel it. The one decision here is the
 * call's bound, past which a statement the server never answers is given
 * up on (the connection with it).
 */
#include "pump.h"

int advlock_pq_init(advlock_pq *a, PGconn *conn)
{
    if (a == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    advlock_pq_engine_bind(a, conn);
    return 0;
}

/* How long a statement may stay unanswered after its cancel request
 * before the call gives up on it (ADVLOCK_PQ_GRACE_MS in advlock_pq.h). */
enum { CANCEL_ANSWER_MS = 250 };

/* How long a release or verify may take: a guarded one's retries behind a
 * proxy (its first operation on a connection may find the proxy), plus the
 * grace. */
static const int64_t ONE_STATEMENT_BOUND_MS = ADVLOCK_GUARD_RETRY_MS + ADVLOCK_PQ_GRACE_MS;

/* An operation of the blocking calls, started by start() below. */
typedef struct {
    enum { ACQUIRE, ACQUIRE_KEY, RELEASE, RELEASE_KEY, VERIFY_KEY } kind;
    const char *lock_key;
    size_t len;
    int64_t key;
    int64_t timeout_ms;
} operation;

/* Starts op on the engine at now: 0, or the start's refusal. */
static int start(advlock_pq *a, const operation *op, int64_t now)
{
    switch (op->kind) {
    case ACQUIRE:
        return advlock_pq_async_start_acquire(a, op->lock_key, op->len, op->timeout_ms, now);
    case ACQUIRE_KEY: return advlock_pq_async_start_acquire_key(a, op->key, op->timeout_ms, now);
    case RELEASE: return advlock_pq_async_start_release(a, op->lock_key, op->len, now);
    case RELEASE_KEY: return advlock_pq_async_start_release_key(a, op->key, now);
    default: return advlock_pq_async_start_verify_key(a, op->key, now);
    }
}

/* Runs op on a to its end and copies out its report; a refused call sent
 * nothing. A statement still unanswered the call's bound after the start
 * (an acquire's timeout plus ADVLOCK_PQ_GRACE_MS, else
 * ONE_STATEMENT_BOUND_MS) is asked to cancel; if it has not answered
 * CANCEL_ANSWER_MS later, the call gives up on it (see advlock_pq_acquire()
 * in advlock_pq.h). A sleep between tries is never cut: the schedule ends
 * within the bound on its own. The notices are diverted once for the whole
 * call (docs/libpq.md "Server notices"), not once per turn of the pump:
 * nothing of the caller's runs between the turns. */
static int run(advlock_pq *a, const operation *op, advlock_pq_report *report)
{
    if (a == NULL) {
        advlock_pq_report_refuse(report);
        return ADVLOCK_EINVAL;
    }
    int64_t started_ms = advlock_pq_now_ms();
    advlock_pq_notice_guard notices;
    advlock_pq_pump_hold_notices(&a->pump_, &notices, started_ms);
    int rc = start(a, op, started_ms);
    if (rc != 0) {
        advlock_pq_pump_release_notices(&notices);
        advlock_pq_report_refuse(report);
        return rc;
    }
    int acquires = op->kind == ACQUIRE || op->kind == ACQUIRE_KEY;
    int64_t bound_ms = acquires ? advlock_add_saturating(op->timeout_ms, ADVLOCK_PQ_GRACE_MS)
                                : ONE_STATEMENT_BOUND_MS;
    int64_t until_ms = advlock_add_saturating(started_ms, bound_ms);
    int cancelled = 0;
    while (advlock_pq_async_busy(a)) {
        int64_t now = advlock_pq_now_ms();
        if (now >= until_ms && advlock_pq_engine_in_flight(a)) {
            if (cancelled) {
                advlock_pq_engine_give_up(a, now);
                break;
            }
            advlock_pq_engine_cancel_in_flight(a, now);
            cancelled = 1;
            now = advlock_pq_now_ms();
            until_ms = now + CANCEL_ANSWER_MS;
        }
        (void)advlock_pq_engine_wait(a, -1, advlock_pq_wait_until(until_ms, now), now);
    }
    advlock_pq_pump_release_notices(&notices);
    advlock_pq_report_copy(report, &a->member_.report_);
    return 0;
}

int advlock_pq_acquire(advlock_pq *a, const char *lock_key, size_t len, int64_t timeout_ms,
                       advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    operation op = {.kind = ACQUIRE, .lock_key = lock_key, .len = len, .timeout_ms = timeout_ms};
    return run(a, &op, report);
}

int advlock_pq_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                           advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    operation op = {.kind = ACQUIRE_KEY, .key = key, .timeout_ms = timeout_ms};
    return run(a, &op, report);
}

int advlock_pq_release(advlock_pq *a, const char *lock_key, size_t len, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    operation op = {.kind = RELEASE, .lock_key = lock_key, .len = len};
    return run(a, &op, report);
}

int advlock_pq_release_key(advlock_pq *a, int64_t key, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    operation op = {.kind = RELEASE_KEY, .key = key};
    return run(a, &op, report);
}

int advlock_pq_verify_key(advlock_pq *a, int64_t key, advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    operation op = {.kind = VERIFY_KEY, .key = key};
    return run(a, &op, report);
}

int advlock_pq_check(advlock_pq *a)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->pump_.conn_ == NULL || advlock_pq_async_busy(a))
        return ADVLOCK_EMISUSE;
    advlock_pq_engine_watch(a, advlock_pq_now_ms());
    return 0;
}
