#!/usr/bin/env bash
# Leases behind PgBouncer under the real kernel: advlock run in the partition
# harness's namespace (tests/partition/lib.sh) reaches PgBouncer in session
# mode over TCP on the veth pair, and PgBouncer reaches PostgreSQL on its
# Unix socket. The cut drops every frame between the holder and PgBouncer:
# that hop is the connection the holder has, and the one PgBouncer's own
# tcp settings watch. A contender through the same PgBouncer (its Unix
# socket) polls the lock every 50 ms and takes the server's clock at the
# grant.
#
# The lease is --lease 10 --kill-after 3 (U = 7000 ms, D = 3 s; PROXY_LEASE
# and PROXY_KILL_AFTER, in whole seconds, choose others), and PgBouncer runs
# with the values docs/operators.md, "Leases behind PgBouncer", gives for it:
# tcp_keepidle 5, tcp_keepintvl 1, tcp_keepcnt 2, tcp_user_timeout 7000,
# client_idle_timeout 0. Cases:
#   stop     cut off: the command is stopped, advlock run exits 70 naming
#            the lease with its connection closed, within U of the cut, and
#            the contender gets the lock only after the holder's group was
#            reaped: no overlap (PROXY_RUNS runs, default 1)
#   signal   the same, but the command ignores SIGTERM, and a SIGTERM sent
#            to advlock run once the lease has run out reaches the command's
#            group, and advlock run still ends within U (KILL after
#            --kill-after): no phase of the stop ignores a signal
#   exited   --lease 0: the command ends on its own after the cut, while a
#            verify is out; a SIGTERM then gives the verify 0.5 s, as the
#            release would get, and advlock run exits 70, its connection
#            given up, instead of waiting for TCP to give up (minutes)
#   warning  advlock run's start-up warning behind a proxy names these values
# and prints the figures (tests/partition/timeline.sh).
#
# Usage: ADVLOCK=build/advlock tests/partition/pgbouncer.sh [CASE...]
# (default: warning signal exited); make partition-proxy-test runs that in make test,
# make partition-proxy-measure with PROXY_RUNS=10 and CASE stop.
# Needs root; exits 77 where namespaces cannot be made.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/partition/lib.sh
. "$here/lib.sh"
# shellcheck source=tests/partition/timeline.sh
. "$here/timeline.sh"
# shellcheck source=tests/cli/lib.sh
. "$here/../cli/lib.sh"
partition_enter_advlock "$0" "$@"

LEASE_S=${PROXY_LEASE:-10}
KILL_S=${PROXY_KILL_AFTER:-3}
# The plan's U and D, as docs/design.md "Leases" derives them.
U_S=$((LEASE_S - 3))
D_S=$((U_S - KILL_S - 1))
# PROXY_PGBOUNCER_VALUES replaces them, to measure others (the warning
# case then fails: it names the right ones).
PGBOUNCER_VALUES=${PROXY_PGBOUNCER_VALUES:-tcp_keepalive=1 tcp_keepidle=$((U_S - 2)) tcp_keepintvl=1 tcp_keepcnt=2 tcp_user_timeout=$((U_S * 1000)) client_idle_timeout=0}

# In the harness, once: the PgBouncers in front of its server, listening on
# the veth's host end too, with the values above.
if [ -z "${ADVLOCK_TEST_PGBOUNCER_DIR:-}" ]; then
    export ADVLOCK_TEST_PGBOUNCER_LISTEN=$ADVLOCK_PARTITION_SERVER_ADDR
    ADVLOCK_TEST_PGBOUNCER_SETTINGS=$(echo "$PGBOUNCER_VALUES" | tr ' ' '\n' | sed 's/=/ = /')
    export ADVLOCK_TEST_PGBOUNCER_SETTINGS
    exec "$here/../pg/with-pgbouncer.sh" --inside-postgres "$0" "$@"
fi

RUNS=${PROXY_RUNS:-1}
d=$ADVLOCK_PARTITION_DIR
figures=${PROXY_FIGURES:-$d/figures}
holder_conninfo=$ADVLOCK_TEST_PGBOUNCER_SESSION_TCP
contender_conninfo=$ADVLOCK_TEST_PGBOUNCER_SESSION
proxy_port=${holder_conninfo##*port=}
proxy_port=${proxy_port%% *}

# Frees whatever a case left: the holder's processes; its PgBouncer client
# goes by PgBouncer's keepalives, its server session with it.
clean_up() {
    partition_off 2>/dev/null || true
    partition_end_processes
}

# Starts advlock run in the namespace through PgBouncer on KEY_NAME, its
# command stamping the time into DIR/work every 50 ms until stopped (and,
# with "ignore", noting each SIGTERM in DIR/terms instead of ending); DIR/pid
# gets advlock's pid, DIR/end its status and end time.
start_holder() {
    local dir=$1 key_name=$2 ignore=${3:-}
    local work='while :; do date +%s.%N >>"$1/work"; sleep 0.05; done'
    [ -z "$ignore" ] || work="trap 'echo TERM >>\"\$1/terms\"' TERM; $work"
    # shellcheck disable=SC2016
    in_ns bash -c '"$ADVLOCK" run -q -d "$1" --lease '"$LEASE_S"' --kill-after '"$KILL_S"' "$2" -- \
            bash -c "$4" _ "$3" &
        echo $! >"$3/pid"
        wait $! && status=0 || status=$?
        echo "$status $(date +%s.%N)" >"$3/end"' _ "$holder_conninfo" "$key_name" "$dir" "$work" \
        2>"$dir/holder.err" &
}

# Cuts the holder off at a random phase against its heartbeats (every D/4)
# and verifies (every 1 s); CUT then.
cut_off() {
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 1 + (r % 1000) / 1000 }')"
    partition_on
    CUT=$(now_s)
}

