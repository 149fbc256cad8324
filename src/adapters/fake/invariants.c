/*
 * The invariants the simulation checks after every event, over the whole
 * world: the fake database against what each client knows, mutual
 * exclusion, bounded windows for dropped sessions, progress, and, at the
 * end, that nothing is left held. (The per-machine schedule and outcome
 * rules are policy.c's.)
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { SLOT_NONE = -1, SLOT_ORPHAN = -2 };

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* Sums each open client session's exclusive session-level holds per key,
 * and marks which keys anyone holds. Holds of anything else, or by a
 * session nobody owns, or by a dropped session past its detection
 * deadline, are violations. */
static int tally(const advlock_sim *sim, int counts[ADVLOCK_SIM_MAX_CLIENTS][ADVLOCK_SIM_MAX_KEYS],
                 int held[ADVLOCK_SIM_MAX_KEYS], char *why, size_t size)
{
    const advlock_fake_db *db = &sim->db_;
    for (int i = 0; i < db->holds_used_; i++) {
        const advlock_fake_hold_ *h = &db->holds_[i];
        if (h->session_ < 0)
            continue;
        int64_t key = db->locks_[h->lock_].key_;
        int pid = db->sessions_[h->session_].pid_;
        int k = sim_key_index(sim, key);
        if (k < 0)
            return fail(why, size, "session %d holds key %lld, which no client asked for", pid,
                        (long long)key);
        if (h->count_[ADVLOCK_FAKE_SHARED][0] + h->count_[ADVLOCK_FAKE_SHARED][1]
                + h->count_[ADVLOCK_FAKE_EXCLUSIVE][SCOPE_XACT]
            > 0)
            return fail(why, size, "session %d holds key %lld in a mode or level the core never "
                                   "asks for",
                        pid, (long long)key);
        held[k] = 1;
        int owner = sim->slot_owner_[h->session_];
        if (owner == SLOT_ORPHAN) {
            if (sim->now_ms_ > sim->slot_reap_ms_[h->session_])
                return fail(why, size, "dropped session %d still holds key %lld past its detection "
                                       "deadline %lld ms",
                            pid, (long long)key, (long long)sim->slot_reap_ms_[h->session_]);
            continue;
        }
        if (owner < 0)
            return fail(why, size, "session %d holds key %lld but belongs to no client", pid,
                        (long long)key);
        counts[owner][k] += h->count_[ADVLOCK_FAKE_EXCLUSIVE][SCOPE_SESSION];
    }
    return 0;
}

/* The lock table, the results each client applied, and the results each
 * client received agree, up to the one result still on its way back. */
static int check_agreement(const advlock_sim *sim, int counts[][ADVLOCK_SIM_MAX_KEYS], char *why,
                           size_t size)
{
    for (int c = 0; c < sim->nclients_; c++) {
        const advlock_sim_client_ *cl = &sim->clients_[c];
        if (cl->session_ != SESSION_OPEN)
            continue;
        for (int k = 0; k < sim->nkeys_; k++) {
            if (counts[c][k] != cl->server_view_[k])
                return fail(why, size, "the lock table says client %d's session holds key %lld %d "
                                       "time(s), the queries it ran say %d",
                            c, (long long)sim->keys_[k], counts[c][k], cl->server_view_[k]);
            int in_flight = cl->query_ == QUERY_TO_CLIENT && k == cl->key_index_ ? cl->transit_delta_ : 0;
            if (cl->server_view_[k] - cl->client_view_[k] != in_flight)
                return fail(why, size, "key %lld: client %d's session holds it %d time(s), the "
                                       "client has been told %d",
                            (long long)sim->keys_[k], c, cl->server_view_[k], cl->client_view_[k]);
        }
    }
    return 0;
}

/* No two clients with live sessions believe they hold the same key. A
 * client leaves its critical section when it starts a release (the server
 * may free the lock before the answer is back), and a client whose session
 * died believes in vain until its next query tells it the connection was
 * lost; neither is counted. */
static int check_exclusion(const advlock_sim *sim, char *why, size_t size)
{
    for (int k = 0; k < sim->nkeys_; k++) {
        int holder = -1;
        for (int c = 0; c < sim->nclients_; c++) {
            const advlock_sim_client_ *cl = &sim->clients_[c];
            int releasing = cl->busy_ && cl->step_.kind == ADVLOCK_SIM_RELEASE && cl->key_index_ == k;
            if (cl->belief_[k] - releasing <= 0 || cl->session_ != SESSION_OPEN)
                continue;
            if (holder >= 0)
                return fail(why, size, "mutual exclusion: clients %d and %d both believe they hold "
                                       "key %lld",
                            holder, c, (long long)sim->keys_[k]);
            holder = c;
        }
    }
    return 0;
}

