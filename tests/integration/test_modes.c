/*
 * Options through both libpq adapters against a real PostgreSQL: the
 * default options are the reference; shared locks (ShareLock in pg_locks,
 * holders coexist, an exclusive acquire waits for them); transaction scope
 * (pg_try_advisory_xact_lock inside BEGIN, released by COMMIT, refused
 * outside a transaction block); holder diagnostics after a timeout; events;
 * full jitter random by default, replayed by a seed.
 */
#include "pg_test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock;     /* the key, and the observer */
    PGconn *a, *b, *c; /* blocking sessions */
    PGconn *d, *e;     /* nonblocking adapters */
    advlock_pq sa, sb, sc;
    advlock_pq ad, ae;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect_as("holder-app");
    f.b = pgt_connect();
    f.c = pgt_connect();
    f.d = pgt_connect();
    f.e = pgt_connect();
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    assert_int_equal(advlock_pq_init(&f.sb, f.b), 0);
    assert_int_equal(advlock_pq_init(&f.sc, f.c), 0);
    assert_int_equal(advlock_pq_async_init(&f.ad, f.d), 0);
    assert_int_equal(advlock_pq_async_init(&f.ae, f.e), 0);
    pgt_lock_begin(&f.lock, "modes", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    PQfinish(f->c);
    PQfinish(f->d);
    PQfinish(f->e);
    pgt_lock_end(&f->lock);
    return 0;
}

static advlock_options options(advlock_mode mode, advlock_scope scope)
{
    advlock_options o;
    advlock_options_init(&o);
    o.mode = mode;
    o.scope = scope;
    return o;
}

static void expect(const advlock_pq_report *r, advlock_outcome outcome)
{
    pgt_expect_outcome(r, outcome);
}

static void blocking_acquire(fixture *f, advlock_pq *s, int64_t timeout_ms, advlock_outcome outcome)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(s, f->lock.key, f->lock.len, timeout_ms, &r), 0);
    expect(&r, outcome);
}

static void blocking_release(fixture *f, advlock_pq *s, advlock_outcome outcome)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_release(s, f->lock.key, f->lock.len, &r), 0);
    expect(&r, outcome);
}

static void run(advlock_pq *a)
{
    advlock_pq *const one[1] = {a};
    pgt_loop_until_idle(one, 1, advlock_pq_now_ms() + LIMIT_MS);
}

static void async_acquire(fixture *f, advlock_pq *a, int64_t timeout_ms, advlock_outcome outcome)
{
    assert_int_equal(advlock_pq_async_start_acquire(a, f->lock.key, f->lock.len, timeout_ms,
                                                    advlock_pq_now_ms()),
                     0);
    run(a);
    expect(advlock_pq_async_report(a), outcome);
}

static void async_release(fixture *f, advlock_pq *a, advlock_outcome outcome)
{
    assert_int_equal(
        advlock_pq_async_start_release(a, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    run(a);
    expect(advlock_pq_async_report(a), outcome);
}

/* Sessions a and b, set to shared mode, both hold the key. */
static void a_and_b_hold_shared(fixture *f)
{
    advlock_options shared = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->sa, &shared), 0);
    assert_int_equal(advlock_pq_set_options(&f->sb, &shared), 0);
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    blocking_acquire(f, &f->sb, 0, ADVLOCK_ACQUIRED);
}

/* ---- the options' plumbing ---- */

static void test_default_options_are_the_reference(void **state)
{
    fixture *f = *state;
    advlock_options o = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), 0);
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), 0);

    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);
    pgt_expect_try_lock_statement(f->lock.observer, f->a);
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);

    async_acquire(f, &f->ad, 0, ADVLOCK_ACQUIRED);
    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->d);
    pgt_expect_try_lock_statement(f->lock.observer, f->d);
    async_release(f, &f->ad, ADVLOCK_RELEASED);
}

