/*
 * The one table of SQL advlock sends: the core's, and the advlock command's
 * own (the rows from ADVLOCK_SQL_OCCUPY to ADVLOCK_SQL_ROLLBACK,
 * ADVLOCK_SQL_MARK_GRANTS, and the listing's from ADVLOCK_SQL_LOCKS_TABLES
 * on). Every parameter is a bigint:
 * the lock key first (the session check's is its token), then a wait's
 * bound in milliseconds, then a guarded row's token. What a row returns
 * decides which input reports its answer.
 */
#include "core.h"

/* PostgreSQL records no grant time: for an idle holder the end of its last
 * statement (state_change) is when advlock's try-lock succeeded; for a
 * session that ran statements since, it is a lower bound. Waiters have had
 * pg_locks.waitstart since PostgreSQL 14; the query needs 14 or later.
 * Advisory locks are per database, hence the filter. */
#define THIS_DATABASE \
    "(SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())"
#define HOLDERS_SQL                                                                        \
    "SELECT l.pid, l.granted, l.mode, coalesce(a.application_name, ''),"                   \
    " coalesce(host(a.client_addr), CASE WHEN a.pid IS NULL THEN '' ELSE 'local' END),"    \
    " coalesce(a.state, ''),"                                                              \
    " coalesce(to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), ''),"                 \
    " coalesce(floor(extract(epoch FROM now() - CASE WHEN l.granted THEN a.state_change"   \
    " ELSE l.waitstart END))::bigint, 0)"                                                  \
    " FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid" \
    " WHERE l.locktype = 'advisory' AND l.objsubid = 1"                                    \
    " AND l.database = " THIS_DATABASE                                                     \
    " AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint"                      \
    " ORDER BY l.granted DESC, l.pid"

/* Does this server session hold key $1 in the mode named? pg_locks shows a
 * 64-bit advisory key (objsubid 1) as its high half in classid and its low
 * half in objid, one row per mode however many holds and at whichever level
 * (session or transaction), so a granted row is the answer. A waiting
 * request's row is not granted. Reading pg_locks takes the lock manager's
 * partition locks briefly: cheap once a second, never on a hot path. */
#define HELD_ROWS                                                                      \
    "SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 1"     \
    " AND granted AND pid = pg_catalog.pg_backend_pid() AND database = " THIS_DATABASE \
    " AND classid::bigint = (($1::bigint >> 32) & 4294967295)"                         \
    " AND objid::bigint = ($1::bigint & 4294967295)"
#define HELD_EXPR(mode) "EXISTS (" HELD_ROWS " AND mode = '" mode "')"

/*
 * A wait bounded by the server: lock_timeout, set for this transaction only
 * (set_config's true), ends the wait with 55P03 after $2 ms, with no cancel
 * request and no race against the client's clock. Outside a transaction
 * block the setting dies with the statement's own transaction; inside the
 * caller's block it would outlive the statement, so a granted wait puts the
 * caller's value back (a failed one aborts the block, and ROLLBACK restores
 * it). The order is forced by data, not by the planner's whims: the caller's
 * value is read first, in a subquery OFFSET 0 keeps apart; CASE evaluates
 * its condition (setting the bound) before its result (the wait); the
 * restore takes the wait's result (void, as text: '') as part of its
 * argument. The row's one column is void, as the lock function's.
 */
#define BOUNDED_WAIT(function)                                                \
    "pg_catalog.set_config('lock_timeout', c.caller || CASE WHEN"             \
    " pg_catalog.set_config('lock_timeout', $2::text, true) IS NOT NULL THEN" \
    " pg_catalog." function "($1)::text END, true)::void"
#define CALLERS_LOCK_TIMEOUT \
    " FROM (SELECT pg_catalog.current_setting('lock_timeout') AS caller OFFSET 0) c"
#define BOUNDED_WAIT_SQL(function) "SELECT " BOUNDED_WAIT(function) CALLERS_LOCK_TIMEOUT

/*
 * The guarded rows run their lock function only on the server session this
 * connection claimed, where the setting advlock.session holds their token
 * ($2, or $3 after a wait's bound), and answer NULL anywhere else. Why a
 * claim, and why a setting: docs/design.md, "The server session check".
 */
#define OURS(token)        "pg_catalog.current_setting('advlock.session', true) = " token "::text"
#define GUARDED_EXPR(expr) "SELECT CASE WHEN " OURS("$2") " THEN " expr " END"
#define GUARDED(function)  GUARDED_EXPR("pg_catalog." function "($1)")
#define GUARDED_WAIT_SQL(function) \
    "SELECT CASE WHEN " OURS("$3") " THEN " BOUNDED_WAIT(function) " END" CALLERS_LOCK_TIMEOUT

