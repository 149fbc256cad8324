/* The world's model: empirical distributions, drawn with integers, and a
 * simulation whose clients start, query, sleep and hold as a model says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "advlock_fake.h"

static advlock_sim sim;

/* Runs the simulation; a violated invariant fails the test with its words. */
static void run_clean(void)
{
    if (advlock_sim_run(&sim) != 0)
        fail_msg("%s", advlock_sim_violation(&sim));
}

/* us[i] = i * i ms: 21 points, far from linear. */
static advlock_sim_dist squares(void)
{
    advlock_sim_dist d = {ADVLOCK_SIM_DIST_POINTS, {0}};
    for (int i = 0; i < ADVLOCK_SIM_DIST_POINTS; i++)
        d.us[i] = (int64_t)i * i * 1000;
    return d;
}

static advlock_sim_dist always(int64_t us)
{
    advlock_sim_dist d = {1, {us}};
    return d;
}

static void check_refuses_what_is_not_a_distribution(void **state)
{
    (void)state;
    advlock_sim_dist d = squares();
    assert_int_equal(advlock_sim_dist_check(&d), 0);
    d.us[5] = d.us[4] - 1;
    assert_int_equal(advlock_sim_dist_check(&d), ADVLOCK_EINVAL); /* decreasing */
    d = squares();
    d.us[0] = -1;
    assert_int_equal(advlock_sim_dist_check(&d), ADVLOCK_EINVAL);
    d = squares();
    d.us[20] = ADVLOCK_SIM_DIST_MAX_US + 1;
    assert_int_equal(advlock_sim_dist_check(&d), ADVLOCK_EINVAL);
    d.us[20] = ADVLOCK_SIM_DIST_MAX_US;
    assert_int_equal(advlock_sim_dist_check(&d), 0);
    d.count = ADVLOCK_SIM_DIST_POINTS + 1;
    assert_int_equal(advlock_sim_dist_check(&d), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_dist_check(NULL), ADVLOCK_EINVAL);
    advlock_sim_dist none = {0, {0}};
    assert_int_equal(advlock_sim_dist_check(&none), 0);
}

/* Values an independent Python implementation of the generator and the
 * interpolation gives for seed 42: the same on every compiler. */
static void draws_are_fixed_by_the_seed(void **state)
{
    (void)state;
    advlock_sim_dist d = squares();
    advlock_prng p;
    advlock_prng_seed(&p, 42);
    const int64_t golden[] = {6793, 20887, 73503, 4620};
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++)
        assert_int_equal(advlock_sim_dist_draw(&d, &p), golden[i]);
}

static void draws_follow_the_quantiles(void **state)
{
    (void)state;
    advlock_sim_dist d = squares();
    advlock_prng p;
    advlock_prng_seed(&p, 7);
    int below_median = 0, below_p90 = 0;
    for (int i = 0; i < 100000; i++) {
        int64_t v = advlock_sim_dist_draw(&d, &p);
        assert_true(v >= 0 && v <= 400000);
        below_median += v <= d.us[10];
        below_p90 += v <= d.us[18];
    }
    assert_true(below_median > 49000 && below_median < 51000);
    assert_true(below_p90 > 89300 && below_p90 < 90700);
}

/* Count 0 and 1 are constants, and every count takes one value from the
 * stream, so that a constant does not shift the draws after it. */
static void constants_take_one_value_like_the_rest(void **state)
{
    (void)state;
    advlock_sim_dist none = {0, {0}}, one = always(1234), two = {2, {0, 1000000}};
    advlock_prng a, b, c;
    advlock_prng_seed(&a, 3);
    advlock_prng_seed(&b, 3);
    advlock_prng_seed(&c, 3);
    assert_int_equal(advlock_sim_dist_draw(&none, &a), 0);
    assert_int_equal(advlock_sim_dist_draw(&one, &b), 1234);
    int64_t v = advlock_sim_dist_draw(&two, &c);
    assert_true(v >= 0 && v <= 1000000);
    uint64_t next = advlock_prng_next(&c);
    assert_true(advlock_prng_next(&a) == next);
    assert_true(advlock_prng_next(&b) == next);
    assert_int_equal(advlock_sim_dist_draw(NULL, &a), 0);
    assert_int_equal(advlock_sim_dist_draw(&one, NULL), 0);
}

static advlock_sim_model constant_model(int64_t launch, int64_t startup, int64_t statement,
                                        uint32_t servers, int64_t wakeup, int64_t command)
{
    advlock_sim_model m;
    memset(&m, 0, sizeof m);
    m.launch = always(launch);
    m.startup = always(startup);
    m.statement = always(statement);
    m.servers = servers;
    m.wakeup = always(wakeup);
    m.command = always(command);
    return m;
}

