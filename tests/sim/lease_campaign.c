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
 *   lease_campaign [--seeds N] [--start S] --lock-delay [--off]
 *   lease_campaign --seed S [...] --trace                one seed's timeline
 *
 * --no-heartbeats runs the same worlds with connections that have no
 * lease, their startup options setting the server's keepalives alone:
 * there it finds overlaps. The campaign's canary (mk/fake.mk) is this program
 * linked with an engine built with -DADVLOCK_LEASE_CANARY, whose grants start
 * no lease: it must find overlaps with the lease on.
 * --close-at-expiry has holders close their connection when the lease
 * expires rather than once their work stopped, a driver's mistake.
 *
 * --lock-delay adds to each world 1 or 2 session ends on the server's
 * side (a terminate of the lock holder's session, one in four a crash and
 * restart down for up to 10 s), most of them within 3 s after a cut began,
 * when the holder cannot hear it, and runs every seed twice: with
 * lock-delay, where no two holders' work may overlap, and without, where
 * the same seeds must find overlaps (the ends bite: the campaign's own
 * canary). --off (with --seed and --trace) replays a seed's run without.
 * Exit status: 0 all seeds held, 1 some seed failed, 2 usage error.
 */
#include "advlock_fake.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RUN_MS = 120000, SHOWN_FAILURES = 5, END_AFTER_CUT_MS = 3000, RESTART_MAX_MS = 10000 };

static void choose_world(uint64_t seed, int heartbeats, int close_early, int ends,
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
    /* Drawn last, so that the worlds without them stay as they were. */
    if (!ends)
        return;
    cfg->nends = 1 + (int)advlock_prng_below(&p, 2);
    for (int i = 0; i < cfg->nends; i++) {
        advlock_sim_end *e = &cfg->ends[i];
        e->kind =
            advlock_prng_below(&p, 4) == 0 ? ADVLOCK_SIM_END_RESTART : ADVLOCK_SIM_END_TERMINATE;
        e->length_ms =
            e->kind == ADVLOCK_SIM_END_RESTART ? advlock_prng_between(&p, 0, RESTART_MAX_MS) : 0;
        const advlock_sim_cut *k = &cfg->cuts[advlock_prng_below(&p, (uint64_t)cfg->ncuts)];
        e->at_ms = advlock_prng_below(&p, 5) < 3
                       ? k->at_ms + advlock_prng_between(&p, 0, END_AFTER_CUT_MS)
                       : advlock_prng_between(&p, 2000, RUN_MS);
    }
}

/* One run's figures summed over the seeds. */
typedef struct sums {
    advlock_sim_lease_stats st;
    uint64_t failed, overlapping;
} sums;

static void sums_init(sums *s)
{
    memset(s, 0, sizeof *s);
    s->st.min_stop_margin_ms = s->st.min_lease_left_ms = s->st.min_handover_ms = INT64_MAX;
}

