/*
 * Lock name -> 64-bit advisory-lock key, as the reference derives it.
 *
 * OpenSSL 3's implicit fetch (EVP_sha256() handed to EVP_Digest) looks the
 * algorithm up in the provider registry on every call, which costs several
 * times the hash of a short name. The digest is therefore fetched once per
 * process and each thread keeps one digest context for reuse.
 */
#include "advlock.h"

#include <openssl/evp.h>
#include <pthread.h>

/* The reference's namespace, "BRIG" in ASCII, folded into the hashed text. */
static const char namespace_prefix[] = "74726:";

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256;
static pthread_key_t thread_ctx;
static int setup_ok;

static void free_thread_ctx(void *ctx)
{
    EVP_MD_CTX_free(ctx);
}

static void setup(void)
{
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256 == NULL)
        return;
    if (pthread_key_create(&thread_ctx, free_thread_ctx) != 0) {
        EVP_MD_free(sha256);
        sha256 = NULL;
        return;
    }
    setup_ok = 1;
}

static EVP_MD_CTX *digest_context(void)
{
    if (pthread_once(&setup_once, setup) != 0 || !setup_ok)
        return NULL;
    EVP_MD_CTX *ctx = pthread_getspecific(thread_ctx);
    if (ctx != NULL)
        return ctx;
    ctx = EVP_MD_CTX_new();
    if (ctx != NULL && pthread_setspecific(thread_ctx, ctx) != 0) {
        EVP_MD_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

static int sha256_prefixed(const char *name, size_t len, unsigned char digest[32])
{
    EVP_MD_CTX *ctx = digest_context();
    if (ctx == NULL)
        return ADVLOCK_ECRYPTO;
    unsigned int digest_len = 0;
    if (EVP_DigestInit_ex2(ctx, sha256, NULL) != 1
        || EVP_DigestUpdate(ctx, namespace_prefix, sizeof namespace_prefix - 1) != 1
        || (len > 0 && EVP_DigestUpdate(ctx, name, len) != 1)
        || EVP_DigestFinal_ex(ctx, digest, &digest_len) != 1 || digest_len != 32)
        return ADVLOCK_ECRYPTO;
    return 0;
}

int advlock_derive_key(const char *lock_key, size_t len, int64_t *key_out)
{
    if ((lock_key == NULL && len > 0) || key_out == NULL)
        return ADVLOCK_EINVAL;
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
    *key_out = big_endian <= INT64_MAX ? (int64_t)big_endian
                                       : -(int64_t)(UINT64_MAX - big_endian) - 1;
    return 0;
}
