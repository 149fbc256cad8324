/*
 * The invariants the simulation checks after every event, over the whole
 * world: the fake database against what each client knows, per key and lock
 * kind (mode and scope), mutual exclusion (shared holders may be many, an
 * exclusive one is alone), bounded windows for dropped sessions, progress,
 * and, at the end, that nothing is left held. (The per-machine schedule and
 * outcome rules are policy.c's.)
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Holds per client, key and kind, as the lock table has them. */
typedef int16_t counts_t[ADVLOCK_SIM_MAX_CLIENTS][ADVLOCK_SIM_MAX_KEYS][KINDS];

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* One hold of the lock table, added to its owner's counts. Holds by a
 * session nobody owns, or by a dropped session past its detection deadline,
 * are violations. */
typedef struct tally_state {
    const sim_world *sim;
    int16_t (*counts)[ADVLOCK_SIM_MAX_KEYS][KINDS];
    int *held;
    char *why;
    size_t size;
} tally_state;

static int tally_hold(void *user, int pid, int64_t key, advlock_fake_mode mode, int session_level,
                      int transaction_level)
{
    tally_state *t = user;
    const sim_world *sim = t->sim;
    int k = advlock_sim_key_index(sim, key);
    if (k < 0)
        return fail(t->why, t->size, "session %d holds key %lld, which no client asked for", pid,
                    (long long)key);
    t->held[k] = 1;
    const sim_session *s = advlock_sim_session_const(sim, pid);
    if (s != NULL && s->owner == SESSION_ORPHAN) {
        if (sim->now_ms_ > s->reap_ms)
            return fail(t->why, t->size,
                        "dropped session %d still holds key %lld past its detection "
                        "deadline %lld ms",
                        pid, (long long)key, (long long)s->reap_ms);
        return 0;
    }
    if (s == NULL)
        return fail(t->why, t->size, "session %d holds key %lld but belongs to no client", pid,
                    (long long)key);
    int16_t *mine = t->counts[s->owner][k];
    mine[advlock_sim_kind((advlock_mode)mode, ADVLOCK_SESSION)] += (int16_t)session_level;
    mine[advlock_sim_kind((advlock_mode)mode, ADVLOCK_TRANSACTION)] += (int16_t)transaction_level;
    return 0;
}

/* The lock table, the results each client applied, and the results each
 * client received agree, up to the one result still on its way back (which
 * may also tell of a transaction the server has ended). */
static int check_agreement(const sim_world *sim, counts_t counts, char *why, size_t size)
{
    for (int c = 0; c < sim->nclients_; c++) {
        const sim_client *cl = &sim->clients_[c];
        if (cl->session_ != SESSION_OPEN)
            continue;
        int answering = cl->query_ == QUERY_TO_CLIENT || cl->query_ == QUERY_RETURNING;
        int settled = (!answering || cl->transit_delta_ == 0) && !cl->txn_end_in_flight_;
        int same = settled;
        for (int k = 0; same && k < sim->nkeys_; k++)
            same = advlock_sim_same_holds(counts[c][k], cl->server_view_[k])
                   && advlock_sim_same_holds(cl->server_view_[k], cl->client_view_[k]);
        if (same)
            continue; /* the common case, kept cheap: this runs after every event */
        for (int k = 0; k < sim->nkeys_; k++) {
            for (int j = 0; j < KINDS; j++) {
                if (counts[c][k][j] != cl->server_view_[k][j])
                    return fail(why, size,
                                "the lock table says client %d's session holds key %lld "
                                "(%s) %d time(s), the queries it ran say %d",
                                c, (long long)sim->keys_[k], advlock_sim_kind_name(j),
                                counts[c][k][j], cl->server_view_[k][j]);
                if (cl->txn_end_in_flight_ && advlock_sim_kind_is_xact(j))
                    continue;
                int in_flight =
                    answering && k == cl->key_index_ && j == cl->op_kind_ ? cl->transit_delta_ : 0;
                if (cl->server_view_[k][j] - cl->client_view_[k][j] != in_flight)
                    return fail(why, size,
                                "key %lld (%s): client %d's session holds it %d time(s), "
                                "the client has been told %d",
                                (long long)sim->keys_[k], advlock_sim_kind_name(j), c,
                                cl->server_view_[k][j], cl->client_view_[k][j]);
            }
        }
    }
    return 0;
}

/* How many holds of key k in kind j the client counts itself inside its
 * critical section for. It leaves a hold when it sends its release (or, for
 * transaction locks, COMMIT or ROLLBACK), since the server may free the lock
 * before the answer is back; and a transaction lock the server has already
 * ended with its transaction counts no more. A client whose session died
 * believes in vain until its next query tells it the connection was lost;
 * it is not counted at all. */
