/*
 * The lease world (advlock_sim_lease_run): clients take turns holding one
 * lock on the fake database over TCP links that cuts silence, each holder
 * driving an advlock_lease as a driver does; the server ends silent
 * sessions from their TCP settings as Linux does; the checker compares
 * the holders' work. Events are few per client, so the next one is found
 * by looking at every client and session.
 */
#include "lease_sim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NEVER INT64_MAX
/* The key the clients contend for (any will do: the fake has one lock). */
#define LEASE_KEY INT64_C(0x6c65617365)

enum {
    TIMER_SLACK_MS = 4,       /* a client's poll wakes up to this late */
    OVERSHOOT_MS = 750,       /* the server's timers fire up to this late */
    RECONNECT_MS = 1000,      /* a client retries a failed connection after this */
    CLIENT_NOTICE_MS = 10000, /* a client's own keepalives find a dead session */
    ACQUIRE_TIMEOUT_MS = 20000,
    THINK_MAX_MS = 2000,
    MAX_SESSIONS = ADVLOCK_SIM_LEASE_MAX_CLIENTS * 8
};

/* A TCP segment: when it was sent, its one-way latency, and when it is
 * received (NEVER: none on its way). */
typedef struct segment {
    int64_t sent_ms, latency_ms, at_ms;
} segment;

enum client_state { THINK, SETUP, ACQUIRE, HOLD, STOPPING, RELEASE, FINISHED };
enum purpose { Q_NONE, Q_SETUP, Q_MACHINE, Q_HEARTBEAT };

typedef struct lease_client {
    enum client_state state;
    int pid; /* its connection's session, 0 for none */
    advlock_machine machine;
    advlock_lease lease;
    /* the one statement out: its purpose, send, and where it is */
    enum purpose q;
    const char *sql;
    int64_t params[3];
    int nparams;
    segment up, down; /* the statement, its answer */
    advlock_result answer;
    int64_t timer_ms;    /* the machine's, the lease's or the think time's wake */
    int64_t stop_at_ms;  /* the lease's stop deadline, as its last action said */
    int64_t work_end_ms; /* HOLD: the work's end; STOPPING: the stop */
    int working, paused_in_work, release_after_answer;
    int64_t work_start_ms;
} lease_client;

/* A session as the server sees it: its keepalive timer and its fate. */
typedef struct lease_session {
    int pid, client;
    int64_t last_rx_ms, tick_ms, end_ms; /* end: when its silence ends it */
    int probes;
    int64_t holder_stop_ms; /* when the work its lock guarded stopped, or NEVER */
    int holder_paused;      /* ... and that work was paused */
    segment fin;            /* the client's close */
} lease_session;

typedef struct lease_world {
    const advlock_sim_lease_config *cfg;
    advlock_sim_lease_stats *st;
    advlock_lease_plan plan;
    advlock_prng prng;
    advlock_fake_db db;
    lease_net net;
    lease_client clients[ADVLOCK_SIM_LEASE_MAX_CLIENTS];
    lease_session sessions[MAX_SESSIONS];
    int64_t now_ms, tolerated_ms;
} lease_world;

