/* The simulation driver: scripted and planned runs with exact timings, the
 * trace's determinism, faults, and invariants that catch what they should. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_fake.h"

static int setup(void **state)
{
    *state = malloc(sizeof(advlock_sim));
    return *state == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static const char *const names[] = {"k0", "k1", "k2"};

/* A busy world: 20 clients cycling over 3 keys. */
static void add_cyclers(advlock_sim *sim, int n)
{
    advlock_sim_cycler cy;
    memset(&cy, 0, sizeof cy);
    cy.lock_names = names;
    cy.lock_count = 3;
    cy.cycles = 3;
    cy.think_max_ms = 200;
    cy.hold_max_ms = 300;
    cy.timeout_max_ms = 3000;
    cy.cancel_ppm = 100000;
    cy.cancel_max_ms = 2000;
    for (int i = 0; i < n; i++)
        assert_true(advlock_sim_add_cycler(sim, &cy) >= 0);
}

static void faulty(advlock_sim_config *cfg, uint64_t seed)
{
    advlock_sim_config_default(cfg);
    cfg->seed = seed;
    cfg->latency = (advlock_fake_latency){1, 20, 20000, 300};
    advlock_fake_faults *f = &cfg->faults;
    f->null_ppm = f->error_ppm = f->drop_before_ppm = f->drop_after_ppm = 20000;
    f->drop_detect_max_ms = 1000;
    f->kill_ppm = 200000;
    f->kill_within_ms = 500;
    f->stall_ppm = f->jump_ppm = 100000;
    f->stall_max_ms = 1500;
    f->jump_max_ms = 60000;
}

static void a_waiter_gets_the_lock_within_its_next_backoff(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step holder[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 2500},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 30000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done seen[3];
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    assert_int_equal(advlock_sim_add_script(sim, holder, 3, NULL), 0);
    assert_int_equal(advlock_sim_add_script(sim, waiter, 3, seen), 1);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* Tries at 1, 101, 301, 701, 1501: busy; released at 2500; 2501: ours. */
    assert_int_equal(seen[1].outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[1].attempts, 6);
    assert_int_equal(seen[1].ended_ms, 2501);
    assert_int_equal(seen[2].outcome, ADVLOCK_RELEASED);
    int64_t key;
    advlock_derive_key("m", 1, &key);
    assert_true(seen[1].key == key);
    assert_string_equal(advlock_sim_violation(sim), "");
}

typedef struct service {
    int tries;
    advlock_sim_done log[8];
    int logged;
} service;

/* A service's own policy around the lock: try for 2 s; after a timeout
 * wait 3 s and try again, at most three times; release what it gets. */
static void retrying_service(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                             advlock_sim_step *next)
{
    (void)sim;
    (void)client;
    service *s = state;
    if (last != NULL && last->step.kind != ADVLOCK_SIM_PAUSE)
        s->log[s->logged++] = *last;
    if (last == NULL || (last->step.kind == ADVLOCK_SIM_PAUSE)) {
        s->tries++;
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 2000};
    } else if (last->step.kind == ADVLOCK_SIM_ACQUIRE && last->outcome == ADVLOCK_TIMED_OUT
               && s->tries < 3) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 3000};
    } else if (last->step.kind == ADVLOCK_SIM_ACQUIRE && last->outcome == ADVLOCK_ACQUIRED) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"};
    } else {
        next->kind = ADVLOCK_SIM_STOP;
    }
}