static void test_set_options_misuse(void **state)
{
    fixture *f = *state;
    advlock_options o = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    advlock_pq unbound_session;
    advlock_pq unbound_async;
    memset(&unbound_session, 0, sizeof unbound_session);
    memset(&unbound_async, 0, sizeof unbound_async);

    assert_int_equal(advlock_pq_set_options(NULL, &o), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(&f->sa, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(&unbound_session, &o), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_set_options(NULL, &o), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(&f->ad, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(&unbound_async, &o), ADVLOCK_EMISUSE);
    o.mode = (advlock_mode)9;
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), ADVLOCK_EINVAL);

    /* Fixed from an operation's start to its end. */
    o = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->ad, f->lock.key, f->lock.len, 0, advlock_pq_now_ms()),
        0);
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), ADVLOCK_EMISUSE);
    run(&f->ad);
    expect(advlock_pq_async_report(&f->ad), ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->d), 1);
    /* Holding is no operation: options may change (for the next one). */
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), 0);
    o = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), 0);
    async_release(f, &f->ad, ADVLOCK_RELEASED);

    /* init puts the reference back. */
    o = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), 0);
    assert_int_equal(advlock_pq_init(&f->sa, f->a), 0);
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->a), 1);
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
}

/* ---- shared locks ---- */

typedef struct waiter {
    fixture *f;
    advlock_pq *session;
    int64_t timeout_ms;
    advlock_pq_report report;
    int rc;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc =
        advlock_pq_acquire(w->session, w->f->lock.key, w->f->lock.len, w->timeout_ms, &w->report);
    return NULL;
}

static void test_shared_holders_coexist_blocking(void **state)
{
    fixture *f = *state;
    a_and_b_hold_shared(f);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, NULL), 2);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, f->a), 1);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, f->b), 1);
    char buf[128];
    assert_string_equal(pgt_last_statement(f->lock.observer, f->b, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_LOCK_SHARED));

    /* An exclusive acquire waits for both: refused while they hold... */
    blocking_acquire(f, &f->sc, 0, ADVLOCK_TIMED_OUT);
    /* ...and granted once both have released. */
    waiter w = {.f = f, .session = &f->sc, .timeout_ms = 5000};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_sleep_ms(150);
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
    pgt_sleep_ms(150);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, NULL), 0);
    blocking_release(f, &f->sb, ADVLOCK_RELEASED);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(w.rc, 0);
    expect(&w.report, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, NULL, 1, NULL), 1);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->c), 1);
    /* A shared release of a lock not held shared: the server's own words. */
    blocking_release(f, &f->sa, ADVLOCK_NOT_HELD);
    blocking_release(f, &f->sc, ADVLOCK_RELEASED);
}

static void test_shared_holders_and_a_server_waiter_async(void **state)
{
    fixture *f = *state;
    advlock_options shared = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->sa, &shared), 0);
    assert_int_equal(advlock_pq_set_options(&f->ad, &shared), 0);
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    async_acquire(f, &f->ad, 0, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, NULL), 2);

    /* An exclusive server-side waiter queues behind both shared holders. */
    advlock_options wait = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    wait.wait = ADVLOCK_WAIT_SERVER;
    assert_int_equal(advlock_pq_set_options(&f->ae, &wait), 0);
    assert_int_equal(advlock_pq_async_start_acquire(&f->ae, f->lock.key, f->lock.len, 10000,
                                                    advlock_pq_now_ms()),
                     0);
    pgt_wait_until_waiting(f->lock.observer, f->lock.derived, f->e, &f->ae);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 0, f->e), 1);

    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
    async_release(f, &f->ad, ADVLOCK_RELEASED);
    run(&f->ae);
    expect(advlock_pq_async_report(&f->ae), ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_report(&f->ae)->lock.attempts, 2); /* try, wait */
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->e), 1);
    async_release(f, &f->ae, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- transaction scope ---- */

static void test_transaction_scope_blocking(void **state)
{
    fixture *f = *state;
    advlock_options xact = options(ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION);
    assert_int_equal(advlock_pq_set_options(&f->sa, &xact), 0);
    char before[256], buf[256];
    pgt_last_statement(f->lock.observer, f->a, before, sizeof before);

    /* Outside a transaction block the lock would end with its statement:
     * refused, nothing sent. */
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), ADVLOCK_EMISUSE);
    assert_int_equal(r.lock.outcome, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, 0);
    assert_string_equal(pgt_last_statement(f->lock.observer, f->a, buf, sizeof buf), before);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);

    pgt_exec(f->a, "BEGIN");
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ExclusiveLock", 1, f->a), 1);
    assert_string_equal(pgt_last_statement(f->lock.observer, f->a, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_XACT_LOCK));
    blocking_acquire(f, &f->sb, 0, ADVLOCK_TIMED_OUT);

    /* Release sends nothing: the transaction's end releases the lock. */
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, f->lock.len, &r), 0);
    expect(&r, ADVLOCK_ENDS_WITH_TRANSACTION);
    char expected[256];
    snprintf(expected, sizeof expected,
             "Lock '%s' is transaction-scoped: it is released when the transaction ends.",
             f->lock.key);
    assert_string_equal(pgt_describe(&r, f->lock.key), expected);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 1);
    assert_string_equal(pgt_last_statement(f->lock.observer, f->a, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_XACT_LOCK));
    assert_int_equal(PQtransactionStatus(f->a), PQTRANS_INTRANS);
    pgt_exec(f->a, "COMMIT");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    /* Sent unnamed, inside the transaction. */
    assert_int_equal(pgt_query_int(f->a,
                                   "SELECT count(*) FROM pg_prepared_statements"
                                   " WHERE statement LIKE '%xact%'",
                                   (char *)NULL),
                     0);
    blocking_acquire(f, &f->sb, 0, ADVLOCK_ACQUIRED);
    blocking_release(f, &f->sb, ADVLOCK_RELEASED);
}