/*
 * Turns off the server's timeouts that would end a holder's session or
 * transaction behind the lock's back (docs/design.md, "The server's own
 * timeouts"): for the session, or with local true for this transaction
 * alone. Each is read back from set_config()'s answer. transaction_timeout
 * is skipped where the server lacks it (before 17: current_setting(...,
 * true) is NULL); the others exist from PostgreSQL 14 on, and on an older
 * server the first fails the statement (42704), which is how the session
 * row refuses it (below). A value
 * that does not read back fails the statement with a message naming the
 * setting: an error, not a row, as nothing may be locked then. The
 * failure's text reads current_setting(), so it is not constant and the
 * planner cannot fold it (and raise it) ahead of the CASE. TRUE otherwise.
 */
#define TIMEOUTS_OFF(local)                                                          \
    "(SELECT pg_catalog.bool_and(CASE WHEN"                                          \
    " pg_catalog.current_setting(t.name, t.name = 'transaction_timeout') IS NULL OR" \
    " pg_catalog.set_config(t.name, '0', " local ") = '0' THEN true"                 \
    " ELSE ('advlock cannot turn off ' || t.name || ': it reads ' ||"                \
    " pg_catalog.current_setting(t.name))::boolean END) FROM (VALUES"                \
    " ('idle_session_timeout'), ('idle_in_transaction_session_timeout'),"            \
    " ('transaction_timeout')) t(name))"

/*
 * The guarded transaction rows run their lock function on this
 * connection's claimed session, or on one holding no granted row of the
 * key in any mode, and answer NULL (busy) elsewhere (why: docs/design.md,
 * "Guarded statements"). Cheap test first: the setting, then pg_locks.
 * Each first turns the server's timeouts off for its transaction: behind a
 * proxy each transaction may land on another server session, which the
 * connection's one session row never saw.
 */
#define KEY_FREE_HERE "NOT EXISTS (" HELD_ROWS ")"
/* clang-format off */
#define XACT_GUARDED_EXPR(token, expr)                                              \
    "CASE WHEN " TIMEOUTS_OFF("true") " THEN CASE"                                  \
    " WHEN " OURS(token) " THEN " expr " WHEN " KEY_FREE_HERE " THEN " expr " END END"
/* clang-format on */
#define XACT_GUARDED(function) "SELECT " XACT_GUARDED_EXPR("$2", "pg_catalog." function "($1)")
#define XACT_GUARDED_WAIT_SQL(function) \
    "SELECT " XACT_GUARDED_EXPR("$3", BOUNDED_WAIT(function)) CALLERS_LOCK_TIMEOUT

/*
 * The session's facts and its claim, in one row (docs/design.md, "The
 * claim"). $1 0 claims nothing; $2 is the pid the client was told at
 * connect. CASE tries the cheap tests first and sets the claim last, in a
 * subquery (OFFSET 0 keeps it apart) whose row the WHERE takes as input.
 * PostgreSQL 13 and older have no idle_session_timeout (nor
 * client_connection_check_interval), so there the WHERE fails the
 * statement (42704), which rolls back the claim with its transaction, and
 * advlock_describe() says which version is needed and why
 * (docs/operators.md, "Supported servers").
 *
 * The WHERE turns the server's timeouts off: for the session where it is
 * this connection's (direct, or claimed behind a proxy), for this
 * transaction alone on a pooled session this connection did not claim,
 * where another client runs next (TIMEOUTS_LOCAL). A backend's pid is
 * never 0, so a client pid of 0 (unknown) reads as a proxy, as the
 * machine has it. The statement stays under track_activity_query_size's
 * default 1024 bytes, so that pg_stat_activity shows it whole.
 */
#define TIMEOUTS_LOCAL "c.proxied AND NOT (c.ours AND $1::bigint <> 0)"
/* clang-format off */
#define SESSION_SQL                                                                            \
    "SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), c.ours FROM (SELECT"  \
    " $2::bigint <> pg_catalog.pg_backend_pid() AS proxied, CASE"                              \
    " WHEN $1::bigint = 0 THEN true"                                                           \
    " WHEN " OURS("$1") " THEN true"                                                           \
    " WHEN coalesce(pg_catalog.current_setting('advlock.session', true), '') <> '' THEN false" \
    " WHEN EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory'"                \
    " AND pid = pg_catalog.pg_backend_pid()) THEN false"                                       \
    " ELSE pg_catalog.set_config('advlock.session', $1::text, false) = $1::text END AS ours"   \
    " OFFSET 0) c WHERE " TIMEOUTS_OFF(TIMEOUTS_LOCAL)
/* clang-format on */

/*
 * The lease's server settings (advlock_lease_plan), set for the rest of the
 * server session and read back in the same statement. The settings are set
 * in a subquery (OFFSET 0 keeps it apart) whose row the read-back takes as
 * its input, so pg_settings is read after they are made. pg_settings shows
 * each value as a plain number in its base unit (ms, or s for the
 * keepalives), where current_setting() formats it ('27s'). On a Unix socket
 * the server ignores the tcp_* settings and reads them back as 0, with no
 * client address: NULL. A TCP server that reads any back otherwise (0
 * because its platform lacks the option, or changed by a hook) did not
 * apply the plan: FALSE. Every $1 is cast to bigint where it appears, so a
 * driver that lets the server infer parameter types sends a bigint.
 */
