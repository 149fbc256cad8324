/* The core allocates nothing: every malloc, calloc and realloc call made by
 * the project's own objects is routed here (-Wl,--wrap) and counted while
 * whole operations run. libcrypto's internal allocations are its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "advlock.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

/* volatile: the compiler assumes malloc touches no program variable. */
static volatile long allocations;

void *__wrap_malloc(size_t size)
{
    allocations++;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    allocations++;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    allocations++;
    return __real_realloc(p, size);
}

/* Proves the wrapping is in force, so a zero below means something. */
static void counter_sees_allocations(void **state)
{
    (void)state;
    long before = allocations;
    /* volatile: the compiler may otherwise drop a malloc/free pair. */
    void *volatile p = malloc(16);
    void *volatile q = realloc(p, 32);
    free(q != NULL ? q : p);
    assert_int_equal(allocations - before, 2);
}

static void whole_operations_allocate_nothing(void **state)
{
    (void)state;
    static const char key[] = "BrighterMigration_public.Outbox";
    advlock_machine m;
    advlock_machine_init(&m);

    long before = allocations;
    /* Contended acquire through the whole schedule to a timeout. */
    int64_t now = 0;
    assert_int_equal(advlock_start_acquire(&m, key, sizeof key - 1, 5000, now), 0);
    for (;;) {
        assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_FALSE, NULL, NULL, now), 0);
        advlock_action a = advlock_next_action(&m);
        if (a.kind == ADVLOCK_ACTION_DONE)
            break;
        now = a.wake_at_ms;
        assert_int_equal(advlock_on_timer(&m, now), 0);
    }
    /* Acquire, release, a cancelled grant, errors with messages. */
    assert_int_equal(advlock_start_acquire(&m, key, sizeof key - 1, 5000, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_TRUE, NULL, NULL, now), 0);
    assert_int_equal(advlock_start_release(&m, key, sizeof key - 1, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_TRUE, NULL, NULL, now), 0);
    assert_int_equal(advlock_start_acquire(&m, key, sizeof key - 1, 5000, now), 0);
    assert_int_equal(advlock_cancel(&m, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_TRUE, NULL, NULL, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_TRUE, NULL, NULL, now), 0);
    assert_int_equal(advlock_start_acquire(&m, key, sizeof key - 1, 5000, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_SERVER_ERROR, "XX000", "e", now), 0);
    assert_int_equal(advlock_start_release(&m, key, sizeof key - 1, now), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_CONNECTION_LOST, NULL, NULL, now), 0);
    assert_int_equal(advlock_next_action(&m).report->outcome, ADVLOCK_FAILED);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_true(advlock_describe(advlock_next_action(&m).report, key, sizeof key - 1, "e", text,
                                 sizeof text)
                > 0);
    assert_int_equal(allocations - before, 0);
}

/* The server session check too: the session row, guarded statements behind
 * a proxy (a verify's included), the refusals and their sentences. */
static void the_session_check_allocates_nothing(void **state)
{
    (void)state;
    static const char key[] = "jobs";
    advlock_machine m;
    advlock_machine_init(&m);
    char text[ADVLOCK_MESSAGE_MAX];
    long before = allocations;
    advlock_session s;
    assert_int_equal(advlock_session_init(&s, 4242, 99), 0);
    assert_int_equal(advlock_set_session(&m, &s), 0);
    assert_int_equal(advlock_start_acquire(&m, key, 4, 1000, 0), 0);
    assert_int_equal(advlock_on_session(&m, 9001, 0, 1, 1), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_TRUE, NULL, NULL, 2), 0);
    assert_int_equal(advlock_start_release(&m, key, 4, 3), 0);
    /* A release off the claimed session: it retries, then is cancelled. */
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_NULL, NULL, NULL, 4), 0);
    assert_int_equal(advlock_on_timer(&m, 104), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_NULL, NULL, NULL, 105), 0);
    assert_int_equal(advlock_cancel(&m, 106), 0);
    assert_true(advlock_describe(advlock_next_action(&m).report, key, 4, NULL, text, sizeof text)
                > 0);
    /* A transaction lock behind the proxy: its guarded try's busy NULL. */
    advlock_options o;
    advlock_options_init(&o);
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_set_options(&m, &o), 0);
    assert_int_equal(advlock_start_acquire(&m, key, 4, 0, 106), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_NULL, NULL, NULL, 106), 0);
    assert_true(advlock_describe(advlock_next_action(&m).report, key, 4, NULL, text, sizeof text)
                > 0);
    advlock_options_init(&o);
    assert_int_equal(advlock_set_options(&m, &o), 0);
    /* A verify behind the proxy: its guarded row, and its NULL's sentence. */
    assert_int_equal(advlock_start_verify_key(&m, 7, 5), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_NULL, NULL, NULL, 5), 0);
    assert_int_equal(advlock_cancel(&m, 5), 0);
    assert_true(advlock_describe(advlock_next_action(&m).report, key, 4, NULL, text, sizeof text)
                > 0);
    assert_int_equal(advlock_get_session(&m, &s), 0);
    assert_int_equal(advlock_session_init(&s, 4242, 100), 0);
    assert_int_equal(advlock_set_session(&m, &s), 0);
    assert_int_equal(advlock_start_acquire(&m, key, 4, 1000, 5), 0);
    assert_int_equal(advlock_on_session(&m, 4242, 1, 1, 6), 0);
    assert_true(advlock_describe(advlock_next_action(&m).report, key, 4, NULL, text, sizeof text)
                > 0);
    assert_int_equal(allocations - before, 0);
}

