/*
 * The one table of SQL the core can emit. Every row takes one bigint
 * parameter and returns one boolean, so drivers need no per-row logic.
 */
#include "core.h"

static const struct {
    const char *text;
    const char *function;
} statements[ADVLOCK_SQL_COUNT] = {
    [ADVLOCK_SQL_TRY_LOCK] = {"SELECT pg_try_advisory_lock($1)", "pg_try_advisory_lock"},
    [ADVLOCK_SQL_UNLOCK] = {"SELECT pg_advisory_unlock($1)", "pg_advisory_unlock"},
};

static int known(advlock_sql sql)
{
    return (int)sql >= 0 && (int)sql < ADVLOCK_SQL_COUNT;
}

const char *advlock_sql_text(advlock_sql sql)
{
    return known(sql) ? statements[sql].text : NULL;
}

const char *advlock_sql_function(advlock_sql sql)
{
    return known(sql) ? statements[sql].function : "?";
}
