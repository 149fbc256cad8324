/*
 * Simulation campaign: runs many seeds of the random cycler against the
 * fake database, each seed choosing its own world (1-50 clients, 1-4 keys,
 * timeouts, holds, latency; faults on for odd seeds; how clients lock: the
 * reference, clipped, full jitter or server-side waiting, for all or per
 * client, some shared, transaction-scoped, diagnosing), and reports every
 * violated invariant with a command that replays it. Every third seed puts
 * its clients in the world model `advlock simulate` uses by default (the
 * built-in profile, src/cli/profile_default.c, scaled to the seed's
 * clients), so the invariants and the cross-compiler trace check
 * (tests/sim/same-trace.sh) cover the modelled path as well as the plain one.
 * Seeds 2 and 4 modulo 5 give the machines session values (a direct
 * connection's, and one behind a proxy, which sends the guarded rows), so
 * the policy model judges the session check too.
 *
 *   campaign [--seeds N] [--start S] [--jobs J]   run seeds S .. S+N-1
 *   campaign --seed S [--trace]                   replay one seed (trace on stdout)
 *   campaign [--seeds N] [--start S] --hashes     each seed's whole trace as one
 *                                                 hash, "SEED HASH" lines in seed order
 *                                                 (tests/sim/same-trace.sh compares builds)
 *
 * Exit status: 0 all seeds held, 1 some seed failed, 2 usage error.
 */
#include "advlock_fake.h"

#include "../../src/cli/profile.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const names[] = {"campaign-0", "campaign-1", "campaign-2", "campaign-3"};

enum { REFERENCE, CLIPPED, JITTER, SERVER_WAIT, POLICIES };
static const char *const policy_names[POLICIES] = {"reference", "clipped", "jitter", "server wait"};

typedef struct world {
    advlock_sim_config config;
    advlock_sim_cycler cycler;
    int clients;
    int policy; /* for every client, or -1: each its own */
    int shared; /* some clients take shared locks */
    int transaction, diagnose;
    advlock_options options[50];
    int modelled; /* model replaces config.latency */
    advlock_sim_model model;
} world;

static advlock_options options_for(int policy)
{
    advlock_options o;
    advlock_options_init(&o);
    o.clip_to_deadline = policy == CLIPPED;
    o.backoff = policy == JITTER ? ADVLOCK_BACKOFF_FULL_JITTER : ADVLOCK_BACKOFF_REFERENCE;
    o.wait = policy == SERVER_WAIT ? ADVLOCK_WAIT_SERVER : ADVLOCK_WAIT_POLL;
    return o;
}

/* Most worlds use one policy (the reference in 40 %, so that a broken
 * reference schedule shows up in a few seeds); a quarter mix them. */
static void choose_options(advlock_prng *p, world *w)
{
    static const unsigned shares[POLICIES] = {40, 15, 20, 25};
    unsigned r = (unsigned)advlock_prng_below(p, 100), edge = 0;
    w->policy = POLICIES - 1;
    for (int i = 0; i < POLICIES; i++) {
        edge += shares[i];
        if (r < edge) {
            w->policy = i;
            break;
        }
    }
    if (advlock_prng_chance(p, 250000))
        w->policy = -1;
    uint32_t shared_ppm =
        advlock_prng_chance(p, 330000) ? (uint32_t)advlock_prng_below(p, 1000001) : 0;
    w->transaction = advlock_prng_chance(p, 200000);
    w->diagnose = advlock_prng_chance(p, 300000);
    w->shared = 0;
    for (int c = 0; c < w->clients; c++) {
        advlock_options *o = &w->options[c];
        *o = options_for(w->policy >= 0 ? w->policy : (int)advlock_prng_below(p, POLICIES));
        o->mode = advlock_prng_chance(p, shared_ppm) ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE;
        o->scope = w->transaction ? ADVLOCK_TRANSACTION : ADVLOCK_SESSION;
        o->diagnose = w->diagnose;
        w->shared += o->mode == ADVLOCK_SHARED;
    }
}

/* Everything about a seed's run follows from the seed (and the built-in
 * profile, the same in every build). */
