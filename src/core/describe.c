/*
 * Reports in words. The machine keeps facts only; the sentences a user
 * reads are rendered here, on request, into the caller's buffer. The
 * reference's messages are reproduced byte for byte (its timeout and NULL
 * texts); every other outcome is worded in the same style: a sentence that
 * names the lock.
 */
#include "core.h"

#include <string.h>

static const char *const backend_states[] = {
    [ADVLOCK_BACKEND_UNKNOWN] = "unknown",
    [ADVLOCK_BACKEND_ACTIVE] = "active",
    [ADVLOCK_BACKEND_IDLE] = "idle",
    [ADVLOCK_BACKEND_IDLE_IN_TRANSACTION] = "idle in transaction",
    [ADVLOCK_BACKEND_IDLE_IN_TRANSACTION_ABORTED] = "idle in transaction (aborted)",
    [ADVLOCK_BACKEND_FASTPATH] = "fastpath function call",
    [ADVLOCK_BACKEND_DISABLED] = "disabled",
};

enum { BACKEND_STATE_COUNT = sizeof backend_states / sizeof backend_states[0] };

const char *advlock_backend_state_name(advlock_backend_state state)
{
    return (unsigned)state < BACKEND_STATE_COUNT ? backend_states[state] : backend_states[0];
}

advlock_backend_state advlock_backend_state_parse(const char *state)
{
    if (state != NULL)
        for (int i = 1; i < BACKEND_STATE_COUNT; i++)
            if (strcmp(state, backend_states[i]) == 0)
                return (advlock_backend_state)i;
    return ADVLOCK_BACKEND_UNKNOWN;
}

/* "'<name>'", the name cut where the reference's echo would be too long. */
static void put_quoted_name(advlock_text *t, const char *name, size_t len)
{
    char echo[ADVLOCK_KEY_ECHO_MAX + 4];
    int n = advlock_escape_name(name, len, echo, sizeof echo);
    advlock_text_put(t, "'");
    advlock_text_putn(t, echo, n > 0 ? (size_t)n : 0);
    advlock_text_put(t, "'");
}

/* "<before>'<name>'<after>": the shape of most sentences. */
static void put_sentence(advlock_text *t, const char *before, const char *name, size_t len,
                         const char *after)
{
    advlock_text_put(t, before);
    put_quoted_name(t, name, len);
    advlock_text_put(t, after);
}

/* The length of the first line of s, without trailing blanks. */
static size_t first_line_length(const char *s)
{
    size_t n = strcspn(s, "\r\n");
    while (n > 0 && s[n - 1] == ' ')
        n--;
    return n;
}

/* ": <words>" when there are any. */
static void put_server_message(advlock_text *t, const char *words)
{
    if (words != NULL && first_line_length(words) > 0) {
        advlock_text_put(t, ": ");
        advlock_text_putn(t, words, first_line_length(words));
    }
}

static void put_holders(advlock_text *t, const advlock_report *r)
{
    if (r->holder_pid == 0) {
        advlock_text_put(t, " No session holds it now.");
        return;
    }
    advlock_text_put(t, " Held by pid ");
    advlock_text_put_int(t, r->holder_pid);
    advlock_text_put(t, " (application '");
    advlock_text_putn(t, r->holder_application,
                      strnlen(r->holder_application, sizeof r->holder_application));
    advlock_text_put(t, "', state ");
    advlock_text_put(t, advlock_backend_state_name(r->holder_state));
    advlock_text_put(t, ") for ");
    advlock_text_put_int(t, r->holder_seconds);
    advlock_text_put(t, "s");
    if (r->other_holders > 0) {
        advlock_text_put(t, " and by ");
        advlock_text_put_int(t, r->other_holders);
        advlock_text_put(t, r->other_holders == 1 ? " other session" : " other sessions");
    }
    advlock_text_put(t, ".");
}

/* A fenced try that failed for want of the schema (42P01: no table; 3F000:
 * no schema). */
static int fence_schema_missing(const advlock_report *r)
{
    return advlock_sql_fenced(r->sql)
           && (strcmp(r->sqlstate, "42P01") == 0 || strcmp(r->sqlstate, "3F000") == 0);
}

/* The session check on a server older than advlock supports: it reads
 * idle_session_timeout, which PostgreSQL 13 lacks (42704: undefined
 * object). */
static int server_too_old(const advlock_report *r)
{
    return r->sql == ADVLOCK_SQL_SESSION && strcmp(r->sqlstate, "42704") == 0;
}