static int inside(const sim_client *cl, int k, int j)
{
    if (cl->session_ != SESSION_OPEN)
        return 0;
    int n = cl->belief_[k][j];
    if (cl->busy_ && cl->step_.kind == ADVLOCK_SIM_RELEASE && cl->key_index_ == k
        && cl->op_kind_ == j)
        n--;
    int ending =
        cl->txn_end_in_flight_
        || (cl->busy_
            && (cl->step_.kind == ADVLOCK_SIM_COMMIT || cl->step_.kind == ADVLOCK_SIM_ROLLBACK));
    if (ending && advlock_sim_kind_is_xact(j))
        n = 0;
    return n > 0 ? n : 0;
}

/* Mutual exclusion: no client that believes it holds a key exclusively
 * shares it with any other client that believes it holds it in any mode;
 * shared holders may be many. */
static int check_exclusion(const sim_world *sim, char *why, size_t size)
{
    int holders[ADVLOCK_SIM_MAX_KEYS] = {0};
    int exclusive[ADVLOCK_SIM_MAX_KEYS], other[ADVLOCK_SIM_MAX_KEYS];
    for (int k = 0; k < ADVLOCK_SIM_MAX_KEYS; k++)
        exclusive[k] = other[k] = -1;
    for (int c = 0; c < sim->nclients_; c++) {
        const sim_client *cl = &sim->clients_[c];
        if (cl->session_ != SESSION_OPEN)
            continue;
        for (int k = 0; k < sim->nkeys_; k++) {
            if (advlock_sim_no_holds(cl->belief_[k]))
                continue; /* the common case, kept cheap: this runs after every event */
            int excl = inside(cl, k, 0) + inside(cl, k, 1);
            if (excl + inside(cl, k, 2) + inside(cl, k, 3) == 0)
                continue;
            holders[k]++;
            if (excl > 0 && exclusive[k] < 0)
                exclusive[k] = c;
            else if (other[k] < 0)
                other[k] = c;
            if (exclusive[k] >= 0 && holders[k] > 1)
                return fail(why, size,
                            "mutual exclusion: client %d believes it holds key %lld "
                            "exclusively while client %d believes it holds it too",
                            exclusive[k], (long long)sim->keys_[k], other[k]);
        }
    }
    return 0;
}

/* With faults off, a waiting client tries again at the wake-up time its
 * schedule set (the sleep's ceiling bounds it for jitter and clipping), and
 * a lock statement on its way to the server tries (or queues) when it
 * arrives; so a key free at that moment is taken by then (by it or by
 * someone faster). A client queued at the server is handed a freed key at
 * once: the fake's own check (no missed wake-up) covers it. Without stalls
 * or jumps, a client's clock reads virtual time. */
static int check_progress(const sim_world *sim, const int held[ADVLOCK_SIM_MAX_KEYS], char *why,
                          size_t size)
{
    int64_t rtt = advlock_sim_rtt_bound(sim);
    for (int c = 0; c < sim->nclients_; c++) {
        const sim_client *cl = &sim->clients_[c];
        if (!cl->busy_ || cl->step_.kind != ADVLOCK_SIM_ACQUIRE || cl->cancel_sent_
            || held[cl->key_index_])
            continue;
        advlock_action a = advlock_next_action(sim_machine(cl));
        int64_t next_try;
        if (a.kind == ADVLOCK_ACTION_SLEEP) {
            next_try = a.wake_at_ms;
        } else if (cl->query_ == QUERY_TO_CLIENT && cl->result_ == ADVLOCK_RESULT_FALSE
                   && cl->deliver_ms_ - cl->policy_start_ < cl->step_.timeout_ms) {
            next_try = cl->deliver_ms_ + advlock_sim_policy_sleep(cl->policy_sleeps_ + 1);
        } else if (cl->query_ == QUERY_TO_SERVER && cl->query_is_lock_) {
            next_try = cl->arrive_ms_;
        } else {
            continue;
        }
        if (sim->now_ms_ > next_try + rtt)
            return fail(why, size,
                        "progress: key %lld is free, but the client waiting for it has not "
                        "taken it by its next attempt at %lld ms (+ %lld ms latency)",
                        (long long)sim->keys_[cl->key_index_], (long long)next_try, (long long)rtt);
    }
    return 0;
}

/* How long a step may run on the client's clock. An acquire: its timeout,
 * then with the reference's unclipped schedule up to one more sleep (1 s),
 * and round trips to finish: the last attempt's (or, waiting on the server,
 * the cancel's one and a half and the answer's half), an undo's, and the
 * holders query's when diagnosing. Waiting on the server, a cancel may
 * overtake its query (which arrives at most half a round trip after it was
 * sent, and no later than the first cancel was sent) and be dropped; the
 * machine asks again every 250 ms, so the first repeat sent half a round
 * trip or more after the first cancel meets the statement. A release
 * behind a proxy: its session row's round trip, then guarded unlocks sent
 * again within ADVLOCK_GUARD_RETRY_MS of its start (the last one's timer
 * late by up to a round trip's share), and the last one's round trip. A
 * release otherwise, BEGIN, COMMIT: one round trip. */
