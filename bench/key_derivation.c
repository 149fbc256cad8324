/*
 * Question 1: what does advlock_derive_key() cost next to the cheapest way
 * OpenSSL 3 can hash the same bytes?
 *
 * The limit is SHA-256 over the 37 bytes "74726:BrighterMigration_public.Outbox"
 * with the digest fetched once and one EVP_MD_CTX reused, in a single
 * update: nothing a key derivation could skip. Alongside, to say where any
 * difference goes: the same digest in two updates (prefix, then name, as the
 * library does), the library's UTF-8 check alone, the floor for any
 * derivation that must check UTF-8 (the check, then the prefix and name
 * copied into a stack buffer and hashed in one update), and, for scale,
 * the one-call EVP_Digest(EVP_sha256()) whose implicit fetch the library
 * avoids.
 *
 * The library remembers the last name each thread derived and answers a
 * repeat from memory, so its derivation is timed on two names of the same
 * length taken in turn: every call hashes, as the first use of a name does.
 * The repeat is timed apart.
 *
 *     key_derivation [--rounds 11] [--iterations 200000]
 */
#include <math.h>
#include <openssl/evp.h>
#include <string.h>

#include "advlock.h"
#include "bench.h"

static const char lock_name[] = "BrighterMigration_public.Outbox";
/* As long as lock_name, so both cost the same to hash. */
static const char other_name[] = "BrighterMigration_public.Inbox_";
_Static_assert(sizeof other_name == sizeof lock_name, "the two names hash the same bytes");
static const char prefixed_name[] = "74726:BrighterMigration_public.Outbox";
static const size_t name_len = sizeof lock_name - 1;
static const size_t prefixed_len = sizeof prefixed_name - 1;

static EVP_MD *sha256;
static EVP_MD_CTX *reused_ctx;
static long iterations;

/* Every result lands here, so no loop can be optimised away. */
static volatile int64_t sink;

static int64_t first_8_bytes(const unsigned char *digest)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | digest[i];
    return (int64_t)v;
}

static int64_t raw_one_update(void)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len;
    if (EVP_DigestInit_ex2(reused_ctx, sha256, NULL) != 1
        || EVP_DigestUpdate(reused_ctx, prefixed_name, prefixed_len) != 1
        || EVP_DigestFinal_ex(reused_ctx, digest, &len) != 1)
        bench_fail("OpenSSL failed");
    return first_8_bytes(digest);
}

static int64_t raw_two_updates(void)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len;
    if (EVP_DigestInit_ex2(reused_ctx, sha256, NULL) != 1
        || EVP_DigestUpdate(reused_ctx, "74726:", 6) != 1
        || EVP_DigestUpdate(reused_ctx, lock_name, name_len) != 1
        || EVP_DigestFinal_ex(reused_ctx, digest, &len) != 1)
        bench_fail("OpenSSL failed");
    return first_8_bytes(digest);
}

static int64_t checked_one_update(void)
{
    char buffer[64];
    if (!advlock_utf8_valid(lock_name, name_len))
        bench_fail("not UTF-8");
    memcpy(buffer, "74726:", 6);
    memcpy(buffer + 6, lock_name, name_len);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len;
    if (EVP_DigestInit_ex2(reused_ctx, sha256, NULL) != 1
        || EVP_DigestUpdate(reused_ctx, buffer, 6 + name_len) != 1
        || EVP_DigestFinal_ex(reused_ctx, digest, &len) != 1)
        bench_fail("OpenSSL failed");
    return first_8_bytes(digest);
}

static int64_t raw_implicit_fetch(void)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len;
    if (EVP_Digest(prefixed_name, prefixed_len, digest, &len, EVP_sha256(), NULL) != 1)
        bench_fail("OpenSSL failed");
    return first_8_bytes(digest);
}

static int64_t library(const char *name)
{
    int64_t key;
    if (advlock_derive_key(name, name_len, &key) != 0)
        bench_fail("advlock_derive_key failed");
    return key;
}

/* A name other than the one derived last: the library must hash. */
static int64_t library_new_name(void)
{
    static unsigned turn;
    return library((turn ^= 1) ? other_name : lock_name);
}

/* Each round times `iterations` calls and returns ns per call. */
#define TIMED_ROUND(function_name, call)                              \
    static double function_name(void *arg)                            \
    {                                                                 \
        (void)arg;                                                    \
        int64_t start = bench_now_ns();                               \
        for (long i = 0; i < iterations; i++)                         \
            sink = (call);                                            \
        return (double)(bench_now_ns() - start) / (double)iterations; \
    }

