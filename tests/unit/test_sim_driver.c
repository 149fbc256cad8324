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

/* A finished step in words, as a user renders one: the report and the
 * server's words through the core's advlock_describe(). */
static const char *described(const advlock_sim_done *d, char *buf, size_t size)
{
    const char *name = d->step.lock_name;
    const char *said = d->server_message[0] != '\0' ? d->server_message : NULL;
    assert_true(advlock_describe(&d->report, name, strlen(name), said, buf, size) >= 0);
    return buf;
}

/* Adds a client that takes "m", keeps it hold_ms and lets it go, with its
 * steps written into holder, which must outlive the run. Returns as
 * advlock_sim_add_script. */
static int add_holder(advlock_sim *sim, advlock_sim_step holder[3], int64_t hold_ms)
{
    holder[0] = (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"};
    holder[1] = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = hold_ms};
    holder[2] = (advlock_sim_step){.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"};
    return advlock_sim_add_script(sim, holder, 3, NULL);
}

/* Adds a client that asks for "m" 1 ms in, for timeout_ms, with options o,
 * recording its steps in done (when not NULL); the steps are written into
 * waiter, which must outlive the run. */
static void add_waiter(advlock_sim *sim, advlock_sim_step waiter[2], int64_t timeout_ms,
                       const advlock_options *o, advlock_sim_done *done)
{
    waiter[0] = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1};
    waiter[1] =
        (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = timeout_ms};
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, waiter, 2, done), o);
}

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

/* The statements a run sent, counted from its trace. */
typedef struct statement_count {
    int session_rows, guarded;
} statement_count;

/* The trace's line as a C string: it is not NUL-terminated, and what
 * follows it in the driver's buffer is an older, longer line's end. */
static const char *line_string(const char *line, size_t len, char *buf, size_t size)
{
    size_t n = len < size - 1 ? len : size - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    return buf;
}

static void count_statements(void *user, const char *raw, size_t len)
{
    char buf[4096];
    const char *line = line_string(raw, len, buf, sizeof buf);
    statement_count *n = user;
    if (strstr(line, "\"event\":\"query\"") == NULL)
        return;
    n->session_rows += strstr(line, "pg_catalog.pg_is_in_recovery()") != NULL;
    n->guarded += strstr(line, "current_setting('advlock.session', true) = $2") != NULL
                  || strstr(line, "current_setting('advlock.session', true) = $3") != NULL;
}

static void run_sessions(advlock_sim *sim, int sessions, const advlock_sim_step *steps,
                         size_t count, advlock_sim_done *seen, statement_count *n)
{
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.sessions = sessions;
    cfg.trace = count_statements;
    cfg.trace_user = n;
    memset(n, 0, sizeof *n);
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    assert_int_equal(advlock_sim_add_script(sim, steps, count, seen), 0);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_string_equal(advlock_sim_violation(sim), "");
}

/* Clients' engines check their sessions: one session row per server
 * session, then the plain rows on a direct connection and the
 * guarded ones behind a proxy, every action judged by the policy model. */
static void sessions_are_checked_once_and_guarded_behind_a_proxy(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step steps[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done seen[4];
    statement_count n;
    run_sessions(sim, ADVLOCK_SIM_SESSIONS_DIRECT, steps, 4, seen, &n);
    assert_int_equal(n.session_rows, 1);
    assert_int_equal(n.guarded, 0);
    assert_int_equal(seen[2].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[2].report.sql, ADVLOCK_SQL_TRY_LOCK);
    run_sessions(sim, ADVLOCK_SIM_SESSIONS_PROXIED, steps, 4, seen, &n);
    assert_int_equal(n.session_rows, 1);
    assert_int_equal(n.guarded, 4);
    assert_int_equal(seen[2].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[2].report.sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    assert_int_equal(seen[3].report.outcome, ADVLOCK_RELEASED);
    /* Every engine checks its session: NONE is DIRECT. */
    run_sessions(sim, ADVLOCK_SIM_SESSIONS_NONE, steps, 4, seen, &n);
    assert_int_equal(n.session_rows, 1);
    assert_int_equal(n.guarded, 0);
}

/* Behind a proxy, a claim made inside a block that rolls back is undone:
 * the engine checks the session again after the block, and the lock taken
 * there cannot be released (ESESSION at that check, nothing sent: the
 * session holds a lock but is not claimed, the lock may still be held)
 * until a new connection, whose fresh session value is checked again. */
static void a_claim_rolled_back_fails_esession_until_a_new_connection(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step steps[] = {
        {.kind = ADVLOCK_SIM_BEGIN},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "t"},
        {.kind = ADVLOCK_SIM_ROLLBACK},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "t"},
        {.kind = ADVLOCK_SIM_RECONNECT},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "t"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "t"},
    };
    advlock_sim_done seen[7];
    statement_count n;
    run_sessions(sim, ADVLOCK_SIM_SESSIONS_PROXIED, steps, 7, seen, &n);
    assert_int_equal(seen[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[3].report.outcome, ADVLOCK_FAILED);
    assert_int_equal(seen[3].report.failure, ADVLOCK_ESESSION);
    assert_int_equal(seen[3].report.sql, ADVLOCK_SQL_UNLOCK_GUARDED);
    assert_int_equal(seen[3].report.elapsed_ms, 0);
    assert_int_equal(n.guarded, 2 + 1); /* two tries, one unlock */
    assert_int_equal(seen[5].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[6].report.outcome, ADVLOCK_RELEASED);
    assert_int_equal(n.session_rows, 3); /* the first, after the block, the new one */
}