/* clang-format off */
#define LEASE_WANTED                                                   \
    "(VALUES ('tcp_user_timeout', $1::bigint),"                        \
    " ('tcp_keepalives_idle', $1::bigint / 1000 - 2),"                 \
    " ('tcp_keepalives_interval', 1), ('tcp_keepalives_count', 2),"    \
    " ('client_connection_check_interval', 1000)) w(name, value)"
#define LEASE_SETUP_SQL                                                                 \
    "SELECT CASE WHEN r.applied = 5 THEN true"                                          \
    " WHEN pg_catalog.inet_client_addr() IS NULL AND r.tcp_zero = 4 THEN NULL"          \
    " ELSE false END"                                                                   \
    " FROM (SELECT pg_catalog.string_agg(pg_catalog.set_config(w.name, w.value::text,"  \
    " false), ',') AS made FROM " LEASE_WANTED " OFFSET 0) s,"                          \
    " LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE p.setting = w.value::text)"     \
    " AS applied, pg_catalog.count(*) FILTER (WHERE p.name LIKE 'tcp%' AND"             \
    " p.setting = '0') AS tcp_zero"                                                     \
    " FROM pg_catalog.pg_settings p JOIN " LEASE_WANTED " ON w.name = p.name"           \
    " WHERE s.made IS NOT NULL) r"
/* clang-format on */

/* A heartbeat on a direct connection: any answer proves the session alive;
 * this one also catches the lease's setting undone (a rolled-back SET, a
 * RESET, another user of the connection). The server shows
 * tcp_user_timeout as a plain number of ms (its own show function, not the
 * unit-formatted text of other settings: '27000', never '27s'); a server
 * that formatted it would fail the cast, loudly. A Unix socket reads 0 and
 * needs no setting: TRUE there. */
#define HEARTBEAT_SQL                                                            \
    "SELECT pg_catalog.current_setting('tcp_user_timeout')::bigint = $1::bigint" \
    " OR pg_catalog.inet_client_addr() IS NULL"

/* Behind a proxy SHOW describes the proxy's hop, not the client's: only
 * reaching the claimed server session proves anything. $1 is named (and
 * always non-NULL) so that every driver can tell its type. */
#define HEARTBEAT_GUARDED_SQL GUARDED_EXPR("$1::bigint IS NOT NULL")

/*
 * A fenced try-lock: one statement, so one implicit transaction that
 * commits before the answer leaves the server. The lock is taken first
 * (the CTE l, referenced twice, runs once); only a grant upserts the key's
 * counter row, whose new token is the answer's second column.
 * synchronous_commit is set for this transaction alone and read at its
 * commit: the token is durable (and on a synchronous standby) before the
 * holder hears of it, whatever the server's default. Without the schema
 * the statement fails at parse, on a standby at executor start (read-only):
 * either way before anything is locked. Why FOR SHARE in fence_ok and
 * which races it closes: docs/design.md, "Fencing tokens".
 */
#define FENCED_TRY_SQL(function)                                                     \
    "WITH l AS (SELECT pg_catalog." function "($1::bigint) AS granted,"              \
    " pg_catalog.set_config('synchronous_commit', 'on', true) AS durable),"          \
    " t AS (INSERT INTO advlock.fence AS f (key, token) SELECT $1::bigint, 1 FROM l" \
    " WHERE l.granted ON CONFLICT (key) DO UPDATE SET token = f.token + 1 RETURNING" \
    " f.token)"                                                                      \
    " SELECT l.granted, t.token FROM l LEFT JOIN t ON true"

/*
 * Lock-delay's mark (docs/design.md, "Lock-delay"): one row per key, the
 * holder's token and its stop bound U, written before the holder is told
 * it holds the lock. Each statement is its own implicit transaction, with
 * synchronous_commit on for it alone (read at its commit): the mark is
 * durable, and on a synchronous standby, before the answer leaves the
 * server. Sent after the grant's answer, so its snapshot is taken after
 * the previous holder's session ended: a mark that session committed is
 * seen. MARK_TAKE locks the row it reads (FOR UPDATE) and writes ours only
 * where no other token's is: a clean hand-off (the last holder cleared
 * its mark) costs this one statement. The beat column is the server's
 * time of the write, for a later shortening of the wait by the server's
 * clock; nothing reads it yet.
 */
