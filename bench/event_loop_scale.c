/*
 * Question 4: can one thread with the nonblocking adapter keep C connections
 * as busy as C threads with the blocking adapter?
 *
 * C = 1, 8, 64 connections, each cycling acquire + release on a lock of its
 * own (no contention: this measures the drivers, not the lock), for a fixed
 * time per round:
 *   loop     one thread, poll(), one nonblocking advlock_pq per connection
 *   threads  C threads, each advlock_pq_acquire/advlock_pq_release_key
 * All six (2 ways x 3 sizes) are interleaved round by round; per round, the
 * client's CPU time per cycle (getrusage, all threads) and how busy the
 * whole machine was (/proc/stat), which shows who the bottleneck is.
 *
 * Both ways acquire by name and release with the key the acquire reported,
 * as a caller who takes and gives back one lock does. The same C connections
 * serve both ways: each keeps a nonblocking and a blocking adapter (and so
 * its prepared statements) for the whole run, and is switched to blocking
 * mode for the threads' rounds only.
 *
 *     event_loop_scale [--rounds 5] [--seconds 0.5]
 */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "advlock_pq.h"
#include "bench.h"
#include "bench_pq.h"

enum { MAX_CONNECTIONS = 64, SIZES = 3 };
static const int sizes[SIZES] = {1, 8, 64};

static PGconn *conns[MAX_CONNECTIONS];
static advlock_pq adapters[MAX_CONNECTIONS]; /* nonblocking */
static advlock_pq blocking_adapters[MAX_CONNECTIONS];
static char names[MAX_CONNECTIONS][32];
static double round_seconds;

/* Per contestant (way x size), per round, what the rate does not say. */
typedef struct way {
    int threaded;
    int connections;
    int round;
    double cpu_us_per_cycle[BENCH_MAX_ROUNDS];
    double machine_busy[BENCH_MAX_ROUNDS]; /* fraction of all cores */
    double client_cores[BENCH_MAX_ROUNDS]; /* CPU seconds per second */
} way;

/* ---- how busy the machine is ---------------------------------------------- */

typedef struct cpu_ticks {
    unsigned long long busy, total;
} cpu_ticks;

static cpu_ticks machine_ticks(void)
{
    cpu_ticks t = {0, 0};
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (f == NULL)
        return t;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7])
        == 8) {
        for (int i = 0; i < 8; i++)
            t.total += v[i];
        t.busy = t.total - v[3] - v[4]; /* not idle, not waiting for I/O */
    }
    fclose(f);
    return t;
}

/* ---- one thread, many connections ----------------------------------------- */

enum step { ACQUIRING, RELEASING, STOPPED };

/* Starts the step's operation; a release gives back the key the acquire
 * just reported. */
static void start(int i, enum step *step, int64_t key, int64_t now)
{
    int rc = *step == ACQUIRING ? advlock_pq_async_start_acquire(&adapters[i], names[i],
                                                                 strlen(names[i]), 10000, now)
                                : advlock_pq_async_start_release_key(&adapters[i], key, now);
    if (rc != 0)
        bench_fail("connection %d: cannot start: %s", i, advlock_strerror(rc));
}

/* Takes a finished operation to the next one; counts finished cycles. */
static void follow(int i, enum step *step, int64_t now, int64_t end, long *cycles)
{
    while (*step != STOPPED && !advlock_pq_async_busy(&adapters[i])) {
        const advlock_pq_report *r = advlock_pq_async_report(&adapters[i]);
        if (*step == ACQUIRING) {
            bench_pq_expect_outcome(r, ADVLOCK_ACQUIRED, names[i], "acquire");
            *step = RELEASING;
        } else {
            bench_pq_expect_outcome(r, ADVLOCK_RELEASED, names[i], "release");
            ++*cycles;
            if (now >= end) {
                *step = STOPPED;
                return;
            }
            *step = ACQUIRING;
        }
        start(i, step, r->lock.key, now);
    }
}

