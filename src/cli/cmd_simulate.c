/*
 * advlock simulate: clients racing for locks on the fake database, in
 * virtual time, with no server. Prints who tried, slept, waited, acquired
 * and timed out, then a summary. The timeline is read from the simulation's
 * own JSON-lines trace, so what is printed is exactly what --trace records,
 * and what --svg draws (timeline.c).
 * --jitter, --clip, --wait and --diagnose give every client those options.
 * The clients live in a measured world (a profile: when their processes
 * start, how long statements take, the server's queue; by default the one
 * measured on the project's machine, profile_default.c), or with --ideal in
 * the idealised one: all start at once, every statement 1-3 ms.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_fake.h"
#include "cli.h"
#include "option_table.h"
#include "profile.h"
#include "timeline.h"

enum { MAX_WAITS = 4096 };

typedef struct sim_view {
    int quiet;
    FILE *trace_file;
    cli_timeline *svg; /* --svg's timeline, or NULL */
    const char *const *names;
    int64_t keys[ADVLOCK_SIM_MAX_KEYS];
    int nkeys;
    const advlock_sim *sim; /* when clients' processes started */
    int modelled;
    const char *late_cause; /* what makes a timer fire late in this world */
    /* When each client's sleep should end, in virtual time (-1: not asleep). */
    int64_t wake_due[ADVLOCK_SIM_MAX_CLIENTS];
    int acquires[ADVLOCK_SIM_MAX_CLIENTS];
    int64_t acquire_started[ADVLOCK_SIM_MAX_CLIENTS];
    int64_t waits[MAX_WAITS];
    size_t nwaits;
    uint64_t attempts;
} sim_view;

/* ---- reading back our own trace lines ------------------------------------- */

/* The text after "field": in a trace line, or NULL. */
static const char *field(const char *line, const char *name)
{
    char pattern[32];
    snprintf(pattern, sizeof pattern, "\"%s\":", name);
    const char *p = strstr(line, pattern);
    return p != NULL ? p + strlen(pattern) : NULL;
}

static long long number(const char *line, const char *name)
{
    const char *p = field(line, name);
    if (p != NULL && *p == '"')
        p++;
    return p != NULL ? strtoll(p, NULL, 10) : -1;
}

/* Copies a string field (without unescaping, for display only). */
static size_t text(const char *line, const char *name, char *out, size_t size)
{
    out[0] = '\0';
    const char *p = field(line, name);
    if (p == NULL || *p != '"')
        return 0;
    p++;
    size_t n = 0;
    while (p[n] != '\0' && !(p[n] == '"' && (n == 0 || p[n - 1] != '\\')))
        n++;
    if (n >= size)
        n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return n;
}

/* The key's index among the run's lock names, or -1. */
static int key_index(const sim_view *v, int64_t key)
{
    for (int i = 0; i < v->nkeys; i++)
        if (v->keys[i] == key)
            return i;
    return -1;
}

/* What a trace event is in --svg's timeline. */
static cli_timeline_event svg_event(const char *event, int is_lock, int is_try)
{
    if (strcmp(event, "query") == 0)
        return !is_lock ? CLI_TIMELINE_OTHER : is_try ? CLI_TIMELINE_TRY : CLI_TIMELINE_WAIT;
    static const struct {
        const char *event;
        cli_timeline_event is;
    } events[] = {
        {"result", CLI_TIMELINE_ANSWER},
        {"sleep", CLI_TIMELINE_SLEEP},
        {"acquired", CLI_TIMELINE_ACQUIRED},
        {"timed_out", CLI_TIMELINE_TIMED_OUT},
        {"error", CLI_TIMELINE_FAILED},
        {"released", CLI_TIMELINE_ENDED},
        {"not_held", CLI_TIMELINE_ENDED},
        {"cancelled", CLI_TIMELINE_ENDED},
        {"ends_with_transaction", CLI_TIMELINE_ENDED},
    };
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (strcmp(event, events[i].event) == 0)
            return events[i].is;
    return CLI_TIMELINE_OTHER;
}

