/*
 * The lock-set world (advlock_sim_lockset_run): lock sets, several callers
 * sharing one connection and one server session, beside ordinary clients
 * with a connection each, against the fake database, with the invariants
 * checked after every event. Every connection is the core's connection
 * engine (advlock_conn), the one every driver pumps: this world is its
 * pump, as the libpq lock set is, so the simulator runs the real rules
 * (exclusion, the session check, give-backs, losses), not a model of them.
 * Every caller is a member of a connection; a loner's has one member.
 *
 * A connection's statements form one FIFO: each reaches the server no
 * earlier than the one before it, runs there at once (polling only: no
 * statement waits), and its answer comes back no earlier than the one
 * before it. Pipelined, a statement goes out as soon as the engine offers
 * it; behind a proxy, only when the one before it has answered. Events are
 * few per member and connection, so the next one is found by looking at
 * all.
 */
#include "pump.h"
#include "scan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum {
    MAX_CONNS = ADVLOCK_SIM_LOCKSET_MAX_SETS + ADVLOCK_SIM_LOCKSET_MAX_LONERS,
    MAX_MEMBERS = ADVLOCK_SIM_LOCKSET_MAX_SETS * ADVLOCK_SIM_LOCKSET_MAX_MEMBERS
                  + ADVLOCK_SIM_LOCKSET_MAX_LONERS,
    NBUCKETS = 8,
    /* statements in flight on one connection: each member's, and room for
     * the engine's own (its back-pressure holds the rest) */
    SLOTS = ADVLOCK_SIM_LOCKSET_MAX_MEMBERS + 8,
    MAX_ROWS = 2 * MAX_CONNS, /* a holders answer: a granted row per session and mode */
    MAX_EVENTS = 4000000      /* a run that has not ended by then never will */
};

static const char *const key_names[ADVLOCK_SIM_LOCKSET_MAX_KEYS] = {"set-0", "set-1", "set-2",
                                                                    "set-3"};

enum phase { THINK, ACQUIRING, HOLDING, RELEASING, FINISHED };

/* One caller: its member of its connection's engine, and what it was told. */
typedef struct member {
    advlock_member em; /* first: the engine's events name it */
    int conn;
    enum phase phase;
    unsigned cycles_left;
    int key_index;
    advlock_mode mode;
    int64_t step_at;   /* THINK: the acquire starts; HOLDING: the release starts */
    int64_t cancel_at; /* ACQUIRING: the caller gives up */
    uint64_t tries_sent;
    int believes;   /* told ACQUIRED, release not started: its work runs */
    int told_holds; /* the server's hold as the answers told it (try TRUE, unlock TRUE) */
    /* the holders answer, read at the server when the query ran */
    advlock_holder rows[MAX_ROWS];
    size_t nrows;
} member;

/* One statement on a connection, from its send to its answer. */
typedef struct statement {
    advlock_member *member; /* NULL: the engine's own */
    advlock_sql sql;
    int64_t params[3];
    int sent, ran;
    int64_t arrive_at, deliver_at;
    int effect; /* +1 a grant, -1 a release, on the server's count */
    int key_index;
    advlock_mode mode;
    advlock_fake_result result;
} statement;

typedef struct conn {
    int is_set;
    int pid;
    int killed;        /* terminated at the server, the client not told yet */
    int64_t kill_at;   /* when its session is terminated (once), or NEVER */
    int64_t notice_at; /* killed: when the client reads the end */
    advlock_conn engine;
    advlock_conn_slot slots[SLOTS];
    advlock_peer *buckets[NBUCKETS];
    statement queue[SLOTS];
    int head, len;
    int64_t last_arrive, last_deliver;
    /* answers on their way: what they will tell of the server's holds */
    int pending[ADVLOCK_SIM_LOCKSET_MAX_KEYS][2];
    /* grants of cancelled members' tries, the engine's until given back */
    int kept[ADVLOCK_SIM_LOCKSET_MAX_KEYS][2];
} conn;

typedef struct world {
    const advlock_sim_lockset_config *cfg;
    advlock_sim_lockset_stats *st;
    advlock_prng prng;
    advlock_fake_db db;
    conn conns[MAX_CONNS];
    int nconns;
    member members[MAX_MEMBERS];
    int nmembers;
    int64_t keys[ADVLOCK_SIM_LOCKSET_MAX_KEYS];
    int64_t now_ms;
} world;