static void a_plan_decides_what_to_do_after_a_timeout(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step holder[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 10000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    service s;
    memset(&s, 0, sizeof s);
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency = (advlock_fake_latency){2, 2, 0, 0}; /* 1 ms each way */
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    advlock_sim_add_script(sim, holder, 3, NULL);
    advlock_sim_add_client(sim, retrying_service, &s);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(s.logged, 4);
    /* Try 1: 0, 102, 304, 706, 1508, 2510 (each answer 2 ms later). */
    assert_int_equal(s.log[0].outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(s.log[0].attempts, 6);
    assert_int_equal(s.log[0].ended_ms, 2512);
    /* Try 2 from 5512: 2.5 s later it has failed six times again. */
    assert_int_equal(s.log[1].outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(s.log[1].started_ms, 5512);
    assert_int_equal(s.log[1].ended_ms, 5512 + 2512);
    /* Try 3 from 11024: the holder let go at 10000 (+1 ms). */
    assert_int_equal(s.log[2].outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(s.log[2].attempts, 1);
    assert_int_equal(s.log[2].ended_ms, 11026);
    assert_int_equal(s.log[3].outcome, ADVLOCK_RELEASED);
}

static void cancel_ends_a_sleep_and_leaves_nothing_held(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step holder[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 30000, .cancel_after_ms = 250},
        /* The lock is free from 5000; cancel while the first try is on the wire. */
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 5000},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 0, .cancel_after_ms = 1},
    };
    advlock_sim_done seen[4];
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency = (advlock_fake_latency){4, 4, 0, 0};
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    advlock_sim_add_script(sim, holder, 3, NULL);
    advlock_sim_add_script(sim, waiter, 4, seen);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(seen[1].outcome, ADVLOCK_CANCELLED);
    assert_int_equal(seen[1].ended_ms, 251);
    assert_int_equal(seen[1].attempts, 2); /* tries at 1 and 105, sleeping till 309 */
    assert_true(seen[1].cancel_sent);
    /* Granted, then undone: the unlock's answer ends it, 4 ms after the grant's. */
    assert_int_equal(seen[3].outcome, ADVLOCK_CANCELLED);
    assert_int_equal(seen[3].ended_ms - seen[3].started_ms, 8);
    assert_string_equal(seen[3].message, "Acquire of lock 'm' was cancelled.");
}

static void a_script_that_keeps_its_lock_is_a_leak(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step keeper[] = {{.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"}};
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_add_script(sim, keeper, 1, NULL);
    assert_int_equal(advlock_sim_run(sim), ADVLOCK_SIM_VIOLATION);
    assert_non_null(strstr(advlock_sim_violation(sim), "leak: at the end client 0 still believes"));
    assert_non_null(strstr(advlock_sim_violation(sim), "seed 1: "));
}

typedef struct rogue {
    int victim;
} rogue;

/* Unlocks the victim's lock on the victim's own session, behind its back. */
static void rogue_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                       advlock_sim_step *next)
{
    (void)client;
    rogue *r = state;
    if (last == NULL) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 50};
        return;
    }
    int64_t key;
    advlock_derive_key("m", 1, &key);
    advlock_fake_result res;
    advlock_fake_db_exec(advlock_sim_db(sim), advlock_sim_client_pid(sim, r->victim),
                         "SELECT pg_advisory_unlock($1)", &key, &res);
    assert_int_equal(res.status, ADVLOCK_FAKE_ROW_TRUE);
    next->kind = ADVLOCK_SIM_STOP;
}

static void a_lock_lost_behind_a_clients_back_is_caught(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step victim[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 100},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    rogue r = {0};
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_add_script(sim, victim, 3, NULL);
    advlock_sim_add_client(sim, rogue_plan, &r);
    assert_int_equal(advlock_sim_run(sim), ADVLOCK_SIM_VIOLATION);
    assert_non_null(strstr(advlock_sim_violation(sim),
                           "t=50 ms, client 1: the lock table says client 0's session holds key"));
}

/* Takes the key on a session of its own, which no client of the simulation owns. */
static void intruder_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                          advlock_sim_step *next)
{
    (void)state;
    (void)client;
    (void)last;
    int pid;
    int64_t key;
    advlock_derive_key("m", 1, &key);
    advlock_fake_result res;
    assert_int_equal(advlock_fake_db_connect(advlock_sim_db(sim), &pid), 0);
    advlock_fake_db_exec(advlock_sim_db(sim), pid, "SELECT pg_try_advisory_lock($1)", &key, &res);
    next->kind = ADVLOCK_SIM_STOP;
}

