/*
 * The pump: one PGconn (in libpq's pipeline mode for a lock set), moving
 * the connection engine's statements and answers (src/core/conn*.c decides
 * every rule: batches, what goes alone, re-sends, give-backs, the session
 * check, the lease, the lock table's share). This file only sends each
 * statement in the form the engine names (PQsend*, PQpipelineSync() where
 * it ends a batch), reads the answers in order into the engine, and
 * reports what libpq sees of the connection: a reset, a close.
 */
#include "pump.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most slots a pump grows to: the engine holds statements back past
 * them (a batch that large already costs the server more than a round
 * trip saves). */
enum { MAX_SLOTS = 1 << 16 };

/* ---- events -------------------------------------------------------------- */

void advlock_pq_pump_take_done(advlock_pq_member *m)
{
    const advlock_report *done = advlock_member_report(&m->member_);
    if (done == NULL)
        return; /* still under way: its DONE event comes */
    advlock_pq_copy_line(m->report_.server_message, sizeof m->report_.server_message,
                         advlock_member_words(&m->member_));
    advlock_pq_report_finish(&m->report_, done);
}

void advlock_pq_pump_take_events(advlock_pq_pump_ *s)
{
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&s->engine_, &ev)) {
        advlock_pq_member *m = (advlock_pq_member *)ev.member; /* its first field */
        /* A warning's callback heard it already. A loss of a lock held in
         * doubt after its release or verify failed is no news to one lock
         * alone: its watch ended with that operation, whose failure (the
         * server's words) is what the caller asked. */
        int unwatched =
            ev.kind == ADVLOCK_CONN_LOST && s->one_ && m->report_.lock.outcome == ADVLOCK_FAILED;
        if (ev.kind == ADVLOCK_CONN_WARNING || unwatched)
            continue;
        if (ev.kind == ADVLOCK_CONN_DONE) {
            advlock_pq_pump_take_done(m);
            continue;
        }
        advlock_pq_report_lost(&m->report_, advlock_member_sqlstate(ev.member),
                               advlock_member_words(ev.member));
        m->report_.lease_expiry = advlock_member_lease_expiry(ev.member);
    }
}

/* Moves the notices the set collected into a member's report. */
static void take_notices(advlock_pq_pump_ *s, advlock_pq_report *to)
{
    advlock_pq_report *from = &s->notices_;
    if (from->notices == 0 || s->sink_ != from)
        return;
    to->notices += from->notices;
    memcpy(to->notice_sqlstate, from->notice_sqlstate, sizeof to->notice_sqlstate);
    memcpy(to->notice, from->notice, sizeof to->notice);
    advlock_pq_report_begin(from);
}

/* ---- answers ------------------------------------------------------------- */

/* An answer read whole and not yet handed to the engine: the pump's turn
 * hands the last one in with its one engine call (advlock_conn_turn()).
 * Its strings point into words, the pump's query and its kept result. */
typedef struct {
    int ready;
    advlock_answer answer;
    advlock_holder *rows; /* a holders row's answer only */
    char words[ADVLOCK_PQ_TEXT_MAX];
} pending_answer;

/* The engine has read p's answer: its memory goes. */
static void answer_taken(advlock_pq_pump_ *s, pending_answer *p)
{
    if (p->rows != NULL)
        free(p->rows);
    advlock_pq_answer_clear(&s->query_);
    p->ready = 0;
}

/* Hands p's answer, if any, to the engine. */
static void deliver(advlock_pq_pump_ *s, pending_answer *p, int64_t now_ms)
{
    if (!p->ready)
        return;
    (void)advlock_conn_on_answer(&s->engine_, &p->answer, now_ms);
    answer_taken(s, p);
}

/* The head statement's results are all in (or the connection broke): its
 * answer into p, for the engine. */
