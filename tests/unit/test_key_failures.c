/* Key derivation when libcrypto cannot allocate a thread's digest context:
 * a clear ADVLOCK_ECRYPTO, no crash, and the machine refuses to start while
 * changing nothing. libcrypto's allocator is replaced before anything else
 * in this program touches it. (Failing the digest fetch itself is not
 * tested: libcrypto 3.0 crashes inside EVP_MD_fetch when it cannot
 * allocate there.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"

static int refuse;

static void *maybe_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return refuse ? NULL : malloc(n);
}

static void *maybe_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return refuse ? NULL : realloc(p, n);
}

static void plain_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    free(p);
}

static const char NAME[] = "BrighterMigration_public.Outbox";

static void *derive_in_new_thread(void *out)
{
    *(int *)out = advlock_derive_key(NAME, sizeof NAME - 1, &(int64_t){0});
    return NULL;
}

/* A new thread needs its own digest context; without memory it gets none. */
static void context_failure_is_reported(void **state)
{
    (void)state;
    int rc = 1;
    pthread_t t;
    refuse = 1;
    assert_int_equal(pthread_create(&t, NULL, derive_in_new_thread, &rc), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    refuse = 0;
    assert_int_equal(rc, ADVLOCK_ECRYPTO);

    /* With memory back, a new thread derives keys again. */
    rc = 1;
    assert_int_equal(pthread_create(&t, NULL, derive_in_new_thread, &rc), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(rc, 0);
}

static void *start_in_new_thread(void *out)
{
    advlock_machine m, before;
    advlock_machine_init(&m);
    before = m;
    int rc = advlock_start_acquire(&m, NAME, sizeof NAME - 1, 1000, 0);
    *(int *)out = rc == ADVLOCK_ECRYPTO && memcmp(&m, &before, sizeof m) == 0;
    return NULL;
}

static void machine_refuses_to_start(void **state)
{
    (void)state;
    int refused_cleanly = 0;
    pthread_t t;
    refuse = 1;
    assert_int_equal(pthread_create(&t, NULL, start_in_new_thread, &refused_cleanly), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    refuse = 0;
    assert_int_equal(refused_cleanly, 1);
}

int main(void)
{
    if (!CRYPTO_set_mem_functions(maybe_malloc, maybe_realloc, plain_free))
        return 1;
    /* The digest is fetched while memory is plentiful. */
    int64_t key;
    if (advlock_derive_key(NAME, sizeof NAME - 1, &key) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(context_failure_is_reported),
        cmocka_unit_test(machine_refuses_to_start),
    };
    return cmocka_run_group_tests_name("key derivation without memory", tests, NULL, NULL);
}
