/* UTF-8 well-formedness: every class of ill-formed sequence is rejected,
 * every boundary of the well-formed ranges accepted, and the checker agrees
 * with a plain decoder on every 1-4 byte sequence built from interesting bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "advlock.h"
#include "plain_utf8.h"

#define VALID(lit)   assert_int_equal(advlock_utf8_valid(lit, sizeof(lit) - 1), 1)
#define INVALID(lit) assert_int_equal(advlock_utf8_valid(lit, sizeof(lit) - 1), 0)

static void accepts_range_boundaries(void **state)
{
    (void)state;
    VALID("");
    VALID("plain ascii, long enough to take the eight-byte path");
    VALID("\x00\x7F");
    VALID("\xC2\x80");         /* U+0080 */
    VALID("\xDF\xBF");         /* U+07FF */
    VALID("\xE0\xA0\x80");     /* U+0800 */
    VALID("\xED\x9F\xBF");     /* U+D7FF, just below the surrogates */
    VALID("\xEE\x80\x80");     /* U+E000, just above them */
    VALID("\xEF\xBF\xBF");     /* U+FFFF */
    VALID("\xF0\x90\x80\x80"); /* U+10000 */
    VALID("\xF4\x8F\xBF\xBF"); /* U+10FFFF, the last code point */
    VALID("Stra\xC3\x9F"
          "e \xF0\x9F\x94\x92 \xE6\x97\xA5");
}

static void rejects_ill_formed(void **state)
{
    (void)state;
    INVALID("\x80"); /* stray continuation byte */
    INVALID("abc\xBF");
    INVALID("\xC3");         /* truncated two-byte sequence */
    INVALID("\xE6\x97");     /* truncated three-byte sequence */
    INVALID("\xF0\x9F\x94"); /* truncated four-byte sequence */
    INVALID("\xC3"
            "a");                        /* lead byte followed by ASCII */
    INVALID("\xC0\x80");                 /* overlong NUL */
    INVALID("\xC1\xBF");                 /* overlong U+007F */
    INVALID("\xE0\x80\x80");             /* overlong three-byte */
    INVALID("\xE0\x9F\xBF");             /* overlong U+07FF */
    INVALID("\xF0\x80\x80\x80");         /* overlong four-byte */
    INVALID("\xF0\x8F\xBF\xBF");         /* overlong U+FFFF */
    INVALID("\xED\xA0\x80");             /* U+D800, first surrogate */
    INVALID("\xED\xBF\xBF");             /* U+DFFF, last surrogate */
    INVALID("\xED\xA0\xBD\xED\xB4\x92"); /* a CESU-8 surrogate pair */
    INVALID("\xF4\x90\x80\x80");         /* U+110000 */
    INVALID("\xF5\x80\x80\x80");         /* lead byte beyond Unicode */
    INVALID("\xFF");
    INVALID("\xFE\xFF");
    INVALID("\xE6\x97\xA5\x80"); /* one continuation too many */
}

static void rejection_found_past_ascii_prefix(void **state)
{
    (void)state;
    char buf[64];
    for (size_t at = 0; at < sizeof buf; at++) {
        memset(buf, 'k', sizeof buf);
        buf[at] = (char)0xFF;
        assert_int_equal(advlock_utf8_valid(buf, sizeof buf), 0);
        /* The bad byte outside the checked length does not matter. */
        assert_int_equal(advlock_utf8_valid(buf, at), 1);
    }
}

static void null_pointer(void **state)
{
    (void)state;
    assert_int_equal(advlock_utf8_valid(NULL, 0), 1);
    assert_int_equal(advlock_utf8_valid(NULL, 3), 0);
}

static void agrees_with_plain_decoder(void **state)
{
    (void)state;
    static const unsigned char bytes[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                          0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                          0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
    size_t nb = sizeof bytes;
    unsigned char s[4];
    long checked = 0;
    for (size_t len = 1; len <= 4; len++) {
        size_t total = 1;
        for (size_t k = 0; k < len; k++)
            total *= nb;
        for (size_t idx = 0; idx < total; idx++) {
            size_t v = idx;
            for (size_t k = 0; k < len; k++) {
                s[k] = bytes[v % nb];
                v /= nb;
            }
            int expected = plain_utf8_valid(s, len);
            if (advlock_utf8_valid((const char *)s, len) != expected)
                fail_msg("disagreement on %zu bytes %02X %02X %02X %02X", len, s[0],
                         len > 1 ? s[1] : 0, len > 2 ? s[2] : 0, len > 3 ? s[3] : 0);
            checked++;
        }
    }
    assert_true(checked > 390000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_range_boundaries),          cmocka_unit_test(rejects_ill_formed),
        cmocka_unit_test(rejection_found_past_ascii_prefix), cmocka_unit_test(null_pointer),
        cmocka_unit_test(agrees_with_plain_decoder),
    };
    return cmocka_run_group_tests_name("utf-8", tests, NULL, NULL);
}
