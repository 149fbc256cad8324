/*
 * Drives the sans-I/O core through a contended acquire and prints every
 * action it asks for. There is no server and no real time: the "server"
 * here is a variable saying until when another session holds the lock, and
 * the clock is a variable this loop advances. That is the whole point of a
 * sans-I/O core: the same machine runs under libpq, an event loop, or this.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "advlock.h"

static const char *result_name(advlock_result r)
{
    return r == ADVLOCK_RESULT_TRUE ? "true" : "false";
}

/* One acquire against a lock another session holds until held_until_ms. */
static void acquire(const char *name, int64_t timeout_ms, int64_t held_until_ms)
{
    advlock_machine m;
    advlock_machine_init(&m);
    int64_t now = 0;

    printf("\nacquire '%s', timeout %" PRId64 " ms; another session holds it until t=%" PRId64
           " ms\n",
           name, timeout_ms, held_until_ms);
    int rc = advlock_start_acquire(&m, name, strlen(name), timeout_ms, now);
    if (rc != 0) {
        printf("  cannot start: %s\n", advlock_strerror(rc));
        return;
    }
    for (;;) {
        advlock_action a = advlock_next_action(&m);
        if (a.kind == ADVLOCK_ACTION_QUERY) {
            advlock_result r = now >= held_until_ms ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
            printf("  t=%5" PRId64 "  QUERY  %s  [$1 = %" PRId64 "]  -> %s\n", now, a.sql_text,
                   a.param, result_name(r));
            advlock_on_result(&m, r, NULL, NULL, now);
        } else if (a.kind == ADVLOCK_ACTION_SLEEP) {
            printf("  t=%5" PRId64 "  SLEEP  %" PRId64 " ms, until t=%" PRId64 "\n", now,
                   a.sleep_ms, a.wake_at_ms);
            now = a.wake_at_ms;
            advlock_on_timer(&m, now);
        } else {
            /* The machine keeps facts; the sentence is rendered on request,
             * with the name the caller started it with. */
            char message[ADVLOCK_MESSAGE_MAX];
            advlock_describe(a.report, name, strlen(name), NULL, message, sizeof message);
            printf("  t=%5" PRId64 "  DONE   %s after %" PRIu64 " attempts%s%s\n", now,
                   advlock_outcome_name(a.report->outcome), a.report->attempts,
                   message[0] ? ": " : "", message);
            return;
        }
    }
}

int main(void)
{
    const char *name = "BrighterMigration_public.Outbox";
    int64_t key = 0;
    advlock_derive_key(name, strlen(name), &key);
    printf("lock '%s' -> key %" PRId64 " (pg_locks classid %" PRIu32 ", objid %" PRIu32 ")\n", name,
           key, (uint32_t)((uint64_t)key >> 32), (uint32_t)(uint64_t)key);

    acquire(name, 30000, 2345); /* the holder finishes: acquired on a retry */
    acquire(name, 1250, 60000); /* the holder stays: timed out */
    return 0;
}
