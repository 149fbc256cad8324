/*
 * The lease campaign: many seeds of the lease world (advlock_sim_lease_run,
 * the connection engine with a lease as each client's connection), each
 * choosing its own plan (K 0-10 s, L from K + 6 s to K + 36 s), 2 or 3
 * clients, and 1 to 3 silent partitions of whoever works at their start:
 * blips no longer than the plan tolerates, cuts between that and U, and
 * cuts past U (the server ends the session); one seed in six also pauses
 * a holder. It fails on any overlap of two holders' work that no pause
 * explains, any stop no cut explains, and any lock the server freed later
 * than L after its client fell silent; it prints the figures.
 *
 *   lease_campaign [--seeds N] [--start S] [--no-heartbeats | --close-at-expiry]
 *   lease_campaign --seed S [...] --trace                one seed's timeline
 *
 * --no-heartbeats runs the same worlds with connections that have no
 * lease, their startup options setting the server's keepalives alone:
 * there it finds overlaps. The campaign's canary (mk/fake.mk) is this program
 * linked with an engine built with -DADVLOCK_LEASE_CANARY, whose grants start
 * no lease: it must find overlaps with the lease on.
 * --close-at-expiry has holders close their connection when the lease
 * expires rather than once their work stopped, a driver's mistake.
 * Exit status: 0 all seeds held, 1 some seed failed, 2 usage error.
 */
#include "advlock_fake.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RUN_MS = 120000, SHOWN_FAILURES = 5 };

static void choose_world(uint64_t seed, int heartbeats, int close_early,
                         advlock_sim_lease_config *cfg)
{
    advlock_prng p;
    advlock_prng_seed(&p, seed ^ UINT64_C(0x1EA5ECA4A1));
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = seed;
    cfg->heartbeats = heartbeats;
    cfg->close_at_expiry = close_early;
    cfg->clients = 2 + (int)advlock_prng_below(&p, 2);
    cfg->stop_ms = advlock_prng_between(&p, 0, 10000);
    cfg->lease_ms = ((cfg->stop_ms + 999) / 1000 + 6 + advlock_prng_between(&p, 0, 30)) * 1000;
    cfg->run_ms = RUN_MS;
    cfg->hold_min_ms = 1000;
    cfg->hold_max_ms = advlock_prng_between(&p, 5000, 60000);
    cfg->latency_max_ms = advlock_prng_between(&p, 0, 5);

    advlock_lease_plan plan;
    advlock_lease_plan_init(&plan, cfg->lease_ms, cfg->stop_ms);
    int64_t blip = advlock_sim_lease_tolerated_blip_ms(&plan), u = plan.user_timeout_ms;
    cfg->ncuts = 1 + (int)advlock_prng_below(&p, 3);
    for (int i = 0; i < cfg->ncuts; i++) {
        advlock_sim_cut *k = &cfg->cuts[i];
        k->kind = ADVLOCK_SIM_CUT_PARTITION;
        k->client = -1;
        k->at_ms = advlock_prng_between(&p, 2000, RUN_MS);
        unsigned r = (unsigned)advlock_prng_below(&p, 100);
        k->length_ms = r < 40   ? advlock_prng_between(&p, 0, blip)
                       : r < 70 ? advlock_prng_between(&p, blip + 1, u)
                                : advlock_prng_between(&p, u + 1, 2 * cfg->lease_ms);
    }
    if (advlock_prng_below(&p, 6) == 0 && cfg->ncuts < ADVLOCK_SIM_LEASE_MAX_CUTS) {
        advlock_sim_cut *k = &cfg->cuts[cfg->ncuts++];
        k->kind = ADVLOCK_SIM_CUT_PAUSE;
        k->client = -1;
        k->at_ms = advlock_prng_between(&p, 2000, RUN_MS);
        k->length_ms = advlock_prng_between(&p, 0, 2 * cfg->lease_ms);
    }
}

static void print_line(void *user, const char *line)
{
    (void)user;
    puts(line);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (s == NULL || *s == '\0' || *s == '-')
        return 0;
    *out = strtoull(s, &end, 10);
    return *end == '\0';
}