static void trace(lease_world *w, int c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void trace(lease_world *w, int c, const char *fmt, ...)
{
    if (w->cfg->trace == NULL)
        return;
    char line[256];
    int n = snprintf(line, sizeof line, "t=%" PRId64 " c%d ", w->now_ms, c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    w->cfg->trace(w->cfg->trace_user, line);
}

/* Records "seed S: t=T ms, client C: what"; the first one stays. */
static void violation(lease_world *w, int c, const char *what)
{
    trace(w, c, "VIOLATION %s", what);
    if (w->st->violation[0] == '\0')
        snprintf(w->st->violation, sizeof w->st->violation,
                 "seed %" PRIu64 ": t=%" PRId64 " ms, client %d: %s", w->cfg->seed, w->now_ms, c,
                 what);
}

/* Sends a segment over client c's link now. */
static void send_segment(lease_world *w, int c, segment *g)
{
    g->sent_ms = w->now_ms;
    g->latency_ms = advlock_prng_between(&w->prng, 0, w->cfg->latency_max_ms);
    g->at_ms = advlock_lease_net_delivery(&w->net, c, g->sent_ms, g->latency_ms);
}

/* A cut began: a segment on its way may now be lost, and sent again. */
static void reroute(const lease_world *w, int c, segment *g)
{
    if (g->at_ms != NEVER)
        g->at_ms = advlock_lease_net_delivery(&w->net, c, g->sent_ms, g->latency_ms);
}

/* The server's session with this pid (0: a free entry), or NULL. */
static lease_session *session_of(lease_world *w, int pid)
{
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (w->sessions[i].pid == pid)
            return &w->sessions[i];
    return NULL;
}

static lease_session *open_session_of(lease_world *w, int pid)
{
    return pid == 0 ? NULL : session_of(w, pid);
}

/* ---- the server's side ---------------------------------------------- */

/* A segment from the client reached the server: its keepalive timer
 * starts over from the session's idle setting (an abort not yet fired,
 * late as timers are, no longer will). */
static void heard(lease_world *w, lease_session *s, int64_t at_ms)
{
    advlock_fake_tcp tcp;
    advlock_fake_db_tcp_settings(&w->db, s->pid, &tcp);
    if (at_ms < s->last_rx_ms)
        return;
    s->last_rx_ms = at_ms;
    s->probes = 0;
    s->end_ms = NEVER;
    s->tick_ms = at_ms + (int64_t)tcp.keepalives_idle_s * 1000;
}

/* The session ends: its locks are free from now on. */
static void end_session(lease_world *w, lease_session *s, const char *why)
{
    advlock_fake_db_set_time(&w->db, w->now_ms);
    advlock_fake_db_close(&w->db, s->pid);
    trace(w, s->client, "server ends session %d (%s)", s->pid, why);
    lease_client *cl = &w->clients[s->client];
    if (cl->pid == s->pid && cl->down.at_ms != NEVER) {
        /* its answer dies with the socket: the client's own keepalives
         * tell it once the link is back */
        cl->answer = ADVLOCK_RESULT_CONNECTION_LOST;
        cl->down.sent_ms =
            advlock_lease_net_up_from(&w->net, s->client, w->now_ms) + CLIENT_NOTICE_MS;
        cl->down.latency_ms = 0;
        cl->down.at_ms = cl->down.sent_ms;
    }
    memset(s, 0, sizeof *s);
}

/* A keepalive tick: a probe answered (the link is up) renews the timer;
 * unanswered, the connection is aborted at the first tick U after the last
 * segment received (without U, after count probes), plus the timer's
 * lateness. */
static void on_tick(lease_world *w, lease_session *s)
{
    advlock_fake_tcp tcp;
    advlock_fake_db_tcp_settings(&w->db, s->pid, &tcp);
    if (!advlock_lease_net_cut_at(&w->net, s->client, w->now_ms)) {
        heard(w, s, w->now_ms);
        return;
    }
    s->probes++;
    s->tick_ms = w->now_ms + (int64_t)tcp.keepalives_interval_s * 1000;
    int gives_up = tcp.user_timeout_ms > 0 ? w->now_ms - s->last_rx_ms >= tcp.user_timeout_ms
                                           : s->probes > tcp.keepalives_count;
    if (gives_up) {
        s->tick_ms = NEVER;
        s->end_ms = w->now_ms + advlock_prng_between(&w->prng, 0, OVERSHOOT_MS);
    }
}

/* The server frees a silent session's lock: within L of the last segment
 * it received, and never before its expired holder stopped. */
static void on_silence_end(lease_world *w, lease_session *s)
{
    advlock_sim_lease_stats *st = w->st;
    int64_t release = w->now_ms - s->last_rx_ms;
    st->releases++;
    if (release > st->max_release_ms)
        st->max_release_ms = release;
    if (w->plan.lease_ms - release < st->min_lease_left_ms)
        st->min_lease_left_ms = w->plan.lease_ms - release;
    if (release > w->plan.lease_ms)
        violation(w, s->client,
                  "the server freed the lock later than the lease after the last "
                  "segment it received");
    /* the work it guarded stopped (or stops) when? */
    int held = 0;
    advlock_fake_db_holds(&w->db, s->pid, LEASE_KEY, ADVLOCK_FAKE_EXCLUSIVE, &held, NULL);
    const lease_client *cl = &w->clients[s->client];
    int still = cl->pid == s->pid && cl->working;
    int64_t stop = still ? cl->work_end_ms : s->holder_stop_ms;
    int paused = still ? cl->paused_in_work : s->holder_paused;
    if (held && !paused && stop != NEVER && w->now_ms - stop < st->min_stop_margin_ms)
        st->min_stop_margin_ms = w->now_ms - stop;
    end_session(w, s, "silent");
}

static advlock_result result_of(const advlock_fake_result *r)
{
    switch (r->status) {
    case ADVLOCK_FAKE_ROW_TRUE:
    case ADVLOCK_FAKE_ROW_VOID: return ADVLOCK_RESULT_TRUE;
    case ADVLOCK_FAKE_ROW_FALSE: return ADVLOCK_RESULT_FALSE;
    case ADVLOCK_FAKE_ROW_NULL: return ADVLOCK_RESULT_NULL;
    case ADVLOCK_FAKE_CONNECTION_LOST: return ADVLOCK_RESULT_CONNECTION_LOST;
    default: return ADVLOCK_RESULT_SERVER_ERROR;
    }
}

/* The client's statement reaches the server: it runs, and its answer
 * leaves at once (a closed session answers with a reset). */
static void on_arrive(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->up.at_ms = NEVER;
    lease_session *s = open_session_of(w, cl->pid);
    if (s == NULL) {
        cl->answer = ADVLOCK_RESULT_CONNECTION_LOST;
    } else {
        heard(w, s, w->now_ms);
        advlock_fake_result r;
        advlock_fake_db_set_time(&w->db, w->now_ms);
        advlock_fake_db_exec_params(&w->db, cl->pid, cl->sql, cl->params, cl->nparams, &r);
        cl->answer = result_of(&r);
    }
    send_segment(w, c, &cl->down);
}

static void on_fin(lease_world *w, lease_session *s)
{
    s->fin.at_ms = NEVER;
    end_session(w, s, "closed by its client");
}

/* ---- the checker ------------------------------------------------------ */

static void work_starts(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    w->st->holds++;
    for (int d = 0; d < w->cfg->clients; d++) {
        if (d == c || !w->clients[d].working)
            continue;
        if (w->clients[d].paused_in_work) {
            w->st->paused_overlaps++;
            trace(w, c, "overlap with c%d (paused: fencing's case)", d);
        } else {
            char what[96];
            snprintf(what, sizeof what,
                     "two holders' work overlaps: it began while client %d's "
                     "went on",
                     d);
            w->st->overlaps++;
            violation(w, c, what);
        }
    }
    cl->working = 1;
    cl->paused_in_work = 0;
    cl->work_start_ms = w->now_ms;
    trace(w, c, "work starts");
}

static void work_stops(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    for (int d = 0; d < w->cfg->clients; d++) {
        lease_client *o = &w->clients[d];
        if (d == c || !o->working || o->paused_in_work || cl->paused_in_work)
            continue;
        int64_t from = o->work_start_ms > cl->work_start_ms ? o->work_start_ms : cl->work_start_ms;
        if (w->now_ms - from > w->st->max_overlap_ms)
            w->st->max_overlap_ms = w->now_ms - from;
    }
    cl->working = 0;
    trace(w, c, "work stops");
}

/* An expiry is spurious unless a pause, or cuts spanning more than the
 * tolerated blip, fell between the last renewal's send and now. */
static void judge_expiry(lease_world *w, int c, int64_t anchor_ms)
{
    int64_t first = NEVER, last = 0;
    for (int i = 0; i < w->net.ncuts; i++) {
        const lease_cut *k = &w->net.cuts[i];
        if (!k->started || k->client != c || k->end_ms < anchor_ms || k->start_ms > w->now_ms)
            continue;
        if (k->kind == ADVLOCK_SIM_CUT_PAUSE)
            return;
        first = k->start_ms < first ? k->start_ms : first;
        last = k->end_ms > last ? k->end_ms : last;
    }
    if (first == NEVER || last - first <= w->tolerated_ms) {
        w->st->spurious_stops++;
        violation(w, c,
                  "the lease expired with no pause and no cut longer than the tolerated "
                  "blip");
    }
}

/* ---- the clients ------------------------------------------------------ */

static void send_statement(lease_world *w, int c, enum purpose q, advlock_sql sql, int64_t p1,
                           int64_t p2, int64_t p3)
{
    lease_client *cl = &w->clients[c];
    cl->q = q;
    cl->sql = advlock_sql_text(sql);
    cl->nparams = advlock_sql_params(sql);
    cl->params[0] = p1;
    cl->params[1] = p2;
    cl->params[2] = p3;
    send_segment(w, c, &cl->up);
}

static void disconnect(lease_world *w, int c);

/* Between holds: the connection closed, a new one after a while. */
static void think(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    disconnect(w, c);
    cl->state = w->now_ms >= w->cfg->run_ms ? FINISHED : THINK;
    cl->timer_ms =
        cl->state == FINISHED ? NEVER : w->now_ms + advlock_prng_between(&w->prng, 0, THINK_MAX_MS);
}

/* The client closes its connection: a FIN follows its last segments. */
static void disconnect(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    lease_session *s = open_session_of(w, cl->pid);
    if (s != NULL)
        send_segment(w, c, &s->fin);
    cl->pid = 0;
    cl->q = Q_NONE;
    cl->up.at_ms = cl->down.at_ms = NEVER;
}

static void connect_client(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    lease_session *s = session_of(w, 0); /* a free entry */
    if (advlock_lease_net_cut_at(&w->net, c, w->now_ms) || s == NULL) {
        cl->timer_ms = w->now_ms + RECONNECT_MS;
        return;
    }
    advlock_fake_db_set_time(&w->db, w->now_ms);
    advlock_fake_db_connect(&w->db, &cl->pid);
    advlock_fake_db_set_transport(&w->db, cl->pid, ADVLOCK_FAKE_TCP);
    memset(s, 0, sizeof *s);
    s->pid = cl->pid;
    s->client = c;
    s->end_ms = s->fin.at_ms = s->holder_stop_ms = NEVER;
    s->last_rx_ms = -1;
    heard(w, s, w->now_ms);
    advlock_lease_init(&cl->lease, &w->plan);
    advlock_lease_start_setup(&cl->lease, 0, w->now_ms);
    advlock_lease_action a = advlock_lease_next(&cl->lease);
    cl->state = SETUP;
    cl->timer_ms = NEVER;
    send_statement(w, c, Q_SETUP, a.sql, a.param, a.param2, 0);
    advlock_lease_on_sent(&cl->lease, w->now_ms);
}

static void expire(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    w->st->expiries++;
    judge_expiry(w, c, cl->stop_at_ms - w->plan.deadline_ms);
    cl->state = STOPPING;
    cl->timer_ms = NEVER;
    cl->work_end_ms = w->now_ms + advlock_prng_between(&w->prng, 0, w->plan.stop_ms);
    if (w->cfg->close_at_expiry)
        disconnect(w, c);
    trace(w, c, "lease EXPIRED (reason %d); stops at %" PRId64,
          advlock_lease_expiry_reason(&cl->lease), cl->work_end_ms);
}

static void drive_lease(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    advlock_lease_action a = advlock_lease_next(&cl->lease);
    int64_t slack = advlock_prng_between(&w->prng, 0, TIMER_SLACK_MS);
    if (a.kind != ADVLOCK_LEASE_EXPIRED)
        cl->stop_at_ms = a.stop_at_ms;
    switch (a.kind) {
    case ADVLOCK_LEASE_QUERY:
        if (cl->q == Q_NONE) {
            w->st->heartbeats++;
            send_statement(w, c, Q_HEARTBEAT, a.sql, a.param, a.param2, 0);
            advlock_lease_on_sent(&cl->lease, w->now_ms);
        }
        cl->timer_ms = a.wake_at_ms + slack;
        break;
    case ADVLOCK_LEASE_WAIT: cl->timer_ms = a.wake_at_ms + slack; break;
    case ADVLOCK_LEASE_EXPIRED: expire(w, c); break;
    default: cl->timer_ms = NEVER; break;
    }
}

/* The machine granted the lock: the work starts, under the lease unless
 * its deadline passed already (the grant's send is older than D). */
static void acquired(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->state = HOLD;
    if (w->cfg->heartbeats) {
        advlock_lease_hold(&cl->lease, cl->up.sent_ms, 0, w->now_ms);
        if (advlock_lease_next(&cl->lease).kind == ADVLOCK_LEASE_EXPIRED) {
            trace(w, c, "granted too late for the lease: no work");
            w->st->expiries++;
            judge_expiry(w, c, cl->up.sent_ms);
            think(w, c);
            return;
        }
    }
    work_starts(w, c);
    cl->work_end_ms =
        w->now_ms + advlock_prng_between(&w->prng, w->cfg->hold_min_ms, w->cfg->hold_max_ms);
    cl->timer_ms = NEVER;
    if (w->cfg->heartbeats)
        drive_lease(w, c);
}

static void drive_machine(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    advlock_action a = advlock_next_action(&cl->machine);
    if (a.kind == ADVLOCK_ACTION_QUERY) {
        send_statement(w, c, Q_MACHINE, a.sql, a.param, a.param2, a.param3);
        cl->timer_ms = NEVER;
    } else if (a.kind == ADVLOCK_ACTION_SLEEP) {
        cl->timer_ms = a.wake_at_ms;
    } else if (a.kind == ADVLOCK_ACTION_DONE) {
        advlock_outcome o = a.report->outcome;
        if (cl->state == ACQUIRE && o == ADVLOCK_ACQUIRED) {
            acquired(w, c);
            return;
        }
        trace(w, c, "operation ends, outcome %d", (int)o);
        think(w, c);
    }
}

static void start_release(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->state = RELEASE;
    cl->release_after_answer = 0;
    advlock_start_release_key(&cl->machine, LEASE_KEY, w->now_ms);
    drive_machine(w, c);
}

static void on_answer(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    enum purpose q = cl->q;
    advlock_result r = cl->answer;
    cl->q = Q_NONE;
    cl->down.at_ms = NEVER;
    lease_session *s = open_session_of(w, cl->pid);
    if (s != NULL && r != ADVLOCK_RESULT_CONNECTION_LOST
        && !advlock_lease_net_cut_at(&w->net, c, w->now_ms))
        heard(w, s, w->now_ms); /* the answer's ACK */
    if (q == Q_SETUP) {
        advlock_lease_on_result(&cl->lease, r, w->now_ms);
        if (advlock_lease_setup_result(&cl->lease) != ADVLOCK_LEASE_APPLIED) {
            disconnect(w, c);
            think(w, c);
            return;
        }
        cl->state = ACQUIRE;
        advlock_start_acquire_key(&cl->machine, LEASE_KEY, ACQUIRE_TIMEOUT_MS, w->now_ms);
        drive_machine(w, c);
    } else if (q == Q_MACHINE) {
        advlock_on_result(&cl->machine, r, NULL, NULL, w->now_ms);
        drive_machine(w, c);
    } else if (cl->state == HOLD) {
        advlock_lease_on_result(&cl->lease, r, w->now_ms);
        drive_lease(w, c);
    } else if (cl->release_after_answer) {
        start_release(w, c); /* the heartbeat answered after the work ended */
    }
}

static void on_timer(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->timer_ms = NEVER;
    switch (cl->state) {
    case THINK: connect_client(w, c); break;
    case ACQUIRE:
    case RELEASE:
        advlock_on_timer(&cl->machine, w->now_ms);
        drive_machine(w, c);
        break;
    case HOLD:
        advlock_lease_on_timer(&cl->lease, w->now_ms);
        drive_lease(w, c);
        break;
    default: break;
    }
}

/* The work's end: its release (after an outstanding heartbeat's answer),
 * or, once the lease expired, the stop, and only then the close. */
static void on_work_end(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->work_end_ms = NEVER;
    work_stops(w, c);
    lease_session *s = open_session_of(w, cl->pid);
    if (s != NULL) {
        s->holder_stop_ms = w->now_ms;
        s->holder_paused = cl->paused_in_work;
    }
    if (cl->state == STOPPING) {
        think(w, c);
        return;
    }
    advlock_lease_stop(&cl->lease);
    cl->timer_ms = NEVER;
    cl->state = RELEASE;
    if (cl->q == Q_HEARTBEAT)
        cl->release_after_answer = 1;
    else
        start_release(w, c);
}

/* ---- cuts ------------------------------------------------------------- */

static void on_cut_start(lease_world *w, lease_cut *k)
{
    if (k->client < 0) {
        k->client = 0;
        for (int c = 0; c < w->cfg->clients; c++)
            if (w->clients[c].working)
                k->client = c;
    }
    k->started = 1;
    lease_client *cl = &w->clients[k->client];
    int64_t length = k->end_ms - k->start_ms;
    if (k->kind == ADVLOCK_SIM_CUT_PAUSE) {
        w->st->pauses++;
        if (cl->working)
            cl->paused_in_work = 1;
    } else {
        w->st->partitions++;
        if (cl->working && length <= w->tolerated_ms)
            w->st->blips++;
    }
    trace(w, k->client, "%s for %" PRId64 " ms",
          k->kind == ADVLOCK_SIM_CUT_PAUSE ? "pause" : "partition", length);
    reroute(w, k->client, &cl->up);
    reroute(w, k->client, &cl->down);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (w->sessions[i].pid != 0 && w->sessions[i].client == k->client)
            reroute(w, k->client, &w->sessions[i].fin);
}

/* ---- the loop --------------------------------------------------------- */

enum event_kind {
    EV_NONE,
    EV_CUT,
    EV_ARRIVE,
    EV_ANSWER,
    EV_TIMER,
    EV_WORK_END,
    EV_TICK,
    EV_SILENCE_END,
    EV_FIN
};

typedef struct next_event {
    int64_t at;
    enum event_kind kind;
    int index;
} next_event;

static void consider(next_event *e, int64_t at, enum event_kind kind, int index)
{
    if (at < e->at) {
        e->at = at;
        e->kind = kind;
        e->index = index;
    }
}

/* A client's own events wait while it is paused; the server's do not. */
static int64_t client_time(const lease_world *w, int c, int64_t at)
{
    int64_t until;
    if (at != NEVER && advlock_lease_net_paused_at(&w->net, c, at, &until))
        return until;
    return at;
}

static next_event next_of(const lease_world *w)
{
    next_event e = {NEVER, EV_NONE, 0};
    for (int i = 0; i < w->net.ncuts; i++)
        if (!w->net.cuts[i].started)
            consider(&e, w->net.cuts[i].start_ms, EV_CUT, i);
    for (int c = 0; c < w->cfg->clients; c++) {
        const lease_client *cl = &w->clients[c];
        consider(&e, cl->up.at_ms, EV_ARRIVE, c);
        consider(&e, client_time(w, c, cl->down.at_ms), EV_ANSWER, c);
        consider(&e, client_time(w, c, cl->timer_ms), EV_TIMER, c);
        consider(&e, client_time(w, c, cl->work_end_ms), EV_WORK_END, c);
    }
    for (int i = 0; i < MAX_SESSIONS; i++) {
        const lease_session *s = &w->sessions[i];
        if (s->pid == 0)
            continue;
        consider(&e, s->tick_ms, EV_TICK, i);
        consider(&e, s->end_ms, EV_SILENCE_END, i);
        consider(&e, s->fin.at_ms, EV_FIN, i);
    }
    return e;
}

static void handle(lease_world *w, const next_event *e)
{
    switch (e->kind) {
    case EV_CUT: on_cut_start(w, &w->net.cuts[e->index]); break;
    case EV_ARRIVE: on_arrive(w, e->index); break;
    case EV_ANSWER: on_answer(w, e->index); break;
    case EV_TIMER: on_timer(w, e->index); break;
    case EV_WORK_END: on_work_end(w, e->index); break;
    case EV_TICK: on_tick(w, &w->sessions[e->index]); break;
    case EV_SILENCE_END: on_silence_end(w, &w->sessions[e->index]); break;
    case EV_FIN: on_fin(w, &w->sessions[e->index]); break;
    default: break;
    }
}

static int config_ok(const advlock_sim_lease_config *cfg, advlock_lease_plan *plan)
{
    if (cfg->clients < 2 || cfg->clients > ADVLOCK_SIM_LEASE_MAX_CLIENTS || cfg->run_ms < 0
        || cfg->hold_min_ms < 0 || cfg->hold_max_ms < cfg->hold_min_ms || cfg->latency_max_ms < 0
        || cfg->ncuts < 0 || cfg->ncuts > ADVLOCK_SIM_LEASE_MAX_CUTS
        || advlock_lease_plan_init(plan, cfg->lease_ms, cfg->stop_ms) != 0)
        return 0;
    for (int i = 0; i < cfg->ncuts; i++) {
        const advlock_sim_cut *k = &cfg->cuts[i];
        if (k->at_ms < 0 || k->length_ms < 0 || k->client < -1 || k->client >= cfg->clients
            || (k->kind != ADVLOCK_SIM_CUT_PARTITION && k->kind != ADVLOCK_SIM_CUT_PAUSE))
            return 0;
    }
    return 1;
}

static void world_init(lease_world *w, const advlock_sim_lease_config *cfg,
                       advlock_sim_lease_stats *out)
{
    w->cfg = cfg;
    w->st = out;
    w->now_ms = 0;
    memset(out, 0, sizeof *out);
    out->min_stop_margin_ms = out->min_lease_left_ms = NEVER;
    advlock_prng_seed(&w->prng, cfg->seed ^ UINT64_C(0x1EA5E1EA5E));
    advlock_fake_db_init(&w->db);
    w->tolerated_ms = advlock_sim_lease_tolerated_blip_ms(&w->plan);
    w->net.ncuts = cfg->ncuts;
    for (int i = 0; i < cfg->ncuts; i++) {
        lease_cut *k = &w->net.cuts[i];
        k->kind = cfg->cuts[i].kind;
        k->start_ms = cfg->cuts[i].at_ms;
        k->end_ms = cfg->cuts[i].at_ms + cfg->cuts[i].length_ms;
        k->client = cfg->cuts[i].client;
        k->started = 0;
    }
    for (int c = 0; c < cfg->clients; c++) {
        lease_client *cl = &w->clients[c];
        advlock_machine_init(&cl->machine);
        cl->state = THINK;
        cl->up.at_ms = cl->down.at_ms = cl->work_end_ms = NEVER;
        cl->timer_ms = advlock_prng_between(&w->prng, 0, THINK_MAX_MS);
    }
}

int64_t advlock_sim_lease_tolerated_blip_ms(const advlock_lease_plan *p)
{
    return p == NULL ? 0 : (p->deadline_ms - p->heartbeat_ms - 400) / 2;
}

int advlock_sim_lease_run(const advlock_sim_lease_config *cfg, advlock_sim_lease_stats *out)
{
    lease_world w;
    if (cfg == NULL || out == NULL || !config_ok(cfg, &w.plan))
        return ADVLOCK_EINVAL;
    memset(w.clients, 0, sizeof w.clients);
    memset(w.sessions, 0, sizeof w.sessions);
    world_init(&w, cfg, out);
    for (;;) {
        next_event e = next_of(&w);
        if (e.kind == EV_NONE)
            break;
        if (e.at < w.now_ms) { /* the model's own check: events come in order */
            violation(&w, e.index, "an event was due before the one just handled");
            break;
        }
        w.now_ms = e.at;
        handle(&w, &e);
    }
    return out->violation[0] != '\0' ? ADVLOCK_SIM_VIOLATION : 0;
}
