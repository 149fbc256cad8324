/*
 * The lock set's pump: one PGconn in libpq's pipeline mode, moving the
 * connection engine's statements and answers (src/core/conn*.c decides
 * every rule: batches, what goes alone, re-sends, give-backs, the session
 * check, the lease, the lock table's share). This file only sends each
 * statement in the form the engine names (PQsend*, PQpipelineSync() where
 * it ends a batch), reads the answers in order into the engine, and
 * reports what libpq sees of the connection: a reset, a close.
 */
#include "lockset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most slots a set grows to: the engine holds statements back past
 * them (a batch that large already costs the server more than a round
 * trip saves). */
enum { MAX_SLOTS = 1 << 16 };

/* ---- events -------------------------------------------------------------- */

void advlock_pq_ls_take_done(advlock_pq_member *m)
{
    advlock_pq_copy_line(m->report_.server_message, sizeof m->report_.server_message,
                         advlock_member_words(&m->member_));
    advlock_pq_report_finish(&m->report_, advlock_member_report(&m->member_));
}

void advlock_pq_ls_take_events(advlock_pq_lockset *s)
{
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&s->engine_, &ev)) {
        advlock_pq_member *m = (advlock_pq_member *)ev.member; /* its first field */
        if (ev.kind == ADVLOCK_CONN_DONE) {
            advlock_pq_ls_take_done(m);
        } else if (ev.kind == ADVLOCK_CONN_LOST) {
            advlock_pq_report_lost(&m->report_, advlock_member_sqlstate(ev.member),
                                   advlock_member_words(ev.member));
            m->report_.lease_expiry = advlock_member_lease_expiry(ev.member);
        } /* a warning went to the member's event callback already */
    }
}

/* Moves the notices the set collected into a member's report. */
static void take_notices(advlock_pq_lockset *s, advlock_pq_report *to)
{
    advlock_pq_report *from = &s->notices_;
    if (from->notices == 0)
        return;
    to->notices += from->notices;
    memcpy(to->notice_sqlstate, from->notice_sqlstate, sizeof to->notice_sqlstate);
    memcpy(to->notice, from->notice, sizeof to->notice);
    advlock_pq_report_begin(from);
}

/* ---- answers ------------------------------------------------------------- */

/* The head statement's results are all in (or the connection broke). */
static void complete(advlock_pq_lockset *s, const advlock_statement *head, int64_t now_ms)
{
    advlock_pq_query_ *q = &s->query_;
    if (!s->reading_) {
        advlock_pq_answer_clear(q);
        q->sql_ = (uint8_t)head->sql;
        q->form_ = (uint8_t)head->form;
    }
    s->reading_ = 0;
    advlock_pq_answer_end(q, s->conn_);
    s->syncing_ = (uint8_t)head->sync_follows;
    if (head->member != NULL)
        take_notices(s, &((advlock_pq_member *)head->member)->report_);
    char words[ADVLOCK_PQ_TEXT_MAX];
    advlock_answer a;
    advlock_holder *rows;
    advlock_pq_answer_export(q, s->conn_, words, sizeof words, &a, &rows);
    (void)advlock_conn_on_answer(&s->engine_, &a, now_ms);
    free(rows);
    advlock_pq_answer_clear(q);
}