/* clang-format off */
#define MARK_DURABLE "(SELECT pg_catalog.set_config('synchronous_commit', 'on', true))"
#define MARK_UPSERT(condition)                                                            \
    "INSERT INTO advlock.mark AS m (key, token, stop_ms, beat)"                           \
    " SELECT $1::bigint, $2::bigint, $3::bigint, pg_catalog.now() FROM " MARK_DURABLE     \
    " d WHERE " condition " ON CONFLICT (key) DO UPDATE SET token = excluded.token,"      \
    " stop_ms = excluded.stop_ms, beat = excluded.beat RETURNING 1"
#define MARK_TAKE_SQL                                                                     \
    "WITH old AS (SELECT m.token, m.stop_ms FROM advlock.mark m WHERE m.key = $1::bigint" \
    " AND m.token <> $2::bigint FOR UPDATE),"                                             \
    " w AS (" MARK_UPSERT("NOT EXISTS (SELECT FROM old)") ")"                             \
    " SELECT coalesce((SELECT old.token FROM old), 0)::bigint,"                           \
    " coalesce((SELECT old.stop_ms FROM old), 0)::bigint,"                                \
    " (SELECT pg_catalog.count(*) FROM w)::bigint"
#define MARK_WRITE_SQL                                                                    \
    "WITH w AS (" MARK_UPSERT("true") ")"                                                 \
    " SELECT 0::bigint, 0::bigint, (SELECT pg_catalog.count(*) FROM w)::bigint"
/* clang-format on */
/* A clear is never waited for: lost in a crash, or missing on a promoted
 * standby, it leaves the mark, and the next holder waits for nothing,
 * which is safe. Its commit is seen at once all the same, so it neither
 * waits for a WAL flush nor for a standby that may be the reason the
 * grant is given back. $3 is 1 inside the caller's transaction block,
 * whose commit keeps the caller's setting. */
#define MARK_CLEAR_SQL                                                                  \
    "WITH c AS (DELETE FROM advlock.mark WHERE key = $1::bigint AND token = $2::bigint" \
    " RETURNING 1)"                                                                     \
    " SELECT 0::bigint, 0::bigint, (SELECT pg_catalog.count(*) FROM c)::bigint"         \
    " FROM (SELECT pg_catalog.set_config('synchronous_commit', CASE $3::bigint WHEN 0"  \
    " THEN 'off' ELSE pg_catalog.current_setting('synchronous_commit') END, true)) d"

/* The settings that size the server's shared lock table (docs/design.md,
 * "The server's lock table"); current_setting() shows these three as plain
 * numbers. */
#define CAPACITY_SQL                                                          \
    "SELECT pg_catalog.current_setting('max_locks_per_transaction')::bigint," \
    " pg_catalog.current_setting('max_connections')::bigint,"                 \
    " pg_catalog.current_setting('max_prepared_transactions')::bigint"

/* clang-format off */
#define FENCE_SETUP_SQL \
    "CREATE SCHEMA IF NOT EXISTS advlock;\n" \
    "CREATE TABLE IF NOT EXISTS advlock.fence (\n" \
    "    key bigint PRIMARY KEY,\n" \
    "    token bigint NOT NULL\n" \
    ");\n" \
    "CREATE TABLE IF NOT EXISTS advlock.mark (\n" \
    "    key bigint PRIMARY KEY,\n" \
    "    token bigint NOT NULL,\n" \
    "    stop_ms bigint NOT NULL,\n" \
    "    beat timestamptz NOT NULL\n" \
    ");\n" \
    "CREATE OR REPLACE FUNCTION advlock.fence_ok(key bigint, token bigint)\n" \
    "RETURNS boolean LANGUAGE sql VOLATILE AS $fence_ok$\n" \
    "    SELECT coalesce((SELECT f.token <= fence_ok.token FROM advlock.fence f\n" \
    "                     WHERE f.key = fence_ok.key FOR SHARE), true)\n" \
    "$fence_ok$;\n"
/* clang-format on */

const char *advlock_fence_setup_sql(void)
{
    return advlock_sql_text(ADVLOCK_SQL_FENCE_SETUP);
}

/* A helper connection's hold of a server session behind a transaction
 * pooler (src/cli/reach.c says why): long enough for the release's retry to
 * be handed the claimed session, short enough that no session stays pinned. */
#define OCCUPY_SQL                                                                             \
    "SELECT pg_catalog.pg_sleep(CASE WHEN pg_catalog.current_setting('advlock.session', true)" \
    " = $1::text THEN 0 ELSE 0.2 END)"

/* What is installed: the schema, the table, and advlock.fence_ok's body,
 * read from the catalogs, which any role may read. */
#define FENCE_INSTALLED_SQL                                                              \
    "SELECT pg_catalog.to_regnamespace('advlock') IS NOT NULL,"                          \
    " (SELECT pg_catalog.count(*) = 2 FROM pg_catalog.pg_class c JOIN"                   \
    "  pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'advlock'"  \
    "  AND c.relname IN ('fence', 'mark')),"                                             \
    " (SELECT p.prosrc FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"         \
    "  ON n.oid = p.pronamespace WHERE n.nspname = 'advlock' AND p.proname = 'fence_ok'" \
    "  AND pg_catalog.pg_get_function_identity_arguments(p.oid) = 'key bigint, token bigint')"

