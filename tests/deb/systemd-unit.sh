# shellcheck shell=bash disable=SC2154 # work: packages.sh's
# The systemd example of docs/operators.md (a fleet-wide cron job), with the
# packages installed: both unit files pass systemd-analyze verify, and the
# service's ExecStart line, run as printed but for the command, against the
# harness's server over TCP (ADVLOCK_PG_LISTEN; the lease applies there):
# holds the lock while the command runs; a second run finds it busy and
# exits with the unit's SuccessExitStatus; a SIGTERM to advlock alone, what
# KillMode=mixed sends, with a command that ignores it, ends with the
# command killed after --kill-after, the lock released, and advlock gone
# within TimeoutStopSec. Sourced by packages.sh (its work, check, capture).

units=$work/units
mkdir -p "$units"
for unit in nightly-report.service nightly-report.timer; do
    awk -v marker="<!-- tested: $unit -->" '$0 == marker {armed = 1; next}
        armed && /^```/ && !inside {inside = 1; next} inside && /^```/ {exit} inside {print}' \
        docs/operators.md >"$units/$unit"
    [ -s "$units/$unit" ] || fail "docs/operators.md has no $unit block"
done
# verify loads every unit ours name (multi-user.target, timers.target, ...) and
# warns of their flaws too: on a machine with other software installed, only
# a line about our two units, or a failure no line explains, is ours.
capture systemd-analyze verify --man=no "$units/nightly-report.service" "$units/nightly-report.timer"
check "systemd-analyze verify: no complaint about the units" "" \
    "$(printf '%s\n%s\n' "$OUT" "$ERR" | grep -F nightly-report)"
[ "$RC" -eq 0 ] || [ -n "$OUT$ERR" ] || fail "systemd-analyze verify: exit $RC with no message"

service=$units/nightly-report.service
exec_start=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$service" | sed 's/\\$//' | tr '\n' ' ')
read -r -a words <<<"${exec_start#ExecStart=}"
run=()
for w in "${words[@]}"; do
    run+=("$w")
    [ "$w" = -- ] && break
done
option() { # the value after option $1 in the ExecStart line
    local i
    for ((i = 0; i + 1 < ${#run[@]}; i++)); do [ "${run[i]}" = "$1" ] && echo "${run[i + 1]}"; done
}
kill_after=$(option --kill-after) timeout=$(option --timeout)
busy=$(option --conflict-exit-code)
stop_sec=$(sed -n 's/^TimeoutStopSec=//p' "$service")
check "ExecStart: the packaged command" /usr/bin/advlock "${run[0]}"
check "SuccessExitStatus: the busy lock's status" "$busy" "$(sed -n 's/^SuccessExitStatus=//p' "$service")"
check "KillMode" mixed "$(sed -n 's/^KillMode=//p' "$service")"
[ "$stop_sec" -gt $((kill_after + timeout + 1)) ] && pass ||
    fail "TimeoutStopSec=$stop_sec leaves no room for --kill-after $kill_after + --timeout $timeout + 1 s"

tcp_env=(PGHOST="${ADVLOCK_PG_LISTEN%/*}" PGPORT="$PGPORT" PGUSER="$PGUSER" PGDATABASE="$PGDATABASE")
read -r _ _ classid objid < <(/usr/bin/advlock key "${run[-2]}") # the name before --
job_sql="SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND classid = $classid AND objid = $objid AND objsubid = 1"
capture env "${tcp_env[@]}" "${run[@]}" psql -X -At -c "$job_sql"
check "the unit's ExecStart over TCP: the job runs under the lock" "0 1" "$RC $OUT"

env "${tcp_env[@]}" "${run[@]}" sh -c 'trap "" TERM; echo started; while :; do sleep 0.1; done' \
    >"$work/job.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q started "$work/job.out" && break; sleep 0.05; done
# A second host's run, while the holder stops: its command ignores SIGTERM,
# so the lock stays held until --kill-after, past the second run's --timeout.
env "${tcp_env[@]}" "${run[@]}" true >/dev/null 2>&1 &
second=$!
# bounded_wait PID SECONDS: sets status to PID's, as wait gives it, if it
# ends within SECONDS; else kills it and its children, as systemd does past
# TimeoutStopSec, and sets status to "stuck".
bounded_wait() {
    local deadline=$(($(date +%s%N) + $2 * 1000000000))
    while kill -0 "$1" 2>/dev/null && [ "$(date +%s%N)" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        pkill -KILL -P "$1"
        kill -KILL "$1"
        wait "$1"
        status=stuck
    else
        wait "$1"
        status=$?
    fi
}
started=$(date +%s%N)
kill -TERM "$holder"
bounded_wait "$holder" "$stop_sec"
rc=$status elapsed_ms=$((($(date +%s%N) - started) / 1000000))
[ "$rc" = stuck ] && fail "advlock still ran TimeoutStopSec=${stop_sec}s after SIGTERM: killed"
bounded_wait "$second" $((timeout + 5))
check "a second host's run: the busy status" "$busy" "$status"
check "after SIGTERM: the command killed by KILL" 137 "$rc"
[ "$elapsed_ms" -ge $((kill_after * 1000)) ] && [ "$elapsed_ms" -lt $((stop_sec * 1000)) ] && pass ||
    fail "advlock exited ${elapsed_ms} ms after SIGTERM: not between --kill-after ${kill_after}s and TimeoutStopSec=${stop_sec}s"
check "after SIGTERM: the lock released" 0 "$(psql -X -At -c "$job_sql")"
check "after SIGTERM: no process of the job left" "" "$(pgrep -f 'trap "" TERM; echo started' || true)"