static void a_waiter_gets_the_lock_within_its_next_backoff(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 30000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done seen[3] = {0};
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    assert_int_equal(add_holder(sim, holder, 2500), 0);
    assert_int_equal(advlock_sim_add_script(sim, waiter, 3, seen), 1);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* Tries at 1, 101, 301, 701, 1501: busy; released at 2500; 2501: ours. */
    assert_int_equal(seen[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[1].report.attempts, 6);
    assert_int_equal(seen[1].ended_ms, 2501);
    assert_int_equal(seen[2].report.outcome, ADVLOCK_RELEASED);
    int64_t key;
    advlock_derive_key("m", 1, &key);
    assert_true(seen[1].report.key == key);
    assert_string_equal(advlock_sim_violation(sim), "");
}

typedef struct service {
    int tries;
    advlock_sim_done log[8];
    int logged;
} service;

/* A service's own policy around the lock: try for 2 s; after a timeout
 * wait 3 s and try again, at most three times; release what it gets. */
static void retrying_service(void *state, advlock_sim *sim, int client,
                             const advlock_sim_done *last, advlock_sim_step *next)
{
    (void)sim;
    (void)client;
    service *s = state;
    if (last != NULL && last->step.kind != ADVLOCK_SIM_PAUSE)
        s->log[s->logged++] = *last;
    if (last == NULL || (last->step.kind == ADVLOCK_SIM_PAUSE)) {
        s->tries++;
        *next =
            (advlock_sim_step){.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 2000};
    } else if (last->step.kind == ADVLOCK_SIM_ACQUIRE && last->report.outcome == ADVLOCK_TIMED_OUT
               && s->tries < 3) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 3000};
    } else if (last->step.kind == ADVLOCK_SIM_ACQUIRE && last->report.outcome == ADVLOCK_ACQUIRED) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"};
    } else {
        next->kind = ADVLOCK_SIM_STOP;
    }
}

static void a_plan_decides_what_to_do_after_a_timeout(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    service s;
    memset(&s, 0, sizeof s);
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency = (advlock_fake_latency){2, 2, 0, 0}; /* 1 ms each way */
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    add_holder(sim, holder, 10000);
    advlock_sim_add_client(sim, retrying_service, &s);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(s.logged, 4);
    /* Try 1: the session row at 0, then 2, 104, 306, 708, 1510, 2512
     * (each answer 2 ms later). */
    assert_int_equal(s.log[0].report.outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(s.log[0].report.attempts, 6);
    assert_int_equal(s.log[0].ended_ms, 2514);
    /* Try 2 from 5514, the session checked: 2.5 s later it has failed six
     * times again. */
    assert_int_equal(s.log[1].report.outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(s.log[1].started_ms, 5514);
    assert_int_equal(s.log[1].ended_ms, 5514 + 2512);
    /* Try 3 from 11026: the holder let go at 10002 (+1 ms). */
    assert_int_equal(s.log[2].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(s.log[2].report.attempts, 1);
    assert_int_equal(s.log[2].ended_ms, 11028);
    assert_int_equal(s.log[3].report.outcome, ADVLOCK_RELEASED);
}

static void cancel_ends_a_sleep_and_leaves_nothing_held(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE,
         .lock_name = "m",
         .timeout_ms = 30000,
         .cancel_after_ms = 250},
        /* The lock is free from 5000; cancel while the first try is on the wire. */
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 5000},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 0, .cancel_after_ms = 1},
    };
    advlock_sim_done seen[4] = {0};
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency = (advlock_fake_latency){4, 4, 0, 0};
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    add_holder(sim, holder, 5000);
    advlock_sim_add_script(sim, waiter, 4, seen);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(seen[1].report.outcome, ADVLOCK_CANCELLED);
    assert_int_equal(seen[1].ended_ms, 251);
    assert_int_equal(seen[1].report.attempts, 2); /* tries at 1 and 105, sleeping till 309 */
    assert_true(seen[1].cancel_sent);
    /* Granted, then undone: the unlock's answer ends it, 4 ms after the grant's. */
    assert_int_equal(seen[3].report.outcome, ADVLOCK_CANCELLED);
    assert_int_equal(seen[3].ended_ms - seen[3].started_ms, 8);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_string_equal(described(&seen[3], text, sizeof text),
                        "Acquire of lock 'm' was cancelled.");
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

