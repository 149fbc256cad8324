#!/usr/bin/env bash
# harness: pgbouncer
# Session-scoped and transaction-scoped (--xact) runs on one name through
# PgBouncer in pool_mode = transaction, with pools of 1 and 3 server
# sessions. A server session that holds the key at session level for one
# client would grant it to a transaction landing there (PostgreSQL's locks
# are re-entrant within a session): the guard makes that transaction's try
# busy instead. Never two commands at once, whichever came first, and
# nothing left in pg_locks afterwards.
# Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBX=${ADVLOCK_TEST_PGBOUNCER_TX:?run under tests/pg/with-pgbouncer.sh}
ADMIN=${ADVLOCK_TEST_PGBOUNCER_TX_ADMIN:?}
DIRECT=${ADVLOCK_TEST_DIRECT:?}

# The pool's size, and fresh server sessions (claims of earlier runs
# outlive their clients on a transaction pool).
pool() {
    psql -X -q -d "$ADMIN" -c "SET default_pool_size = $1" -c "RECONNECT postgres" >/dev/null
}

advisory_locks() {
    psql -X -At -d "$DIRECT" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
}

# One run holding for 3 s, a second 0.5 s later with --timeout 10: both
# run their commands, one after the other. $2 $3: each one's scope option
# ("" or --xact). $4: 1 when the contender may instead fail loudly (exit 70
# with the message: a session-scoped contender's statements hopping
# between server sessions of a pool of several, as documented).
rec() { echo "bash -c 'echo \$EPOCHREALTIME >$T/\$0.s; sleep \$1; echo \$EPOCHREALTIME >$T/\$0.e' $1 $2"; }
pair() {
    local label=$1 first_scope=$2 second_scope=$3 may_hop=$4 name="deploy-tx-mixed-$RANDOM"
    rm -f "$T"/first.* "$T"/second.*
    # shellcheck disable=SC2086
    "$A" run -q --timeout 10 -d "$PBX" $first_scope "$name" -- bash -c "$(rec first 3)" \
        2>"$T/first.err" &
    local first=$!
    sleep 0.5
    # shellcheck disable=SC2086
    capture "$A" run -q --timeout 10 -d "$PBX" $second_scope "$name" -- bash -c "$(rec second 0)"
    wait "$first"
    local first_rc=$?
    check "$label: holder's status" 0 "$first_rc"
    check "$label: holder's stderr" "" "$(cat "$T/first.err")"
    if [ "$may_hop" = 1 ] && [ "$RC" = 70 ]; then
        # shellcheck disable=SC2053
        [[ $ERR == $SESSION_MOVED_MESSAGE ]] && pass || fail "$label: exit 70 without the message: [$ERR]"
        check "$label: the refused contender's command did not run" "" "$(ls "$T"/second.* 2>/dev/null)"
    else
        check "$label: contender's status" 0 "$RC"
        check "$label: contender's stderr" "" "$ERR"
    fi
    if [ "$RC" = 0 ] && [ -s "$T/first.e" ] && [ -s "$T/second.s" ]; then
        check "$label: contender's command after the holder's" 1 \
            "$(awk -v e="$(cat "$T/first.e")" -v s="$(cat "$T/second.s")" 'BEGIN { print (s > e) }')"
    elif [ "$RC" = 0 ]; then
        fail "$label: a command did not run"
    fi
    check "$label: advisory locks left" 0 "$(advisory_locks)"
}

for size in 1 3; do
    pool "$size"
    pair "pool $size, session holder, --xact contender" "" --xact 0
    pool "$size"
    pair "pool $size, --xact holder, session contender" --xact "" "$((size > 1))"
    # The load: session and --xact clients alternating, on one name. A
    # session-scoped run may still fail loudly (exit 70: its server session
    # claimed by another client); none may overlap or leave a lock behind.
    pool "$size"
    load "$T/load-$size" -d "$PBX" -n "$CLIENTS" -r "$ROUNDS" -s 0.1 -t 10 -k "deploy-tx-mixed-$size" -m
    check "pool $size load: overlapping commands" 0 "$overlaps"
    at_most "pool $size load: max concurrency" 1 "$max_concurrency"
    check "pool $size load: runs exiting other than 0, 1, 70" 0 "$((exit_69 + exit_other))"
    check "pool $size load: runs whose command ran but that did not exit 0" 0 "$nonzero_ran"
    [ "$exit_0" -ge 1 ] && pass || fail "pool $size load: no run held the lock"
    check "pool $size load: advisory locks left on any server session" 0 "$leftover_all"
done

finish
