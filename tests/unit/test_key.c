/* Key derivation: published vectors, independent vectors, the 1 MiB key,
 * agreement with a plain EVP digest, argument errors, threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"

/* Appends the UTF-8 encoding of code point cp. */
static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t hex4(const char *p)
{
    char buf[5] = {p[0], p[1], p[2], p[3], 0};
    return (uint32_t)strtoul(buf, NULL, 16);
}

/* Decodes the JSON string literal at *p (which points at the opening quote)
 * into out; returns the byte length and advances *p past the closing quote. */
static size_t json_string(const char **p, char *out)
{
    const char *s = *p;
    assert_int_equal(*s, '"');
    s++;
    size_t n = 0;
    while (*s != '"') {
        assert_true(*s != '\0');
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case 'n':
            out[n++] = '\n';
            s++;
            break;
        case 't':
            out[n++] = '\t';
            s++;
            break;
        case 'r':
            out[n++] = '\r';
            s++;
            break;
        case '"':
            out[n++] = '"';
            s++;
            break;
        case '\\':
            out[n++] = '\\';
            s++;
            break;
        case '/':
            out[n++] = '/';
            s++;
            break;
        case 'u': {
            uint32_t cp = hex4(s + 1);
            s += 5;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
                assert_true(s[0] == '\\' && s[1] == 'u');
                uint32_t low = hex4(s + 2);
                s += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default: fail_msg("unsupported JSON escape \\%c", *s);
        }
    }
    *p = s + 1;
    return n;
}

/* Checks every row of a vectors file; returns how many rows it checked. */
static int check_vector_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", VECTOR_DIR, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[8192], key[8192];
    int rows = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] != '"')
            continue; /* header or comment */
        const char *p = line;
        size_t len = json_string(&p, key);
        long long expected, classid, objid;
        assert_int_equal(sscanf(p, "\t%lld\t%lld\t%lld", &expected, &classid, &objid), 3);

        int64_t got = 0;
        assert_int_equal(advlock_derive_key(key, len, &got), 0);
        if (got != expected)
            fail_msg("%s row %d (%s): derived %lld, expected %lld", name, rows + 1, line,
                     (long long)got, expected);
        /* pg_locks splits the key into two unsigned 32-bit halves. */
        uint64_t bits = (uint64_t)got;
        assert_int_equal(bits >> 32, (uint64_t)classid);
        assert_int_equal(bits & 0xFFFFFFFFu, (uint64_t)objid);
        rows++;
    }
    fclose(f);
    return rows;
}

static void published_vectors(void **state)
{
    (void)state;
    assert_int_equal(check_vector_file("keys.tsv"), 8);
}

static void independent_vectors(void **state)
{
    (void)state;
    assert_true(check_vector_file("extra.tsv") >= 28);
}

static void one_mebibyte_key(void **state)
{
    (void)state;
    size_t len = 1048576;
    char *key = malloc(len);
    assert_non_null(key);
    memset(key, 'x', len);
    int64_t got = 0;
    assert_int_equal(advlock_derive_key(key, len, &got), 0);
    assert_int_equal(got, INT64_C(6838183679466477994));
    free(key);
}

static void empty_key_may_be_null(void **state)
{
    (void)state;
    int64_t a = 0, b = 1;
    assert_int_equal(advlock_derive_key(NULL, 0, &a), 0);
    assert_int_equal(advlock_derive_key("", 0, &b), 0);
    assert_int_equal(a, INT64_C(-740567494393065055));
    assert_int_equal(a, b);
}

static void embedded_nul_is_part_of_the_key(void **state)
{
    (void)state;
    int64_t with_nul = 0, prefix = 0;
    assert_int_equal(advlock_derive_key("a\0b", 3, &with_nul), 0);
    assert_int_equal(advlock_derive_key("a\0b", 1, &prefix), 0);
    assert_int_equal(with_nul, INT64_C(1372762861005608360));
    assert_int_not_equal(with_nul, prefix);
}