int main(int argc, char **argv)
{
    uint64_t seeds = 10000, start = 1, one = 0;
    int heartbeats = 1, close_early = 0, trace = 0, single = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *number = strcmp(a, "--seeds") == 0   ? &seeds
                           : strcmp(a, "--start") == 0 ? &start
                           : strcmp(a, "--seed") == 0  ? &one
                                                       : NULL;
        if (number != NULL && parse_u64(v, number)) {
            single |= number == &one;
            i++;
        } else if (strcmp(a, "--no-heartbeats") == 0)
            heartbeats = 0;
        else if (strcmp(a, "--close-at-expiry") == 0)
            close_early = 1;
        else if (strcmp(a, "--trace") == 0)
            trace = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--seeds N] [--start S] [--seed S [--trace]] "
                    "[--no-heartbeats | --close-at-expiry]\n",
                    argv[0]);
            return 2;
        }
    }
    if (single) {
        start = one;
        seeds = 1;
    }
    advlock_sim_lease_stats sum, st;
    memset(&sum, 0, sizeof sum);
    sum.min_stop_margin_ms = sum.min_lease_left_ms = INT64_MAX;
    uint64_t failed = 0, overlapping = 0;
    for (uint64_t seed = start; seed < start + seeds; seed++) {
        advlock_sim_lease_config cfg;
        choose_world(seed, heartbeats, close_early, &cfg);
        if (trace) {
            cfg.trace = print_line;
            printf("seed %" PRIu64 ": %d clients, L %" PRId64 " ms, K %" PRId64 " ms\n", seed,
                   cfg.clients, cfg.lease_ms, cfg.stop_ms);
        }
        int rc = advlock_sim_lease_run(&cfg, &st);
        if (rc < 0) {
            fprintf(stderr, "seed %" PRIu64 ": the world was refused (%d)\n", seed, rc);
            return 2;
        }
        if (rc == ADVLOCK_SIM_VIOLATION && failed++ < SHOWN_FAILURES)
            printf("FAIL %s (replay: %s --seed %" PRIu64 "%s%s --trace)\n", st.violation, argv[0],
                   seed, heartbeats ? "" : " --no-heartbeats",
                   close_early ? " --close-at-expiry" : "");
        overlapping += st.overlaps > 0;
        sum.holds += st.holds;
        sum.heartbeats += st.heartbeats;
        sum.expiries += st.expiries;
        sum.releases += st.releases;
        sum.partitions += st.partitions;
        sum.pauses += st.pauses;
        sum.blips += st.blips;
        sum.spurious_stops += st.spurious_stops;
        sum.overlaps += st.overlaps;
        sum.paused_overlaps += st.paused_overlaps;
        if (st.max_overlap_ms > sum.max_overlap_ms)
            sum.max_overlap_ms = st.max_overlap_ms;
        if (st.max_release_ms > sum.max_release_ms)
            sum.max_release_ms = st.max_release_ms;
        if (st.min_lease_left_ms < sum.min_lease_left_ms)
            sum.min_lease_left_ms = st.min_lease_left_ms;
        if (st.min_stop_margin_ms < sum.min_stop_margin_ms)
            sum.min_stop_margin_ms = st.min_stop_margin_ms;
    }
    printf("lease campaign (heartbeats %s%s): %" PRIu64 " seeds, %" PRIu64 " partitions (%" PRIu64
           " blips within the tolerance cut a holder), %" PRIu64 " pauses; %" PRIu64
           " holds, %" PRIu64 " heartbeats, %" PRIu64 " expiries, %" PRIu64
           " sessions ended for silence (at most %" PRId64
           " ms after the last segment, at least %" PRId64 " ms before the lease's end)\n",
           heartbeats ? "on" : "off", close_early ? ", closing at expiry" : "", seeds,
           sum.partitions, sum.blips, sum.pauses, sum.holds, sum.heartbeats, sum.expiries,
           sum.releases, sum.max_release_ms,
           sum.min_lease_left_ms == INT64_MAX ? 0 : sum.min_lease_left_ms);
    printf("overlaps: %" PRIu64 " in %" PRIu64 " seeds (longest %" PRId64 " ms); %" PRIu64
           " more with a paused holder (not counted: fencing's case); spurious stops: %" PRIu64
           "; server release minus the stop of the work it guarded: min ",
           sum.overlaps, overlapping, sum.max_overlap_ms, sum.paused_overlaps, sum.spurious_stops);
    if (sum.min_stop_margin_ms == INT64_MAX)
        printf("none\n");
    else
        printf("%" PRId64 " ms\n", sum.min_stop_margin_ms);
    if (failed > 0)
        printf("%" PRIu64 " of %" PRIu64 " seeds failed\n", failed, seeds);
    return failed > 0 ? 1 : 0;
}
