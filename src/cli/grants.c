/*
 * Which of the grants fencing tokens need (docs/operators.md, "Fencing
 * tokens") the connected role lacks: a fenced try refused for a privilege
 * (SQLSTATE 42501) names only the object the server stopped at, and the
 * fix is the GRANT statements, named here.
 */
#include <stdio.h>

#include "cli.h"

/* The privileges are read by the objects' oids, not their names: a role
 * without USAGE on the schema could not even name the table. */
static const char missing_sql[] =
    "SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s TO %I;', g.grant_, current_user),"
    " ' ' ORDER BY g.o)"
    " FROM pg_catalog.pg_namespace n"
    " JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = 'fence'"
    " LEFT JOIN pg_catalog.pg_proc p ON p.pronamespace = n.oid AND p.proname = 'fence_ok'"
    " CROSS JOIN LATERAL (VALUES"
    " (1, 'USAGE ON SCHEMA advlock', pg_catalog.has_schema_privilege(n.oid, 'USAGE')),"
    " (2, 'SELECT ON advlock.fence', pg_catalog.has_table_privilege(c.oid, 'SELECT')),"
    " (3, 'INSERT ON advlock.fence', pg_catalog.has_table_privilege(c.oid, 'INSERT')),"
    " (4, 'UPDATE ON advlock.fence', pg_catalog.has_table_privilege(c.oid, 'UPDATE')),"
    " (5, 'EXECUTE ON FUNCTION advlock.fence_ok(bigint, bigint)',"
    "  pg_catalog.has_function_privilege(p.oid, 'EXECUTE'))) AS g(o, grant_, ok)"
    " WHERE n.nspname = 'advlock' AND NOT g.ok";

void cli_say_missing_grants(PGconn *conn, cli_bound bound)
{
    int rc;
    PGresult *last = cli_exec_until(conn, missing_sql, "the grants' check", bound, &rc);
    if (rc == 0 && PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) == 1
        && !PQgetisnull(last, 0, 0))
        cli_error("fencing tokens need grants this role lacks; a DBA runs: %s",
                  PQgetvalue(last, 0, 0));
    PQclear(last);
}
