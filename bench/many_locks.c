/*
 * Many locks over one connection: what a lock set costs against the raw
 * libpq pipeline, and what it saves against one connection per lock.
 *
 * N distinct, uncontended names; per round, each contestant takes all N
 * and then gives all N back:
 *   set          one connection, an advlock_pq_lockset with N members
 *                (acquire by name: the key is derived each time);
 *   raw          one connection in pipeline mode: N prepared
 *                pg_try_advisory_lock of the same keys, one sync, every
 *                answer read; then N pg_advisory_unlock the same way;
 *   connections  P connections (the server's max_connections bounds P),
 *                one nonblocking advlock_pq each, in one poll() loop: N/P
 *                waves of P locks taken at once and given back.
 * Rounds are interleaved. Then the server's memory: the proportional set
 * size (Pss, /proc/<pid>/smaps_rollup) of the set's backend holding N
 * locks, and of the P backends holding one each.
 *
 * --held H (at least N): the set's and the raw connection's sessions hold
 * H - N other names throughout, so each round runs with up to H held, and
 * only the set and raw run. The server's cost of a transaction's end grows
 * with the locks its session holds (docs/performance.md, "A lock set as it
 * grows"); the server needs max_locks_per_transaction raised for H.
 *
 *     many_locks [--locks 1000] [--rounds 7] [--connections 100] [--held H]
 */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_pq.h"
#include "bench.h"
#include "bench_pq.h"

static int locks, connections, held;
static char (*names)[32];
static int64_t *keys;

static PGconn *set_conn, *raw_conn;
static advlock_pq_lockset set;
static advlock_pq_member *members;
static PGconn **conns;
static advlock_pq *adapters;
static struct pollfd *fds;

/* ---- the set ------------------------------------------------------------- */

static void drive_set(void)
{
    while (advlock_pq_lockset_busy(&set) > 0)
        (void)advlock_pq_lockset_wait(&set, -1, -1);
}

static void set_take_all(void)
{
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < locks; i++)
        if (advlock_pq_lockset_start_acquire(&set, &members[i], names[i], strlen(names[i]), 0, NULL,
                                             now)
            != 0)
            bench_fail("set: the acquire of %s was refused", names[i]);
    drive_set();
    for (int i = 0; i < locks; i++)
        bench_pq_expect_outcome(advlock_pq_member_report(&members[i]), ADVLOCK_ACQUIRED, names[i],
                                "set");
}

static void set_give_all_back(void)
{
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < locks; i++)
        if (advlock_pq_lockset_start_release(&set, &members[i], now) != 0)
            bench_fail("set: the release of %s was refused", names[i]);
    drive_set();
    for (int i = 0; i < locks; i++)
        bench_pq_expect_outcome(advlock_pq_member_report(&members[i]), ADVLOCK_RELEASED, names[i],
                                "set");
}

static double set_round(void *arg)
{
    (void)arg;
    int64_t t0 = bench_now_ns();
    set_take_all();
    set_give_all_back();
    return locks / ((bench_now_ns() - t0) / 1e9);
}

/* ---- raw libpq, pipelined ------------------------------------------------ */

/* Waits for the socket: readable, and writable while libpq has output. */
static void raw_wait(int flushing)
{
    struct pollfd p = {.fd = PQsocket(raw_conn), .events = POLLIN | (flushing ? POLLOUT : 0)};
    (void)poll(&p, 1, -1);
}

static void raw_batch_of(const char *statement, const int64_t *of, int n)
{
    for (int i = 0; i < n; i++)
        bench_pq_send(raw_conn, statement, of[i]);
    if (PQpipelineSync(raw_conn) != 1)
        bench_fail("raw: PQpipelineSync: %s", PQerrorMessage(raw_conn));
    int flushing = PQflush(raw_conn) == 1, answered = 0, synced = 0;
    while (!synced) {
        if (PQisBusy(raw_conn)) {
            raw_wait(flushing);
            if (flushing)
                flushing = PQflush(raw_conn) == 1;
            if (!PQconsumeInput(raw_conn))
                bench_fail("raw: %s", PQerrorMessage(raw_conn));
            continue;
        }
        PGresult *res = PQgetResult(raw_conn);
        if (res == NULL) {
            answered++; /* the end of one statement's results */
        } else if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            synced = 1;
        } else {
            bench_pq_expect_true(res, statement);
        }
    }
    if (answered != n)
        bench_fail("raw: %d answers for %d statements", answered, n);
}

