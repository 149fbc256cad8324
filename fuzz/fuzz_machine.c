/*
 * Fuzzes the lock machine with opcode bytes: operations with fuzzed keys,
 * timeouts and options; answers true/false/NULL/error/lost; timers with
 * fuzzed (also backwards, huge) times; cancels; holder rows; misuse in every
 * state. A tiny model of the server's lock table and of what the caller
 * knows checks, after every event:
 *   - the session never holds a lock the caller was not told about when an
 *     acquire ends (cancelled and timed-out acquires hold nothing), and
 *     never loses one it was told about, re-entrant server-side waits
 *     included, even when a wait's 57014 or 55P03 hides a grant;
 *   - ACQUIRED only after the server granted the lock in that operation;
 *   - exactly one DONE per operation, and nothing but a new start after it;
 *   - sleeps within the policy's bounds, the reference's exactly;
 *   - refused calls change nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"

typedef struct input {
    const uint8_t *data;
    size_t size;
} input;

static uint8_t byte(input *in)
{
    if (in->size == 0)
        return 0;
    in->size--;
    return *in->data++;
}

static int64_t number(input *in)
{
    uint64_t v = 0;
    int n = byte(in) % 9;
    for (int i = 0; i < n; i++)
        v = v << 8 | byte(in);
    /* Small values are the interesting ones most of the time. */
    switch (byte(in) % 4) {
    case 0: return (int64_t)(v % 3000);
    case 1: return -(int64_t)(v % 3000);
    default: return (int64_t)v;
    }
}

#define CHECK(cond)  \
    do {             \
        if (!(cond)) \
            abort(); \
    } while (0)

typedef struct model {
    advlock_machine m;
    advlock_options options;
    int64_t now;
    int64_t key;
    int acquiring;     /* the operation under way is an acquire */
    int granted_in_op; /* the server said TRUE to a lock query in this op */
    int server_holds;  /* holds of the key the server's table has */
    int caller_holds;  /* holds the caller was told about */
    int in_doubt;      /* a NULL or failed unlock: the caller cannot know */
    int done_seen;
    int64_t expected_sleep; /* reference schedule */
    char name[16];          /* the name of the operation under way */
    size_t name_len;
} model;

static void check_unchanged_on_error(const advlock_machine *before, const advlock_machine *after,
                                     int rc)
{
    if (rc != 0)
        CHECK(memcmp(before, after, sizeof *before) == 0);
}

static void on_done(model *s)
{
    advlock_action a = advlock_next_action(&s->m);
    CHECK(!s->done_seen);
    s->done_seen = 1;
    const advlock_report *r = a.report;
    CHECK(r != NULL && r->key == s->key);
    switch (r->outcome) {
    case ADVLOCK_ACQUIRED:
        CHECK(s->acquiring && s->granted_in_op);
        s->caller_holds++;
        break;
    case ADVLOCK_RELEASED: s->caller_holds = s->caller_holds > 0 ? s->caller_holds - 1 : 0; break;
    case ADVLOCK_FAILED:
        CHECK(r->failure == ADVLOCK_ENULL || r->failure == ADVLOCK_ESERVER
              || r->failure == ADVLOCK_ECONNLOST);
        if (r->detail >= ADVLOCK_DETAIL_UNDO_CANCELLED
            && r->detail <= ADVLOCK_DETAIL_UNDO_AFTER_57014)
            s->in_doubt = 1;
        break;
    case ADVLOCK_ENDS_WITH_TRANSACTION: CHECK(s->options.scope == ADVLOCK_TRANSACTION); break;
    default: break;
    }
    CHECK(r->outcome == ADVLOCK_FAILED || (r->failure == 0 && r->sqlstate[0] == '\0'));
    /* Every report renders, whole, as one valid UTF-8 string (the names
     * the model starts with are bytes: only valid ones get this far). */
    char text[ADVLOCK_MESSAGE_MAX];
    int n = advlock_describe(r, s->name, s->name_len, "server words", text, sizeof text);
    CHECK(n >= 0 && (size_t)n == strlen(text) && advlock_utf8_valid(text, (size_t)n));
    /* The core of it: an acquire that did not succeed leaves nothing behind. */
    if (!s->in_doubt && s->options.scope == ADVLOCK_SESSION)
        CHECK(s->server_holds == s->caller_holds);
    if (s->in_doubt) { /* what a caller does after doubt: reconnect */
        s->server_holds = s->caller_holds = 0;
        s->in_doubt = 0;
    }
}