static void a_lock_held_by_a_session_nobody_owns_is_caught(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step user[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_add_script(sim, user, 2, NULL);
    advlock_sim_add_client(sim, intruder_plan, NULL);
    assert_int_equal(advlock_sim_run(sim), ADVLOCK_SIM_VIOLATION);
    assert_non_null(strstr(advlock_sim_violation(sim), "but belongs to no client"));
}

typedef struct digest {
    EVP_MD_CTX *ctx;
    unsigned long lines;
    int malformed;
} digest;

static const char *const events[] = {"query", "result", "sleep", "acquired", "timed_out",
                                     "released", "not_held", "error", "cancelled"};

static void hash_line(void *user, const char *line, size_t len)
{
    digest *d = user;
    EVP_DigestUpdate(d->ctx, line, len);
    d->lines++;
    /* {"t":N,"clock":N,"client":N,"event":"E","key":"N"...}\n */
    int known = 0;
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        char field[32];
        snprintf(field, sizeof field, "\"event\":\"%s\"", events[i]);
        known |= strstr(line, field) != NULL;
    }
    if (len < 2 || strncmp(line, "{\"t\":", 5) != 0 || line[len - 1] != '\n' || line[len - 2] != '}'
        || strstr(line, ",\"client\":") == NULL || strstr(line, ",\"key\":\"") == NULL || !known
        || memchr(line, '\n', len - 1) != NULL)
        d->malformed++;
}

static unsigned long traced_run(advlock_sim *sim, uint64_t seed, unsigned char out[32])
{
    digest d = {EVP_MD_CTX_new(), 0, 0};
    assert_non_null(d.ctx);
    assert_int_equal(EVP_DigestInit_ex(d.ctx, EVP_sha256(), NULL), 1);
    advlock_sim_config cfg;
    faulty(&cfg, seed);
    cfg.trace = hash_line;
    cfg.trace_user = &d;
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    add_cyclers(sim, 20);
    assert_int_equal(advlock_sim_run(sim), 0);
    unsigned int n;
    EVP_DigestFinal_ex(d.ctx, out, &n);
    EVP_MD_CTX_free(d.ctx);
    assert_int_equal(d.malformed, 0);
    return d.lines;
}

static void the_same_seed_gives_a_byte_identical_trace(void **state)
{
    advlock_sim *sim = *state;
    unsigned char a[32], b[32], c[32];
    unsigned long lines = traced_run(sim, 42, a);
    assert_true(lines > 300);
    assert_int_equal(traced_run(sim, 42, b), lines);
    assert_memory_equal(a, b, 32);
    traced_run(sim, 43, c);
    assert_memory_not_equal(a, c, 32);
}

typedef struct fault_counts {
    int null, error, drop_before, drop_after, killed, skewed;
} fault_counts;

static void count_faults(void *user, const char *line, size_t len)
{
    (void)len;
    fault_counts *f = user;
    f->null += strstr(line, "\"fault\":\"null\"") != NULL;
    f->error += strstr(line, "\"fault\":\"error\"") != NULL;
    f->drop_before += strstr(line, "\"fault\":\"drop_before\"") != NULL;
    f->drop_after += strstr(line, "\"fault\":\"drop_after\"") != NULL;
    f->killed += strstr(line, "\"sqlstate\":\"57P01\"") != NULL;
    long long t, clock;
    if (sscanf(line, "{\"t\":%lld,\"clock\":%lld", &t, &clock) == 2 && t != clock)
        f->skewed = 1;
}

static void every_fault_happens_and_the_invariants_hold(void **state)
{
    advlock_sim *sim = *state;
    fault_counts f = {0};
    advlock_sim_config cfg;
    faulty(&cfg, 7);
    cfg.trace = count_faults;
    cfg.trace_user = &f;
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    add_cyclers(sim, 30);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_true(f.null > 0 && f.error > 0 && f.drop_before > 0 && f.drop_after > 0);
    assert_true(f.killed > 0);
    assert_true(f.skewed);
    advlock_sim_stats st = advlock_sim_get_stats(sim);
    assert_true(st.faults > 0 && st.outcomes[ADVLOCK_FAILED] > 0 && st.outcomes[ADVLOCK_ACQUIRED] > 0);
}