static int64_t step_limit(const sim_world *sim, const sim_client *cl, int64_t rtt)
{
    enum { CANCEL_REPEAT_MS = 250 };
    const advlock_options *o = &cl->options_;
    if (cl->step_.kind == ADVLOCK_SIM_RELEASE
        && sim->config_.sessions == ADVLOCK_SIM_SESSIONS_PROXIED)
        return ADVLOCK_GUARD_RETRY_MS + 2 * rtt;
    if (cl->step_.kind != ADVLOCK_SIM_ACQUIRE)
        return rtt;
    int overshoot = o->wait == ADVLOCK_WAIT_POLL && o->backoff == ADVLOCK_BACKOFF_REFERENCE
                    && !o->clip_to_deadline;
    int64_t half = rtt / 2 + rtt % 2;
    int64_t repeats = o->wait == ADVLOCK_WAIT_SERVER
                          ? (half + CANCEL_REPEAT_MS - 1) / CANCEL_REPEAT_MS * CANCEL_REPEAT_MS
                          : 0;
    return cl->step_.timeout_ms + (overshoot ? 1000 : 0) + repeats + 3 * rtt
           + (o->diagnose ? rtt : 0);
}

/* Every step ends in time. Measured on the client's own clock, less its
 * jumps: what the machine can see of time (a stalled clock holds a machine
 * back; that is not the machine's fault). */
static int check_durations(const sim_world *sim, char *why, size_t size)
{
    int64_t rtt = advlock_sim_rtt_bound(sim);
    for (int c = 0; c < sim->nclients_; c++) {
        const sim_client *cl = &sim->clients_[c];
        if (!cl->busy_)
            continue;
        advlock_fake_clock now = cl->clock_;
        advlock_fake_clock_advance_to(&now, sim->now_ms_);
        int64_t seen = advlock_fake_clock_read(&now) - cl->started_reading_
                       - (now.jumped_ms_ - cl->jumped_at_start_);
        int64_t limit = step_limit(sim, cl, rtt);
        if (seen > limit)
            return fail(why, size,
                        "progress: client %d's step started at %lld ms has run for "
                        "%lld ms of its clock, more than %lld ms",
                        c, (long long)cl->started_ms_, (long long)seen, (long long)limit);
    }
    return 0;
}

int advlock_sim_check_world(sim_world *sim, char *why, size_t size)
{
    if (advlock_fake_db_check(&sim->db_, why, size) != 0)
        return -1;
    counts_t counts;
    int held[ADVLOCK_SIM_MAX_KEYS] = {0};
    for (int c = 0; c < sim->nclients_; c++)
        for (int k = 0; k < sim->nkeys_; k++)
            memset(counts[c][k], 0, sizeof counts[c][k]);
    /* Sums each open client session's holds per key and kind, and marks
     * which keys anyone holds (tally_hold). */
    tally_state tally = {sim, counts, held, why, size};
    if (advlock_fake_db_each_hold(&sim->db_, tally_hold, &tally) != 0
        || check_agreement(sim, counts, why, size) != 0 || check_exclusion(sim, why, size) != 0
        || check_durations(sim, why, size) != 0)
        return -1;
    if (!advlock_sim_faults_on(&sim->config_.faults) && check_progress(sim, held, why, size) != 0)
        return -1;
    return 0;
}

int advlock_sim_check_end(sim_world *sim, char *why, size_t size)
{
    for (int c = 0; c < sim->nclients_; c++) {
        const sim_client *cl = &sim->clients_[c];
        if (!cl->stopped_ || cl->busy_)
            return fail(why, size,
                        "progress: client %d has nothing left to run but its plan has "
                        "not stopped",
                        c);
        for (int k = 0; k < sim->nkeys_; k++)
            for (int j = 0; j < KINDS; j++)
                if (cl->belief_[k][j] != 0)
                    return fail(why, size,
                                "leak: at the end client %d still believes it holds "
                                "key %lld (%s)",
                                c, (long long)sim->keys_[k], advlock_sim_kind_name(j));
    }
    advlock_fake_lock_row row;
    if (advlock_fake_db_lock_rows(&sim->db_, &row, 1) > 0)
        return fail(why, size, "leak: at the end session %d still holds key %lld (mode %d)",
                    row.pid, (long long)row.key, (int)row.mode);
    return 0;
}
