/*
 * The SQL the fake database answers: the exact texts of the core's table
 * and of PostgreSQL's other advisory-lock functions. Anything else gets the
 * error PostgreSQL would most likely give, never a silent answer.
 */
#include "fake.h"

#include <stdio.h>
#include <string.h>

enum {
    EX = ADVLOCK_FAKE_EXCLUSIVE,
    SH = ADVLOCK_FAKE_SHARED,
    SES = SCOPE_SESSION,
    XACT = SCOPE_XACT
};

/* The core's rows, whose texts (the holders query's, the bounded waits', the
 * session query's, the verify's, the guarded rows') live in its table: the
 * fake answers whatever the core sends. A bounded wait is the waiting
 * function with lock_timeout set to $2 ms for the statement alone. A
 * guarded row is its plain form where the session's claim holds its token
 * (the last parameter); a guarded transaction row also where the session
 * holds no granted row of the key. Then PostgreSQL's other advisory-lock
 * functions and commands. */
static const advlock_fake_statement statements[] = {
    {ADVLOCK_SQL_TRY_LOCK, NULL, ST_TRY, EX, SES},
    {ADVLOCK_SQL_TRY_LOCK_SHARED, NULL, ST_TRY, SH, SES},
    {ADVLOCK_SQL_TRY_XACT_LOCK, NULL, ST_TRY, EX, XACT},
    {ADVLOCK_SQL_TRY_XACT_LOCK_SHARED, NULL, ST_TRY, SH, XACT},
    {ADVLOCK_SQL_UNLOCK, NULL, ST_UNLOCK, EX, SES},
    {ADVLOCK_SQL_UNLOCK_SHARED, NULL, ST_UNLOCK, SH, SES},
    {ADVLOCK_SQL_HOLDERS, NULL, ST_HOLDERS, EX, SES},
    {ADVLOCK_SQL_LOCK, NULL, ST_LOCK, EX, SES},
    {ADVLOCK_SQL_LOCK_SHARED, NULL, ST_LOCK, SH, SES},
    {ADVLOCK_SQL_XACT_LOCK, NULL, ST_LOCK, EX, XACT},
    {ADVLOCK_SQL_XACT_LOCK_SHARED, NULL, ST_LOCK, SH, XACT},
    {ADVLOCK_SQL_SESSION, NULL, ST_SESSION, EX, SES},
    {ADVLOCK_SQL_TRY_LOCK_GUARDED, NULL, ST_TRY, EX, SES},
    {ADVLOCK_SQL_UNLOCK_GUARDED, NULL, ST_UNLOCK, EX, SES},
    {ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED, NULL, ST_TRY, SH, SES},
    {ADVLOCK_SQL_UNLOCK_SHARED_GUARDED, NULL, ST_UNLOCK, SH, SES},
    {ADVLOCK_SQL_LOCK_GUARDED, NULL, ST_LOCK, EX, SES},
    {ADVLOCK_SQL_LOCK_SHARED_GUARDED, NULL, ST_LOCK, SH, SES},
    {ADVLOCK_SQL_HELD, NULL, ST_HELD, EX, SES},
    {ADVLOCK_SQL_HELD_SHARED, NULL, ST_HELD, SH, SES},
    {ADVLOCK_SQL_HELD_GUARDED, NULL, ST_HELD, EX, SES},
    {ADVLOCK_SQL_HELD_SHARED_GUARDED, NULL, ST_HELD, SH, SES},
    {ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, NULL, ST_TRY, EX, XACT},
    {ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED, NULL, ST_TRY, SH, XACT},
    {ADVLOCK_SQL_XACT_LOCK_GUARDED, NULL, ST_LOCK, EX, XACT},
    {ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED, NULL, ST_LOCK, SH, XACT},
    {ADVLOCK_SQL_LEASE_SETUP, NULL, ST_LEASE_SETUP, EX, SES},
    {ADVLOCK_SQL_HEARTBEAT, NULL, ST_HEARTBEAT, EX, SES},
    {ADVLOCK_SQL_HEARTBEAT_GUARDED, NULL, ST_HEARTBEAT_GUARDED, EX, SES},
    {ADVLOCK_SQL_TRY_LOCK_FENCED, NULL, ST_TRY_FENCED, EX, SES},
    {ADVLOCK_SQL_TRY_XACT_LOCK_FENCED, NULL, ST_TRY_FENCED, EX, XACT},
    {ADVLOCK_SQL_MARK_TAKE, NULL, ST_MARK_TAKE, EX, SES},
    {ADVLOCK_SQL_MARK_WRITE, NULL, ST_MARK_WRITE, EX, SES},
    {ADVLOCK_SQL_MARK_CLEAR, NULL, ST_MARK_CLEAR, EX, SES},
    {-1, "SELECT pg_advisory_lock($1)", ST_LOCK, EX, SES},
    {-1, "SELECT pg_advisory_lock_shared($1)", ST_LOCK, SH, SES},
    {-1, "SELECT pg_advisory_xact_lock($1)", ST_LOCK, EX, XACT},
    {-1, "SELECT pg_advisory_xact_lock_shared($1)", ST_LOCK, SH, XACT},
    {-1, "SELECT pg_advisory_unlock_all()", ST_UNLOCK_ALL, EX, SES},
    {-1, "BEGIN", ST_BEGIN, EX, SES},
    {-1, "COMMIT", ST_COMMIT, EX, SES},
    {-1, "ROLLBACK", ST_ROLLBACK, EX, SES},
    {-1, "DISCARD ALL", ST_DISCARD_ALL, EX, SES},
};

