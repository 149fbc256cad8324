/*
 * The single-lock adapter: the connection engine (advlock_conn, in the
 * core) with one member, pumped by pump.c over one PGconn, one statement
 * at a time, as a lock set is pumped. The engine owns every rule (the
 * session check and claim, the lease, the server-side wait and its cancel,
 * give-backs, a reset, a close); this file binds it to the connection,
 * tells it the transaction block before each operation, and answers the
 * loop's questions. The blocking calls (blocking.c) drive the same pump.
 */
#include "pump.h"

#include <string.h>

static advlock_conn *engine(advlock_pq *a)
{
    return &a->pump_.engine_;
}

static const advlock_conn *engine_of(const advlock_pq *a)
{
    return &a->pump_.engine_;
}

static advlock_member *member(advlock_pq *a)
{
    return &a->member_.member_;
}

/* Busy: the operation under way, or the statements it left in flight
 * (a cancelled try's prepare, a give-back) until they are answered; a
 * heartbeat for a held lock is the watch's, not an operation's, and one
 * left unanswered by a lost lock is the connection's to close. */
static int busy(const advlock_pq *a)
{
    const advlock_member *m = &a->member_.member_;
    /* Cheapest first: an operation's end leaves nothing outstanding. */
    return advlock_member_busy(m)
           || (advlock_conn_outstanding(&a->pump_.engine_) > 0 && a->pump_.conn_ != NULL
               && !advlock_member_held(m) && !advlock_member_lost(m));
}

void advlock_pq_engine_bind(advlock_pq *a, PGconn *conn)
{
    advlock_pq_member_init(&a->member_);
    advlock_options_init(&a->options_);
    (void)advlock_pq_pump_bind(&a->pump_, conn, a->slots_, ADVLOCK_PQ_SLOTS_, 0, &a->bucket_, 1,
                               ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL
                                   | ADVLOCK_CAPS_ONE_MEMBER);
    /* Notices, read while nothing runs (advlock_pq_check) too, count in
     * the one member's report and go to its event callback. */
    a->pump_.sink_ = &a->member_.report_;
    a->pump_.events_ = &a->member_.member_.machine_;
    advlock_pq_report_begin(&a->member_.report_);
}

int advlock_pq_async_init(advlock_pq *a, PGconn *conn)
{
    if (a == NULL || conn == NULL)
        return ADVLOCK_EINVAL;
    advlock_pq_engine_bind(a, NULL);
    if (PQstatus(conn) != CONNECTION_OK || PQsetnonblocking(conn, 1) != 0)
        return ADVLOCK_EMISUSE;
    advlock_pq_engine_bind(a, conn);
    return 0;
}

int advlock_pq_set_options(advlock_pq *a, const advlock_options *o)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->pump_.conn_ == NULL || busy(a))
        return ADVLOCK_EMISUSE;
    if (o == NULL)
        return ADVLOCK_EINVAL;
    advlock_options chosen = *o;
    advlock_pq_seed_jitter(&chosen);
    /* The machine judges the options (the engine does again at each
     * start, with the lease's fields its own). */
    advlock_machine judge;
    advlock_machine_init(&judge);
    int rc = advlock_set_options(&judge, &chosen);
    if (rc == 0)
        rc = advlock_conn_set_lease(engine(a), o->lease_ms, o->lease_stop_ms);
    if (rc != 0)
        return rc;
    chosen.lease_ms = 0;
    chosen.lease_stop_ms = 0;
    a->options_ = chosen;
    return 0;
}

/* 0 when an operation may start: bound, idle, the connection free of the
 * caller's statements (a heartbeat in flight is the engine's); tells the
 * engine of a reset and of the transaction block first. A held lock is let
 * go of, unless op_key is its key (a release or verify of it, or another
 * hold of it): the server session keeps it, the adapter stops watching. */
static int may_start(advlock_pq *a, const int64_t *op_key, int64_t now_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    PGconn *conn = a->pump_.conn_;
    int ours = advlock_conn_outstanding(engine(a)) > 0;
    int in_block = -1; /* unknown: the engine's statements still answering, or broken */
    if (conn == NULL || busy(a) || (!ours && !advlock_pq_conn_free(conn, &in_block)))
        return ADVLOCK_EMISUSE;
    /* Every call that moves the engine took its events before returning
     * (a reset's too): none wait here. */
    advlock_pq_pump_notice_reset(&a->pump_, now_ms);
    if (in_block >= 0)
        advlock_conn_on_transaction(engine(a), in_block);
    if (advlock_member_held(member(a)) && (op_key == NULL || *op_key != member(a)->key_))
        advlock_conn_let_go(engine(a), member(a));
    return 0;
}