static void on_trace(void *user, const char *given, size_t len)
{
    sim_view *v = user;
    if (v->trace_file != NULL)
        fwrite(given, 1, len, v->trace_file);
    /* The line is not NUL-terminated: the fields are searched in a copy. */
    static char line[4096];
    if (len >= sizeof line)
        len = sizeof line - 1;
    memcpy(line, given, len);
    line[len] = '\0';

    char event[32], extra[ADVLOCK_MESSAGE_MAX];
    text(line, "event", event, sizeof event);
    long long t = number(line, "t");
    int client = (int)number(line, "client");
    int key = key_index(v, (int64_t)number(line, "key"));
    const char *name = key >= 0 ? v->names[key] : "?";
    if (client < 0 || client >= ADVLOCK_SIM_MAX_CLIENTS)
        return;

    /* Long enough for the bounded wait, whose pg_advisory_lock comes after
     * the lock_timeout settings around it. */
    char sql[1024];
    text(line, "sql", sql, sizeof sql);
    /* pg_try_advisory_lock, pg_advisory_lock and their shared and xact forms */
    int is_lock = strstr(sql, "advisory_lock") != NULL || strstr(sql, "advisory_xact_lock") != NULL;
    int is_try = strstr(sql, "try_advisory") != NULL;
    if (strcmp(event, "query") == 0 && is_lock) {
        v->attempts++;
        /* A wait counts from the acquire's first try; a modelled client's
         * first acquire, from its process's start, as `advlock run` is
         * timed from outside (tests/herd/herd.sh). */
        if (number(line, "attempt") == 1)
            v->acquire_started[client] = v->modelled && v->acquires[client]++ == 0
                                             ? advlock_sim_client_launched(v->sim, client)
                                             : t;
    } else if (strcmp(event, "acquired") == 0 && v->nwaits < MAX_WAITS) {
        v->waits[v->nwaits++] = t - v->acquire_started[client];
    }

    /* A try after a sleep: how much later than the sleep's end it came. */
    long long late = 0;
    if (strcmp(event, "query") == 0 && v->wake_due[client] >= 0) {
        late = t - v->wake_due[client];
        v->wake_due[client] = -1;
    }
    if (strcmp(event, "sleep") == 0)
        v->wake_due[client] = t + number(line, "wake") - number(line, "clock");
    if (v->svg != NULL)
        cli_timeline_note(v->svg, t, client, key, svg_event(event, is_lock, is_try));
    if (v->quiet)
        return;

    if (strcmp(event, "query") == 0 && is_try) {
        printf("%8lld ms  client %-2d  tries '%s' (attempt %lld)", t, client, name,
               number(line, "attempt"));
        if (late > 0)
            printf("; woke %lld ms late (%s)", late, v->late_cause);
        putchar('\n');
    } else if (strcmp(event, "query") == 0 && is_lock)
        printf("%8lld ms  client %-2d  asks the server for '%s' and waits\n", t, client, name);
    else if (strcmp(event, "cancel_query") == 0)
        printf("%8lld ms  client %-2d  cancels its wait\n", t, client);
    else if (strcmp(event, "result") == 0 && text(line, "sqlstate", extra, sizeof extra) > 0)
        printf("%8lld ms  client %-2d  %s (SQLSTATE %s)\n", t, client,
               strcmp(extra, "55P03") == 0 ? "the server ends its wait at lock_timeout"
                                           : "its query fails",
               extra);
    else if (strcmp(event, "sleep") == 0)
        printf("%8lld ms  client %-2d  sleeps %lld ms\n", t, client, number(line, "ms"));
    else if (strcmp(event, "acquired") == 0)
        printf("%8lld ms  client %-2d  ACQUIRED '%s' after waiting %lld ms\n", t, client, name,
               t - v->acquire_started[client]);
    else if (strcmp(event, "released") == 0)
        printf("%8lld ms  client %-2d  released '%s'\n", t, client, name);
    else if (strcmp(event, "query") != 0 && strcmp(event, "result") != 0
             && strcmp(event, "waiting") != 0) {
        text(line, "message", extra, sizeof extra);
        printf("%8lld ms  client %-2d  %s%s%s\n", t, client, event, extra[0] ? ": " : "", extra);
    }
}

/* ---- summary ------------------------------------------------------------------ */

