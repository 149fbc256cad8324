/*
 * Lock sets, the connection's side: one PGconn in libpq's pipeline mode
 * carrying many members' statements. Each statement sent is an entry in a
 * ring, oldest first; answers come back in that order, so the ring's head
 * says whose the next results are. Statements are sent in batches (all
 * the members waiting when the set gets to send), each batch ended by one
 * PQpipelineSync(), which is its own entry.
 *
 * An error inside a batch makes the server skip the rest of it: libpq
 * reports those statements PGRES_PIPELINE_ABORTED, and the set simply sends
 * them again in the next batch, so one member's failure never becomes
 * another's. Session advisory locks ignore the batch's implicit transaction
 * (a grant before the error stays granted), which is why a batch can hold
 * any members' statements. The session check goes alone (its claim is a
 * setting, which an aborted batch would roll back); behind a proxy every
 * statement goes alone, since a transaction-pooling proxy may hand a batch
 * to another server session. A fenced try goes in a batch of its own too.
 *
 * Statements go prepared: the first use of a statement sends its PREPARE
 * (the set's own entry) ahead of it in the same batch.
 */
#include "lockset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUCKETS = 4096, FIRST_RING = 64 };

/* ---- the ring ------------------------------------------------------------ */

static advlock_pq_entry_ *ring_at(const advlock_pq_lockset *s, size_t i)
{
    return &s->ring_[(s->ring_head_ + i) & (s->ring_size_ - 1)];
}

/* Makes room for n more entries; 0: out of memory, nothing changed. */
static int ring_room(advlock_pq_lockset *s, size_t n)
{
    while (s->ring_count_ + n > s->ring_size_) {
        size_t size = s->ring_size_ > 0 ? s->ring_size_ * 2 : FIRST_RING;
        advlock_pq_entry_ *bigger = malloc(size * sizeof *bigger);
        if (bigger == NULL)
            return 0;
        for (size_t i = 0; i < s->ring_count_; i++)
            bigger[i] = *ring_at(s, i);
        free(s->ring_);
        s->ring_ = bigger;
        s->ring_head_ = 0;
        s->ring_size_ = size;
    }
    return 1;
}

/* Appends e, in room made before. */
static void ring_push(advlock_pq_lockset *s, const advlock_pq_entry_ *e)
{
    s->ring_[(s->ring_head_ + s->ring_count_) & (s->ring_size_ - 1)] = *e;
    s->ring_count_++;
}

static advlock_pq_entry_ ring_pop(advlock_pq_lockset *s)
{
    advlock_pq_entry_ e = *ring_at(s, 0);
    s->ring_head_ = (s->ring_head_ + 1) & (s->ring_size_ - 1);
    s->ring_count_--;
    return e;
}

/* Takes p out of the table and puts a copy of the set's in its place, in
 * p's state (the key stays taken exactly as it was); NULL: out of memory,
 * nothing changed. */
static advlock_pq_kept_ *keep_peer(advlock_pq_lockset *s, advlock_peer *p, int64_t key,
                                   advlock_mode mode)
{
    advlock_pq_kept_ *kept = malloc(sizeof *kept);
    if (kept == NULL)
        return NULL;
    memset(kept, 0, sizeof *kept);
    advlock_peer_init(&kept->peer);
    kept->key = key;
    int held = advlock_peer_state(p) == ADVLOCK_PEER_HELD;
    (void)advlock_peers_leave(&s->peers_, p);
    (void)advlock_peers_ask(&s->peers_, &kept->peer, key, mode); /* p's place: free */
    if (held)
        (void)advlock_peers_granted(&s->peers_, &kept->peer);
    return kept;
}

static void forget_kept(advlock_pq_lockset *s, advlock_pq_kept_ *kept)
{
    (void)advlock_peers_leave(&s->peers_, &kept->peer);
    free(kept);
}

/* The set's place in the table ends: the statement that kept it answered. */
static void drop_peer(advlock_pq_lockset *s, advlock_pq_entry_ *e)
{
    if (e->kept_ == NULL)
        return;
    forget_kept(s, e->kept_);
    e->kept_ = NULL;
}

/* Forgets the give-backs owed: the session that held their grants is gone
 * (or the connection given up, whose end frees them). */
static void drop_owed(advlock_pq_lockset *s)
{
    while (s->owed_ != NULL) {
        advlock_pq_kept_ *next = s->owed_->next;
        forget_kept(s, s->owed_);
        s->owed_ = next;
    }
}