/* "<function> for '<name>' <what went wrong>", for every FAILED outcome. */
static void put_failure(advlock_text *t, const advlock_report *r, const char *name, size_t len,
                        const char *words)
{
    if (r->detail == ADVLOCK_DETAIL_LOST) {
        put_sentence(t, "Lock ", name, len, " lost: the connection holding it closed");
        put_server_message(t, words);
        return;
    }
    if (r->failure == ADVLOCK_ESTANDBY) {
        put_sentence(t, "Refused to lock ", name, len,
                     ": the server is a standby in recovery, where advisory locks exclude "
                     "nobody on the primary (connect to the primary, or allow standby locks).");
        return;
    }
    advlock_text_put(t, advlock_sql_function(r->sql));
    put_sentence(t, " for ", name, len, " ");
    if (r->failure == ADVLOCK_ESESSION) {
        advlock_text_put(t, "failed: ");
        advlock_text_put(t, r->sql == ADVLOCK_SQL_SESSION ? ADVLOCK_SESSION_CLAIMED
                                                          : advlock_strerror(ADVLOCK_ESESSION));
        int release = r->detail == ADVLOCK_DETAIL_NONE
                      && (r->sql == ADVLOCK_SQL_UNLOCK_GUARDED
                          || r->sql == ADVLOCK_SQL_UNLOCK_SHARED_GUARDED);
        if (release)
            advlock_text_put(t, " (the lock may still be held on another server session)");
        else if (advlock_sql_fenced(r->sql))
            advlock_text_put(t, " (fencing tokens need a direct connection)");
        else if (advlock_sql_verifies(r->sql))
            advlock_text_put(t, " (this connection cannot tell whether it still holds the lock)");
    } else if (r->failure == ADVLOCK_ENULL) {
        advlock_text_put(t, advlock_sql_answer(r->sql) == ADVLOCK_ANSWER_VOID
                                ? "returned null (expected void)."
                                : "returned null (expected boolean).");
    } else if (r->failure == ADVLOCK_ENOANSWER) {
        advlock_text_put(t, "failed: ");
        advlock_text_put(t, advlock_strerror(ADVLOCK_ENOANSWER));
        put_server_message(t, words);
    } else {
        advlock_text_put(t, r->failure == ADVLOCK_ECONNLOST ? "failed: connection lost" : "failed");
        if (r->sqlstate[0] != '\0') {
            advlock_text_put(t, " with SQLSTATE ");
            advlock_text_putn(t, r->sqlstate, strnlen(r->sqlstate, sizeof r->sqlstate));
        }
        put_server_message(t, words);
        if (fence_schema_missing(r))
            advlock_text_put(t, " (fencing tokens need the advlock schema: run `advlock setup` "
                                "on this database, or the SQL in docs/operators.md)");
        if (server_too_old(r))
            advlock_text_put(t, " (" ADVLOCK_SERVER_MINIMUM ")");
    }
    switch (r->detail) {
    case ADVLOCK_DETAIL_UNDO_CANCELLED:
        advlock_text_put(t, " (undoing a cancelled acquire: the lock may still be held)");
        break;
    case ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE:
        advlock_text_put(t, " (giving back a grant that came after the deadline: the lock may "
                            "still be held)");
        break;
    case ADVLOCK_DETAIL_UNDO_AFTER_57014:
        advlock_text_put(t, " (giving back a grant the cancelled statement may have made: the "
                            "lock may still be held)");
        break;
    case ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR:
        advlock_text_put(t, " (one unlock was sent for a grant the failed fenced statement may "
                            "have made: this session's holds of the lock are in doubt)");
        break;
    default: break;
    }
}

int advlock_describe(const advlock_report *r, const char *name, size_t len,
                     const char *server_message, char *buf, size_t size)
{
    if (r == NULL || (name == NULL && len > 0) || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    advlock_text t;
    advlock_text_init(&t, buf, size);
    switch (r->outcome) {
    case ADVLOCK_ACQUIRED:
        if (r->detail == ADVLOCK_DETAIL_CANCEL_TOO_LATE)
            put_sentence(&t, "Cancel came too late for lock ", name, len,
                         ": it was granted and is held until the transaction ends.");
        break;
    case ADVLOCK_NOT_HELD:
        if (advlock_sql_verifies(r->sql))
            put_sentence(&t, "Lock ", name, len, " is no longer held by this session.");
        else
            put_sentence(&t, "This session held no lock ", name, len, " to release.");
        break;
    case ADVLOCK_TIMED_OUT:
        put_sentence(&t, "Could not acquire migration lock for ", name, len, " within ");
        advlock_text_put_seconds(&t, r->timeout_ms);
        advlock_text_put(&t, "s.");
        if (r->detail == ADVLOCK_DETAIL_DIAGNOSED) {
            put_holders(&t, r);
        } else if (r->detail == ADVLOCK_DETAIL_DIAGNOSIS_FAILED) {
            advlock_text_put(&t, " (holder diagnostics failed");
            put_server_message(&t, server_message);
            advlock_text_put(&t, ")");
        }
        break;
    case ADVLOCK_CANCELLED:
        put_sentence(&t, "Acquire of lock ", name, len, " was cancelled.");
        break;
    case ADVLOCK_FAILED: put_failure(&t, r, name, len, server_message); break;
    case ADVLOCK_ENDS_WITH_TRANSACTION:
        put_sentence(&t, "Lock ", name, len,
                     " is transaction-scoped: it is released when the transaction ends.");
        break;
    default: break; /* RELEASED, HELD, and values from no machine: nothing to say */
    }
    return (int)t.len;
}

int advlock_describe_lease_lost(const char *name, size_t len, const char *words, char *buf,
                                size_t size)
{
    if ((name == NULL && len > 0) || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    advlock_text t;
    advlock_text_init(&t, buf, size);
    put_sentence(&t, "Lock ", name, len, " lost: its lease ran out: ");
    advlock_text_put(&t, words != NULL ? words : "");
    return (int)t.len;
}
