/*
 * Question 2: what does the sans-I/O core itself cost per operation, and
 * does it touch the heap?
 *
 * Instructions, not nanoseconds: on a shared machine a count of executed
 * instructions from valgrind's callgrind is the same run after run. The core
 * is driven against the project's fake database in-process (a real lock
 * table, no I/O); only the core's own calls are counted, because every call
 * into the core goes through a function named measured_<phase>_..., and
 * callgrind collects only inside those (--toggle-collect). The SHA-256 is
 * then taken out: callgrind's inclusive cost of EVP_DigestInit_ex2,
 * EVP_DigestUpdate and EVP_DigestFinal_ex, which only key derivation calls.
 *
 * Phases, each N operations:
 *   acquire  start_acquire + the try-lock's TRUE answer: an uncontended
 *            acquire, i.e. a first attempt, key derivation included. The
 *            core remembers the last name each thread derived, so the
 *            acquires take two names in turn and every one hashes
 *   repeat   the same, always on one name: the derivation is a lookup
 *   release  start_release_key with the acquire's key + the unlock's
 *            answer: releasing what an acquire took costs no hash
 *   retry    a further attempt of a contended acquire: the FALSE answer,
 *            the sleep, the timer, the next try-lock (no key derivation)
 *   derive   advlock_derive_key() alone, two names in turn
 *
 * Heap allocations are counted natively by interposing malloc, calloc and
 * realloc: a call whose return address lies in this executable's code (the
 * project's code, linked in statically) counts as the project's; any other
 * (libcrypto's) is counted apart.
 *
 *     core_cost [--iterations 20000] [--valgrind 1]
 *     core_cost --phase acquire|repeat|release|retry|derive --iterations N   (under callgrind)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "advlock_fake.h"
#include "bench.h"

static const char lock_name[] = "BrighterMigration_public.Outbox";
#define NAME lock_name, sizeof lock_name - 1
/* As long as lock_name: taken in turn with it, every derivation hashes. */
static const char other_name[] = "BrighterMigration_public.Inbox_";
_Static_assert(sizeof other_name == sizeof lock_name, "the two names hash the same bytes");

/* lock_name or other_name, the other one from last time when alternating. */
static const char *name_for(int alternate)
{
    static unsigned turn;
    return alternate && (turn ^= 1) ? other_name : lock_name;
}

/* ---- heap allocations ---------------------------------------------------- */

/* glibc's own entry points, which the interposed functions forward to. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
/* The bounds of this executable's code, from the default linker script. */
extern char __executable_start[], etext[];

static volatile int counting;
static volatile long project_allocations, library_allocations;

static void count_allocation(const void *caller)
{
    if (!counting)
        return;
    if ((const char *)caller >= __executable_start && (const char *)caller < etext)
        project_allocations++;
    else
        library_allocations++;
}

void *malloc(size_t size)
{
    count_allocation(__builtin_return_address(0));
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    count_allocation(__builtin_return_address(0));
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    count_allocation(__builtin_return_address(0));
    return __libc_realloc(p, size);
}

/* ---- the fake server ------------------------------------------------------ */

static advlock_fake_db db; /* large: static */
static int my_pid, other_pid;

/* Runs a query of the machine's on the fake database: what a driver does. */
static advlock_result serve(int pid, advlock_action query)
{
    advlock_fake_result r;
    if (advlock_fake_db_exec(&db, pid, query.sql_text, &query.param, &r) != 0)
        bench_fail("the fake database refused a statement");
    switch (r.status) {
    case ADVLOCK_FAKE_ROW_TRUE: return ADVLOCK_RESULT_TRUE;
    case ADVLOCK_FAKE_ROW_FALSE: return ADVLOCK_RESULT_FALSE;
    case ADVLOCK_FAKE_ROW_NULL: return ADVLOCK_RESULT_NULL;
    default: bench_fail("unexpected fake result %d", (int)r.status);
    }
}

