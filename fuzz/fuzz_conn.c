/*
 * Fuzzes the connection engine (advlock_conn) with opcode bytes: members
 * starting acquires (modes, fences, lock-delay, timeouts, server-side waits, session
 * or transaction scope inside a block that begins and ends), releases,
 * verifies (of a held lock, or by key of a lock the caller took with
 * statements of its own) and cancels; statements polled, sent or taken back, cancel
 * requests, sent or not (a warning), server notices (warnings); answers
 * of every kind (granted, busy, NULL, errors with 26000 and 42P05, a
 * wait's lock_timeout with or without the grant it raced, skipped with an
 * aborted batch, refused by an aborted transaction block, lost), session
 * rows direct and behind a proxy, timers, closes, resets, leases. A model
 * of the server session's holds, kept from the statements the engine sent
 * and the answers given (a grant counts only when the server would have
 * made it), checks after every event:
 *   - no member believes it holds a lock the session cannot hold: members
 *     whose peer is HELD never outnumber the server's holds of their key
 *     and mode;
 *   - every grant is owned or given back: with nothing in flight or owed,
 *     the server's holds equal the HELD peers, key by key (less the holds
 *     a lease that ran out, a verify that did not find, a give-back that
 *     reached another session, or one the server failed till the engine
 *     said the connection must close gave up, which the session keeps
 *     until the caller closes the connection: an acquire's own undo that
 *     failed is one of the engine's give-backs from then on);
 *   - every loss is reported once: a LOST event only for a member that was
 *     told its lock was taken and not told since that it ended;
 *   - the engine never has more statements out than slots, and a sync
 *     only ends a batch that has a statement;
 *   - after the lease ran out, the time the engine says the server frees
 *     the locks by is a lease after the last statement sent, or later.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "fuzz_input.h"

enum { MEMBERS = 4, SLOTS = 6, KEYS = 3, FIFO = 64 };
enum { OP_ACQUIRE, OP_RELEASE, OP_VERIFY, OP_BY_KEY };

typedef struct sent {
    advlock_sql sql;
    advlock_form form;
    int64_t key;
    const advlock_member *member;
} sent;

typedef struct model {
    advlock_conn c;
    advlock_conn_slot slots[SLOTS];
    advlock_peer *buckets[4];
    advlock_member m[MEMBERS];
    int told_held[MEMBERS]; /* from events: ACQUIRED/HELD, until LOST or another end */
    int op[MEMBERS];        /* the operation under way: an OP_ value */
    sent fifo[FIFO];        /* the statements out, oldest first */
    int head, len;
    int holds[KEYS][2]; /* the server session's, by key and mode */
    /* holds of locks a lease that ran out gave up: the session keeps them
     * until the connection closes, which is the caller's to do */
    int abandoned[KEYS][2];
    /* holds the caller took with statements of its own, owned by no
     * member until a verify by key finds one */
    int foreign[KEYS][2];
    /* the same for the transaction block's locks, which go with it */
    int xholds[KEYS][2], xabandoned[KEYS][2];
    int in_block;
    /* an error inside the block aborted its transaction: a grant that came
     * with an error is the engine's to forget (it goes at the rollback,
     * and nothing runs in the block till then) */
    int block_failed;
    int pid;
    int64_t now;
    int last_polled;   /* 1 query, 2 sync, 0 nothing */
    int64_t last_sent; /* when a statement last went out on the connection */
} model;

static const int64_t keys[KEYS] = {11, 22, 33};

static int key_index(int64_t key)
{
    for (int k = 0; k < KEYS; k++)
        if (keys[k] == key)
            return k;
    return -1;
}

/* The model reads the statement table on its own, apart from the engine:
 * it is the oracle the engine is checked against. */
static int is_wait(advlock_sql sql, int *mode)
{
    switch (sql) {
    case ADVLOCK_SQL_LOCK:
    case ADVLOCK_SQL_LOCK_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK:
    case ADVLOCK_SQL_XACT_LOCK_GUARDED: *mode = ADVLOCK_EXCLUSIVE; return 1;
    case ADVLOCK_SQL_LOCK_SHARED:
    case ADVLOCK_SQL_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED: *mode = ADVLOCK_SHARED; return 1;
    default: return 0;
    }
}

