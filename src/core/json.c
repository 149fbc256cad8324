/*
 * Text as a JSON string: the one escaper of the command's JSON log and the
 * simulator's trace (advlock_json_string in include/advlock.h).
 */
#include <limits.h>
#include <string.h>

#include "advlock.h"

typedef struct sink {
    char *buf;
    size_t size;
    size_t kept; /* bytes in buf */
    size_t len;  /* bytes of the whole string */
    int cut;     /* a piece did not fit: nothing more goes in */
} sink;

static void put(sink *k, const char *piece, size_t n)
{
    k->len += n;
    if (k->cut || k->size == 0 || n > k->size - 1 - k->kept) {
        k->cut = 1;
        return;
    }
    memcpy(k->buf + k->kept, piece, n);
    k->kept += n;
}

/* The length of the well-formed UTF-8 character at s (at most left bytes),
 * or 0 if none starts there. */
static size_t char_length(const unsigned char *s, size_t left)
{
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    return n > 0 && n <= left && advlock_utf8_valid((const char *)s, n) ? n : 0;
}

int advlock_json_string(const char *text, char *buf, size_t size)
{
    if (text == NULL || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    size_t left = strlen(text);
    if (left > (INT_MAX - 2) / 6) /* \u00XX is the longest escape of a byte */
        return ADVLOCK_EINVAL;
    sink k = {buf, size, 0, 0, 0};
    const unsigned char *s = (const unsigned char *)text;
    put(&k, "\"", 1);
    while (left > 0) {
        size_t n = char_length(s, left);
        if (n == 0) {
            put(&k, "\\ufffd", 6);
            n = 1;
        } else if (*s == '"' || *s == '\\') {
            char esc[2] = {'\\', (char)*s};
            put(&k, esc, 2);
        } else if (*s == '\n') {
            put(&k, "\\n", 2);
        } else if (*s == '\t') {
            put(&k, "\\t", 2);
        } else if (*s < 0x20 || *s == 0x7F) {
            static const char hex[] = "0123456789abcdef";
            char esc[6] = {'\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 0xF]};
            put(&k, esc, 6);
        } else {
            put(&k, (const char *)s, n);
        }
        s += n;
        left -= n;
    }
    put(&k, "\"", 1);
    if (size > 0)
        buf[k.kept] = '\0';
    return (int)k.len;
}