static int compare_ms(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static int64_t percentile(const int64_t *sorted, size_t n, unsigned pct)
{
    if (n == 0)
        return 0;
    size_t rank = (n * pct + 99) / 100;
    return sorted[rank == 0 ? 0 : rank - 1];
}

/* The summary line (also the --svg picture's caption). */
static void format_summary(sim_view *v, const advlock_sim_stats *st, int clients, char *out,
                           size_t size)
{
    qsort(v->waits, v->nwaits, sizeof v->waits[0], compare_ms);
    snprintf(out, size,
             "%d clients: %" PRIu64 " acquired, %" PRIu64 " timed out, %" PRIu64
             " released, %" PRIu64 " cancelled, %" PRIu64 " failed; %" PRIu64
             " attempts; wait p50 %" PRId64 " ms, p99 %" PRId64 " ms; %" PRIu64
             " faults injected; ended at %" PRId64 " ms virtual time",
             clients, st->outcomes[ADVLOCK_ACQUIRED], st->outcomes[ADVLOCK_TIMED_OUT],
             st->outcomes[ADVLOCK_RELEASED], st->outcomes[ADVLOCK_CANCELLED],
             st->outcomes[ADVLOCK_FAILED], v->attempts, percentile(v->waits, v->nwaits, 50),
             percentile(v->waits, v->nwaits, 99), st->faults, st->end_ms);
}

/* The header's second line: which world the clients live in, and what in
 * it bends the timeline (a sleep of 100 ms may end well after 100 ms). */
static void print_world(int ideal, const char *profile_path, int faults)
{
    if (ideal)
        printf("world: idealised: all start at once, statements take 1-3 ms, timers fire on "
               "time%s\n\n",
               faults ? " but for clock faults" : "");
    else
        printf("world: measured (%s): staggered starts, a server queue, timers that wake "
               "late; --ideal for the lockstep\n\n",
               profile_path != NULL ? profile_path : "the built-in profile");
}

/* ---- options ------------------------------------------------------------------- */

/* The longest --timeout, --hold and --think: a week of virtual time, far
 * beyond any lock worth simulating, and small enough that a whole run's
 * virtual time (longest_run_ms) stays far from overflowing. */
#define MAX_DURATION_MS 604800000LL
#define MAX_CYCLES      1000000LL

/* The simulator fails a run still busy after max_virtual_ms (its guard
 * against a livelock): the longest run these options can make, each
 * cycle's think, timeout and hold plus an hour for what the world adds
 * (latencies, the profile's queue, injected stalls and clock jumps), and
 * never less than the simulator's default. */
static int64_t longest_run_ms(int64_t fallback, long long cycles, long long think,
                              long long timeout, long long hold)
{
    int64_t run = (int64_t)cycles * (think + timeout + hold + 3600000);
    return run > fallback ? run : fallback;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: advlock simulate [OPTIONS]\n"
            "  Clients race for locks on the fake database in virtual time; no server.\n"
            "\n"
            "  --clients N     clients (1-%d, default 8)\n"
            "  --keys K        lock names they pick from (1-%d, default 1)\n"
            "  --timeout MS    each acquire's timeout (0-%lld, default 10000)\n"
            "  --hold MS       how long a client holds the lock (0-%lld, default 50)\n"
            "  --cycles N      acquire/hold/release cycles per client (1-%lld, default 1)\n"
            "  --think MS      longest pause before each cycle (0-%lld, default 0: all\n"
            "                  start at once)\n"
            "  --seed S        the run follows from it (default 1)\n"
            "  --profile FILE  the world measured by advlock calibrate (default: the one\n"
            "                  measured on advlock's test machine, built in)\n"
            "  --ideal         the idealised world instead: every client starts at once,\n"
            "                  every statement takes 1-3 ms (lockstep at its worst)\n"
            "  --jitter        full jitter: each sleep drawn from [0, min(1000, 100*2^n)] ms\n"
            "  --clip          reference sleeps, the last one cut to end at the deadline\n"
            "  --wait          wait on the server (pg_advisory_lock), cancelled at the deadline\n"
            "  --diagnose      after a timeout, name the holder\n"
            "  --faults        inject latency spikes, NULLs, server errors, dropped and\n"
            "                  killed sessions, stalled and jumping clocks\n"
            "  --trace FILE    write the JSON-lines trace to FILE\n"
            "  --svg FILE      draw the timeline in FILE (SVG): a row per client, the\n"
            "                  lock's owner on top\n"
            "  --quiet         print the summary only\n",
            ADVLOCK_SIM_MAX_CLIENTS, ADVLOCK_SIM_MAX_KEYS, MAX_DURATION_MS, MAX_DURATION_MS,
            MAX_CYCLES, MAX_DURATION_MS);
}

