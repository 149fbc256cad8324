#!/usr/bin/env bash
# harness: pgbouncer
# harness-env: ADVLOCK_TEST_PGBOUNCER_SESSION_RESET_QUERY=
# A session pool that does not reset server sessions between clients
# (PgBouncer pool_mode = session, server_reset_query empty) hands the next
# client a server session that still carries the last one's claim. advlock
# refuses it loudly (exit 70, the command not run), worded by what it
# observed (a server session claimed by another connection) and naming both
# possible causes: transaction pooling, or a pool that does not reset
# sessions (server_reset_query). Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBS=${ADVLOCK_TEST_PGBOUNCER_SESSION:?run under tests/pg/with-pgbouncer.sh}
DIRECT=${ADVLOCK_TEST_DIRECT:?}
ADMIN=${ADVLOCK_TEST_PGBOUNCER_SESSION_ADMIN:?}
name=deploy-session-noreset

# The first client claims the pool's one server session and gives it back.
capture "$A" run -q -d "$PBS" --timeout 1 "$name" -- echo first
check "first client: status" 0 "$RC"
check "first client: ran" first "$OUT"
check "first client: nothing held after" 0 "$(held_on "$DIRECT" "$name")"
servers=$(psql -X -At -d "$ADMIN" -c "SHOW SERVERS" | wc -l)
check "one server session in the pool" 1 "$servers"
claim=$(psql -X -At -d "$PBS" -c "SELECT current_setting('advlock.session', true)")
[ -n "$claim" ] && pass || fail "the server session lost its claim: is server_reset_query empty?"

# The next client gets the same server session, claimed by the first.
capture "$A" run -q -d "$PBS" --timeout 1 "$name" -- echo second
echo "second client: exit $RC, stderr [$ERR]"
check "second client: exit status" "$EXIT_LOCK_ERROR" "$RC"
check "second client: command not run" "" "$OUT"
[[ $ERR == *"the server session this connection reached was claimed by another connection"* ]] &&
    pass || fail "second client: the fact observed is not said: [$ERR]"
[[ $ERR == *"transaction-pooling proxy"* && $ERR == *"server_reset_query"* ]] &&
    pass || fail "second client: both possible causes are not named: [$ERR]"
check "second client: nothing held" 0 "$(held_on "$DIRECT" "$name")"
finish