int advlock_pq_ls_detach(advlock_pq_lockset *s, advlock_pq_member *m)
{
    for (size_t i = 0; i < s->ring_count_; i++) {
        advlock_pq_entry_ *e = ring_at(s, i);
        if (e->kind_ != LS_MEMBER || e->member_ != m)
            continue;
        advlock_mode mode;
        if (advlock_peer_state(&m->peer_) != ADVLOCK_PEER_OUT
            && advlock_pq_ls_try_mode(e->sql_, &mode)) {
            /* The server may grant the try for this session until it has
             * answered: the key stays taken till then (and till a grant's
             * give-back has answered), though m may go at once. */
            e->kept_ = keep_peer(s, &m->peer_, e->key_, mode);
            if (e->kept_ == NULL)
                return ADVLOCK_ENOMEM;
        }
        e->kind_ = LS_DETACHED;
        e->member_ = NULL;
    }
    return 0;
}

/* Forgets every statement in flight, and the places in the table they kept. */
static void drop_ring(advlock_pq_lockset *s)
{
    while (s->ring_count_ > 0) {
        advlock_pq_entry_ e = ring_pop(s);
        drop_peer(s, &e);
    }
}

/* Ends every member's operation under way with outcome and failure. */
static void end_under_way(advlock_pq_lockset *s, advlock_outcome outcome, int failure,
                          int64_t now_ms)
{
    for (size_t i = 0; i < s->ring_count_; i++) {
        advlock_pq_entry_ *e = ring_at(s, i);
        if (e->kind_ == LS_MEMBER)
            advlock_pq_ls_end(s, e->member_, outcome, failure, now_ms);
    }
    static const int waiting[] = {LS_PENDING_LIST, LS_QUEUE_LIST, LS_SLEEP_LIST};
    for (size_t i = 0; i < sizeof waiting / sizeof waiting[0]; i++)
        while (s->lists_[waiting[i]] != NULL)
            advlock_pq_ls_end(s, s->lists_[waiting[i]], outcome, failure, now_ms);
}

void advlock_pq_ls_give_up(advlock_pq_lockset *s, int64_t now_ms)
{
    end_under_way(s, ADVLOCK_FAILED, ADVLOCK_ENOANSWER, now_ms);
    advlock_pq_ls_lose_held(s, "",
                            "the server did not answer: the connection is given up and must be "
                            "closed, which ends the session and its locks",
                            ADVLOCK_LEASE_LIVE, now_ms);
    advlock_pq_answer_clear(&s->query_);
    drop_ring(s);
    drop_owed(s);
    s->conn_ = NULL;
}

size_t advlock_pq_ls_members_in_flight(const advlock_pq_lockset *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ring_count_; i++)
        n += ring_at(s, i)->kind_ == LS_MEMBER;
    return n;
}

/* ---- sending ------------------------------------------------------------- */

int advlock_pq_ls_send_entry(advlock_pq_lockset *s, advlock_pq_entry_ *e, const advlock_action *act,
                             int64_t now_ms)
{
    e->sent_ms_ = now_ms;
    advlock_pq_query_ q;
    memset(&q, 0, sizeof q);
    q.sql_ = e->sql_;
    q.form_ = e->form_;
    /* Room for the batch's sync too, so that it can always be sent. */
    if (!ring_room(s, 2) || !advlock_pq_query_send(&q, s->conn_, act))
        return 0;
    ring_push(s, e);
    s->unsynced_ = 1;
    return 1;
}

/* The form of sql on this connection; a statement not yet prepared gets
 * its PREPARE sent first. */
static uint8_t choose_form(advlock_pq_lockset *s, const advlock_action *act)
{
    advlock_sql sql = act->sql;
    if (s->session_.proxied || sql == ADVLOCK_SQL_SESSION
        || (s->unnamed_ & advlock_pq_sql_bit(sql)))
        return ADVLOCK_PQ_EXECUTE_UNNAMED;
    if (!(s->prepared_ & advlock_pq_sql_bit(sql)) && !(s->preparing_ & advlock_pq_sql_bit(sql))) {
        advlock_pq_entry_ prepare = {
            NULL, NULL, 0, 0, LS_PREPARE, (uint8_t)sql, ADVLOCK_PQ_PREPARE};
        if (advlock_pq_ls_send_entry(s, &prepare, act, 0))
            s->preparing_ |= advlock_pq_sql_bit(sql);
    }
    return ADVLOCK_PQ_EXECUTE_NAMED;
}