/* With faults off, a waiting client tries again at the wake-up time its
 * schedule set, so a key free at that moment is taken by then (by it or by
 * someone faster). Without stalls or jumps, a client's clock reads virtual
 * time. */
static int check_progress(const advlock_sim *sim, const int held[ADVLOCK_SIM_MAX_KEYS], char *why,
                          size_t size)
{
    int64_t rtt = sim_latency_bound(&sim->config_.latency);
    for (int c = 0; c < sim->nclients_; c++) {
        const advlock_sim_client_ *cl = &sim->clients_[c];
        if (!cl->busy_ || cl->step_.kind != ADVLOCK_SIM_ACQUIRE || cl->cancel_sent_
            || held[cl->key_index_])
            continue;
        advlock_action a = advlock_next_action(&cl->machine_);
        int64_t next_try;
        if (a.kind == ADVLOCK_ACTION_SLEEP) {
            next_try = a.wake_at_ms;
        } else if (cl->query_ == QUERY_TO_CLIENT && cl->result_ == ADVLOCK_RESULT_FALSE
                   && cl->deliver_ms_ - cl->policy_start_ < cl->step_.timeout_ms) {
            next_try = cl->deliver_ms_ + sim_policy_sleep(cl->policy_sleeps_ + 1);
        } else {
            continue;
        }
        if (sim->now_ms_ > next_try + rtt)
            return fail(why, size, "progress: key %lld is free, but the client waiting for it has not "
                                   "taken it by its next attempt at %lld ms (+ %lld ms latency)",
                        (long long)sim->keys_[cl->key_index_], (long long)next_try, (long long)rtt);
    }
    return 0;
}

/* Every operation ends: an acquire within its timeout, one more sleep and
 * a few round trips; a release within a round trip. Measured on the
 * client's own clock, less its jumps: what the machine can see of time
 * (a stalled clock holds a machine back; that is not the machine's fault). */
static int check_durations(const advlock_sim *sim, char *why, size_t size)
{
    int64_t rtt = sim_latency_bound(&sim->config_.latency);
    for (int c = 0; c < sim->nclients_; c++) {
        const advlock_sim_client_ *cl = &sim->clients_[c];
        if (!cl->busy_)
            continue;
        advlock_fake_clock now = cl->clock_;
        advlock_fake_clock_advance_to(&now, sim->now_ms_);
        int64_t seen = advlock_fake_clock_read(&now) - cl->policy_start_
                       - (now.jumped_ms_ - cl->jumped_at_start_);
        int64_t limit = cl->step_.kind == ADVLOCK_SIM_ACQUIRE ? cl->step_.timeout_ms + 1000 + 3 * rtt
                                                              : rtt;
        if (seen > limit)
            return fail(why, size, "progress: an operation started at %lld ms has run for %lld ms "
                                   "of its clock, more than %lld ms",
                        (long long)cl->started_ms_, (long long)seen, (long long)limit);
    }
    return 0;
}

int sim_check_world(advlock_sim *sim, char *why, size_t size)
{
    if (advlock_fake_db_check(&sim->db_, why, size) != 0)
        return -1;
    int counts[ADVLOCK_SIM_MAX_CLIENTS][ADVLOCK_SIM_MAX_KEYS];
    int held[ADVLOCK_SIM_MAX_KEYS] = {0};
    for (int c = 0; c < sim->nclients_; c++)
        memset(counts[c], 0, sizeof counts[c][0] * (size_t)sim->nkeys_);
    if (tally(sim, counts, held, why, size) != 0 || check_agreement(sim, counts, why, size) != 0
        || check_exclusion(sim, why, size) != 0 || check_durations(sim, why, size) != 0)
        return -1;
    if (!sim_faults_on(&sim->config_.faults) && check_progress(sim, held, why, size) != 0)
        return -1;
    return 0;
}

int sim_check_end(advlock_sim *sim, char *why, size_t size)
{
    for (int c = 0; c < sim->nclients_; c++) {
        const advlock_sim_client_ *cl = &sim->clients_[c];
        if (!cl->stopped_ || cl->busy_)
            return fail(why, size, "progress: client %d has nothing left to run but its plan has "
                                   "not stopped",
                        c);
        for (int k = 0; k < sim->nkeys_; k++)
            if (cl->belief_[k] != 0)
                return fail(why, size, "leak: at the end client %d still believes it holds key "
                                       "%lld",
                            c, (long long)sim->keys_[k]);
    }
    advlock_fake_lock_row row;
    if (advlock_fake_db_lock_rows(&sim->db_, &row, 1) > 0)
        return fail(why, size, "leak: at the end session %d still holds key %lld (mode %d)",
                    row.pid, (long long)row.key, (int)row.mode);
    return 0;
}