static void complete(advlock_pq_pump_ *s, const advlock_statement *head, pending_answer *p)
{
    advlock_pq_query_ *q = &s->query_;
    if (!s->reading_) {
        advlock_pq_answer_clear(q);
        q->sql_ = (uint8_t)head->sql;
        q->form_ = (uint8_t)head->form;
    }
    s->reading_ = 0;
    advlock_pq_answer_end(q, s->conn_);
    if (head->member != NULL)
        take_notices(s, &((advlock_pq_member *)head->member)->report_);
    advlock_pq_answer_export(q, s->conn_, p->words, sizeof p->words, &p->answer, &p->rows);
    /* A session row answered inside a block is provisional: a rollback
     * undoes its claim (the engine checks again after the block). No other
     * answer asks. */
    if (head->sql == ADVLOCK_SQL_SESSION) {
        PGTransactionStatusType block = PQtransactionStatus(s->conn_);
        p->answer.in_transaction = block == PQTRANS_INTRANS || block == PQTRANS_INERROR;
    }
    p->ready = 1;
}

/* In pipeline mode a batch's statements commit at its sync, after their
 * results: a statement's answer counts once the sync's result is read (a
 * mark or a fencing token is durable only then, and the synchronous
 * standby's warning comes in between, while the statement is still the
 * engine's head). Reads toward it; 1 once it came or the connection broke
 * (the answer is then CONNECTION_LOST), 0 while it is still to come. A
 * failure of the commit replaces the statement's answer. */
static int commit_read(advlock_pq_pump_ *s, int broken)
{
    /* A failed commit's results end with a NULL before the sync's. Two in
     * a row: no sync is coming after all, and the answer stands. */
    int nulls = 0;
    while (!broken && nulls < 2) {
        if (PQisBusy(s->conn_))
            return 0;
        PGresult *res = PQgetResult(s->conn_);
        if (res == NULL) {
            nulls++;
            continue;
        }
        nulls = 0;
        if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            break;
        }
        advlock_pq_answer_read(&s->query_, s->conn_, res);
        broken = PQstatus(s->conn_) == CONNECTION_BAD;
    }
    s->committing_ = 0;
    return 1;
}

/* Reads the answers that have arrived, in order, without blocking, each
 * through p; returns how many statements it answered. Each goes to the
 * engine before the next is read, but the last when keep_last, which
 * stays in p (for the turn's one engine call). */
static int collect(advlock_pq_pump_ *s, int64_t now_ms, pending_answer *p, int keep_last)
{
    p->ready = 0;
    int answered = 0;
    /* The head changes only when complete() answers it: asked once per
     * statement, not once per result. */
    advlock_statement head;
    int have_head = 0;
    for (;;) {
        int broken = PQstatus(s->conn_) == CONNECTION_BAD;
        if (!have_head) {
            deliver(s, p, now_ms);
            if (!advlock_conn_head(&s->engine_, &head))
                break;
        }
        have_head = 1;
        PGresult *res = NULL;
        if (s->committing_) {
            if (!commit_read(s, broken))
                break;
        } else {
            if (!broken && PQisBusy(s->conn_))
                break;
            /* A broken connection's last result (the server's FATAL) says
             * why better than libpq's "no connection to the server"; after
             * it the statements are answered CONNECTION_LOST. */
            res = PQgetResult(s->conn_);
            if (res == NULL && head.sync_follows && s->pipeline_ && !broken) {
                s->committing_ = 1;
                continue;
            }
        }
        if (res == NULL) {
            complete(s, &head, p);
            answered++;
            /* Out of pipeline mode the engine has one statement in flight
             * at most: none is left to read. */
            if (!s->pipeline_)
                break;
            have_head = 0;
            continue;
        }
        if (!s->reading_) {
            advlock_pq_answer_clear(&s->query_);
            s->query_.sql_ = (uint8_t)head.sql;
            s->query_.form_ = (uint8_t)head.form;
            s->reading_ = 1;
        }
        advlock_pq_answer_read(&s->query_, s->conn_, res);
    }
    if (!keep_last)
        deliver(s, p, now_ms);
    return answered;
}

/* ---- sending ------------------------------------------------------------- */

/* Sends one statement; 0 if libpq refused it. A cancel request goes on a
 * connection of its own (cancel.c); one the server did not take is the
 * engine's warning, and counts as sent (the engine asks again). */
