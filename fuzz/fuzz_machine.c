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
 * With a session told (advlock_set_session, opcodes 0xF0 and up) the
 * server session's row is answered too, and the model checks:
 *   - one session query per connection, before any lock statement, with
 *     the token as $1 (0 for transaction scope, which claims nothing); none
 *     without a session told, nor after a row came, nor for the checked
 *     value copied out (advlock_get_session) and handed back, except once
 *     more for a session-scoped operation behind a proxy where no claim was
 *     asked; that value's facts are the model's after every event;
 *   - guarded session rows exactly behind a claimed proxy, for session
 *     scope; guarded transaction rows exactly behind a proxy, for
 *     transaction scope; each with the token after the key (after a wait's
 *     bound); a session row's NULL means the statement ran elsewhere,
 *     locking and unlocking nothing, and a transaction row's means busy
 *     (never ESESSION);
 *   - ESTANDBY only for an acquire on a standby without allow_standby, with
 *     nothing sent; ESESSION only behind a proxy, never with a grant of the
 *     operation still held unless its detail says the undo is in doubt, and
 *     on a release always saying the lock may still be held.
 * Verifies (opcodes 0xF8 and up) send one held-lock row, guarded exactly
 * where a lock statement would be, change no lock, and end HELD exactly
 * when the server holds the lock (NOT_HELD when not), ESESSION on a
 * guarded NULL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/saturating.h"
#include "advlock.h"
#include "fuzz_input.h"

typedef struct model {
    advlock_machine m;
    advlock_options options;
    int64_t now;
    int64_t key;
    int acquiring;     /* the operation under way is an acquire */
    int verifying;     /* ... or a verify */
    int granted_in_op; /* the server said TRUE to a lock query in this op */
    int server_holds;  /* holds of the key the server's table has */
    int caller_holds;  /* holds the caller was told about */
    int in_doubt;      /* a NULL or failed unlock: the caller cannot know */
    /* The session the driver told the machine, and what its row said. */
    int told;
    int client_pid;
    uint64_t token;
    uint64_t next_token;
    int64_t next_fence; /* the server's fencing counter: the last token issued */
    int checked;        /* a session row came since the last change */
    int proxied, claimed, standby;
    int claim_asked; /* the last session row answered a claim (session scope) */
    int done_seen;
    int64_t expected_sleep; /* reference schedule */
    char name[16];          /* the name of the operation under way */
    size_t name_len;
} model;

static int xact_guarded_row(advlock_sql sql)
{
    return sql >= ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED && sql <= ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED;
}

static int guarded_row(advlock_sql sql)
{
    return (sql >= ADVLOCK_SQL_TRY_LOCK_GUARDED && sql <= ADVLOCK_SQL_LOCK_SHARED_GUARDED)
           || sql == ADVLOCK_SQL_HELD_GUARDED || sql == ADVLOCK_SQL_HELD_SHARED_GUARDED
           || xact_guarded_row(sql);
}

static int held_row(advlock_sql sql)
{
    return sql >= ADVLOCK_SQL_HELD && sql <= ADVLOCK_SQL_HELD_SHARED_GUARDED;
}

static int unlock_row(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_UNLOCK || sql == ADVLOCK_SQL_UNLOCK_SHARED
           || sql == ADVLOCK_SQL_UNLOCK_GUARDED || sql == ADVLOCK_SQL_UNLOCK_SHARED_GUARDED;
}