/* ---- the measured calls: everything callgrind counts ---------------------- */

/* noinline: callgrind must see each as a function of its own. External
 * linkage: a static one could be renamed by the optimiser. */
#define MEASURED __attribute__((noinline))

MEASURED advlock_action measured_acquire_start(advlock_machine *m, const char *name,
                                               int64_t timeout, int64_t now);
MEASURED advlock_action measured_acquire_answer(advlock_machine *m, advlock_result r, int64_t now);
MEASURED advlock_action measured_release_start(advlock_machine *m, int64_t key, int64_t now);
MEASURED advlock_action measured_release_answer(advlock_machine *m, advlock_result r, int64_t now);
MEASURED advlock_action measured_retry_answer(advlock_machine *m, advlock_result r, int64_t now);
MEASURED advlock_action measured_retry_wake(advlock_machine *m, int64_t now);
MEASURED int64_t measured_derive_key(const char *name);

advlock_action measured_acquire_start(advlock_machine *m, const char *name, int64_t timeout,
                                      int64_t now)
{
    if (advlock_start_acquire(m, name, sizeof lock_name - 1, timeout, now) != 0)
        bench_fail("advlock_start_acquire failed");
    return advlock_next_action(m);
}

advlock_action measured_acquire_answer(advlock_machine *m, advlock_result r, int64_t now)
{
    (void)advlock_on_result(m, r, NULL, NULL, now);
    return advlock_next_action(m);
}

advlock_action measured_release_start(advlock_machine *m, int64_t key, int64_t now)
{
    if (advlock_start_release_key(m, key, now) != 0)
        bench_fail("advlock_start_release_key failed");
    return advlock_next_action(m);
}

advlock_action measured_release_answer(advlock_machine *m, advlock_result r, int64_t now)
{
    (void)advlock_on_result(m, r, NULL, NULL, now);
    return advlock_next_action(m);
}

advlock_action measured_retry_answer(advlock_machine *m, advlock_result r, int64_t now)
{
    (void)advlock_on_result(m, r, NULL, NULL, now);
    return advlock_next_action(m);
}

advlock_action measured_retry_wake(advlock_machine *m, int64_t now)
{
    (void)advlock_on_timer(m, now);
    return advlock_next_action(m);
}

int64_t measured_derive_key(const char *name)
{
    int64_t key;
    if (advlock_derive_key(name, sizeof lock_name - 1, &key) != 0)
        bench_fail("advlock_derive_key failed");
    return key;
}

/* ---- the phases ------------------------------------------------------------ */

static volatile int64_t sink;

static void expect(advlock_action a, advlock_action_kind kind, advlock_outcome outcome)
{
    if (a.kind != kind || (kind == ADVLOCK_ACTION_DONE && a.report->outcome != outcome))
        bench_fail("the core did not do what the phase expects (action %d, outcome %d)",
                   (int)a.kind, a.report != NULL ? (int)a.report->outcome : -1);
}

/* One uncontended acquire and its release; which half is measured depends
 * only on which functions callgrind is told to collect. */
static void acquire_and_release(advlock_machine *m, const char *name, int64_t now)
{
    advlock_action a = measured_acquire_start(m, name, 30000, now);
    expect(a, ADVLOCK_ACTION_QUERY, 0);
    a = measured_acquire_answer(m, serve(my_pid, a), now);
    expect(a, ADVLOCK_ACTION_DONE, ADVLOCK_ACQUIRED);
    a = measured_release_start(m, a.report->key, now);
    expect(a, ADVLOCK_ACTION_QUERY, 0);
    a = measured_release_answer(m, serve(my_pid, a), now);
    expect(a, ADVLOCK_ACTION_DONE, ADVLOCK_RELEASED);
}

/* alternate: two names in turn, so that every acquire hashes. */
static void run_cycles(long n, int alternate)
{
    advlock_machine m;
    advlock_machine_init(&m);
    for (long i = 0; i < n; i++)
        acquire_and_release(&m, name_for(alternate), i);
}

