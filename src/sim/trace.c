/*
 * The JSON-lines trace: one object per client event, written into a fixed
 * buffer and handed to the caller's callback. Fields always come in the
 * same order, numbers are plain decimals, keys are decimal strings (int64
 * does not fit a JSON number exactly), and text is escaped per RFC 8259 (advlock_json_string).
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* Worst case: every byte of a 1 KB message escaped as \u00XX. */
enum { LINE_MAX_BYTES = 8192 };

typedef struct line {
    char buf[LINE_MAX_BYTES];
    size_t len;
} line;

static void put(line *l, const char *s, size_t n)
{
    if (n > sizeof l->buf - l->len)
        n = sizeof l->buf - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_str(line *l, const char *s)
{
    put(l, s, strlen(s));
}

static void put_int(line *l, const char *name, int64_t v)
{
    char num[48];
    int n = snprintf(num, sizeof num, ",\"%s\":%lld", name, (long long)v);
    put(l, num, (size_t)n);
}

/* As much of s's JSON string as the line has room for. */
static void put_escaped(line *l, const char *s)
{
    size_t room = sizeof l->buf - l->len;
    int n = advlock_json_string(s, l->buf + l->len, room);
    if (n > 0 && room > 0)
        l->len += (size_t)n < room ? (size_t)n : strlen(l->buf + l->len);
}

static void put_text(line *l, const char *name, const char *value)
{
    if (value == NULL)
        return;
    put_str(l, ",\"");
    put_str(l, name);
    put_str(l, "\":");
    put_escaped(l, value);
}

void advlock_sim_trace(sim_world *sim, int client, const char *event,
                       const advlock_sim_trace_extra *extra)
{
    static const advlock_sim_trace_extra nothing;
    if (sim->config_.trace == NULL)
        return;
    if (extra == NULL)
        extra = &nothing;
    const sim_client *cl = &sim->clients_[client];
    line l;
    l.len = 0;
    char head[160];
    int n = snprintf(head, sizeof head,
                     "{\"t\":%lld,\"clock\":%lld,\"client\":%d,\"event\":\"%s\","
                     "\"key\":\"%lld\"",
                     (long long)sim->now_ms_, (long long)advlock_fake_clock_read(&cl->clock_),
                     client, event, (long long)cl->key_);
    put(&l, head, (size_t)n);
    put_text(&l, "sql", extra->sql);
    if (extra->attempt > 0)
        put_int(&l, "attempt", (int64_t)extra->attempt);
    put_text(&l, "result", extra->result);
    put_text(&l, "sqlstate", extra->sqlstate);
    put_text(&l, "fault", extra->fault);
    if (extra->result != NULL && strcmp(extra->result, "rows") == 0)
        put_int(&l, "rows", extra->rows);
    if (strcmp(event, "sleep") == 0) {
        put_int(&l, "ms", extra->ms);
        put_int(&l, "wake", extra->wake);
    }
    put_text(&l, "error", extra->error);
    put_text(&l, "message", extra->message);
    /* Room for the closing brace is kept even when a message filled the line. */
    if (l.len > sizeof l.buf - 2)
        l.len = sizeof l.buf - 2;
    put(&l, "}\n", 2);
    sim->config_.trace(sim->config_.trace_user, l.buf, l.len);
}

const char *advlock_sim_result_name(advlock_result r)
{
    static const char *const names[] = {"true", "false", "null", "error", "lost"};
    return names[r <= ADVLOCK_RESULT_SERVER_ERROR ? r : ADVLOCK_RESULT_CONNECTION_LOST];
}

const char *advlock_sim_outcome_event(advlock_outcome o)
{
    static const char *const events[] = {"acquired",
                                         "released",
                                         "not_held",
                                         "timed_out",
                                         "cancelled",
                                         "error",
                                         "ends_with_transaction"};
    return o <= ADVLOCK_ENDS_WITH_TRANSACTION ? events[o] : "error";
}
