/*
 * Fuzzes key derivation and the UTF-8 check against independent
 * computations: a one-shot EVP digest of the same bytes, and a validator
 * that decodes each sequence and then judges the code point.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "../tests/unit/plain_utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int valid = plain_utf8_valid(data, size);
    if (advlock_utf8_valid((const char *)data, size) != valid)
        abort();
    int64_t key = 0;
    int rc = advlock_derive_key((const char *)data, size, &key);
    if (!valid) {
        if (rc != ADVLOCK_EUTF8)
            abort();
        return 0;
    }
    unsigned char *buf = malloc(size + 6);
    if (buf == NULL)
        return 0;
    memcpy(buf, "74726:", 6);
    if (size > 0)
        memcpy(buf + 6, data, size);
    unsigned char digest[32];
    unsigned int digest_len = 0;
    if (EVP_Digest(buf, size + 6, digest, &digest_len, EVP_sha256(), NULL) != 1)
        abort();
    free(buf);
    uint64_t expected = 0;
    for (int i = 0; i < 8; i++)
        expected = expected << 8 | digest[i];
    if (rc != 0 || (uint64_t)key != expected)
        abort();
    return 0;
}