/* A statement that could not go: its answer is libpq's reason, at once. */
static void not_sent(advlock_pq_lockset *s, advlock_pq_member *m, int64_t now_ms)
{
    const char *why =
        PQstatus(s->conn_) == CONNECTION_BAD ? PQerrorMessage(s->conn_) : "out of memory";
    advlock_pq_copy_line(m->report_.server_message, sizeof m->report_.server_message, why);
    (void)advlock_peers_leave(&s->peers_, &m->peer_);
    (void)advlock_on_result(&m->machine_, ADVLOCK_RESULT_CONNECTION_LOST, NULL,
                            m->report_.server_message, now_ms);
    advlock_pq_ls_follow(s, m, now_ms);
}

/* The lock table's settings are read once per server session, ahead of
 * its session check and in the same batch (the check goes out before any
 * try, so the settings are known before the first), unprepared as the
 * check is. */
static void ask_capacity(advlock_pq_lockset *s, const advlock_action *act)
{
    if (act->sql != ADVLOCK_SQL_SESSION || s->capacity_read_ != LS_CAPACITY_UNREAD)
        return;
    advlock_action read;
    memset(&read, 0, sizeof read);
    read.kind = ADVLOCK_ACTION_QUERY;
    read.sql = ADVLOCK_SQL_CAPACITY;
    advlock_pq_entry_ e = {
        NULL, NULL, 0, 0, LS_CAPACITY, ADVLOCK_SQL_CAPACITY, ADVLOCK_PQ_EXECUTE_UNNAMED};
    if (advlock_pq_ls_send_entry(s, &e, &read, 0))
        s->capacity_read_ = LS_CAPACITY_ASKED;
}

/* The settings' answer. A server that did not give them (an error, or a
 * row out of range) is taken for one with PostgreSQL's defaults, 64 x
 * (100 + 0): the set holds a share of those rather than no limit. */
static void capacity_answered(advlock_pq_lockset *s, const advlock_pq_query_ *q)
{
    if (q->result_ == ADVLOCK_RESULT_CONNECTION_LOST || q->status_ == PGRES_PIPELINE_ABORTED) {
        s->capacity_read_ = LS_CAPACITY_UNREAD; /* asked again with the next check */
        return;
    }
    if (advlock_pq_answer_capacity(q, s->capacity_share_, &s->capacity_) != 0)
        (void)advlock_capacity_init(&s->capacity_, 64, 100, 0, s->capacity_share_);
    s->capacity_read_ = LS_CAPACITY_READ;
}

static void send_member(advlock_pq_lockset *s, advlock_pq_member *m, const advlock_action *act,
                        int64_t now_ms)
{
    ask_capacity(s, act);
    advlock_pq_entry_ e = {m, NULL, act->param, 0, LS_MEMBER, (uint8_t)act->sql, 0};
    e.form_ = choose_form(s, act);
    if (advlock_pq_ls_send_entry(s, &e, act, now_ms))
        advlock_pq_ls_move(s, m, LS_SENT);
    else
        not_sent(s, m, now_ms);
}

/* One statement at a time where batches are not safe: behind a proxy,
 * for the session check, which finds out whether there is one, and for
 * the lease's setup, which the first try must wait for. */
static int batch_closed(const advlock_pq_lockset *s)
{
    return s->ring_count_ > 0
           && (s->session_.proxied || !s->session_.checked || s->lease_query_ == LS_LEASE_SETUP);
}

/* Sends what the queued members' machines ask for. */
static void send_queued(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_pq_member *m;
    while ((m = s->lists_[LS_QUEUE_LIST]) != NULL && !batch_closed(s)) {
        advlock_action act = advlock_next_action(&m->machine_);
        if (act.kind == ADVLOCK_ACTION_QUERY && advlock_pq_ls_lease_needs_setup(s, &act)) {
            advlock_pq_ls_lease_setup(s, now_ms); /* m waits for it, queued */
            continue;
        }
        advlock_pq_ls_move(s, m, LS_IDLE); /* out of the queue */
        if (act.kind != ADVLOCK_ACTION_QUERY) {
            advlock_pq_ls_follow(s, m, now_ms);
            continue;
        }
        if (!advlock_pq_ls_may_send(s, m, &act, now_ms))
            continue;
        /* A fenced try writes its token in the batch's implicit transaction,
         * which a later failure in the batch would roll back after the
         * token was handed out: it goes in a batch of its own. */
        int alone = act.sql == ADVLOCK_SQL_TRY_LOCK_FENCED;
        if (alone)
            advlock_pq_ls_end_batch(s);
        send_member(s, m, &act, now_ms);
        if (alone)
            advlock_pq_ls_end_batch(s);
    }
}

