/*
 * The lease world (advlock_sim_lease_run): clients take turns holding one
 * lock on the fake database over TCP links that cuts silence. Each client's
 * connection is the core's connection engine (advlock_conn) with the
 * lease set and one member, the engine every driver pumps: this world is
 * its pump, so the setup, the heartbeats, the deadline and the losses the
 * checker judges are the engine's, not a model's. The server ends silent
 * sessions from their TCP settings as Linux does, and on its own where the
 * config says (a terminate, a crash and restart); the checker compares the
 * holders' work. Events are few per client, so the next one is found by
 * looking at every client and session.
 */
#include "lease_sim.h"
#include "pump.h"
#include "scan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The key the clients contend for (any will do: the fake has one lock). */
#define LEASE_KEY INT64_C(0x6c65617365)

enum {
    TIMER_SLACK_MS = 4,       /* a client's poll wakes up to this late */
    OVERSHOOT_MS = 750,       /* the server's timers fire up to this late */
    RECONNECT_MS = 1000,      /* a client retries a failed connection after this */
    CLIENT_NOTICE_MS = 10000, /* a client's own keepalives find a dead session */
    ACQUIRE_TIMEOUT_MS = 20000,
    THINK_MAX_MS = 2000,
    MAX_SESSIONS = ADVLOCK_SIM_LEASE_MAX_CLIENTS * 8,
    /* statements in flight on one connection: one member's and the
     * engine's own (the settings row, the setup, a heartbeat) */
    SLOTS = 8,
    NBUCKETS = 2,
    MAX_EVENTS = 2000000 /* a run that has not ended by then never will */
};

/* A TCP segment: when it was sent, its one-way latency, and when it is
 * received (NEVER: none on its way). */
typedef struct segment {
    int64_t sent_ms, latency_ms, at_ms;
} segment;

/* One statement on a client's link, from its send to its answer. */
typedef struct statement {
    advlock_sql sql;
    int64_t params[3];
    segment up, down; /* the statement, its answer */
    int ran;
    advlock_fake_result result;
} statement;

enum client_state { THINK, ACQUIRE, HOLD, STOPPING, RELEASE, FINISHED };

typedef struct lease_client {
    enum client_state state;
    int pid; /* its connection's session, 0 for none */
    advlock_conn engine;
    advlock_conn_slot slots[SLOTS];
    advlock_peer *buckets[NBUCKETS];
    advlock_member member;
    statement link[SLOTS]; /* in flight, oldest first from head */
    int head, len;
    int64_t connect_ms;  /* THINK: when it connects */
    int64_t wake_ms;     /* the engine's next wake, as late as the poll is */
    int64_t work_end_ms; /* HOLD: the work's end; STOPPING: the stop */
    /* the checker's: the send of the last try granted or heartbeat
     * answered TRUE in time to keep the lock (what a lease may be anchored
     * at, seen on the wire); the connection's start before any */
    int64_t renewed_ms;
    int working, paused_in_work;
    int64_t work_start_ms;
    /* the server ended this connection's session itself (a terminate, a
     * restart): a loss it explains; and, if its work ran then, the next
     * work's start is measured from that work's stop (last_stop_ms) */
    int ended_by_server, handover_pending;
    int64_t last_stop_ms;
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
    int64_t down_until_ms; /* a restart: no connection is taken before */
    unsigned ends_done;    /* the config's ends that happened, one bit each */
    int broken;            /* the pump met what it cannot go on from: the run ends */
} lease_world;