static void set_model_checks_its_arguments(void **state)
{
    (void)state;
    advlock_sim_model m = constant_model(0, 0, 1000, 2, 0, 0);
    assert_int_equal(advlock_sim_init(&sim, NULL), 0);
    assert_int_equal(advlock_sim_set_model(NULL, &m), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_set_model(&sim, NULL), ADVLOCK_EINVAL);
    m.servers = ADVLOCK_SIM_MAX_CLIENTS + 1;
    assert_int_equal(advlock_sim_set_model(&sim, &m), ADVLOCK_EINVAL);
    m = constant_model(0, 0, 1000, 2, 0, 0);
    m.startup.count = ADVLOCK_SIM_DIST_POINTS + 1;
    assert_int_equal(advlock_sim_set_model(&sim, &m), ADVLOCK_EINVAL);
    m = constant_model(0, 0, 1000, 2, 0, 0);
    assert_int_equal(advlock_sim_set_model(&sim, &m), 0);
    run_clean();
    assert_int_equal(advlock_sim_set_model(&sim, &m), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_client_launched(&sim, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_client_launched(NULL, 0), ADVLOCK_EINVAL);
}

/* Runs one scripted client in a world where it launches at 5 ms, starts up
 * in 7 ms and every statement takes 4 ms. */
static void run_one_client_launched_at_5_ms(const advlock_sim_step *steps, size_t count,
                                            advlock_sim_done *done)
{
    advlock_sim_model m = constant_model(5000, 7000, 4000, 0, 0, 0);
    assert_int_equal(advlock_sim_init(&sim, NULL), 0);
    assert_int_equal(advlock_sim_add_script(&sim, steps, count, done), 0);
    assert_int_equal(advlock_sim_set_model(&sim, &m), 0);
    run_clean();
}

/* A client starts at its launch, sends its first statement (the session
 * row) after its startup, and gets each answer a statement's time later. */
static void a_client_starts_at_its_launch_and_startup(void **state)
{
    (void)state;
    const advlock_sim_step steps[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 1000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "a"},
    };
    advlock_sim_done done[2];
    run_one_client_launched_at_5_ms(steps, 2, done);
    assert_int_equal(advlock_sim_client_launched(&sim, 0), 5);
    assert_int_equal(done[0].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(done[0].started_ms, 12);
    assert_int_equal(done[0].ended_ms, 20);
}

/* A pause before the first acquire (think time) is the process's time
 * before it starts, not a wait for the lock: the launch moves on by it, and
 * a pause after that acquire leaves it. */
static void think_time_before_the_first_acquire_is_not_waiting(void **state)
{
    (void)state;
    const advlock_sim_step steps[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 3000},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 1000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "a"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 500},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 1000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "a"},
    };
    advlock_sim_done done[6];
    run_one_client_launched_at_5_ms(steps, 6, done);
    assert_int_equal(advlock_sim_client_launched(&sim, 0), 3005);
    assert_int_equal(done[1].started_ms, 3012);
    assert_int_equal(done[1].ended_ms, 3020);
}

/* One server: the second statement sent in the same millisecond waits for
 * the first to be served (each client's session row, then its try). */
static void statements_queue_for_the_servers(void **state)
{
    (void)state;
    const advlock_sim_step a[] = {{.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 1},
                                  {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "a"}};
    const advlock_sim_step b[] = {{.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "b", .timeout_ms = 1},
                                  {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "b"}};
    advlock_sim_done done_a[2], done_b[2];
    for (uint32_t servers = 1; servers <= 2; servers++) {
        advlock_sim_model m = constant_model(0, 0, 4000, servers, 0, 0);
        assert_int_equal(advlock_sim_init(&sim, NULL), 0);
        advlock_sim_add_script(&sim, a, 2, done_a);
        advlock_sim_add_script(&sim, b, 2, done_b);
        assert_int_equal(advlock_sim_set_model(&sim, &m), 0);
        run_clean();
        assert_int_equal(done_a[0].ended_ms, servers == 1 ? 12 : 8);
        assert_int_equal(done_b[0].ended_ms, servers == 1 ? 16 : 8);
    }
}

typedef struct lines {
    char text[64][256];
    int n;
} lines;

static void keep(void *user, const char *line, size_t len)
{
    lines *l = user;
    if (l->n < 64 && len < sizeof l->text[0]) {
        memcpy(l->text[l->n], line, len);
        l->text[l->n++][len] = '\0';
    }
}

