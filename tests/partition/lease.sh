#!/usr/bin/env bash
# Leases under the real kernel: a holder in the partition harness's
# namespace (tests/partition/lib.sh) reaching PostgreSQL over TCP, cut off
# silently; a contender outside, on the Unix socket, polling the lock from
# one session every 50 ms and taking the server's clock at the grant.
#
# Per partition it checks zero overlap (the holder's last moment of work,
# and for advlock run the end of its whole process group, come before the
# contender's grant) and the release bound (the grant comes within the lease
# + 2 s of the partition's start, which is later than the last message the
# server received). Cases:
#   cli      advlock run --lease 8 --kill-after 1, a command stamping the time
#            every 50 ms; exit 70 naming the lease             (LEASE_CLI runs)
#   async    tests/partition/lease_holder.c: the nonblocking adapter with a
#            lease in a poll() loop; its LOST time is recorded (LEASE_ASYNC runs)
#   blip     a 1 s partition under --lease 12: the holder keeps the lock and
#            its command ends on its own (exit 0, no stop)
#   restart  pg_ctl restart under the holder: told, exit 70, no overlap
#   default  --lease omitted: the server session's keepalive timer reads the
#            default plan's tcp_keepalives_idle (25 s), not the kernel's 2 h
#   wait     --wait for longer than D: the grant is confirmed by a heartbeat
#            and the command runs
#   delay    advlock run --lock-delay cut off, then its session terminated:
#            the next --lock-delay run waits out its lease, no overlap
#            (LEASE_DELAY runs); once without --lock-delay: the overlap found
#   delay-restart   the same, the server crashed and restarted instead
#            (pg_ctl restart -m immediate): the mark survives the crash
#            (LEASE_DELAY_RESTART runs, default LEASE_DELAY)
#   delay-failover  the same on a primary with a synchronous standby
#            (tests/pg/with-standby.sh, a pair per partition): the primary
#            crashed, the standby promoted, the next run on it waits out
#            the mark (LEASE_DELAY_FAILOVER runs, default LEASE_DELAY)
#   settings a lease too short for --kill-after and a conflicting -c tcp_*
#            in PGOPTIONS are refused before connecting (exit 64); keepalive
#            parameters in the conninfo win over advlock run's defaults
# and prints the figures: partitions, overlaps, release after the partition
# p50/max, the holder's stop and the margin from its end to the release.
#
# Usage: ADVLOCK=build/advlock LEASE_HOLDER=build/partition/lease_holder \
#          tests/partition/lease.sh [CASE...]     (default: every case)
# LEASE_CLI (default 6), LEASE_ASYNC (default 2) and LEASE_DELAY (default 3) set the number of
# partitions; make partition-test soaks with LEASE_CLI=100 and CASE cli,
# make partition-delay-test with LEASE_DELAY=30 and the three delay cases.
# Needs root; exits 77 where namespaces cannot be made.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/partition/lib.sh
. "$here/lib.sh"
# shellcheck source=tests/partition/timeline.sh
. "$here/timeline.sh"
# shellcheck source=tests/cli/lib.sh
. "$here/../cli/lib.sh"
[ -z "${LEASE_HOLDER:-}" ] || LEASE_HOLDER=$(partition_absolute "$LEASE_HOLDER")
export LEASE_HOLDER
partition_enter_advlock "$0" "$@"

LEASE_S=8
KILL_S=1
CLI_RUNS=${LEASE_CLI:-6}
ASYNC_RUNS=${LEASE_ASYNC:-2}
DELAY_RUNS=${LEASE_DELAY:-3}
RESTART_RUNS=${LEASE_DELAY_RESTART:-$DELAY_RUNS}
FAILOVER_RUNS=${LEASE_DELAY_FAILOVER:-$DELAY_RUNS}
d=$ADVLOCK_PARTITION_DIR
# One line per partition: case cut work_end holder_end grant (LEASE_FIGURES
# keeps them past the run).
figures=${LEASE_FIGURES:-$d/figures}

# ---- helpers ------------------------------------------------------------------

# The keepalive timer of the first socket ss -o lists, in seconds: ss
# writes "28sec", "5.968ms" (5.968 s) or "119min".
keepalive_seconds() {
    sed -n 's/.*timer:(keepalive,\([^,]*\),.*/\1/p' | head -n 1 \
        | awk '{ n = $0 + 0; if ($0 ~ /min/) n *= 60; print n }'
}

# Frees whatever a case left: the holder's processes, its server session.
clean_up() {
    partition_off 2>/dev/null || true
    partition_end_processes
    psql -X -q -At -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE client_addr = '$ADVLOCK_PARTITION_CLIENT_ADDR'" >/dev/null
}