static int is_try(advlock_sql sql, int *mode)
{
    switch (sql) {
    case ADVLOCK_SQL_TRY_LOCK:
    case ADVLOCK_SQL_TRY_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_LOCK_FENCED:
    case ADVLOCK_SQL_TRY_XACT_LOCK:
    case ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_FENCED: *mode = ADVLOCK_EXCLUSIVE; return 1;
    case ADVLOCK_SQL_TRY_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED: *mode = ADVLOCK_SHARED; return 1;
    default: return 0;
    }
}

static int is_unlock(advlock_sql sql, int *mode)
{
    switch (sql) {
    case ADVLOCK_SQL_UNLOCK:
    case ADVLOCK_SQL_UNLOCK_GUARDED: *mode = ADVLOCK_EXCLUSIVE; return 1;
    case ADVLOCK_SQL_UNLOCK_SHARED:
    case ADVLOCK_SQL_UNLOCK_SHARED_GUARDED: *mode = ADVLOCK_SHARED; return 1;
    default: return 0;
    }
}

/* The holds of sql's scope: the transaction block's or the session's. */
static int (*holds_of(model *md, advlock_sql sql))[2]
{
    switch (sql) {
    case ADVLOCK_SQL_TRY_XACT_LOCK:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED:
    case ADVLOCK_SQL_TRY_XACT_LOCK_FENCED:
    case ADVLOCK_SQL_XACT_LOCK:
    case ADVLOCK_SQL_XACT_LOCK_SHARED:
    case ADVLOCK_SQL_XACT_LOCK_GUARDED:
    case ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED: return md->xholds;
    default: return md->holds;
    }
}

/* The abandoned holds of member m's scope. */
static int (*abandoned_of(model *md, const advlock_member *m))[2]
{
    return m->machine_.scope_ == ADVLOCK_TRANSACTION ? md->xabandoned : md->abandoned;
}

static void take_events(model *md)
{
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&md->c, &ev)) {
        if (ev.kind == ADVLOCK_CONN_WARNING) {
            /* of a member of this engine, or of the connection */
            CHECK(ev.member == NULL || (ev.member >= md->m && ev.member < md->m + MEMBERS));
            CHECK(advlock_conn_warning(&md->c)[0] != '\0');
            continue;
        }
        int i = (int)(ev.member - md->m);
        CHECK(i >= 0 && i < MEMBERS);
        if (ev.kind == ADVLOCK_CONN_LOST) {
            CHECK(md->told_held[i]); /* once, and only for a lock it was told of */
            md->told_held[i] = 0;
            const advlock_peer *p = &ev.member->peer_;
            if (advlock_member_lease_expiry(ev.member) != ADVLOCK_LEASE_LIVE)
                abandoned_of(md, ev.member)[key_index(p->key_)][p->mode_]++;
            continue;
        }
        const advlock_report *r = advlock_member_report(ev.member);
        CHECK(r != NULL);
        /* A release or a verify that failed leaves the lock in doubt:
         * still held; one by key held nothing before, and holds nothing
         * but what a verify found. */
        if (md->op[i] == OP_BY_KEY) {
            int held = r->outcome == ADVLOCK_HELD;
            const advlock_peer *p = &ev.member->peer_;
            if (held && md->foreign[key_index(p->key_)][p->mode_] > 0)
                md->foreign[key_index(p->key_)][p->mode_]--; /* the member's now */
            CHECK(!held || advlock_member_held(ev.member) || advlock_member_lost(ev.member));
            md->told_held[i] = held;
            continue;
        }
        /* A grant lock-delay held back, never reported, that went with
         * the lease: the session keeps it, as the held locks. */
        if (md->op[i] == OP_ACQUIRE && r->outcome == ADVLOCK_FAILED
            && advlock_member_lease_expiry(ev.member) != ADVLOCK_LEASE_LIVE) {
            const advlock_peer *p = &ev.member->peer_;
            abandoned_of(md, ev.member)[key_index(p->key_)][p->mode_]++;
        }
        int held = r->outcome == ADVLOCK_ACQUIRED || r->outcome == ADVLOCK_HELD
                   || r->outcome == ADVLOCK_ENDS_WITH_TRANSACTION
                   || (md->op[i] != OP_ACQUIRE && r->outcome == ADVLOCK_FAILED);
        /* A verify that did not find the lock ends the hold, whatever the
         * session holds: the caller must close the connection. */
        if (md->op[i] == OP_VERIFY && md->told_held[i] && !held)
            abandoned_of(md, ev.member)[key_index(ev.member->peer_.key_)][ev.member->peer_.mode_]++;
        md->told_held[i] = held;
    }
}

