/* Helpers shared by the benchmark programs; see bench.h. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

int64_t bench_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

double bench_cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6
           + (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

void bench_sleep_until_ns(int64_t at_ns)
{
    struct timespec at = {.tv_sec = (time_t)(at_ns / 1000000000),
                          .tv_nsec = (long)(at_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
        continue;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *values, size_t n)
{
    qsort(values, n, sizeof *values, compare_doubles);
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double bench_percentile(double *values, size_t n, double p)
{
    qsort(values, n, sizeof *values, compare_doubles);
    /* Nearest rank: the smallest value with at least p% of values at or
     * below it. */
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return values[rank > 0 ? rank - 1 : 0];
}

void bench_interleave(bench_contestant *contestants, size_t count, int rounds)
{
    if (rounds > BENCH_MAX_ROUNDS)
        bench_fail("at most %d rounds", BENCH_MAX_ROUNDS);
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < count; i++)
            contestants[i].rounds[r] = contestants[i].run_round(contestants[i].arg);
}

double bench_median_of(const bench_contestant *c, int rounds)
{
    double copy[BENCH_MAX_ROUNDS];
    memcpy(copy, c->rounds, (size_t)rounds * sizeof copy[0]);
    return bench_median(copy, (size_t)rounds);
}

double bench_median_ratio(const bench_contestant *a, const bench_contestant *b, int rounds)
{
    double ratios[BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        ratios[r] = a->rounds[r] / b->rounds[r];
    return bench_median(ratios, (size_t)rounds);
}

/* Fields are tab-separated, so a tab or newline inside one would break
 * the record; the programs never produce one, and this makes sure. */
static void put_field(const char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        putchar(*s == '\t' || *s == '\n' ? ' ' : *s);
}

void bench_emit(const bench_figure *f)
{
    put_field(f->name);
    printf("\t%.6g\t", f->value);
    put_field(f->unit);
    putchar('\t');
    put_field(f->limit != NULL ? f->limit : "-");
    if (isnan(f->ratio))
        printf("\t-\t");
    else
        printf("\t%.4g\t", f->ratio);
    put_field(f->goal != NULL ? f->goal : "-");
    printf("\t%s\n", f->met < 0 ? "-" : f->met ? "met" : "MISSED");
    fflush(stdout);
}

void bench_note(const char *format, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    fputs("#\t", stdout);
    put_field(text);
    putchar('\n');
    fflush(stdout);
}

void bench_fail(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    fputs("bench: ", stderr);
    vfprintf(stderr, format, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void bench_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

const char *bench_option_text(int argc, char **argv, const char *name, const char *fallback)
{
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return fallback;
}

double bench_option(int argc, char **argv, const char *name, double fallback)
{
    const char *text = bench_option_text(argc, argv, name, NULL);
    if (text == NULL)
        return fallback;
    char *end;
    double value = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(value))
        bench_fail("%s wants a number, not '%s'", name, text);
    return value;
}

void bench_check_options(int argc, char **argv, const char *const *known)
{
    for (int i = 1; i < argc; i += 2) {
        int found = 0;
        for (const char *const *k = known; *k != NULL; k++)
            found |= strcmp(argv[i], *k) == 0;
        if (!found || i + 1 >= argc) {
            fprintf(stderr, "usage: %s", argv[0]);
            for (const char *const *k = known; *k != NULL; k++)
                fprintf(stderr, " [%s N]", *k);
            fputc('\n', stderr);
            exit(2);
        }
    }
}
