/*
 * Lock sets: the API over one connection engine (advlock_conn, in the core,
 * owns every rule: members, their exclusion, the session check, the lease,
 * the lock table's share, batches, give-backs). This file binds the engine
 * to a PGconn, starts and cancels members' operations, answers the loop's
 * questions and drives the blocking calls; pump.c moves statements and
 * answers. docs/libpq.md, "Lock sets".
 */
#include "pump.h"

#include <stdlib.h>
#include <string.h>

enum { BUCKETS = 4096, FIRST_SLOTS = 64 };

/* What the connection did since the set last looked: a reset (a new
 * backend), and the caller's transaction block begun or ended (its
 * COMMIT or ROLLBACK ends the members' transaction-scoped locks). While
 * statements are out libpq says ACTIVE: the block is as it was. */
static void observe(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_pq_pump_notice_reset(&s->pump_, now_ms);
    PGTransactionStatusType state = PQtransactionStatus(s->pump_.conn_);
    if (state == PQTRANS_IDLE || state == PQTRANS_INTRANS || state == PQTRANS_INERROR)
        advlock_conn_on_transaction(&s->pump_.engine_, state != PQTRANS_IDLE);
}

/* ---- the set ------------------------------------------------------------- */

static void free_tables(advlock_pq_lockset *s)
{
    free(s->buckets_);
    free(s->pump_.slots_);
    s->buckets_ = NULL;
    s->pump_.slots_ = NULL;
}