const advlock_fake_statement *advlock_fake_statement_find(const char *sql)
{
    for (size_t i = 0; i < sizeof statements / sizeof statements[0]; i++) {
        const advlock_fake_statement *st = &statements[i];
        if (strcmp(sql, st->sql >= 0 ? advlock_sql_text((advlock_sql)st->sql) : st->text) == 0)
            return st;
    }
    return NULL;
}

int advlock_fake_statement_params(const advlock_fake_statement *st)
{
    return st->sql >= 0 ? advlock_sql_params((advlock_sql)st->sql) : strstr(st->text, "$1") != NULL;
}

static int is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "SELECT name($1)" or "SELECT name()": a call PostgreSQL parses, then looks
 * the function up. Sets *name and *name_len, and the argument text. */
static int call_shape(const char *sql, const char **name, size_t *name_len, const char **args,
                      size_t *args_len)
{
    static const char select[] = "SELECT ";
    if (strncmp(sql, select, sizeof select - 1) != 0)
        return 0;
    const char *p = sql + sizeof select - 1;
    const char *start = p;
    while (is_ident_char(*p))
        p++;
    if (p == start || (*start >= '0' && *start <= '9') || *p != '(')
        return 0;
    const char *close = strchr(p, ')');
    if (close == NULL || close[1] != '\0')
        return 0;
    *name = start;
    *name_len = (size_t)(p - start);
    *args = p + 1;
    *args_len = (size_t)(close - p - 1);
    return (*args_len == 0) || (*args_len == 2 && strncmp(*args, "$1", 2) == 0);
}

int advlock_fake_statement_parses(const char *sql)
{
    const char *name, *args;
    size_t name_len, args_len;
    return advlock_fake_statement_find(sql) != NULL
           || call_shape(sql, &name, &name_len, &args, &args_len);
}

void advlock_fake_statement_reject(const char *sql, int have_param, advlock_fake_result *out)
{
    const char *name, *args;
    size_t name_len, args_len;
    char message[ADVLOCK_FAKE_TEXT_MAX];
    if (call_shape(sql, &name, &name_len, &args, &args_len)) {
        /* Unquoted identifiers fold to lower case; $1 is sent as bigint. */
        char lower[64];
        size_t n = name_len < sizeof lower - 1 ? name_len : sizeof lower - 1;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
        lower[n] = '\0';
        const char *type = args_len == 0 ? "" : have_param ? "bigint" : "unknown";
        snprintf(message, sizeof message, "function %s(%s) does not exist", lower, type);
        advlock_fake_result_error(out, "42883", message);
        return;
    }
    /* The first word, as PostgreSQL's "at or near" names the offending token. */
    size_t skip = strspn(sql, " \t\n\r");
    size_t len = strcspn(sql + skip, " \t\n\r(;");
    if (len == 0)
        snprintf(message, sizeof message, "syntax error at end of input");
    else
        snprintf(message, sizeof message, "syntax error at or near \"%.*s\"",
                 (int)(len > 64 ? 64 : len), sql + skip);
    advlock_fake_result_error(out, "42601", message);
}