static void choose_world(uint64_t seed, const cli_profile *profile, world *w)
{
    advlock_prng p;
    advlock_prng_seed(&p, seed ^ UINT64_C(0x5EED5EED5EED5EED));
    advlock_sim_config_default(&w->config);
    w->config.seed = seed;
    w->clients = 1 + (int)advlock_prng_below(&p, 50);
    int faults = seed % 2 == 1;

    advlock_sim_cycler *cy = &w->cycler;
    memset(cy, 0, sizeof *cy);
    cy->lock_names = names;
    cy->lock_count = 1 + advlock_prng_below(&p, 4);
    cy->cycles = 1 + (unsigned)advlock_prng_below(&p, 3);
    cy->think_max_ms = advlock_prng_between(&p, 0, 300);
    cy->hold_max_ms = advlock_prng_between(&p, 0, 500);
    cy->timeout_min_ms = advlock_prng_chance(&p, 200000) ? 0 : advlock_prng_between(&p, 0, 1000);
    cy->timeout_max_ms = cy->timeout_min_ms + advlock_prng_between(&p, 0, 3000);
    cy->cancel_ppm = 50000;
    cy->cancel_max_ms = 3000;

    advlock_fake_latency *lat = &w->config.latency;
    lat->min_ms = faults ? advlock_prng_between(&p, 0, 2) : 0;
    lat->max_ms = faults ? advlock_prng_between(&p, 2, 40) : advlock_prng_between(&p, 0, 5);
    lat->tail_ppm = faults ? 10000 : 0;
    lat->tail_max_ms = faults ? 400 : 0;

    if (faults) {
        advlock_fake_faults *f = &w->config.faults;
        f->null_ppm = 3000;
        f->error_ppm = 5000;
        f->drop_before_ppm = 3000;
        f->drop_after_ppm = 3000;
        f->drop_detect_max_ms = 2000;
        f->kill_ppm = 30000;
        f->kill_within_ms = 1000;
        f->stall_ppm = 20000;
        f->stall_max_ms = 2000;
        f->jump_ppm = 10000;
        f->jump_max_ms = 3600 * 1000;
    }
    choose_options(&p, w);

    /* Decided by the seed alone, drawing nothing: the other seeds keep the
     * worlds (and traces) they had before the model was added here. Every
     * third seed meets both parities, so modelled worlds run with faults
     * and without. */
    w->modelled = seed % 3 == 0;
    if (w->modelled)
        w->model = cli_profile_model_for(profile, w->clients);
    /* The same way, the session worlds. */
    w->config.sessions = seed % 5 == 2   ? ADVLOCK_SIM_SESSIONS_DIRECT
                         : seed % 5 == 4 ? ADVLOCK_SIM_SESSIONS_PROXIED
                                         : ADVLOCK_SIM_SESSIONS_NONE;
}

/* "faults on, jitter, 3 shared, transaction, diagnose, modelled" */
static void describe(const world *w, char *out, size_t size)
{
    int n = snprintf(out, size, "faults %s, %s", w->config.seed % 2 ? "on" : "off",
                     w->policy >= 0 ? policy_names[w->policy] : "mixed policies");
    if (w->shared > 0)
        n += snprintf(out + n, size - (size_t)n, ", %d shared", w->shared);
    if (w->transaction)
        n += snprintf(out + n, size - (size_t)n, ", transaction");
    if (w->diagnose)
        n += snprintf(out + n, size - (size_t)n, ", diagnose");
    if (w->config.sessions != ADVLOCK_SIM_SESSIONS_NONE)
        n += snprintf(out + n, size - (size_t)n, ", %s sessions",
                      w->config.sessions == ADVLOCK_SIM_SESSIONS_DIRECT ? "direct" : "proxied");
    if (w->modelled)
        snprintf(out + n, size - (size_t)n, ", modelled");
}

static void write_line(void *user, const char *line, size_t len)
{
    fwrite(line, 1, len, user);
}

/* FNV-1a, 64 bits, over every byte of the trace: a cheap fingerprint that
 * covers whatever fields the trace gains, so builds are compared in full
 * without writing megabytes of JSON. */
static void hash_line(void *user, const char *line, size_t len)
{
    uint64_t *h = user;
    for (size_t i = 0; i < len; i++)
        *h = (*h ^ (unsigned char)line[i]) * UINT64_C(0x100000001b3);
}

