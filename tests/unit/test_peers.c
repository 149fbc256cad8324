/* The in-process exclusion table of a lock set (advlock_peers): who may send
 * a try-lock, in which mode, while peers ask for or hold a key; leaving on
 * every end path; misuse; and keys sharing a bucket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "advlock.h"

enum { NBUCKETS = 8 };

static const int64_t KEY = INT64_C(-7446590288413251183);
static const int64_t OTHER_KEY = 42;

typedef struct fixture {
    advlock_peers table;
    advlock_peer *buckets[NBUCKETS];
    advlock_peer a, b, c;
} fixture;

static void fresh(fixture *f, size_t nbuckets)
{
    assert_int_equal(advlock_peers_init(&f->table, f->buckets, nbuckets), 0);
    advlock_peer_init(&f->a);
    advlock_peer_init(&f->b);
    advlock_peer_init(&f->c);
}

/* p asks for key in mode and is let through to the server, which grants. */
static void hold(fixture *f, advlock_peer *p, int64_t key, advlock_mode mode)
{
    assert_int_equal(advlock_peers_ask(&f->table, p, key, mode), 1);
    assert_int_equal(advlock_peers_granted(&f->table, p), 0);
    assert_int_equal(advlock_peer_state(p), ADVLOCK_PEER_HELD);
}

static void a_lone_peer_asks_holds_and_leaves(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_OUT);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_EXCLUSIVE), 1);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_ASKING);
    assert_int_equal(advlock_peers_count(&f.table), 1);
    assert_int_equal(advlock_peers_granted(&f.table, &f.a), 0);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_HELD);
    assert_int_equal(advlock_peers_count(&f.table), 1);
    assert_int_equal(advlock_peers_leave(&f.table, &f.a), 0);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_OUT);
    assert_int_equal(advlock_peers_count(&f.table), 0);
}

/* Every pair of modes, the first peer asking and then holding: only two
 * shared peers go to the server together. */
static void modes_conflict_as_the_server_s_do(void **state)
{
    (void)state;
    static const struct {
        advlock_mode first, second;
        int let_through;
    } cases[] = {
        {ADVLOCK_EXCLUSIVE, ADVLOCK_EXCLUSIVE, 0},
        {ADVLOCK_EXCLUSIVE, ADVLOCK_SHARED, 0},
        {ADVLOCK_SHARED, ADVLOCK_EXCLUSIVE, 0},
        {ADVLOCK_SHARED, ADVLOCK_SHARED, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int granted = 0; granted <= 1; granted++) {
            fixture f;
            fresh(&f, NBUCKETS);
            assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, cases[i].first), 1);
            if (granted)
                assert_int_equal(advlock_peers_granted(&f.table, &f.a), 0);
            assert_int_equal(advlock_peers_ask(&f.table, &f.b, KEY, cases[i].second),
                             cases[i].let_through);
            assert_int_equal(advlock_peer_state(&f.b),
                             cases[i].let_through ? ADVLOCK_PEER_ASKING : ADVLOCK_PEER_OUT);
            assert_int_equal(advlock_peers_count(&f.table), 1 + (size_t)cases[i].let_through);
        }
    }
}

static void other_keys_never_conflict(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    hold(&f, &f.a, KEY, ADVLOCK_EXCLUSIVE);
    hold(&f, &f.b, OTHER_KEY, ADVLOCK_EXCLUSIVE);
    assert_int_equal(advlock_peers_count(&f.table), 2);
}

/* Two shared holders: an exclusive peer waits until both have left. */
static void an_exclusive_peer_waits_for_every_shared_holder(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    hold(&f, &f.a, KEY, ADVLOCK_SHARED);
    hold(&f, &f.b, KEY, ADVLOCK_SHARED);
    assert_int_equal(advlock_peers_ask(&f.table, &f.c, KEY, ADVLOCK_EXCLUSIVE), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.a), 0);
    assert_int_equal(advlock_peers_ask(&f.table, &f.c, KEY, ADVLOCK_EXCLUSIVE), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.b), 0);
    assert_int_equal(advlock_peers_ask(&f.table, &f.c, KEY, ADVLOCK_EXCLUSIVE), 1);
}

