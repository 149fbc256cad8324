/*
 * A UTF-8 validator written the obvious way, to check the library's fast one
 * against: decode each sequence, then judge the code point (overlong,
 * surrogate, beyond U+10FFFF). Shared by the unit tests and the fuzzer.
 */
#ifndef PLAIN_UTF8_H
#define PLAIN_UTF8_H

#include <stddef.h>
#include <stdint.h>

static int plain_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint32_t c = s[i], cp, min;
        size_t n;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1F;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0F;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else
            return 0;
        if (i + n >= len)
            return 0; /* truncated */
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n + 1;
    }
    return 1;
}

#endif