/* The lease: its plan, options text, setup, heartbeats to an expiry. */
static void the_lease_allocates_nothing(void **state)
{
    (void)state;
    long before = allocations;
    advlock_lease_plan p;
    assert_int_equal(advlock_lease_plan_init(&p, ADVLOCK_LEASE_DEFAULT_MS, 10000), 0);
    char text[ADVLOCK_LEASE_OPTIONS_MAX];
    assert_true(advlock_lease_options(&p, text, sizeof text) > 0);
    advlock_lease l;
    assert_int_equal(advlock_lease_init(&l, &p), 0);
    assert_int_equal(advlock_lease_start_setup(&l, 0, 0), 0);
    assert_int_equal(advlock_lease_on_sent(&l, 0), 0);
    assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, 1), 0);
    assert_int_equal(advlock_lease_hold(&l, 1, 99, 2), 0);
    int64_t now = 2;
    while (advlock_lease_next(&l).kind != ADVLOCK_LEASE_EXPIRED) {
        advlock_lease_action a = advlock_lease_next(&l);
        if (a.kind == ADVLOCK_LEASE_QUERY) {
            assert_int_equal(advlock_lease_on_sent(&l, now), 0);
            /* Answered until a minute has passed, then never again. */
            if (now < 60000)
                assert_int_equal(advlock_lease_on_result(&l, ADVLOCK_RESULT_TRUE, now + 1), 0);
            else
                now = advlock_lease_next(&l).wake_at_ms;
        } else {
            now = a.wake_at_ms;
        }
        assert_int_equal(advlock_lease_on_timer(&l, now), 0);
    }
    assert_int_equal(advlock_lease_expiry_reason(&l), ADVLOCK_LEASE_NO_ANSWER);
    assert_int_equal(advlock_lease_stop(&l), 0);
    advlock_machine m;
    advlock_machine_init(&m);
    advlock_options o;
    advlock_options_init(&o);
    o.lease_ms = ADVLOCK_LEASE_DEFAULT_MS;
    o.lease_stop_ms = 10000;
    assert_int_equal(advlock_set_options(&m, &o), 0);
    assert_int_equal(allocations - before, 0);
}

/* Answers every statement the engine offers with TRUE (a session row:
 * the direct session's) until it offers none. */
static void answer_all(advlock_conn *c, int64_t now)
{
    advlock_statement st;
    while (advlock_conn_poll_statement(c, &st, now) || advlock_conn_head(c, &st)) {
        while (advlock_conn_poll_statement(c, &st, now))
            ;
        if (!advlock_conn_head(c, &st))
            break;
        advlock_answer a;
        advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
        a.server_pid = 7;
        a.ours = 1;
        a.settings[0] = 64;
        a.settings[1] = 100;
        assert_int_equal(advlock_conn_on_answer(c, &a, now), 0);
    }
}

/* The connection engine: members acquiring and releasing with a lease, a
 * cancelled grant given back, a reset, a close, events and words. */
static void the_connection_engine_allocates_nothing(void **state)
{
    (void)state;
    advlock_conn c;
    advlock_conn_slot slots[8];
    advlock_peer *buckets[16];
    advlock_member m[3];
    long before = allocations;
    assert_int_equal(advlock_conn_init(&c, slots, 8, buckets, 16, 7, 99,
                                       ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE),
                     0);
    assert_int_equal(advlock_conn_set_lease(&c, ADVLOCK_LEASE_DEFAULT_MS, 0), 0);
    for (int i = 0; i < 3; i++) {
        advlock_member_init(&m[i]);
        assert_int_equal(advlock_conn_start_acquire(&c, &m[i], "k", 1, 1000, NULL, 0), 0);
    }
    answer_all(&c, 0);
    assert_true(advlock_member_held(&m[0]));
    advlock_conn_on_timer(&c, advlock_conn_next_wake(&c));
    answer_all(&c, 1);
    assert_int_equal(advlock_conn_start_release(&c, &m[0], 2), 0);
    answer_all(&c, 2);
    assert_int_equal(advlock_conn_start_acquire(&c, &m[0], "j", 1, 1000, NULL, 3), 0);
    advlock_statement st;
    while (advlock_conn_poll_statement(&c, &st, 3))
        ;
    assert_int_equal(advlock_conn_cancel(&c, &m[0], 3), 0);
    answer_all(&c, 3);
    assert_int_equal(advlock_conn_start_acquire(&c, &m[0], "j", 1, 1000, NULL, 4), 0);
    answer_all(&c, 4);
    assert_int_equal(advlock_conn_on_reset(&c, 8, 100, 5), 0);
    assert_int_equal(advlock_conn_start_acquire(&c, &m[0], "j", 1, 1000, NULL, 6), 0);
    (void)advlock_conn_poll_statement(&c, &st, 6);
    advlock_conn_on_closed(&c, "57P01", "terminating connection", 7);
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&c, &ev))
        assert_non_null(advlock_member_words(ev.member));
    assert_int_equal(allocations - before, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counter_sees_allocations),
        cmocka_unit_test(whole_operations_allocate_nothing),
        cmocka_unit_test(the_session_check_allocates_nothing),
        cmocka_unit_test(the_lease_allocates_nothing),
        cmocka_unit_test(the_connection_engine_allocates_nothing),
    };
    return cmocka_run_group_tests_name("no allocation", tests, NULL, NULL);
}