static const char *const events[] = {"query",    "result",   "sleep", "acquired", "timed_out",
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
    assert_true(st.faults > 0 && st.outcomes[ADVLOCK_FAILED] > 0
                && st.outcomes[ADVLOCK_ACQUIRED] > 0);
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
        /* cancelled with the try in flight, after the session row */
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 1000, .cancel_after_ms = 11},
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
        if (done[0].report.outcome == ADVLOCK_FAILED && done[0].report.failure == ADVLOCK_ENULL
            && done[0].report.sql == ADVLOCK_SQL_UNLOCK) {
            assert_int_equal(done[0].report.detail, ADVLOCK_DETAIL_UNDO_CANCELLED);
            char text[ADVLOCK_MESSAGE_MAX];
            assert_non_null(
                strstr(described(&done[0], text, sizeof text), "the lock may still be held"));
            in_doubt++;
        }
    }
    assert_true(in_doubt > 0);
}

/* ---- options: server-side waits, modes, scopes, jitter, diagnostics ---------- */

static advlock_options with_wait(void)
{
    advlock_options o;
    advlock_options_init(&o);
    o.wait = ADVLOCK_WAIT_SERVER;
    return o;
}

static void fixed_latency(advlock_sim *sim, int64_t rtt)
{
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency = (advlock_fake_latency){rtt, rtt, 0, 0};
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
}

static void server_wait_hands_over_within_one_round_trip(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 30000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done seen[3] = {0};
    advlock_options o = with_wait();
    fixed_latency(sim, 10); /* 5 ms each way */
    add_holder(sim, holder, 1000);
    assert_int_equal(advlock_sim_set_options(sim, advlock_sim_add_script(sim, waiter, 3, seen), &o),
                     0);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* The holder's unlock (after its session row and try) reaches the
     * server at 1025 and the server hands the lock over there and then:
     * the waiter knows 5 ms later, with a try and one wait sent (polling
     * would have tried again only at 1551). */
    assert_int_equal(seen[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(seen[1].ended_ms, 1030);
    assert_int_equal(seen[1].report.attempts, 2);
    advlock_sim_stats st = advlock_sim_get_stats(sim);
    assert_int_equal(st.waits, 1);
    assert_int_equal(st.cancels, 0);
}

static void server_wait_times_out_at_its_deadline_by_lock_timeout(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    advlock_sim_step waiter[2];
    advlock_sim_done seen[2] = {0};
    advlock_options o = with_wait();
    fixed_latency(sim, 10);
    add_holder(sim, holder, 10000);
    add_waiter(sim, waiter, 2000, &o, seen);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* The try answers false at 11; the wait reaches the server at 16,
     * bounded by the 1990 ms left: the server ends it at 2006 (55P03), the
     * client hears at 2011, and one more round trip unlocks in case a grant
     * slipped in as the timeout struck (none did). No cancel request. */
    assert_int_equal(seen[1].report.outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(seen[1].ended_ms, 2021);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_string_equal(described(&seen[1], text, sizeof text),
                        "Could not acquire migration lock for 'm' within 2s.");
    assert_string_equal(seen[1].report.sqlstate, "");
    assert_int_equal(advlock_sim_get_stats(sim).cancels, 0);
}

/* PostgreSQL's lock timeout is delivered like a cancel: if it strikes in
 * the instant a holder lets go, the waiter's statement ends with 55P03 and
 * the lock granted. With 5 s each way, each client's session row first:
 * the waiter's try is refused at 15001, its wait reaches the server at
 * 25001 bounded by the 2000 ms left, and the holder's unlock, sent at
 * 22001, reaches the server at 27001, just before the timer. The unlock
 * after the 55P03 finds the grant and gives it back (42001); the lock is
 * free for the next (the run's leak checks agree). */
static void server_wait_grant_racing_the_lock_timeout_is_given_back(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    advlock_sim_step waiter[2];
    const advlock_sim_step latecomer[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 27002},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done seen[2] = {0}, late[3] = {0};
    advlock_options o = with_wait();
    fixed_latency(sim, 10000);
    add_holder(sim, holder, 2001);
    add_waiter(sim, waiter, 22000, &o, seen);
    advlock_sim_add_script(sim, latecomer, 3, late);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(seen[1].report.outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(seen[1].ended_ms, 42001);
    assert_int_equal(late[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(late[1].ended_ms, 47002);
    /* With 5 s each way, the grace after the deadline (22501) passes before
     * any answer: cancels go out every 250 ms until the 55P03 comes back
     * (32001), 38 of them, each landing later on an idle session. */
    assert_int_equal(advlock_sim_get_stats(sim).cancels, 38);
}

static void server_waits_that_deadlock_end_after_deadlock_timeout(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step a[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "k1"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 10},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "k2", .timeout_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "k2"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "k1"},
    };
    const advlock_sim_step b[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "k2"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 10},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "k1", .timeout_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "k1"},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "k2"},
    };
    advlock_sim_done da[5], db[5];
    advlock_options o = with_wait();
    fixed_latency(sim, 0);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, a, 5, da), &o);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, b, 5, db), &o);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* PostgreSQL checks for deadlock once deadlock_timeout (1 s) has passed:
     * the first to wait is chosen; its release of k1 lets the other in. */
    assert_int_equal(da[2].report.outcome, ADVLOCK_FAILED);
    assert_int_equal(da[2].report.failure, ADVLOCK_ESERVER);
    assert_string_equal(da[2].report.sqlstate, "40P01");
    assert_int_equal(da[2].ended_ms, 1010);
    assert_int_equal(da[3].report.outcome, ADVLOCK_NOT_HELD);
    assert_int_equal(db[2].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(db[2].ended_ms, 1010);
}