typedef struct job {
    uint64_t first, count, stride;
    const cli_profile *profile;
    int trace;
    uint64_t start, *hashes; /* --hashes: seed's hash at hashes[seed - start] */
    uint64_t events, failures, faulty, faults, modelled;
    uint64_t outcomes[ADVLOCK_OUTCOME_COUNT];
    uint64_t failed_seed[8];
    char failed_why[8][ADVLOCK_SIM_VIOLATION_MAX];
    char failed_world[8][96];
    int failed_clients[8];
    uint64_t policies[POLICIES + 1], waits, cancels; /* [POLICIES]: mixed */
    int error;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    advlock_sim *sim = malloc(sizeof *sim);
    if (sim == NULL) {
        j->error = 1;
        return NULL;
    }
    for (uint64_t seed = j->first; seed < j->first + j->count; seed += j->stride) {
        world w;
        choose_world(seed, j->profile, &w);
        uint64_t hash = UINT64_C(0xcbf29ce484222325);
        if (j->trace) {
            w.config.trace = write_line;
            w.config.trace_user = stdout;
        } else if (j->hashes != NULL) {
            w.config.trace = hash_line;
            w.config.trace_user = &hash;
        }
        if (advlock_sim_init(sim, &w.config) != 0) {
            j->error = 1;
            break;
        }
        for (int c = 0; c < w.clients; c++)
            if (advlock_sim_add_cycler(sim, &w.cycler) < 0
                || advlock_sim_set_options(sim, c, &w.options[c]) != 0)
                j->error = 1;
        if (w.modelled && advlock_sim_set_model(sim, &w.model) != 0)
            j->error = 1;
        j->modelled += (uint64_t)w.modelled;
        j->policies[w.policy >= 0 ? w.policy : POLICIES]++;
        int rc = advlock_sim_run(sim);
        if (j->hashes != NULL)
            j->hashes[seed - j->start] = hash;
        advlock_sim_stats st = advlock_sim_get_stats(sim);
        j->events += st.events;
        j->faults += st.faults;
        j->waits += st.waits;
        j->cancels += st.cancels;
        for (int o = 0; o < ADVLOCK_OUTCOME_COUNT; o++)
            j->outcomes[o] += st.outcomes[o];
        j->faulty += seed % 2;
        if (rc == ADVLOCK_SIM_VIOLATION) {
            if (j->failures < 8) {
                j->failed_seed[j->failures] = seed;
                j->failed_clients[j->failures] = w.clients;
                describe(&w, j->failed_world[j->failures], sizeof j->failed_world[0]);
                snprintf(j->failed_why[j->failures], ADVLOCK_SIM_VIOLATION_MAX, "%s",
                         advlock_sim_violation(sim));
            }
            j->failures++;
        } else if (rc != 0) {
            j->error = 1;
        }
    }
    free(sim);
    return NULL;
}