static void answer(model *s, input *in)
{
    advlock_action a = advlock_next_action(&s->m);
    uint8_t pick = byte(in) % 8;
    advlock_result r;
    int is_lock = a.kind != ADVLOCK_ACTION_NONE && a.kind != ADVLOCK_ACTION_DONE
                  && a.sql != ADVLOCK_SQL_UNLOCK && a.sql != ADVLOCK_SQL_UNLOCK_SHARED
                  && a.sql != ADVLOCK_SQL_HOLDERS;
    int is_unlock = a.sql == ADVLOCK_SQL_UNLOCK || a.sql == ADVLOCK_SQL_UNLOCK_SHARED;
    int is_wait = is_lock && advlock_sql_answer(a.sql) == ADVLOCK_ANSWER_VOID;
    if (pick < 3)
        r = ADVLOCK_RESULT_TRUE;
    else if (pick < 5)
        r = ADVLOCK_RESULT_FALSE;
    else
        r = (advlock_result)(pick - 3); /* NULL, SERVER_ERROR, CONNECTION_LOST */
    /* A consistent server: unlock says true exactly when it held one. */
    int querying = a.kind == ADVLOCK_ACTION_QUERY || a.kind == ADVLOCK_ACTION_CANCEL_QUERY;
    if (querying && is_unlock && (r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE))
        r = s->server_holds > 0 ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE;
    /* ... and grants a try at once to a session that holds the lock. */
    if (querying && is_lock && !is_wait && r == ADVLOCK_RESULT_FALSE && s->server_holds > 0)
        r = ADVLOCK_RESULT_TRUE;
    static const char *const sqlstates[] = {"57014", "55P03", "XX000"};
    uint8_t how = byte(in);
    const char *sqlstate = sqlstates[how % 3];
    /* A cancel or lock_timeout that ends a wait may land as the lock is
     * granted: PostgreSQL reports the error and the session holds it. */
    int hidden_grant =
        querying && is_wait && r == ADVLOCK_RESULT_SERVER_ERROR && how % 3 < 2 && (how & 0x80) != 0;
    advlock_machine before = s->m;
    int rc = advlock_on_result(&s->m, r, sqlstate, "fuzz", s->now);
    check_unchanged_on_error(&before, &s->m, rc);
    if (rc != 0) {
        CHECK(!querying || a.sql == ADVLOCK_SQL_HOLDERS);
        return;
    }
    CHECK(querying);
    if (r == ADVLOCK_RESULT_CONNECTION_LOST) {
        s->server_holds = s->caller_holds = 0; /* the session and its locks are gone */
    } else if ((r == ADVLOCK_RESULT_TRUE && is_lock) || hidden_grant) {
        s->server_holds++;
        s->granted_in_op |= !hidden_grant;
    } else if (r == ADVLOCK_RESULT_TRUE && is_unlock) {
        s->server_holds--;
    } else if (r == ADVLOCK_RESULT_NULL && is_unlock && s->server_holds > 0) {
        s->in_doubt = 1; /* NULL read as "not held" while one is held */
    }
}

static void after_event(model *s)
{
    advlock_action a = advlock_next_action(&s->m);
    if (a.kind == ADVLOCK_ACTION_DONE && !s->done_seen)
        on_done(s);
    if (a.kind == ADVLOCK_ACTION_SLEEP) {
        CHECK(a.sleep_ms >= 0 && a.sleep_ms <= 1000);
        CHECK(a.wake_at_ms >= s->now || a.wake_at_ms == INT64_MAX);
    }
}

static void on_sleep_started(model *s, const advlock_action *before)
{
    advlock_action a = advlock_next_action(&s->m);
    if (a.kind != ADVLOCK_ACTION_SLEEP || before->kind == ADVLOCK_ACTION_SLEEP)
        return;
    if (s->options.backoff == ADVLOCK_BACKOFF_REFERENCE && !s->options.clip_to_deadline)
        CHECK(a.sleep_ms == s->expected_sleep);
    else
        CHECK(a.sleep_ms <= s->expected_sleep);
    s->expected_sleep = s->expected_sleep * 2 < 1000 ? s->expected_sleep * 2 : 1000;
}