static void test_transaction_scope_shared_async(void **state)
{
    fixture *f = *state;
    advlock_options xact = options(ADVLOCK_SHARED, ADVLOCK_TRANSACTION);
    assert_int_equal(advlock_pq_set_options(&f->ad, &xact), 0);
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->ad, f->lock.key, f->lock.len, 0, advlock_pq_now_ms()),
        ADVLOCK_EMISUSE);
    assert_int_equal(advlock_pq_async_busy(&f->ad), 0);

    pgt_exec(f->d, "BEGIN");
    async_acquire(f, &f->ad, 0, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, f->d), 1);
    char buf[256];
    assert_string_equal(pgt_last_statement(f->lock.observer, f->d, buf, sizeof buf),
                        advlock_sql_text(ADVLOCK_SQL_TRY_XACT_LOCK_SHARED));
    /* Another shared holder coexists; an exclusive one does not. */
    advlock_options shared = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    assert_int_equal(advlock_pq_set_options(&f->sb, &shared), 0);
    blocking_acquire(f, &f->sb, 0, ADVLOCK_ACQUIRED);
    blocking_acquire(f, &f->sc, 0, ADVLOCK_TIMED_OUT);
    blocking_release(f, &f->sb, ADVLOCK_RELEASED);

    /* The release ends at once, with nothing sent. */
    assert_int_equal(
        advlock_pq_async_start_release(&f->ad, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_async_busy(&f->ad), 0);
    expect(advlock_pq_async_report(&f->ad), ADVLOCK_ENDS_WITH_TRANSACTION);
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, "ShareLock", 1, f->d), 1);
    pgt_exec(f->d, "ROLLBACK");
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- holder diagnostics ---- */

static void expect_holder(const fixture *f, const advlock_pq_report *r, const char *timeout)
{
    expect(r, ADVLOCK_TIMED_OUT);
    assert_int_equal(r->lock.failure, 0);
    assert_int_equal(r->lock.holder_pid, PQbackendPID(f->a));
    assert_string_equal(r->lock.holder_application, "holder-app");
    assert_int_equal(r->lock.holder_state, ADVLOCK_BACKEND_IDLE);
    assert_int_equal(r->lock.other_holders, 0);
    assert_int_equal(r->lock.detail, ADVLOCK_DETAIL_DIAGNOSED);
    assert_in_range(r->lock.holder_seconds, 0, 60);
    char expected[512];
    snprintf(expected, sizeof expected,
             "Could not acquire migration lock for '%s' within %ss. Held by pid %d (application "
             "'holder-app', state idle) for %llds.",
             f->lock.key, timeout, PQbackendPID(f->a), (long long)r->lock.holder_seconds);
    assert_string_equal(pgt_describe(r, f->lock.key), expected);
}

static void test_diagnostics_name_the_holder(void **state)
{
    fixture *f = *state;
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    advlock_options diagnose = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    diagnose.diagnose = 1;

    /* Blocking, polling. */
    assert_int_equal(advlock_pq_set_options(&f->sb, &diagnose), 0);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 150, &r), 0);
    expect_holder(f, &r, "0.15");

    /* Nonblocking, waiting on the server. */
    diagnose.wait = ADVLOCK_WAIT_SERVER;
    assert_int_equal(advlock_pq_set_options(&f->ad, &diagnose), 0);
    async_acquire(f, &f->ad, 200, ADVLOCK_TIMED_OUT);
    expect_holder(f, advlock_pq_async_report(&f->ad), "0.2");
    assert_int_equal(pgt_lock_rows(f->lock.observer, f->lock.derived, NULL, 0, NULL),
                     0); /* no waiter */

    /* Nobody holds it any more: said so. */
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_acquire(&f->sb, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.holder_pid, 0);
    blocking_release(f, &f->sb, ADVLOCK_RELEASED);
}

