/*
 * The values options take: seconds as --timeout, --kill-after, --lease
 * and --verify-interval take them, whole numbers in a range, and the bound
 * a timeout sets on what it covers (run.h's grace included).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../core/saturating.h"
#include "advlock_pq.h"
#include "cli.h"

int cli_parse_seconds(const char *text, int64_t *ms)
{
    int64_t whole = 0, frac = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (INT64_MAX / 1000 - 9) / 10)
            return -1;
        whole = whole * 10 + (*p - '0');
    }
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits == 3)
                return -1; /* finer than a millisecond */
            frac = frac * 10 + (*p - '0');
        }
        if (digits == 0)
            return -1;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    if (*p != '\0')
        return -1;
    *ms = whole * 1000 + frac;
    return 0;
}

int cli_timeout_option(const char *text, int64_t *ms)
{
    if (cli_parse_seconds(text, ms) == 0)
        return 0;
    cli_error("--timeout wants seconds, such as 30 or 0.5 (at most 3 decimals)");
    return -1;
}

int cli_parse_whole(const char *text, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cli_whole_option(const char *name, const char *text, long long lo, long long hi, long long *out)
{
    if (cli_parse_whole(text, lo, hi, out) == 0)
        return 0;
    cli_error("--%s wants a whole number from %lld to %lld, not '%s'", name, lo, hi, text);
    return -1;
}

cli_bound cli_bound_from(int64_t now, int64_t ms)
{
    return (cli_bound){advlock_add_saturating(advlock_add_saturating(now, ms), ADVLOCK_PQ_GRACE_MS),
                       ms};
}