static void start(model *s, input *in, int acquire)
{
    char key[16];
    size_t len = byte(in) % sizeof key;
    for (size_t i = 0; i < len; i++)
        key[i] = (char)byte(in);
    int64_t timeout = number(in);
    int by_key = byte(in) & 1;
    int64_t k = 0;
    if (by_key && advlock_derive_key(key, len, &k) != 0)
        by_key = 0; /* let the named start refuse the name */
    advlock_machine before = s->m;
    int rc;
    if (acquire)
        rc = by_key ? advlock_start_acquire_key(&s->m, k, timeout, s->now)
                    : advlock_start_acquire(&s->m, key, len, timeout, s->now);
    else
        rc = by_key ? advlock_start_release_key(&s->m, k, s->now)
                    : advlock_start_release(&s->m, key, len, s->now);
    check_unchanged_on_error(&before, &s->m, rc);
    if (rc != 0)
        return;
    CHECK(advlock_derive_key(key, len, &k) == 0);
    memcpy(s->name, key, len);
    s->name_len = len;
    if (k != s->key) { /* another lock: the model follows one key at a time */
        s->key = k;
        s->server_holds = s->caller_holds = 0;
    }
    s->acquiring = acquire;
    s->granted_in_op = 0;
    s->done_seen = 0;
    s->expected_sleep = 100;
}

static void set_options(model *s, input *in)
{
    advlock_options o;
    advlock_options_init(&o);
    uint8_t b = byte(in);
    o.mode = (advlock_mode)(b & 1);
    o.scope = (advlock_scope)(b >> 1 & 1);
    o.wait = (advlock_wait)(b >> 2 & 1);
    o.backoff = (advlock_backoff)(b >> 3 & 1);
    o.clip_to_deadline = b >> 4 & 1;
    o.diagnose = b >> 5 & 1;
    o.jitter_seed = (uint64_t)number(in);
    if (b >> 6 == 3)
        o.mode = (advlock_mode)5; /* out of range: refused */
    advlock_machine before = s->m;
    int rc = advlock_set_options(&s->m, &o);
    check_unchanged_on_error(&before, &s->m, rc);
    if (rc == 0) {
        s->options = o;
        s->server_holds = s->caller_holds = 0; /* a new world for the model */
    }
}

static void holders(model *s, input *in)
{
    advlock_holder rows[3];
    size_t n = byte(in) % 4;
    for (size_t i = 0; i < n; i++) {
        rows[i] = (advlock_holder){.pid = (int)number(in),
                                   .granted = byte(in) & 1,
                                   .application_name = byte(in) & 1 ? "app" : NULL,
                                   .state = "idle",
                                   .seconds = number(in)};
    }
    advlock_machine before = s->m;
    int rc = advlock_on_holders(&s->m, rows, n, s->now);
    check_unchanged_on_error(&before, &s->m, rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static model s;
    memset(&s, 0, sizeof s);
    advlock_machine_init(&s.m);
    advlock_options_init(&s.options);
    input in = {data, size};
    while (in.size > 0) {
        advlock_action before = advlock_next_action(&s.m);
        advlock_machine snapshot = s.m;
        int rc = 0;
        switch (byte(&in) % 9) {
        case 0: start(&s, &in, 1); break;
        case 1: start(&s, &in, 0); break;
        case 2:
        case 3: answer(&s, &in); break;
        case 4: {
            int64_t step = number(&in);
            if (step > 0 && s.now > INT64_MAX - step)
                s.now = INT64_MAX;
            else if (step < 0 && s.now < INT64_MIN - step)
                s.now = INT64_MIN;
            else
                s.now += step;
            rc = advlock_on_timer(&s.m, s.now);
            break;
        }
        case 5: rc = advlock_cancel(&s.m, s.now); break;
        case 6: rc = advlock_on_cancel_sent(&s.m, s.now); break;
        case 7: holders(&s, &in); break;
        default: set_options(&s, &in); break;
        }
        check_unchanged_on_error(&snapshot, &s.m, rc);
        on_sleep_started(&s, &before);
        after_event(&s);
    }
    return 0;
}