/* The statement and its parameters agree with what the session row said. */
static void check_query(const model *s, const advlock_action *a)
{
    if (a->kind != ADVLOCK_ACTION_QUERY && a->kind != ADVLOCK_ACTION_CANCEL_QUERY)
        return;
    int session_scope = s->options.scope == ADVLOCK_SESSION;
    if (a->sql == ADVLOCK_SQL_SESSION) {
        CHECK(s->told && (!s->checked || (session_scope && s->proxied && !s->claim_asked)));
        CHECK(a->param == (session_scope ? (int64_t)s->token : 0) && a->param2 == s->client_pid
              && a->param3 == 0);
        return;
    }
    /* The check comes before any other statement; a verify sends its row,
     * nothing else. */
    CHECK(!s->told || s->checked);
    CHECK(held_row(a->sql) == s->verifying);
    int waits = advlock_sql_answer(a->sql) == ADVLOCK_ANSWER_VOID;
    if (a->sql != ADVLOCK_SQL_HOLDERS && !unlock_row(a->sql))
        CHECK(!(s->acquiring && s->standby && !s->options.allow_standby));
    if (guarded_row(a->sql)) {
        if (xact_guarded_row(a->sql))
            CHECK(s->told && s->proxied && !session_scope);
        else
            CHECK(s->told && s->proxied && s->claimed && session_scope);
        CHECK(waits ? a->param2 >= 1 && a->param2 <= INT32_MAX && a->param3 == (int64_t)s->token
                    : a->param2 == (int64_t)s->token && a->param3 == 0);
        return;
    }
    /* Behind a proxy a session lock or unlock is always guarded, and so is
     * a transaction lock (its verify excepted). */
    CHECK(!(s->told && s->proxied && session_scope) || a->sql == ADVLOCK_SQL_HOLDERS);
    CHECK(!(s->told && s->proxied) || a->sql == ADVLOCK_SQL_HOLDERS || held_row(a->sql));
    CHECK(a->param3 == 0 && (waits || a->param2 == 0));
}

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
        /* A fenced grant carries the token the server issued last. */
        CHECK(r->fence == (s->options.fence ? s->next_fence : 0));
        s->caller_holds++;
        break;
    case ADVLOCK_RELEASED: s->caller_holds = s->caller_holds > 0 ? s->caller_holds - 1 : 0; break;
    case ADVLOCK_HELD: CHECK(s->verifying && s->server_holds > 0 && r->attempts == 0); break;
    case ADVLOCK_NOT_HELD: CHECK(!s->acquiring && (!s->verifying || s->server_holds == 0)); break;
    case ADVLOCK_FAILED:
        CHECK(r->failure == ADVLOCK_ENULL || r->failure == ADVLOCK_ESERVER
              || r->failure == ADVLOCK_ECONNLOST || r->failure == ADVLOCK_ESTANDBY
              || r->failure == ADVLOCK_ESESSION);
        /* A standby is refused before anything is sent. */
        if (r->failure == ADVLOCK_ESTANDBY)
            CHECK(s->acquiring && s->standby && !s->options.allow_standby && !s->granted_in_op
                  && r->attempts == 0 && r->sql == ADVLOCK_SQL_SESSION);
        if (r->failure == ADVLOCK_ESESSION)
            CHECK(s->told && s->proxied
                  && (s->options.scope == ADVLOCK_SESSION || s->options.fence));
        CHECK(r->failure != ADVLOCK_ENULL || !guarded_row(r->sql));
        if ((r->detail >= ADVLOCK_DETAIL_UNDO_CANCELLED
             && r->detail <= ADVLOCK_DETAIL_UNDO_AFTER_57014)
            || r->detail == ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR)
            s->in_doubt = 1;
        break;
    case ADVLOCK_ENDS_WITH_TRANSACTION: CHECK(s->options.scope == ADVLOCK_TRANSACTION); break;
    default: break;
    }
    CHECK(r->outcome == ADVLOCK_FAILED || (r->failure == 0 && r->sqlstate[0] == '\0'));
    CHECK(r->outcome == ADVLOCK_ACQUIRED || r->fence == 0);
    /* Every report renders, whole, as one valid UTF-8 string (the names
     * the model starts with are bytes: only valid ones get this far). */
    char text[ADVLOCK_MESSAGE_MAX];
    int n = advlock_describe(r, s->name, s->name_len, "server words", text, sizeof text);
    CHECK(n >= 0 && (size_t)n == strlen(text) && advlock_utf8_valid(text, (size_t)n));
    /* A release that did not happen says the lock may still be held. */
    if (r->outcome == ADVLOCK_FAILED && r->failure == ADVLOCK_ESESSION && !s->acquiring
        && !s->verifying)
        CHECK(strstr(text, "may still be held") != NULL);
    /* A verify that cannot tell says so. */
    if (r->outcome == ADVLOCK_FAILED && r->failure == ADVLOCK_ESESSION && s->verifying)
        CHECK(strstr(text, "cannot tell") != NULL);
    /* The core of it: an acquire that did not succeed leaves nothing behind. */
    if (!s->in_doubt && s->options.scope == ADVLOCK_SESSION)
        CHECK(s->server_holds == s->caller_holds);
    if (s->in_doubt) { /* what a caller does after doubt: reconnect */
        s->server_holds = s->caller_holds = 0;
        s->in_doubt = 0;
    }
}

/* The session row: the server's pid (the client's, 0, or a proxy's
 * session's), in recovery or not, claimed or not. Taken only as the answer
 * to the session query. */
