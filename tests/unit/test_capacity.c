/* How many locks one connection may hold in the server's lock table
 * (advlock_capacity): the nominal size and the share, the settings a server
 * can have, and the refusal's words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "advlock.h"

static void a_default_server_gives_a_quarter_of_6400(void **state)
{
    (void)state;
    advlock_capacity c;
    assert_int_equal(advlock_capacity_init(&c, 64, 100, 0, 0), 0);
    assert_int_equal(c.share_percent, ADVLOCK_CAPACITY_SHARE_DEFAULT);
    assert_int_equal(advlock_capacity_nominal(&c), 6400);
    assert_int_equal(advlock_capacity_limit(&c), 1600);
    assert_int_equal(advlock_capacity_refuse(&c, 1599, NULL, 0), 0);
    assert_int_equal(advlock_capacity_refuse(&c, 1600, NULL, 0), 1);
}

static void prepared_transactions_count_and_the_share_rounds_down(void **state)
{
    (void)state;
    advlock_capacity c;
    assert_int_equal(advlock_capacity_init(&c, 10, 3, 4, 33), 0);
    assert_int_equal(advlock_capacity_nominal(&c), 70);
    assert_int_equal(advlock_capacity_limit(&c), 23);
    /* The smallest table still lets one lock through. */
    assert_int_equal(advlock_capacity_init(&c, 1, 1, 0, 1), 0);
    assert_int_equal(advlock_capacity_limit(&c), 1);
    /* The largest settings neither overflow nor lose the share. */
    assert_int_equal(advlock_capacity_init(&c, INT32_MAX, INT32_MAX, INT32_MAX, 100), 0);
    assert_int_equal(advlock_capacity_limit(&c), advlock_capacity_nominal(&c));
    assert_true(advlock_capacity_nominal(&c) > 0);
}

static void settings_no_server_has_are_refused(void **state)
{
    (void)state;
    advlock_capacity c;
    memset(&c, 0x5a, sizeof c);
    advlock_capacity before = c;
    assert_int_equal(advlock_capacity_init(NULL, 64, 100, 0, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 0, 100, 0, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, 0, 0, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, -1, 2, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, 100, -1, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, (int64_t)INT32_MAX + 1, 100, 0, 25), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, 100, 0, 101), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, 100, 0, -5), ADVLOCK_EINVAL);
    assert_memory_equal(&c, &before, sizeof c);
    assert_int_equal(advlock_capacity_nominal(NULL), 0);
    assert_int_equal(advlock_capacity_limit(NULL), 0);
    assert_int_equal(advlock_capacity_refuse(NULL, 1, NULL, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_capacity_init(&c, 64, 100, 0, 25), 0);
    assert_int_equal(advlock_capacity_refuse(&c, 1, NULL, 10), ADVLOCK_EINVAL);
}

static void the_refusal_names_the_settings_and_the_numbers(void **state)
{
    (void)state;
    advlock_capacity c;
    char words[256];
    assert_int_equal(advlock_capacity_init(&c, 64, 100, 2, 25), 0);
    assert_int_equal(advlock_capacity_refuse(&c, 1632, words, sizeof words), 1);
    assert_string_equal(words, "1633 advisory locks pass this connection's share (25%: 1632) "
                               "of the server's lock table (about 6528: "
                               "max_locks_per_transaction 64 x (max_connections 100 + "
                               "max_prepared_transactions 2)); raise max_locks_per_transaction "
                               "or the share");
    /* Large servers' numbers fit the drivers' 256 bytes whole. */
    assert_int_equal(advlock_capacity_init(&c, 10000, 10000, 1000, 100), 0);
    assert_int_equal(advlock_capacity_refuse(&c, advlock_capacity_limit(&c), words, sizeof words),
                     1);
    assert_null(strstr(words, "..."));
    assert_non_null(strstr(words, "or the share"));
    assert_int_equal(advlock_capacity_init(&c, INT32_MAX, INT32_MAX, INT32_MAX, 100), 0);
    /* A short buffer is cut, marked, and ends. */
    char small[16];
    assert_int_equal(advlock_capacity_refuse(&c, INT64_MAX, small, sizeof small), 1);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_non_null(strstr(small, "..."));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_default_server_gives_a_quarter_of_6400),
        cmocka_unit_test(prepared_transactions_count_and_the_share_rounds_down),
        cmocka_unit_test(settings_no_server_has_are_refused),
        cmocka_unit_test(the_refusal_names_the_settings_and_the_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
