/*
 * Question 5: when several clients want one lock, how often does it change
 * hands, how long does it lie free between holders, and who times out?
 *
 * C clients (default 8), each on its own connection, loop: acquire one lock
 * (timeout T), hold it H ms (10), release it, think K ms (0), again; for S
 * seconds (20) split into rounds. Between rounds, with the clients idle, the
 * round trip of one prepared statement is measured on its own connection:
 * the limit for a hand-off, since a release must reach the server and the
 * grant must come back. All clients run in one thread on nonblocking
 * adapters, so the end of a round can cancel the acquires under way. The
 * waiting policy is a parameter: the reference's polling (the default),
 * polling with full jitter, or server-side waiting (see apply_policy()).
 *
 * Per acquisition: the hand-off, from the moment the previous holder began
 * its release to the moment this acquire returned (the lock's idle time,
 * as a waiting client sees it), whether the lock changed hands (a client
 * other than the last holder got it), and the wait since the acquire began
 * (an acquire that timed out counts with its whole wait, and one still
 * under way when a round ends with its wait so far: leaving them out would
 * hide exactly the clients that starve).
 * The first acquisition of a round has no hand-off. Rates and percentiles
 * are per round; the figures are medians of the rounds.
 *
 * The program also checks the lock: two clients holding it at once ends the
 * run with status 1, and a session holding it when its client does not know
 * counts as a leaked lock (see "leaked locks" below).
 *
 *     contention [--policy reference|full-jitter|server-wait] [--seconds 20]
 *                [--rounds 5] [--clients 8] [--hold-ms 10] [--think-ms 0]
 *                [--timeout-ms 2000]
 *
 * The default timeout, 2 s, is half a default round, so that a client that
 * cannot get the lock shows up as timeouts within a round.
 */
#define _GNU_SOURCE /* ppoll: holds of 10 ms want better than poll()'s ms */

#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_pq.h"
#include "bench.h"
#include "bench_pq.h"

static const char lock_name[] = "bench-contention";

/* ---- policies ---------------------------------------------------------------- */

enum policy { POLICY_REFERENCE, POLICY_FULL_JITTER, POLICY_SERVER_WAIT };

static const char *const policy_names[] = {"reference", "full-jitter", "server-wait"};
/* The same in figure names, which are JSON keys. */
static const char *const policy_keys[] = {"reference", "full_jitter", "server_wait"};

static enum policy parse_policy(const char *name)
{
    for (int p = 0; p < 3; p++)
        if (strcmp(name, policy_names[p]) == 0)
            return (enum policy)p;
    bench_fail("--policy: reference, full-jitter or server-wait, not '%s'", name);
}

/* Keeps the answer to each lock query, for the diagnosis of a leaked lock. */
static void remember_result(void *last_result, const advlock_event *e)
{
    if (e->kind == ADVLOCK_EVENT_RESULT)
        *(int *)last_result = (int)e->result;
}

/*
 * The policy on one client's adapter, before its first acquire:
 *   POLICY_REFERENCE    the adapter's default: polling, 100 -> 1000 ms;
 *   POLICY_FULL_JITTER  polling, each sleep drawn from [0, min(1000,
 *                       100 * 2^n)] ms, seeded per client so a run replays;
 *   POLICY_SERVER_WAIT  a try, then one pg_advisory_lock queued by the
 *                       server and bounded by its lock_timeout (55P03 at the
 *                       timeout, no cancel request); cancelled at the end of
 *                       a round, through advlock_pq_async_cancel().
 */
static void apply_policy(advlock_pq *adapter, enum policy policy, int client, int *last_result)
{
    advlock_options options;
    advlock_options_init(&options);
    options.on_event = remember_result;
    options.event_user = last_result;
    if (policy == POLICY_FULL_JITTER) {
        options.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
        options.jitter_seed = (uint64_t)client + 1;
    } else if (policy == POLICY_SERVER_WAIT) {
        options.wait = ADVLOCK_WAIT_SERVER;
    }
    if (advlock_pq_set_options(adapter, &options) != 0)
        bench_fail("client %d: the adapter refused the %s options", client, policy_names[policy]);
}

/* ---- clients ----------------------------------------------------------------- */

enum { MAX_CLIENTS = 64, MAX_SAMPLES = 1 << 20, DEFAULT_TIMEOUT_MS = 2000 };

enum step { THINKING, ACQUIRING, HOLDING, RELEASING, STOPPED };