static void session_row(model *s, input *in)
{
    uint8_t b = byte(in);
    int pids[4] = {s->client_pid, 0, 4242, s->client_pid + 1};
    int pid = pids[b & 3], in_recovery = b >> 2 & 1, ours = b >> 3 & 1;
    advlock_action a = advlock_next_action(&s->m);
    advlock_machine before = s->m;
    int rc = advlock_on_session(&s->m, pid, in_recovery, ours, s->now);
    check_unchanged_on_error(&before, &s->m, rc);
    CHECK((rc == 0) == (a.kind == ADVLOCK_ACTION_QUERY && a.sql == ADVLOCK_SQL_SESSION));
    if (rc != 0)
        return;
    s->checked = 1;
    s->proxied = pid != s->client_pid || pid == 0;
    s->claim_asked = s->options.scope == ADVLOCK_SESSION;
    s->claimed = s->claim_asked && ours;
    s->standby = in_recovery;
}

static void answer(model *s, input *in)
{
    advlock_action a = advlock_next_action(&s->m);
    uint8_t pick = byte(in) % 8;
    advlock_result r;
    if (a.kind == ADVLOCK_ACTION_QUERY && a.sql == ADVLOCK_SQL_SESSION && pick < 5) {
        session_row(s, in);
        return;
    }
    int is_lock = a.kind != ADVLOCK_ACTION_NONE && a.kind != ADVLOCK_ACTION_DONE
                  && !unlock_row(a.sql) && a.sql != ADVLOCK_SQL_HOLDERS
                  && a.sql != ADVLOCK_SQL_SESSION && !held_row(a.sql);
    int is_unlock = unlock_row(a.sql);
    int is_wait = is_lock && advlock_sql_answer(a.sql) == ADVLOCK_ANSWER_VOID;
    if (pick < 3)
        r = ADVLOCK_RESULT_TRUE;
    else if (pick < 5)
        r = ADVLOCK_RESULT_FALSE;
    else
        r = (advlock_result)(pick - 3); /* NULL, SERVER_ERROR, CONNECTION_LOST */
    /* A consistent server: unlock says true exactly when it held one. */
    int querying = a.kind == ADVLOCK_ACTION_QUERY || a.kind == ADVLOCK_ACTION_CANCEL_QUERY;
    if (querying && (is_unlock || held_row(a.sql))
        && (r == ADVLOCK_RESULT_TRUE || r == ADVLOCK_RESULT_FALSE))
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
    /* A fenced try answers a row: granted and a new token, or busy; its
     * error may come after the grant (the upsert failed), whatever it is. */
    int fenced = querying && advlock_sql_answer(a.sql) == ADVLOCK_ANSWER_FENCED;
    hidden_grant |= fenced && r == ADVLOCK_RESULT_SERVER_ERROR && (how & 0x80) != 0;
    if (fenced && r == ADVLOCK_RESULT_TRUE)
        s->next_fence++;
    advlock_machine before = s->m;
    int rc = fenced && r <= ADVLOCK_RESULT_FALSE
                 ? advlock_on_fenced(&s->m, r == ADVLOCK_RESULT_TRUE, s->next_fence, s->now)
                 : advlock_on_result(&s->m, r, sqlstate, "fuzz", s->now);
    check_unchanged_on_error(&before, &s->m, rc);
    if (rc != 0) {
        CHECK(!querying || a.sql == ADVLOCK_SQL_HOLDERS || a.sql == ADVLOCK_SQL_SESSION);
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
    } else if (r == ADVLOCK_RESULT_NULL && is_unlock && s->server_holds > 0
               && !guarded_row(a.sql)) {
        s->in_doubt = 1; /* NULL read as "not held" while one is held */
    }
    /* A guarded statement's NULL: it reached another server session and ran
     * nothing; the claimed one still holds what it held. */
}

/* The machine's session value says what the model knows. */
static void check_session_value(const model *s)
{
    advlock_session v;
    CHECK(advlock_get_session(&s->m, &v) == 0);
    CHECK(v.token == (s->told ? s->token : 0));
    CHECK(v.client_pid == (s->told ? s->client_pid : 0));
    CHECK(v.checked == s->checked && v.proxied == s->proxied && v.claimed == s->claimed
          && v.standby == s->standby && v.claim_asked == s->claim_asked);
}

static void after_event(model *s)
{
    advlock_action a = advlock_next_action(&s->m);
    check_query(s, &a);
    check_session_value(s);
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
    /* A release's or verify's retries are cut to their own bound. */
    if (s->options.backoff == ADVLOCK_BACKOFF_REFERENCE && !s->options.clip_to_deadline
        && s->acquiring)
        CHECK(a.sleep_ms == s->expected_sleep);
    else
        CHECK(a.sleep_ms <= s->expected_sleep);
    s->expected_sleep = s->expected_sleep * 2 < 1000 ? s->expected_sleep * 2 : 1000;
}