/* Ends the watch of a lock whose release or verify failed; after every
 * turn of the pump. */
static void settle(advlock_pq *a)
{
    /* A failed release or verify leaves the engine's member holding in
     * doubt (no other member may take the key meanwhile); one lock alone
     * has no other member, and its watch ends with the operation. */
    if (advlock_member_held(member(a))
        && advlock_member_report(member(a))->outcome == ADVLOCK_FAILED)
        advlock_conn_let_go(engine(a), member(a));
}

/* One turn of the pump at now, settled. */
static void turn(advlock_pq *a, unsigned ready, int64_t now_ms)
{
    advlock_pq_pump_turn(&a->pump_, ready, now_ms);
    settle(a);
}

/* What start_rc says the engine started begins now: the report is the new
 * operation's, and its first statement goes at once. The turn's end takes
 * the start's events (an operation over at once) with its own, in order. */
static int started(advlock_pq *a, int start_rc, int64_t now_ms)
{
    if (start_rc != 0)
        return start_rc;
    advlock_pq_report_begin(&a->member_.report_);
    turn(a, 0, now_ms);
    return 0;
}

int advlock_pq_async_start_acquire_key(advlock_pq *a, int64_t key, int64_t timeout_ms,
                                       int64_t now_ms)
{
    int rc = may_start(a, NULL, now_ms);
    if (rc != 0)
        return rc;
    return started(
        a,
        advlock_conn_start_acquire_key(engine(a), member(a), key, timeout_ms, &a->options_, now_ms),
        now_ms);
}

int advlock_pq_async_start_acquire(advlock_pq *a, const char *lock_key, size_t len,
                                   int64_t timeout_ms, int64_t now_ms)
{
    int64_t key; /* a NULL name of len > 0: EINVAL from the derivation */
    int rc = a == NULL ? ADVLOCK_EINVAL : advlock_derive_key(lock_key, len, &key);
    return rc != 0 ? rc : advlock_pq_async_start_acquire_key(a, key, timeout_ms, now_ms);
}

/* Starts a release or a verify (verify) of key. */
static int start_by_key(advlock_pq *a, int64_t key, int verify, int64_t now_ms)
{
    int rc = may_start(a, &key, now_ms);
    if (rc != 0)
        return rc;
    rc = verify ? advlock_conn_start_verify_key(engine(a), member(a), key, &a->options_, now_ms)
                : advlock_conn_start_release_key(engine(a), member(a), key, &a->options_, now_ms);
    return started(a, rc, now_ms);
}

int advlock_pq_async_start_release_key(advlock_pq *a, int64_t key, int64_t now_ms)
{
    return start_by_key(a, key, 0, now_ms);
}

int advlock_pq_async_start_release(advlock_pq *a, const char *lock_key, size_t len, int64_t now_ms)
{
    int64_t key;
    int rc = a == NULL ? ADVLOCK_EINVAL : advlock_derive_key(lock_key, len, &key);
    return rc != 0 ? rc : start_by_key(a, key, 0, now_ms);
}

int advlock_pq_async_start_verify_key(advlock_pq *a, int64_t key, int64_t now_ms)
{
    return start_by_key(a, key, 1, now_ms);
}

int advlock_pq_proxied(const advlock_pq *a)
{
    return a != NULL && advlock_conn_session(engine_of(a))->proxied;
}

uint64_t advlock_pq_session_token(const advlock_pq *a)
{
    return a != NULL ? advlock_conn_session(engine_of(a))->token : 0;
}

int advlock_pq_async_cancel(advlock_pq *a, int64_t now_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    if (a->pump_.conn_ == NULL || !busy(a))
        return ADVLOCK_EMISUSE;
    /* Ended already, its statements still answering: cancelling twice is
     * harmless. */
    if (!advlock_member_busy(member(a)))
        return 0;
    int rc = advlock_conn_cancel(engine(a), member(a), now_ms);
    if (rc != 0)
        return rc;
    advlock_pq_pump_take_done(&a->member_); /* the engine tells no event of a cancel */
    turn(a, 0, now_ms);                     /* a server-side wait's cancel request */
    return 0;
}