static void raw_batch(const char *statement)
{
    raw_batch_of(statement, keys, locks);
}

static double raw_round(void *arg)
{
    (void)arg;
    int64_t t0 = bench_now_ns();
    raw_batch(BENCH_PQ_TRY_LOCK);
    raw_batch(BENCH_PQ_UNLOCK);
    return locks / ((bench_now_ns() - t0) / 1e9);
}

/* ---- one connection per lock --------------------------------------------- */

/* One poll() loop over the adapters until none is busy. */
static void drive_adapters(int n)
{
    for (;;) {
        int busy = 0, timeout = -1;
        int64_t now = advlock_pq_now_ms(), at;
        for (int i = 0; i < n; i++) {
            busy += advlock_pq_async_busy(&adapters[i]);
            unsigned wants =
                advlock_pq_async_busy(&adapters[i]) ? advlock_pq_async_wants(&adapters[i]) : 0;
            fds[i].fd = wants != 0 ? advlock_pq_async_socket(&adapters[i]) : -1;
            fds[i].events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                                    | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0));
            fds[i].revents = 0;
            if (advlock_pq_async_deadline(&adapters[i], &at)) {
                int ms = at <= now ? 0 : (int)(at - now);
                timeout = timeout < 0 || ms < timeout ? ms : timeout;
            }
        }
        if (busy == 0)
            return;
        (void)poll(fds, (nfds_t)n, timeout);
        now = advlock_pq_now_ms();
        for (int i = 0; i < n; i++) {
            unsigned ready = ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) ? ADVLOCK_PQ_READ : 0)
                             | ((fds[i].revents & POLLOUT) ? ADVLOCK_PQ_WRITE : 0);
            int due = advlock_pq_async_deadline(&adapters[i], &at) && at <= now;
            if (advlock_pq_async_busy(&adapters[i]) && (ready != 0 || due))
                (void)advlock_pq_async_process(&adapters[i], ready, now);
        }
    }
}

/* Locks first .. first + n - 1, one per connection, taken at once. */
static void connections_take(int first, int n)
{
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < n; i++)
        if (advlock_pq_async_start_acquire(&adapters[i], names[first + i], strlen(names[first + i]),
                                           0, now)
            != 0)
            bench_fail("connections: the acquire of %s was refused", names[first + i]);
    drive_adapters(n);
    for (int i = 0; i < n; i++)
        bench_pq_expect_outcome(advlock_pq_async_report(&adapters[i]), ADVLOCK_ACQUIRED,
                                names[first + i], "connections");
}

static void connections_give_back(int first, int n)
{
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < n; i++)
        if (advlock_pq_async_start_release_key(&adapters[i], keys[first + i], now) != 0)
            bench_fail("connections: the release of %s was refused", names[first + i]);
    drive_adapters(n);
    for (int i = 0; i < n; i++)
        bench_pq_expect_outcome(advlock_pq_async_report(&adapters[i]), ADVLOCK_RELEASED,
                                names[first + i], "connections");
}

static double connections_round(void *arg)
{
    (void)arg;
    int64_t t0 = bench_now_ns();
    for (int first = 0; first < locks; first += connections) {
        int n = locks - first < connections ? locks - first : connections;
        connections_take(first, n);
        connections_give_back(first, n);
    }
    return locks / ((bench_now_ns() - t0) / 1e9);
}

/* ---- the server's memory ------------------------------------------------- */

/* A backend's proportional set size in kB (shared pages divided among the
 * processes that map them, so that a sum over backends means something),
 * or its VmRSS where smaps_rollup cannot be read. */