static void shared_holders_coexist_and_exclusive_waits_for_both(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step reader[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    const advlock_sim_step writer[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done r1[3], r2[3], w[3];
    advlock_options shared;
    advlock_options_init(&shared);
    shared.mode = ADVLOCK_SHARED;
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, reader, 3, r1), &shared);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, reader, 3, r2), &shared);
    advlock_sim_add_script(sim, writer, 3, w);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(r1[0].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(r2[0].report.outcome, ADVLOCK_ACQUIRED); /* both at once */
    assert_int_equal(r2[2].report.outcome, ADVLOCK_RELEASED);
    /* Tries at 1, 101, 301, 701 find readers; 1501 finds the key free. */
    assert_int_equal(w[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(w[1].ended_ms, 1501);
}

static void a_transaction_lock_lasts_until_commit(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step txn[] = {
        {.kind = ADVLOCK_SIM_BEGIN},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 500},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 500},
        {.kind = ADVLOCK_SIM_COMMIT},
    };
    const advlock_sim_step other[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_sim_done t[6], o[3];
    advlock_options xact;
    advlock_options_init(&xact);
    xact.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, txn, 6, t), &xact);
    advlock_sim_add_script(sim, other, 3, o);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_string_equal(t[0].command_tag, "BEGIN");
    assert_int_equal(t[1].report.outcome, ADVLOCK_ACQUIRED);
    /* "Release" sends nothing: the lock is the transaction's until COMMIT. */
    assert_int_equal(t[3].report.outcome, ADVLOCK_ENDS_WITH_TRANSACTION);
    assert_int_equal(t[3].ended_ms, 500);
    assert_string_equal(t[5].command_tag, "COMMIT");
    assert_int_equal(t[5].ended_ms, 1000);
    /* Tries at 1, 101, 301, 701 are refused until COMMIT at 1000. */
    assert_int_equal(o[1].report.outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(o[1].ended_ms, 1501);
}

static void a_transaction_lock_outside_a_block_is_refused(void **state)
{
    advlock_sim *sim = *state;
    const advlock_sim_step forgot_begin[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m"},
    };
    advlock_sim_done done[1];
    advlock_options xact;
    advlock_options_init(&xact);
    xact.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, forgot_begin, 1, done), &xact);
    /* The engine will not start it: the lock would end with its statement. */
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(done[0].report.outcome, ADVLOCK_FAILED);
    assert_int_equal(done[0].error, ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_get_stats(sim).queries, 0);
}