static void check(model *md)
{
    int peers[KEYS][2] = {{0}}, told[KEYS][2] = {{0}};
    for (int i = 0; i < MEMBERS; i++) {
        const advlock_peer *p = &md->m[i].peer_;
        int k = key_index(p->key_);
        if (advlock_peer_state(p) == ADVLOCK_PEER_HELD) {
            CHECK(k >= 0);
            peers[k][p->mode_]++;
        }
        if (md->told_held[i]) {
            CHECK(k >= 0 && advlock_member_held(&md->m[i]) + advlock_member_busy(&md->m[i]) > 0);
            told[k][p->mode_]++;
        }
    }
    CHECK(advlock_conn_outstanding(&md->c) <= SLOTS);
    /* A lease that ran out: the server frees the locks a lease after it
     * last heard from the client, never earlier. */
    int64_t stop, free_by;
    if (advlock_conn_lease_deadline(&md->c, &stop, &free_by) == 2 && free_by != INT64_MAX)
        CHECK(free_by >= md->last_sent + 30000);
    int quiet = advlock_conn_outstanding(&md->c) == 0 && advlock_conn_busy(&md->c) == 0;
    for (int k = 0; k < KEYS; k++)
        for (int mode = 0; mode < 2; mode++) {
            int kept = md->holds[k][mode] - md->abandoned[k][mode] - md->foreign[k][mode]
                       + md->xholds[k][mode] - md->xabandoned[k][mode];
            CHECK(told[k][mode] <= kept);
            if (quiet)
                CHECK(md->block_failed ? peers[k][mode] <= kept : peers[k][mode] == kept);
        }
}

static void poll_one(model *md)
{
    advlock_statement st;
    md->last_polled = 0;
    if (!advlock_conn_poll_statement(&md->c, &st, md->now))
        return;
    if (st.kind != ADVLOCK_STATEMENT_CANCEL)
        md->last_sent = md->now;
    if (st.kind == ADVLOCK_STATEMENT_SYNC) {
        CHECK(md->len > 0);
        md->last_polled = 2;
        return;
    }
    if (st.kind == ADVLOCK_STATEMENT_CANCEL) {
        /* only for the wait the server runs now, the head, or a lock-delay
         * mark past its deadline, alone in flight */
        int mode;
        advlock_sql head = md->len > 0 ? md->fifo[md->head].sql : ADVLOCK_SQL_COUNT;
        CHECK(st.member != NULL
              && (is_wait(head, &mode)
                  || (md->len == 1
                      && (head == ADVLOCK_SQL_MARK_TAKE || head == ADVLOCK_SQL_MARK_WRITE))));
        return;
    }
    CHECK(md->len < FIFO);
    md->fifo[(md->head + md->len++) % FIFO] = (sent){st.sql, st.form, st.param, st.member};
    md->last_polled = 1;
}

/* The engine's unlock giving a grant back failed for good: the grant stays
 * on the session, owned by nobody, until the connection closes. Holds are
 * counted, not owned: if every hold of the key is given up or the caller's
 * own already, the grant was never made (its statement failed too). */
static void give_back_failed(model *md, const sent *s)
{
    int mode, k = key_index(s->key);
    if (s->form != ADVLOCK_FORM_PREPARE && is_unlock(s->sql, &mode) && k >= 0)
        md->abandoned[k][mode] +=
            md->holds[k][mode] > md->abandoned[k][mode] + md->foreign[k][mode];
}

/* The server ran the head statement: its effect on the session's holds,
 * and the answer the fuzzer chose where the server has a choice. */