# Starts advlock run in the namespace on KEY_NAME with the cases' lease and
# --kill-after (and OPTION, if given), its command stamping the time into
# DIR/work every 50 ms until stopped; DIR/end gets the run's status and end
# time.
start_cli_holder() {
    local dir=$1 key_name=$2 option=${3:-}
    # shellcheck disable=SC2016
    in_ns bash -c '"$ADVLOCK" run -q ${4:+"$4"} -d "$1" --lease '"$LEASE_S"' --kill-after '"$KILL_S"' "$2" -- \
            bash -c "while :; do date +%s.%N >>\"$3/work\"; sleep 0.05; done"
        echo "$? $(date +%s.%N)" >"$3/end"' _ "$(partition_conninfo)" "$key_name" "$dir" "$option" \
        2>"$dir/holder.err" &
}

# Cuts the holder off at a random phase against its heartbeats (every
# 0.75 s with this lease), CUT then, and lets the contender poll for
# KEY_NAME into DIR/grant.
cut_off_and_contend() {
    local dir=$1 key_name=$2
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 1 + (r % 1000) / 1000 }')"
    partition_on
    CUT=$(now_s)
    contend "$(key_of "$key_name")" $((LEASE_S + 8)) "$dir/grant"
}

# ---- advlock run under a partition ------------------------------------------------

cli_partition() {
    local run=$1 dir=$d/cli.$1 key_name=lease-cli-$1
    mkdir -p "$dir"
    start_cli_holder "$dir" "$key_name"
    if ! wait_for_file "$dir/work" 10; then
        fail "cli $run: the holder did not start: $(cat "$dir/holder.err")"
        clean_up
        return
    fi
    cut_off_and_contend "$dir" "$key_name"
    read_end "$dir" 10
    check "cli $run: advlock run exits 70" "$EXIT_LOCK_ERROR" "$STATUS"
    check "cli $run: the message names the lease" 1 \
        "$(grep -c "lost: its lease ran out: no heartbeat answered within 3s (lease 8s)" "$dir/holder.err")"
    check "cli $run: the message never says the lock is free" 0 \
        "$(grep -c "no longer held" "$dir/holder.err" || true)"
    judge "cli" "$CUT" "$(tail -n 1 "$dir/work")" "$END" "$(cat "$dir/grant")"
    clean_up
}

# ---- the nonblocking adapter under a partition -------------------------------------

async_partition() {
    local run=$1 dir=$d/async.$1 key_name=lease-async-$1
    mkdir -p "$dir"
    in_ns "$LEASE_HOLDER" "$(partition_conninfo)" "$key_name" $((LEASE_S * 1000)) \
        $((KILL_S * 1000)) "$dir/work" >"$dir/out" 2>"$dir/err" &
    local holder=$!
    if ! wait_for_file "$dir/work" 10; then
        fail "async $run: the holder did not start: $(cat "$dir/err")"
        clean_up
        return
    fi
    cut_off_and_contend "$dir" "$key_name"
    local status=0
    wait "$holder" || status=$?
    check "async $run: the adapter turned LOST (exit 3)" 3 "$status"
    local lost expiry stop_in free_in words
    read -r _ lost expiry stop_in free_in words <"$dir/out" || true
    check "async $run: the report's lease_expiry is NO_ANSWER" 1 "${expiry:-}"
    # The stop deadline passed at most 250 ms before the loss was seen.
    check "async $run: LOST at the stop deadline (+250 ms at most)" 1 \
        "$(( ${stop_in:-1} <= 0 && ${stop_in:-1} > -250 ))"
    check "async $run: the server frees it within the lease of the loss" 1 \
        "$(( ${free_in:-0} > 0 && ${free_in:-0} <= LEASE_S * 1000 ))"
    check "async $run: the words name the lease" 1 \
        "$(echo "${words:-}" | grep -c "no heartbeat answered within 3s (lease 8s)")"
    local grant
    grant=$(cat "$dir/grant")
    [ -z "$grant" ] || check "async $run: LOST came before the grant" 1 \
        "$(before "${lost:-$grant}" "$grant" && echo 1 || echo 0)"
    judge "async" "$CUT" "$(tail -n 1 "$dir/work")" "" "$grant"
    clean_up
}

# ---- a blip the lease rides out --------------------------------------------------