/* A try refused by the server (another process holds it) leaves from ASKING:
 * the key is free for the next peer at once. */
static void leaving_while_asking_frees_the_key(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_EXCLUSIVE), 1);
    assert_int_equal(advlock_peers_ask(&f.table, &f.b, KEY, ADVLOCK_SHARED), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.a), 0);
    assert_int_equal(advlock_peers_ask(&f.table, &f.b, KEY, ADVLOCK_SHARED), 1);
    /* and a peer that left may ask again */
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_SHARED), 1);
    assert_int_equal(advlock_peers_count(&f.table), 2);
}

/* Drivers call leave on every end path, whether or not the peer got in. */
static void leaving_when_out_is_a_no_op(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    hold(&f, &f.a, KEY, ADVLOCK_EXCLUSIVE);
    assert_int_equal(advlock_peers_leave(&f.table, &f.b), 0);
    assert_int_equal(advlock_peers_ask(&f.table, &f.b, KEY, ADVLOCK_EXCLUSIVE), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.b), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.a), 0);
    assert_int_equal(advlock_peers_leave(&f.table, &f.a), 0);
    assert_int_equal(advlock_peers_count(&f.table), 0);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_OUT);
}

static void asking_twice_is_misuse(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_SHARED), 1);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_SHARED), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, OTHER_KEY, ADVLOCK_SHARED), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_peers_granted(&f.table, &f.a), 0);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, ADVLOCK_SHARED), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_peers_count(&f.table), 1);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_HELD);
}

static void granted_needs_an_asking_peer(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    assert_int_equal(advlock_peers_granted(&f.table, &f.a), ADVLOCK_EMISUSE);
    hold(&f, &f.a, KEY, ADVLOCK_EXCLUSIVE);
    assert_int_equal(advlock_peers_granted(&f.table, &f.a), ADVLOCK_EMISUSE);
    /* a peer refused locally was never sent: nothing to grant */
    assert_int_equal(advlock_peers_ask(&f.table, &f.b, KEY, ADVLOCK_EXCLUSIVE), 0);
    assert_int_equal(advlock_peers_granted(&f.table, &f.b), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_peer_state(&f.b), ADVLOCK_PEER_OUT);
}

/* One bucket: every key shares a chain. Keys still conflict only with
 * themselves, and leaving from the head, middle and tail keeps the chain. */