# Whether the holder's end came within U of the cut (plus 1 s: the bound
# is from the last answered heartbeat's send, which is before the cut).
within_u() {
    [ -n "$END" ] && before "$END" "$(awk -v c="$CUT" -v u="$U_S" 'BEGIN { printf "%.3f", c + u + 1 }')" \
        && echo 1 || echo "0 (ended ${END:+$(minus "$END" "$CUT") s after the cut}${END:-never})"
}

# The holder's connections to PgBouncer still open in the namespace.
open_connections() {
    in_ns ss -tnH state established "( dport = :$proxy_port )" | wc -l
}

# Checks what every cut-off run must show: exit 70 within U, naming the
# lease, the connection closed.
judge_holder() {
    local name=$1 dir=$2
    read_end "$dir" $((LEASE_S + 6))
    check "$name: advlock run exits 70" "$EXIT_LOCK_ERROR" "$STATUS"
    check "$name: ... within U of the cut, its group reaped" 1 "$(within_u)"
    check "$name: ... and its connection closed" 0 "$(open_connections)"
    check "$name: the message names the lease" 1 \
        "$(grep -c "lost: its lease ran out: no heartbeat answered within ${D_S}s (lease ${LEASE_S}s)" "$dir/holder.err")"
}

# ---- cut off: stopped, ended, and no overlap -------------------------------------

# cut_off_run NAME KEY_NAME [ignore]: a holder cut off, the contender
# through the same PgBouncer; with "ignore" its command ignores SIGTERM and
# advlock run gets one once the lease has run out.
cut_off_run() {
    local name=$1 key_name=$2 ignore=${3:-} dir=$d/$2
    mkdir -p "$dir"
    start_holder "$dir" "$key_name" "$ignore"
    if ! wait_for_file "$dir/work" 10; then
        fail "$name: the holder did not start: $(cat "$dir/holder.err")"
        clean_up
        return
    fi
    cut_off
    contend "$(key_of "$key_name")" $((LEASE_S + 8)) "$dir/grant" "$contender_conninfo" &
    local contender=$!
    if [ -n "$ignore" ]; then
        # The lease runs out D after the last answered heartbeat's send;
        # the command, ignoring SIGTERM, is KILLed --kill-after later.
        for _ in $(seq $((D_S * 20 + 40))); do
            grep -q "lease ran out" "$dir/holder.err" && break
            sleep 0.05
        done
        kill -TERM "$(cat "$dir/pid")" 2>/dev/null || true
    fi
    judge_holder "$name" "$dir"
    if [ -n "$ignore" ]; then
        check "$name: the command got the lease's SIGTERM and the one sent to advlock" 2 \
            "$(wc -l <"$dir/terms" 2>/dev/null || echo 0)"
    fi
    wait "$contender" || true
    judge "${name%% *}" "$CUT" "$(tail -n 1 "$dir/work")" "$END" "$(cat "$dir/grant")"
    clean_up
}

# ---- a signal while a verify is out after the command's end ----------------------

exited() {
    local dir=$d/exited key_name=proxy-exited
    mkdir -p "$dir"
    # shellcheck disable=SC2016
    in_ns bash -c '"$ADVLOCK" run -q -d "$1" --lease 0 "$2" -- \
            bash -c "while [ ! -e \"\$1/cut\" ]; do sleep 0.05; done; sleep 1.5" _ "$3" &
        echo $! >"$3/pid"
        wait $! && status=0 || status=$?
        echo "$status $(date +%s.%N)" >"$3/end"' _ "$holder_conninfo" "$key_name" "$dir" \
        2>"$dir/holder.err" &
    sleep 1.5
    partition_on
    touch "$dir/cut"
    # The command ends 1.5 s after the cut; a verify (every 1 s) is out by then.
    sleep 2.5
    local signalled
    signalled=$(now_s)
    kill -TERM "$(cat "$dir/pid")" 2>/dev/null || true
    read_end "$dir" 5
    check "exited: advlock run exits 70" "$EXIT_LOCK_ERROR" "$STATUS"
    check "exited: ... soon after the signal (0.5 s for the verify)" 1 \
        "$([ -n "$END" ] && before "$END" "$(awk -v s="$signalled" 'BEGIN { printf "%.3f", s + 2 }')" \
            && echo 1 || echo "0 (${END:+$(minus "$END" "$signalled") s after it}${END:-never})")"
    check "exited: ... its connection closed" 0 "$(open_connections)"
    check "exited: the verify given up is said" 1 \
        "$(grep -c "no answer from the server within 0.5s to the check of lock '$key_name'; connection closed" "$dir/holder.err")"
    clean_up
}

# ---- what advlock run says at start behind a proxy -------------------------------------

warning() {
    capture in_ns "$ADVLOCK" run -q -d "$holder_conninfo" --lease "$LEASE_S" \
        --kill-after "$KILL_S" proxy-warning -- true
    check "warning: the run succeeds" 0 "$RC"
    check "warning: it names PgBouncer's values for the lease" 1 \
        "$(echo "$ERR" | grep -c -- "$PGBOUNCER_VALUES")"
    clean_up
}

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(warning signal exited)
for c in "${cases[@]}"; do
    case "$c" in
        stop) for run in $(seq "$RUNS"); do cut_off_run "stop $run" "proxy-stop-$run"; done ;;
        signal) cut_off_run signal proxy-signal ignore ;;
        exited) exited ;;
        warning) warning ;;
        *) fail "unknown case: $c" ;;
    esac
done
report_figures
finish