/* Ends the batch sent since the last sync (members' statements, the set's
 * give-backs) with a sync, and hands libpq's output to the socket. */
void advlock_pq_ls_end_batch(advlock_pq_lockset *s)
{
    if (s->unsynced_) {
        advlock_pq_entry_ sync = {NULL, NULL, 0, 0, LS_SYNC, 0, 0};
        int synced = PQpipelineSync(s->conn_) == 1;
        if (synced)
            ring_push(s, &sync); /* in the room its batch's statements made */
        /* Refused on a sound connection (libpq's memory ran out): again at
         * the next turn; a broken one answers the batch lost. */
        s->unsynced_ = !synced && PQstatus(s->conn_) == CONNECTION_OK;
    }
    s->flushing_ = PQflush(s->conn_) == 1;
}

/* The unlock that gives back a grant of the try-lock try_sql. */
static advlock_sql unlock_of(int try_sql)
{
    switch (try_sql) {
    case ADVLOCK_SQL_TRY_LOCK_SHARED: return ADVLOCK_SQL_UNLOCK_SHARED;
    case ADVLOCK_SQL_TRY_LOCK_GUARDED: return ADVLOCK_SQL_UNLOCK_GUARDED;
    case ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED: return ADVLOCK_SQL_UNLOCK_SHARED_GUARDED;
    default: return ADVLOCK_SQL_UNLOCK; /* plain and fenced */
    }
}

/* A detached member's grant is given back with kept's unlock: the server
 * counts holds per session, so this takes back exactly the one granted.
 * kept, the set's place in the table for it, stays HELD until the unlock's
 * answer. An unlock that cannot go on a sound connection is owed, sent
 * again at the set's next turn; a broken connection's session took the
 * grant with it. */
static void give_back(advlock_pq_lockset *s, advlock_pq_kept_ *kept)
{
    advlock_action act;
    memset(&act, 0, sizeof act);
    act.kind = ADVLOCK_ACTION_QUERY;
    act.sql = (advlock_sql)kept->unlock_sql;
    act.param = kept->key;
    act.param2 = (int64_t)s->session_.token;
    advlock_pq_entry_ e = {
        NULL, kept, kept->key, 0, LS_GIVE_BACK, kept->unlock_sql, ADVLOCK_PQ_EXECUTE_UNNAMED};
    if (advlock_pq_ls_send_entry(s, &e, &act, 0))
        return;
    if (PQstatus(s->conn_) == CONNECTION_OK) {
        kept->next = s->owed_;
        s->owed_ = kept;
    } else {
        drop_peer(s, &e);
    }
}

static void send_owed(advlock_pq_lockset *s)
{
    advlock_pq_kept_ *kept = s->owed_;
    s->owed_ = NULL;
    while (kept != NULL) {
        advlock_pq_kept_ *next = kept->next;
        give_back(s, kept); /* owed again if it still cannot go */
        kept = next;
    }
}

/* ---- answers ------------------------------------------------------------- */

/* The head entry's results are all in (or the connection broke): q holds
 * its answer. */
