#!/usr/bin/env bash
# harness: standby
# Failover: a holder connected with a multi-host conninfo
# (target_session_attrs=read-write) is told at once when its primary stops:
# advlock exits 70 within 2 s and stops its command. After the standby is
# promoted, a new run acquires there.
# Runs under tests/pg/with-standby.sh.
set -u
. "$(dirname "$0")/lib.sh"
PRIMARY=${ADVLOCK_TEST_PRIMARY:?run under tests/pg/with-standby.sh}
STANDBY=${ADVLOCK_TEST_STANDBY:?}
MULTI=${ADVLOCK_TEST_MULTIHOST:?}
name=deploy-failover

"$A" run -q -d "$MULTI" "$name" -- sh -c 'echo started; sleep 30; echo survived' \
    >"$T/holder.out" 2> >(while IFS= read -r l; do echo "$(now_ms) $l"; done >"$T/holder.err") &
holder=$!
wait_held "$PRIMARY" "$name" || fail "failover: no holder on the primary"
sleep 0.3
stop_at=$(now_ms)
stop_primary fast
stopped_at=$(now_ms)
# Wait for the holder, 10 s at most.
for _ in $(seq 200); do kill -0 "$holder" 2>/dev/null || break; sleep 0.05; done
exited_at=$(now_ms)
if kill -0 "$holder" 2>/dev/null; then
    fail "failover: holder still running 10 s after the primary stopped"
    kill -TERM "$holder"
fi
wait "$holder"
rc=$?
elapsed=$((exited_at - stop_at))
sleep 0.1
said_at=$(head -n 1 "$T/holder.err" | cut -d' ' -f1)
echo "failover: pg_ctl stop -m fast took $((stopped_at - stop_at)) ms; holder's message after $(( ${said_at:-$stop_at} - stop_at )) ms, exit $rc after $elapsed ms; stderr [$(cut -d' ' -f2- "$T/holder.err")]"
check "failover: holder's status" "$EXIT_LOCK_ERROR" "$rc"
[ "$elapsed" -le 2000 ] && pass || fail "failover: holder exited $elapsed ms after the primary stopped (> 2000)"
check "failover: command stopped" "started" "$(cat "$T/holder.out")"

# Before promotion there is no read-write server: a run cannot connect (69).
capture "$A" run -q -d "$MULTI" --timeout 1 "$name" -- echo ran
echo "failover, before promotion: exit $RC (no read-write server to connect to)"
check "before promotion: no read-write server" "$EXIT_NO_SERVER" "$RC"

promote_standby
capture "$A" run -q -d "$MULTI" --timeout 10 "$name" -- \
    psql -X -At -d "$STANDBY" -c "SELECT pg_is_in_recovery(), count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
check "after promotion: status" 0 "$RC"
check "after promotion: held on the promoted standby" "f|1" "$OUT"

finish
