/*
 * UTF-8 well-formedness, per the Unicode Standard, table 3-7. The reference
 * hashes a .NET string's UTF-8 encoding, so only byte sequences that some
 * string encodes to can name a lock: overlong forms, surrogates and code
 * points above U+10FFFF are rejected rather than hashed.
 */
#include "advlock.h"

#include <string.h>

/* Lock names are mostly ASCII: skip it sixteen bytes at a time, and finish
 * a short tail with one 8-byte load that overlaps what was already checked. */
static size_t ascii_prefix(const unsigned char *s, size_t len)
{
    const uint64_t high_bits = UINT64_C(0x8080808080808080);
    size_t i = 0;
    uint64_t a, b;
    while (len - i >= 16) {
        memcpy(&a, s + i, sizeof a);
        memcpy(&b, s + i + 8, sizeof b);
        if ((a | b) & high_bits)
            break;
        i += 16;
    }
    while (len - i >= 8) {
        memcpy(&a, s + i, sizeof a);
        if (a & high_bits)
            break;
        i += 8;
    }
    if (i < len && len >= 8 && len - i < 8) {
        memcpy(&a, s + len - 8, sizeof a);
        if (!(a & high_bits))
            return len;
    }
    while (i < len && s[i] < 0x80)
        i++;
    return i;
}

static int in_range(unsigned char c, unsigned char lo, unsigned char hi)
{
    return c >= lo && c <= hi;
}

int advlock_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    if (s == NULL)
        return len == 0;

    size_t i = 0;
    while (i < len) {
        i += ascii_prefix(s + i, len - i);
        if (i == len)
            break;

        unsigned char lead = s[i];
        size_t need;
        /* The second byte's range is what excludes overlong forms,
         * surrogates and values above U+10FFFF. */
        unsigned char lo = 0x80, hi = 0xBF;
        if (in_range(lead, 0xC2, 0xDF)) {
            need = 1;
        } else if (in_range(lead, 0xE0, 0xEF)) {
            need = 2;
            if (lead == 0xE0)
                lo = 0xA0;
            else if (lead == 0xED)
                hi = 0x9F;
        } else if (in_range(lead, 0xF0, 0xF4)) {
            need = 3;
            if (lead == 0xF0)
                lo = 0x90;
            else if (lead == 0xF4)
                hi = 0x8F;
        } else {
            return 0; /* C0, C1, F5..FF, or a stray continuation byte */
        }
        if (len - i - 1 < need)
            return 0; /* truncated */
        if (!in_range(s[i + 1], lo, hi))
            return 0;
        for (size_t k = 2; k <= need; k++)
            if (!in_range(s[i + k], 0x80, 0xBF))
                return 0;
        i += need + 1;
    }
    return 1;
}