enum op { OP_ACQUIRE, OP_RELEASE, OP_VERIFY };

static void start(model *s, input *in, enum op op)
{
    char key[16];
    size_t len = byte(in) % sizeof key;
    for (size_t i = 0; i < len; i++)
        key[i] = (char)byte(in);
    int64_t timeout = number(in);
    int by_key = byte(in) & 1 || op == OP_VERIFY; /* a verify takes keys only */
    int64_t k = 0;
    if (by_key && advlock_derive_key(key, len, &k) != 0) {
        if (op == OP_VERIFY)
            return;
        by_key = 0; /* let the named start refuse the name */
    }
    advlock_machine before = s->m;
    int rc;
    if (op == OP_VERIFY)
        rc = advlock_start_verify_key(&s->m, k, s->now);
    else if (op == OP_ACQUIRE)
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
    s->acquiring = op == OP_ACQUIRE;
    s->verifying = op == OP_VERIFY;
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
    o.allow_standby = b >> 6 == 1;
    o.fence = byte(in) & 1; /* refused with shared locks or server-side waits */
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

/* The driver hands the machine its connection's value: the one copied out
 * of the machine (the same pid and token: a no-op), a fresh value for a new
 * pid or token (a new connection: the model's session and locks start
 * afresh), or one with token 0 (refused). */
static void set_session(model *s, input *in)
{
    uint8_t b = byte(in);
    int pids[4] = {s->client_pid, 0, 1000, 1001};
    int pid = pids[b & 3];
    uint64_t token;
    switch (b >> 2 & 3) {
    case 0: token = 0; break;
    case 1: token = s->token != 0 ? s->token : UINT64_MAX; break;
    case 2: token = ++s->next_token; break;
    default: token = UINT64_C(0x8000000000000000) | (uint64_t)number(in); break;
    }
    advlock_session v = {.token = token, .client_pid = pid};
    CHECK(advlock_session_init(&v, pid, token) == (token == 0 ? ADVLOCK_EINVAL : 0));
    int same = s->told && pid == s->client_pid && token == s->token;
    if (same)
        CHECK(advlock_get_session(&s->m, &v) == 0);
    advlock_machine before = s->m;
    int rc = advlock_set_session(&s->m, &v);
    check_unchanged_on_error(&before, &s->m, rc);
    advlock_action_kind was = advlock_next_action(&before).kind;
    int busy = was == ADVLOCK_ACTION_QUERY || was == ADVLOCK_ACTION_CANCEL_QUERY
               || was == ADVLOCK_ACTION_SLEEP;
    CHECK(rc == (token == 0 ? ADVLOCK_EINVAL : busy ? ADVLOCK_EMISUSE : 0));
    if (rc != 0)
        return;
    if (same) {
        CHECK(memcmp(&before, &s->m, sizeof before) == 0); /* nothing to check again */
        return;
    }
    s->told = 1;
    s->client_pid = pid;
    s->token = token;
    s->checked = s->proxied = s->claimed = s->standby = s->claim_asked = 0;
    s->server_holds = s->caller_holds = 0;
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
        uint8_t op = byte(&in);
        /* 0xF0 and up: the session calls, 0xF8 and up verifies (the
         * committed seeds use none). */
        switch (op >= 0xF8 ? 11 : op >= 0xF0 ? 9 + (op & 1) : op % 9) {
        case 0: start(&s, &in, OP_ACQUIRE); break;
        case 1: start(&s, &in, OP_RELEASE); break;
        case 2:
        case 3: answer(&s, &in); break;
        case 4: {
            s.now = advlock_add_saturating(s.now, number(&in));
            rc = advlock_on_timer(&s.m, s.now);
            break;
        }
        case 5: rc = advlock_cancel(&s.m, s.now); break;
        case 6: rc = advlock_on_cancel_sent(&s.m, s.now); break;
        case 7: holders(&s, &in); break;
        case 8: set_options(&s, &in); break;
        case 9: set_session(&s, &in); break;
        case 10: session_row(&s, &in); break;
        default: start(&s, &in, OP_VERIFY); break;
        }
        check_unchanged_on_error(&snapshot, &s.m, rc);
        on_sleep_started(&s, &before);
        after_event(&s);
    }
    return 0;
}