static double backend_kb(PGconn *conn)
{
    static const char *const sources[2][2] = {{"smaps_rollup", "Pss:"}, {"status", "VmRSS:"}};
    for (int s = 0; s < 2; s++) {
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%d/%s", PQbackendPID(conn), sources[s][0]);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        double kb = NAN;
        while (fgets(line, sizeof line, f) != NULL)
            if (strncmp(line, sources[s][1], strlen(sources[s][1])) == 0)
                kb = strtod(line + strlen(sources[s][1]), NULL);
        fclose(f);
        if (!isnan(kb))
            return kb;
    }
    bench_fail("cannot read the memory of backend %d (is the server on this machine?)",
               PQbackendPID(conn));
}

/* ---- the locks held beside the rounds' (--held) ---------------------------- */

/* The members held beside the rounds: the set links them until it closes,
 * so they live as long as the program. */
static advlock_pq_member *beside;

/* The set's members and the raw connection take held - locks other names,
 * kept until the end. */
static void hold_beside(void)
{
    int n = held - locks;
    beside = calloc((size_t)n, sizeof *beside);
    int64_t *beside_keys = calloc((size_t)n, sizeof *beside_keys);
    if (beside == NULL || beside_keys == NULL)
        bench_fail("out of memory");
    if (advlock_pq_lockset_set_capacity_share(&set, 100) != 0)
        bench_fail("the set refused a share of 100%%");
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < n; i++) {
        char name[32], raw_name[32];
        snprintf(name, sizeof name, "bench beside %d", i);
        snprintf(raw_name, sizeof raw_name, "bench raw beside %d", i); /* not the set's */
        beside_keys[i] = bench_pq_key(raw_name);
        advlock_pq_member_init(&beside[i]);
        if (advlock_pq_lockset_start_acquire(&set, &beside[i], name, strlen(name), 0, NULL, now)
            != 0)
            bench_fail("set: the acquire of %s was refused", name);
    }
    drive_set();
    for (int i = 0; i < n; i++)
        bench_pq_expect_outcome(advlock_pq_member_report(&beside[i]), ADVLOCK_ACQUIRED,
                                "a name held beside", "set (raise max_locks_per_transaction)");
    raw_batch_of(BENCH_PQ_TRY_LOCK, beside_keys, n);
    /* Held until the connections close: the members stay allocated. */
    free(beside_keys);
}

/* The rate of the set and of raw pipelining with up to `held` held. */
static void run_beside(int rounds)
{
    hold_beside();
    bench_contestant c[] = {
        {"set", set_round, NULL, {0}},
        {"raw", raw_round, NULL, {0}},
    };
    bench_interleave(c, 2, rounds);
    double set_rate = bench_median_of(&c[0], rounds), raw_rate = bench_median_of(&c[1], rounds);
    char name[64], limit[128];
    snprintf(name, sizeof name, "many_locks_one_connection_%d_held", held);
    snprintf(limit, sizeof limit, "raw libpq pipeline, same keys: %.0f/s", raw_rate);
    bench_emit(&(bench_figure){name, set_rate, "locks/s", limit,
                               bench_median_ratio(&c[0], &c[1], rounds), NULL, -1});
    bench_note("many locks with %d held: %d names taken and given back per round beside %d "
               "held by the same session, %d rounds",
               held, locks, held - locks, rounds);
}

/* ---- the run ------------------------------------------------------------- */

static void *allocate(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL && n > 0)
        bench_fail("out of memory");
    return p;
}

static void setup(void)
{
    names = allocate((size_t)locks, sizeof *names);
    keys = allocate((size_t)locks, sizeof *keys);
    for (int i = 0; i < locks; i++) {
        snprintf(names[i], sizeof names[i], "bench many %d", i);
        keys[i] = bench_pq_key(names[i]);
    }
    set_conn = bench_pq_connect();
    if (advlock_pq_lockset_init(&set, set_conn) != 0)
        bench_fail("advlock_pq_lockset_init refused the connection");
    members = allocate((size_t)locks, sizeof *members);
    for (int i = 0; i < locks; i++)
        advlock_pq_member_init(&members[i]);

    raw_conn = bench_pq_connect();
    bench_pq_prepare(raw_conn);
    if (PQsetnonblocking(raw_conn, 1) != 0 || PQenterPipelineMode(raw_conn) != 1)
        bench_fail("raw: no pipeline mode: %s", PQerrorMessage(raw_conn));

    conns = allocate((size_t)connections, sizeof(PGconn *));
    adapters = allocate((size_t)connections, sizeof *adapters);
    fds = allocate((size_t)connections, sizeof *fds);
    for (int i = 0; i < connections; i++) {
        conns[i] = bench_pq_connect();
        if (advlock_pq_async_init(&adapters[i], conns[i]) != 0)
            bench_fail("advlock_pq_async_init refused connection %d", i);
    }
}

