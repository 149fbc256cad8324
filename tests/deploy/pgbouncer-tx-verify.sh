#!/usr/bin/env bash
# harness: pgbouncer
# advlock run verifies its lock behind a proxy (--verify-interval, default
# 1 s). Through PgBouncer in pool_mode = transaction the server session
# holding a session lock idles in the pool while the command runs; here an
# administrator terminates it (pg_terminate_backend on the pid pg_locks
# names), which takes the lock with it while advlock's connection to
# PgBouncer stays up. The run must stop its command, grandchild included,
# and exit 70 promptly; with --verify-interval 0 (the behaviour before the
# verify) it learns nothing until its release fails after the command.
# Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBX=${ADVLOCK_TEST_PGBOUNCER_TX:?run under tests/pg/with-pgbouncer.sh}
DIRECT=${ADVLOCK_TEST_DIRECT:?}

# The command: a child that starts a grandchild, records both pids, and
# runs for $1 seconds unless stopped.
command_for() {
    echo "sleep $1 & echo \$! >$T/\$0.grandchild; echo \$\$ >$T/\$0.child; wait"
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Terminates the server session holding NAME's lock; prints its pid.
terminate_holder() {
    local classid objid
    read -r _ _ classid objid < <("$A" key "$1")
    psql -X -At -d "$DIRECT" -c "SELECT pid, pg_terminate_backend(pid) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND classid = $classid AND objid = $objid" | cut -d'|' -f1
}

# scenario LABEL SECONDS [RUN OPTIONS...]: a run through the transaction
# pool whose command lasts SECONDS; once its lock shows on the server, its
# server session is terminated. Sets rc, elapsed_ms (from the terminate to
# advlock's exit), err, and whether child and grandchild outlived it.
scenario() {
    local label=$1 seconds=$2 pid start holder
    shift 2
    "$A" run -q -d "$PBX" "$@" "deploy-verify-$label" -- bash -c "$(command_for "$seconds")" \
        "$label" 2>"$T/$label.err" &
    pid=$!
    wait_held "$DIRECT" "deploy-verify-$label" || fail "$label: the lock never showed on the server"
    sleep 0.3 # the command has recorded its pids
    holder=$(terminate_holder "deploy-verify-$label")
    start=$(now_ms) # pg_terminate_backend has signalled the server session
    echo "$label: terminated server session $holder"
    wait "$pid"
    rc=$?
    elapsed_ms=$(($(now_ms) - start))
    err=$(cat "$T/$label.err")
    child_alive=0 grandchild_alive=0
    alive "$T/$label.child" && child_alive=1
    alive "$T/$label.grandchild" && grandchild_alive=1
    echo "$label: exit $rc ${elapsed_ms} ms after the terminate: $err"
}

# With the verify (the default, every second).
scenario verified 30
check "verified: exit status" "$EXIT_LOCK_ERROR" "$rc"
at_most "verified: ms from the terminate to exit 70" 5000 "$elapsed_ms"
# shellcheck disable=SC2053
[[ $err == 'advlock: checking lock '*' while the command ran: '*'; terminating the command' ]] \
    && pass || fail "verified: message [$err]"
check "verified: command stopped" 0 "$child_alive"
check "verified: grandchild stopped" 0 "$grandchild_alive"
check "verified: nothing held after" 0 "$(held_on "$DIRECT" deploy-verify-verified)"

# Without it (--verify-interval 0): the command runs on, unprotected, to
# its end; only the release after it finds the lock gone.
scenario unverified 8 --verify-interval 0
[ "$elapsed_ms" -ge 5000 ] && pass || fail "unverified: exited after only $elapsed_ms ms"
check "unverified: exit status, after the command" "$EXIT_LOCK_ERROR" "$rc"
# shellcheck disable=SC2053
[[ $err == 'advlock: releasing lock '* ]] && pass || fail "unverified: message [$err]"

finish