/* Runs until the round's time is up and every cycle under way has ended. */
static long loop_cycles(int connections, int64_t end_ms)
{
    enum step steps[MAX_CONNECTIONS];
    struct pollfd fds[MAX_CONNECTIONS];
    int owner[MAX_CONNECTIONS];
    long cycles = 0;
    int64_t now = advlock_pq_now_ms();
    for (int i = 0; i < connections; i++) {
        steps[i] = ACQUIRING;
        start(i, &steps[i], 0, now); /* an acquire takes the name, not a key */
    }
    for (;;) {
        int n = 0;
        int64_t wake = INT64_MAX;
        for (int i = 0; i < connections; i++) {
            if (steps[i] == STOPPED)
                continue;
            unsigned wants = advlock_pq_async_wants(&adapters[i]);
            int64_t at;
            if (advlock_pq_async_deadline(&adapters[i], &at) && at < wake)
                wake = at;
            fds[n].fd = advlock_pq_async_socket(&adapters[i]);
            fds[n].events = (short)((wants & ADVLOCK_PQ_READ ? POLLIN : 0)
                                    | (wants & ADVLOCK_PQ_WRITE ? POLLOUT : 0));
            fds[n].revents = 0;
            owner[n++] = i;
        }
        if (n == 0)
            return cycles;
        now = advlock_pq_now_ms();
        int timeout = wake == INT64_MAX ? -1 : wake > now ? (int)(wake - now) : 0;
        if (poll(fds, (nfds_t)n, timeout) < 0)
            bench_fail("poll failed");
        now = advlock_pq_now_ms();
        for (int k = 0; k < n; k++) {
            int i = owner[k];
            int64_t at;
            unsigned ready = (fds[k].revents & (POLLIN | POLLERR | POLLHUP) ? ADVLOCK_PQ_READ : 0)
                             | (fds[k].revents & POLLOUT ? ADVLOCK_PQ_WRITE : 0);
            int due = advlock_pq_async_deadline(&adapters[i], &at) && at <= now;
            if (ready == 0 && !due)
                continue;
            advlock_pq_async_process(&adapters[i], ready, now);
            follow(i, &steps[i], now, end_ms, &cycles);
        }
    }
}

/* ---- one thread per connection ------------------------------------------- */

typedef struct worker {
    int index;
    long cycles;
    pthread_barrier_t *go;
    volatile int *stop;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    advlock_pq_report acquired, released;
    advlock_pq *a = &blocking_adapters[w->index];
    const char *name = names[w->index];
    pthread_barrier_wait(w->go);
    while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
        if (advlock_pq_acquire(a, name, strlen(name), 10000, &acquired) != 0)
            bench_fail("thread %d: acquire refused", w->index);
        bench_pq_expect_outcome(&acquired, ADVLOCK_ACQUIRED, name, "thread acquire");
        if (advlock_pq_release_key(a, acquired.lock.key, &released) != 0)
            bench_fail("thread %d: release refused", w->index);
        bench_pq_expect_outcome(&released, ADVLOCK_RELEASED, name, "thread release");
        w->cycles++;
    }
    return NULL;
}

static void set_blocking(int connections, int blocking)
{
    for (int i = 0; i < connections; i++)
        if (PQsetnonblocking(conns[i], !blocking) != 0)
            bench_fail("PQsetnonblocking failed");
}

/* Starts the threads, lets them run, stops them; returns cycles done and
 * sets *started to when they were let go. */
static long thread_cycles(int connections, int64_t *started)
{
    pthread_t threads[MAX_CONNECTIONS];
    worker workers[MAX_CONNECTIONS];
    pthread_barrier_t go;
    volatile int stop = 0;
    pthread_barrier_init(&go, NULL, (unsigned)connections + 1);
    for (int i = 0; i < connections; i++) {
        workers[i] = (worker){.index = i, .go = &go, .stop = &stop};
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0)
            bench_fail("cannot start a thread");
    }
    pthread_barrier_wait(&go);
    *started = bench_now_ns();
    bench_sleep_until_ns(*started + (int64_t)(round_seconds * 1e9));
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    long cycles = 0;
    for (int i = 0; i < connections; i++) {
        pthread_join(threads[i], NULL);
        cycles += workers[i].cycles;
    }
    pthread_barrier_destroy(&go);
    return cycles;
}

/* ---- rounds ---------------------------------------------------------------- */