int main(int argc, char **argv)
{
    static const char *const options[] = {"--locks", "--rounds", "--connections", "--held", NULL};
    bench_check_options(argc, argv, options);
    locks = (int)bench_option(argc, argv, "--locks", 1000);
    int rounds = (int)bench_option(argc, argv, "--rounds", 7);
    connections = (int)bench_option(argc, argv, "--connections", 100);
    held = (int)bench_option(argc, argv, "--held", 0);
    if (locks < 1 || rounds < 1 || rounds > BENCH_MAX_ROUNDS || connections < 1
        || (held != 0 && held < locks))
        bench_fail("--locks, --connections >= 1, --rounds 1..%d, --held 0 or >= --locks",
                   BENCH_MAX_ROUNDS);
    if (connections > locks)
        connections = locks;
    if (held > 0)
        connections = 0; /* only the set and raw run */
    setup();
    if (held > 0) {
        run_beside(rounds);
        advlock_pq_lockset_finish(&set);
        PQfinish(set_conn);
        PQfinish(raw_conn);
        return 0;
    }

    bench_contestant c[] = {
        {"set", set_round, NULL, {0}},
        {"raw", raw_round, NULL, {0}},
        {"connections", connections_round, NULL, {0}},
    };
    bench_interleave(c, 3, rounds);
    double set_rate = bench_median_of(&c[0], rounds), raw_rate = bench_median_of(&c[1], rounds);
    double conn_rate = bench_median_of(&c[2], rounds);
    double vs_raw = bench_median_ratio(&c[0], &c[1], rounds);

    /* Memory, with the locks held: the set's one backend holding all N;
     * the P backends holding one each (N locks would need N of them). */
    set_take_all();
    double set_kb = backend_kb(set_conn);
    set_give_all_back();
    connections_take(0, connections);
    double conn_kb = 0;
    for (int i = 0; i < connections; i++)
        conn_kb += backend_kb(conns[i]);
    connections_give_back(0, connections);

    char limit[128];
    snprintf(limit, sizeof limit, "raw libpq pipeline, same keys: %.0f/s", raw_rate);
    bench_emit(&(bench_figure){"many_locks_one_connection", set_rate, "locks/s", limit, vs_raw,
                               "ratio >= 0.8", vs_raw >= 0.8});
    bench_emit(
        &(bench_figure){"many_locks_one_connection_locks", locks, "locks", NULL, NAN, NULL, -1});
    snprintf(limit, sizeof limit, "the set: %.0f/s", set_rate);
    bench_emit(&(bench_figure){"many_locks_connection_per_lock", conn_rate, "locks/s", limit,
                               bench_median_ratio(&c[2], &c[0], rounds), NULL, -1});
    bench_emit(&(bench_figure){"many_locks_server_kb_set", set_kb, "kB", NULL, NAN, NULL, -1});
    double per_backend = conn_kb / connections;
    snprintf(limit, sizeof limit, "the set's one backend: %.0f kB", set_kb);
    bench_emit(&(bench_figure){"many_locks_server_kb_connection_per_lock", per_backend * locks,
                               "kB", limit, per_backend * locks / set_kb, NULL, -1});
    bench_note("many locks: %d distinct names, acquire + release, %d rounds; one connection per "
               "lock ran %d connections at a time (max_connections); server memory is the "
               "backends' Pss with the locks held: one backend %.0f kB for all %d, %.0f kB per "
               "backend of one lock (x %d = %.0f kB)",
               locks, rounds, connections, set_kb, locks, per_backend, locks, per_backend * locks);
    advlock_pq_lockset_finish(&set);
    PQfinish(set_conn);
    PQfinish(raw_conn);
    for (int i = 0; i < connections; i++)
        PQfinish(conns[i]);
    return 0;
}
