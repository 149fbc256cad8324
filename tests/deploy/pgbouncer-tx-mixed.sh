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
# ("" or --xact). $4: 1 when the session-scoped one may instead fail
# loudly (exit 70 with the message: its statements hopping between server
# sessions of a pool of several, as documented): the contender at its
# session row or try, the holder at a verify whose tries all landed on
# another server session (its command then stopped, its lock given back).
# A command records its start, and its end also when it is stopped.
rec() {
    echo "bash -c 'trap \"echo \\\$EPOCHREALTIME >$T/\$0.e; exit 143\" TERM;" \
        "echo \$EPOCHREALTIME >$T/\$0.s; sleep \$1; echo \$EPOCHREALTIME >$T/\$0.e' $1 $2"
}
# One run's status ($4) and stderr ($5), named $1: 0 and nothing, or, for
# a session-scoped run ($2, its scope option: "" or --xact) that may hop
# ($3), 70 and the message.
loud_or_clean() {
    local label=$1 scope=$2 may_hop=$3 rc=$4 err=$5
    if [ "$may_hop" = 1 ] && [ -z "$scope" ] && [ "$rc" = 70 ]; then
        # shellcheck disable=SC2053
        [[ $err == $SESSION_MOVED_MESSAGE ]] && pass || fail "$label: exit 70 without the message: [$err]"
    else
        check "$label: status" 0 "$rc"
        check "$label: stderr" "" "$err"
    fi
}
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
    loud_or_clean "$label: holder's" "$first_scope" "$may_hop" "$first_rc" "$(cat "$T/first.err")"
    loud_or_clean "$label: contender's" "$second_scope" "$may_hop" "$RC" "$ERR"
    if [ "$RC" = 70 ]; then
        check "$label: the refused contender's command did not run" "" "$(ls "$T"/second.* 2>/dev/null)"
    elif [ "$RC" = 0 ] && [ -s "$T/first.e" ] && [ -s "$T/second.s" ]; then
        check "$label: contender's command after the holder's" 1 \
            "$(awk -v e="$(cat "$T/first.e")" -v s="$(cat "$T/second.s")" 'BEGIN { print (s > e) }')"
    elif [ "$RC" = 0 ]; then
        fail "$label: a command did not run"
    fi
    check "$label: advisory locks left" 0 "$(advisory_locks)"
}

for size in 1 3; do
    pool "$size"
    pair "pool $size, session holder, --xact contender" "" --xact "$((size > 1))"
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
