/*
 * Question 3: how many uncontended acquire + release cycles per second does
 * the blocking adapter do, next to raw libpq doing the same two round trips?
 *
 * Four contestants on one connection to the same server, interleaved:
 *   adapter   advlock_pq_acquire() by name + advlock_pq_release_key() with
 *             the key the acquire reported: what a caller who takes and gives
 *             back one lock writes. The core remembers the last name each
 *             thread derived, so taking the same name again hashes nothing
 *   fenced    the same with options.fence: each grant also issues a fencing
 *             token, an upsert of the key's counter row committed with
 *             synchronous_commit on, in the try-lock's own statement (the
 *             schema is installed first, with advlock_fence_setup_sql())
 *   raw       PQexecPrepared(try-lock) + PQexecPrepared(unlock), prepared
 *             once, binary int8 in, binary boolean out: the same two round
 *             trips with nothing around them
 *   pipeline  both statements sent at once in libpq pipeline mode and one
 *             sync: one round trip, the floor for any two-statement cycle
 *   delayed   the adapter's cycle with options.lock_delay (under a lease,
 *             which it needs): each grant also writes the holder's mark in
 *             advlock.mark, committed with synchronous_commit on, and each
 *             release clears it first, waiting for no flush: two more
 *             statements, each a round trip of its own in this adapter
 *             (docs/design.md, "Lock-delay")
 * and, per round, the client's CPU time per cycle (getrusage), which shows
 * what the adapter adds without the round trips hiding it. Last, the same
 * comparison in instructions, which the noise of a shared machine cannot
 * blur: the adapter's and raw libpq's cycles run again under callgrind,
 * counting the client's own instructions (the server runs natively; system
 * calls are not instructions of the client and are not counted). Under
 * callgrind only, a fourth way: the adapter's cycle with two names taken in
 * turn, so that every acquire misses that cache and hashes its name once,
 * as the first acquire of a name always does.
 *
 * The harness's server runs with fsync off, so the fenced cycle's commit
 * flushes nothing there. With --fsync 1 the program turns fsync on for its
 * run (ALTER SYSTEM, reloaded; reset at the end), measures only the
 * adapter, fenced, delayed and raw cycles, and names its figures
 * uncontended_fsync_*: the durable writes' cost where every commit
 * reaches the disk.
 *
 *     uncontended_cycles [--rounds 21] [--cycles 1000] [--instructions 1] [--fsync 0]
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "advlock_pq.h"
#include "bench.h"
#include "bench_pq.h"

static const char lock_name[] = "BrighterMigration_public.Outbox";
static const char other_name[] = "BrighterMigration_public.Inbox";

static PGconn *conn;
static advlock_pq adapter_state;
static int64_t key;
static long cycles;
static advlock_options plain_options, fenced_options, delayed_options;
static int64_t last_token; /* the fenced cycle's last token */

typedef struct contestant_state {
    void (*cycle)(void);
    const advlock_options *options; /* the adapter's, set before each round; NULL: raw */
    double cpu_us_per_cycle[BENCH_MAX_ROUNDS];
    int round;
} contestant_state;

/* One adapter cycle on name (len bytes); returns the acquire's token. */
static int64_t take_and_give_back(const char *name, size_t len)
{
    advlock_pq_report acquired, released;
    if (advlock_pq_acquire(&adapter_state, name, len, 30000, &acquired) != 0)
        bench_fail("adapter acquire refused");
    bench_pq_expect_outcome(&acquired, ADVLOCK_ACQUIRED, name, "adapter acquire");
    if (advlock_pq_release_key(&adapter_state, acquired.lock.key, &released) != 0)
        bench_fail("adapter release refused");
    bench_pq_expect_outcome(&released, ADVLOCK_RELEASED, name, "adapter release");
    return acquired.lock.fence;
}

