/*
 * Fencing tokens through the libpq adapters against a real PostgreSQL: the
 * token comes with the grant and increases with every holder, blocking and
 * nonblocking, session and transaction scope; a busy try issues none; a
 * fenced try that fails on the server after the grant (a trigger on the
 * counter raises) leaves no lock behind on the session that stays open.
 */
#include "pg_test.h"

#include <stdio.h>
#include <string.h>

enum { LIMIT_MS = 10000 };

typedef struct fixture {
    pgt_lock lock;
    PGconn *a, *b, *d;
    advlock_pq sa, sb, ad;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    pgt_lock_begin(&f.lock, "fence", NULL);
    pgt_exec(f.lock.observer, advlock_fence_setup_sql());
    f.a = pgt_connect();
    f.b = pgt_connect();
    f.d = pgt_connect();
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    assert_int_equal(advlock_pq_init(&f.sb, f.b), 0);
    assert_int_equal(advlock_pq_async_init(&f.ad, f.d), 0);
    advlock_options o;
    advlock_options_init(&o);
    o.fence = 1;
    assert_int_equal(advlock_pq_set_options(&f.sa, &o), 0);
    assert_int_equal(advlock_pq_set_options(&f.sb, &o), 0);
    assert_int_equal(advlock_pq_set_options(&f.ad, &o), 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    PQfinish(f->d);
    pgt_lock_end(&f->lock);
    return 0;
}

static long long counter(fixture *f)
{
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)f->lock.derived);
    return pgt_query_int(f->lock.observer,
                         "SELECT coalesce((SELECT token FROM advlock.fence WHERE key = $1), 0)",
                         key, (char *)NULL);
}

static int64_t acquire(advlock_pq *s, fixture *f, advlock_outcome outcome)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(s, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, outcome);
    return r.lock.fence;
}

static void release(advlock_pq *s, fixture *f)
{
    advlock_pq_report r;
    assert_int_equal(advlock_pq_release(s, f->lock.key, f->lock.len, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_RELEASED);
}

static void tokens_increase_with_every_holder(void **state)
{
    fixture *f = *state;
    int64_t first = acquire(&f->sa, f, ADVLOCK_ACQUIRED);
    assert_true(first >= 1);
    assert_int_equal(counter(f), first);
    /* Busy: no token issued. */
    assert_int_equal(acquire(&f->sb, f, ADVLOCK_TIMED_OUT), 0);
    assert_int_equal(counter(f), first);
    release(&f->sa, f);
    assert_int_equal(acquire(&f->sb, f, ADVLOCK_ACQUIRED), first + 1);
    release(&f->sb, f);

    /* The nonblocking adapter's report carries it too. */
    assert_int_equal(
        advlock_pq_async_start_acquire(&f->ad, f->lock.key, f->lock.len, 0, advlock_pq_now_ms()),
        0);
    advlock_pq *all[] = {&f->ad};
    pgt_loop_until_idle(all, 1, advlock_pq_now_ms() + LIMIT_MS);
    pgt_expect_outcome(advlock_pq_async_report(&f->ad), ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_async_report(&f->ad)->lock.fence, first + 2);
    assert_int_equal(counter(f), first + 2);
    assert_int_equal(
        advlock_pq_async_start_release(&f->ad, f->lock.key, f->lock.len, advlock_pq_now_ms()), 0);
    pgt_loop_until_idle(all, 1, advlock_pq_now_ms() + LIMIT_MS);
    pgt_expect_outcome(advlock_pq_async_report(&f->ad), ADVLOCK_RELEASED);
}

/* Transaction scope: the token commits with the caller's transaction, and
 * a rollback takes it back. */
static void transaction_tokens_commit_with_the_transaction(void **state)
{
    fixture *f = *state;
    advlock_options o;
    advlock_options_init(&o);
    o.fence = 1;
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), 0);
    long long before = counter(f);
    pgt_exec(f->a, "BEGIN");
    assert_int_equal(acquire(&f->sa, f, ADVLOCK_ACQUIRED), before + 1);
    assert_int_equal(counter(f), before); /* not committed yet */
    pgt_exec(f->a, "ROLLBACK");
    assert_int_equal(counter(f), before);
    pgt_exec(f->a, "BEGIN");
    assert_int_equal(acquire(&f->sa, f, ADVLOCK_ACQUIRED), before + 1);
    pgt_exec(f->a, "COMMIT");
    assert_int_equal(counter(f), before + 1);
    o.scope = ADVLOCK_SESSION;
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), 0);
}

/* The upsert fails after pg_try_advisory_lock granted the lock: the
 * session lock outlives the statement's rolled-back transaction, so the
 * machine must unlock it before reporting the failure. */
static void an_error_after_the_grant_leaves_no_lock(void **state)
{
    fixture *f = *state;
    pgt_exec(f->lock.observer,
             "CREATE FUNCTION public.fence_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
             "$$BEGIN RAISE EXCEPTION 'counter refused'; END$$");
    pgt_exec(f->lock.observer, "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON advlock.fence "
                               "FOR EACH ROW EXECUTE FUNCTION public.fence_test_refuse()");
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, f->lock.len, 0, &r), 0);
    pgt_expect_outcome(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ESERVER);
    assert_string_equal(r.lock.sqlstate, "P0001");
    assert_int_equal(r.lock.detail, ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR);
    assert_int_equal(r.lock.fence, 0);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    pgt_exec(f->lock.observer, "DROP TRIGGER refuse ON advlock.fence");
    pgt_exec(f->lock.observer, "DROP FUNCTION public.fence_test_refuse()");
    /* The session is fine: the next acquire takes the lock and a token. */
    assert_true(acquire(&f->sa, f, ADVLOCK_ACQUIRED) >= 1);
    release(&f->sa, f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_increase_with_every_holder),
        cmocka_unit_test(transaction_tokens_commit_with_the_transaction),
        cmocka_unit_test(an_error_after_the_grant_leaves_no_lock),
    };
    return cmocka_run_group_tests_name("fencing tokens", tests, setup, teardown);
}