blip() {
    local dir=$d/blip key_name=lease-blip
    mkdir -p "$dir"
    # --lease 12, --kill-after 1: D = 7 s, heartbeats every 1.75 s; blips up
    # to about 2.4 s pass (TCP's backoff doubles them), a 1 s one surely.
    # shellcheck disable=SC2016
    in_ns bash -c '"$ADVLOCK" run -q -d "$1" --lease 12 --kill-after 1 "$2" -- \
            bash -c "for i in \$(seq 100); do date +%s.%N >>\"$3/work\"; sleep 0.05; done"
        echo "$? $(date +%s.%N)" >"$3/end"' _ "$(partition_conninfo)" "$key_name" "$dir" \
        2>"$dir/holder.err" &
    wait_for_file "$dir/work" 10 || true
    sleep 1.5
    partition_on
    sleep 1
    partition_off
    read_end "$dir" 20
    check "blip: the command ran to its end, not stopped" "0 100" "$STATUS $(wc -l <"$dir/work")"
    check "blip: nothing said" "" "$(cat "$dir/holder.err")"
    clean_up
}

# ---- the server restarting under the holder ----------------------------------------

restart() {
    local dir=$d/restart key_name=lease-restart
    mkdir -p "$dir"
    start_cli_holder "$dir" "$key_name"
    wait_for_file "$dir/work" 10 || true
    sleep 1
    local cut
    cut=$(now_s)
    runuser -u postgres -- "$ADVLOCK_PG_BIN/pg_ctl" -D "$ADVLOCK_PG_DATA" -w -m fast restart \
        >"$dir/pg_ctl.log" 2>&1
    contend "$(key_of "$key_name")" $((LEASE_S + 8)) "$dir/grant"
    read_end "$dir" 10
    check "restart: advlock run exits 70" "$EXIT_LOCK_ERROR" "$STATUS"
    check "restart: the holder is told" 1 "$(grep -c "lock '$key_name'" "$dir/holder.err")"
    judge "restart" "$cut" "$(tail -n 1 "$dir/work")" "$END" "$(cat "$dir/grant")"
    clean_up
}

# ---- the default lease ----------------------------------------------------------

default_lease() {
    local dir=$d/default key_name=lease-default
    mkdir -p "$dir"
    in_ns "$ADVLOCK" run -q -d "$(partition_conninfo)" "$key_name" -- sleep 3 2>"$dir/holder.err" &
    local holder=$!
    sleep 1.5
    # The backend's socket: tcp_keepalives_idle = 25 s arms a keepalive timer
    # of at most 25 s (renewed by every heartbeat); the kernel's default
    # would read about 2 h.
    local timer
    timer=$(ss -tnoH state established "( sport = :$PGPORT and dst $ADVLOCK_PARTITION_CLIENT_ADDR )" \
        | keepalive_seconds)
    check "default: the server session's keepalive timer is the lease's (<= 25 s)" 1 \
        "$(awk -v t="${timer:-99999}" 'BEGIN { print (t > 0 && t <= 25) }')"
    local status=0
    wait "$holder" || status=$?
    check "default: the run ends as its command does" "0 " "$status $(cat "$dir/holder.err")"
    clean_up
}

# ---- what advlock run refuses, and the user's settings it keeps -----------------------

settings() {
    # Refused before connecting: the host given does not exist.
    capture "$ADVLOCK" run -d "host=/nonexistent" --lease 12 k -- true
    check "settings: a lease too short for --kill-after: usage error" "$EXIT_USAGE" "$RC"
    check "settings: ... naming the minimum" 1 "$(echo "$ERR" | grep -c "must be at least 16 s")"
    capture env PGOPTIONS="-c work_mem=5MB -c tcp_user_timeout=5000" \
        "$ADVLOCK" run -d "host=/nonexistent" k -- true
    check "settings: a conflicting -c tcp_user_timeout is reported" "${EXIT_USAGE} 1" \
        "$RC $(echo "$ERR" | grep -c "set tcp_user_timeout, which the lease sets itself")"
    capture env PGOPTIONS="-c work_mem=5MB -c tcp_user_timeout=5000" \
        "$ADVLOCK" run -d "host=/nonexistent" --lease 0 k -- true
    check "settings: ... and kept with --lease 0" "$EXIT_NO_SERVER" "$RC"
    # The user's keepalives_idle is the client socket's (not advlock's 30 s
    # default): its keepalive timer, seen from the namespace, is at most 7 s.
    local timer
    # shellcheck disable=SC2016
    timer=$(in_ns "$ADVLOCK" run -q --lease 0 -d "$(partition_conninfo) keepalives_idle=7" k -- \
        bash -c 'sleep 1; ss -tnoH state established "( dport = :$1 )"' _ "$PGPORT" \
        | keepalive_seconds)
    check "settings: keepalives_idle in the conninfo wins" 1 \
        "$(awk -v t="${timer:-99999}" 'BEGIN { print (t > 0 && t <= 7) }')"
    # On the Unix socket (PGHOST here) no lease is needed, and --lease says so.
    capture "$ADVLOCK" run --lease 8 --kill-after 1 lease-unix -- echo ran
    check "settings: --lease on a Unix socket: no lease, said" \
        "0 ran advlock: --lease: no lease needed on a Unix socket: the kernel ends both sides at once" \
        "$RC $OUT $ERR"
    capture "$ADVLOCK" run lease-unix -- echo ran
    check "settings: the default lease on a Unix socket says nothing" "0 ran " "$RC $OUT $ERR"
    # The user's options and the lease's both reach the server.
    capture in_ns env PGOPTIONS="-c work_mem=5MB" "$ADVLOCK" run -q -d "$(partition_conninfo)" k -- \
        psql -X -At -c "SELECT 1"
    check "settings: PGOPTIONS with the lease connects" "0 1" "$RC $OUT"
    clean_up
}

