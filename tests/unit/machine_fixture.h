/*
 * The fixture the lock-machine tests share: a fresh machine in *state, and
 * the two calls every test makes most. Include after cmocka.h.
 */
#ifndef MACHINE_FIXTURE_H
#define MACHINE_FIXTURE_H

#include <stdlib.h>

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

/* Reports a result that carries no SQLSTATE or message; it must be taken. */
static void answer(advlock_machine *m, advlock_result r, int64_t now)
{
    assert_int_equal(advlock_on_result(m, r, NULL, NULL, now), 0);
}

#endif
