/*
 * What every benchmark program shares: a clock, CPU time, order statistics,
 * interleaved rounds, and the one-line result records that bench/report.c
 * turns into the table and build/bench.json.
 *
 * A benchmark here is never a pass/fail test: the machine is shared and
 * noisy. A program exits non-zero only when the thing it measures did the
 * wrong thing (a lock not granted, a key that differs from the raw digest).
 */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);

/* CPU time (user + system) of the whole process, all threads, in seconds. */
double bench_cpu_seconds(void);

/* Sleeps until CLOCK_MONOTONIC reaches at_ns (absolute, so exact). */
void bench_sleep_until_ns(int64_t at_ns);

/* The median of n values (n > 0); reorders the array. */
double bench_median(double *values, size_t n);

/* The p-th percentile (0..100), nearest rank, of n values (n > 0);
 * reorders the array. */
double bench_percentile(double *values, size_t n, double p);

/*
 * Interleaved rounds. Each contestant is a function that does one round of
 * its work and returns the round's figure (ns per operation, operations per
 * second, ...). bench_interleave() runs them A B C A B C ... for the given
 * number of rounds, so that whatever else the machine does in a given
 * second falls on all contestants alike, and keeps every round's figure.
 */
enum { BENCH_MAX_ROUNDS = 64 };

typedef struct bench_contestant {
    const char *name;
    double (*run_round)(void *arg);
    void *arg;
    double rounds[BENCH_MAX_ROUNDS]; /* filled by bench_interleave() */
} bench_contestant;

void bench_interleave(bench_contestant *contestants, size_t count, int rounds);

/* The median of a contestant's rounds. */
double bench_median_of(const bench_contestant *c, int rounds);

/*
 * The median, over rounds, of the per-round ratio a / b. Pairing each round
 * with its neighbour cancels drift of the machine's speed during the run
 * better than a ratio of two medians does.
 */
double bench_median_ratio(const bench_contestant *a, const bench_contestant *b, int rounds);

/*
 * One result: a row of the table and an entry of build/bench.json.
 *
 * name        the JSON key, e.g. "key_derivation_ns"
 * value, unit the figure ("ns", "cycles/s", "instructions", ...)
 * limit       what it is compared with, in words with its value, or NULL
 * ratio       value / limit, or NAN when there is no limit
 * goal        the goal as text ("ratio <= 1.1"), or NULL
 * met         1 met, 0 missed, -1 no goal
 */
typedef struct bench_figure {
    const char *name;
    double value;
    const char *unit;
    const char *limit;
    double ratio;
    const char *goal;
    int met;
} bench_figure;

/* Writes the figure as one tab-separated record on stdout (see report.c). */
void bench_emit(const bench_figure *f);

/* Writes a note (printf-style) that the report shows under the table. */
void bench_note(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Exits with status 1 after printing the message on stderr: for the thing
 * measured misbehaving, never for it being slow. */
void bench_fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * Counts instructions with valgrind's callgrind: runs this program again
 * under `valgrind --tool=callgrind`, with args (NULL-terminated) as its
 * arguments, collecting only while inside a function matching toggle (a
 * --toggle-collect pattern such as "measured_acquire_*"). Returns the
 * instructions collected, and stores in inclusive[i] the inclusive count of
 * each function named in functions (NULL-terminated; may be NULL): what was
 * spent inside that function and its callees, within the collected part.
 * Exits the program if valgrind or callgrind_annotate fails.
 *
 * Link programs that use it with -z now: lazy symbol binding would
 * otherwise land in the first measured call.
 */
double bench_callgrind(const char *toggle, const char *const *args, const char *const *functions,
                       double *inclusive);

/* Writes s to out as a JSON string literal, quotes and escapes included. */
void bench_json_string(FILE *out, const char *s);

/*
 * Command-line options of the form --name VALUE. Returns the value of
 * --name in argv as a number, or fallback when absent; exits with a usage
 * message when the value is not a number.
 */
double bench_option(int argc, char **argv, const char *name, double fallback);

/* The same, as a string. */
const char *bench_option_text(int argc, char **argv, const char *name, const char *fallback);

/* Exits with a usage message unless argv holds only --name VALUE pairs
 * whose names are in known (NULL-terminated), e.g. {"--rounds", NULL}. */
void bench_check_options(int argc, char **argv, const char *const *known);

#endif
