#!/usr/bin/env bash
# harness: standby
# Fencing tokens across failover: with the standby made synchronous
# (synchronous_standby_names = '*' on the primary), tokens taken under
# concurrent load on the primary are all on the standby when the holder is
# told; the standby refuses to issue one (read-only) before it is promoted;
# after the primary crashes (pg_ctl -m immediate) and the standby is
# promoted, the next token is above every token issued before.
# Runs under tests/pg/with-standby.sh.
set -u
. "$(dirname "$0")/lib.sh"
PRIMARY=${ADVLOCK_TEST_PRIMARY:?run under tests/pg/with-standby.sh}
STANDBY=${ADVLOCK_TEST_STANDBY:?}
MULTI=${ADVLOCK_TEST_MULTIHOST:?}
name=deploy-fence

capture "$A" setup -d "$PRIMARY"
check "setup on the primary" 0 "$RC"
psql -X -q -d "$PRIMARY" -c "ALTER SYSTEM SET synchronous_standby_names = '*'" \
    -c "SELECT pg_reload_conf()" >/dev/null
sync_state=
for _ in $(seq 200); do
    sync_state=$(psql -X -At -d "$PRIMARY" -c "SELECT sync_state FROM pg_stat_replication")
    [ "$sync_state" = sync ] && break
    sleep 0.05
done
check "the standby is synchronous" sync "$sync_state"

# Concurrent holders through the multi-host conninfo, direct to the primary.
"$(dirname "$0")/load.sh" -a "$A" -d "$MULTI" -c "$PRIMARY" -n 8 -r 4 -s 0.01 -t 30 -k "$name" \
    -o "$T/load" -- --fence --jitter >/dev/null
# shellcheck disable=SC1091
. "$T/load/summary"
check "load: every run held the lock" "32 32 0" "$commands $exit_0 $overlaps"
check "load: tokens strictly increasing" "32 0" "$fence_tokens $fence_disorder"
last=$(psql -X -At -d "$PRIMARY" -c "SELECT max(token) FROM advlock.fence")
check "the last token" 32 "$last"

# A standby never issues a token: the upsert is refused (read-only) before
# anything is locked.
capture "$A" run -q --allow-standby --fence -d "$STANDBY" "$name" -- echo ran
check "no token on a standby: status" "$EXIT_LOCK_ERROR" "$RC"
case $ERR in *25006*) pass ;; *) fail "no token on a standby: 25006 expected: $ERR" ;; esac

stop_primary immediate
promote_standby
capture "$A" run -q -d "$MULTI" --fence --timeout 10 "$name" -- sh -c 'echo "$ADVLOCK_FENCE"'
echo "fence failover: last token on the primary $last, first on the promoted standby $OUT"
check "after failover: the next token" "0 $((last + 1))" "$RC $OUT"

finish
