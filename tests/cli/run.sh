#!/usr/bin/env bash
# advlock run against a real server: the lock while the command runs, exit
# statuses, timeouts, signals, a killed session, progress on a terminal.
# Runs under tests/pg/with-postgres.sh.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
name="run-test-日本"
read -r _ _ classid objid < <("$A" key "$name")
held_sql="SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
          AND classid = $classid AND objid = $objid AND objsubid = 1 AND mode = 'ExclusiveLock'"
held() { psql -X -At -c "$held_sql"; }
export held_sql
TMPDIR_RUN=$(mktemp -d)
trap 'rm -rf "$TMPDIR_RUN"' EXIT

wait_for_holder() {
    for _ in $(seq 100); do [ "$(held)" = 1 ] && return 0; sleep 0.05; done
    return 1
}

# The command runs with the lock held on advlock's session; its status is ours.
capture "$A" run "$name" -- sh -c 'psql -X -At -c "$held_sql"; exit 3'
check "child status passed through" 3 "$RC"
check "lock visible while the command runs" 1 "$OUT"
check "lock gone after" 0 "$(held)"

capture "$A" run "$name" sh -c 'psql -X -At -c "SELECT application_name FROM pg_stat_activity WHERE pid IN (SELECT pid FROM pg_locks WHERE locktype = '"'advisory'"')"'
check "no -- needed; default application_name" "advlock" "$OUT"
capture "$A" run --application-name nightly-migration "$name" -- sh -c 'psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'nightly-migration'"'"'
check "--application-name" 1 "$OUT"

# A second run on the same key waits, then times out with the reference's message.
"$A" run -q "$name" -- sleep 4 &
first=$!
wait_for_holder || fail "first holder never appeared"
start=$(date +%s%N)
capture "$A" run -q --timeout 0.7 "$name" -- echo never
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "timeout: status" 1 "$RC"
check "timeout: message" "advlock: Could not acquire migration lock for '$name' within 0.7s." "$ERR"
check "timeout: command not run" "" "$OUT"
[ "$elapsed_ms" -ge 700 ] && pass || fail "timed out after ${elapsed_ms} ms, before 0.7 s"
capture "$A" run -q -w 0 --conflict-exit-code 75 "$name" -- echo never
check "--conflict-exit-code" 75 "$RC"
check "timeout 0 message" "advlock: Could not acquire migration lock for '$name' within 0s." "$ERR"

# It waits, then gets the lock soon after the holder lets go.
capture "$A" run -q --timeout 30 "$name" -- echo got it
check "waiter acquires after release" "got it" "$OUT"
wait "$first"
check "first holder's status" 0 "$?"

# Progress line on a terminal (script(1) gives advlock a pty), silenced by --quiet.
"$A" run -q "$name" -- sleep 2 &
first=$!
wait_for_holder
tty_out=$(script -qec "'$A' run -w 1.5 '$name' -- true" /dev/null)
case "$tty_out" in *"waiting for '$name': attempt 3, "*"next retry in"*) pass ;; *) fail "progress line: [$tty_out]" ;; esac
tty_out=$(script -qec "'$A' run -q -w 0.5 '$name' -- true" /dev/null)
case "$tty_out" in *attempt*) fail "--quiet still shows progress: [$tty_out]" ;; *) pass ;; esac
wait "$first"

# SIGTERM sent to advlock reaches the command; the lock is released after.
"$A" run "$name" -- sh -c 'trap "exit 5" TERM; sleep 30 & wait' &
runner=$!
wait_for_holder
sleep 0.2
kill -TERM "$runner"
wait "$runner"
check "SIGTERM forwarded: command's status" 5 "$?"
check "SIGTERM forwarded: lock released" 0 "$(held)"

# SIGINT while waiting cancels the wait and leaves no lock behind.
"$A" run -q "$name" -- sleep 3 &
first=$!
wait_for_holder
"$A" run -q "$name" -- echo never &
waiter=$!
sleep 0.5
kill -INT "$waiter"
wait "$waiter"
check "SIGINT while waiting: status" 130 "$?"
wait "$first"
check "SIGINT while waiting: nothing held" 0 "$(held)"