__attribute__((format(printf, 3, 4))) static void trace(world *w, int m, const char *fmt, ...)
{
    if (w->cfg->trace == NULL)
        return;
    char line[256];
    int n = snprintf(line, sizeof line, "t=%" PRId64 " m%d/c%d ", w->now_ms, m,
                     m >= 0 ? w->members[m].conn : -1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    w->cfg->trace(w->cfg->trace_user, line);
}

/* Records "seed S: t=T ms, member M: what"; the first one stays. */
__attribute__((format(printf, 3, 4))) static void violation(world *w, int m, const char *fmt, ...)
{
    char what[ADVLOCK_SIM_VIOLATION_MAX - 80]; /* room for the seed, time and member */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    trace(w, m, "VIOLATION %s", what);
    if (w->st->violation[0] == '\0')
        snprintf(w->st->violation, sizeof w->st->violation,
                 "seed %" PRIu64 ": t=%" PRId64 " ms, member %d: %s", w->cfg->seed, w->now_ms, m,
                 what);
}

static int failed(const world *w)
{
    return w->st->violation[0] != '\0';
}

/* ---- statements -------------------------------------------------------- */

/* The try-locks the exclusion table is asked about (session scope only). */
static int is_try_lock(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_TRY_LOCK || sql == ADVLOCK_SQL_TRY_LOCK_GUARDED
           || sql == ADVLOCK_SQL_TRY_LOCK_FENCED || sql == ADVLOCK_SQL_TRY_LOCK_SHARED
           || sql == ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED;
}

/* The mode a try-lock takes or an unlock gives back. */
static advlock_mode mode_of(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_TRY_LOCK_SHARED || sql == ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED
                   || sql == ADVLOCK_SQL_UNLOCK_SHARED || sql == ADVLOCK_SQL_UNLOCK_SHARED_GUARDED
               ? ADVLOCK_SHARED
               : ADVLOCK_EXCLUSIVE;
}

static int is_unlock(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_UNLOCK || sql == ADVLOCK_SQL_UNLOCK_SHARED
           || sql == ADVLOCK_SQL_UNLOCK_GUARDED || sql == ADVLOCK_SQL_UNLOCK_SHARED_GUARDED;
}

static int key_index_of(const world *w, int64_t key)
{
    for (int k = 0; k < w->cfg->keys; k++)
        if (w->keys[k] == key)
            return k;
    return -1;
}

static statement *queued(conn *c, int i)
{
    return &c->queue[(c->head + i) % SLOTS];
}

static int member_index(const world *w, const advlock_member *em)
{
    return (int)((const member *)em - w->members); /* em is its member's first field */
}

/* Puts the statement on its way: it reaches the server after the one
 * before it, and its answer comes back after that one's. */
static void send_statement(world *w, conn *c, statement *s)
{
    int64_t up = advlock_prng_between(&w->prng, 0, w->cfg->latency_max_ms);
    int64_t down = advlock_prng_between(&w->prng, 0, w->cfg->latency_max_ms);
    s->sent = 1;
    s->arrive_at = w->now_ms + up > c->last_arrive ? w->now_ms + up : c->last_arrive;
    c->last_arrive = s->arrive_at;
    s->deliver_at = s->arrive_at + down > c->last_deliver ? s->arrive_at + down : c->last_deliver;
    c->last_deliver = s->deliver_at;
    w->st->statements++;
    /* Members' statements: the lock table's settings may travel with the
     * first session check. */
    int out = 0;
    for (int i = 0; i < c->len; i++)
        out += queued(c, i)->sent && queued(c, i)->sql != ADVLOCK_SQL_CAPACITY;
    if (out > w->st->max_in_flight)
        w->st->max_in_flight = out;
}

/* Sends what the connection may send now: everything pipelined, the head
 * alone behind a proxy. */
static void send_ready(world *w, conn *c)
{
    for (int i = 0; i < c->len; i++) {
        statement *s = queued(c, i);
        if (w->cfg->proxied && i > 0)
            return;
        if (!s->sent)
            send_statement(w, c, s);
    }
}

/* ---- pumping the engine ------------------------------------------------- */

static void next_cycle(world *w, member *mb)
{
    mb->phase = --mb->cycles_left == 0 ? FINISHED : THINK;
    mb->step_at = mb->phase == FINISHED
                      ? NEVER
                      : w->now_ms + advlock_prng_between(&w->prng, 0, w->cfg->think_max_ms);
}

static void finish_operation(world *w, int m, const advlock_report *r)
{
    member *mb = &w->members[m];
    const conn *c = &w->conns[mb->conn];
    mb->cancel_at = NEVER;
    advlock_sim_lockset_stats *st = w->st;
    trace(w, m, "done %s", advlock_outcome_name(r->outcome));
    if (mb->phase == ACQUIRING && r->attempts > mb->tries_sent)
        st->local_busy += r->attempts - mb->tries_sent; /* answered by the engine */
    if (mb->phase == ACQUIRING && r->outcome == ADVLOCK_ACQUIRED) {
        st->acquired++;
        if (advlock_peer_state(&mb->em.peer_) != ADVLOCK_PEER_HELD)
            violation(w, m, "ACQUIRED, but its peer is not HELD");
        mb->believes = 1;
        mb->phase = HOLDING;
        mb->step_at = w->now_ms + advlock_prng_between(&w->prng, 0, w->cfg->hold_max_ms);
        return;
    }
    st->timed_out += r->outcome == ADVLOCK_TIMED_OUT;
    st->cancelled += r->outcome == ADVLOCK_CANCELLED;
    st->failed += r->outcome == ADVLOCK_FAILED;
    st->released += r->outcome == ADVLOCK_RELEASED;
    /* A release that did not release, on a connection that lives, means
     * the caller was told of a hold the server did not have. */
    if (mb->phase == RELEASING && r->outcome != ADVLOCK_RELEASED && !c->killed
        && r->failure != ADVLOCK_ECONNLOST)
        violation(w, m, "a release ended %s", advlock_outcome_name(r->outcome));
    next_cycle(w, mb);
}

/* A connection of the world's, as the pump's callbacks see it. */
typedef struct pumped {
    world *w;
    conn *c;
} pumped;

/* What the engine tells of its members: operations ended, locks lost. */
static int take_event(void *user, const advlock_conn_event *ev)
{
    world *w = ((pumped *)user)->w;
    int m = member_index(w, ev->member);
    member *mb = &w->members[m];
    if (ev->kind == ADVLOCK_CONN_DONE) {
        finish_operation(w, m, advlock_member_report(ev->member));
    } else if (mb->phase == HOLDING) {
        w->st->lost++;
        mb->believes = 0;
        trace(w, m, "LOST");
        next_cycle(w, mb);
    }
    return 0;
}

/* A statement the engine offers joins the connection's FIFO. */
static int queue_statement(void *user, const advlock_statement *st)
{
    world *w = ((pumped *)user)->w;
    conn *c = ((pumped *)user)->c;
    if (failed(w) || st->kind != ADVLOCK_STATEMENT_QUERY)
        return failed(w);
    int m = st->member != NULL ? member_index(w, st->member) : -1;
    int key_index = is_try_lock(st->sql) || is_unlock(st->sql) ? key_index_of(w, st->param) : -1;
    if ((is_try_lock(st->sql) || is_unlock(st->sql)) && key_index < 0) {
        violation(w, m, "a statement for a key no caller asked for");
        return 1;
    }
    if (c->len == SLOTS) {
        violation(w, m, "the engine sent past its slots");
        return 1;
    }
    *queued(c, c->len++) = (statement){.member = st->member,
                                       .sql = st->sql,
                                       .params = {st->param, st->param2, st->param3},
                                       .key_index = key_index,
                                       .mode = mode_of(st->sql)};
    if (m >= 0 && is_try_lock(st->sql))
        w->members[m].tries_sent++;
    trace(w, m, "queue %s", advlock_sql_text(st->sql));
    return 0;
}

static void send_queued(void *user)
{
    send_ready(((pumped *)user)->w, ((pumped *)user)->c);
}

static const advlock_sim_pump_ops pump_ops = {queue_statement, send_queued, take_event};

/* Sends what the engine offers, then hands on its events. */
static void pump(world *w, conn *c)
{
    pumped p = {w, c};
    (void)advlock_sim_pump(&c->engine, w->now_ms, &pump_ops, &p);
}

static void start_operation(world *w, int m)
{
    member *mb = &w->members[m];
    conn *c = &w->conns[mb->conn];
    mb->step_at = NEVER;
    mb->tries_sent = 0;
    int rc;
    if (mb->phase == THINK) {
        advlock_options o;
        advlock_options_init(&o);
        mb->mode =
            advlock_prng_chance(&w->prng, w->cfg->shared_ppm) ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE;
        o.mode = mb->mode;
        o.diagnose = w->cfg->diagnose;
        o.clip_to_deadline = advlock_prng_chance(&w->prng, 500000);
        /* fencing tokens: exclusive, direct connections only */
        o.fence = mb->mode == ADVLOCK_EXCLUSIVE && !w->cfg->proxied
                  && advlock_prng_chance(&w->prng, w->cfg->fence_ppm);
        mb->key_index = (int)advlock_prng_below(&w->prng, (uint64_t)w->cfg->keys);
        int64_t timeout = advlock_prng_between(&w->prng, 0, w->cfg->timeout_max_ms);
        mb->cancel_at = advlock_prng_chance(&w->prng, w->cfg->cancel_ppm)
                            ? w->now_ms + advlock_prng_between(&w->prng, 0, timeout + 200)
                            : NEVER;
        mb->phase = ACQUIRING;
        trace(w, m, "acquire %s %s within %" PRId64 " ms", key_names[mb->key_index],
              mb->mode == ADVLOCK_SHARED ? "shared" : "exclusive", timeout);
        rc = advlock_conn_start_acquire_key(&c->engine, &mb->em, w->keys[mb->key_index], timeout,
                                            &o, w->now_ms);
    } else {
        mb->believes = 0; /* its work stops as the release goes out */
        mb->phase = RELEASING;
        trace(w, m, "release %s", key_names[mb->key_index]);
        rc = advlock_conn_start_release(&c->engine, &mb->em, w->now_ms);
    }
    if (rc != 0) {
        violation(w, m, "the engine refused to start: %d", rc);
        return;
    }
    pump(w, c);
}

/* ---- the server and the answers --------------------------------------- */

/* The head's turn: the first statement not yet run reaches the server. */
static void on_arrive(world *w, conn *c, statement *s)
{
    member *mb = s->member != NULL ? &w->members[member_index(w, s->member)] : NULL;
    s->ran = 1;
    advlock_fake_db_set_time(&w->db, w->now_ms);
    /* A release's statements (and every unlock) never fail here: a lock
     * whose release failed on a live connection stays held, which is the
     * caller's to handle, not the set's. */
    if (mb != NULL && mb->phase != RELEASING && !is_unlock(s->sql)
        && advlock_prng_chance(&w->prng, w->cfg->error_ppm)) {
        /* failed before it ran: nothing changes at the server */
        memset(&s->result, 0, sizeof s->result);
        s->result.status = ADVLOCK_FAKE_SERVER_ERROR;
        snprintf(s->result.sqlstate, sizeof s->result.sqlstate, "53200");
        snprintf(s->result.message, sizeof s->result.message, "out of memory");
        return;
    }
    advlock_fake_db_exec_params(&w->db, c->pid, advlock_sql_text(s->sql), s->params,
                                advlock_sql_params(s->sql), &s->result);
    if (s->result.status == ADVLOCK_FAKE_ROWS && mb != NULL) {
        size_t n = advlock_fake_db_holders(&w->db, c->pid, s->params[0], mb->rows, MAX_ROWS);
        mb->nrows = n < MAX_ROWS ? n : MAX_ROWS;
    }
    int granted = s->result.status == ADVLOCK_FAKE_ROW_TRUE
                  || (s->result.status == ADVLOCK_FAKE_ROW_FENCED && s->result.fence_token > 0);
    if (granted && s->key_index >= 0)
        s->effect = is_unlock(s->sql) ? -1 : +1;
    if (s->effect != 0)
        c->pending[s->key_index][s->mode] += s->effect;
}

/* The head's answer reaches the engine. */
static void on_deliver(world *w, conn *c)
{
    statement s = *queued(c, 0);
    c->head = (c->head + 1) % SLOTS;
    c->len--;
    advlock_statement head;
    if (!advlock_conn_head(&c->engine, &head) || head.sql != s.sql) {
        violation(w, -1, "connection %d: an answer for a statement the engine did not send",
                  (int)(c - w->conns));
        return;
    }
    /* A cancelled member's statement is the engine's by now. */
    member *mb = head.member != NULL ? &w->members[member_index(w, head.member)] : NULL;
    if (s.effect != 0) {
        c->pending[s.key_index][s.mode] -= s.effect;
        if (mb != NULL)
            mb->told_holds = s.effect > 0;
        else
            c->kept[s.key_index][s.mode] += s.effect;
    }
    int refused = s.result.status == ADVLOCK_FAKE_ROW_FALSE
                  || (s.result.status == ADVLOCK_FAKE_ROW_FENCED && s.result.fence_token == 0);
    if (refused && is_try_lock(s.sql))
        w->st->server_busy++;
    trace(w, mb != NULL ? (int)(mb - w->members) : -1, "answer %d", (int)s.result.status);
    advlock_answer a;
    advlock_fake_answer(&s.result, mb != NULL ? mb->rows : NULL, mb != NULL ? mb->nrows : 0, &a);
    if (advlock_conn_on_answer(&c->engine, &a, w->now_ms) != 0) {
        violation(w, -1, "the engine refused an answer");
        return;
    }
    pump(w, c);
}

/* ---- sessions: open, killed, noticed ---------------------------------- */

static void open_session(world *w, conn *c, int first)
{
    advlock_fake_db_set_time(&w->db, w->now_ms);
    if (advlock_fake_db_connect(&w->db, &c->pid) != 0) {
        violation(w, -1, "the fake database refused a connection");
        return;
    }
    /* Behind a proxy the pid the client was told is the proxy's own. */
    int announced = w->cfg->proxied ? c->pid + 100000 : c->pid;
    uint64_t token = advlock_prng_next(&w->prng) | 1;
    int rc = first ? advlock_conn_init(&c->engine, c->slots, SLOTS, c->buckets, NBUCKETS, announced,
                                       token, ADVLOCK_CAPS_PIPELINE)
                   : advlock_conn_on_reset(&c->engine, announced, token, w->now_ms);
    if (rc != 0)
        violation(w, -1, "the engine refused the connection: %d", rc);
    c->killed = 0;
    c->notice_at = NEVER;
    c->last_arrive = c->last_deliver = w->now_ms;
}

static void on_kill(world *w, int ci)
{
    conn *c = &w->conns[ci];
    c->kill_at = NEVER;
    advlock_fake_db_set_time(&w->db, w->now_ms);
    advlock_fake_db_close(&w->db, c->pid);
    c->killed = 1;
    c->notice_at = w->now_ms + advlock_prng_between(&w->prng, 1, w->cfg->latency_max_ms + 1);
    w->st->kills++;
    trace(w, -1, "session %d of connection %d terminated", c->pid, ci);
}

/* The client reads the connection's end: the engine answers every
 * statement out lost and makes every held member LOST at once, and the
 * connection opens again. */
static void on_notice(world *w, int ci)
{
    conn *c = &w->conns[ci];
    for (int m = 0; m < w->nmembers; m++)
        if (w->members[m].conn == ci)
            w->members[m].told_holds = 0;
    c->len = 0;
    memset(c->pending, 0, sizeof c->pending);
    memset(c->kept, 0, sizeof c->kept);
    advlock_conn_on_closed(&c->engine, "57P01",
                           "terminating connection due to administrator command", w->now_ms);
    (void)advlock_sim_pump_events(&c->engine, &pump_ops, &(pumped){w, c});
    if (advlock_peers_count(&c->engine.peers_) != 0)
        violation(w, -1, "connection %d lost, yet %zu peers are still in its table", ci,
                  advlock_peers_count(&c->engine.peers_));
    open_session(w, c, 0);
    pump(w, c);
}

/* ---- the invariants ----------------------------------------------------- */

static void check_world(world *w)
{
    int excl[ADVLOCK_SIM_LOCKSET_MAX_KEYS] = {0}, shared[ADVLOCK_SIM_LOCKSET_MAX_KEYS] = {0};
    int told[MAX_CONNS][ADVLOCK_SIM_LOCKSET_MAX_KEYS][2];
    memset(told, 0, sizeof told);
    for (int m = 0; m < w->nmembers; m++) {
        const member *mb = &w->members[m];
        const conn *c = &w->conns[mb->conn];
        if (c->killed)
            continue;
        if (mb->believes)
            (mb->mode == ADVLOCK_SHARED ? shared : excl)[mb->key_index]++;
        if (mb->told_holds)
            told[mb->conn][mb->key_index][mb->mode]++;
        /* A HELD peer with no hold told of: an acquire undoing a try the
         * server may have granted (a fenced try's error) keeps its key. */
        int held = advlock_peer_state(&mb->em.peer_) == ADVLOCK_PEER_HELD;
        if (mb->told_holds ? !held : held && !advlock_member_busy(&mb->em))
            violation(w, m, "its peer's state %d disagrees with the holds it was told of (%d)",
                      advlock_peer_state(&mb->em.peer_), mb->told_holds);
    }
    for (int k = 0; k < w->cfg->keys; k++)
        if (excl[k] > 1 || (excl[k] == 1 && shared[k] > 0))
            violation(w, -1, "%s held by %d exclusive and %d shared callers at once", key_names[k],
                      excl[k], shared[k]);
    for (int ci = 0; ci < w->nconns; ci++) {
        const conn *c = &w->conns[ci];
        if (c->killed)
            continue;
        for (int k = 0; k < w->cfg->keys; k++)
            for (int mode = 0; mode < 2; mode++) {
                int server = 0;
                advlock_fake_db_holds(&w->db, c->pid, w->keys[k], (advlock_fake_mode)mode, &server,
                                      NULL);
                int accounted = told[ci][k][mode] + c->pending[k][mode] + c->kept[k][mode];
                if (server != accounted)
                    violation(w, -1,
                              "connection %d: the server holds %s %s %d times; its callers "
                              "were told of %d, %d answers are on their way and %d grants "
                              "are being given back",
                              ci, key_names[k], mode ? "shared" : "exclusive", server,
                              told[ci][k][mode], c->pending[k][mode], c->kept[k][mode]);
            }
    }
}

static int count_hold(void *user, int pid, int64_t key, advlock_fake_mode mode, int session_level,
                      int transaction_level)
{
    (void)pid, (void)key, (void)mode;
    *(int *)user += session_level + transaction_level;
    return 0;
}

static void check_end(world *w)
{
    int holds = 0;
    advlock_fake_db_each_hold(&w->db, count_hold, &holds);
    if (holds != 0)
        violation(w, -1, "the run ended with %d holds at the server", holds);
    for (int ci = 0; ci < w->nconns; ci++)
        if (advlock_peers_count(&w->conns[ci].engine.peers_) != 0)
            violation(w, -1, "the run ended with %zu peers in connection %d's table",
                      advlock_peers_count(&w->conns[ci].engine.peers_), ci);
}

/* ---- the run ------------------------------------------------------------- */

static int config_ok(const advlock_sim_lockset_config *cfg)
{
    return cfg->sets >= 1 && cfg->sets <= ADVLOCK_SIM_LOCKSET_MAX_SETS && cfg->members >= 1
           && cfg->members <= ADVLOCK_SIM_LOCKSET_MAX_MEMBERS && cfg->loners >= 0
           && cfg->loners <= ADVLOCK_SIM_LOCKSET_MAX_LONERS && cfg->keys >= 1
           && cfg->keys <= ADVLOCK_SIM_LOCKSET_MAX_KEYS && cfg->cycles >= 1
           && cfg->latency_max_ms >= 0 && cfg->think_max_ms >= 0 && cfg->hold_max_ms >= 0
           && cfg->timeout_max_ms >= 0;
}

static void add_conn(world *w, int is_set, int members)
{
    int ci = w->nconns++;
    conn *c = &w->conns[ci];
    memset(c, 0, sizeof *c);
    c->is_set = is_set;
    open_session(w, c, 1);
    c->kill_at = advlock_prng_chance(&w->prng, w->cfg->kill_ppm) ? advlock_prng_between(
                     &w->prng, 0,
                     (int64_t)w->cfg->cycles
                         * (w->cfg->think_max_ms + w->cfg->hold_max_ms + w->cfg->timeout_max_ms))
                                                                 : NEVER;
    for (int i = 0; i < members; i++) {
        member *mb = &w->members[w->nmembers++];
        *mb = (member){.conn = ci,
                       .cycles_left = w->cfg->cycles,
                       .phase = THINK,
                       .step_at = advlock_prng_between(&w->prng, 0, w->cfg->think_max_ms),
                       .cancel_at = NEVER};
        advlock_member_init(&mb->em);
    }
}

enum event_kind { EV_NONE, EV_STEP, EV_WAKE, EV_CANCEL, EV_ARRIVE, EV_DELIVER, EV_KILL, EV_NOTICE };

static sim_next next_of(const world *w)
{
    sim_next e = {NEVER, EV_NONE, 0};
    int busy = 0;
    for (int m = 0; m < w->nmembers; m++)
        busy |= w->members[m].phase != FINISHED;
    for (int ci = 0; ci < w->nconns; ci++) {
        const conn *c = &w->conns[ci];
        if (c->killed) {
            sim_consider(&e, c->notice_at, EV_NOTICE, ci);
            continue;
        }
        sim_consider(&e, advlock_conn_next_wake(&c->engine), EV_WAKE, ci);
        for (int i = 0; i < c->len; i++) {
            const statement *s = &c->queue[(c->head + i) % SLOTS];
            if (s->sent && !s->ran) {
                sim_consider(&e, s->arrive_at, EV_ARRIVE, ci);
                break;
            }
        }
        if (c->len > 0 && c->queue[c->head].ran)
            sim_consider(&e, c->queue[c->head].deliver_at, EV_DELIVER, ci);
        if (busy)
            sim_consider(&e, c->kill_at, EV_KILL, ci);
    }
    for (int m = 0; m < w->nmembers; m++) {
        const member *mb = &w->members[m];
        sim_consider(&e, mb->step_at, EV_STEP, m);
        sim_consider(&e, mb->cancel_at, EV_CANCEL, m);
    }
    return e;
}

static void handle(world *w, const sim_next *e)
{
    /* index: a member's for steps and cancels, else a connection's */
    member *mb = e->kind == EV_STEP || e->kind == EV_CANCEL ? &w->members[e->index] : NULL;
    conn *c = mb != NULL ? &w->conns[mb->conn] : &w->conns[e->index];
    switch (e->kind) {
    case EV_STEP: start_operation(w, e->index); break;
    case EV_WAKE:
        advlock_conn_on_timer(&c->engine, w->now_ms);
        pump(w, c);
        break;
    case EV_CANCEL:
        mb->cancel_at = NEVER;
        trace(w, e->index, "cancel");
        if (advlock_conn_cancel(&c->engine, &mb->em, w->now_ms) != 0)
            violation(w, e->index, "the engine refused a cancel of its acquire");
        else /* no event comes for it: the outcome is known */
            finish_operation(w, e->index, advlock_member_report(&mb->em));
        pump(w, c);
        break;
    case EV_ARRIVE:
        for (int i = 0; i < c->len; i++)
            if (!queued(c, i)->ran) {
                on_arrive(w, c, queued(c, i));
                break;
            }
        break;
    case EV_DELIVER: on_deliver(w, c); break;
    case EV_KILL: on_kill(w, e->index); break;
    case EV_NOTICE: on_notice(w, e->index); break;
    case EV_NONE: break;
    }
}

int advlock_sim_lockset_run(const advlock_sim_lockset_config *cfg, advlock_sim_lockset_stats *out)
{
    if (cfg == NULL || out == NULL || !config_ok(cfg))
        return ADVLOCK_EINVAL;
    world w;
    memset(out, 0, sizeof *out);
    w.cfg = cfg;
    w.st = out;
    w.now_ms = 0;
    w.nconns = 0;
    w.nmembers = 0;
    advlock_prng_seed(&w.prng, cfg->seed);
    advlock_fake_db_init(&w.db);
    for (int k = 0; k < cfg->keys; k++)
        advlock_derive_key(key_names[k], strlen(key_names[k]), &w.keys[k]);
    for (int s = 0; s < cfg->sets; s++)
        add_conn(&w, 1, cfg->members);
    for (int l = 0; l < cfg->loners; l++)
        add_conn(&w, 0, 1);
    while (!failed(&w)) {
        sim_next e = next_of(&w);
        if (e.kind == EV_NONE)
            break;
        if (++out->events > MAX_EVENTS) {
            violation(&w, -1, "the run did not end within %d events", MAX_EVENTS);
            break;
        }
        w.now_ms = e.at > w.now_ms ? e.at : w.now_ms;
        handle(&w, &e);
        check_world(&w);
    }
    if (!failed(&w))
        check_end(&w);
    return failed(&w) ? ADVLOCK_SIM_VIOLATION : 0;
}