/* A contended acquire that never times out: each iteration is one more
 * attempt (FALSE, sleep, timer, try again), answered by the fake database
 * while another session holds the lock. */
static void run_retries(long n)
{
    advlock_machine m;
    advlock_machine_init(&m);
    int64_t now = 0;
    advlock_action a = measured_acquire_start(&m, lock_name, INT64_MAX, now);
    if (serve(other_pid, a) != ADVLOCK_RESULT_TRUE)
        bench_fail("the other session could not take the lock");
    for (long i = 0; i < n; i++) {
        a = measured_retry_answer(&m, serve(my_pid, a), now);
        expect(a, ADVLOCK_ACTION_SLEEP, 0);
        now = a.wake_at_ms;
        a = measured_retry_wake(&m, now);
        expect(a, ADVLOCK_ACTION_QUERY, 0);
    }
    /* End the acquire and free the lock for the next phase. */
    a = measured_retry_answer(&m, ADVLOCK_RESULT_TRUE, now);
    expect(a, ADVLOCK_ACTION_DONE, ADVLOCK_ACQUIRED);
    advlock_fake_db_init(&db);
}

static void run_derivations(long n)
{
    for (long i = 0; i < n; i++)
        sink = measured_derive_key(name_for(1));
}

static void setup_database(void)
{
    advlock_fake_db_init(&db);
    if (advlock_fake_db_connect(&db, &my_pid) != 0 || advlock_fake_db_connect(&db, &other_pid) != 0)
        bench_fail("the fake database would not connect");
}

/* The first derivation in a process fetches the digest and the first on a
 * thread makes its context; the first query makes the fake database's lock
 * entry. None of that is what is asked, so it happens here, through direct
 * calls that callgrind does not collect. (The program is linked with
 * -z now, so no lazy symbol binding happens in a measured call either.) */
static void warm_up(void)
{
    advlock_machine m;
    advlock_machine_init(&m);
    for (int i = 0; i < 2; i++) {
        if (advlock_start_acquire(&m, NAME, 0, 0) != 0
            || advlock_on_result(&m, serve(my_pid, advlock_next_action(&m)), NULL, NULL, 0) != 0
            || advlock_start_release_key(&m, advlock_next_action(&m).report->key, 0) != 0
            || advlock_on_result(&m, serve(my_pid, advlock_next_action(&m)), NULL, NULL, 0) != 0)
            bench_fail("the warm-up failed");
    }
}

static void run_phase(const char *phase, long n)
{
    setup_database();
    warm_up();
    if (strcmp(phase, "acquire") == 0 || strcmp(phase, "release") == 0)
        run_cycles(n, 1);
    else if (strcmp(phase, "repeat") == 0)
        run_cycles(n, 0);
    else if (strcmp(phase, "retry") == 0)
        run_retries(n);
    else if (strcmp(phase, "derive") == 0)
        run_derivations(n);
    else
        bench_fail("unknown phase %s", phase);
}

/* ---- counting allocations natively ---------------------------------------- */

static void count_allocations(long n)
{
    setup_database();
    warm_up();
    counting = 1;
    run_cycles(n, 1);
    run_retries(n);
    counting = 0;
    /* Per operation: n acquires, n releases, n further attempts. */
    double project = (double)project_allocations / (3.0 * (double)n);
    bench_emit(&(bench_figure){"core_heap_allocations_per_operation", project, "allocations", NULL,
                               NAN, "= 0 (project's code)", project_allocations == 0});
    /* One derivation per cycle (the release takes the acquire's key). */
    bench_emit(&(bench_figure){"core_libcrypto_allocations_per_derivation",
                               (double)library_allocations / (double)n, "allocations", NULL, NAN,
                               NULL, -1});
}

/* ---- callgrind ------------------------------------------------------------ */