/* Reads the answers that have arrived, in order, without blocking. */
static void collect(advlock_pq_lockset *s, int64_t now_ms)
{
    for (;;) {
        int broken = PQstatus(s->conn_) == CONNECTION_BAD;
        if (s->syncing_) {
            /* The batch's end (PGRES_PIPELINE_SYNC), never followed by a NULL. */
            PGresult *res = broken || PQisBusy(s->conn_) ? NULL : PQgetResult(s->conn_);
            if (res == NULL && !broken)
                return;
            PQclear(res);
            s->syncing_ = 0;
            continue;
        }
        advlock_statement head;
        if (!advlock_conn_head(&s->engine_, &head))
            return;
        if (broken) {
            complete(s, &head, now_ms); /* answered CONNECTION_LOST */
            continue;
        }
        if (PQisBusy(s->conn_))
            return;
        PGresult *res = PQgetResult(s->conn_);
        if (res == NULL) {
            complete(s, &head, now_ms);
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
}

/* ---- sending ------------------------------------------------------------- */

/* Sends one statement; 0 if libpq refused it. A cancel request (for a
 * member's server-side wait, the statement the server runs) goes beside
 * the pipeline: one that could not go is the engine's to ask again. */
static int send_statement(advlock_pq_lockset *s, const advlock_statement *st, int64_t now_ms)
{
    if (st->kind == ADVLOCK_STATEMENT_SYNC)
        return PQpipelineSync(s->conn_) == 1;
    if (st->kind == ADVLOCK_STATEMENT_CANCEL) {
        char why[256];
        if (advlock_pq_cancel_send(s->conn_, why, sizeof why) != 1)
            advlock_conn_on_cancel_failed(&s->engine_, st->member, why, now_ms);
        return 1;
    }
    advlock_pq_query_ q;
    memset(&q, 0, sizeof q);
    q.sql_ = (uint8_t)st->sql;
    q.form_ = (uint8_t)st->form;
    advlock_action act;
    memset(&act, 0, sizeof act);
    act.param = st->param;
    act.param2 = st->param2;
    act.param3 = st->param3;
    return advlock_pq_query_send(&q, s->conn_, &act);
}

/* Sends what the engine asks for until it asks for nothing, or libpq
 * refuses on a sound connection (its memory ran out: again next turn). */
static void send_all(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_statement st;
    while (advlock_conn_poll_statement(&s->engine_, &st, now_ms)) {
        if (send_statement(s, &st, now_ms))
            continue;
        int broken = PQstatus(s->conn_) == CONNECTION_BAD;
        advlock_conn_unsend(&s->engine_, broken,
                            broken ? PQerrorMessage(s->conn_) : "out of memory", now_ms);
        if (!broken)
            break;
    }
    s->flushing_ = PQflush(s->conn_) == 1;
}

/* More slots for statements held back for want of them: as many as the
 * members busy could use, while no cancelled member's key is kept in one
 * (the engine refuses then; the statements wait for answers instead). */
static void grow(advlock_pq_lockset *s)
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

static void send_turn(advlock_pq_lockset *s, int64_t now_ms)
{
    send_all(s, now_ms);
    if (advlock_conn_starved(&s->engine_)) {
        grow(s);
        send_all(s, now_ms);
    }
}

/* ---- the connection ------------------------------------------------------ */

void advlock_pq_ls_notice_reset(advlock_pq_lockset *s, int64_t now_ms)
{
    PGconn *c = s->conn_;
    if (PQstatus(c) != CONNECTION_OK
        || PQbackendPID(c) == advlock_conn_session(&s->engine_)->client_pid)
        return;
    /* An answer half read died with the old session. */
    s->reading_ = s->syncing_ = s->flushing_ = 0;
    advlock_pq_answer_clear(&s->query_);
    (void)PQsetnonblocking(c, 1);
    if (PQpipelineStatus(c) == PQ_PIPELINE_OFF)
        (void)PQenterPipelineMode(c);
    (void)advlock_conn_on_reset(&s->engine_, PQbackendPID(c), advlock_pq_entropy() | 1, now_ms);
    advlock_pq_ls_take_events(s);
}

void advlock_pq_ls_give_up(advlock_pq_lockset *s, int64_t now_ms)
{
    advlock_conn_give_up(&s->engine_, ADVLOCK_ENOANSWER,
                         "the server did not answer: the connection is given up and must be "
                         "closed, which ends the session and its locks",
                         now_ms);
    advlock_pq_ls_take_events(s);
    advlock_pq_answer_clear(&s->query_);
    s->conn_ = NULL;
}

void advlock_pq_ls_pump(advlock_pq_lockset *s, unsigned ready, int64_t now_ms)
{
    advlock_pq_notice_guard notices;
    advlock_pq_notices_divert(&notices, s->conn_, &s->notices_, NULL, now_ms);
    if (ready & ADVLOCK_PQ_READ)
        (void)advlock_pq_read_idle(s->conn_);
    if (s->flushing_)
        s->flushing_ = PQflush(s->conn_) == 1;
    collect(s, now_ms);
    advlock_conn_on_timer(&s->engine_, now_ms);
    send_turn(s, now_ms);
    collect(s, now_ms);   /* a broken connection fails what was just sent */
    send_turn(s, now_ms); /* give-backs the answers asked for */
    advlock_pq_notices_restore(&notices);
    /* The server's FATAL says why better than libpq's "server closed the
     * connection unexpectedly". */
    if (PQstatus(s->conn_) == CONNECTION_BAD || notices.fatal)
        advlock_conn_on_closed(&s->engine_, notices.fatal ? s->notices_.notice_sqlstate : "",
                               notices.fatal ? s->notices_.notice : PQerrorMessage(s->conn_),
                               now_ms);
    advlock_pq_ls_take_events(s);
}