static void keys_sharing_a_bucket_stay_apart(void **state)
{
    (void)state;
    enum { N = 6 };
    advlock_peers table;
    advlock_peer *bucket[1];
    advlock_peer peers[N], late;
    assert_int_equal(advlock_peers_init(&table, bucket, 1), 0);
    advlock_peer_init(&late);
    for (int i = 0; i < N; i++) {
        advlock_peer_init(&peers[i]);
        assert_int_equal(advlock_peers_ask(&table, &peers[i], i, ADVLOCK_EXCLUSIVE), 1);
    }
    /* the chain is N, N-1, ..., 1 from its head: leave the head, a middle
     * one and the tail */
    static const int leaving[] = {N - 1, 2, 0};
    for (size_t l = 0; l < sizeof leaving / sizeof leaving[0]; l++) {
        int gone = leaving[l];
        assert_int_equal(advlock_peers_leave(&table, &peers[gone]), 0);
        assert_int_equal(advlock_peers_count(&table), N - 1 - l);
        for (int k = 0; k < N; k++) {
            int expected = advlock_peer_state(&peers[k]) == ADVLOCK_PEER_OUT;
            assert_int_equal(advlock_peers_ask(&table, &late, k, ADVLOCK_EXCLUSIVE), expected);
            assert_int_equal(advlock_peers_leave(&table, &late), 0);
        }
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(advlock_peers_leave(&table, &peers[i]), 0);
    assert_int_equal(advlock_peers_count(&table), 0);
    assert_null(bucket[0]);
}

/* Many keys in few buckets: every one is found again. */
static void many_keys_in_few_buckets(void **state)
{
    (void)state;
    enum { N = 1000 };
    static advlock_peer peers[N];
    advlock_peers table;
    advlock_peer *buckets[4], probe;
    assert_int_equal(advlock_peers_init(&table, buckets, 4), 0);
    advlock_peer_init(&probe);
    for (int i = 0; i < N; i++) {
        advlock_peer_init(&peers[i]);
        assert_int_equal(advlock_peers_ask(&table, &peers[i], (int64_t)i * 4, ADVLOCK_SHARED), 1);
    }
    assert_int_equal(advlock_peers_count(&table), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(advlock_peers_ask(&table, &probe, (int64_t)i * 4, ADVLOCK_EXCLUSIVE), 0);
    for (int i = 0; i < N; i += 2)
        assert_int_equal(advlock_peers_leave(&table, &peers[i]), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(advlock_peers_ask(&table, &probe, (int64_t)i * 4, ADVLOCK_EXCLUSIVE),
                         i % 2 == 0);
        assert_int_equal(advlock_peers_leave(&table, &probe), 0);
    }
    assert_int_equal(advlock_peers_count(&table), N / 2);
}

static void init_refuses_bad_buckets(void **state)
{
    (void)state;
    advlock_peers table = {0};
    advlock_peer *buckets[8] = {0};
    assert_int_equal(advlock_peers_init(NULL, buckets, 8), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_init(&table, NULL, 8), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_init(&table, buckets, 0), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_init(&table, buckets, 6), ADVLOCK_EINVAL);
    assert_null(table.buckets_);
    advlock_peer stale;
    buckets[3] = &stale;
    assert_int_equal(advlock_peers_init(&table, buckets, 8), 0);
    assert_null(buckets[3]);
    assert_int_equal(advlock_peers_count(&table), 0);
}

static void nulls_and_bad_modes_are_refused(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    assert_int_equal(advlock_peers_ask(NULL, &f.a, KEY, ADVLOCK_SHARED), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_ask(&f.table, NULL, KEY, ADVLOCK_SHARED), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, (advlock_mode)2), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_ask(&f.table, &f.a, KEY, (advlock_mode)-1), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peer_state(&f.a), ADVLOCK_PEER_OUT);
    assert_int_equal(advlock_peers_granted(NULL, &f.a), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_granted(&f.table, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_leave(NULL, &f.a), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_leave(&f.table, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_peers_count(NULL), 0);
    assert_int_equal(advlock_peer_state(NULL), ADVLOCK_PEER_OUT);
    advlock_peer_init(NULL);
    assert_int_equal(advlock_peers_count(&f.table), 0);
}

/* A zeroed peer is a fresh one, as the header promises. */
static void a_zeroed_peer_is_out(void **state)
{
    (void)state;
    fixture f;
    fresh(&f, NBUCKETS);
    advlock_peer zeroed = {0};
    assert_int_equal(advlock_peer_state(&zeroed), ADVLOCK_PEER_OUT);
    assert_int_equal(advlock_peers_ask(&f.table, &zeroed, KEY, ADVLOCK_EXCLUSIVE), 1);
}

#define T(name) cmocka_unit_test(name)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_lone_peer_asks_holds_and_leaves),
        T(modes_conflict_as_the_server_s_do),
        T(other_keys_never_conflict),
        T(an_exclusive_peer_waits_for_every_shared_holder),
        T(leaving_while_asking_frees_the_key),
        T(leaving_when_out_is_a_no_op),
        T(asking_twice_is_misuse),
        T(granted_needs_an_asking_peer),
        T(keys_sharing_a_bucket_stay_apart),
        T(many_keys_in_few_buckets),
        T(init_refuses_bad_buckets),
        T(nulls_and_bad_modes_are_refused),
        T(a_zeroed_peer_is_out),
    };
    return cmocka_run_group_tests_name("peers", tests, NULL, NULL);
}