static void complete(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_pq_query_ *q = &s->query_;
    advlock_pq_entry_ e = ring_pop(s);
    if (!s->reading_) {
        advlock_pq_answer_clear(q);
        q->sql_ = e.sql_;
        q->form_ = e.form_;
    }
    s->reading_ = 0;
    advlock_pq_answer_end(q, s->conn_);
    int lost = q->result_ == ADVLOCK_RESULT_CONNECTION_LOST;
    /* Skipped after an error earlier in the batch, or a prepared statement
     * someone dropped: the statement never ran; it goes again. */
    int again = !lost
                && (q->status_ == PGRES_PIPELINE_ABORTED
                    || (e.form_ == ADVLOCK_PQ_EXECUTE_NAMED && strcmp(q->sqlstate_, "26000") == 0));
    if (!lost && e.form_ == ADVLOCK_PQ_EXECUTE_NAMED && strcmp(q->sqlstate_, "26000") == 0) {
        s->prepared_ &= ~advlock_pq_sql_bit(e.sql_);
        s->unnamed_ |= advlock_pq_sql_bit(e.sql_);
    }
    switch (e.kind_) {
    case LS_PREPARE:
        s->preparing_ &= ~advlock_pq_sql_bit(e.sql_);
        /* 42P05: prepared already, by another adapter on this connection. */
        if (q->status_ == PGRES_COMMAND_OK || strcmp(q->sqlstate_, "42P05") == 0)
            s->prepared_ |= advlock_pq_sql_bit(e.sql_);
        else if (!again && !lost)
            s->unnamed_ |= advlock_pq_sql_bit(e.sql_);
        break;
    case LS_GIVE_BACK:
        if (again) {
            give_back(s, e.kept_);
            e.kept_ = NULL;
        }
        break;
    case LS_DETACHED:
        if (e.sql_ == ADVLOCK_SQL_SESSION)
            advlock_pq_ls_session_answered(s, now_ms);
        else if (e.kept_ != NULL && q->result_ == ADVLOCK_RESULT_TRUE) { /* a try's */
            (void)advlock_peers_granted(&s->peers_, &e.kept_->peer);
            e.kept_->unlock_sql = (uint8_t)unlock_of(e.sql_);
            give_back(s, e.kept_);
            e.kept_ = NULL;
        }
        break;
    case LS_MEMBER:
        if (again)
            advlock_pq_ls_move(s, e.member_, LS_QUEUED);
        else
            advlock_pq_ls_answered(s, e.member_, q, e.sent_ms_, now_ms);
        break;
    case LS_LEASE: advlock_pq_ls_lease_answered(s, q, now_ms); break;
    case LS_CAPACITY: capacity_answered(s, q); break;
    default: break;
    }
    drop_peer(s, &e);
    advlock_pq_answer_clear(q);
}

/* Reads the answers that have arrived, in order, without blocking. */
static void collect(advlock_pq_lockset *s, int64_t now_ms)
{
    while (s->ring_count_ > 0) {
        advlock_pq_entry_ *head = ring_at(s, 0);
        if (PQstatus(s->conn_) == CONNECTION_BAD) {
            complete(s, now_ms); /* answered CONNECTION_LOST */
            continue;
        }
        if (PQisBusy(s->conn_))
            return;
        PGresult *res = PQgetResult(s->conn_);
        if (head->kind_ == LS_SYNC) {
            if (res == NULL)
                return; /* not yet */
            /* The batch's end; never followed by a NULL. */
            PQclear(res);
            (void)ring_pop(s);
            continue;
        }
        if (res == NULL) {
            complete(s, now_ms);
            continue;
        }
        if (!s->reading_) {
            advlock_pq_answer_clear(&s->query_);
            s->query_.sql_ = head->sql_;
            s->query_.form_ = head->form_;
            s->reading_ = 1;
        }
        advlock_pq_answer_read(&s->query_, s->conn_, res);
    }
}

/* ---- the connection ------------------------------------------------------ */

static uint64_t new_token(void)
{
    return advlock_pq_entropy() | 1;
}

void advlock_pq_ls_notice_reset(advlock_pq_lockset *s, int64_t now_ms)
{
    PGconn *c = s->conn_;
    if (PQstatus(c) != CONNECTION_OK || PQbackendPID(c) == s->session_.client_pid)
        return;
    char words[160];
    snprintf(words, sizeof words,
             "the connection was reset: server session %d, which held it, was replaced by %d",
             s->session_.client_pid, PQbackendPID(c));
    /* The new session first, so that members restarted below check it. */
    (void)advlock_session_init(&s->session_, PQbackendPID(c), new_token());
    s->prepared_ = s->unnamed_ = s->preparing_ = 0;
    s->unsynced_ = s->flushing_ = 0;
    s->capacity_read_ = LS_CAPACITY_UNREAD;
    (void)PQsetnonblocking(c, 1);
    if (PQpipelineStatus(c) == PQ_PIPELINE_OFF)
        (void)PQenterPipelineMode(c);
    advlock_pq_ls_lease_restart(s);
    drop_owed(s);
    /* The old session's statements died with it, an answer half read too:
     * each is answered lost before the holders hear of the loss, so that
     * nothing the old session said (a grant, a failed release) counts on
     * the new one. */
    s->reading_ = 0;
    while (s->ring_count_ > 0)
        complete(s, now_ms);
    advlock_pq_ls_lose_held(s, "", words, ADVLOCK_LEASE_LIVE, now_ms);
}