static const char *const lock_names[ADVLOCK_SIM_MAX_KEYS] = {
    "BrighterMigration_public.Outbox",  "BrighterMigration_public.Inbox",
    "BrighterMigration_sales.Outbox",   "BrighterMigration_sales.Inbox",
    "BrighterMigration_billing.Outbox", "BrighterMigration_billing.Inbox",
    "BrighterMigration_orders.Outbox",  "BrighterMigration_orders.Inbox",
    "BrighterMigration_users.Outbox",   "BrighterMigration_users.Inbox",
    "BrighterMigration_audit.Outbox",   "BrighterMigration_audit.Inbox",
    "BrighterMigration_stock.Outbox",   "BrighterMigration_stock.Inbox",
    "BrighterMigration_mail.Outbox",    "BrighterMigration_mail.Inbox",
};

/* Faults often enough that a few dozen clients meet every kind. */
static void enable_faults(advlock_sim_config *cfg)
{
    cfg->latency =
        (advlock_fake_latency){.min_ms = 1, .max_ms = 20, .tail_ppm = 20000, .tail_max_ms = 400};
    cfg->faults = (advlock_fake_faults){
        .null_ppm = 5000,
        .error_ppm = 10000,
        .drop_before_ppm = 5000,
        .drop_after_ppm = 5000,
        .drop_detect_max_ms = 2000,
        .kill_ppm = 50000,
        .kill_within_ms = 1000,
        .stall_ppm = 20000,
        .stall_max_ms = 2000,
        .jump_ppm = 10000,
        .jump_max_ms = 60000,
    };
}