static int send_statement(advlock_pq_pump_ *s, const advlock_statement *st, int64_t now_ms)
{
    if (st->kind == ADVLOCK_STATEMENT_SYNC)
        return PQpipelineSync(s->conn_) == 1;
    if (st->kind == ADVLOCK_STATEMENT_CANCEL) {
        char error[ADVLOCK_PQ_TEXT_MAX];
        if (!advlock_pq_cancel_send(s->conn_, error, sizeof error))
            advlock_conn_on_cancel_failed(&s->engine_, st->member, error, now_ms);
        return 1;
    }
    return advlock_pq_statement_send(s->conn_, st);
}

/* Sends st (when have) and what the engine asks for after it, until it
 * asks for nothing, or libpq refuses on a sound connection (its memory ran
 * out: again next turn). Sets *more when the engine was called past the
 * first send, which may have made news for its events. */
static int send_all(advlock_pq_pump_ *s, advlock_statement *st, int have, int64_t now_ms, int *more)
{
    int sent = 0;
    for (; have; have = advlock_conn_poll_statement(&s->engine_, st, now_ms)) {
        sent++;
        /* Out of pipeline mode a statement goes alone: the engine has
         * nothing more until it answers (the turn that reads the answer
         * asks again; a statement it did have would go at the next turn,
         * the socket being writable). */
        if (send_statement(s, st, now_ms)) {
            if (!s->pipeline_ && st->kind == ADVLOCK_STATEMENT_QUERY)
                break;
            *more = 1; /* a cancel's warning, or the poll that follows */
            continue;
        }
        int broken = PQstatus(s->conn_) == CONNECTION_BAD;
        advlock_conn_unsend(&s->engine_, broken,
                            broken ? PQerrorMessage(s->conn_) : "out of memory", now_ms);
        *more = 1;
        if (!broken)
            break;
    }
    if (sent > 0 || s->flushing_)
        s->flushing_ = PQflush(s->conn_) == 1;
    return sent;
}

/* More slots for statements held back for want of them: as many as the
 * members busy could use, while no cancelled member's key is kept in one
 * (the engine refuses then; the statements wait for answers instead). */
static void grow(advlock_pq_pump_ *s)
{
    size_t want = advlock_conn_slots(&s->engine_);
    size_t busy = advlock_conn_busy(&s->engine_) * 2 + 16;
    while (want < busy && want < MAX_SLOTS)
        want *= 2;
    if (want <= advlock_conn_slots(&s->engine_))
        return;
    advlock_conn_slot *bigger = malloc(want * sizeof *bigger);
    if (bigger == NULL)
        return;
    if (advlock_conn_move_slots(&s->engine_, bigger, want) != 0) {
        free(bigger);
        return;
    }
    free(s->slots_);
    s->slots_ = bigger;
}

/* Sends st (when have: the engine's statement just polled) and what the
 * engine asks for after it, growing the slots if they ran out; returns
 * how many statements went. *more as for send_all(). */
static int send_turn(advlock_pq_pump_ *s, advlock_statement *st, int have, int64_t now_ms,
                     int *more)
{
    int sent = send_all(s, st, have, now_ms, more);
    if (s->grows_ && advlock_conn_starved(&s->engine_)) {
        grow(s);
        sent += send_all(s, st, advlock_conn_poll_statement(&s->engine_, st, now_ms), now_ms, more);
        *more = 1;
    }
    return sent;
}

/* ---- the connection ------------------------------------------------------ */

/* An idle session's socket is read at most this many times per call, so a
 * caller's own statement streaming a large result cannot hold the loop. */
enum { MAX_IDLE_READS = 16 };

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