typedef struct phase_cost {
    double total;  /* instructions collected, per operation */
    double sha256; /* of which inside the digest calls */
    double utf8;   /* of which in advlock_utf8_valid */
} phase_cost;

/* Runs a phase under callgrind, collecting in the measured_<collect>_*
 * functions. */
static phase_cost measure_phase(const char *phase, const char *collect, long n)
{
    static const char *const functions[] = {"EVP_DigestInit_ex2", "EVP_DigestUpdate",
                                            "EVP_DigestFinal_ex", "advlock_utf8_valid", NULL};
    char toggle[64], iterations[32];
    snprintf(toggle, sizeof toggle, "measured_%s_*", collect);
    snprintf(iterations, sizeof iterations, "%ld", n);
    const char *const args[] = {"--phase", phase, "--iterations", iterations, NULL};
    double inclusive[4];
    double total = bench_callgrind(toggle, args, functions, inclusive);
    return (phase_cost){total / (double)n, (inclusive[0] + inclusive[1] + inclusive[2]) / (double)n,
                        inclusive[3] / (double)n};
}

static void count_instructions(long n)
{
    phase_cost acquire = measure_phase("acquire", "acquire", n);
    phase_cost repeat = measure_phase("repeat", "acquire", n);
    phase_cost release = measure_phase("release", "release", n);
    phase_cost retry = measure_phase("retry", "retry", n);
    phase_cost derive = measure_phase("derive", "derive", n);

    double acquire_core = acquire.total - acquire.sha256;
    double release_core = release.total - release.sha256;
    double retry_core = retry.total - retry.sha256;
    double sha = derive.sha256;
    char limit[96];

    bench_emit(&(bench_figure){"core_acquire_attempt_instructions", acquire_core, "instructions",
                               NULL, NAN, "< 1000 excl. SHA-256", acquire_core < 1000});
    bench_emit(&(bench_figure){"core_acquire_repeat_name_instructions", repeat.total,
                               "instructions", NULL, NAN, NULL, -1});
    bench_emit(&(bench_figure){"core_retry_attempt_instructions", retry_core, "instructions", NULL,
                               NAN, "< 1000 excl. SHA-256", retry_core < 1000});
    bench_emit(&(bench_figure){"core_release_instructions", release_core, "instructions", NULL, NAN,
                               NULL, -1});
    snprintf(limit, sizeof limit, "1 SHA-256 (%.0f instructions)", sha);
    double cycle = acquire.total + release.total;
    bench_emit(&(bench_figure){"core_acquire_release_instructions", cycle, "instructions", limit,
                               cycle / sha, NULL, -1});
    bench_emit(
        &(bench_figure){"core_sha256_instructions", sha, "instructions", NULL, NAN, NULL, -1});
    bench_emit(&(bench_figure){"core_derive_key_overhead_instructions", derive.total - sha,
                               "instructions", NULL, NAN, NULL, -1});
    bench_note("core cost: acquire excl. SHA-256 %.0f = derive-key overhead %.0f (UTF-8 check "
               "%.0f) + machine %.0f; release by the acquire's key %.0f; acquire+release %.0f "
               "excl. SHA-256; an acquire of the name derived last %.0f, all told (callgrind, "
               "%ld operations per phase)",
               acquire_core, derive.total - sha, derive.utf8, acquire_core - (derive.total - sha),
               release_core, acquire_core + release_core, repeat.total, n);
}

int main(int argc, char **argv)
{
    static const char *const options[] = {"--iterations", "--valgrind", "--phase", NULL};
    bench_check_options(argc, argv, options);
    long n = (long)bench_option(argc, argv, "--iterations", 20000);
    if (n < 1)
        bench_fail("--iterations must be positive");
    const char *phase = bench_option_text(argc, argv, "--phase", NULL);
    if (phase != NULL) {
        run_phase(phase, n);
        return 0;
    }
    count_allocations(n);
    if (bench_option(argc, argv, "--valgrind", 1) != 0)
        count_instructions(n);
    return 0;
}