# The session killed while the command runs: the command is told at once.
kill_me='SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '"'advlock'"
capture "$A" run "$name" -- sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 10; echo survived"
check "session killed: status" 70 "$RC"
check "session killed: command terminated" "" "$OUT"
check "session killed: message" "advlock: connection to the server lost while the command ran: lock '$name' is no longer held; terminating the command" "$ERR"
capture "$A" run --keep-running "$name" -- sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 1; echo survived"
check "--keep-running: command finished" "survived" "$OUT"
check "--keep-running: status" 70 "$RC"

# --shared: shared holders coexist; an exclusive run waits for them.
"$A" run -q --shared "$name" -- sleep 2 &
first=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock'")" = 1 ] && break
    sleep 0.05
done
capture "$A" run -q --shared -w 0 "$name" -- psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND granted"
check "--shared: two shared holders" 2 "$OUT"
capture "$A" run -q -w 0 "$name" -- echo never
check "--shared: an exclusive run times out" 1 "$RC"
wait "$first"

# --diagnose: the timeout names the holder.
"$A" run -q --application-name nightly-job "$name" -- sleep 2 &
first=$!
wait_for_holder
holder_pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'nightly-job'")
capture "$A" run -q --diagnose -w 0.3 "$name" -- echo never
check "--diagnose: status" 1 "$RC"
case "$ERR" in
    "advlock: Could not acquire migration lock for '$name' within 0.3s. Held by pid $holder_pid (application 'nightly-job', state idle) for "*s.) pass ;;
    *) fail "--diagnose message: [$ERR]" ;;
esac

# --wait: the waiter sits in the server's queue (not polling), and gets the
# lock when the holder lets go.
"$A" run -q --wait --application-name queued "$name" -- echo got it >"$TMPDIR_RUN/queued.out" &
waiter=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" = 1 ] && break
    sleep 0.05
done
check "--wait: the statement waiting in the queue" "SELECT pg_advisory_lock(\$1)" \
    "$(psql -X -At -c "SELECT query FROM pg_stat_activity WHERE application_name = 'queued'")"
wait "$first"
wait "$waiter"
check "--wait: acquired after the holder" "got it" "$(cat "$TMPDIR_RUN/queued.out")"

# --wait with a timeout: cancelled at the deadline, nothing left queued or held.
# The holder outlasts the three timed-out runs below (about 1.8 s together,
# more on a loaded machine).
"$A" run -q "$name" -- sleep 4 &
first=$!
wait_for_holder
capture "$A" run -q --wait -w 0.5 "$name" -- echo never
check "--wait timeout: status" 1 "$RC"
check "--wait timeout: message" "advlock: Could not acquire migration lock for '$name' within 0.5s." "$ERR"
check "--wait timeout: no waiter left" 0 "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")"
tty_out=$(script -qec "'$A' run --wait -w 0.5 '$name' -- true" /dev/null)
case "$tty_out" in *"waiting for '$name' in the server's queue"*) pass ;; *) fail "--wait progress: [$tty_out]" ;; esac
# --jitter: still bounded by the timeout, with the same message.
capture "$A" run -q --jitter -w 0.4 "$name" -- echo never
check "--jitter timeout: message" "advlock: Could not acquire migration lock for '$name' within 0.4s." "$ERR"
wait "$first"
check "options: nothing held at the end" 0 "$(held)"

# Errors before anything runs.
capture "$A" run -d "host=/nonexistent-dir" "$name" -- echo never
check "no server" 69 "$RC"
capture "$A" run "$(printf 'bad\xc0\x80')" -- echo never
check "bad key" 2 "$RC"
case "$ERR" in "advlock: lock key 'bad\xc0\x80': "*) pass ;; *) fail "bad key shown escaped: [$ERR]" ;; esac
capture "$A" run "$name"
check "no command" 64 "$RC"
capture "$A" run --timeout -1 "$name" -- true
check "negative timeout" 64 "$RC"
capture "$A" run --timeout 0.0001 "$name" -- true
check "timeout finer than a millisecond" 64 "$RC"
capture "$A" run "$name" -- /nonexistent/command
check "command not found" 127 "$RC"
check "nothing held at the end" 0 "$(held)"

finish