int advlock_pq_pump_bind(advlock_pq_pump_ *p, PGconn *conn, advlock_conn_slot *slots, size_t nslots,
                         int grows, advlock_peer **buckets, size_t nbuckets, unsigned caps)
{
    advlock_pq_notices_learn(); /* now, not at the first diversion: see pq.h */
    int rc = advlock_conn_init(&p->engine_, slots, nslots, buckets, nbuckets, PQbackendPID(conn),
                               advlock_pq_entropy() | 1, caps);
    if (rc != 0)
        return rc;
    p->conn_ = conn;
    p->slots_ = slots;
    p->grows_ = (uint8_t)(grows != 0);
    p->pipeline_ = (uint8_t)((caps & ADVLOCK_CAPS_PIPELINE) != 0);
    p->one_ = (uint8_t)((caps & ADVLOCK_CAPS_ONE_MEMBER) != 0);
    p->reading_ = p->committing_ = p->flushing_ = 0;
    p->query_.kept_ = NULL;
    advlock_pq_report_begin(&p->notices_);
    p->sink_ = &p->notices_;
    p->events_ = NULL;
    return 0;
}

/* The guards of the blocking calls running on this thread that hold
 * their notices diverted, innermost first (a pointer in the pump would make
 * every adapter 8 bytes larger). An event callback may run a blocking call
 * inside a turn, so they stack; a turn finds its connection's. */
static _Thread_local advlock_pq_notice_guard *held_guards;

void advlock_pq_pump_hold_notices(advlock_pq_pump_ *p, advlock_pq_notice_guard *g, int64_t now_ms)
{
    advlock_pq_notices_divert(g, p->conn_, p->sink_, p->events_, &p->engine_, now_ms);
    g->outer = held_guards;
    held_guards = g;
}

void advlock_pq_pump_release_notices(advlock_pq_notice_guard *g)
{
    advlock_pq_notices_restore(g);
    held_guards = g->outer; /* the calls end innermost first */
}

/* The notices' guard for one turn at now: the one a blocking call holds
 * diverted on the connection, else own, diverted for this turn alone (the
 * caller restores it). Either way its fatal flag is this turn's. */
static advlock_pq_notice_guard *divert_for_turn(advlock_pq_pump_ *s, advlock_pq_notice_guard *own,
                                                int64_t now_ms)
{
    advlock_pq_notice_guard *held = held_guards;
    while (held != NULL && !(held->diverted && held->conn == s->conn_))
        held = held->outer;
    if (held == NULL) {
        advlock_pq_notices_divert(own, s->conn_, s->sink_, s->events_, &s->engine_, now_ms);
        return own;
    }
    held->now_ms = now_ms;
    held->fatal = 0;
    return held;
}

void advlock_pq_pump_notice_reset(advlock_pq_pump_ *s, int64_t now_ms)
{
    PGconn *c = s->conn_;
    if (PQstatus(c) != CONNECTION_OK
        || PQbackendPID(c) == advlock_conn_session(&s->engine_)->client_pid)
        return;
    /* An answer half read died with the old session. */
    s->reading_ = s->committing_ = s->flushing_ = 0;
    advlock_pq_answer_clear(&s->query_);
    /* A lock set's new connection is put back as its set binds it. */
    if (s->pipeline_) {
        (void)PQsetnonblocking(c, 1);
        if (PQpipelineStatus(c) == PQ_PIPELINE_OFF)
            (void)PQenterPipelineMode(c);
    }
    (void)advlock_conn_on_reset(&s->engine_, PQbackendPID(c), advlock_pq_entropy() | 1, now_ms);
    advlock_pq_pump_take_events(s);
}

void advlock_pq_pump_give_up(advlock_pq_pump_ *s, int64_t now_ms)
{
    advlock_conn_give_up(&s->engine_, ADVLOCK_ENOANSWER,
                         "the server did not answer: the connection is given up and must be "
                         "closed, which ends the session and its locks",
                         now_ms);
    advlock_pq_pump_take_events(s);
    advlock_pq_answer_clear(&s->query_);
    s->conn_ = NULL;
}