/* A simulation whose trace lines go to l, in the world m. */
static void init_traced(lines *l, const advlock_sim_model *m)
{
    memset(l, 0, sizeof *l);
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.trace = keep;
    cfg.trace_user = l;
    assert_int_equal(advlock_sim_init(&sim, &cfg), 0);
    assert_int_equal(advlock_sim_set_model(&sim, m), 0);
}

/* The cycler of a herd: one lock, one cycle, a 50 ms hold. */
static advlock_sim_cycler herd_cycler(const char *const *names, int64_t timeout_ms)
{
    advlock_sim_cycler cy;
    memset(&cy, 0, sizeof cy);
    cy.lock_names = names;
    cy.lock_count = 1;
    cy.cycles = 1;
    cy.hold_min_ms = cy.hold_max_ms = 50;
    cy.timeout_min_ms = cy.timeout_max_ms = timeout_ms;
    return cy;
}

static int traced(const lines *l, const char *needle)
{
    for (int i = 0; i < l->n; i++)
        if (strstr(l->text[i], needle) != NULL)
            return 1;
    return 0;
}

/* A timer fires `wakeup` late: the retry after the first 100 ms sleep (from
 * 1 ms) goes out at 104 ms, not 101. */
static void timers_fire_late_by_the_wakeup(void **state)
{
    (void)state;
    const advlock_sim_step holder[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 10},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "a"},
    };
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "a", .timeout_ms = 200},
    };
    static lines l;
    advlock_sim_model m = constant_model(0, 0, 0, 0, 3000, 0);
    init_traced(&l, &m);
    advlock_sim_add_script(&sim, holder, 3, NULL);
    advlock_sim_add_script(&sim, waiter, 2, NULL);
    run_clean();
    assert_true(traced(&l, "{\"t\":104,\"clock\":104,\"client\":1,\"event\":\"query\""));
    assert_true(traced(&l, "\"attempt\":2"));
}

/* The cycler's hold is --hold plus the command's start and reaping. */
static void the_cycler_holds_for_the_command_too(void **state)
{
    (void)state;
    static const char *const names[] = {"a"};
    advlock_sim_cycler cy = herd_cycler(names, 1000);
    static lines l;
    advlock_sim_model m = constant_model(0, 0, 0, 0, 0, 20000);
    init_traced(&l, &m);
    assert_int_equal(advlock_sim_add_cycler(&sim, &cy), 0);
    run_clean();
    assert_true(traced(&l, "{\"t\":70,\"clock\":70,\"client\":0,\"event\":\"released\""));
}

/* The same model and seed give the same run; the run's invariants hold
 * with every distribution spread out. */
static void a_modelled_herd_replays_by_seed(void **state)
{
    (void)state;
    static const char *const names[] = {"herd"};
    advlock_sim_cycler cy = herd_cycler(names, 10000);
    advlock_sim_model m;
    memset(&m, 0, sizeof m);
    m.launch = squares();
    m.startup = squares();
    m.statement = (advlock_sim_dist){3, {20, 40, 900}};
    m.servers = 2;
    m.wakeup = (advlock_sim_dist){3, {0, 200, 30000}};
    m.command = (advlock_sim_dist){2, {5000, 90000}};
    advlock_sim_stats first;
    for (int run = 0; run < 2; run++) {
        advlock_sim_config cfg;
        advlock_sim_config_default(&cfg);
        cfg.seed = 99;
        assert_int_equal(advlock_sim_init(&sim, &cfg), 0);
        for (int c = 0; c < 40; c++)
            assert_true(advlock_sim_add_cycler(&sim, &cy) >= 0);
        assert_int_equal(advlock_sim_set_model(&sim, &m), 0);
        run_clean();
        advlock_sim_stats st = advlock_sim_get_stats(&sim);
        assert_int_equal(st.outcomes[ADVLOCK_ACQUIRED] + st.outcomes[ADVLOCK_TIMED_OUT], 40);
        if (run == 0)
            first = st;
        else
            assert_memory_equal(&first, &st, sizeof st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(check_refuses_what_is_not_a_distribution),
        cmocka_unit_test(draws_are_fixed_by_the_seed),
        cmocka_unit_test(draws_follow_the_quantiles),
        cmocka_unit_test(constants_take_one_value_like_the_rest),
        cmocka_unit_test(set_model_checks_its_arguments),
        cmocka_unit_test(a_client_starts_at_its_launch_and_startup),
        cmocka_unit_test(think_time_before_the_first_acquire_is_not_waiting),
        cmocka_unit_test(statements_queue_for_the_servers),
        cmocka_unit_test(timers_fire_late_by_the_wakeup),
        cmocka_unit_test(the_cycler_holds_for_the_command_too),
        cmocka_unit_test(a_modelled_herd_replays_by_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