static void answer_head(model *md, input *in)
{
    if (md->len == 0)
        return;
    sent s = md->fifo[md->head];
    advlock_statement head;
    CHECK(advlock_conn_head(&md->c, &head) && head.sql == s.sql && head.form == s.form);
    md->head = (md->head + 1) % FIFO;
    md->len--;
    md->last_polled = 0;
    advlock_answer a;
    uint8_t how = byte(in) % 10;
    int mode, k = key_index(s.key);
    if (how == 0) {
        advlock_answer_init(&a, ADVLOCK_RESULT_SERVER_ERROR);
        a.aborted = 1;
    } else if (how == 1) {
        advlock_answer_init(&a, ADVLOCK_RESULT_SERVER_ERROR);
        static const char *const codes[] = {"26000", "42P05", "53200", "XX000"};
        a.sqlstate = codes[byte(in) % 4];
        a.message = "fuzzed";
    } else if (md->block_failed && s.sql != ADVLOCK_SQL_COMMIT) {
        /* an aborted block runs nothing, prepares included, till it ends:
         * whatever it holds, a check of a key inside it finds nothing */
        advlock_answer_init(&a, ADVLOCK_RESULT_SERVER_ERROR);
        a.sqlstate = "25P02";
        a.message = "current transaction is aborted";
    } else if (s.form == ADVLOCK_FORM_PREPARE) {
        advlock_answer_init(&a, ADVLOCK_RESULT_TRUE); /* prepared: it ran nothing */
    } else if (how == 2 && advlock_sql_guarded(s.sql)) {
        /* only a guarded row answers NULL: it reached another session */
        advlock_answer_init(&a, ADVLOCK_RESULT_NULL);
    } else if (is_try(s.sql, &mode)) {
        int granted = how % 2 == 1 && k >= 0;
        advlock_answer_init(&a, granted ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE);
        a.fence_token = granted ? 1 + (byte(in) % 100) : 0;
        if (granted)
            holds_of(md, s.sql)[k][mode]++;
    } else if (is_wait(s.sql, &mode)) {
        /* granted; or the wait's lock_timeout, which may come with the
         * grant it raced */
        int granted = how % 3 != 1 && k >= 0;
        advlock_answer_init(&a, how % 3 == 0 ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_SERVER_ERROR);
        if (how % 3 != 0) {
            a.sqlstate = "55P03";
            a.message = "canceling statement due to lock timeout";
        }
        if (granted)
            holds_of(md, s.sql)[k][mode]++;
    } else if (is_unlock(s.sql, &mode)) {
        int held = k >= 0 && md->holds[k][mode] > 0;
        advlock_answer_init(&a, held ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE);
        if (held)
            md->holds[k][mode]--;
        /* the session's holds are counted, not owned: an unlock may end one
         * that was given up */
        if (k >= 0 && md->abandoned[k][mode] > md->holds[k][mode])
            md->abandoned[k][mode] = md->holds[k][mode];
        if (k >= 0 && md->foreign[k][mode] > md->holds[k][mode] - md->abandoned[k][mode])
            md->foreign[k][mode] = md->holds[k][mode] - md->abandoned[k][mode];
    } else if (s.sql == ADVLOCK_SQL_HELD || s.sql == ADVLOCK_SQL_HELD_SHARED
               || s.sql == ADVLOCK_SQL_HELD_GUARDED || s.sql == ADVLOCK_SQL_HELD_SHARED_GUARDED) {
        mode = s.sql == ADVLOCK_SQL_HELD || s.sql == ADVLOCK_SQL_HELD_GUARDED ? ADVLOCK_EXCLUSIVE
                                                                              : ADVLOCK_SHARED;
        int held = k >= 0
                   && md->holds[k][mode] - md->abandoned[k][mode] + md->xholds[k][mode]
                              - md->xabandoned[k][mode]
                          > 0;
        advlock_answer_init(&a, held ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE);
    } else if (s.sql == ADVLOCK_SQL_SESSION) {
        advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
        a.server_pid = byte(in) % 4 == 0 ? md->pid + 1 : md->pid; /* a proxy, now and then */
        a.in_recovery = byte(in) % 16 == 0;
        a.ours = byte(in) % 8 != 0;
    } else if (s.sql == ADVLOCK_SQL_CAPACITY) {
        advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
        a.settings[0] = byte(in) % 4;
        a.settings[1] = byte(in) % 8; /* after settings[0]: one order for every compiler */
        a.settings[2] = 0;
    } else if (s.sql == ADVLOCK_SQL_MARK_TAKE || s.sql == ADVLOCK_SQL_MARK_WRITE
               || s.sql == ADVLOCK_SQL_MARK_CLEAR) {
        /* lock-delay's mark: another holder's (a stop bound of up to 8 s)
         * now and then, else ours written */
        advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
        a.settings[0] = s.sql == ADVLOCK_SQL_MARK_TAKE && how % 2 ? 5 : 0;
        a.settings[1] = a.settings[0] != 0 ? number(in) % 8000 : 0;
        a.settings[2] = a.settings[0] == 0;
    } else {
        advlock_answer_init(&a, how % 2 ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE);
    }
    /* The engine's give-back that reached another session (NULL) leaves
     * the grant on this one, owned by nobody, until the connection closes;
     * so does one the server failed once the engine gave up sending it
     * again. A member's own unlock that failed is the engine's to give
     * back from then on. */
    int answered = !a.aborted
                   && !(s.form == ADVLOCK_FORM_NAMED && a.sqlstate != NULL
                        && strcmp(a.sqlstate, "26000") == 0);
    int closing = advlock_conn_must_close(&md->c);
    if (answered && a.result == ADVLOCK_RESULT_SERVER_ERROR && md->in_block)
        md->block_failed = 1;
    CHECK(advlock_conn_on_answer(&md->c, &a, md->now) == 0);
    int gave_up = advlock_conn_must_close(&md->c) && !closing;
    if (answered && head.member == NULL
        && (a.result == ADVLOCK_RESULT_NULL
            || (a.result == ADVLOCK_RESULT_SERVER_ERROR && gave_up)))
        give_back_failed(md, &s);
}