static void add(sums *s, const advlock_sim_lease_stats *st)
{
    advlock_sim_lease_stats *sum = &s->st;
    s->overlapping += st->overlaps > 0;
    sum->holds += st->holds;
    sum->heartbeats += st->heartbeats;
    sum->expiries += st->expiries;
    sum->releases += st->releases;
    sum->partitions += st->partitions;
    sum->pauses += st->pauses;
    sum->blips += st->blips;
    sum->spurious_stops += st->spurious_stops;
    sum->overlaps += st->overlaps;
    sum->paused_overlaps += st->paused_overlaps;
    sum->terminates += st->terminates;
    sum->restarts += st->restarts;
    sum->delay_waits += st->delay_waits;
    if (st->max_overlap_ms > sum->max_overlap_ms)
        sum->max_overlap_ms = st->max_overlap_ms;
    if (st->max_release_ms > sum->max_release_ms)
        sum->max_release_ms = st->max_release_ms;
    if (st->min_lease_left_ms < sum->min_lease_left_ms)
        sum->min_lease_left_ms = st->min_lease_left_ms;
    if (st->min_stop_margin_ms < sum->min_stop_margin_ms)
        sum->min_stop_margin_ms = st->min_stop_margin_ms;
    if (st->min_handover_ms < sum->min_handover_ms)
        sum->min_handover_ms = st->min_handover_ms;
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

/* What the command line asked for. */
typedef struct run_opts {
    int heartbeats, close_early, ends, trace;
    const char *argv0;
} run_opts;

/* Runs seed's world (lock-delay on or off) into s. Returns 1 if the seed
 * failed, 0 if not, -1 if the world was refused. Without lock-delay the
 * ends are to make holders overlap: there only what else goes wrong fails
 * (a stop nothing explains, a violation that is no overlap). */
static int run_seed(uint64_t seed, const run_opts *o, int lock_delay, sums *s)
{
    advlock_sim_lease_config cfg;
    advlock_sim_lease_stats st;
    choose_world(seed, o->heartbeats, o->close_early, o->ends, &cfg);
    cfg.lock_delay = lock_delay;
    if (o->trace) {
        cfg.trace = print_line;
        printf("seed %" PRIu64 ": %d clients, L %" PRId64 " ms, K %" PRId64 " ms%s\n", seed,
               cfg.clients, cfg.lease_ms, cfg.stop_ms,
               !o->ends     ? ""
               : lock_delay ? ", lock-delay"
                            : ", no lock-delay");
    }
    int rc = advlock_sim_lease_run(&cfg, &st);
    if (rc < 0) {
        fprintf(stderr, "seed %" PRIu64 ": the world was refused (%d)\n", seed, rc);
        return -1;
    }
    add(s, &st);
    int failed = rc == ADVLOCK_SIM_VIOLATION;
    if (o->ends && !lock_delay)
        failed = st.spurious_stops > 0 || (failed && st.overlaps == 0);
    if (failed && s->failed++ < SHOWN_FAILURES)
        printf("FAIL %s (replay: %s --seed %" PRIu64 "%s%s%s --trace)\n", st.violation, o->argv0,
               seed, o->heartbeats ? "" : " --no-heartbeats",
               o->close_early ? " --close-at-expiry" : "",
               !o->ends     ? ""
               : lock_delay ? " --lock-delay"
                            : " --lock-delay --off");
    return failed;
}

static void print_sums(const char *what, uint64_t seeds, const sums *s)
{
    const advlock_sim_lease_stats *sum = &s->st;
    printf("lease campaign (%s): %" PRIu64 " seeds, %" PRIu64 " partitions (%" PRIu64
           " blips within the tolerance cut a holder), %" PRIu64 " pauses; %" PRIu64
           " holds, %" PRIu64 " heartbeats, %" PRIu64 " expiries, %" PRIu64
           " sessions ended for silence (at most %" PRId64
           " ms after the last segment, at least %" PRId64 " ms before the lease's end)\n",
           what, seeds, sum->partitions, sum->blips, sum->pauses, sum->holds, sum->heartbeats,
           sum->expiries, sum->releases, sum->max_release_ms,
           sum->min_lease_left_ms == INT64_MAX ? 0 : sum->min_lease_left_ms);
    printf("overlaps: %" PRIu64 " in %" PRIu64 " seeds (longest %" PRId64 " ms); %" PRIu64
           " more with a paused holder (not counted: fencing's case); spurious stops: %" PRIu64
           "; server release minus the stop of the work it guarded: min ",
           sum->overlaps, s->overlapping, sum->max_overlap_ms, sum->paused_overlaps,
           sum->spurious_stops);
    if (sum->min_stop_margin_ms == INT64_MAX)
        printf("none\n");
    else
        printf("%" PRId64 " ms\n", sum->min_stop_margin_ms);
}

/* The server's ends and what lock-delay made of them. */
static void print_ends(const sums *s)
{
    const advlock_sim_lease_stats *sum = &s->st;
    printf("server ends: %" PRIu64 " terminates of the holder's session, %" PRIu64
           " restarts; %" PRIu64
           " acquires waited out a mark; the next work's start minus the stop of a work whose "
           "session the server ended: min ",
           sum->terminates, sum->restarts, sum->delay_waits);
    if (sum->min_handover_ms == INT64_MAX)
        printf("none\n");
    else
        printf("%" PRId64 " ms\n", sum->min_handover_ms);
}

int main(int argc, char **argv)
{
    uint64_t seeds = 10000, start = 1, one = 0;
    int single = 0, off = 0;
    run_opts o = {.heartbeats = 1, .argv0 = argv[0]};
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
            o.heartbeats = 0;
        else if (strcmp(a, "--close-at-expiry") == 0)
            o.close_early = 1;
        else if (strcmp(a, "--lock-delay") == 0)
            o.ends = 1;
        else if (strcmp(a, "--off") == 0)
            off = 1;
        else if (strcmp(a, "--trace") == 0)
            o.trace = 1;
        else {
            o.ends = -1;
            break;
        }
    }
    /* lock-delay needs the lease, and a world with no bad driver */
    if (o.ends < 0 || (o.ends && (!o.heartbeats || o.close_early)) || (off && !o.ends)) {
        fprintf(stderr,
                "usage: %s [--seeds N] [--start S] [--seed S [--trace]] "
                "[--no-heartbeats | --close-at-expiry | --lock-delay [--off]]\n",
                argv[0]);
        return 2;
    }
    if (single) {
        start = one;
        seeds = 1;
    }
    sums on, without;
    sums_init(&on);
    sums_init(&without);
    for (uint64_t seed = start; seed < start + seeds; seed++) {
        /* a replay with --off runs the seed without lock-delay alone */
        if ((!off && run_seed(seed, &o, o.ends, &on) < 0)
            || (o.ends && (off || !single) && run_seed(seed, &o, 0, &without) < 0))
            return 2;
    }
    if (!o.ends) {
        char what[64];
        snprintf(what, sizeof what, "heartbeats %s%s", o.heartbeats ? "on" : "off",
                 o.close_early ? ", closing at expiry" : "");
        print_sums(what, seeds, &on);
        if (on.failed > 0)
            printf("%" PRIu64 " of %" PRIu64 " seeds failed\n", on.failed, seeds);
        return on.failed > 0 ? 1 : 0;
    }
    int bit = without.st.overlaps > 0;
    if (!off) {
        print_sums("heartbeats on, server ends, lock-delay on", seeds, &on);
        print_ends(&on);
    }
    if (off || !single) {
        print_sums("heartbeats on, server ends, lock-delay off", seeds, &without);
        print_ends(&without);
    }
    if (on.failed + without.failed > 0)
        printf("%" PRIu64 " of %" PRIu64 " seeds failed with lock-delay, %" PRIu64 " without\n",
               on.failed, seeds, without.failed);
    if (!single && !bit)
        printf("FAIL the same seeds without lock-delay found no overlap: the server's ends do "
               "not bite, and the campaign proves nothing\n");
    /* the tally: both runs' overlaps */
    if (!single)
        printf("lock-delay: %" PRIu64 " seeds, %" PRIu64 " terminates, %" PRIu64
               " restarts: with it %" PRIu64 " overlaps (%" PRIu64
               " marks waited out), without it %" PRIu64 " in %" PRIu64 " seeds\n",
               seeds, on.st.terminates, on.st.restarts, on.st.overlaps, on.st.delay_waits,
               without.st.overlaps, without.overlapping);
    return on.failed + without.failed > 0 || (!single && !bit) ? 1 : 0;
}