static void adapter_cycle(void)
{
    if (take_and_give_back(lock_name, sizeof lock_name - 1) != 0)
        bench_fail("a plain acquire reported a fencing token");
}

/* The adapter's cycle on lock_name and other_name in turn: each acquire's
 * name differs from the last one derived, so each hashes. */
static void adapter_cycle_new_name(void)
{
    static int turn;
    const char *name = (turn ^= 1) ? other_name : lock_name;
    take_and_give_back(name, strlen(name));
}

/* The fenced cycle: each token above the last (a benchmark of a counter
 * that does not count measures nothing). */
static void fenced_cycle(void)
{
    int64_t token = take_and_give_back(lock_name, sizeof lock_name - 1);
    if (token <= last_token)
        bench_fail("fencing token %lld after %lld", (long long)token, (long long)last_token);
    last_token = token;
}

/* The delayed cycle: a clean hand-off to itself each time, so no wait;
 * a mark left behind would make the next acquire wait out a lease. */
static void delayed_cycle(void)
{
    take_and_give_back(lock_name, sizeof lock_name - 1);
}

static void raw_cycle(void)
{
    bench_pq_exec_true(conn, BENCH_PQ_TRY_LOCK, key);
    bench_pq_exec_true(conn, BENCH_PQ_UNLOCK, key);
}

/* Results of one statement in a pipeline end with a NULL. */
static void read_pipelined_true(const char *what)
{
    PGresult *res = PQgetResult(conn);
    if (res == NULL)
        bench_fail("%s: no result: %s", what, PQerrorMessage(conn));
    bench_pq_expect_true(res, what); /* clears res */
    res = PQgetResult(conn);
    if (res != NULL)
        bench_fail("%s: more than one result", what);
}

static void pipeline_cycle(void)
{
    bench_pq_send(conn, BENCH_PQ_TRY_LOCK, key);
    bench_pq_send(conn, BENCH_PQ_UNLOCK, key);
    if (!PQpipelineSync(conn))
        bench_fail("PQpipelineSync: %s", PQerrorMessage(conn));
    read_pipelined_true("pipelined try-lock");
    read_pipelined_true("pipelined unlock");
    PGresult *sync = PQgetResult(conn);
    if (PQresultStatus(sync) != PGRES_PIPELINE_SYNC)
        bench_fail("pipeline: no sync result");
    PQclear(sync);
}

static void run_cycles(contestant_state *s, long n)
{
    if (s->options != NULL && advlock_pq_set_options(&adapter_state, s->options) != 0)
        bench_fail("advlock_pq_set_options refused");
    int pipelined = s->cycle == pipeline_cycle;
    if (pipelined && !PQenterPipelineMode(conn))
        bench_fail("PQenterPipelineMode: %s", PQerrorMessage(conn));
    for (long i = 0; i < n; i++)
        s->cycle();
    if (pipelined && !PQexitPipelineMode(conn))
        bench_fail("PQexitPipelineMode: %s", PQerrorMessage(conn));
}

/* The one function callgrind collects in (external, so never renamed). */
__attribute__((noinline)) void measured_cycles(contestant_state *s, long n);

void measured_cycles(contestant_state *s, long n)
{
    run_cycles(s, n);
}

/* One round: cycles/s, and the client's CPU time per cycle on the side. */
static double round_of_cycles(void *arg)
{
    contestant_state *s = arg;
    double cpu = bench_cpu_seconds();
    int64_t start = bench_now_ns();
    run_cycles(s, cycles);
    double seconds = (double)(bench_now_ns() - start) / 1e9;
    s->cpu_us_per_cycle[s->round++] = (bench_cpu_seconds() - cpu) * 1e6 / (double)cycles;
    return (double)cycles / seconds;
}

static double median_cpu(contestant_state *s)
{
    return bench_median(s->cpu_us_per_cycle, (size_t)s->round);
}

/* Client instructions per cycle of one way ("adapter", "adapter-new-name"
 * or "raw"), and in *sha256 those spent hashing lock names. */
