/*
 * The one table of SQL the core can emit. Every row takes one bigint
 * parameter; what it returns decides which input reports its answer.
 */
#include "core.h"

/* PostgreSQL records no grant time: for an idle holder the end of its last
 * statement (state_change) is when advlock's try-lock succeeded; for a
 * session that ran statements since, it is a lower bound. Waiters have had
 * pg_locks.waitstart since PostgreSQL 14; the query needs 14 or later.
 * Advisory locks are per database, hence the filter. */
#define HOLDERS_SQL                                                                        \
    "SELECT l.pid, l.granted, l.mode, coalesce(a.application_name, ''),"                   \
    " coalesce(host(a.client_addr), CASE WHEN a.pid IS NULL THEN '' ELSE 'local' END),"    \
    " coalesce(a.state, ''),"                                                              \
    " coalesce(to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), ''),"                 \
    " coalesce(floor(extract(epoch FROM now() - CASE WHEN l.granted THEN a.state_change"   \
    " ELSE l.waitstart END))::bigint, 0)"                                                  \
    " FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid" \
    " WHERE l.locktype = 'advisory' AND l.objsubid = 1"                                    \
    " AND l.database = (SELECT oid FROM pg_catalog.pg_database"                            \
    " WHERE datname = pg_catalog.current_database())"                                      \
    " AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint"                      \
    " ORDER BY l.granted DESC, l.pid"

static const struct {
    const char *text;
    const char *function;
    advlock_sql_answer_kind answer;
} statements[ADVLOCK_SQL_COUNT] = {
    [ADVLOCK_SQL_TRY_LOCK] = {"SELECT pg_try_advisory_lock($1)", "pg_try_advisory_lock",
                              ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_UNLOCK] = {"SELECT pg_advisory_unlock($1)", "pg_advisory_unlock",
                            ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_TRY_LOCK_SHARED] = {"SELECT pg_try_advisory_lock_shared($1)",
                                     "pg_try_advisory_lock_shared", ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_UNLOCK_SHARED] = {"SELECT pg_advisory_unlock_shared($1)",
                                   "pg_advisory_unlock_shared", ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_TRY_XACT_LOCK] = {"SELECT pg_try_advisory_xact_lock($1)",
                                   "pg_try_advisory_xact_lock", ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_TRY_XACT_LOCK_SHARED] = {"SELECT pg_try_advisory_xact_lock_shared($1)",
                                          "pg_try_advisory_xact_lock_shared",
                                          ADVLOCK_ANSWER_BOOLEAN},
    [ADVLOCK_SQL_LOCK] = {"SELECT pg_advisory_lock($1)", "pg_advisory_lock", ADVLOCK_ANSWER_VOID},
    [ADVLOCK_SQL_LOCK_SHARED] = {"SELECT pg_advisory_lock_shared($1)", "pg_advisory_lock_shared",
                                 ADVLOCK_ANSWER_VOID},
    [ADVLOCK_SQL_XACT_LOCK] = {"SELECT pg_advisory_xact_lock($1)", "pg_advisory_xact_lock",
                               ADVLOCK_ANSWER_VOID},
    [ADVLOCK_SQL_XACT_LOCK_SHARED] = {"SELECT pg_advisory_xact_lock_shared($1)",
                                      "pg_advisory_xact_lock_shared", ADVLOCK_ANSWER_VOID},
    [ADVLOCK_SQL_HOLDERS] = {HOLDERS_SQL, "holder diagnostics", ADVLOCK_ANSWER_HOLDERS},
};

static int known(advlock_sql sql)
{
    return (int)sql >= 0 && (int)sql < ADVLOCK_SQL_COUNT;
}

const char *advlock_sql_text(advlock_sql sql)
{
    return known(sql) ? statements[sql].text : NULL;
}

advlock_sql_answer_kind advlock_sql_answer(advlock_sql sql)
{
    return known(sql) ? statements[sql].answer : ADVLOCK_ANSWER_BOOLEAN;
}

const char *advlock_sql_function(advlock_sql sql)
{
    return known(sql) ? statements[sql].function : "?";
}

/* Rows of the table, chosen by what the operation is and its options. */
advlock_sql advlock_sql_for_lock(advlock_mode mode, advlock_scope scope, int wait)
{
    static const advlock_sql rows[2][2][2] = {
        /* poll: try-lock */
        {{ADVLOCK_SQL_TRY_LOCK, ADVLOCK_SQL_TRY_XACT_LOCK},
         {ADVLOCK_SQL_TRY_LOCK_SHARED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED}},
        /* wait on the server */
        {{ADVLOCK_SQL_LOCK, ADVLOCK_SQL_XACT_LOCK},
         {ADVLOCK_SQL_LOCK_SHARED, ADVLOCK_SQL_XACT_LOCK_SHARED}},
    };
    return rows[wait != 0][mode == ADVLOCK_SHARED][scope == ADVLOCK_TRANSACTION];
}

advlock_sql advlock_sql_for_unlock(advlock_mode mode)
{
    return mode == ADVLOCK_SHARED ? ADVLOCK_SQL_UNLOCK_SHARED : ADVLOCK_SQL_UNLOCK;
}