/* The session is gone: its holds with it (the events that say so first). */
static void session_gone(model *md)
{
    take_events(md);
    memset(md->holds, 0, sizeof md->holds);
    memset(md->abandoned, 0, sizeof md->abandoned);
    memset(md->foreign, 0, sizeof md->foreign);
    memset(md->xholds, 0, sizeof md->xholds);
    memset(md->xabandoned, 0, sizeof md->xabandoned);
    md->block_failed = 0;
    md->len = 0;
    md->last_polled = 0;
}

/* The caller begins or ends a transaction block between operations; the
 * block's locks go with its end, their members told nothing. */
static void block_changes(model *md)
{
    md->in_block = !md->in_block;
    md->block_failed = 0;
    if (!md->in_block) {
        take_events(md);
        for (int i = 0; i < MEMBERS; i++)
            if (md->m[i].machine_.scope_ == ADVLOCK_TRANSACTION && advlock_member_held(&md->m[i]))
                md->told_held[i] = 0;
        memset(md->xholds, 0, sizeof md->xholds);
        memset(md->xabandoned, 0, sizeof md->xabandoned);
    }
    advlock_conn_on_transaction(&md->c, md->in_block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static model md;
    memset(&md, 0, sizeof md);
    input in = {data, size};
    md.pid = 100;
    unsigned caps = byte(&in) % 8;
    CHECK(advlock_conn_init(&md.c, md.slots, SLOTS, md.buckets, 4, md.pid, 7, caps) == 0);
    for (int i = 0; i < MEMBERS; i++)
        advlock_member_init(&md.m[i]);
    while (in.size > 0) {
        uint8_t op = byte(&in);
        advlock_member *m = &md.m[op / 16 % MEMBERS];
        switch (op % 16) {
        case 0:
        case 1: {
            advlock_options o;
            advlock_options_init(&o);
            o.mode = byte(&in) % 3 == 0 ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE;
            o.fence = o.mode == ADVLOCK_EXCLUSIVE && byte(&in) % 4 == 0;
            o.diagnose = byte(&in) % 2;
            o.wait = !o.fence && byte(&in) % 4 == 0 ? ADVLOCK_WAIT_SERVER : ADVLOCK_WAIT_POLL;
            o.scope = md.in_block && byte(&in) % 3 == 0 ? ADVLOCK_TRANSACTION : ADVLOCK_SESSION;
            o.lock_delay =
                o.mode == ADVLOCK_EXCLUSIVE && o.scope == ADVLOCK_SESSION && byte(&in) % 3 == 0;
            int64_t key = keys[byte(&in) % KEYS];
            int64_t timeout = number(&in) % 5000;
            if (advlock_conn_start_acquire_key(&md.c, m, key, timeout, &o, md.now) == 0)
                md.op[m - md.m] = OP_ACQUIRE;
            break;
        }
        case 2:
        case 3:
            if ((op % 16 == 2 ? advlock_conn_start_release : advlock_conn_start_verify)(&md.c, m,
                                                                                        md.now)
                == 0)
                md.op[m - md.m] = op % 16 == 2 ? OP_RELEASE : OP_VERIFY;
            break;
        case 4: (void)advlock_conn_cancel(&md.c, m, md.now); break;
        case 5:
        case 6:
        case 7: poll_one(&md); break;
        case 8:
        case 9:
        case 10: answer_head(&md, &in); break;
        case 11:
            if (md.last_polled == 1) {
                int broken = byte(&in) % 2;
                md.len--; /* the pump could not send it: an unlock goes again */
                advlock_conn_unsend(&md.c, broken, "not sent", md.now);
                if (broken) { /* and reports the close it saw */
                    advlock_conn_on_closed(&md.c, "", "not sent", md.now);
                    session_gone(&md);
                }
            } else if (md.last_polled == 2) {
                advlock_conn_unsend(&md.c, 0, "not sent", md.now);
            }
            md.last_polled = 0;
            break;
        case 12: {
            int64_t wake = advlock_conn_next_wake(&md.c);
            int64_t step = number(&in) % 4000;
            md.now += step > 0 ? step : 0;
            if (byte(&in) % 2 && wake != INT64_MAX && wake > md.now)
                md.now = wake;
            advlock_conn_on_timer(&md.c, md.now);
            break;
        }
        case 13: {
            uint8_t what = byte(&in) % 8;
            if (what == 0) {
                advlock_conn_on_closed(&md.c, "57P01", "terminating connection", md.now);
                session_gone(&md);
            } else if (what == 1 && advlock_conn_busy(&md.c) == 0
                       && advlock_conn_outstanding(&md.c) == 0) {
                block_changes(&md);
            } else if (what == 2 && !md.block_failed) {
                /* the caller locks a key with a statement of its own */
                int k = byte(&in) % KEYS, mode = byte(&in) % 2;
                md.holds[k][mode]++;
                md.foreign[k][mode]++;
            } else if (what == 5) {
                advlock_conn_on_notice(&md.c, "01000", "a notice", md.now);
            } else if (what == 6) {
                advlock_conn_on_cancel_failed(&md.c, m, "refused", md.now);
            } else if (what == 3 || what == 4) {
                /* a release or a verify of a key by a member that may not
                 * hold it; session scope (a verify of transaction scope
                 * would take a session's hold for the block's) */
                advlock_options o;
                advlock_options_init(&o);
                o.mode = byte(&in) % 2 ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE;
                int64_t key = keys[byte(&in) % KEYS];
                int held = advlock_member_held(m);
                if ((what == 3 ? advlock_conn_start_release_key
                               : advlock_conn_start_verify_key)(&md.c, m, key, &o, md.now)
                    == 0)
                    md.op[m - md.m] = held ? (what == 3 ? OP_RELEASE : OP_VERIFY) : OP_BY_KEY;
            }
            break;
        }
        case 14:
            if (byte(&in) % 8 == 0) {
                md.pid++;
                CHECK(advlock_conn_on_reset(&md.c, md.pid, 7 + (uint64_t)md.pid, md.now) == 0);
                session_gone(&md);
                md.in_block = 0; /* a new session is in no block */
            }
            break;
        default: (void)advlock_conn_set_lease(&md.c, byte(&in) % 2 ? 30000 : 0, 0); break;
        }
        take_events(&md);
        check(&md);
    }
    return 0;
}