static double round_of_way(void *arg)
{
    way *w = arg;
    cpu_ticks ticks = machine_ticks();
    double cpu = bench_cpu_seconds();
    int64_t start_ns = bench_now_ns();
    long cycles;
    if (w->threaded) {
        set_blocking(w->connections, 1);
        cycles = thread_cycles(w->connections, &start_ns);
        set_blocking(w->connections, 0);
    } else {
        cycles = loop_cycles(w->connections, advlock_pq_now_ms() + (int64_t)(round_seconds * 1000));
    }
    double seconds = (double)(bench_now_ns() - start_ns) / 1e9;
    double cpu_used = bench_cpu_seconds() - cpu;
    cpu_ticks after = machine_ticks();
    if (cycles == 0)
        bench_fail("no cycle finished in a round");
    w->cpu_us_per_cycle[w->round] = cpu_used * 1e6 / (double)cycles;
    w->client_cores[w->round] = cpu_used / seconds;
    w->machine_busy[w->round] =
        after.total > ticks.total
            ? (double)(after.busy - ticks.busy) / (double)(after.total - ticks.total)
            : NAN;
    w->round++;
    return (double)cycles / seconds;
}

int main(int argc, char **argv)
{
    static const char *const options[] = {"--rounds", "--seconds", NULL};
    bench_check_options(argc, argv, options);
    int rounds = (int)bench_option(argc, argv, "--rounds", 5);
    round_seconds = bench_option(argc, argv, "--seconds", 0.5);
    if (rounds < 1 || round_seconds <= 0)
        bench_fail("--rounds and --seconds must be positive");

    for (int i = 0; i < MAX_CONNECTIONS; i++) {
        conns[i] = bench_pq_connect();
        snprintf(names[i], sizeof names[i], "bench-scale-%d", i);
        if (advlock_pq_async_init(&adapters[i], conns[i]) != 0
            || advlock_pq_init(&blocking_adapters[i], conns[i]) != 0)
            bench_fail("cannot bind the adapters");
    }

    way ways[2 * SIZES];
    bench_contestant c[2 * SIZES];
    for (int s = 0; s < SIZES; s++)
        for (int t = 0; t < 2; t++) {
            way *w = &ways[2 * s + t];
            *w = (way){.threaded = t, .connections = sizes[s]};
            c[2 * s + t] = (bench_contestant){
                .name = t ? "threads" : "loop", .run_round = round_of_way, .arg = w};
        }
    /* Warm up both ways on every connection (statements get prepared). */
    double saved = round_seconds;
    round_seconds = 0.05;
    round_of_way(&ways[2 * SIZES - 2]);
    round_of_way(&ways[2 * SIZES - 1]);
    ways[2 * SIZES - 2].round = ways[2 * SIZES - 1].round = 0;
    round_seconds = saved;

    bench_interleave(c, 2 * SIZES, rounds);

    for (int s = 0; s < SIZES; s++) {
        way *loop = &ways[2 * s], *threads = &ways[2 * s + 1];
        double ratio = bench_median_ratio(&c[2 * s], &c[2 * s + 1], rounds);
        char name[64], limit[96];
        int last = s == SIZES - 1;
        snprintf(name, sizeof name, "event_loop_c%d_cycles_per_s", sizes[s]);
        snprintf(limit, sizeof limit, "%d threads, blocking: %.0f/s", sizes[s],
                 bench_median_of(&c[2 * s + 1], rounds));
        bench_emit(&(bench_figure){name, bench_median_of(&c[2 * s], rounds), "cycles/s", limit,
                                   ratio, last ? "ratio >= 0.9" : NULL, last ? ratio >= 0.9 : -1});
        double loop_cpu = bench_median(loop->cpu_us_per_cycle, (size_t)rounds);
        double threads_cpu = bench_median(threads->cpu_us_per_cycle, (size_t)rounds);
        snprintf(name, sizeof name, "event_loop_c%d_client_cpu_us_per_cycle", sizes[s]);
        snprintf(limit, sizeof limit, "%d threads: %.2f us", sizes[s], threads_cpu);
        bench_emit(&(bench_figure){name, loop_cpu, "us", limit, loop_cpu / threads_cpu, NULL, -1});
        if (last) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            double busy = bench_median(loop->machine_busy, (size_t)rounds) * 100;
            double client = bench_median(loop->client_cores, (size_t)rounds);
            bench_emit(&(bench_figure){"event_loop_c64_machine_busy", busy, "% of all cores", NULL,
                                       NAN, NULL, -1});
            bench_note("event loop, C=%d: the machine's %ld cores were %.0f%% busy; the client "
                       "thread used %.2f of a core, the server (and anything else) the rest: "
                       "the server is the bottleneck",
                       sizes[s], cores, busy, client);
        }
    }
    for (int i = 0; i < MAX_CONNECTIONS; i++)
        PQfinish(conns[i]);
    return 0;
}