# ---- a server-side wait longer than the lease's deadline --------------------------

long_wait() {
    local key_name=lease-wait
    # Held from outside for 5 s; the run in the namespace waits in the
    # server's queue (D = 3 s), gets the lock, confirms it with a heartbeat
    # and runs its command.
    psql -X -At -c "SELECT pg_advisory_lock($(key_of "$key_name")), pg_sleep(5)" >/dev/null &
    local blocker=$!
    sleep 0.5
    capture in_ns "$ADVLOCK" run -q --wait --lease "$LEASE_S" --kill-after "$KILL_S" \
        -d "$(partition_conninfo)" "$key_name" -- echo ran
    wait "$blocker" || true
    check "wait: a grant after a wait longer than D runs the command" "0 ran " "$RC $OUT $ERR"
    clean_up
}

# ---- lock-delay: the server ends the cut-off holder's session ----------------------

# The holder (advlock run --lock-delay in the namespace) is cut off, and
# 0.5 s later the server ends its session by ENDING, which frees the lock at
# once while the holder, hearing nothing, still works until its lease's
# deadline:
#   terminate  pg_terminate_backend
#   restart    pg_ctl restart -m immediate: a crash; the mark, committed
#              with synchronous_commit on, comes back with the server
#   failover   the primary crashed (pg_ctl stop -m immediate) and its
#              synchronous standby promoted: the mark reached the standby
#              before the holder was told it held the lock
# The next run (on the Unix socket of the server now up, its command
# stamping the time) with --lock-delay (ON "on") finds the holder's mark and
# waits out its stop bound from its grant: no overlap. Without it, it starts
# at once, before the holder's work ended: the overlap the harness must
# find, so that the case can fail. DIR/waits gets "CASE ENDED START" per
# run: when the server was back (or the session ended) and when the next
# run's command started.
delay_partition() {
    local run=$1 on=$2 ending=${3:-terminate}
    local name=delay
    [ "$ending" = terminate ] || name=delay-$ending
    local dir=$d/$name.$run.$on key_name=lease-$name-$run-$on
    mkdir -p "$dir"
    start_cli_holder "$dir" "$key_name" --lock-delay
    if ! wait_for_file "$dir/work" 10; then
        fail "$name $run: the holder did not start: $(cat "$dir/holder.err")"
        clean_up
        return
    fi
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 1 + (r % 1000) / 1000 }')"
    partition_on
    CUT=$(now_s)
    sleep 0.5
    case $ending in
        terminate)
            psql -X -q -At -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE client_addr = '$ADVLOCK_PARTITION_CLIENT_ADDR'" >/dev/null
            ;;
        restart)
            (cd / && runuser -u postgres -- "$ADVLOCK_PG_BIN/pg_ctl" -D "$ADVLOCK_PG_DATA" -w \
                -m immediate restart) >"$dir/pg_ctl.log" 2>&1
            ;;
        failover)
            "$ADVLOCK_STANDBY_CTL" --ctl stop-primary immediate
            "$ADVLOCK_STANDBY_CTL" --ctl promote
            # From here on the promoted standby is the server, clean_up's too.
            export PGHOST=$ADVLOCK_STANDBY_HOST PGPORT=$ADVLOCK_STANDBY_PORT
            ;;
    esac
    local ended
    ended=$(now_s)
    local next=(-q --lease "$LEASE_S" --kill-after "$KILL_S" --timeout $((LEASE_S + 8)))
    [ "$on" = on ] && next+=(--lock-delay)
    "$ADVLOCK" run "${next[@]}" "$key_name" -- date +%s.%N >"$dir/grant" 2>"$dir/next.err" || true
    read_end "$dir" 10
    check "$name $run $on: the cut-off holder exits 70" "$EXIT_LOCK_ERROR" "$STATUS"
    if [ "$on" = on ]; then
        check "$name $run: the next run said why it waited" 1 \
            "$(grep -c "waiting out the previous holder's lease" "$dir/next.err")"
        judge "$name" "$CUT" "$(tail -n 1 "$dir/work")" "$END" "$(cat "$dir/grant")"
        [ ! -s "$dir/grant" ] || echo "$name $ended $(cat "$dir/grant")" >>"$d/waits"
    else
        check "$name $run off: the overlap is found (the next run started first)" 1 \
            "$(before "$(cat "$dir/grant")" "$(tail -n 1 "$dir/work")" && echo 1 || echo 0)"
    fi
    clean_up
}

