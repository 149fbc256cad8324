/*
 * The name advlock run gives its session (application_name), so that
 * pg_stat_activity, pg_activity and every dashboard show which locks a
 * session holds, with nothing of advlock installed on the server.
 */
#include <stdio.h>
#include <string.h>

#include "run.h"

/* One byte as the name shows it: itself if printable ASCII, else \xNN.
 * Servers show non-ASCII application names as '?' (before PostgreSQL 16)
 * or as \xNN escapes (16 and later): escaped here, every version shows the
 * same text, and a terminal reading it gets no control character. */
static size_t shown_byte(unsigned char b, char unit[5])
{
    if (b >= 0x20 && b < 0x7f) {
        unit[0] = (char)b;
        return 1;
    }
    snprintf(unit, 5, "\\x%02x", b);
    return 4;
}

/* The name so far: n bytes, of which the first fits leave room for the
 * ellipsis that ends a name cut short. */
typedef struct shown {
    char *out;
    size_t n, fits;
} shown;

static const char ellipsis[] = "...";
enum { ROOM = RUN_SESSION_NAME_SIZE - 1 };

/* Appends text as shown; 0 once a byte does not fit, the name then ended
 * by the ellipsis after its last whole byte that leaves it room. */
static int append(shown *s, const char *text)
{
    for (; *text != '\0'; text++) {
        char unit[5];
        size_t len = shown_byte((unsigned char)*text, unit);
        if (s->n + len > ROOM) {
            memcpy(s->out + s->fits, ellipsis, sizeof ellipsis);
            return 0;
        }
        memcpy(s->out + s->n, unit, len);
        s->n += len;
        if (s->n + sizeof ellipsis - 1 <= ROOM)
            s->fits = s->n;
    }
    s->out[s->n] = '\0';
    return 1;
}

void run_session_name(const cli_lock *names, int count, char out[RUN_SESSION_NAME_SIZE])
{
    static const char prefix[] = "advlock: ";
    memcpy(out, prefix, sizeof prefix);
    shown s = {out, sizeof prefix - 1, sizeof prefix - 1};
    for (int i = 0; i < count; i++)
        if ((i > 0 && !append(&s, ", ")) || !append(&s, names[i].name))
            return;
}