typedef struct client {
    PGconn *conn;
    advlock_pq adapter;
    enum step step;
    int64_t step_at_ns; /* THINKING, HOLDING: when the step ends */
    int64_t acquire_start_ns;
    int last_result; /* the last lock query's answer in this acquire, or -1 */
} client;

static client clients[MAX_CLIENTS];
static int client_count;
static int64_t hold_ns, think_ns, timeout_ms;

/* What a round saw. */
typedef struct round_stats {
    long acquisitions, changed_hands, timeouts;
    size_t handoffs, waits;
    int64_t last_release_ns; /* 0: none yet this round */
    int last_holder;
} round_stats;

static double *handoff_ms, *wait_ms; /* samples of the current round */
static round_stats now_stats;

/* ---- leaked locks ----------------------------------------------------------------- */

/*
 * A lock the library lost track of: the session holds it, its client does
 * not know. Every later acquire by that session then succeeds at once while
 * its release takes back only the newer hold, so the lock never changes
 * hands again. Two checks find such locks, count them and drop them
 * (pg_advisory_unlock_all() on the holder's own connection), so that a leak
 * shows as a figure rather than as starvation for the rest of the run:
 *   - right after an acquire ends TIMED_OUT or CANCELLED, its session must
 *     not hold the lock (costs one query, on the failure path only);
 *   - when a round has stopped, no session may hold it.
 */
static PGconn *probe;
static int64_t contention_key;
static long leaked_locks;
static long failed_acquires; /* ended TIMED_OUT or CANCELLED: each checked */
/* How the acquire that left the lock behind ended; ADVLOCK_FAILED + 1 is
 * "found only when the round stopped". */
static long leaked_after[ADVLOCK_FAILED + 2];