# A failover spends its pair of servers, so each failover partition gets a
# primary and a synchronous standby of its own (tests/pg/with-standby.sh,
# the primary listening on the harness's veth address like the harness's
# own server), running this script again for the one partition. The
# harness's server is left idle meanwhile. A run whose servers did not come
# up (the new primary's random port taken on that address by the harness's
# server, say) is tried once more.
failover_partition() {
    local run=$1 on=$2 status
    for attempt in 1 2; do
        rm -f "$d/failover.started"
        status=0
        ADVLOCK_PG_LISTEN=$ADVLOCK_PARTITION_SERVER_ADDR/30 "$here/../pg/with-standby.sh" \
            "$here/lease.sh" failover-one "$run" "$on" || status=$?
        [ -f "$d/failover.started" ] || [ "$attempt" = 2 ] || continue
        break
    done
    check "delay-failover $run $on: its checks passed (above, if not)" 0 "$status"
}

# Inside with-standby.sh: make the standby synchronous, then one partition.
failover_one() {
    touch "$d/failover.started"
    "$ADVLOCK" setup >/dev/null
    psql -X -q -c "ALTER SYSTEM SET synchronous_standby_names = '*'" \
        -c "SELECT pg_reload_conf()" >/dev/null
    local sync_state=
    for _ in $(seq 200); do
        sync_state=$(psql -X -At -c "SELECT sync_state FROM pg_stat_replication")
        [ "$sync_state" = sync ] && break
        sleep 0.05
    done
    check "delay-failover $1 $2: the standby is synchronous" sync "$sync_state"
    delay_partition "$1" "$2" failover
}

# The waits of CASE's runs: the next run's command start after the server
# was back (after the session ended, for terminate), p50 and max.
report_waits() {
    [ -s "$d/waits" ] || return 0
    awk -v c="$1" '
        $1 == c { n++; w[n] = $3 - $2 }
        END {
            if (n == 0) exit
            for (i = 2; i <= n; i++) for (j = i; j > 1 && w[j-1] > w[j]; j--) { t = w[j]; w[j] = w[j-1]; w[j-1] = t }
            printf "%s: the next command started p50 %.2f s, max %.2f s after the server was back\n",
                c, w[int((n + 1) / 2)], w[n]
        }' "$d/waits"
}

# ---- the run ---------------------------------------------------------------------

if [ "${1:-}" = failover-one ]; then
    failover_one "$2" "$3"
    finish
    exit
fi
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(settings cli async blip restart default wait delay delay-restart delay-failover)
for c in "${cases[@]}"; do
    case "$c" in
        cli) for run in $(seq "$CLI_RUNS"); do cli_partition "$run"; done ;;
        async)
            if [ -n "${LEASE_HOLDER:-}" ]; then
                for run in $(seq "$ASYNC_RUNS"); do async_partition "$run"; done
            else
                fail "async: set LEASE_HOLDER to build/partition/lease_holder"
            fi
            ;;
        blip) blip ;;
        restart) restart ;;
        default) default_lease ;;
        settings) settings ;;
        wait) long_wait ;;
        delay)
            "$ADVLOCK" setup >/dev/null
            for run in $(seq "$DELAY_RUNS"); do delay_partition "$run" on; done
            delay_partition 1 off
            ;;
        delay-restart)
            "$ADVLOCK" setup >/dev/null
            for run in $(seq "$RESTART_RUNS"); do delay_partition "$run" on restart; done
            delay_partition 1 off restart
            ;;
        delay-failover)
            for run in $(seq "$FAILOVER_RUNS"); do failover_partition "$run" on; done
            failover_partition 1 off
            ;;
        *) fail "unknown case: $c" ;;
    esac
done
report_figures
for c in delay delay-restart delay-failover; do
    report_figures "$c"
    report_waits "$c"
done
finish