static void test_diagnostics_count_shared_holders(void **state)
{
    fixture *f = *state;
    a_and_b_hold_shared(f);

    advlock_options diagnose = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    diagnose.diagnose = 1;
    assert_int_equal(advlock_pq_set_options(&f->sc, &diagnose), 0);
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sc, f->lock.key, f->lock.len, 0, &r), 0);
    expect(&r, ADVLOCK_TIMED_OUT);
    int first = PQbackendPID(f->a) < PQbackendPID(f->b) ? PQbackendPID(f->a) : PQbackendPID(f->b);
    assert_int_equal(r.lock.holder_pid, first); /* holders come in pid order */
    assert_int_equal(r.lock.other_holders, 1);
    assert_non_null(strstr(pgt_describe(&r, f->lock.key), " and by 1 other session."));
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
    blocking_release(f, &f->sb, ADVLOCK_RELEASED);
}

/* ---- events ---- */

static void test_events_of_a_contended_acquire(void **state)
{
    fixture *f = *state;
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    static pgt_events seen;
    advlock_options o = options(ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION);
    pgt_record_events(&o, &seen);
    assert_int_equal(advlock_pq_set_options(&f->sb, &o), 0);

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    /* Tries at 0, 100 and 300 ms; at 300 the 250 ms timeout has passed. */
    blocking_acquire(f, &f->sb, 250, ADVLOCK_TIMED_OUT);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");

    static const advlock_event_kind story[] = {
        ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT, ADVLOCK_EVENT_SLEEP,
        ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT, ADVLOCK_EVENT_SLEEP,
        ADVLOCK_EVENT_ATTEMPT, ADVLOCK_EVENT_RESULT, ADVLOCK_EVENT_DONE,
    };
    assert_int_equal(seen.n, sizeof story / sizeof story[0]);
    for (int i = 0; i < seen.n; i++) {
        assert_int_equal(seen.events[i].kind, story[i]);
        assert_int_equal(seen.reports[i].key, f->lock.derived);
    }
    assert_int_equal(seen.events[1].result, ADVLOCK_RESULT_FALSE);
    assert_int_equal(seen.events[2].sleep_ms, 100);
    assert_int_equal(seen.events[5].sleep_ms, 200);
    assert_int_equal(seen.reports[6].attempts, 3);
    assert_int_equal(seen.reports[8].outcome, ADVLOCK_TIMED_OUT);
    /* Times on the adapter's clock, in order, spanning the schedule. */
    for (int i = 1; i < seen.n; i++)
        assert_true(seen.events[i].now_ms >= seen.events[i - 1].now_ms);
    assert_true(seen.events[8].now_ms - seen.events[0].now_ms >= 300);

    /* Releasing a lock not held: the server's WARNING is an event too. */
    memset(&seen, 0, sizeof seen);
    pgt_stderr_begin(&capture);
    blocking_release(f, &f->sb, ADVLOCK_NOT_HELD);
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_string_equal(printed, "");
    int warning = pgt_find_event(&seen, ADVLOCK_EVENT_WARNING, 0);
    assert_true(warning >= 0);
    assert_string_equal(seen.messages[warning], "you don't own a lock of type ExclusiveLock");
    assert_int_equal(seen.reports[warning].key, f->lock.derived);
    int result = pgt_find_event(&seen, ADVLOCK_EVENT_RESULT, 0);
    assert_true(warning < result);
    assert_int_equal(seen.events[result].result, ADVLOCK_RESULT_FALSE);
    assert_int_equal(pgt_find_event(&seen, ADVLOCK_EVENT_DONE, result), seen.n - 1);
    assert_int_equal(seen.reports[seen.n - 1].outcome, ADVLOCK_NOT_HELD);

    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
}

static void test_warning_event_nonblocking(void **state)
{
    fixture *f = *state;
    static pgt_events seen;
    advlock_options o = options(ADVLOCK_SHARED, ADVLOCK_SESSION);
    pgt_record_events(&o, &seen);
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), 0);
    async_release(f, &f->ad, ADVLOCK_NOT_HELD);
    int warning = pgt_find_event(&seen, ADVLOCK_EVENT_WARNING, 0);
    assert_true(warning >= 0);
    assert_string_equal(seen.messages[warning], "you don't own a lock of type ShareLock");
    assert_string_equal(advlock_pq_async_report(&f->ad)->notice,
                        "you don't own a lock of type ShareLock");
}

