/* The fake clock: virtual time moves only forward; the reading can stall
 * and jump but never goes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "advlock_fake.h"

static void advances_only_forward(void **state)
{
    (void)state;
    advlock_fake_clock c;
    advlock_fake_clock_init(&c, 1000);
    assert_true(advlock_fake_clock_now(&c) == 1000);
    assert_true(advlock_fake_clock_read(&c) == 1000);
    assert_int_equal(advlock_fake_clock_advance_to(&c, 1500), 0);
    assert_int_equal(advlock_fake_clock_advance_to(&c, 1500), 0);
    assert_int_equal(advlock_fake_clock_advance_to(&c, 1499), ADVLOCK_EINVAL);
    assert_true(advlock_fake_clock_now(&c) == 1500);
    assert_true(advlock_fake_clock_read(&c) == 1500);
    assert_int_equal(advlock_fake_clock_advance_to(NULL, 1), ADVLOCK_EINVAL);
}

static void a_stall_freezes_the_reading_then_it_resumes_behind(void **state)
{
    (void)state;
    advlock_fake_clock c;
    advlock_fake_clock_init(&c, 0);
    advlock_fake_clock_advance_to(&c, 100);
    assert_int_equal(advlock_fake_clock_stall(&c, 50), 0);
    advlock_fake_clock_advance_to(&c, 120);
    assert_true(advlock_fake_clock_read(&c) == 100);
    /* A stall starting inside another extends it. */
    advlock_fake_clock_stall(&c, 60);
    advlock_fake_clock_advance_to(&c, 179);
    assert_true(advlock_fake_clock_read(&c) == 100);
    advlock_fake_clock_advance_to(&c, 180);
    assert_true(advlock_fake_clock_read(&c) == 100);
    advlock_fake_clock_advance_to(&c, 200);
    assert_true(advlock_fake_clock_read(&c) == 120);
    assert_int_equal(advlock_fake_clock_stall(&c, -1), ADVLOCK_EINVAL);
}

static void a_jump_moves_the_reading_forward_only(void **state)
{
    (void)state;
    advlock_fake_clock c;
    advlock_fake_clock_init(&c, 0);
    advlock_fake_clock_jump(&c, 3600 * 1000);
    assert_true(advlock_fake_clock_now(&c) == 0);
    assert_true(advlock_fake_clock_read(&c) == 3600 * 1000);
    advlock_fake_clock_stall(&c, 10);
    advlock_fake_clock_jump(&c, 5); /* during a stall: the frozen reading jumps */
    assert_true(advlock_fake_clock_read(&c) == 3600 * 1000 + 5);
    advlock_fake_clock_advance_to(&c, 20);
    assert_true(advlock_fake_clock_read(&c) == 3600 * 1000 + 15);
    assert_int_equal(advlock_fake_clock_jump(&c, -1), ADVLOCK_EINVAL);
    advlock_fake_clock_jump(&c, INT64_MAX); /* saturates, no overflow */
    assert_true(advlock_fake_clock_read(&c) == INT64_MAX);
}

static void the_reading_never_goes_back(void **state)
{
    (void)state;
    advlock_prng p;
    advlock_prng_seed(&p, 3);
    advlock_fake_clock c;
    advlock_fake_clock_init(&c, -5000);
    int64_t last = advlock_fake_clock_read(&c);
    for (int i = 0; i < 100000; i++) {
        switch (advlock_prng_below(&p, 3)) {
        case 0: advlock_fake_clock_stall(&c, advlock_prng_between(&p, 0, 300)); break;
        case 1: advlock_fake_clock_jump(&c, advlock_prng_between(&p, 0, 300)); break;
        default:
            advlock_fake_clock_advance_to(&c, advlock_fake_clock_now(&c)
                                                  + advlock_prng_between(&p, 0, 100));
        }
        int64_t r = advlock_fake_clock_read(&c);
        assert_true(r >= last);
        last = r;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(advances_only_forward),
        cmocka_unit_test(a_stall_freezes_the_reading_then_it_resumes_behind),
        cmocka_unit_test(a_jump_moves_the_reading_forward_only),
        cmocka_unit_test(the_reading_never_goes_back),
    };
    return cmocka_run_group_tests_name("fake clock", tests, NULL, NULL);
}