static double instructions_per_cycle(const char *way, long n, double *sha256)
{
    static const char *const digest[] = {"EVP_DigestInit_ex2", "EVP_DigestUpdate",
                                         "EVP_DigestFinal_ex", NULL};
    char count[32];
    snprintf(count, sizeof count, "%ld", n);
    const char *const args[] = {"--callgrind-only", way, "--cycles", count, NULL};
    double inclusive[3];
    double total = bench_callgrind("measured_cycles", args, digest, inclusive);
    *sha256 = (inclusive[0] + inclusive[1] + inclusive[2]) / (double)n;
    return total / (double)n;
}

/* The server's fsync setting as SHOW prints it ("on" or "off"), in out. */
static void show_fsync(char *out, size_t size)
{
    PGresult *res = PQexec(conn, "SHOW fsync");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        bench_fail("SHOW fsync: %s", PQerrorMessage(conn));
    snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
}

/* Sets fsync for the whole server (ALTER SYSTEM, one statement each: it
 * refuses a transaction block) and waits until this session sees it. */
static void set_fsync(const char *value)
{
    char sql[64], now[8] = "";
    snprintf(sql, sizeof sql, "ALTER SYSTEM SET fsync = %s", value);
    bench_pq_exec_script(conn, sql, "ALTER SYSTEM SET fsync");
    bench_pq_exec_script(conn, "SELECT pg_reload_conf()", "pg_reload_conf");
    for (int i = 0; i < 200; i++) {
        show_fsync(now, sizeof now);
        if (strcmp(now, value) == 0)
            return;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    bench_fail("fsync is still %s after a reload asking for %s", now, value);
}

/* The --fsync 1 run: the adapter's plain and fenced cycles against raw
 * libpq, every commit flushed. */
static void durable_run(contestant_state *adapter, contestant_state *fenced,
                        contestant_state *delayed, contestant_state *raw, int rounds)
{
    set_fsync("on");
    bench_contestant c[] = {
        {.name = "adapter", .run_round = round_of_cycles, .arg = adapter},
        {.name = "fenced", .run_round = round_of_cycles, .arg = fenced},
        {.name = "raw prepared", .run_round = round_of_cycles, .arg = raw},
        {.name = "delayed", .run_round = round_of_cycles, .arg = delayed},
    };
    bench_interleave(c, 4, rounds);
    set_fsync("off");
    double raw_rate = bench_median_of(&c[2], rounds);
    char limit[96];
    snprintf(limit, sizeof limit, "raw libpq PQexecPrepared x2, fsync on: %.0f/s", raw_rate);
    bench_emit(&(bench_figure){"uncontended_fsync_cycles_per_s", bench_median_of(&c[0], rounds),
                               "cycles/s", limit, bench_median_ratio(&c[0], &c[2], rounds), NULL,
                               -1});
    bench_emit(&(bench_figure){"uncontended_fsync_fenced_cycles_per_s",
                               bench_median_of(&c[1], rounds), "cycles/s", limit,
                               bench_median_ratio(&c[1], &c[2], rounds), NULL, -1});
    bench_emit(&(bench_figure){"uncontended_fsync_lock_delay_cycles_per_s",
                               bench_median_of(&c[3], rounds), "cycles/s", limit,
                               bench_median_ratio(&c[3], &c[2], rounds), NULL, -1});
    bench_note("uncontended, fsync on: the fenced cycle runs at %.3f of the plain one's rate "
               "(one WAL flush per acquisition), the lock-delay cycle at %.3f (one too, the "
               "mark's; its clear waits for none, but each adds a round trip)",
               bench_median_ratio(&c[1], &c[0], rounds), bench_median_ratio(&c[3], &c[0], rounds));
}

int main(int argc, char **argv)
{
    static const char *const options[] = {"--rounds",         "--cycles", "--instructions",
                                          "--callgrind-only", "--fsync",  NULL};
    bench_check_options(argc, argv, options);
    int rounds = (int)bench_option(argc, argv, "--rounds", 21);
    cycles = (long)bench_option(argc, argv, "--cycles", 1000);
    if (rounds < 1 || cycles < 1)
        bench_fail("--rounds and --cycles must be positive");

    conn = bench_pq_connect();
    bench_pq_prepare(conn);
    if (advlock_pq_init(&adapter_state, conn) != 0)
        bench_fail("advlock_pq_init failed");
    key = bench_pq_key(lock_name);
    advlock_options_init(&plain_options);
    advlock_options_init(&fenced_options);
    fenced_options.fence = 1;
    advlock_options_init(&delayed_options);
    delayed_options.lock_delay = 1;
    delayed_options.lease_ms = 30000;
    delayed_options.lease_stop_ms = 1000;

    contestant_state adapter = {.cycle = adapter_cycle, .options = &plain_options};
    contestant_state fenced = {.cycle = fenced_cycle, .options = &fenced_options};
    contestant_state raw = {.cycle = raw_cycle};
    contestant_state pipeline = {.cycle = pipeline_cycle};
    contestant_state new_name = {.cycle = adapter_cycle_new_name, .options = &plain_options};
    contestant_state delayed = {.cycle = delayed_cycle, .options = &delayed_options};

    /* Under callgrind (see instructions_per_cycle): warm up uncounted,
     * then the counted cycles, and nothing printed. */
    const char *only = bench_option_text(argc, argv, "--callgrind-only", NULL);
    if (only != NULL) {
        contestant_state *s = strcmp(only, "adapter") == 0            ? &adapter
                              : strcmp(only, "adapter-new-name") == 0 ? &new_name
                                                                      : &raw;
        run_cycles(s, cycles / 4 + 1);
        measured_cycles(s, cycles);
        PQfinish(conn);
        return 0;
    }
    bench_pq_exec_script(conn, advlock_fence_setup_sql(), "advlock_fence_setup_sql()");
    /* Warm up: the adapter prepares its statements, the server's caches
     * and the CPU's settle. */
    contestant_state *warm_up[] = {&adapter, &fenced, &raw, &pipeline, &delayed};
    for (size_t i = 0; i < sizeof warm_up / sizeof warm_up[0]; i++)
        run_cycles(warm_up[i], cycles / 4 + 1);

    if (bench_option(argc, argv, "--fsync", 0) != 0) {
        durable_run(&adapter, &fenced, &delayed, &raw, rounds);
        PQfinish(conn);
        return 0;
    }
    bench_contestant c[] = {
        {.name = "adapter", .run_round = round_of_cycles, .arg = &adapter},
        {.name = "raw prepared", .run_round = round_of_cycles, .arg = &raw},
        {.name = "pipeline", .run_round = round_of_cycles, .arg = &pipeline},
        {.name = "fenced", .run_round = round_of_cycles, .arg = &fenced},
        {.name = "delayed", .run_round = round_of_cycles, .arg = &delayed},
    };
    bench_interleave(c, 5, rounds);

    double adapter_rate = bench_median_of(&c[0], rounds);
    double raw_rate = bench_median_of(&c[1], rounds);
    double pipeline_rate = bench_median_of(&c[2], rounds);
    double vs_raw = bench_median_ratio(&c[0], &c[1], rounds);
    char limit[96];

    snprintf(limit, sizeof limit, "raw libpq PQexecPrepared x2: %.0f/s", raw_rate);
    bench_emit(&(bench_figure){"uncontended_cycles_per_s", adapter_rate, "cycles/s", limit, vs_raw,
                               "ratio >= 0.95", vs_raw >= 0.95});
    snprintf(limit, sizeof limit, "libpq pipeline, 1 round trip: %.0f/s", pipeline_rate);
    bench_emit(&(bench_figure){"uncontended_cycles_vs_pipeline", adapter_rate, "cycles/s", limit,
                               bench_median_ratio(&c[0], &c[2], rounds), NULL, -1});
    bench_emit(&(bench_figure){"uncontended_raw_prepared_cycles_per_s", raw_rate, "cycles/s", NULL,
                               NAN, NULL, -1});
    bench_emit(&(bench_figure){"uncontended_pipeline_cycles_per_s", pipeline_rate, "cycles/s", NULL,
                               NAN, NULL, -1});
    snprintf(limit, sizeof limit, "raw libpq PQexecPrepared x2: %.0f/s", raw_rate);
    bench_emit(&(bench_figure){"uncontended_fenced_cycles_per_s", bench_median_of(&c[3], rounds),
                               "cycles/s", limit, bench_median_ratio(&c[3], &c[1], rounds), NULL,
                               -1});
    bench_note("uncontended, fsync off: the fenced cycle (one upsert of the key's counter per "
               "acquisition, committed in the try-lock's statement) runs at %.3f of the plain "
               "one's rate; fsync on: uncontended_fsync_*",
               bench_median_ratio(&c[3], &c[0], rounds));
    bench_emit(&(bench_figure){"uncontended_lock_delay_cycles_per_s",
                               bench_median_of(&c[4], rounds), "cycles/s", limit,
                               bench_median_ratio(&c[4], &c[1], rounds), NULL, -1});
    bench_note("uncontended, fsync off: the lock-delay cycle (the mark written after the grant "
               "and cleared before the unlock, a round trip each) runs at %.3f of the plain "
               "one's rate",
               bench_median_ratio(&c[4], &c[0], rounds));

    double adapter_cpu = median_cpu(&adapter), raw_cpu = median_cpu(&raw);
    snprintf(limit, sizeof limit, "raw libpq: %.2f us", raw_cpu);
    bench_emit(&(bench_figure){"uncontended_client_cpu_us_per_cycle", adapter_cpu, "us", limit,
                               adapter_cpu / raw_cpu, NULL, -1});
    bench_note("uncontended: %ld cycles per round, %d rounds; the adapter's extra client CPU is "
               "%.2f us per cycle",
               cycles, rounds, adapter_cpu - raw_cpu);

    if (bench_option(argc, argv, "--instructions", 1) != 0) {
        double adapter_sha, new_name_sha, raw_sha;
        double adapter_instructions = instructions_per_cycle("adapter", 500, &adapter_sha);
        double new_name_instructions =
            instructions_per_cycle("adapter-new-name", 500, &new_name_sha);
        double raw_instructions = instructions_per_cycle("raw", 500, &raw_sha);
        double ratio = adapter_instructions / raw_instructions;
        snprintf(limit, sizeof limit, "raw libpq: %.0f instructions", raw_instructions);
        bench_emit(&(bench_figure){"uncontended_client_instructions_per_cycle",
                                   adapter_instructions, "instructions", limit, ratio,
                                   "ratio <= 1.5", ratio <= 1.5});
        bench_emit(&(bench_figure){"uncontended_client_instructions_per_cycle_new_name",
                                   new_name_instructions, "instructions", limit,
                                   new_name_instructions / raw_instructions, NULL, -1});
        bench_emit(&(bench_figure){"uncontended_raw_client_instructions_per_cycle",
                                   raw_instructions, "instructions", NULL, NAN, NULL, -1});
        bench_note("uncontended, callgrind: the adapter's cycle (acquire by name, release by "
                   "the acquire's key) runs %.0f client instructions to raw libpq's %.0f, %.0f "
                   "of them hashing (the core remembers the name it derived last); with a new "
                   "name each acquire, %.0f, of which %.0f hash the name once",
                   adapter_instructions, raw_instructions, adapter_sha - raw_sha,
                   new_name_instructions, new_name_sha - raw_sha);
    }

    PQfinish(conn);
    return 0;
}