/* ---- jitter ---- */

enum { SLEEPS = 4 };

typedef struct sleeps {
    int64_t ms[SLEEPS];
    int n;
} sleeps;

static void record_sleep(void *user, const advlock_event *e)
{
    sleeps *s = user;
    if (e->kind == ADVLOCK_EVENT_SLEEP && s->n < SLEEPS)
        s->ms[s->n++] = e->sleep_ms;
}

/* The first SLEEPS sleeps of two nonblocking acquires with full jitter and
 * the seed given, while a holds the lock. With a 2 s timeout none of them
 * is clipped (their ceilings, 100 to 800 ms, add up to 1.5 s). */
static void draw_sleeps(fixture *f, uint64_t seed, sleeps *d, sleeps *e)
{
    advlock_options o;
    advlock_options_init(&o);
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.jitter_seed = seed;
    o.on_event = record_sleep;
    memset(d, 0, sizeof *d);
    memset(e, 0, sizeof *e);
    o.event_user = d;
    assert_int_equal(advlock_pq_set_options(&f->ad, &o), 0);
    o.event_user = e;
    assert_int_equal(advlock_pq_set_options(&f->ae, &o), 0);
    int64_t now = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_async_start_acquire(&f->ad, f->lock.key, f->lock.len, 2000, now),
                     0);
    assert_int_equal(advlock_pq_async_start_acquire(&f->ae, f->lock.key, f->lock.len, 2000, now),
                     0);
    advlock_pq *const both[2] = {&f->ad, &f->ae};
    pgt_loop_until_idle(both, 2, advlock_pq_now_ms() + LIMIT_MS);
    expect(advlock_pq_async_report(&f->ad), ADVLOCK_TIMED_OUT);
    expect(advlock_pq_async_report(&f->ae), ADVLOCK_TIMED_OUT);
    assert_int_equal(d->n, SLEEPS);
    assert_int_equal(e->n, SLEEPS);
}

/* Full jitter with jitter_seed 0 and no callback means random: each adapter
 * seeds its machine from getrandom(2), so two sessions started together
 * draw different sleeps (all four equal: about one chance in 10^9). A seed
 * replays exactly the core's splitmix64 stream over it. */
static void test_jitter_is_random_unless_seeded(void **state)
{
    fixture *f = *state;
    blocking_acquire(f, &f->sa, 0, ADVLOCK_ACQUIRED);
    sleeps d, e;
    draw_sleeps(f, 0, &d, &e);
    assert_memory_not_equal(d.ms, e.ms, sizeof d.ms);

    draw_sleeps(f, 42, &d, &e);
    assert_memory_equal(d.ms, e.ms, sizeof d.ms);
    advlock_machine m;
    advlock_options o;
    advlock_options_init(&o);
    o.backoff = ADVLOCK_BACKOFF_FULL_JITTER;
    o.jitter_seed = 42;
    advlock_machine_init(&m);
    assert_int_equal(advlock_set_options(&m, &o), 0);
    assert_int_equal(advlock_start_acquire(&m, f->lock.key, f->lock.len, 60000, 0), 0);
    for (int i = 0; i < SLEEPS; i++) {
        assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_FALSE, NULL, NULL, 0), 0);
        advlock_action a = advlock_next_action(&m);
        assert_int_equal(a.kind, ADVLOCK_ACTION_SLEEP);
        assert_int_equal(a.sleep_ms, d.ms[i]);
        assert_int_equal(advlock_on_timer(&m, a.wake_at_ms), 0);
    }
    blocking_release(f, &f->sa, ADVLOCK_RELEASED);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_default_options_are_the_reference), T(test_set_options_misuse),
        T(test_shared_holders_coexist_blocking),   T(test_shared_holders_and_a_server_waiter_async),
        T(test_transaction_scope_blocking),        T(test_transaction_scope_shared_async),
        T(test_diagnostics_name_the_holder),       T(test_diagnostics_count_shared_holders),
        T(test_events_of_a_contended_acquire),     T(test_warning_event_nonblocking),
        T(test_jitter_is_random_unless_seeded),
    };
    return cmocka_run_group_tests_name("libpq adapters: modes, scopes, diagnostics, events", tests,
                                       NULL, NULL);
}
