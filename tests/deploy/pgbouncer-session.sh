#!/usr/bin/env bash
# harness: pgbouncer
# Through PgBouncer in pool_mode = session a client keeps one server session,
# and advlock behaves exactly as on a direct connection: the same load gives
# the same result on both (no overlap, exits 0 or 1 only, nothing left).
# Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBS=${ADVLOCK_TEST_PGBOUNCER_SESSION:?run under tests/pg/with-pgbouncer.sh}
DIRECT=${ADVLOCK_TEST_DIRECT:?}

# Held, visible on the server, a second run times out; released after.
name=deploy-session-one
"$A" run -q -d "$PBS" "$name" -- sleep 2 &
holder=$!
wait_held "$DIRECT" "$name" || fail "session mode: no holder appeared on the server"
capture "$A" run -q -d "$PBS" --timeout 0.5 "$name" -- echo never
check "session mode: second run times out" 1 "$RC"
check "session mode: timeout message" "advlock: Could not acquire migration lock for '$name' within 0.5s." "$ERR"
capture "$A" run -q -d "$DIRECT" --timeout 0 "$name" -- echo never
check "session mode: a direct run is excluded too" 1 "$RC"
wait "$holder"
check "session mode: holder's status" 0 "$?"
check "session mode: nothing held after" 0 "$(held_on "$DIRECT" "$name")"

for via in session direct; do
    if [ "$via" = session ]; then c=$PBS; else c=$DIRECT; fi
    load "$T/$via" -d "$c" -n "$CLIENTS" -r "$ROUNDS" -s 0.1 -t 10 -k "deploy-$via"
    check "$via: overlapping commands" 0 "$overlaps"
    at_most "$via: max concurrency" 1 "$max_concurrency"
    check "$via: runs exiting other than 0 or 1" 0 "$((exit_69 + exit_70 + exit_other))"
    check "$via: commands run = runs that exited 0" "$exit_0" "$commands"
    check "$via: advisory locks left" 0 "$leftover_all"
done

finish