/* The grants a feature needs (docs/operators.md, "Fencing tokens",
 * "Lock-delay") that the connected role lacks, read by the objects' oids,
 * not their names: a role without USAGE on the schema could not even name
 * the table. rows: (order, grant, has it) for n the schema, c the table
 * named relname and p the function advlock.fence_ok. */
#define GRANTS_SQL(relname, rows)                                                                \
    "SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s TO %I;', g.grant_, current_user)," \
    " ' ' ORDER BY g.o)"                                                                         \
    " FROM pg_catalog.pg_namespace n"                                                            \
    " JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = '" relname "'"        \
    " LEFT JOIN pg_catalog.pg_proc p ON p.pronamespace = n.oid AND p.proname = 'fence_ok'"       \
    " CROSS JOIN LATERAL (VALUES " rows ") AS g(o, grant_, ok)"                                  \
    " WHERE n.nspname = 'advlock' AND NOT g.ok"
/* clang-format off */
#define USAGE_ROW "(1, 'USAGE ON SCHEMA advlock', pg_catalog.has_schema_privilege(n.oid, 'USAGE'))"
#define TABLE_ROW(o, privilege, table)                                                   \
    ", (" #o ", '" privilege " ON advlock." table "',"                                   \
    " pg_catalog.has_table_privilege(c.oid, '" privilege "'))"
#define FENCE_GRANTS_SQL                                                                 \
    GRANTS_SQL("fence", USAGE_ROW TABLE_ROW(2, "SELECT", "fence")                        \
               TABLE_ROW(3, "INSERT", "fence") TABLE_ROW(4, "UPDATE", "fence")           \
               ", (5, 'EXECUTE ON FUNCTION advlock.fence_ok(bigint, bigint)',"           \
               " pg_catalog.has_function_privilege(p.oid, 'EXECUTE'))")
#define MARK_GRANTS_SQL                                                                  \
    GRANTS_SQL("mark", USAGE_ROW TABLE_ROW(2, "SELECT", "mark")                          \
               TABLE_ROW(3, "INSERT", "mark") TABLE_ROW(4, "UPDATE", "mark")             \
               TABLE_ROW(5, "DELETE", "mark"))
/* clang-format on */

/*
 * Every advisory lock of this database (advlock status with no name), in
 * one statement: pg_locks once, with lock-delay's mark and the fence
 * counter by key where they can be read, and after it, not joined to it,
 * one row per session of the database from pg_stat_activity. A session's
 * facts go once, not once per lock it holds: with 10,000 locks held the
 * rows stay narrow, and their sort cheap; the reader finds them by pid.
 *
 * A statement cannot name a table that is missing (it fails at parse),
 * and the schema is optional, so the mark and the fence are joined only
 * in the forms that name them; LOCKS_TABLES, asked first, says which form
 * to send. to_regclass() would not do for that question: it raises an
 * error for a schema the role lacks USAGE on, so the catalogs are read by
 * name and the privileges checked by oid.
 *
 * pg_locks records no grant time and state_change is not one (any later
 * statement moves it), so a holder's time is the mark's beat, written at
 * the grant, or unknown; a waiter's is pg_locks.waitstart (14 and later).
 * The two-int4 form (objsubid 2) is listed too, flagged: its classid and
 * objid are its two keys, never a name's.
 */
/* clang-format off */
#define LOCK_KEY "((l.classid::bigint << 32) | l.objid::bigint)"
#define SECONDS_SINCE(t) "floor(extract(epoch FROM pg_catalog.now() - " t "))::bigint"
#define LOCKS_SQL(joins, mark, token)                                                      \
    "SELECT " LOCK_KEY ", l.classid, l.objid, l.objsubid = 2, l.pid, l.granted, l.mode,"   \
    " NULL, NULL, NULL, NULL,"                                                             \
    " CASE WHEN NOT l.granted THEN " SECONDS_SINCE("l.waitstart") " END, " mark ", " token \
    " FROM pg_catalog.pg_locks l" joins                                                    \
    " WHERE l.locktype = 'advisory' AND l.database = " THIS_DATABASE " UNION ALL"          \
    " SELECT NULL, NULL, NULL, NULL, a.pid, NULL, NULL, coalesce(a.application_name, ''),"  \
    " coalesce(host(a.client_addr), 'local'), coalesce(a.state, ''),"                      \
    " coalesce(to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), ''),"                 \
    " NULL, NULL, NULL, NULL FROM pg_catalog.pg_stat_activity a"                           \
    " WHERE a.datid = " THIS_DATABASE " ORDER BY 1 NULLS FIRST, 4, 6 DESC, 5"