TIMED_ROUND(round_library, library_new_name())
TIMED_ROUND(round_library_repeat, library(lock_name))
TIMED_ROUND(round_raw, raw_one_update())
TIMED_ROUND(round_raw_two_updates, raw_two_updates())
TIMED_ROUND(round_utf8_check, advlock_utf8_valid(lock_name, name_len))
TIMED_ROUND(round_checked_one_update, checked_one_update())
TIMED_ROUND(round_implicit_fetch, raw_implicit_fetch())

int main(int argc, char **argv)
{
    static const char *const options[] = {"--rounds", "--iterations", NULL};
    bench_check_options(argc, argv, options);
    int rounds = (int)bench_option(argc, argv, "--rounds", 11);
    iterations = (long)bench_option(argc, argv, "--iterations", 200000);
    if (rounds < 1 || iterations < 1)
        bench_fail("--rounds and --iterations must be positive");

    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    reused_ctx = EVP_MD_CTX_new();
    if (sha256 == NULL || reused_ctx == NULL)
        bench_fail("OpenSSL could not set up SHA-256");

    /* Same key every way, or the comparison means nothing. This also does
     * each path's one-time setup (the library's per-thread context) before
     * any round is timed. */
    int64_t expected = raw_one_update();
    if (library(lock_name) != expected || raw_two_updates() != expected
        || checked_one_update() != expected || raw_implicit_fetch() != expected)
        bench_fail("the derivations disagree on the key");

    bench_contestant c[] = {
        {.name = "library", .run_round = round_library},
        {.name = "raw", .run_round = round_raw},
        {.name = "raw two updates", .run_round = round_raw_two_updates},
        {.name = "utf8 check", .run_round = round_utf8_check},
        {.name = "checked, one update", .run_round = round_checked_one_update},
        {.name = "implicit fetch", .run_round = round_implicit_fetch},
        {.name = "library, same name again", .run_round = round_library_repeat},
    };
    bench_interleave(c, sizeof c / sizeof c[0], rounds);

    double lib = bench_median_of(&c[0], rounds);
    double raw = bench_median_of(&c[1], rounds);
    double two = bench_median_of(&c[2], rounds);
    double utf8 = bench_median_of(&c[3], rounds);
    double floor = bench_median_of(&c[4], rounds);
    double implicit = bench_median_of(&c[5], rounds);
    double repeat = bench_median_of(&c[6], rounds);
    double ratio = bench_median_ratio(&c[0], &c[1], rounds);

    char limit[128];
    snprintf(limit, sizeof limit, "raw OpenSSL, fetched MD, reused ctx: %.1f ns", raw);
    bench_emit(&(bench_figure){"key_derivation_ns", lib, "ns", limit, ratio, "ratio <= 1.1",
                               ratio <= 1.1});
    bench_emit(&(bench_figure){"key_derivation_raw_openssl_ns", raw, "ns", NULL, NAN, NULL, -1});
    bench_emit(&(bench_figure){"key_derivation_raw_two_updates_ns", two, "ns", limit,
                               bench_median_ratio(&c[2], &c[1], rounds), NULL, -1});
    bench_emit(&(bench_figure){"key_utf8_check_ns", utf8, "ns", NULL, NAN, NULL, -1});
    bench_emit(&(bench_figure){"key_derivation_checked_floor_ns", floor, "ns", limit,
                               bench_median_ratio(&c[4], &c[1], rounds), NULL, -1});
    bench_emit(&(bench_figure){"key_derivation_implicit_fetch_ns", implicit, "ns", limit,
                               bench_median_ratio(&c[5], &c[1], rounds), NULL, -1});
    bench_emit(&(bench_figure){"key_derivation_repeat_ns", repeat, "ns", limit,
                               bench_median_ratio(&c[6], &c[1], rounds), NULL, -1});
    bench_note("key derivation of a new name: %.1f ns = the floor for any checked derivation "
               "%.1f (raw digest %.1f + UTF-8 check %.1f + one copy) + %.1f for the library's "
               "calls, thread context and last-name memory; the same name again: %.1f ns "
               "(medians of %d interleaved rounds of %ld)",
               lib, floor, raw, utf8, lib - floor, repeat, rounds, iterations);

    EVP_MD_CTX_free(reused_ctx);
    EVP_MD_free(sha256);
    return 0;
}