static int usage(const char *argv0)
{
    fprintf(
        stderr,
        "usage: %s [--seeds N] [--start S] [--jobs J] [--hashes]\n       %s --seed S [--trace]\n",
        argv0, argv0);
    return 2;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
    uint64_t seeds = 10000, start = 1;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    int trace = 0, hashes = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--trace") == 0) {
            trace = 1;
        } else if (strcmp(argv[i], "--hashes") == 0) {
            hashes = 1;
        } else if (v != NULL && strcmp(argv[i], "--seeds") == 0) {
            seeds = strtoull(v, NULL, 10), i++;
        } else if (v != NULL && strcmp(argv[i], "--start") == 0) {
            start = strtoull(v, NULL, 10), i++;
        } else if (v != NULL && strcmp(argv[i], "--seed") == 0) {
            start = strtoull(v, NULL, 10), seeds = 1, i++;
        } else if (v != NULL && strcmp(argv[i], "--jobs") == 0) {
            jobs = strtol(v, NULL, 10), i++;
        } else {
            return usage(argv[0]);
        }
    }
    if (jobs < 1 || trace)
        jobs = 1;
    if (jobs > 64)
        jobs = 64;
    if ((uint64_t)jobs > seeds)
        jobs = seeds > 0 ? (long)seeds : 1;

    /* The built-in profile, parsed once: the jobs only read it. */
    cli_profile profile;
    char why[200];
    if (cli_profile_parse_text(cli_profile_default_text, "built-in profile", &profile, why,
                               sizeof why)
        != 0) {
        fprintf(stderr, "campaign: %s\n", why);
        return 2;
    }
    job *js = calloc((size_t)jobs, sizeof *js);
    pthread_t threads[64];
    uint64_t *hash_of = hashes && !trace ? calloc(seeds > 0 ? seeds : 1, sizeof *hash_of) : NULL;
    if (js == NULL || (hashes && !trace && hash_of == NULL)) {
        free(js);
        free(hash_of);
        return 2;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long j = 0; j < jobs; j++) {
        js[j].first = start + (uint64_t)j;
        js[j].count = seeds > (uint64_t)j ? seeds - (uint64_t)j : 0;
        js[j].stride = (uint64_t)jobs;
        js[j].profile = &profile;
        js[j].trace = trace;
        js[j].start = start;
        js[j].hashes = hash_of;
        if (pthread_create(&threads[j], NULL, run_job, &js[j]) != 0)
            return 2;
    }
    uint64_t events = 0, failures = 0, faulty = 0, faults = 0, modelled = 0,
             outcomes[ADVLOCK_OUTCOME_COUNT] = {0};
    uint64_t policies[POLICIES + 1] = {0}, waits = 0, cancels = 0;
    int error = 0;
    for (long j = 0; j < jobs; j++) {
        pthread_join(threads[j], NULL);
        events += js[j].events;
        failures += js[j].failures;
        faulty += js[j].faulty;
        modelled += js[j].modelled;
        faults += js[j].faults;
        for (int o = 0; o < ADVLOCK_OUTCOME_COUNT; o++)
            outcomes[o] += js[j].outcomes[o];
        for (int i = 0; i <= POLICIES; i++)
            policies[i] += js[j].policies[i];
        waits += js[j].waits;
        cancels += js[j].cancels;
        error |= js[j].error;
    }
    double secs = seconds_since(&t0);
    if (hash_of != NULL)
        for (uint64_t i = 0; i < seeds; i++)
            printf("%" PRIu64 " %016" PRIx64 "\n", start + i, hash_of[i]);
    FILE *out = trace || hash_of != NULL ? stderr : stdout;
    for (long j = 0; j < jobs; j++) {
        for (uint64_t f = 0; f < js[j].failures && f < 8; f++) {
            uint64_t s = js[j].failed_seed[f];
            fprintf(out, "FAIL seed %" PRIu64 " (%d clients, %s): %s\n", s, js[j].failed_clients[f],
                    js[j].failed_world[f], js[j].failed_why[f]);
            fprintf(out,
                    "  replay: make sim SEEDS=1 START=%" PRIu64 "   trace: %s --seed %" PRIu64
                    " --trace\n",
                    s, argv[0], s);
        }
    }
    fprintf(out,
            "sim campaign: seeds %" PRIu64 "..%" PRIu64 " (%" PRIu64 " seeds, %" PRIu64
            " with faults, %" PRIu64
            " modelled; 1-50 clients), %ld jobs: %.2f s, %.0f seeds/s, %" PRIu64 " events, %" PRIu64
            " failed\n",
            start, start + seeds - 1, seeds, faulty, modelled, jobs, secs,
            secs > 0 ? (double)seeds / secs : 0.0, events, failures);
    fprintf(out,
            "sim campaign: outcomes: %" PRIu64 " acquired, %" PRIu64 " released, %" PRIu64
            " not held, %" PRIu64 " timed out, %" PRIu64 " cancelled, %" PRIu64
            " ended in an error, %" PRIu64 " ended with their transaction; %" PRIu64
            " faults injected\n",
            outcomes[ADVLOCK_ACQUIRED], outcomes[ADVLOCK_RELEASED], outcomes[ADVLOCK_NOT_HELD],
            outcomes[ADVLOCK_TIMED_OUT], outcomes[ADVLOCK_CANCELLED], outcomes[ADVLOCK_FAILED],
            outcomes[ADVLOCK_ENDS_WITH_TRANSACTION], faults);
    fprintf(out,
            "sim campaign: worlds: %" PRIu64 " reference, %" PRIu64 " clipped, %" PRIu64
            " jitter, %" PRIu64 " server wait, %" PRIu64 " mixed; %" PRIu64
            " server-side waits, %" PRIu64 " cancel requests\n",
            policies[REFERENCE], policies[CLIPPED], policies[JITTER], policies[SERVER_WAIT],
            policies[POLICIES], waits, cancels);
    free(js);
    free(hash_of);
    if (error) {
        fprintf(stderr, "campaign: a simulation could not be set up\n");
        return 2;
    }
    return failures > 0 ? 1 : 0;
}