/* The pids of the sessions holding the lock (only pid's, if pid > 0). */
static int lock_holders(int pid, int *pids, int max)
{
    char classid[16], objid[16], pid_text[16];
    uint64_t k = (uint64_t)contention_key;
    /* pg_locks shows a bigint key as classid (high half), objid (low half),
     * objsubid 1. */
    snprintf(classid, sizeof classid, "%u", (unsigned)(k >> 32));
    snprintf(objid, sizeof objid, "%u", (unsigned)(k & 0xFFFFFFFFu));
    snprintf(pid_text, sizeof pid_text, "%d", pid);
    const char *const params[3] = {classid, objid, pid_text};
    PGresult *res = PQexecParams(probe,
                                 "SELECT pid FROM pg_locks WHERE locktype = 'advisory' "
                                 "AND granted AND objsubid = 1 AND classid = $1::oid "
                                 "AND objid = $2::oid AND ($3::int = 0 OR pid = $3::int)",
                                 3, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        bench_fail("pg_locks: %s", PQerrorMessage(probe));
    int n = 0;
    for (int row = 0; row < PQntuples(res) && n < max; row++)
        pids[n++] = atoi(PQgetvalue(res, row, 0));
    PQclear(res);
    return n;
}

static void drop_locks_of(int i)
{
    PGconn *conn = clients[i].conn;
    PQsetnonblocking(conn, 0);
    PGresult *unlock = PQexec(conn, "SELECT pg_advisory_unlock_all()");
    if (PQresultStatus(unlock) != PGRES_TUPLES_OK)
        bench_fail("pg_advisory_unlock_all: %s", PQerrorMessage(conn));
    PQclear(unlock);
    PQsetnonblocking(conn, 1);
}

/* Of the leaks after a failed acquire: how its last lock query had been
 * answered (by advlock_result; the last slot: no answer seen). */
static long leak_answer[ADVLOCK_RESULT_CONNECTION_LOST + 2];

/* After an acquire of client i ended TIMED_OUT or CANCELLED. */
static void check_failed_acquire(int i, advlock_outcome outcome)
{
    int pid;
    failed_acquires++;
    if (lock_holders(PQbackendPID(clients[i].conn), &pid, 1) == 0)
        return;
    leaked_locks++;
    leaked_after[outcome]++;
    int answer = clients[i].last_result;
    leak_answer[answer >= 0 && answer <= ADVLOCK_RESULT_CONNECTION_LOST
                    ? answer
                    : ADVLOCK_RESULT_CONNECTION_LOST + 1]++;
    drop_locks_of(i);
}

/* After a round has stopped. */
static void check_stopped_round(void)
{
    int pids[MAX_CLIENTS];
    int n = lock_holders(0, pids, MAX_CLIENTS);
    for (int k = 0; k < n; k++) {
        int owner = -1;
        for (int i = 0; i < client_count; i++)
            if (PQbackendPID(clients[i].conn) == pids[k])
                owner = i;
        if (owner < 0)
            bench_fail("a session that is no client's (pid %d) holds the lock", pids[k]);
        leaked_locks++;
        leaked_after[ADVLOCK_FAILED + 1]++;
        drop_locks_of(owner);
    }
}

static void start_acquire(int i, int64_t now_ns)
{
    client *c = &clients[i];
    if (advlock_pq_async_start_acquire(&c->adapter, lock_name, sizeof lock_name - 1, timeout_ms,
                                       advlock_pq_now_ms())
        != 0)
        bench_fail("client %d: cannot start an acquire", i);
    c->step = ACQUIRING;
    c->acquire_start_ns = now_ns;
    c->last_result = -1;
}

static void start_release(int i, int64_t now_ns)
{
    client *c = &clients[i];
    now_stats.last_release_ns = now_ns;
    now_stats.last_holder = i;
    /* What the acquire took, by the key it reported: no second hash. */
    int64_t key = advlock_pq_async_report(&c->adapter)->lock.key;
    if (advlock_pq_async_start_release_key(&c->adapter, key, advlock_pq_now_ms()) != 0)
        bench_fail("client %d: cannot start a release", i);
    c->step = RELEASING;
}

static void acquired(int i, int64_t now_ns)
{
    for (int k = 0; k < client_count; k++)
        if (clients[k].step == HOLDING)
            bench_fail("client %d acquired the lock while client %d held it", i, k);
    round_stats *s = &now_stats;
    s->acquisitions++;
    if (s->last_release_ns != 0 && s->handoffs < MAX_SAMPLES) {
        handoff_ms[s->handoffs++] = (double)(now_ns - s->last_release_ns) / 1e6;
        s->changed_hands += s->last_holder != i;
    }
    if (s->waits < MAX_SAMPLES)
        wait_ms[s->waits++] = (double)(now_ns - clients[i].acquire_start_ns) / 1e6;
    clients[i].step = HOLDING;
    clients[i].step_at_ns = now_ns + hold_ns;
}

/* Moves a client on after its adapter finished an operation. */
static void finished(int i, int64_t now_ns, int stopping)
{
    client *c = &clients[i];
    const advlock_pq_report *r = advlock_pq_async_report(&c->adapter);
    advlock_outcome outcome = r->lock.outcome;
    if (c->step == ACQUIRING) {
        if (outcome == ADVLOCK_ACQUIRED) {
            acquired(i, now_ns);
        } else if (outcome == ADVLOCK_TIMED_OUT && !stopping) {
            check_failed_acquire(i, ADVLOCK_TIMED_OUT);
            now_stats.timeouts++;
            if (now_stats.waits < MAX_SAMPLES)
                wait_ms[now_stats.waits++] = (double)(now_ns - c->acquire_start_ns) / 1e6;
            start_acquire(i, now_ns);
        } else if (outcome == ADVLOCK_CANCELLED || outcome == ADVLOCK_TIMED_OUT) {
            check_failed_acquire(i, outcome);
            c->step = STOPPED;
        } else {
            bench_pq_expect_outcome(r, ADVLOCK_ACQUIRED, lock_name, "acquire");
        }
    } else if (c->step == RELEASING) {
        bench_pq_expect_outcome(r, ADVLOCK_RELEASED, lock_name, "release");
        c->step = stopping ? STOPPED : THINKING;
        c->step_at_ns = now_ns + think_ns;
    }
}

/* Timers of the clients' own steps (hold, think) that are due. */
static void run_due_steps(int64_t now_ns, int stopping)
{
    for (int i = 0; i < client_count; i++) {
        client *c = &clients[i];
        if (c->step == HOLDING && now_ns >= c->step_at_ns)
            start_release(i, now_ns);
        else if (c->step == THINKING && stopping)
            c->step = STOPPED;
        else if (c->step == THINKING && now_ns >= c->step_at_ns)
            start_acquire(i, now_ns);
    }
}

static int64_t next_timer_ns(void)
{
    int64_t next = INT64_MAX;
    for (int i = 0; i < client_count; i++) {
        client *c = &clients[i];
        int64_t at_ms;
        if ((c->step == HOLDING || c->step == THINKING) && c->step_at_ns < next)
            next = c->step_at_ns;
        if (c->step == ACQUIRING || c->step == RELEASING)
            if (advlock_pq_async_deadline(&c->adapter, &at_ms) && at_ms * 1000000 < next)
                next = at_ms * 1000000;
    }
    return next;
}

/* One turn of the loop: wait for sockets or the next timer, then serve. */
static void turn(int stopping)
{
    struct pollfd fds[MAX_CLIENTS];
    int owner[MAX_CLIENTS], n = 0;
    for (int i = 0; i < client_count; i++) {
        unsigned wants = advlock_pq_async_wants(&clients[i].adapter);
        if ((clients[i].step != ACQUIRING && clients[i].step != RELEASING) || wants == 0)
            continue;
        fds[n] = (struct pollfd){.fd = advlock_pq_async_socket(&clients[i].adapter),
                                 .events = (short)((wants & ADVLOCK_PQ_READ ? POLLIN : 0)
                                                   | (wants & ADVLOCK_PQ_WRITE ? POLLOUT : 0))};
        owner[n++] = i;
    }
    int64_t next = next_timer_ns(), now_ns = bench_now_ns();
    struct timespec timeout = {0, 0};
    if (next != INT64_MAX && next > now_ns)
        timeout = (struct timespec){(time_t)((next - now_ns) / 1000000000),
                                    (long)((next - now_ns) % 1000000000)};
    if (ppoll(fds, (nfds_t)n, next == INT64_MAX ? NULL : &timeout, NULL) < 0)
        bench_fail("ppoll failed");

    now_ns = bench_now_ns();
    int64_t now_ms = advlock_pq_now_ms();
    for (int k = 0; k < n; k++) {
        int i = owner[k];
        unsigned ready = (fds[k].revents & (POLLIN | POLLERR | POLLHUP) ? ADVLOCK_PQ_READ : 0)
                         | (fds[k].revents & POLLOUT ? ADVLOCK_PQ_WRITE : 0);
        if (ready != 0 && advlock_pq_async_busy(&clients[i].adapter)) {
            advlock_pq_async_process(&clients[i].adapter, ready, now_ms);
            if (!advlock_pq_async_busy(&clients[i].adapter))
                finished(i, now_ns, stopping);
        }
    }
    for (int i = 0; i < client_count; i++) {
        int64_t at_ms;
        client *c = &clients[i];
        if ((c->step == ACQUIRING || c->step == RELEASING)
            && advlock_pq_async_deadline(&c->adapter, &at_ms) && at_ms <= now_ms) {
            advlock_pq_async_process(&c->adapter, 0, now_ms);
            if (!advlock_pq_async_busy(&c->adapter))
                finished(i, now_ns, stopping);
        }
    }
    run_due_steps(now_ns, stopping);
}

/* ---- rounds -------------------------------------------------------------------- */

static double round_seconds;
static int round_index;
static double per_round[4][BENCH_MAX_ROUNDS]; /* handoff p50, p99, wait p99, changed % */
static long total_timeouts;

static double round_of_contention(void *arg)
{
    (void)arg;
    memset(&now_stats, 0, sizeof now_stats);
    int64_t start = bench_now_ns(), end = start + (int64_t)(round_seconds * 1e9);
    for (int i = 0; i < client_count; i++)
        start_acquire(i, start);
    while (bench_now_ns() < end)
        turn(0);
    /* Stop: asleep acquires end at once; holders release; nothing starts.
     * A client still waiting has waited at least this long. */
    int64_t stop_ns = bench_now_ns();
    for (int i = 0; i < client_count; i++)
        if (clients[i].step == ACQUIRING) {
            if (now_stats.waits < MAX_SAMPLES)
                wait_ms[now_stats.waits++] = (double)(stop_ns - clients[i].acquire_start_ns) / 1e6;
            (void)advlock_pq_async_cancel(&clients[i].adapter, advlock_pq_now_ms());
        }
    for (int i = 0; i < client_count; i++)
        if (clients[i].step == ACQUIRING && !advlock_pq_async_busy(&clients[i].adapter))
            finished(i, bench_now_ns(), 1);
    for (;;) {
        int active = 0;
        for (int i = 0; i < client_count; i++)
            active += clients[i].step != STOPPED;
        if (active == 0)
            break;
        turn(1);
    }
    double seconds = (double)(bench_now_ns() - start) / 1e9;
    check_stopped_round();

    round_stats *s = &now_stats;
    int r = round_index++;
    per_round[0][r] = s->handoffs > 0 ? bench_percentile(handoff_ms, s->handoffs, 50) : NAN;
    per_round[1][r] = s->handoffs > 0 ? bench_percentile(handoff_ms, s->handoffs, 99) : NAN;
    per_round[2][r] = s->waits > 0 ? bench_percentile(wait_ms, s->waits, 99) : NAN;
    per_round[3][r] =
        s->handoffs > 0 ? 100.0 * (double)s->changed_hands / (double)s->handoffs : NAN;
    total_timeouts += s->timeouts;
    return (double)s->acquisitions / seconds;
}

/*
 * The limit: one round trip of a prepared statement. A releasing client has
 * just idled for a whole hold, and so has its server process, and waking
 * from that costs more than a round trip in a tight loop; so each timed
 * statement follows an idle pause as long as a hold. The statement right
 * after it, with everything awake, gives the tight-loop figure for the note.
 */
static int64_t probe_key;
static double hot_round_trip[BENCH_MAX_ROUNDS];
static int probe_round;

static double round_trip_ms(void *arg)
{
    (void)arg;
    enum { SAMPLES = 40 };
    double after_idle[SAMPLES], hot[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) {
        bench_sleep_until_ns(bench_now_ns() + hold_ns);
        int64_t t0 = bench_now_ns();
        bench_pq_exec_true(probe, BENCH_PQ_TRY_LOCK, probe_key);
        int64_t t1 = bench_now_ns();
        bench_pq_exec_true(probe, BENCH_PQ_UNLOCK, probe_key);
        after_idle[i] = (double)(t1 - t0) / 1e6;
        hot[i] = (double)(bench_now_ns() - t1) / 1e6;
    }
    hot_round_trip[probe_round++] = bench_median(hot, SAMPLES);
    return bench_median(after_idle, SAMPLES);
}

static double median_of_rounds(const double *values, int rounds)
{
    double copy[BENCH_MAX_ROUNDS];
    int n = 0;
    for (int r = 0; r < rounds; r++)
        if (!isnan(values[r]))
            copy[n++] = values[r];
    return n > 0 ? bench_median(copy, (size_t)n) : NAN;
}

int main(int argc, char **argv)
{
    static const char *const options[] = {"--policy",  "--seconds",  "--rounds",     "--clients",
                                          "--hold-ms", "--think-ms", "--timeout-ms", NULL};
    bench_check_options(argc, argv, options);
    enum policy policy = parse_policy(bench_option_text(argc, argv, "--policy", "reference"));
    double seconds = bench_option(argc, argv, "--seconds", 20);
    int rounds = (int)bench_option(argc, argv, "--rounds", 5);
    client_count = (int)bench_option(argc, argv, "--clients", 8);
    hold_ns = (int64_t)(bench_option(argc, argv, "--hold-ms", 10) * 1e6);
    think_ns = (int64_t)(bench_option(argc, argv, "--think-ms", 0) * 1e6);
    timeout_ms = (int64_t)bench_option(argc, argv, "--timeout-ms", DEFAULT_TIMEOUT_MS);
    if (seconds <= 0 || rounds < 1 || rounds > BENCH_MAX_ROUNDS || client_count < 2
        || client_count > MAX_CLIENTS || hold_ns < 0 || think_ns < 0 || timeout_ms < 0)
        bench_fail("contention: a parameter is out of range");
    round_seconds = seconds / rounds;
    const char *policy_name = policy_names[policy];
    /* Figures are named contention_<policy>[_think<K>ms]_<what>. */
    /* Figures are named contention_<policy>[_think<K>ms][_timeout<T>ms]_<what>,
     * the parts in brackets only when not the defaults. */
    char label[96];
    int used = snprintf(label, sizeof label, "contention_%s", policy_keys[policy]);
    if (think_ns > 0)
        used += snprintf(label + used, sizeof label - (size_t)used, "_think%gms",
                         (double)think_ns / 1e6);
    if (timeout_ms != DEFAULT_TIMEOUT_MS)
        snprintf(label + used, sizeof label - (size_t)used, "_timeout%lldms",
                 (long long)timeout_ms);

    for (int i = 0; i < client_count; i++) {
        clients[i].conn = bench_pq_connect();
        if (advlock_pq_async_init(&clients[i].adapter, clients[i].conn) != 0)
            bench_fail("cannot bind an adapter");
        apply_policy(&clients[i].adapter, policy, i, &clients[i].last_result);
    }
    probe = bench_pq_connect();
    bench_pq_prepare(probe);
    probe_key = bench_pq_key("bench-round-trip");
    contention_key = bench_pq_key(lock_name);
    handoff_ms = malloc(MAX_SAMPLES * sizeof *handoff_ms);
    wait_ms = malloc(MAX_SAMPLES * sizeof *wait_ms);
    if (handoff_ms == NULL || wait_ms == NULL)
        bench_fail("out of memory");

    bench_contestant c[] = {
        {.name = "round trip", .run_round = round_trip_ms},
        {.name = "contention", .run_round = round_of_contention},
    };
    bench_interleave(c, 2, rounds);

    double rtt = bench_median_of(&c[0], rounds);
    double rate = bench_median_of(&c[1], rounds);
    double p50 = median_of_rounds(per_round[0], rounds),
           p99 = median_of_rounds(per_round[1], rounds);
    double ideal_rate = 1000.0 / ((double)hold_ns / 1e6 + rtt);
    char name[160], limit[96];

    snprintf(name, sizeof name, "%s_acquisitions_per_s", label);
    snprintf(limit, sizeof limit, "1 / (hold + 1 round trip): %.1f/s", ideal_rate);
    bench_emit(&(bench_figure){name, rate, "acquisitions/s", limit, rate / ideal_rate, NULL, -1});
    snprintf(limit, sizeof limit, "1 round trip: %.3f ms", rtt);
    snprintf(name, sizeof name, "%s_handoff_p50_ms", label);
    bench_emit(&(bench_figure){name, p50, "ms", limit, p50 / rtt, NULL, -1});
    snprintf(name, sizeof name, "%s_handoff_p99_ms", label);
    bench_emit(&(bench_figure){name, p99, "ms", limit, p99 / rtt, NULL, -1});
    snprintf(name, sizeof name, "%s_changed_hands", label);
    bench_emit(&(bench_figure){name, median_of_rounds(per_round[3], rounds), "% of hand-offs", NULL,
                               NAN, NULL, -1});
    snprintf(name, sizeof name, "%s_acquire_wait_p99_ms", label);
    bench_emit(
        &(bench_figure){name, median_of_rounds(per_round[2], rounds), "ms", NULL, NAN, NULL, -1});
    snprintf(name, sizeof name, "%s_timeouts", label);
    bench_emit(&(bench_figure){name, (double)total_timeouts, "timeouts", NULL, NAN, NULL, -1});
    snprintf(name, sizeof name, "%s_leaked_locks", label);
    snprintf(limit, sizeof limit, "%ld timed-out or cancelled acquires", failed_acquires);
    bench_emit(
        &(bench_figure){name, (double)leaked_locks, "locks", limit,
                        failed_acquires > 0 ? (double)leaked_locks / (double)failed_acquires : NAN,
                        "= 0", leaked_locks == 0});
    if (leaked_locks > 0)
        bench_note("%s: LEAK: %ld times a session held the lock while its client did not know "
                   "it: after %ld acquires that ended timed out and %ld that ended cancelled, "
                   "whose lock query had been answered with a server error (the cancel's "
                   "57014) %ld times, true %ld, false %ld, not at all %ld; and %ld found only "
                   "when a round stopped; each dropped with pg_advisory_unlock_all at once",
                   label, leaked_locks, leaked_after[ADVLOCK_TIMED_OUT],
                   leaked_after[ADVLOCK_CANCELLED], leak_answer[ADVLOCK_RESULT_SERVER_ERROR],
                   leak_answer[ADVLOCK_RESULT_TRUE], leak_answer[ADVLOCK_RESULT_FALSE],
                   leak_answer[ADVLOCK_RESULT_CONNECTION_LOST + 1],
                   leaked_after[ADVLOCK_FAILED + 1]);
    snprintf(name, sizeof name, "%s_round_trip_ms", label);
    bench_emit(&(bench_figure){name, rtt, "ms", NULL, NAN, NULL, -1});
    bench_note("%s: policy %s, %d clients, one lock, hold %.0f ms, think %.0f ms, timeout %lld "
               "ms, %g s in %d rounds; timeouts counted over the whole run; round trip after "
               "%.0f ms idle %.3f ms, in a tight loop %.3f ms",
               label, policy_name, client_count, (double)hold_ns / 1e6, (double)think_ns / 1e6,
               (long long)timeout_ms, seconds, rounds, (double)hold_ns / 1e6, rtt,
               bench_median(hot_round_trip, (size_t)probe_round));

    for (int i = 0; i < client_count; i++)
        PQfinish(clients[i].conn);
    PQfinish(probe);
    free(handoff_ms);
    free(wait_ms);
    return 0;
}