int cmd_simulate(int argc, char **argv)
{
    long long clients = 8, keys = 1, timeout = 10000, hold = 50, cycles = 1, think = 0;
    long long seed = 1;
    int faults = 0, ideal = 0, jitter = 0, wait = 0;
    advlock_options lock_options;
    advlock_options_init(&lock_options);
    const char *trace_path = NULL, *profile_path = NULL, *svg_path = NULL;
    static sim_view view; /* large; one per process */
    memset(&view, 0, sizeof view);
    const cli_opt options[] = {
        CLI_WHOLE("clients", 0, &clients, 1, ADVLOCK_SIM_MAX_CLIENTS, NULL),
        CLI_WHOLE("keys", 0, &keys, 1, ADVLOCK_SIM_MAX_KEYS, NULL),
        CLI_WHOLE("timeout", 0, &timeout, 0, MAX_DURATION_MS, NULL),
        CLI_WHOLE("hold", 0, &hold, 0, MAX_DURATION_MS, NULL),
        CLI_WHOLE("cycles", 0, &cycles, 1, MAX_CYCLES, NULL),
        CLI_WHOLE("think", 0, &think, 0, MAX_DURATION_MS, NULL),
        CLI_WHOLE("seed", 0, &seed, 0, INT64_MAX, NULL),
        CLI_SET("faults", 0, &faults),
        CLI_SET("jitter", 0, &jitter),
        CLI_SET("clip", 0, &lock_options.clip_to_deadline),
        CLI_SET("wait", 0, &wait),
        CLI_SET("diagnose", 0, &lock_options.diagnose),
        CLI_TEXT("profile", 0, &profile_path),
        CLI_SET("ideal", 0, &ideal),
        CLI_TEXT("trace", 0, &trace_path),
        CLI_TEXT("svg", 0, &svg_path),
        CLI_SET("quiet", 0, &view.quiet),
    };
    int rc = CLI_PARSE(argc, argv, "simulate", options, 1, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc;
    if (jitter)
        lock_options.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    if (wait)
        lock_options.wait = ADVLOCK_WAIT_SERVER;
    if (optind != argc)
        return cli_usage_error("simulate", "unexpected argument '%s'", argv[optind]);
    if (ideal && profile_path != NULL) {
        cli_error("--ideal and --profile choose two worlds; give one");
        return EXIT_USAGE;
    }
    cli_profile profile;
    char why[512];
    if (!ideal
        && (profile_path != NULL
                ? cli_profile_read(profile_path, &profile, why, sizeof why)
                : cli_profile_parse_text(cli_profile_default_text, "(built-in profile)", &profile,
                                         why, sizeof why))
               != 0) {
        cli_error("%s", why);
        return EXIT_USAGE;
    }
    if (trace_path != NULL && (view.trace_file = fopen(trace_path, "w")) == NULL) {
        cli_error("cannot write trace '%s': %s", trace_path, strerror(errno));
        return EXIT_IO;
    }

    view.names = lock_names;
    view.nkeys = (int)keys;
    for (int i = 0; i < view.nkeys; i++)
        advlock_derive_key(lock_names[i], strlen(lock_names[i]), &view.keys[i]);

    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.seed = (uint64_t)seed;
    cfg.latency = (advlock_fake_latency){.min_ms = 1, .max_ms = 3};
    if (faults)
        enable_faults(&cfg);
    cfg.trace = on_trace;
    cfg.trace_user = &view;
    cfg.max_virtual_ms = longest_run_ms(cfg.max_virtual_ms, cycles, think, timeout, hold);

    advlock_sim_cycler cycler = {
        .lock_names = lock_names,
        .lock_count = (size_t)keys,
        .cycles = (unsigned)cycles,
        .think_min_ms = 0,
        .think_max_ms = think,
        .hold_min_ms = hold,
        .hold_max_ms = hold,
        .timeout_min_ms = timeout,
        .timeout_max_ms = timeout,
    };
    static advlock_sim sim; /* about 350 KB */
    if (advlock_sim_init(&sim, &cfg) != 0) {
        cli_error("invalid simulation settings");
        return EXIT_USAGE;
    }
    /* Each client's jitter follows from the seed and its index (the driver
     * derives it), so a seed still replays the whole run. */
    for (long long c = 0; c < clients; c++)
        advlock_sim_set_options(&sim, advlock_sim_add_cycler(&sim, &cycler), &lock_options);
    if (!ideal) {
        advlock_sim_model model = cli_profile_model_for(&profile, (int)clients);
        if (advlock_sim_set_model(&sim, &model) != 0) {
            cli_error("the profile's world cannot be simulated");
            return EXIT_USAGE;
        }
        view.sim = &sim;
        view.modelled = 1;
    }

    char header[256];
    snprintf(header, sizeof header,
             "%lld clients, %lld lock name%s, timeout %lld ms, hold %lld ms, seed "
             "%lld, %s%s%s%s%s%s",
             clients, keys, keys == 1 ? "" : "s", timeout, hold, seed,
             ideal                  ? "idealised world"
             : profile_path != NULL ? profile_path
                                    : "built-in profile",
             lock_options.wait == ADVLOCK_WAIT_SERVER ? ", waiting on the server" : "",
             lock_options.backoff == ADVLOCK_BACKOFF_FULL_JITTER ? ", full jitter" : "",
             lock_options.clip_to_deadline ? ", clipped" : "",
             lock_options.diagnose ? ", diagnosing" : "", faults ? ", with faults" : "");
    if (!view.quiet) {
        puts(header);
        print_world(ideal, profile_path, faults);
    }
    FILE *svg_file = NULL;
    if (svg_path != NULL) {
        view.svg = cli_timeline_new((int)clients, (int)keys, lock_names, header);
        if (view.svg == NULL) {
            cli_error("out of memory for the timeline");
            return EXIT_IO;
        }
        if ((svg_file = fopen(svg_path, "w")) == NULL) {
            cli_error("cannot write '%s': %s", svg_path, strerror(errno));
            cli_timeline_free(view.svg);
            return EXIT_IO;
        }
    }
    view.late_cause = ideal ? "clock faults" : faults ? "world model, clock faults" : "world model";
    for (int c = 0; c < ADVLOCK_SIM_MAX_CLIENTS; c++)
        view.wake_due[c] = -1;
    rc = advlock_sim_run(&sim);
    advlock_sim_stats st = advlock_sim_get_stats(&sim);
    char summary[512];
    format_summary(&view, &st, (int)clients, summary, sizeof summary);
    printf("\n%s\n", summary);
    int write_failed = view.trace_file != NULL && fclose(view.trace_file) != 0;
    if (svg_file != NULL) {
        int drawn = cli_timeline_write(view.svg, svg_file, summary);
        cli_timeline_free(view.svg);
        if (fclose(svg_file) != 0 || drawn != 0) {
            cli_error("writing '%s' failed%s", svg_path, drawn != 0 ? ": out of memory" : "");
            return EXIT_IO;
        }
    }
    if (rc == ADVLOCK_SIM_VIOLATION) {
        cli_error("invariant violated: %s", advlock_sim_violation(&sim));
        return EXIT_LOCK_ERROR;
    }
    if (write_failed) {
        cli_error("writing trace '%s' failed", trace_path);
        return EXIT_IO;
    }
    return rc == 0 ? EXIT_OK : EXIT_LOCK_ERROR;
}