/* Frees the exclusion table and the ring, and what the ring's entries kept. */
static void free_tables(advlock_pq_lockset *s)
{
    if (s->ring_ != NULL)
        drop_ring(s);
    drop_owed(s);
    free(s->buckets_);
    free(s->ring_);
    s->buckets_ = NULL;
    s->ring_ = NULL;
    s->ring_count_ = 0;
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
    set->ring_ = malloc(FIRST_RING * sizeof *set->ring_);
    int rc = set->buckets_ == NULL || set->ring_ == NULL ? ADVLOCK_ENOMEM
             : PQenterPipelineMode(conn) != 1            ? ADVLOCK_EMISUSE
                                                         : 0;
    if (rc != 0) {
        free_tables(set);
        (void)PQsetnonblocking(conn, was_nonblocking);
        return rc;
    }
    (void)advlock_peers_init(&set->peers_, set->buckets_, BUCKETS);
    (void)advlock_session_init(&set->session_, PQbackendPID(conn), new_token());
    set->ring_size_ = FIRST_RING;
    set->capacity_share_ = ADVLOCK_CAPACITY_SHARE_DEFAULT;
    advlock_pq_report_begin(&set->notices_);
    set->conn_ = conn;
    return 0;
}

void advlock_pq_lockset_finish(advlock_pq_lockset *set)
{
    if (set == NULL)
        return;
    if (set->conn_ != NULL && set->ring_count_ == 0 && set->owed_ == NULL)
        (void)PQexitPipelineMode(set->conn_);
    /* No member may be left busy or holding in a table that is going:
     * each can start again in another set. */
    end_under_way(set, ADVLOCK_CANCELLED, 0, advlock_pq_now_ms());
    advlock_pq_member *m;
    while ((m = set->lists_[LS_HELD_LIST]) != NULL) {
        (void)advlock_peers_leave(&set->peers_, &m->peer_);
        advlock_pq_ls_move(set, m, LS_DONE);
    }
    advlock_pq_answer_clear(&set->query_);
    free_tables(set);
    set->conn_ = NULL;
}

int advlock_pq_lockset_process(advlock_pq_lockset *set, unsigned ready, int64_t now_ms)
{
    if (set == NULL || (ready & ~(ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE)) != 0)
        return ADVLOCK_EINVAL;
    if (set->conn_ == NULL)
        return ADVLOCK_EMISUSE;
    advlock_pq_ls_notice_reset(set, now_ms);
    advlock_pq_notice_guard notices;
    advlock_pq_notices_divert(&notices, set->conn_, &set->notices_, NULL, now_ms);
    if (ready & ADVLOCK_PQ_READ)
        (void)advlock_pq_read_idle(set->conn_);
    if (set->flushing_)
        set->flushing_ = PQflush(set->conn_) == 1;
    collect(set, now_ms);
    advlock_pq_ls_wake_sleepers(set, now_ms);
    send_owed(set);
    send_queued(set, now_ms);
    advlock_pq_ls_end_batch(set);
    collect(set, now_ms);         /* a broken connection fails what was just sent */
    advlock_pq_ls_end_batch(set); /* give-backs the answers asked for */
    advlock_pq_ls_lease_tend(set, now_ms);
    advlock_pq_notices_restore(&notices);
    /* The server's FATAL says why better than libpq's "server closed the
     * connection unexpectedly". */
    if (PQstatus(set->conn_) == CONNECTION_BAD || notices.fatal)
        advlock_pq_ls_lose_held(set, notices.fatal ? set->notices_.notice_sqlstate : "",
                                notices.fatal ? set->notices_.notice : PQerrorMessage(set->conn_),
                                ADVLOCK_LEASE_LIVE, now_ms);
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
    if (set->flushing_ || set->unsynced_ || set->owed_ != NULL
        || (set->lists_[LS_QUEUE_LIST] != NULL && !batch_closed(set)))
        return ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE;
    return set->ring_count_ > 0 || set->lists_[LS_HELD_LIST] != NULL ? ADVLOCK_PQ_READ : 0;
}