static void argument_errors_leave_output_alone(void **state)
{
    (void)state;
    int64_t out = 42;
    assert_int_equal(advlock_derive_key(NULL, 1, &out), ADVLOCK_EINVAL);
    assert_int_equal(advlock_derive_key("k", 1, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_derive_key(NULL, 0, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_derive_key("\xC3", 1, &out), ADVLOCK_EUTF8);
    assert_int_equal(advlock_derive_key("ok\xED\xA0\x80", 5, &out), ADVLOCK_EUTF8);
    assert_int_equal(out, 42);
}

/* The same computation written plainly with a one-shot EVP digest. */
static int64_t reference_key(const char *key, size_t len)
{
    size_t total = 6 + len;
    unsigned char *buf = malloc(total);
    assert_non_null(buf);
    memcpy(buf, "74726:", 6);
    if (len > 0)
        memcpy(buf + 6, key, len);
    unsigned char digest[32];
    unsigned int digest_len = 0;
    assert_int_equal(EVP_Digest(buf, total, digest, &digest_len, EVP_sha256(), NULL), 1);
    free(buf);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | digest[i];
    int64_t signed_v;
    memcpy(&signed_v, &v, sizeof signed_v);
    return signed_v;
}

static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Random well-formed UTF-8 of every length class, against the plain digest. */
static void agrees_with_plain_digest(void **state)
{
    (void)state;
    uint64_t seed = 7;
    char key[600];
    for (int round = 0; round < 2000; round++) {
        size_t len = 0, chars = next_random(&seed) % 130;
        for (size_t i = 0; i < chars; i++) {
            uint32_t cp;
            do {
                static const uint32_t limits[] = {0x80, 0x800, 0x10000, 0x110000};
                cp = (uint32_t)(next_random(&seed) % limits[next_random(&seed) % 4]);
            } while (cp >= 0xD800 && cp <= 0xDFFF);
            len += put_utf8(key + len, cp);
        }
        int64_t got = 0;
        assert_int_equal(advlock_derive_key(key, len, &got), 0);
        assert_int_equal(got, reference_key(key, len));
    }
}

/* The thread's last name is remembered: repeats, names that differ in one
 * byte or in length, the empty name and names past the remembered length
 * all give the plain digest's key, in any order. */
static void repeats_and_near_misses(void **state)
{
    (void)state;
    char long_name[100];
    memset(long_name, 'n', sizeof long_name);
    static const struct {
        const char *name;
        size_t len;
    } names[] = {
        {"migrations", 10}, {"migrations", 10},
        {"migrationt", 10}, {"migrations", 10},
        {"migration", 9},   {"", 0},
        {"migrations", 10}, {NULL, 0},
        {"\0", 1},          {"", 0},
        {NULL, 64},         {NULL, 65},
        {NULL, 64},         {NULL, 65},
        {"migrations", 10},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *name = names[i].name;
        if (name == NULL && names[i].len > 0)
            name = long_name;
        int64_t got = 0;
        assert_int_equal(advlock_derive_key(name, names[i].len, &got), 0);
        assert_int_equal(got, reference_key(name, names[i].len));
    }
    /* A remembered name does not excuse a bad one of another length. */
    assert_int_equal(advlock_derive_key("migrations\xC0", 11, &(int64_t){0}), ADVLOCK_EUTF8);
}

struct worker {
    int64_t keys[200];
};

static void *derive_many(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 200; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "job-%d", i);
        if (advlock_derive_key(name, (size_t)n, &w->keys[i]) != 0)
            w->keys[i] = 0;
    }
    return NULL;
}

/* Each thread gets its own digest context; answers must not interfere. */
static void threads_agree(void **state)
{
    (void)state;
    struct worker workers[4];
    pthread_t threads[4];
    for (int t = 0; t < 4; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, derive_many, &workers[t]), 0);
    for (int t = 0; t < 4; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    for (int i = 0; i < 200; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "job-%d", i);
        int64_t expected = reference_key(name, (size_t)n);
        for (int t = 0; t < 4; t++)
            assert_int_equal(workers[t].keys[i], expected);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(published_vectors),
        cmocka_unit_test(independent_vectors),
        cmocka_unit_test(one_mebibyte_key),
        cmocka_unit_test(empty_key_may_be_null),
        cmocka_unit_test(embedded_nul_is_part_of_the_key),
        cmocka_unit_test(argument_errors_leave_output_alone),
        cmocka_unit_test(agrees_with_plain_digest),
        cmocka_unit_test(repeats_and_near_misses),
        cmocka_unit_test(threads_agree),
    };
    return cmocka_run_group_tests_name("key derivation", tests, NULL, NULL);
}
