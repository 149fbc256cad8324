/* Helpers shared by the benchmark programs; see bench.h. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec
           + (double)u.ru_stime.tv_usec / 1e6;
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
    double ratios[BENCH_MAX_ROUNDS] = {0};
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

/* ---- callgrind ------------------------------------------------------------ */

static int run_program(char *const argv[])
{
    pid_t child;
    if (posix_spawnp(&child, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    if (waitpid(child, &status, 0) != child)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* "1,234,567 (12.34%)  ???:EVP_DigestUpdate [/usr/lib/...]" -> 1234567 */
static double leading_count(const char *line)
{
    double v = 0;
    for (; *line == ' '; line++)
        continue;
    for (; (*line >= '0' && *line <= '9') || *line == ','; line++)
        if (*line != ',')
            v = v * 10 + (*line - '0');
    return v;
}

/* Whether an annotated line names function exactly ("file:function [obj]"). */
static int names_function(const char *line, const char *function)
{
    const char *at = strstr(line, function);
    if (at == NULL || at == line || at[-1] != ':')
        return 0;
    char after = at[strlen(function)];
    return after == ' ' || after == '\n' || after == '\0';
}

double bench_callgrind(const char *toggle, const char *const *args, const char *const *functions,
                       double *inclusive)
{
    /* valgrind needs this program's real path: /proc/self/exe would name
     * valgrind itself once it runs. */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        bench_fail("cannot find this program's path");
    self[len] = '\0';

    char out_file[] = "/tmp/advlock-bench-callgrind.XXXXXX";
    int fd = mkstemp(out_file);
    if (fd < 0)
        bench_fail("cannot create a temporary file");
    close(fd);

    enum { MAX_ARGS = 32 };
    char toggle_option[256], out_option[96];
    snprintf(toggle_option, sizeof toggle_option, "--toggle-collect=%s", toggle);
    snprintf(out_option, sizeof out_option, "--callgrind-out-file=%s", out_file);
    const char *argv[MAX_ARGS] = {
        "valgrind",    "--tool=callgrind", "--quiet", "--collect-atstart=no",
        toggle_option, out_option,         self};
    int argc = 7;
    for (; *args != NULL; args++) {
        if (argc == MAX_ARGS - 1)
            bench_fail("too many arguments for callgrind");
        argv[argc++] = *args;
    }
    argv[argc] = NULL;
    /* posix_spawn's argv is not const for historical reasons only. */
    if (run_program((char *const *)argv) != 0)
        bench_fail("valgrind --tool=callgrind %s failed", toggle);

    char command[256];
    snprintf(command, sizeof command,
             "callgrind_annotate --inclusive=yes --threshold=100 --auto=no %s", out_file);
    FILE *annotated = popen(command, "r");
    if (annotated == NULL)
        bench_fail("cannot run callgrind_annotate");
    double total = 0;
    for (size_t i = 0; functions != NULL && functions[i] != NULL; i++)
        inclusive[i] = 0;
    char line[2048];
    while (fgets(line, sizeof line, annotated) != NULL) {
        if (strstr(line, "PROGRAM TOTALS") != NULL)
            total = leading_count(line);
        for (size_t i = 0; functions != NULL && functions[i] != NULL; i++)
            if (names_function(line, functions[i]))
                inclusive[i] = leading_count(line);
    }
    if (pclose(annotated) != 0 || total == 0)
        bench_fail("callgrind_annotate found nothing collected in %s", toggle);
    unlink(out_file);
    return total;
}