#define MARK_JOIN " LEFT JOIN advlock.mark m ON l.granted AND l.objsubid = 1 AND m.key = " LOCK_KEY
#define FENCE_JOIN " LEFT JOIN advlock.fence f ON l.objsubid = 1 AND f.key = " LOCK_KEY
#define MARK_COLUMNS                                                                       \
    SECONDS_SINCE("m.beat") ","                                                            \
    " to_char(m.beat AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
#define NO_MARK "NULL::bigint, NULL::text"
#define NO_TOKEN "NULL::bigint"
#define READABLE(relname)                                                                  \
    "EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"             \
    " ON n.oid = c.relnamespace WHERE n.nspname = 'advlock' AND c.relname = '" relname "'" \
    " AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')"                                 \
    " AND pg_catalog.has_table_privilege(c.oid, 'SELECT'))"
#define LOCKS_TABLES_SQL "SELECT " READABLE("mark") ", " READABLE("fence")
/* clang-format on */

/* What messages call the verify's statement. */
#define HELD_CHECK "the held-lock check"

static const struct {
    const char *text;
    const char *function;
    advlock_sql_answer_kind answer;
    int params;
} statements[ADVLOCK_SQL_COUNT] = {
    [ADVLOCK_SQL_TRY_LOCK] = {"SELECT pg_try_advisory_lock($1)", "pg_try_advisory_lock",
                              ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_UNLOCK] = {"SELECT pg_advisory_unlock($1)", "pg_advisory_unlock",
                            ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_TRY_LOCK_SHARED] = {"SELECT pg_try_advisory_lock_shared($1)",
                                     "pg_try_advisory_lock_shared", ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_UNLOCK_SHARED] = {"SELECT pg_advisory_unlock_shared($1)",
                                   "pg_advisory_unlock_shared", ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_TRY_XACT_LOCK] = {"SELECT pg_try_advisory_xact_lock($1)",
                                   "pg_try_advisory_xact_lock", ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_TRY_XACT_LOCK_SHARED] = {"SELECT pg_try_advisory_xact_lock_shared($1)",
                                          "pg_try_advisory_xact_lock_shared",
                                          ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_LOCK] = {BOUNDED_WAIT_SQL("pg_advisory_lock"), "pg_advisory_lock",
                          ADVLOCK_ANSWER_VOID, 2},
    [ADVLOCK_SQL_LOCK_SHARED] = {BOUNDED_WAIT_SQL("pg_advisory_lock_shared"),
                                 "pg_advisory_lock_shared", ADVLOCK_ANSWER_VOID, 2},
    [ADVLOCK_SQL_XACT_LOCK] = {BOUNDED_WAIT_SQL("pg_advisory_xact_lock"), "pg_advisory_xact_lock",
                               ADVLOCK_ANSWER_VOID, 2},
    [ADVLOCK_SQL_XACT_LOCK_SHARED] = {BOUNDED_WAIT_SQL("pg_advisory_xact_lock_shared"),
                                      "pg_advisory_xact_lock_shared", ADVLOCK_ANSWER_VOID, 2},
    [ADVLOCK_SQL_HOLDERS] = {HOLDERS_SQL, "holder diagnostics", ADVLOCK_ANSWER_HOLDERS, 1},
    [ADVLOCK_SQL_SESSION] = {SESSION_SQL, "the server session check", ADVLOCK_ANSWER_SESSION, 2},
    [ADVLOCK_SQL_TRY_LOCK_GUARDED] = {GUARDED("pg_try_advisory_lock"), "pg_try_advisory_lock",
                                      ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_UNLOCK_GUARDED] = {GUARDED("pg_advisory_unlock"), "pg_advisory_unlock",
                                    ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED] = {GUARDED("pg_try_advisory_lock_shared"),
                                             "pg_try_advisory_lock_shared", ADVLOCK_ANSWER_BOOLEAN,
                                             2},
    [ADVLOCK_SQL_UNLOCK_SHARED_GUARDED] = {GUARDED("pg_advisory_unlock_shared"),
                                           "pg_advisory_unlock_shared", ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_LOCK_GUARDED] = {GUARDED_WAIT_SQL("pg_advisory_lock"), "pg_advisory_lock",
                                  ADVLOCK_ANSWER_VOID, 3},
    [ADVLOCK_SQL_LOCK_SHARED_GUARDED] = {GUARDED_WAIT_SQL("pg_advisory_lock_shared"),
                                         "pg_advisory_lock_shared", ADVLOCK_ANSWER_VOID, 3},
    [ADVLOCK_SQL_HELD] = {"SELECT " HELD_EXPR("ExclusiveLock"), HELD_CHECK, ADVLOCK_ANSWER_BOOLEAN,
                          1},
    [ADVLOCK_SQL_HELD_SHARED] = {"SELECT " HELD_EXPR("ShareLock"), HELD_CHECK,
                                 ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_HELD_GUARDED] = {GUARDED_EXPR(HELD_EXPR("ExclusiveLock")), HELD_CHECK,
                                  ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_HELD_SHARED_GUARDED] = {GUARDED_EXPR(HELD_EXPR("ShareLock")), HELD_CHECK,
                                         ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED] = {XACT_GUARDED("pg_try_advisory_xact_lock"),
                                           "pg_try_advisory_xact_lock", ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED] = {XACT_GUARDED("pg_try_advisory_xact_lock_shared"),
                                                  "pg_try_advisory_xact_lock_shared",
                                                  ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_XACT_LOCK_GUARDED] = {XACT_GUARDED_WAIT_SQL("pg_advisory_xact_lock"),
                                       "pg_advisory_xact_lock", ADVLOCK_ANSWER_VOID, 3},
    [ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED] = {XACT_GUARDED_WAIT_SQL("pg_advisory_xact_lock_shared"),
                                              "pg_advisory_xact_lock_shared", ADVLOCK_ANSWER_VOID,
                                              3},
    [ADVLOCK_SQL_LEASE_SETUP] = {LEASE_SETUP_SQL, "the lease's setup", ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_HEARTBEAT] = {HEARTBEAT_SQL, "the lease's heartbeat", ADVLOCK_ANSWER_BOOLEAN, 1},
    [ADVLOCK_SQL_HEARTBEAT_GUARDED] = {HEARTBEAT_GUARDED_SQL, "the lease's heartbeat",
                                       ADVLOCK_ANSWER_BOOLEAN, 2},
    [ADVLOCK_SQL_TRY_LOCK_FENCED] = {FENCED_TRY_SQL("pg_try_advisory_lock"), "pg_try_advisory_lock",
                                     ADVLOCK_ANSWER_FENCED, 1},
    [ADVLOCK_SQL_TRY_XACT_LOCK_FENCED] = {FENCED_TRY_SQL("pg_try_advisory_xact_lock"),
                                          "pg_try_advisory_xact_lock", ADVLOCK_ANSWER_FENCED, 1},
    [ADVLOCK_SQL_CAPACITY] = {CAPACITY_SQL, "the lock table's settings", ADVLOCK_ANSWER_CAPACITY,
                              0},
    [ADVLOCK_SQL_OCCUPY] = {OCCUPY_SQL, "a helper's hold of a server session", ADVLOCK_ANSWER_VOID,
                            1},
    [ADVLOCK_SQL_FENCE_INSTALLED] = {FENCE_INSTALLED_SQL, "the check of the schema",
                                     ADVLOCK_ANSWER_FENCE_INSTALLED, 0},
    [ADVLOCK_SQL_FENCE_SETUP] = {FENCE_SETUP_SQL, "the setup script", ADVLOCK_ANSWER_COMMAND, 0},
    [ADVLOCK_SQL_FENCE_GRANTS] = {FENCE_GRANTS_SQL, "the grants' check",
                                  ADVLOCK_ANSWER_FENCE_GRANTS, 0},
    [ADVLOCK_SQL_BEGIN] = {"BEGIN", "BEGIN", ADVLOCK_ANSWER_COMMAND, 0},
    [ADVLOCK_SQL_CLOSE_ALL] = {"CLOSE ALL", "CLOSE ALL", ADVLOCK_ANSWER_COMMAND, 0},
    [ADVLOCK_SQL_COMMIT] = {"COMMIT", "COMMIT", ADVLOCK_ANSWER_COMMAND, 0},
    [ADVLOCK_SQL_ROLLBACK] = {"ROLLBACK", "ROLLBACK", ADVLOCK_ANSWER_COMMAND, 0},
    [ADVLOCK_SQL_MARK_TAKE] = {MARK_TAKE_SQL, "the lock-delay mark's read", ADVLOCK_ANSWER_CAPACITY,
                               3},
    [ADVLOCK_SQL_MARK_WRITE] = {MARK_WRITE_SQL, "the lock-delay mark's write",
                                ADVLOCK_ANSWER_CAPACITY, 3},
    [ADVLOCK_SQL_MARK_CLEAR] = {MARK_CLEAR_SQL, "the lock-delay mark's clear",
                                ADVLOCK_ANSWER_CAPACITY, 3},
    [ADVLOCK_SQL_MARK_GRANTS] = {MARK_GRANTS_SQL, "the grants' check", ADVLOCK_ANSWER_FENCE_GRANTS,
                                 0},
    [ADVLOCK_SQL_LOCKS_TABLES] = {LOCKS_TABLES_SQL, "the check of the tables status reads",
                                  ADVLOCK_ANSWER_LOCKS_TABLES, 0},
    [ADVLOCK_SQL_LOCKS] = {LOCKS_SQL("", NO_MARK, NO_TOKEN), "the list of advisory locks",
                           ADVLOCK_ANSWER_LOCKS, 0},
    [ADVLOCK_SQL_LOCKS_MARK] = {LOCKS_SQL(MARK_JOIN, MARK_COLUMNS, NO_TOKEN),
                                "the list of advisory locks", ADVLOCK_ANSWER_LOCKS, 0},
    [ADVLOCK_SQL_LOCKS_FENCE] = {LOCKS_SQL(FENCE_JOIN, NO_MARK, "f.token"),
                                 "the list of advisory locks", ADVLOCK_ANSWER_LOCKS, 0},
    [ADVLOCK_SQL_LOCKS_MARK_FENCE] = {LOCKS_SQL(MARK_JOIN FENCE_JOIN, MARK_COLUMNS, "f.token"),
                                      "the list of advisory locks", ADVLOCK_ANSWER_LOCKS, 0},
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

int advlock_sql_params(advlock_sql sql)
{
    return known(sql) ? statements[sql].params : 0;
}

int advlock_sql_guarded(advlock_sql sql)
{
    return (sql >= ADVLOCK_SQL_TRY_LOCK_GUARDED && sql <= ADVLOCK_SQL_LOCK_SHARED_GUARDED)
           || sql == ADVLOCK_SQL_HELD_GUARDED || sql == ADVLOCK_SQL_HELD_SHARED_GUARDED
           || sql == ADVLOCK_SQL_HEARTBEAT_GUARDED || advlock_sql_null_is_busy(sql);
}

int advlock_sql_null_is_busy(advlock_sql sql)
{
    return sql >= ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED && sql <= ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED;
}

int advlock_sql_verifies(advlock_sql sql)
{
    return sql >= ADVLOCK_SQL_HELD && sql <= ADVLOCK_SQL_HELD_SHARED_GUARDED;
}

const char *advlock_sql_function(advlock_sql sql)
{
    return known(sql) ? statements[sql].function : "?";
}

int advlock_sql_fenced(advlock_sql sql)
{
    return sql == ADVLOCK_SQL_TRY_LOCK_FENCED || sql == ADVLOCK_SQL_TRY_XACT_LOCK_FENCED;
}

advlock_sql advlock_sql_for_fenced(advlock_scope scope)
{
    return scope == ADVLOCK_TRANSACTION ? ADVLOCK_SQL_TRY_XACT_LOCK_FENCED
                                        : ADVLOCK_SQL_TRY_LOCK_FENCED;
}

/* Rows of the table, chosen by what the operation is and its options. */
advlock_sql advlock_sql_for_lock(advlock_mode mode, advlock_scope scope, int wait, int guarded)
{
    /* [wait][shared][guarded][session, transaction] */
    static const advlock_sql rows[2][2][2][2] = {
        /* poll: try-lock */
        {{{ADVLOCK_SQL_TRY_LOCK, ADVLOCK_SQL_TRY_XACT_LOCK},
          {ADVLOCK_SQL_TRY_LOCK_GUARDED, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED}},
         {{ADVLOCK_SQL_TRY_LOCK_SHARED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED},
          {ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED}}},
        /* wait on the server */
        {{{ADVLOCK_SQL_LOCK, ADVLOCK_SQL_XACT_LOCK},
          {ADVLOCK_SQL_LOCK_GUARDED, ADVLOCK_SQL_XACT_LOCK_GUARDED}},
         {{ADVLOCK_SQL_LOCK_SHARED, ADVLOCK_SQL_XACT_LOCK_SHARED},
          {ADVLOCK_SQL_LOCK_SHARED_GUARDED, ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED}}},
    };
    return rows[wait != 0][mode == ADVLOCK_SHARED][guarded != 0][scope == ADVLOCK_TRANSACTION];
}

advlock_sql advlock_sql_for_unlock(advlock_mode mode, int guarded)
{
    if (mode == ADVLOCK_SHARED)
        return guarded ? ADVLOCK_SQL_UNLOCK_SHARED_GUARDED : ADVLOCK_SQL_UNLOCK_SHARED;
    return guarded ? ADVLOCK_SQL_UNLOCK_GUARDED : ADVLOCK_SQL_UNLOCK;
}

/* A transaction-scoped lock's verify needs no guard: a proxy keeps a
 * transaction on one server session, and a granted row there is the
 * transaction's own (its acquire ran only where no other was). */
advlock_sql advlock_sql_for_held(advlock_mode mode, advlock_scope scope, int guarded)
{
    int shared = mode == ADVLOCK_SHARED;
    if (guarded && scope == ADVLOCK_SESSION)
        return shared ? ADVLOCK_SQL_HELD_SHARED_GUARDED : ADVLOCK_SQL_HELD_GUARDED;
    return shared ? ADVLOCK_SQL_HELD_SHARED : ADVLOCK_SQL_HELD;
}
