#!/usr/bin/env bash
# harness: standby
# On a hot standby pg_try_advisory_lock succeeds, local to the standby, and
# excludes nobody on the primary. advlock refuses a server in recovery by
# default, with a message naming it a standby; --allow-standby allows it.
# Runs under tests/pg/with-standby.sh.
set -u
. "$(dirname "$0")/lib.sh"
PRIMARY=${ADVLOCK_TEST_PRIMARY:?run under tests/pg/with-standby.sh}
STANDBY=${ADVLOCK_TEST_STANDBY:?}
MULTI=${ADVLOCK_TEST_MULTIHOST:?}
name=deploy-standby

# Refused by default: the command never runs, nothing is held on the standby;
# exit 69 (EX_UNAVAILABLE: this server cannot serve the lock).
capture "$A" run -q -d "$STANDBY" --timeout 1 "$name" -- echo ran
echo "standby, default: exit $RC, stderr [$ERR]"
check "standby: exit status" "$EXIT_NO_SERVER" "$RC"
check "standby: command not run" "" "$OUT"
# shellcheck disable=SC2053
[[ $ERR == $STANDBY_MESSAGE ]] && pass || fail "standby: message does not name a standby: [$ERR]"
check "standby: nothing held on the standby" 0 "$(held_on "$STANDBY" "$name")"

# The hazard: a holder on the primary, a run on the standby at the same
# time. Unchecked, both would acquire; the standby's run must be refused.
"$A" run -q -d "$PRIMARY" "$name" -- sleep 2 &
holder=$!
wait_held "$PRIMARY" "$name" || fail "standby: no holder on the primary"
capture "$A" run -q -d "$STANDBY" --timeout 0 "$name" -- echo ran
echo "standby while the primary holds: exit $RC, stdout [$OUT]"
check "standby while the primary holds: command not run" "" "$OUT"
check "standby while the primary holds: exit status" "$EXIT_NO_SERVER" "$RC"

# status on the standby while the primary holds the name: never "free". It
# names the server a standby and exits 69, as run does; --allow-standby
# shows the standby's own locks, and says nothing of the primary's.
capture "$A" status -d "$STANDBY" "$name"
echo "status on the standby while the primary holds: exit $RC, stdout [$OUT], stderr [$ERR]"
check "status on the standby: exit status" "$EXIT_NO_SERVER" "$RC"
check "status on the standby: nothing said about the name" "" "$OUT"
# shellcheck disable=SC2053
[[ $ERR == $STANDBY_MESSAGE && $ERR == *"local to it"* ]] && pass ||
    fail "status on the standby: message does not name a standby with local locks: [$ERR]"
capture "$A" status -d "$STANDBY" --allow-standby "$name"
check "status --allow-standby: exit status (the standby's own: free)" 0 "$RC"
[[ $OUT == "$name"$'\t'free$'\t'key* ]] && pass || fail "status --allow-standby: [$OUT]"
capture "$A" status -d "$PRIMARY" "$name"
check "status on the primary: held" 1 "$RC"
wait "$holder"

# --xact is refused the same way (the check runs inside its transaction).
capture "$A" run -q --xact -d "$STANDBY" --timeout 1 "$name" -- echo ran
check "standby, --xact: exit status" "$EXIT_NO_SERVER" "$RC"
check "standby, --xact: command not run" "" "$OUT"
# shellcheck disable=SC2053
[[ $ERR == $STANDBY_MESSAGE ]] && pass || fail "standby, --xact: message does not name a standby: [$ERR]"

# Allowed with --allow-standby: the lock is the standby's own.
capture "$A" run -q -d "$STANDBY" --allow-standby --timeout 1 "$name" -- \
    psql -X -At -d "$STANDBY" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
check "--allow-standby: status" 0 "$RC"
check "--allow-standby: lock held on the standby while the command runs" 1 "$OUT"
check "--allow-standby: nothing held after" 0 "$(held_on "$STANDBY" "$name")"

# A multi-host conninfo with target_session_attrs=read-write reaches the primary.
capture "$A" run -q -d "$MULTI" --timeout 1 "$name" -- \
    psql -X -At -d "$PRIMARY" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
check "multi-host: status" 0 "$RC"
check "multi-host: held on the primary" 1 "$OUT"

finish
