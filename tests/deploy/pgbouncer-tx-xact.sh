#!/usr/bin/env bash
# harness: pgbouncer
# advlock run --xact through PgBouncer in pool_mode = transaction: one
# transaction held open around the command pins one server session, so the
# transaction-scoped lock excludes: every run holds alone or times out, and
# nothing is left on any server session afterwards.
# Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBX=${ADVLOCK_TEST_PGBOUNCER_TX:?run under tests/pg/with-pgbouncer.sh}
DIRECT=${ADVLOCK_TEST_DIRECT:?}

# One holder: the lock is visible on the server, its session idle in a
# transaction; a second --xact run times out with the reference's message.
name=deploy-xact-one
"$A" run -q --xact -d "$PBX" "$name" -- sleep 2 &
holder=$!
wait_held "$DIRECT" "$name" || fail "--xact: no holder appeared on the server"
check "--xact: holder's session idle in transaction" "idle in transaction" \
    "$(psql -X -At -d "$DIRECT" -c "SELECT state FROM pg_stat_activity WHERE pid IN
        (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)")"
capture "$A" run -q --xact -d "$PBX" --timeout 0.5 "$name" -- echo never
check "--xact: second run times out" 1 "$RC"
check "--xact: timeout message" "advlock: Could not acquire migration lock for '$name' within 0.5s." "$ERR"
check "--xact: command not run" "" "$OUT"
wait "$holder"
check "--xact: holder's status" 0 "$?"
check "--xact: nothing held after" 0 "$(held_on "$DIRECT" "$name")"

# A failing command: its status passes through, the transaction is rolled
# back and the lock goes with it.
capture "$A" run -q --xact -d "$PBX" "$name" -- sh -c 'exit 3'
check "--xact: failing command's status" 3 "$RC"
check "--xact: nothing held after a failure" 0 "$(held_on "$DIRECT" "$name")"

# The load: $CLIENTS clients x $ROUNDS rounds on one name (8 x 20).
load "$T/load" -d "$PBX" -n "$CLIENTS" -r "$ROUNDS" -s 0.1 -t 10 -k deploy-tx-xact -- --xact
check "load: overlapping commands" 0 "$overlaps"
at_most "load: max concurrency" 1 "$max_concurrency"
check "load: runs neither holding alone (0) nor timing out (1)" 0 "$((exit_69 + exit_70 + exit_other))"
check "load: runs whose command ran but that did not exit 0" 0 "$nonzero_ran"
check "load: commands run = runs that exited 0" "$exit_0" "$commands"
check "load: advisory locks left on any server session" 0 "$leftover_all"

finish
