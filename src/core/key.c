/*
 * Lock name -> 64-bit advisory-lock key, as the reference derives it.
 *
 * OpenSSL 3's implicit fetch (EVP_sha256() handed to EVP_Digest) looks the
 * algorithm up in the provider registry on every call, which costs several
 * times the hash of a short name. The digest is therefore fetched once per
 * process and each thread keeps one digest context for reuse (freed by a
 * thread-specific-data destructor when the thread exits).
 */
#include "advlock.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* The reference's namespace, "BRIG" in ASCII, folded into the hashed text. */
static const char namespace_prefix[] = "74726:";

/* The digest is fetched on first use and kept for the process. A failed
 * fetch (out of memory, say) is retried by the next call rather than
 * remembered, so one bad moment cannot disable key derivation for good. */
static _Atomic(EVP_MD *) sha256;
static pthread_mutex_t fetch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_ctx;
static int key_ok;

static void free_thread_ctx(void *ctx)
{
    EVP_MD_CTX_free(ctx);
}

static void create_thread_key(void)
{
    key_ok = pthread_key_create(&thread_ctx, free_thread_ctx) == 0;
}

static EVP_MD *fetched_sha256(void)
{
    EVP_MD *md = atomic_load_explicit(&sha256, memory_order_acquire);
    if (md != NULL)
        return md;
    pthread_mutex_lock(&fetch_lock);
    md = atomic_load_explicit(&sha256, memory_order_relaxed);
    if (md == NULL) {
        md = EVP_MD_fetch(NULL, "SHA256", NULL);
        atomic_store_explicit(&sha256, md, memory_order_release);
    }
    pthread_mutex_unlock(&fetch_lock);
    return md;
}

/* The thread's context, cached where a plain load finds it; the pthread key
 * exists only so that the context is freed when the thread exits. The
 * initial-exec model makes that load one instruction even in the shared
 * library (it takes a few bytes of the static TLS that glibc reserves for
 * libraries loaded later). */
#if defined(__GNUC__)
#define FAST_TLS __attribute__((tls_model("initial-exec")))
#else
#define FAST_TLS
#endif
static _Thread_local EVP_MD_CTX *thread_ctx_cache FAST_TLS;

static EVP_MD_CTX *digest_context(void)
{
    if (thread_ctx_cache != NULL)
        return thread_ctx_cache;
    if (pthread_once(&key_once, create_thread_key) != 0 || !key_ok)
        return NULL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx != NULL && pthread_setspecific(thread_ctx, ctx) != 0) {
        EVP_MD_CTX_free(ctx);
        ctx = NULL;
    }
    thread_ctx_cache = ctx;
    return ctx;
}

/* Names up to this long are hashed from one stack buffer in a single update:
 * each EVP_DigestUpdate call costs a few nanoseconds of dispatch. */
enum { ONE_UPDATE_MAX = 256 };

static int sha256_prefixed(const char *name, size_t len, unsigned char digest[32])
{
    EVP_MD *md = fetched_sha256();
    EVP_MD_CTX *ctx = md != NULL ? digest_context() : NULL;
    if (ctx == NULL || EVP_DigestInit_ex2(ctx, md, NULL) != 1)
        return ADVLOCK_ECRYPTO;
    int ok;
    if (len <= ONE_UPDATE_MAX) {
        unsigned char text[sizeof namespace_prefix - 1 + ONE_UPDATE_MAX];
        memcpy(text, namespace_prefix, sizeof namespace_prefix - 1);
        if (len > 0)
            memcpy(text + sizeof namespace_prefix - 1, name, len);
        ok = EVP_DigestUpdate(ctx, text, sizeof namespace_prefix - 1 + len) == 1;
    } else {
        ok = EVP_DigestUpdate(ctx, namespace_prefix, sizeof namespace_prefix - 1) == 1
             && EVP_DigestUpdate(ctx, name, len) == 1;
    }
    unsigned int digest_len = 0;
    if (!ok || EVP_DigestFinal_ex(ctx, digest, &digest_len) != 1 || digest_len != 32)
        return ADVLOCK_ECRYPTO;
    return 0;
}

/* The last name this thread derived, with its key. A program takes the same
 * lock again and again (a worker's loop, a scheduler's tick), and the hash is
 * most of what an uncontended acquire costs the client: a repeat is one
 * comparison instead. The key is a pure function of the bytes, so the cache
 * can only be right or miss. Default TLS model: the shared library may be
 * loaded late (a Python binding), where static TLS is scarce. */
enum { CACHED_NAME_MAX = 64 };
static _Thread_local struct {
    size_t len; /* 0 with key_set 0: nothing cached yet */
    int key_set;
    int64_t key;
    char name[CACHED_NAME_MAX];
} last_derived;

static int cached_key(const char *name, size_t len, int64_t *key_out)
{
    if (!last_derived.key_set || last_derived.len != len
        || (len > 0 && memcmp(last_derived.name, name, len) != 0))
        return 0;
    *key_out = last_derived.key;
    return 1;
}

static void remember_key(const char *name, size_t len, int64_t key)
{
    if (len > CACHED_NAME_MAX)
        return;
    if (len > 0)
        memcpy(last_derived.name, name, len);
    last_derived.len = len;
    last_derived.key = key;
    last_derived.key_set = 1;
}

int advlock_derive_key(const char *lock_key, size_t len, int64_t *key_out)
{
    if ((lock_key == NULL && len > 0) || key_out == NULL)
        return ADVLOCK_EINVAL;
    if (cached_key(lock_key, len, key_out))
        return 0; /* these bytes passed the UTF-8 check when they were cached */
    if (!advlock_utf8_valid(lock_key, len))
        return ADVLOCK_EUTF8;

    unsigned char digest[32];
    int rc = sha256_prefixed(lock_key, len, digest);
    if (rc != 0)
        return rc;

    uint64_t big_endian = 0;
    for (int i = 0; i < 8; i++)
        big_endian = (big_endian << 8) | digest[i];
    /* Two's-complement reinterpretation, well defined unlike a signed cast
     * of an out-of-range value. */
    *key_out =
        big_endian <= INT64_MAX ? (int64_t)big_endian : -(int64_t)(UINT64_MAX - big_endian) - 1;
    remember_key(lock_key, len, *key_out);
    return 0;
}