static void diagnostics_name_the_holder_from_the_lock_table(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    advlock_sim_step waiter[2];
    advlock_sim_done seen[2] = {0};
    advlock_options o;
    advlock_options_init(&o);
    o.diagnose = 1;
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    add_holder(sim, holder, 5000);
    add_waiter(sim, waiter, 2000, &o, seen);
    assert_int_equal(advlock_sim_run(sim), 0);
    char want[160];
    snprintf(want, sizeof want,
             "Could not acquire migration lock for 'm' within 2s. Held by pid %d "
             "(application '', state idle) for 2s.",
             advlock_sim_client_pid(sim, 0));
    assert_int_equal(seen[1].report.outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(seen[1].ended_ms, 2501); /* the last try at 2501 ms, held since 0 */
    assert_int_equal(seen[1].report.detail, ADVLOCK_DETAIL_DIAGNOSED);
    assert_int_equal(seen[1].report.holder_pid, advlock_sim_client_pid(sim, 0));
    assert_int_equal(seen[1].report.holder_seconds, 2);
    assert_int_equal(seen[1].report.holder_state, ADVLOCK_BACKEND_IDLE);
    assert_int_equal(seen[1].report.other_holders, 0);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_string_equal(described(&seen[1], text, sizeof text), want);
}

typedef struct sleeps {
    int64_t ms[2][64];
    int n[2];
} sleeps;

static void record_sleeps(void *user, const char *line, size_t len)
{
    (void)len;
    sleeps *s = user;
    int client;
    long long ms;
    const char *p = strstr(line, "\"ms\":");
    if (strstr(line, "\"event\":\"sleep\"") == NULL || p == NULL
        || sscanf(strstr(line, "\"client\":"), "\"client\":%d", &client) != 1 || client > 1
        || sscanf(p, "\"ms\":%lld", &ms) != 1 || s->n[client] == 64)
        return;
    s->ms[client][s->n[client]++] = ms;
}

/* Two jittered clients against a holder that never lets go in time. */
static void jittered_run(advlock_sim *sim, uint64_t seed, sleeps *s, advlock_sim_done done[2][2])
{
    advlock_sim_step holder[3];
    advlock_sim_step waiter[2];
    memset(s, 0, sizeof *s);
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.seed = seed;
    cfg.trace = record_sleeps;
    cfg.trace_user = s;
    advlock_options o;
    advlock_options_init(&o);
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    assert_int_equal(advlock_sim_init(sim, &cfg), 0);
    add_waiter(sim, waiter, 5000, &o, done[0]);
    add_waiter(sim, waiter, 5000, &o, done[1]);
    add_holder(sim, holder, 60000);
    assert_int_equal(advlock_sim_run(sim), 0);
}

static void full_jitter_is_seeded_per_client_and_ends_at_the_deadline(void **state)
{
    advlock_sim *sim = *state;
    static sleeps a, b;
    advlock_sim_done done[2][2];
    jittered_run(sim, 5, &a, done);
    for (int c = 0; c < 2; c++) {
        assert_true(a.n[c] > 5);
        for (int i = 0; i < a.n[c]; i++)
            assert_in_range(a.ms[c][i], 0, i < 4 ? 100 << i : 1000);
        /* Holder still there: the final try is at the deadline, 1 + 5000. */
        assert_int_equal(done[c][1].report.outcome, ADVLOCK_TIMED_OUT);
        assert_int_equal(done[c][1].ended_ms, 5001);
    }
    /* Clients that start together no longer retry together. */
    assert_memory_not_equal(a.ms[0], a.ms[1], 4 * sizeof a.ms[0][0]);
    jittered_run(sim, 5, &b, done); /* the seed replays every sleep */
    assert_memory_equal(&a, &b, sizeof a);
    jittered_run(sim, 6, &b, done);
    assert_memory_not_equal(a.ms[0], b.ms[0], 4 * sizeof a.ms[0][0]);
}

typedef struct meddler {
    int victim;
    int rc;
} meddler;

/* Tries to change another client's options while it is mid-acquire. */
static void meddling_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                          advlock_sim_step *next)
{
    (void)client;
    meddler *m = state;
    if (last == NULL) {
        *next = (advlock_sim_step){.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 50};
        return;
    }
    advlock_options o;
    advlock_options_init(&o);
    m->rc = advlock_sim_set_options(sim, m->victim, &o);
    next->kind = ADVLOCK_SIM_STOP;
}

static void options_are_checked_and_fixed_during_a_step(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_ACQUIRE, .lock_name = "m", .timeout_ms = 5000},
        {.kind = ADVLOCK_SIM_RELEASE, .lock_name = "m"},
    };
    advlock_options o;
    advlock_options_init(&o);
    assert_int_equal(advlock_sim_init(sim, NULL), 0);
    assert_int_equal(advlock_sim_set_options(sim, 0, &o), ADVLOCK_EINVAL); /* no such client */
    add_holder(sim, holder, 1000);
    assert_int_equal(advlock_sim_set_options(NULL, 0, &o), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_set_options(sim, 0, NULL), ADVLOCK_EINVAL);
    o.mode = (advlock_mode)9;
    assert_int_equal(advlock_sim_set_options(sim, 0, &o), ADVLOCK_EINVAL);
    int victim = advlock_sim_add_script(sim, waiter, 2, NULL);
    meddler m = {victim, 1};
    advlock_sim_add_client(sim, meddling_plan, &m);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(m.rc, ADVLOCK_EMISUSE);
}