__attribute__((format(printf, 3, 4))) static void trace(lease_world *w, int c, const char *fmt, ...)
{
    if (w->cfg->trace == NULL)
        return;
    char line[256];
    /* c < 0: the server's own doing */
    int n = c < 0 ? snprintf(line, sizeof line, "t=%" PRId64 " server ", w->now_ms)
                  : snprintf(line, sizeof line, "t=%" PRId64 " c%d ", w->now_ms, c);
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

/* A violation the run cannot go on from (the engine refused what it
 * must take): recorded, and the run ends. Others are counted and the run
 * goes on, so that a campaign's figures count every overlap. */
static void breaks(lease_world *w, int c, const char *what)
{
    violation(w, c, what);
    w->broken = 1;
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

/* ---- the links ---------------------------------------------------------- */

static statement *on_link(lease_client *cl, int i)
{
    return &cl->link[(cl->head + i) % SLOTS];
}

/* A segment leaves now over client c's link. */
static void send_segment(lease_world *w, int c, segment *g)
{
    g->sent_ms = w->now_ms;
    g->latency_ms = advlock_prng_between(&w->prng, 0, w->cfg->latency_max_ms);
    g->at_ms = advlock_lease_net_delivery(&w->net, c, g->sent_ms, g->latency_ms);
}

/* TCP delivers in order: no statement reaches the server before the one
 * sent ahead of it, no answer the client before the one ahead of it. Run
 * after every send and when a cut begins (a segment on its way may now be
 * lost, and sent again). */
static void schedule(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    /* those delivered before were now or earlier */
    int64_t up = w->now_ms;
    int64_t down = up;
    for (int i = 0; i < cl->len; i++) {
        statement *s = on_link(cl, i);
        if (!s->ran) {
            int64_t at = advlock_lease_net_delivery(&w->net, c, s->up.sent_ms, s->up.latency_ms);
            s->up.at_ms = at > up ? at : up;
            up = s->up.at_ms;
            continue;
        }
        up = s->up.at_ms > up ? s->up.at_ms : up; /* when it arrived */
        int64_t at = advlock_lease_net_delivery(&w->net, c, s->down.sent_ms, s->down.latency_ms);
        s->down.at_ms = at > down ? at : down;
        down = s->down.at_ms;
    }
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
    if (cl->pid == s->pid) {
        /* The answers on their way die with the socket: the client's own
         * keepalives tell it once the link is back. */
        int64_t notice =
            advlock_lease_net_up_from(&w->net, s->client, w->now_ms) + CLIENT_NOTICE_MS;
        for (int i = 0; i < cl->len; i++) {
            statement *q = on_link(cl, i);
            if (!q->ran)
                continue;
            q->result.status = ADVLOCK_FAKE_CONNECTION_LOST;
            q->down.sent_ms = notice;
            q->down.latency_ms = 0;
        }
        schedule(w, s->client);
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

/* The server ends a session on its own: the client is not told (its
 * link may be cut); answers already on their way still arrive, and its
 * next statement is answered by a reset (on_arrive). */
static void server_ends(lease_world *w, lease_session *s, const char *why)
{
    lease_client *cl = &w->clients[s->client];
    if (cl->pid == s->pid) {
        cl->ended_by_server = 1;
        cl->handover_pending = cl->working;
    }
    advlock_fake_db_set_time(&w->db, w->now_ms);
    advlock_fake_db_close(&w->db, s->pid);
    trace(w, s->client, "server ends session %d (%s)", s->pid, why);
    memset(s, 0, sizeof *s);
}

/* A terminate ends the session the server sees holding the lock (what an
 * operator reads in pg_locks); a crash ends them all, and the server
 * takes no connection until it is back. */
static void on_end(lease_world *w, int i)
{
    const advlock_sim_end *e = &w->cfg->ends[i];
    w->ends_done |= 1U << i;
    if (e->kind == ADVLOCK_SIM_END_RESTART) {
        w->st->restarts++;
        w->down_until_ms = w->now_ms + e->length_ms;
        for (int k = 0; k < MAX_SESSIONS; k++)
            if (w->sessions[k].pid != 0)
                server_ends(w, &w->sessions[k], "the server crashed");
        trace(w, -1, "restarts; up at %" PRId64, w->down_until_ms);
        return;
    }
    for (int k = 0; k < MAX_SESSIONS; k++) {
        int held = 0;
        lease_session *s = &w->sessions[k];
        if (s->pid != 0)
            advlock_fake_db_holds(&w->db, s->pid, LEASE_KEY, ADVLOCK_FAKE_EXCLUSIVE, &held, NULL);
        if (held) {
            w->st->terminates++;
            server_ends(w, s, "pg_terminate_backend");
            return;
        }
    }
    trace(w, -1, "terminate: no session holds the lock");
}

/* The client's oldest statement not yet run reaches the server: it runs,
 * and its answer leaves at once (a closed session answers with a reset). */
static void on_arrive(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    statement *s = NULL;
    for (int i = 0; i < cl->len && s == NULL; i++)
        if (!on_link(cl, i)->ran)
            s = on_link(cl, i);
    if (s == NULL)
        return; /* every arrival is scheduled for a statement not yet run */
    s->ran = 1;
    lease_session *ss = open_session_of(w, cl->pid);
    if (ss == NULL) {
        s->result = (advlock_fake_result){.status = ADVLOCK_FAKE_CONNECTION_LOST};
    } else {
        heard(w, ss, w->now_ms);
        advlock_fake_db_set_time(&w->db, w->now_ms);
        advlock_fake_db_exec_params(&w->db, cl->pid, advlock_sql_text(s->sql), s->params,
                                    advlock_sql_params(s->sql), &s->result);
    }
    send_segment(w, c, &s->down);
    schedule(w, c);
}

static void on_fin(lease_world *w, lease_session *s)
{
    s->fin.at_ms = NEVER;
    end_session(w, s, "closed by its client");
}

/* ---- the checker ------------------------------------------------------ */

/* The next work's start minus the stop of one whose session the server
 * ended under it (negative: they overlapped); a paused holder's is
 * fencing's case, left out as its overlaps are. */
static void handover(lease_world *w, const lease_client *old, int64_t gap)
{
    if (!old->paused_in_work && gap < w->st->min_handover_ms)
        w->st->min_handover_ms = gap;
}

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
    for (int d = 0; d < w->cfg->clients; d++) {
        lease_client *o = &w->clients[d];
        if (d == c || !o->handover_pending || o->working)
            continue;
        o->handover_pending = 0;
        handover(w, o, w->now_ms - o->last_stop_ms);
    }
    cl->handover_pending = 0; /* the next work after its own was its own */
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
        if (cl->handover_pending && o->work_start_ms >= cl->work_start_ms) {
            cl->handover_pending = 0;
            handover(w, cl, o->work_start_ms - w->now_ms);
        }
    }
    cl->working = 0;
    cl->last_stop_ms = w->now_ms;
    trace(w, c, "work stops");
}

/* A held lock was lost (the lease ran out, or its connection closed): a
 * loss is spurious unless the server ended the session, or a pause, or
 * cuts spanning more than the tolerated blip, fell between the last
 * renewal's send and now. */
static void judge_loss(lease_world *w, int c)
{
    w->st->expiries++;
    if (w->clients[c].ended_by_server)
        return;
    int64_t first = NEVER, last = 0;
    for (int i = 0; i < w->net.ncuts; i++) {
        const lease_cut *k = &w->net.cuts[i];
        if (!k->started || k->client != c || k->end_ms < w->clients[c].renewed_ms
            || k->start_ms > w->now_ms)
            continue;
        if (k->kind == ADVLOCK_SIM_CUT_PAUSE)
            return;
        first = k->start_ms < first ? k->start_ms : first;
        last = k->end_ms > last ? k->end_ms : last;
    }
    if (first == NEVER || last - first <= w->tolerated_ms) {
        w->st->spurious_stops++;
        violation(w, c,
                  "a held lock was lost with no pause and no cut longer than the tolerated "
                  "blip");
    }
}

/* ---- the clients: pumps of their engines ------------------------------ */

static void disconnect(lease_world *w, int c);

/* Between holds: the connection closed, a new one after a while. */
static void think(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    disconnect(w, c);
    cl->state = w->now_ms >= w->cfg->run_ms ? FINISHED : THINK;
    cl->connect_ms =
        cl->state == FINISHED ? NEVER : w->now_ms + advlock_prng_between(&w->prng, 0, THINK_MAX_MS);
}

/* The client closes its connection: a FIN goes out, statements not yet
 * delivered are dropped with the socket, and the engine forgets what it
 * had in flight. */
static void disconnect(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    lease_session *s = open_session_of(w, cl->pid);
    if (s != NULL)
        send_segment(w, c, &s->fin);
    if (cl->pid != 0)
        advlock_conn_forget(&cl->engine, w->now_ms);
    cl->pid = 0;
    cl->len = 0;
    cl->wake_ms = NEVER;
}

/* The holder's lock is lost: its work stops within K, and only then does
 * it close its connection (at once with close_at_expiry, a driver's
 * mistake). */
static void lost(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    judge_loss(w, c);
    cl->state = STOPPING;
    cl->work_end_ms = w->now_ms + advlock_prng_between(&w->prng, 0, w->plan.stop_ms);
    trace(w, c, "LOST (lease %d: %s); stops at %" PRId64,
          (int)advlock_member_lease_expiry(&cl->member), advlock_member_words(&cl->member),
          cl->work_end_ms);
    if (w->cfg->close_at_expiry)
        disconnect(w, c);
}

/* An operation of the member ended. */
static void done(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    advlock_outcome o = advlock_member_report(&cl->member)->outcome;
    if (cl->state != ACQUIRE || o != ADVLOCK_ACQUIRED) {
        trace(w, c, "operation ends %s", advlock_outcome_name(o));
        think(w, c);
    } else if (advlock_member_lost(&cl->member)) {
        /* the grant's send is older than D: the lease ran out at once */
        trace(w, c, "granted too late for the lease: no work");
        judge_loss(w, c);
        think(w, c);
    } else {
        cl->state = HOLD;
        work_starts(w, c);
        cl->work_end_ms =
            w->now_ms + advlock_prng_between(&w->prng, w->cfg->hold_min_ms, w->cfg->hold_max_ms);
    }
}

/* A client of the world's, as the pump's callbacks see it. */
typedef struct pumped {
    lease_world *w;
    int c;
} pumped;

/* What the engine tells of its member; nothing once the client let its
 * connection go. */
static int take_event(void *user, const advlock_conn_event *ev)
{
    lease_world *w = ((pumped *)user)->w;
    int c = ((pumped *)user)->c;
    lease_client *cl = &w->clients[c];
    if (cl->pid == 0)
        return 0;
    if (ev->kind == ADVLOCK_CONN_DONE)
        done(w, c);
    else if (ev->kind == ADVLOCK_CONN_LOST && cl->state == HOLD)
        lost(w, c);
    else if (ev->kind == ADVLOCK_CONN_WARNING && cl->state == ACQUIRE && w->cfg->lock_delay)
        w->st->delay_waits++; /* the only warning of an acquire here: a mark waited out */
    return 0;
}

static int is_heartbeat(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_HEARTBEAT || sql == ADVLOCK_SQL_HEARTBEAT_GUARDED;
}

/* A statement the engine offers goes on the client's link. */
static int send_statement(void *user, const advlock_statement *st)
{
    lease_world *w = ((pumped *)user)->w;
    int c = ((pumped *)user)->c;
    lease_client *cl = &w->clients[c];
    if (w->broken || st->kind != ADVLOCK_STATEMENT_QUERY)
        return w->broken;
    if (cl->len == SLOTS) {
        breaks(w, c, "the engine sent past its slots");
        return 1;
    }
    statement *s = on_link(cl, cl->len++);
    *s = (statement){
        .sql = st->sql, .params = {st->param, st->param2, st->param3}, .down.at_ms = NEVER};
    send_segment(w, c, &s->up);
    w->st->heartbeats += (uint64_t)is_heartbeat(st->sql);
    trace(w, c, "sends %.40s", advlock_sql_text(st->sql));
    return 0;
}

static void schedule_sent(void *user)
{
    schedule(((pumped *)user)->w, ((pumped *)user)->c);
}

static const advlock_sim_pump_ops pump_ops = {send_statement, schedule_sent, take_event};

/* Sends what the engine offers, hands on its events, arms its timer. */
static void pump(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    if (advlock_sim_pump(&cl->engine, w->now_ms, &pump_ops, &(pumped){w, c}) != 0)
        return;
    int64_t wake = cl->pid != 0 ? advlock_conn_next_wake(&cl->engine) : NEVER;
    cl->wake_ms = wake == NEVER ? NEVER
                                : (wake > w->now_ms ? wake : w->now_ms)
                                      + advlock_prng_between(&w->prng, 0, TIMER_SLACK_MS);
}

/* Without a lease the connection's startup options set the server's
 * keepalives (advlock_lease_options()), as a driver that sets nothing
 * else does. */
static void keepalives_only(lease_world *w, int pid)
{
    advlock_fake_result r;
    int64_t u = w->plan.user_timeout_ms;
    advlock_fake_db_exec_params(&w->db, pid, advlock_sql_text(ADVLOCK_SQL_LEASE_SETUP), &u, 1, &r);
}

static void connect_client(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    lease_session *s = session_of(w, 0); /* a free entry */
    cl->connect_ms = NEVER;
    if (advlock_lease_net_cut_at(&w->net, c, w->now_ms) || s == NULL
        || w->now_ms < w->down_until_ms) {
        cl->connect_ms = w->now_ms + RECONNECT_MS;
        return;
    }
    advlock_fake_db_set_time(&w->db, w->now_ms);
    advlock_fake_db_connect(&w->db, &cl->pid);
    advlock_fake_db_set_transport(&w->db, cl->pid, ADVLOCK_FAKE_TCP);
    *s = (lease_session){.pid = cl->pid,
                         .client = c,
                         .end_ms = NEVER,
                         .fin.at_ms = NEVER,
                         .holder_stop_ms = NEVER,
                         .last_rx_ms = -1};
    heard(w, s, w->now_ms);
    uint64_t token = advlock_prng_next(&w->prng) | 1;
    int rc = advlock_conn_init(&cl->engine, cl->slots, SLOTS, cl->buckets, NBUCKETS, cl->pid, token,
                               ADVLOCK_CAPS_PIPELINE);
    if (rc == 0 && w->cfg->heartbeats)
        rc = advlock_conn_set_lease(&cl->engine, w->cfg->lease_ms, w->cfg->stop_ms);
    else if (rc == 0)
        keepalives_only(w, cl->pid);
    advlock_member_init(&cl->member);
    /* A lock-delay acquire may wait out U + M before it holds. */
    advlock_options o;
    advlock_options_init(&o);
    o.lock_delay = w->cfg->lock_delay;
    int64_t timeout = ACQUIRE_TIMEOUT_MS;
    if (o.lock_delay)
        timeout += w->plan.user_timeout_ms + ADVLOCK_LEASE_MARGIN_MS;
    if (rc == 0)
        rc = advlock_conn_start_acquire_key(&cl->engine, &cl->member, LEASE_KEY, timeout, &o,
                                            w->now_ms);
    if (rc != 0) {
        breaks(w, c, "the engine refused the connection or its acquire");
        return;
    }
    cl->state = ACQUIRE;
    cl->ended_by_server = 0;
    cl->renewed_ms = w->now_ms;
    trace(w, c, "connects, session %d", cl->pid);
    pump(w, c);
}

/* The head statement's answer reaches the client. A reset (the session is
 * gone) closes the connection: the engine answers everything in flight
 * lost and loses the held lock. */
static void on_answer(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    statement s = *on_link(cl, 0);
    cl->head = (cl->head + 1) % SLOTS;
    cl->len--;
    if (s.result.status == ADVLOCK_FAKE_CONNECTION_LOST) {
        trace(w, c, "connection closed");
        cl->len = 0;
        advlock_conn_on_closed(&cl->engine, NULL, "server closed the connection unexpectedly",
                               w->now_ms);
        pump(w, c);
        return;
    }
    lease_session *ss = open_session_of(w, cl->pid);
    if (ss != NULL && !advlock_lease_net_cut_at(&w->net, c, w->now_ms))
        heard(w, ss, w->now_ms); /* the answer's ACK */
    advlock_statement head;
    if (!advlock_conn_head(&cl->engine, &head) || head.sql != s.sql) {
        breaks(w, c, "an answer for a statement the engine did not send");
        return;
    }
    advlock_answer a;
    advlock_fake_answer(&s.result, NULL, 0, &a);
    if (advlock_conn_on_answer(&cl->engine, &a, w->now_ms) != 0) {
        breaks(w, c, "the engine refused an answer");
        return;
    }
    pump(w, c);
    /* A grant or a heartbeat's TRUE renews what the holder may count on,
     * unless it came too late to keep the lock (a loss just judged counted
     * from the renewal before). */
    int renews = s.sql == ADVLOCK_SQL_TRY_LOCK || is_heartbeat(s.sql);
    if (renews && a.result == ADVLOCK_RESULT_TRUE && advlock_member_held(&cl->member)
        && s.up.sent_ms > cl->renewed_ms)
        cl->renewed_ms = s.up.sent_ms;
}

static void on_wake(lease_world *w, int c)
{
    lease_client *cl = &w->clients[c];
    cl->wake_ms = NEVER;
    advlock_conn_on_timer(&cl->engine, w->now_ms);
    pump(w, c);
}

/* The work's end: its release, or, once the lock was lost, the stop, and
 * only then the close. */
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
    cl->state = RELEASE;
    if (advlock_conn_start_release(&cl->engine, &cl->member, w->now_ms) != 0) {
        breaks(w, c, "the engine refused to release the lock it said was held");
        return;
    }
    pump(w, c);
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
    schedule(w, k->client);
    for (int i = 0; i < MAX_SESSIONS; i++) {
        segment *fin = &w->sessions[i].fin;
        if (w->sessions[i].pid != 0 && w->sessions[i].client == k->client && fin->at_ms != NEVER)
            fin->at_ms =
                advlock_lease_net_delivery(&w->net, k->client, fin->sent_ms, fin->latency_ms);
    }
}

/* ---- the loop --------------------------------------------------------- */

enum event_kind {
    EV_NONE,
    EV_CUT,
    EV_ARRIVE,
    EV_ANSWER,
    EV_CONNECT,
    EV_WAKE,
    EV_WORK_END,
    EV_TICK,
    EV_SILENCE_END,
    EV_FIN,
    EV_END
};

/* A client's own events wait while it is paused; the server's do not. */
static int64_t client_time(const lease_world *w, int c, int64_t at)
{
    int64_t until;
    if (at != NEVER && advlock_lease_net_paused_at(&w->net, c, at, &until))
        return until;
    return at;
}

static sim_next next_of(const lease_world *w)
{
    sim_next e = {NEVER, EV_NONE, 0};
    for (int i = 0; i < w->cfg->nends; i++)
        if (!(w->ends_done & (1U << i)))
            sim_consider(&e, w->cfg->ends[i].at_ms, EV_END, i);
    for (int i = 0; i < w->net.ncuts; i++)
        if (!w->net.cuts[i].started)
            sim_consider(&e, w->net.cuts[i].start_ms, EV_CUT, i);
    for (int c = 0; c < w->cfg->clients; c++) {
        const lease_client *cl = &w->clients[c];
        for (int i = 0; i < cl->len; i++) {
            const statement *s = &cl->link[(cl->head + i) % SLOTS];
            if (!s->ran) {
                sim_consider(&e, s->up.at_ms, EV_ARRIVE, c);
                break;
            }
        }
        if (cl->len > 0 && cl->link[cl->head].ran)
            sim_consider(&e, client_time(w, c, cl->link[cl->head].down.at_ms), EV_ANSWER, c);
        sim_consider(&e, client_time(w, c, cl->connect_ms), EV_CONNECT, c);
        sim_consider(&e, client_time(w, c, cl->wake_ms), EV_WAKE, c);
        sim_consider(&e, client_time(w, c, cl->work_end_ms), EV_WORK_END, c);
    }
    for (int i = 0; i < MAX_SESSIONS; i++) {
        const lease_session *s = &w->sessions[i];
        if (s->pid == 0)
            continue;
        sim_consider(&e, s->tick_ms, EV_TICK, i);
        sim_consider(&e, s->end_ms, EV_SILENCE_END, i);
        sim_consider(&e, s->fin.at_ms, EV_FIN, i);
    }
    return e;
}

static void handle(lease_world *w, const sim_next *e)
{
    switch (e->kind) {
    case EV_CUT: on_cut_start(w, &w->net.cuts[e->index]); break;
    case EV_ARRIVE: on_arrive(w, e->index); break;
    case EV_ANSWER: on_answer(w, e->index); break;
    case EV_CONNECT: connect_client(w, e->index); break;
    case EV_WAKE: on_wake(w, e->index); break;
    case EV_WORK_END: on_work_end(w, e->index); break;
    case EV_TICK: on_tick(w, &w->sessions[e->index]); break;
    case EV_SILENCE_END: on_silence_end(w, &w->sessions[e->index]); break;
    case EV_FIN: on_fin(w, &w->sessions[e->index]); break;
    case EV_END: on_end(w, e->index); break;
    default: break;
    }
}

static int config_ok(const advlock_sim_lease_config *cfg, advlock_lease_plan *plan)
{
    if (cfg->clients < 2 || cfg->clients > ADVLOCK_SIM_LEASE_MAX_CLIENTS || cfg->run_ms < 0
        || cfg->hold_min_ms < 0 || cfg->hold_max_ms < cfg->hold_min_ms || cfg->latency_max_ms < 0
        || cfg->ncuts < 0 || cfg->ncuts > ADVLOCK_SIM_LEASE_MAX_CUTS || cfg->nends < 0
        || cfg->nends > ADVLOCK_SIM_LEASE_MAX_ENDS || (cfg->lock_delay && !cfg->heartbeats)
        || advlock_lease_plan_init(plan, cfg->lease_ms, cfg->stop_ms) != 0)
        return 0;
    for (int i = 0; i < cfg->nends; i++) {
        const advlock_sim_end *e = &cfg->ends[i];
        if (e->at_ms < 0 || e->length_ms < 0
            || (e->kind != ADVLOCK_SIM_END_TERMINATE && e->kind != ADVLOCK_SIM_END_RESTART))
            return 0;
    }
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
    out->min_stop_margin_ms = out->min_lease_left_ms = out->min_handover_ms = NEVER;
    w->down_until_ms = 0;
    w->ends_done = 0;
    advlock_prng_seed(&w->prng, cfg->seed ^ UINT64_C(0x1EA5E1EA5E));
    advlock_fake_db_init(&w->db);
    w->tolerated_ms = advlock_sim_lease_tolerated_blip_ms(&w->plan);
    w->net.ncuts = cfg->ncuts;
    for (int i = 0; i < cfg->ncuts; i++) {
        const advlock_sim_cut *k = &cfg->cuts[i];
        w->net.cuts[i] = (lease_cut){.kind = k->kind,
                                     .start_ms = k->at_ms,
                                     .end_ms = k->at_ms + k->length_ms,
                                     .client = k->client};
    }
    for (int c = 0; c < cfg->clients; c++) {
        lease_client *cl = &w->clients[c];
        cl->state = THINK;
        cl->wake_ms = cl->work_end_ms = NEVER;
        cl->connect_ms = advlock_prng_between(&w->prng, 0, THINK_MAX_MS);
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
    w.broken = 0;
    for (uint64_t events = 0; !w.broken; events++) {
        sim_next e = next_of(&w);
        if (e.kind == EV_NONE)
            break;
        if (e.at < w.now_ms) { /* the world's own check: events come in order */
            breaks(&w, e.index, "an event was due before the one just handled");
            break;
        }
        if (events == MAX_EVENTS) {
            breaks(&w, e.index, "the run did not end within its events");
            break;
        }
        w.now_ms = e.at;
        handle(&w, &e);
    }
    return out->violation[0] != '\0' ? ADVLOCK_SIM_VIOLATION : 0;
}
