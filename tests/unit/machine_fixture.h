/*
 * The fixture the lock-machine tests share: a fresh machine in *state, and
 * the two calls every test makes most. Include after cmocka.h.
 */
#ifndef MACHINE_FIXTURE_H
#define MACHINE_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "advlock.h"

static int setup(void **state)
{
    advlock_machine *m = calloc(1, sizeof *m);
    if (m == NULL)
        return -1;
    advlock_machine_init(m);
    *state = m;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static advlock_action act(const advlock_machine *m)
{
    return advlock_next_action(m);
}

/* The current or last operation's report (NULL before the first). */
static const advlock_report *report_of(const advlock_machine *m)
{
    return advlock_next_action(m).report;
}

/* The last operation in words, as a driver renders it: with the name it
 * started with and the server's words that came with the failing result. */
static const char *described(const advlock_machine *m, const char *name, size_t len,
                             const char *words)
{
    static char text[ADVLOCK_MESSAGE_MAX];
    int n = advlock_describe(report_of(m), name, len, words, text, sizeof text);
    assert_true(n >= 0 && (size_t)n < sizeof text);
    assert_int_equal((size_t)n, strlen(text));
    return text;
}

/* Reports a result that carries no SQLSTATE or message; it must be taken. */
static void answer(advlock_machine *m, advlock_result r, int64_t now)
{
    assert_int_equal(advlock_on_result(m, r, NULL, NULL, now), 0);
}

#endif
