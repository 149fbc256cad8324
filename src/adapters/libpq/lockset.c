/*
 * Lock sets: the API over one connection engine (advlock_conn, in the core,
 * owns every rule: members, their exclusion, the session check, the lease,
 * the lock table's share, batches, give-backs). This file binds the engine
 * to a PGconn, starts and cancels members' operations, answers the loop's
 * questions and drives the blocking calls; pipeline.c pumps statements and
 * answers. docs/libpq.md, "Lock sets".
 */
#include "lockset.h"

#include <stdlib.h>
#include <string.h>

enum { BUCKETS = 4096, FIRST_SLOTS = 64 };

/* ---- the set ------------------------------------------------------------- */

static void free_tables(advlock_pq_lockset *s)
{
    free(s->buckets_);
    free(s->slots_);
    s->buckets_ = NULL;
    s->slots_ = NULL;
}

int advlock_pq_lockset_init(advlock_pq_lockset *set, PGconn *conn)
{
    if (set == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    memset(set, 0, sizeof *set);
    /* Inside a transaction block every member's statements would run in
     * the caller's transaction: one error, and all of them fail until it
     * ends. */
    if (PQstatus(conn) != CONNECTION_OK || !advlock_pq_conn_free(conn)
        || PQtransactionStatus(conn) != PQTRANS_IDLE)
        return ADVLOCK_EMISUSE;
    int was_nonblocking = PQisnonblocking(conn);
    if (PQsetnonblocking(conn, 1) != 0)
        return ADVLOCK_EMISUSE;
    set->buckets_ = calloc(BUCKETS, sizeof(advlock_peer *));
    set->slots_ = malloc(FIRST_SLOTS * sizeof *set->slots_);
    int rc = set->buckets_ == NULL || set->slots_ == NULL ? ADVLOCK_ENOMEM
             : PQenterPipelineMode(conn) != 1             ? ADVLOCK_EMISUSE
                                                          : 0;
    if (rc != 0) {
        free_tables(set);
        (void)PQsetnonblocking(conn, was_nonblocking);
        return rc;
    }
    (void)advlock_conn_init(&set->engine_, set->slots_, FIRST_SLOTS, set->buckets_, BUCKETS,
                            PQbackendPID(conn), advlock_pq_entropy() | 1,
                            ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE);
    advlock_pq_report_begin(&set->notices_);
    set->conn_ = conn;
    return 0;
}

void advlock_pq_lockset_finish(advlock_pq_lockset *set)
{
    if (set == NULL || set->slots_ == NULL)
        return;
    if (set->conn_ != NULL && advlock_conn_outstanding(&set->engine_) == 0)
        (void)PQexitPipelineMode(set->conn_);
    /* No member may be left busy or holding in an engine that is going:
     * each can start again in another set. */
    advlock_conn_forget(&set->engine_, advlock_pq_now_ms());
    advlock_pq_ls_take_events(set);
    advlock_pq_answer_clear(&set->query_);
    free_tables(set);
    set->conn_ = NULL;
}

int advlock_pq_lockset_set_lease(advlock_pq_lockset *set, int64_t lease_ms, int64_t stop_ms)
{
    if (set == NULL)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    return advlock_conn_set_lease(&set->engine_, lease_ms, stop_ms);
}

int advlock_pq_lockset_set_capacity_share(advlock_pq_lockset *set, int percent)
{
    if (set == NULL || percent < 1 || percent > 100)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    return advlock_conn_set_capacity_share(&set->engine_, percent);
}

int advlock_pq_lockset_process(advlock_pq_lockset *set, unsigned ready, int64_t now_ms)
{
    if (set == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    advlock_pq_ls_notice_reset(set, now_ms);
    advlock_pq_ls_pump(set, ready, now_ms);
    return 0;
}

int advlock_pq_lockset_socket(const advlock_pq_lockset *set)
{
    return set != NULL && set->conn_ != NULL ? PQsocket(set->conn_) : -1;
}

unsigned advlock_pq_lockset_wants(const advlock_pq_lockset *set)
{
    if (set == NULL || set->conn_ == NULL)
        return 0;
    if (set->flushing_ || advlock_conn_wants_send(&set->engine_))
        return ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE;
    return advlock_conn_watching(&set->engine_) ? ADVLOCK_PQ_READ : 0;
}

size_t advlock_pq_lockset_busy(const advlock_pq_lockset *set)
{
    return set != NULL ? advlock_conn_busy(&set->engine_) : 0;
}

int advlock_pq_lockset_deadline(const advlock_pq_lockset *set, int64_t *at_ms)
{
    if (set == NULL || at_ms == NULL)
        return 0;
    int64_t at = advlock_conn_next_wake(&set->engine_);
    if (at == INT64_MAX)
        return 0;
    *at_ms = at;
    return 1;
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
    advlock_pq_ls_take_events(set);
    return 0;
}

int advlock_pq_lockset_start_acquire_key(advlock_pq_lockset *set, advlock_pq_member *m, int64_t key,
                                         int64_t timeout_ms, const advlock_options *o,
                                         int64_t now_ms)
{
    /* Every member shares the set's one transaction, which any caller's
     * commit would end (docs/design.md, "Session scope, polling only"). */
    if (set == NULL || m == NULL || timeout_ms < 0 || (o != NULL && o->scope != ADVLOCK_SESSION))
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL || advlock_member_busy(&m->member_) || advlock_member_held(&m->member_))
        return ADVLOCK_EMISUSE;
    advlock_pq_ls_notice_reset(set, now_ms);
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
    int rc = advlock_conn_start_acquire_key(&set->engine_, &m->member_, key, timeout_ms, &chosen,
                                            now_ms);
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
    if (set->conn_ != NULL)
        advlock_pq_ls_notice_reset(set, now_ms);
    if (set->conn_ == NULL || m->set_ != set)
        return ADVLOCK_EMISUSE;
    int rc = verify ? advlock_conn_start_verify(&set->engine_, &m->member_, now_ms)
                    : advlock_conn_start_release(&set->engine_, &m->member_, now_ms);
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

int advlock_pq_lockset_cancel(advlock_pq_lockset *set, advlock_pq_member *m, int64_t now_ms)
{
    if (set == NULL || m == NULL)
        return ADVLOCK_EINVAL;
    if (m->set_ != set)
        return ADVLOCK_EMISUSE;
    int rc = advlock_conn_cancel(&set->engine_, &m->member_, now_ms);
    if (rc == 0)
        advlock_pq_ls_take_done(m); /* the engine tells no event of a cancel */
    advlock_pq_ls_take_events(set);
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
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    int64_t now = advlock_pq_now_ms();
    advlock_pq_ls_notice_reset(set, now);
    int64_t at;
    int has_deadline = advlock_pq_lockset_deadline(set, &at);
    advlock_pq_turn turn;
    if (advlock_pq_wait_turn(advlock_pq_lockset_busy(set) > 0, advlock_pq_lockset_socket(set),
                             advlock_pq_lockset_wants(set), has_deadline ? &at : NULL, extra_fd,
                             max_wait_ms, now, &turn))
        (void)advlock_pq_lockset_process(set, turn.ready, turn.now_ms);
    return turn.extra;
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
            advlock_pq_ls_give_up(set, now);
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