/* A fake server where one session holds "m", and a machine that waits on
 * the server has just begun to acquire it for another: tests that
 * drive it from there by hand. */
typedef struct held_m {
    advlock_fake_db db;
    int holder, waiter;
    int64_t key;
    advlock_machine m;
} held_m;

static void start_waiting_for_held_m(held_m *h)
{
    advlock_fake_result r;
    advlock_fake_db_init(&h->db);
    advlock_fake_db_connect(&h->db, &h->holder);
    advlock_fake_db_connect(&h->db, &h->waiter);
    advlock_derive_key("m", 1, &h->key);
    advlock_fake_db_exec(&h->db, h->holder, "SELECT pg_try_advisory_lock($1)", &h->key, &r);
    advlock_options o = with_wait();
    advlock_machine_init(&h->m);
    advlock_set_options(&h->m, &o);
    advlock_start_acquire(&h->m, "m", 1, 60000, 0);
}

/*
 * A cancel request that reaches the server before the query it is meant to
 * cancel finds the session idle, and PostgreSQL ignores it (a cancel for an
 * idle backend is discarded). A query delayed in the network and a cancel
 * of the caller's are enough. The machine keeps a deadline 250 ms after each
 * cancel it sent and asks again while the answer is outstanding: the second
 * request meets the waiting statement and ends it; the unlock after the
 * 57014 finds nothing granted, and the acquire ends CANCELLED.
 */