void advlock_pq_engine_watch(advlock_pq *a, int64_t now_ms)
{
    advlock_pq_pump_notice_reset(&a->pump_, now_ms);
    turn(a, ADVLOCK_PQ_READ, now_ms);
}

int advlock_pq_async_process(advlock_pq *a, unsigned ready, int64_t now_ms)
{
    if (a == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (a->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    if (!busy(a) && !advlock_member_held(member(a)) && advlock_conn_outstanding(engine(a)) == 0)
        return ADVLOCK_EMISUSE;
    advlock_pq_pump_notice_reset(&a->pump_, now_ms);
    turn(a, ready, now_ms);
    return 0;
}

int advlock_pq_wait(advlock_pq *a, int extra_fd, int max_wait_ms)
{
    if (a == NULL)
        return ADVLOCK_EINVAL;
    int64_t now = advlock_pq_now_ms();
    if (a->pump_.conn_ != NULL)
        advlock_pq_pump_notice_reset(&a->pump_, now); /* the caller's PQreset*() */
    return advlock_pq_engine_wait(a, extra_fd, max_wait_ms, &now);
}

int advlock_pq_engine_wait(advlock_pq *a, int extra_fd, int max_wait_ms, int64_t *now_ms)
{
    if (a->pump_.conn_ == NULL)
        return ADVLOCK_EMISUSE;
    int extra = advlock_pq_pump_wait(&a->pump_, extra_fd, max_wait_ms, now_ms);
    settle(a);
    return extra;
}

int advlock_pq_async_socket(const advlock_pq *a)
{
    return a != NULL && a->pump_.conn_ != NULL ? PQsocket(a->pump_.conn_) : -1;
}

unsigned advlock_pq_async_wants(const advlock_pq *a)
{
    return a != NULL ? advlock_pq_pump_wants(&a->pump_) : 0;
}

int advlock_pq_async_deadline(const advlock_pq *a, int64_t *at_ms)
{
    return a != NULL && at_ms != NULL && a->pump_.conn_ != NULL
           && advlock_pq_pump_deadline(&a->pump_, at_ms);
}

int advlock_pq_lease_deadline(const advlock_pq *a, int64_t *stop_at_ms, int64_t *free_by_ms)
{
    return a != NULL ? advlock_conn_lease_deadline(engine_of(a), stop_at_ms, free_by_ms) : 0;
}

int advlock_pq_async_busy(const advlock_pq *a)
{
    return a != NULL && busy(a);
}

int advlock_pq_async_lost(advlock_pq *a)
{
    if (a == NULL)
        return 0;
    if (a->pump_.conn_ != NULL)
        advlock_pq_pump_notice_reset(&a->pump_, advlock_pq_now_ms());
    /* A lock let go of after a failed release or verify is not watched:
     * its loss is no news (the report stays the operation's). */
    return advlock_member_lost(member(a)) && a->member_.report_.lock.detail == ADVLOCK_DETAIL_LOST;
}

const advlock_pq_report *advlock_pq_async_report(const advlock_pq *a)
{
    return a != NULL && !busy(a) ? advlock_pq_member_report(&a->member_) : NULL;
}

const advlock_machine *advlock_pq_async_machine(const advlock_pq *a)
{
    return a != NULL ? &a->member_.member_.machine_ : NULL;
}

int advlock_pq_engine_in_flight(const advlock_pq *a)
{
    return advlock_conn_outstanding(engine_of(a)) > 0;
}

void advlock_pq_engine_cancel_in_flight(advlock_pq *a, int64_t now_ms)
{
    char error[ADVLOCK_PQ_TEXT_MAX];
    if (!advlock_pq_cancel_send(a->pump_.conn_, error, sizeof error))
        advlock_conn_on_cancel_failed(engine(a), member(a), error, now_ms);
    advlock_pq_pump_take_events(&a->pump_);
}

void advlock_pq_engine_give_up(advlock_pq *a, int64_t now_ms)
{
    advlock_pq_pump_give_up(&a->pump_, now_ms);
}
