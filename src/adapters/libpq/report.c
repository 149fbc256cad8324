/*
 * The caller's view of an operation: the machine's facts plus the server's
 * words and notices. A report is most of an adapter's size, and reports are
 * started, finished and copied once per operation, so each of these touches
 * only the bytes that carry something: the facts, and the strings as far as
 * they go, never the unused rest of their buffers.
 */
#include "pq.h"

#include <stdio.h>
#include <string.h>

void advlock_pq_report_begin(advlock_pq_report *r)
{
    r->server_message[0] = '\0';
    r->notices = 0;
    r->notice_sqlstate[0] = '\0';
    r->notice[0] = '\0';
    r->lease_expiry = ADVLOCK_LEASE_LIVE;
}

/* Whether an outcome's sentence quotes the server's words. */
static int quotes_server(const advlock_report *lock)
{
    return lock->outcome == ADVLOCK_FAILED || lock->detail == ADVLOCK_DETAIL_DIAGNOSIS_FAILED;
}

void advlock_pq_report_finish(advlock_pq_report *r, const advlock_report *lock)
{
    r->lock = *lock;
    /* A failure the operation got past (the 57014 of a cancel it asked
     * for) is not what the report says. */
    if (!quotes_server(&r->lock))
        r->server_message[0] = '\0';
}

void advlock_pq_report_lost(advlock_pq_report *r, const char *sqlstate, const char *words)
{
    r->lock.outcome = ADVLOCK_FAILED;
    r->lock.failure = ADVLOCK_ECONNLOST;
    r->lock.detail = ADVLOCK_DETAIL_LOST;
    snprintf(r->lock.sqlstate, sizeof r->lock.sqlstate, "%s", sqlstate);
    advlock_pq_copy_line(r->server_message, sizeof r->server_message, words);
    r->lease_expiry = ADVLOCK_LEASE_LIVE;
}

void advlock_pq_report_refuse(advlock_pq_report *r)
{
    memset(&r->lock, 0, sizeof r->lock);
    r->lock.outcome = ADVLOCK_FAILED;
    advlock_pq_report_begin(r);
}

/* Most reports carry no words: an empty string costs no call into libc. */
static void copy_string(char *to, const char *from)
{
    if (from[0] == '\0')
        to[0] = '\0';
    else
        memcpy(to, from, strlen(from) + 1);
}

void advlock_pq_report_copy(advlock_pq_report *to, const advlock_pq_report *from)
{
    to->lock = from->lock;
    copy_string(to->server_message, from->server_message);
    to->notices = from->notices;
    memcpy(to->notice_sqlstate, from->notice_sqlstate, sizeof to->notice_sqlstate);
    copy_string(to->notice, from->notice);
    to->lease_expiry = from->lease_expiry;
}

int advlock_pq_describe(const advlock_pq_report *r, const char *name, size_t len, char *buf,
                        size_t size)
{
    if (r == NULL)
        return ADVLOCK_EINVAL;
    const char *words = r->server_message[0] != '\0' ? r->server_message : NULL;
    if (r->lease_expiry == ADVLOCK_LEASE_LIVE || (name == NULL && len > 0)
        || (buf == NULL && size > 0))
        return advlock_describe(&r->lock, name, len, words, buf, size);
    /* The core's sentence for a lost lock says its connection closed; a
     * lease that ran out closed nothing, and the server may hold the lock
     * yet: the words (the lease's) say so. */
    char shown[ADVLOCK_KEY_ECHO_MAX + 4];
    advlock_escape_name(name, len, shown, sizeof shown);
    return snprintf(buf, size, "Lock '%s' lost: its lease ran out: %s", shown,
                    words != NULL ? words : "");
}