void advlock_pq_pump_turn(advlock_pq_pump_ *s, unsigned ready, int64_t now_ms)
{
    advlock_pq_notice_guard own;
    advlock_pq_notice_guard *notices = divert_for_turn(s, &own, now_ms);
    /* With answers due, one read (their parse follows in collect()); an
     * idle session's socket is read to its end (advlock_pq_read_idle()). */
    int outstanding = advlock_conn_outstanding(&s->engine_) > 0;
    if ((ready & ADVLOCK_PQ_READ) && outstanding)
        (void)PQconsumeInput(s->conn_);
    else if (ready & ADVLOCK_PQ_READ)
        (void)advlock_pq_read_idle(s->conn_);
    if (s->flushing_)
        s->flushing_ = PQflush(s->conn_) == 1;
    pending_answer last;
    last.ready = 0;
    /* collect() may find something to read: a statement in flight, or the
     * end of a batch or of a result still to read. */
    if (outstanding || s->reading_)
        (void)collect(s, now_ms, &last, 1);
    /* One engine call: the last answer in, the timer if due, the next
     * statement out, whether events wait. */
    advlock_statement st;
    int found = advlock_conn_turn(&s->engine_, last.ready ? &last.answer : NULL, &st, now_ms, NULL);
    if (last.ready)
        answer_taken(s, &last);
    int more = 0;
    /* A broken connection fails what was just sent, and the answers may
     * ask for give-backs. Out of pipeline mode, a statement that went whole
     * on a sound connection has no whole answer yet: the server ends it
     * only after the statement's last byte, and libpq reads the socket while
     * sending only when it could not send everything (then it is still
     * flushing). */
    if (send_turn(s, &st, found & ADVLOCK_TURN_STATEMENT, now_ms, &more) > 0
        && (s->pipeline_ || s->flushing_ || PQstatus(s->conn_) == CONNECTION_BAD)
        && collect(s, now_ms, &last, 0) > 0) {
        (void)send_turn(s, &st, advlock_conn_poll_statement(&s->engine_, &st, now_ms), now_ms,
                        &more);
        more = 1;
    }
    if (notices == &own)
        advlock_pq_notices_restore(&own);
    /* The server's FATAL says why better than libpq's "server closed the
     * connection unexpectedly". */
    int fatal = notices->fatal;
    if (PQstatus(s->conn_) == CONNECTION_BAD || fatal) {
        advlock_conn_on_closed(&s->engine_, fatal ? s->sink_->notice_sqlstate : "",
                               fatal ? s->sink_->notice : PQerrorMessage(s->conn_), now_ms);
        more = 1;
    }
    if ((found & ADVLOCK_TURN_EVENTS) || more)
        advlock_pq_pump_take_events(s);
}

unsigned advlock_pq_pump_wants(const advlock_pq_pump_ *p)
{
    if (p->conn_ == NULL)
        return 0;
    if (p->flushing_ || advlock_conn_wants_send(&p->engine_))
        return ADVLOCK_PQ_READ | ADVLOCK_PQ_WRITE;
    /* A batch's end still to read is read, so the connection is free for
     * the caller's own statements (advlock_pq_lockset_quiet()). */
    return advlock_conn_watching(&p->engine_) || p->reading_ ? ADVLOCK_PQ_READ : 0;
}

int advlock_pq_pump_deadline(const advlock_pq_pump_ *p, int64_t *at_ms)
{
    int64_t at = advlock_conn_next_wake(&p->engine_);
    if (at == INT64_MAX)
        return 0;
    *at_ms = at;
    return 1;
}

int advlock_pq_pump_wait(advlock_pq_pump_ *p, int extra_fd, int max_wait_ms, int64_t *now_ms)
{
    int64_t now = *now_ms;
    int64_t at;
    int has_deadline = advlock_pq_pump_deadline(p, &at);
    unsigned wants = advlock_pq_pump_wants(p);
    int fd = PQsocket(p->conn_);
    /* Counting the busy members walks the engine's lists: only asked where
     * advlock_pq_wait_turn() reads it, a wait with nothing to wake it. */
    int busy = (wants == 0 || fd < 0) && !has_deadline && advlock_conn_busy(&p->engine_) > 0;
    advlock_pq_turn turn;
    if (advlock_pq_wait_turn(busy, fd, wants, has_deadline ? &at : NULL, extra_fd, max_wait_ms, now,
                             &turn))
        /* No reset needs telling: nothing but poll() ran since the
         * caller's check (a reset is the caller's PQreset*()). */
        advlock_pq_pump_turn(p, turn.ready, turn.now_ms);
    *now_ms = turn.now_ms;
    return turn.extra;
}