int advlock_pq_lockset_init(advlock_pq_lockset *set, PGconn *conn)
{
    if (set == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    memset(set, 0, sizeof *set);
    /* Inside a transaction block every member's statements would run in
     * the caller's transaction: one error, and all of them fail until it
     * ends. */
    if (PQstatus(conn) != CONNECTION_OK || !advlock_pq_conn_free(conn, NULL)
        || PQtransactionStatus(conn) != PQTRANS_IDLE)
        return ADVLOCK_EMISUSE;
    int was_nonblocking = PQisnonblocking(conn);
    if (PQsetnonblocking(conn, 1) != 0)
        return ADVLOCK_EMISUSE;
    set->buckets_ = calloc(BUCKETS, sizeof(advlock_peer *));
    advlock_conn_slot *slots = malloc(FIRST_SLOTS * sizeof *slots);
    int rc = set->buckets_ == NULL || slots == NULL ? ADVLOCK_ENOMEM
             : PQenterPipelineMode(conn) != 1       ? ADVLOCK_EMISUSE
                                                    : 0;
    if (rc != 0) {
        free(slots);
        free_tables(set);
        (void)PQsetnonblocking(conn, was_nonblocking);
        return rc;
    }
    (void)advlock_pq_pump_bind(&set->pump_, conn, slots, FIRST_SLOTS, 1, set->buckets_, BUCKETS,
                               ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    return 0;
}

void advlock_pq_lockset_finish(advlock_pq_lockset *set)
{
    if (set == NULL || set->pump_.slots_ == NULL)
        return;
    if (set->pump_.conn_ != NULL && advlock_conn_outstanding(&set->pump_.engine_) == 0)
        (void)PQexitPipelineMode(set->pump_.conn_);
    /* No member may be left busy or holding in an engine that is going:
     * each can start again in another set. */
    advlock_conn_forget(&set->pump_.engine_, advlock_pq_now_ms());
    advlock_pq_pump_take_events(&set->pump_);
    advlock_pq_answer_clear(&set->pump_.query_);
    free_tables(set);
    set->pump_.conn_ = NULL;
}

int advlock_pq_lockset_set_lease(advlock_pq_lockset *set, int64_t lease_ms, int64_t stop_ms)
{
    if (set == NULL)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    return advlock_conn_set_lease(&set->pump_.engine_, lease_ms, stop_ms);
}

int advlock_pq_lockset_set_capacity_share(advlock_pq_lockset *set, int percent)
{
    if (set == NULL || percent < 1 || percent > 100)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    return advlock_conn_set_capacity_share(&set->pump_.engine_, percent);
}

int advlock_pq_lockset_process(advlock_pq_lockset *set, unsigned ready, int64_t now_ms)
{
    if (set == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    observe(set, now_ms);
    advlock_pq_pump_turn(&set->pump_, ready, now_ms);
    return 0;
}

int advlock_pq_lockset_socket(const advlock_pq_lockset *set)
{
    return set != NULL && set->pump_.conn_ != NULL ? PQsocket(set->pump_.conn_) : -1;
}

unsigned advlock_pq_lockset_wants(const advlock_pq_lockset *set)
{
    return set != NULL ? advlock_pq_pump_wants(&set->pump_) : 0;
}

size_t advlock_pq_lockset_busy(const advlock_pq_lockset *set)
{
    return set != NULL ? advlock_conn_busy(&set->pump_.engine_) : 0;
}

const advlock_conn *advlock_pq_lockset_engine(const advlock_pq_lockset *set)
{
    return set != NULL ? &set->pump_.engine_ : NULL;
}

int advlock_pq_lockset_quiet(const advlock_pq_lockset *set)
{
    return set != NULL && set->pump_.conn_ != NULL
           && advlock_conn_outstanding(&set->pump_.engine_) == 0 && !set->pump_.reading_;
}

int advlock_pq_lockset_deadline(const advlock_pq_lockset *set, int64_t *at_ms)
{
    return set != NULL && at_ms != NULL && advlock_pq_pump_deadline(&set->pump_, at_ms);
}

/* ---- members ------------------------------------------------------------- */

void advlock_pq_member_init(advlock_pq_member *m)
{
    if (m == NULL)
        return;
    memset(m, 0, sizeof *m);
    advlock_member_init(&m->member_);
}

/* A member's operation started (rc 0): its report is the new one's, and
 * an operation that ended at once (its event) fills it. */
static int started(advlock_pq_lockset *set, advlock_pq_member *m, int rc)
{
    if (rc != 0)
        return rc;
    m->set_ = set;
    advlock_pq_report_begin(&m->report_);
    advlock_pq_pump_take_events(&set->pump_);
    return 0;
}

int advlock_pq_lockset_start_acquire_key(advlock_pq_lockset *set, advlock_pq_member *m, int64_t key,
                                         int64_t timeout_ms, const advlock_options *o,
                                         int64_t now_ms)
{
    if (set == NULL || m == NULL || timeout_ms < 0)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL || advlock_member_busy(&m->member_)
        || advlock_member_held(&m->member_))
        return ADVLOCK_EMISUSE;
    observe(set, now_ms);
    advlock_options chosen;
    if (o != NULL)
        chosen = *o;
    else
        advlock_options_init(&chosen);
    advlock_pq_seed_jitter(&chosen);
    /* A member of another set (one finished, or idle in it) joins this
     * one's engine afresh: the engine refuses another engine's member. */
    if (m->set_ != set)
        advlock_member_init(&m->member_);
    int rc = advlock_conn_start_acquire_key(&set->pump_.engine_, &m->member_, key, timeout_ms,
                                            &chosen, now_ms);
    return started(set, m, rc);
}

int advlock_pq_lockset_start_acquire(advlock_pq_lockset *set, advlock_pq_member *m,
                                     const char *name, size_t len, int64_t timeout_ms,
                                     const advlock_options *o, int64_t now_ms)
{
    int64_t key; /* a NULL name of len > 0: EINVAL from the derivation */
    int rc = advlock_derive_key(name, len, &key);
    return rc != 0 ? rc : advlock_pq_lockset_start_acquire_key(set, m, key, timeout_ms, o, now_ms);
}

/* Starts a release or a verify (verify) of the lock m holds. */
static int start_on_held(advlock_pq_lockset *set, advlock_pq_member *m, int verify, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ != NULL)
        observe(set, now_ms);
    if (set->pump_.conn_ == NULL || m->set_ != set)
        return ADVLOCK_EMISUSE;
    int rc = verify ? advlock_conn_start_verify(&set->pump_.engine_, &m->member_, now_ms)
                    : advlock_conn_start_release(&set->pump_.engine_, &m->member_, now_ms);
    return started(set, m, rc);
}

int advlock_pq_lockset_start_release(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    return start_on_held(set, m, 0, now_ms);
}

int advlock_pq_lockset_start_verify(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    return start_on_held(set, m, 1, now_ms);
}

int advlock_pq_lockset_start_release_key(advlock_pq_lockset *set, advlock_pq_member *m, int64_t key,
                                         const advlock_options *o, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    observe(set, now_ms);
    if (m->set_ != set)
        advlock_member_init(&m->member_);
    return started(
        set, m, advlock_conn_start_release_key(&set->pump_.engine_, &m->member_, key, o, now_ms));
}

int advlock_pq_lockset_cancel(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (m->set_ != set)
        return ADVLOCK_EMISUSE;
    int rc = advlock_conn_cancel(&set->pump_.engine_, &m->member_, now_ms);
    /* The engine tells no event of a cancel that ends m now; one of a wait
     * on the server, or of a transaction's try in flight, ends with its
     * answer, its DONE event coming then. */
    if (rc == 0 && !advlock_member_busy(&m->member_))
        advlock_pq_pump_take_done(m);
    advlock_pq_pump_take_events(&set->pump_);
    return rc;
}

int advlock_pq_member_busy(const advlock_pq_member *m)
{
    return m != NULL && advlock_member_busy(&m->member_);
}

int advlock_pq_member_held(const advlock_pq_member *m)
{
    return m != NULL && advlock_member_held(&m->member_);
}

int advlock_pq_member_lost(const advlock_pq_member *m)
{
    return m != NULL && advlock_member_lost(&m->member_);
}

const advlock_pq_report *advlock_pq_member_report(const advlock_pq_member *m)
{
    return m != NULL && advlock_member_report(&m->member_) != NULL ? &m->report_ : NULL;
}

/* ---- blocking ------------------------------------------------------------ */

int advlock_pq_lockset_wait(advlock_pq_lockset *set, int extra_fd, int max_wait_ms)
{
    if (set == NULL)
        return ADVLOCK_EINVAL;
    if (set->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    int64_t now = advlock_pq_now_ms();
    observe(set, now);
    return advlock_pq_pump_wait(&set->pump_, extra_fd, max_wait_ms, &now);
}

/* How long past its schedule a blocking call waits for the server: the
 * single adapter's grace plus the wait it gives its cancel request (see
 * ADVLOCK_PQ_GRACE_MS). A set sends no cancel request: it would cancel
 * whichever member's statement the server is running. */
static const int64_t NO_ANSWER_GRACE_MS = ADVLOCK_PQ_GRACE_MS + 500;

/* Drives the set until m's operation, which start_rc says started, ends;
 * one still waiting for the server bound_ms after its start (a statement
 * unanswered, or queued behind one) gives the connection up. */
static int run(advlock_pq_lockset *set, advlock_pq_member *m, int start_rc, int64_t started_ms,
               int64_t bound_ms, advlock_pq_report *report)
{
    if (start_rc != 0) {
        advlock_pq_report_refuse(report);
        return start_rc;
    }
    int64_t until = advlock_pq_add_ms(started_ms, bound_ms);
    while (advlock_pq_member_busy(m)) {
        int64_t now = advlock_pq_now_ms();
        int sleeping = advlock_member_sleeping(&m->member_);
        if (now >= until && !sleeping) {
            advlock_pq_pump_give_up(&set->pump_, now);
            break;
        }
        (void)advlock_pq_lockset_wait(set, -1, advlock_pq_wait_until(until, now));
    }
    advlock_pq_report_copy(report, &m->report_);
    return 0;
}

int advlock_pq_lockset_acquire(advlock_pq_lockset *set, advlock_pq_member *m, const char *name,
                               size_t len, int64_t timeout_ms, const advlock_options *o,
                               advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    int64_t now = advlock_pq_now_ms();
    return run(set, m, advlock_pq_lockset_start_acquire(set, m, name, len, timeout_ms, o, now), now,
               advlock_pq_add_ms(timeout_ms, NO_ANSWER_GRACE_MS), report);
}

int advlock_pq_lockset_release(advlock_pq_lockset *set, advlock_pq_member *m,
                               advlock_pq_report *report)
{
    if (report == NULL)
        return ADVLOCK_EINVAL;
    int64_t now = advlock_pq_now_ms();
    return run(set, m, advlock_pq_lockset_start_release(set, m, now), now, NO_ANSWER_GRACE_MS,
               report);
}
