/*
 * Human-readable text: error and outcome names, and the bounded, locale-free
 * formatting behind every message a machine produces.
 */
#include "core.h"

#include <string.h>

const char *advlock_strerror(int error)
{
    switch (error) {
    case ADVLOCK_OK: return "success";
    case ADVLOCK_EINVAL: return "invalid argument";
    case ADVLOCK_EUTF8: return "lock key is not valid UTF-8";
    case ADVLOCK_EMISUSE: return "call not allowed in the lock machine's current state";
    case ADVLOCK_ECRYPTO: return "SHA-256 computation failed in libcrypto";
    case ADVLOCK_ENOMEM: return "out of memory";
    case ADVLOCK_ENULL: return "server returned NULL where a boolean was expected";
    case ADVLOCK_ESERVER: return "server reported an error";
    case ADVLOCK_ECONNLOST: return "connection to the server was lost";
    case ADVLOCK_ESTANDBY: return "the server is a standby in recovery";
    case ADVLOCK_ESESSION: return ADVLOCK_SESSION_ELSEWHERE;
    case ADVLOCK_ENOANSWER:
        return "no answer from the server within the bound; the connection is unusable and must "
               "be closed (closing it ends the server session and any lock it may have taken)";
    default: return "unknown advlock error";
    }
}

const char *advlock_outcome_name(advlock_outcome outcome)
{
    switch (outcome) {
    case ADVLOCK_ACQUIRED: return "acquired";
    case ADVLOCK_RELEASED: return "released";
    case ADVLOCK_NOT_HELD: return "not held";
    case ADVLOCK_TIMED_OUT: return "timed out";
    case ADVLOCK_CANCELLED: return "cancelled";
    case ADVLOCK_FAILED: return "failed";
    case ADVLOCK_ENDS_WITH_TRANSACTION: return "ends with transaction";
    case ADVLOCK_HELD: return "held";
    default: return "unknown outcome";
    }
}

static const char ellipsis[] = "...";

void advlock_text_init(advlock_text *t, char *buf, size_t size)
{
    t->buf = buf;
    t->size = size;
    t->len = 0;
    t->cut = 0;
    if (size > 0)
        buf[0] = '\0';
}

static int is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

void advlock_text_putn(advlock_text *t, const char *s, size_t n)
{
    if (t->cut || t->size == 0 || n == 0)
        return;
    size_t room = t->size - 1 - t->len;
    if (n <= room) {
        memcpy(t->buf + t->len, s, n);
        t->len += n;
        t->buf[t->len] = '\0';
        return;
    }
    /* Keep room for the ellipsis, then back up to a character boundary so
     * the cut never splits a multi-byte character. Positions at or past
     * t->len are still in s. */
    t->cut = 1;
    size_t end = t->size - 1 > sizeof ellipsis - 1 ? t->size - sizeof ellipsis : 0;
    while (end > 0
           && is_continuation((unsigned char)(end < t->len ? t->buf[end] : s[end - t->len])))
        end--;
    if (end > t->len)
        memcpy(t->buf + t->len, s, end - t->len);
    size_t tail = t->size - 1 - end;
    if (tail > sizeof ellipsis - 1)
        tail = sizeof ellipsis - 1;
    memcpy(t->buf + end, ellipsis, tail);
    t->len = end + tail;
    t->buf[t->len] = '\0';
}

void advlock_text_put(advlock_text *t, const char *s)
{
    advlock_text_putn(t, s, strlen(s));
}

/* Decimal digits of v, most significant first; returns their count. */
static size_t decimal(uint64_t v, char out[20])
{
    char rev[20];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    return n;
}

/* Seconds as digits, with no locale: printf's %f would write "0,5" under a
 * comma-decimal LC_NUMERIC, and the reference never does. */
static size_t seconds_text(int64_t ms, char out[32])
{
    uint64_t v = (uint64_t)ms;
    size_t n = decimal(v / 1000, out);
    unsigned frac = (unsigned)(v % 1000);
    if (frac != 0) {
        char digits[3] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                          (char)('0' + frac % 10)};
        size_t keep = 3;
        while (keep > 1 && digits[keep - 1] == '0') /* frac != 0: one digit stays */
            keep--;
        out[n++] = '.';
        memcpy(out + n, digits, keep);
        n += keep;
    }
    return n;
}

void advlock_text_put_int(advlock_text *t, int64_t v)
{
    char out[24];
    size_t n = 0;
    if (v < 0) {
        out[n++] = '-';
        n += decimal((uint64_t)0 - (uint64_t)v, out + n);
    } else {
        n += decimal((uint64_t)v, out + n);
    }
    advlock_text_putn(t, out, n);
}

void advlock_text_put_seconds(advlock_text *t, int64_t ms)
{
    char out[32];
    advlock_text_putn(t, out, seconds_text(ms < 0 ? 0 : ms, out));
}

int advlock_format_seconds(int64_t ms, char *buf, size_t size)
{
    if (ms < 0 || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    char out[32];
    size_t n = seconds_text(ms, out);
    if (size > 0) {
        size_t copy = n < size - 1 ? n : size - 1;
        memcpy(buf, out, copy);
        buf[copy] = '\0';
    }
    return (int)n;
}

/* The length of the well-formed UTF-8 character at s (at most n bytes), or
 * 0 when the bytes there are not one. */
static size_t character_length(const unsigned char *s, size_t n)
{
    size_t want = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    return want <= n && advlock_utf8_valid((const char *)s, want) ? want : 0;
}

static void put_escape(advlock_text *t, const char *prefix, unsigned v)
{
    static const char hex[] = "0123456789abcdef";
    char digits[2] = {hex[v >> 4 & 15], hex[v & 15]};
    advlock_text_put(t, prefix);
    advlock_text_putn(t, digits, sizeof digits);
}

/* A name can hold any character, and a message goes to terminals and logs:
 * control characters (C0, DEL, C1) and bytes that are not UTF-8 are shown
 * escaped, so a message is always one line of printable, valid UTF-8. */
void advlock_text_put_key(advlock_text *t, const char *key, size_t len)
{
    if (len == 0)
        return; /* key may be NULL then */
    const unsigned char *k = (const unsigned char *)key;
    size_t start = 0, i = 0;
    while (i < len) {
        size_t n = character_length(k + i, len - i);
        unsigned c0 = k[i], c1 = n == 2 ? k[i + 1] : 0;
        int c1_control = c0 == 0xC2 && c1 >= 0x80 && c1 <= 0x9F;
        if (n != 0 && c0 >= 0x20 && c0 != 0x7F && !c1_control) {
            i += n;
            continue;
        }
        advlock_text_putn(t, key + start, i - start);
        switch (c0) {
        case 0: advlock_text_putn(t, "\\0", 2); break;
        case '\t': advlock_text_putn(t, "\\t", 2); break;
        case '\n': advlock_text_putn(t, "\\n", 2); break;
        case '\r': advlock_text_putn(t, "\\r", 2); break;
        default:
            if (c1_control)
                put_escape(t, "\\u00", c1);
            else
                put_escape(t, "\\x", c0);
        }
        i += c1_control ? 2 : 1;
        start = i;
    }
    advlock_text_putn(t, key + start, len - start);
}

int advlock_escape_name(const char *name, size_t len, char *buf, size_t size)
{
    if ((name == NULL && len > 0) || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    advlock_text t;
    advlock_text_init(&t, buf, size);
    advlock_text_put_key(&t, name, len);
    return (int)t.len;
}
