/*
 * Lock-set campaign: runs many seeds of the lock-set world
 * (advlock_sim_lockset_run) against the fake database, each seed choosing
 * its own world: 1-4 sets of 1-16 callers sharing a connection, 0-4
 * ordinary clients, 1-3 lock names, exclusive (some fenced) and shared
 * acquires, timeouts, cancels, diagnoses; every odd seed terminates
 * sessions and fails statements; every fourth seed puts the connections
 * behind a proxy (the session claim, the guarded rows, one statement at
 * a time). Every violated invariant is reported with a command that
 * replays it.
 *
 *   lockset_campaign [--seeds N] [--start S]   run seeds S .. S+N-1
 *   lockset_campaign --seed S [--trace]        replay one seed (trace on stdout)
 *
 * Exit status: 0 all seeds held, 1 some seed failed, 2 usage error.
 */
#include "advlock_fake.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void choose_world(uint64_t seed, advlock_sim_lockset_config *cfg)
{
    advlock_prng p;
    advlock_prng_seed(&p, seed ^ UINT64_C(0x5E75E75E75E75E7));
    memset(cfg, 0, sizeof *cfg);
    int faults = seed % 2 == 1;
    cfg->seed = seed;
    cfg->sets = 1 + (int)advlock_prng_below(&p, 4);
    cfg->members = advlock_prng_chance(&p, 100000) ? 1 : 2 + (int)advlock_prng_below(&p, 15);
    cfg->loners = (int)advlock_prng_below(&p, 5);
    cfg->keys = 1 + (int)advlock_prng_below(&p, 3);
    cfg->cycles = 1 + (unsigned)advlock_prng_below(&p, 4);
    cfg->proxied = seed % 4 == 3;
    cfg->diagnose = advlock_prng_chance(&p, 300000);
    cfg->shared_ppm =
        advlock_prng_chance(&p, 400000) ? 0 : (uint32_t)advlock_prng_below(&p, 1000001);
    cfg->fence_ppm = advlock_prng_chance(&p, 300000) ? 300000 : 0;
    cfg->cancel_ppm = (uint32_t)advlock_prng_between(&p, 0, 150000);
    cfg->kill_ppm = faults ? 300000 : 0;
    cfg->error_ppm = faults ? 5000 : 0;
    cfg->latency_max_ms = advlock_prng_between(&p, 0, 20);
    cfg->think_max_ms = advlock_prng_between(&p, 0, 200);
    cfg->hold_max_ms = advlock_prng_between(&p, 0, 300);
    cfg->timeout_max_ms = advlock_prng_between(&p, 0, 1500);
}

static void print_line(void *user, const char *line)
{
    fprintf(user, "%s\n", line);
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--seeds N] [--start S]\n       %s --seed S [--trace]\n", argv0,
            argv0);
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t seeds = 1000, start = 1;
    int trace = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--trace") == 0)
            trace = 1;
        else if (v != NULL && strcmp(argv[i], "--seeds") == 0)
            seeds = strtoull(v, NULL, 10), i++;
        else if (v != NULL && strcmp(argv[i], "--start") == 0)
            start = strtoull(v, NULL, 10), i++;
        else if (v != NULL && strcmp(argv[i], "--seed") == 0)
            start = strtoull(v, NULL, 10), seeds = 1, i++;
        else
            return usage(argv[0]);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    advlock_sim_lockset_stats sum, st;
    memset(&sum, 0, sizeof sum);
    uint64_t failures = 0, callers = 0, proxied = 0;
    for (uint64_t seed = start; seed < start + seeds; seed++) {
        advlock_sim_lockset_config cfg;
        choose_world(seed, &cfg);
        if (trace) {
            cfg.trace = print_line;
            cfg.trace_user = stdout;
        }
        int rc = advlock_sim_lockset_run(&cfg, &st);
        if (rc != 0 && rc != ADVLOCK_SIM_VIOLATION) {
            fprintf(stderr, "lockset campaign: seed %" PRIu64 ": bad world (%d)\n", seed, rc);
            return 2;
        }
        if (rc == ADVLOCK_SIM_VIOLATION && failures++ < 8)
            printf("FAIL seed %" PRIu64 " (%d sets of %d, %d loners, %d keys%s): %s\n"
                   "  replay: %s --seed %" PRIu64 " --trace\n",
                   seed, cfg.sets, cfg.members, cfg.loners, cfg.keys,
                   cfg.proxied ? ", proxied" : "", st.violation, argv[0], seed);
        callers += (uint64_t)(cfg.sets * cfg.members + cfg.loners);
        proxied += (uint64_t)cfg.proxied;
        sum.events += st.events;
        sum.statements += st.statements;
        sum.local_busy += st.local_busy;
        sum.server_busy += st.server_busy;
        sum.acquired += st.acquired;
        sum.timed_out += st.timed_out;
        sum.cancelled += st.cancelled;
        sum.failed += st.failed;
        sum.released += st.released;
        sum.kills += st.kills;
        sum.lost += st.lost;
        if (st.max_in_flight > sum.max_in_flight)
            sum.max_in_flight = st.max_in_flight;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    FILE *out = trace ? stderr : stdout;
    fprintf(out,
            "lockset campaign: seeds %" PRIu64 "..%" PRIu64 " (%" PRIu64 " proxied), %" PRIu64
            " callers: %.2f s, %" PRIu64 " events, %" PRIu64 " statements (at most %d out on "
            "one connection), %" PRIu64 " failed\n",
            start, start + seeds - 1, proxied, callers, secs, sum.events, sum.statements,
            sum.max_in_flight, failures);
    fprintf(out,
            "lockset campaign: tries answered busy by the set %" PRIu64 ", by the server %" PRIu64
            "; %" PRIu64 " acquired, %" PRIu64 " released, %" PRIu64 " timed out, %" PRIu64
            " cancelled, %" PRIu64 " failed; %" PRIu64 " sessions terminated, %" PRIu64
            " held locks LOST\n",
            sum.local_busy, sum.server_busy, sum.acquired, sum.released, sum.timed_out,
            sum.cancelled, sum.failed, sum.kills, sum.lost);
    return failures > 0 ? 1 : 0;
}