static void a_cancel_that_overtakes_its_query_is_asked_for_again(void **state)
{
    (void)state;
    static held_m h;
    advlock_fake_result r;
    start_waiting_for_held_m(&h);
    advlock_fake_db_exec(&h.db, h.waiter, advlock_next_action(&h.m).sql_text, &h.key, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE); /* the try: busy */
    advlock_on_result(&h.m, ADVLOCK_RESULT_FALSE, NULL, NULL, 0);
    advlock_action a = advlock_next_action(&h.m);
    const int64_t params[2] = {h.key, a.param2};
    advlock_cancel(&h.m, 1); /* the caller's cancel; the wait is held up on the way */
    assert_int_equal(advlock_next_action(&h.m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(advlock_fake_db_cancel(&h.db, h.waiter), 0); /* idle: nothing to cancel */
    advlock_on_cancel_sent(&h.m, 11);
    advlock_fake_db_exec_params(&h.db, h.waiter, a.sql_text, params, 2, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_WAITING); /* the query arrives, and waits */
    a = advlock_next_action(&h.m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.wake_at_ms, 11 + 250); /* still a deadline: the repeat */
    advlock_on_timer(&h.m, 260);
    assert_int_equal(advlock_next_action(&h.m).kind, ADVLOCK_ACTION_QUERY); /* not yet */
    advlock_on_timer(&h.m, 261);
    assert_int_equal(advlock_next_action(&h.m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(advlock_fake_db_cancel(&h.db, h.waiter), 1); /* this one lands on the wait */
    advlock_on_cancel_sent(&h.m, 262);
    assert_int_equal(advlock_fake_db_poll(&h.db, h.waiter, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    advlock_on_result(&h.m, ADVLOCK_RESULT_SERVER_ERROR, r.sqlstate, r.message, 270);
    a = advlock_next_action(&h.m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.sql, ADVLOCK_SQL_UNLOCK);
    advlock_fake_db_exec(&h.db, h.waiter, a.sql_text, &h.key, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE); /* nothing was granted */
    advlock_on_result(&h.m, ADVLOCK_RESULT_FALSE, NULL, NULL, 271);
    a = advlock_next_action(&h.m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(a.report->outcome, ADVLOCK_CANCELLED);
    assert_string_equal(a.report->sqlstate, "");
}

typedef struct lines {
    char text[16][96];
    int n;
} lines;

/* Keeps client 1's events in short form: "event result sql-function". */
static void keep_client_1(void *user, const char *bytes, size_t len)
{
    char buf[1024];
    const char *line = line_string(bytes, len, buf, sizeof buf);
    lines *l = user;
    char event[24] = "", result[8] = "", sql[40] = "";
    if (strstr(line, "\"client\":1,") == NULL || l->n == 16)
        return;
    sscanf(strstr(line, "\"event\":\""), "\"event\":\"%23[a-z_]", event);
    if (strstr(line, "\"result\":\"") != NULL)
        sscanf(strstr(line, "\"result\":\""), "\"result\":\"%7[a-z]", result);
    if (strstr(line, "\"sql\":\"SELECT ") != NULL)
        sscanf(strstr(line, "\"sql\":\"SELECT "), "\"sql\":\"SELECT %39[a-z_]", sql);
    snprintf(l->text[l->n++], sizeof l->text[0], "%s %s %s", event, result, sql);
}

/* PostgreSQL grants a waiter when its holder lets go; if the caller's
 * cancel lands before the waiter's backend has finished the statement, it
 * answers 57014 with the lock granted. The driver models that moment; the
 * machine's unlock after a 57014 finds the lock and gives it back. */
static void a_grant_hidden_by_the_cancels_57014_is_given_back(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_step holder[3];
    const advlock_sim_step waiter[] = {
        {.kind = ADVLOCK_SIM_PAUSE, .pause_ms = 1},
        {.kind = ADVLOCK_SIM_ACQUIRE,
         .lock_name = "m",
         .timeout_ms = 60000,
         .cancel_after_ms = 999},
    };
    advlock_sim_done seen[2] = {0};
    static lines l;
    memset(&l, 0, sizeof l);
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.trace = keep_client_1;
    cfg.trace_user = &l;
    advlock_options o = with_wait();
    assert_int_equal(advlock_sim_init(sim, &cfg), 0); /* no latency: all at 1000 ms */
    add_holder(sim, holder, 1000);
    advlock_sim_set_options(sim, advlock_sim_add_script(sim, waiter, 2, seen), &o);
    assert_int_equal(advlock_sim_run(sim), 0);
    /* The session row first, then the try, the wait and its cancel. */
    static const char *const story[] = {
        "query  pg_catalog", "result true ",      "query  pg_try_advisory_lock",
        "result false ",     "query  pg_catalog", "waiting  ",
        "cancel_query  ",    "result error ",     "query  pg_advisory_unlock",
        "result true ",      "cancelled  ",
    };
    for (int i = 0; i < l.n && i < 11; i++)
        assert_string_equal(l.text[i], story[i]);
    assert_int_equal(l.n, 11);
    assert_int_equal(seen[1].report.outcome, ADVLOCK_CANCELLED);
    assert_int_equal(seen[1].ended_ms, 1000);
}

/*
 * A 57014 the machine did not ask for (statement_timeout, or a cancel
 * request of an earlier operation landing late) can hide a grant just as the
 * machine's own cancel can: PostgreSQL grants the waiting pg_advisory_lock,
 * then the interrupt ends the statement with 57014. In session scope the
 * machine unlocks once, giving the grant back, and only then reports the
 * failure, with the 57014 and the server's words.
 */
static void an_unrequested_57014_gives_back_the_grant_it_hid(void **state)
{
    (void)state;
    static held_m h;
    advlock_fake_result r;
    start_waiting_for_held_m(&h);
    int held;
    advlock_on_result(&h.m, ADVLOCK_RESULT_FALSE, NULL, NULL, 0); /* the try: busy */
    const int64_t params[2] = {h.key, advlock_next_action(&h.m).param2};
    advlock_fake_db_exec_params(&h.db, h.waiter, advlock_next_action(&h.m).sql_text, params, 2, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_WAITING);
    advlock_fake_db_exec(&h.db, h.holder, "SELECT pg_advisory_unlock($1)", &h.key, &r); /* grants */
    assert_int_equal(advlock_fake_db_cancel(&h.db, h.waiter), 1); /* statement_timeout, now */
    assert_int_equal(advlock_fake_db_poll(&h.db, h.waiter, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    advlock_fake_db_holds(&h.db, h.waiter, h.key, ADVLOCK_FAKE_EXCLUSIVE, &held, NULL);
    assert_int_equal(held, 1); /* the grant the 57014 hides */
    advlock_on_result(&h.m, ADVLOCK_RESULT_SERVER_ERROR, "57014",
                      "canceling statement due to statement timeout", 100);
    advlock_action a = advlock_next_action(&h.m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.sql, ADVLOCK_SQL_UNLOCK);
    advlock_fake_db_exec(&h.db, h.waiter, a.sql_text, &h.key, &r);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db_holds(&h.db, h.waiter, h.key, ADVLOCK_FAKE_EXCLUSIVE, &held, NULL);
    assert_int_equal(held, 0); /* given back */
    advlock_on_result(&h.m, ADVLOCK_RESULT_TRUE, NULL, NULL, 101);
    a = advlock_next_action(&h.m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(a.report->outcome, ADVLOCK_FAILED);
    assert_int_equal(a.report->failure, ADVLOCK_ESERVER);
    assert_string_equal(a.report->sqlstate, "57014");
    assert_int_equal(a.report->sql, ADVLOCK_SQL_LOCK);
    assert_int_equal(a.report->detail, ADVLOCK_DETAIL_NONE);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_true(advlock_describe(a.report, "m", 1, "canceling statement due to statement timeout",
                                 text, sizeof text)
                > 0);
    assert_string_equal(text, "pg_advisory_lock for 'm' failed with SQLSTATE 57014: "
                              "canceling statement due to statement timeout");
}

/* The caller's cancel of a server-side wait ends CANCELLED with no SQLSTATE,
 * in either scope: the 57014 it asked for is no error. */
static void a_cancelled_wait_carries_no_sqlstate(void **state)
{
    (void)state;
    advlock_machine m;
    for (int scope = ADVLOCK_SESSION; scope <= ADVLOCK_TRANSACTION; scope++) {
        advlock_options o = with_wait();
        o.scope = (advlock_scope)scope;
        advlock_machine_init(&m);
        advlock_set_options(&m, &o);
        advlock_start_acquire(&m, "m", 1, 60000, 0);
        advlock_on_result(&m, ADVLOCK_RESULT_FALSE, NULL, NULL, 1); /* the try: busy */
        advlock_cancel(&m, 5);
        advlock_on_cancel_sent(&m, 5);
        advlock_on_result(&m, ADVLOCK_RESULT_SERVER_ERROR, "57014",
                          "canceling statement due to user request", 9);
        if (scope == ADVLOCK_SESSION) /* the unlock after the 57014: nothing was granted */
            advlock_on_result(&m, ADVLOCK_RESULT_FALSE, NULL, NULL, 10);
        advlock_action a = advlock_next_action(&m);
        assert_int_equal(a.report->outcome, ADVLOCK_CANCELLED);
        assert_string_equal(a.report->sqlstate, "");
    }
}

static void misuse_and_bad_arguments(void **state)
{
    advlock_sim *sim = *state;
    advlock_sim_config cfg;
    advlock_sim_config_default(&cfg);
    cfg.latency.min_ms = 5;
    cfg.latency.max_ms = 4;
    assert_int_equal(advlock_sim_init(sim, &cfg), ADVLOCK_EINVAL);
    advlock_sim_config_default(&cfg);
    cfg.sessions = ADVLOCK_SIM_SESSIONS_PROXIED + 1;
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
    advlock_sim_done seen[2] = {0};
    for (int i = 0; i < ADVLOCK_SIM_MAX_CLIENTS; i++)
        assert_int_equal(
            advlock_sim_add_script(sim, i == 0 ? bad : NULL, i == 0 ? 2 : 0, i == 0 ? seen : NULL),
            i);
    assert_int_equal(advlock_sim_add_script(sim, NULL, 0, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_run(sim), 0);
    assert_int_equal(seen[0].report.outcome, ADVLOCK_FAILED);
    assert_int_equal(seen[0].error, ADVLOCK_EUTF8);
    assert_int_equal(seen[1].error, ADVLOCK_EINVAL);
    assert_int_equal(advlock_sim_run(sim), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_add_script(sim, NULL, 0, NULL), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_sim_client_pid(sim, 99), ADVLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_waiter_gets_the_lock_within_its_next_backoff, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_plan_decides_what_to_do_after_a_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_ends_a_sleep_and_leaves_nothing_held, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_script_that_keeps_its_lock_is_a_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lock_lost_behind_a_clients_back_is_caught, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_lock_held_by_a_session_nobody_owns_is_caught, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_same_seed_gives_a_byte_identical_trace, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(every_fault_happens_and_the_invariants_hold, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(null_while_undoing_a_cancel_reports_the_doubt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(server_wait_hands_over_within_one_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(server_wait_times_out_at_its_deadline_by_lock_timeout,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(server_wait_grant_racing_the_lock_timeout_is_given_back,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(server_waits_that_deadlock_end_after_deadlock_timeout,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(shared_holders_coexist_and_exclusive_waits_for_both, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_transaction_lock_lasts_until_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(a_transaction_lock_outside_a_block_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(diagnostics_name_the_holder_from_the_lock_table, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(full_jitter_is_seeded_per_client_and_ends_at_the_deadline,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(options_are_checked_and_fixed_during_a_step, setup,
                                        teardown),
        cmocka_unit_test(a_cancel_that_overtakes_its_query_is_asked_for_again),
        cmocka_unit_test_setup_teardown(a_grant_hidden_by_the_cancels_57014_is_given_back, setup,
                                        teardown),
        cmocka_unit_test(an_unrequested_57014_gives_back_the_grant_it_hid),
        cmocka_unit_test(a_cancelled_wait_carries_no_sqlstate),
        cmocka_unit_test_setup_teardown(misuse_and_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(sessions_are_checked_once_and_guarded_behind_a_proxy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_claim_rolled_back_fails_esession_until_a_new_connection,
                                        setup, teardown),
    };
    return cmocka_run_group_tests_name("simulation", tests, NULL, NULL);
}