/*
 * A finding about the core, kept as a test: when a cancelled acquire's
 * try-lock was granted and the undoing unlock then answers SQL NULL, the
 * machine ends CANCELLED ("no lock is held") although the unlock may not
 * have happened (here it did not: a NULL is what a strict function returns
 * without doing anything). The leak invariant catches it. When the core
 * treats that NULL like a failed undo, this test fails: turn it around.
 */
/* Found by the campaign (seed 77315): a cancelled grant whose undoing unlock
 * answers NULL must not be reported CANCELLED, since the lock may be held. */
static void null_while_undoing_a_cancel_reports_the_doubt(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step step[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 1000, .cancel_after_ms = 1},
        {.kind = ADVLOCK_SIM_RECONNECT},
    };
    int in_doubt = 0;
    for (uint64_t seed = 1; seed <= 32; seed++) {
        advlock_sim_config cfg;
        advlock_sim_config_default(&cfg);
        cfg.seed = seed;
        cfg.latency = (advlock_fake_latency){10, 10, 0, 0};
        cfg.faults.null_ppm = 500000;
        assert_int_equal(advlock_sim_init(sim, &cfg), 0);
        advlock_sim_done done[2];
        advlock_sim_add_script(sim, step, 2, done);
        if (advlock_sim_run(sim) != 0)
            fail_msg("%s", advlock_sim_violation(sim));
        if (done[0].outcome == ADVLOCK_FAILED && done[0].error == ADVLOCK_ENULL
            && strstr(done[0].message, "pg_advisory_unlock") != NULL) {
            assert_non_null(strstr(done[0].message, "the lock may still be held"));
            in_doubt++;
        }
    }
    assert_true(in_doubt > 0);
}

static void misuse_and_bad_arguments(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency.min_ms = 5;
    cfg.latency.max_ms = 4;
    assert_int_equal(advlock_sim_init(sim, &cfg), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_init(NULL, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    assert_int_equal(advlock_sim_add_client(sim, NULL, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_add_script(sim, NULL, 1, NULL), ADVLOCK_EINVAL);
    advlock_sim_cycler cy;
    memset(&cy, 0, sizeof cy);
    assert_int_equal(advlock_sim_add_cycler(sim, &cy), ADVLOCK_EINVAL); /* no names */
    const advlock_sim_step bad[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "\xff"},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = -1},
    };
    advlock_sim_done seen[2];
    for (int i = 0; i < ADVLOCK_SIM_MAX_CLIENTS; i++)
        assert_int_equal(advlock_sim_add_script(sim, i == 0 ? bad : NULL, i == 0 ? 2 : 0,
                                                i == 0 ? seen : NULL),
                         i);
    assert_int_equal(advlock_sim_add_script(sim, NULL, 0, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(seen[0].outcome, ADVLOCK_FAILED);
    assert_int_equal(seen[0].error, ADVLOCK_EUTF8);
    assert_int_equal(seen[1].error, ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_run(sim), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_add_script(sim, NULL, 0, NULL), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_client_pid(sim, 99), ADVLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_waiter_gets_the_lock_within_its_next_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(a_plan_decides_what_to_do_after_a_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_ends_a_sleep_and_leaves_nothing_held, setup, teardown),
        cmocka_unit_test_setup_teardown(a_script_that_keeps_its_lock_is_a_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lock_lost_behind_a_clients_back_is_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lock_held_by_a_session_nobody_owns_is_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(the_same_seed_gives_a_byte_identical_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(every_fault_happens_and_the_invariants_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(
            null_while_undoing_a_cancel_reports_the_doubt, setup, teardown),
        cmocka_unit_test_setup_teardown(misuse_and_bad_arguments, setup, teardown),
    };
    return cmocka_run_group_tests_name("simulation", tests, NULL, NULL);
}
