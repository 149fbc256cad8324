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

# A command that holds until let_go, however loaded the machine: for holders
# that must outlast the runs tried against them.
until_let_go=(sh -c 'until [ -e "$1" ]; do sleep 0.05; done' sh "$TMPDIR_RUN/let-go")
let_go() {
    touch "$TMPDIR_RUN/let-go"
    wait "$first"
    rm -f "$TMPDIR_RUN/let-go"
}

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
check "no -- needed; default application_name" 'advlock: run-test-\xe6\x97\xa5\xe6\x9c\xac' "$OUT"
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
kill_me='SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '"'advlock: %'"
capture "$A" run "$name" -- sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 10; echo survived"
check "session killed: status" "$EXIT_LOCK_ERROR" "$RC"
check "session killed: command terminated" "" "$OUT"
check "session killed: message" "advlock: connection to the server lost while the command ran: lock '$name' is no longer held; terminating the command" "$ERR"
capture "$A" run --keep-running "$name" -- sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 1; echo survived"
check "--keep-running: command finished" "survived" "$OUT"
check "--keep-running: status" "$EXIT_LOCK_ERROR" "$RC"

# The command dies with its lock. It runs in a process group of its own:
# whatever stops it (advlock killed, the session lost, a signal) reaches its
# grandchildren, and nothing outside the group. A zombie counts as gone: the
# machine's init may be slow to reap what it inherits.
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# wait_gone SECONDS PID...: true once every PID is gone; sets gone_ms.
wait_gone() {
    local limit_ms=$(($1 * 1000)) start p any
    shift
    start=$(date +%s%N)
    while :; do
        any=
        for p in "$@"; do alive "$p" && any=1; done
        gone_ms=$(( ($(date +%s%N) - start) / 1000000 ))
        [ -z "$any" ] && return 0
        [ "$gone_ms" -ge "$limit_ms" ] && return 1
        sleep 0.02
    done
}
wait_file() { for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done; return 1; }
# A process beside the runs, in the test's own process group: never touched.
sleep 300 >/dev/null 2>&1 &
sibling=$!
# Starts a command that records its pid (cmd.pid) and a grandchild's (gc.pid);
# the grandchild keeps no hold on the output a capture waits on.
spawn_tree='echo $$ >"$T/cmd.pid"; sleep 300 >/dev/null 2>&1 & echo $! >"$T/gc.pid"; wait'
export T="$TMPDIR_RUN"

rm -f "$T"/*.pid
"$A" run -q "$name" -- sh -c "$spawn_tree" 2>/dev/null &
runner=$!
disown "$runner" # no "Killed" notice from bash
wait_file "$T/gc.pid" || fail "kill -9: the command never started"
kill -9 "$runner"
if wait_gone 1 "$(cat "$T/cmd.pid")" "$(cat "$T/gc.pid")"; then
    pass
    echo "kill -9 of advlock: command and grandchild gone after ${gone_ms} ms"
else
    fail "kill -9 of advlock: command or grandchild still running after 1 s"
fi
kill -9 "$(cat "$T/gc.pid")" 2>/dev/null
for _ in $(seq 100); do [ "$(held)" = 0 ] && break; sleep 0.05; done

# The session lost: the grandchild is ended too, before advlock returns.
rm -f "$T"/*.pid
capture "$A" run "$name" -- sh -c "sleep 300 >/dev/null 2>&1 & echo \$! >\"\$T/gc.pid\"; psql -X -q -c \"$kill_me\" >/dev/null; wait"
check "session killed: status with a grandchild" "$EXIT_LOCK_ERROR" "$RC"
if alive "$(cat "$T/gc.pid")"; then
    fail "session killed: the grandchild survived"
    kill -9 "$(cat "$T/gc.pid")"
else
    pass
fi

# A command that ignores SIGTERM is killed after --kill-after, all its group.
rm -f "$T"/*.pid
"$A" run -q --kill-after 1 "$name" -- sh -c "trap '' TERM; $spawn_tree" &
runner=$!
wait_file "$T/gc.pid" || fail "--kill-after: the command never started"
start=$(date +%s%N)
kill -TERM "$runner"
if wait_gone 15 "$runner"; then
    wait "$runner"
    check "--kill-after: status (SIGKILL)" 137 "$?"
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    [ "$elapsed_ms" -ge 1000 ] && pass || fail "--kill-after 1: killed after ${elapsed_ms} ms"
    alive "$(cat "$T/gc.pid")" && fail "--kill-after: the grandchild survived" || pass
else
    fail "--kill-after: a command ignoring SIGTERM still runs after 15 s"
    kill -9 -"$(cat "$T/cmd.pid")" "$runner"
fi
check "--kill-after: bad value" "advlock: --kill-after wants seconds, such as 10 or 0.5 (at most 3 decimals)" \
    "$("$A" run --kill-after x "$name" -- true 2>&1)"

# A command stopped and continued by someone else: advlock, which has no
# terminal here, waits for it, and ends with it.
rm -f "$T"/*.pid
"$A" run -q "$name" -- sh -c 'echo $$ >"$T/cmd.pid"; sleep 1' &
runner=$!
wait_file "$T/cmd.pid" || fail "stopped and continued: the command never started"
kill -STOP "$(cat "$T/cmd.pid")"
sleep 0.3
kill -CONT "$(cat "$T/cmd.pid")"
if wait_gone 15 "$runner"; then
    wait "$runner"
    check "stopped and continued: status" 0 "$?"
else
    fail "stopped and continued: advlock still runs after 15 s"
    kill -9 "$runner"
fi

# At a terminal the command still reads it and Ctrl-C still reaches it,
# though it runs in a group of its own (script(1) gives a pty; ^C is typed).
tty_out=$(printf 'hello\n' | script -qec "'$A' run -q '$name' -- sh -c 'read x; echo got \$x'" /dev/null)
case "$tty_out" in *"got hello"*) pass ;; *) fail "the command reads the terminal: [$tty_out]" ;; esac
tty_out=$( (sleep 1; printf '\003') | script -qec "'$A' run -q '$name' -- sleep 20; echo status \$?" /dev/null)
case "$tty_out" in *"status 130"*) pass ;; *) fail "Ctrl-C at the terminal: [$tty_out]" ;; esac

alive "$sibling" && pass || fail "a process outside the command's group was killed"
kill "$sibling"
wait "$sibling" 2>/dev/null

# --shared: shared holders coexist; an exclusive run waits for them.
"$A" run -q --shared "$name" -- "${until_let_go[@]}" &
first=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock'")" = 1 ] && break
    sleep 0.05
done
capture "$A" run -q --shared -w 0 "$name" -- psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND granted"
check "--shared: two shared holders" 2 "$OUT"
capture "$A" run -q -w 0 "$name" -- echo never
check "--shared: an exclusive run times out" 1 "$RC"
let_go

# --diagnose: the timeout names the holder (who holds until the --wait case
# below is seen queued behind it).
"$A" run -q --application-name nightly-job "$name" -- "${until_let_go[@]}" &
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
case "$(psql -X -At -c "SELECT query FROM pg_stat_activity WHERE application_name = 'queued'")" in
    *"pg_advisory_lock("*) pass ;;
    *) fail "--wait: no pg_advisory_lock statement waiting in the queue" ;;
esac
let_go
wait "$waiter"
check "--wait: acquired after the holder" "got it" "$(cat "$TMPDIR_RUN/queued.out")"

# --wait with a timeout: cancelled at the deadline, nothing left queued or held.
# The holder outlasts the three timed-out runs below.
"$A" run -q "$name" -- "${until_let_go[@]}" &
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
let_go
check "options: nothing held at the end" 0 "$(held)"

# A name with a newline: the whole message on one line, the diagnosis with it.
odd=$'a\nb'
"$A" run -q --application-name odd-holder "$odd" -- sleep 3 &
first=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                        WHERE l.locktype = 'advisory' AND a.application_name = 'odd-holder'")" = 1 ] && break
    sleep 0.05
done
capture "$A" run --timeout 0 --diagnose "$odd" -- true
check "odd name: status" 1 "$RC"
check "odd name: one line" 1 "$(wc -l <<<"$ERR")"
case "$ERR" in
    "advlock: Could not acquire migration lock for 'a\nb' within 0s. Held by pid "*"(application 'odd-holder', state idle) for "*s.) pass ;;
    *) fail "odd name: message [$ERR]" ;;
esac
wait "$first"

# Errors before anything runs.
# --xact: BEGIN, the transaction-scoped lock, the command, then COMMIT when
# it succeeds, ROLLBACK when it fails; the lock goes with the transaction.
# The session waits idle in its transaction holding no snapshot (no
# backend_xmin: VACUUM is not held back).
rollbacks() { psql -X -At -c "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()"; }
xact_sql="SELECT l.mode, a.state, a.backend_xmin IS NULL FROM pg_locks l JOIN pg_stat_activity a USING (pid)
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $classid AND l.objid = $objid"
export xact_sql
rolled_before=$(rollbacks)
capture "$A" run --xact "$name" -- sh -c 'psql -X -At -c "$xact_sql"'
check "--xact: status" 0 "$RC"
check "--xact: held in an idle transaction, no xmin" "ExclusiveLock|idle in transaction|t" "$OUT"
check "--xact: nothing held after COMMIT" 0 "$(held)"
capture "$A" run --xact "$name" -- sh -c 'exit 3'
check "--xact, command failed: its status" 3 "$RC"
check "--xact, command failed: nothing held after ROLLBACK" 0 "$(held)"
# Which one ended each transaction: the server counts rollbacks (each
# session's count is published as it exits, so wait a little for it).
for _ in $(seq 40); do [ "$(rollbacks)" -gt "$rolled_before" ] && break; sleep 0.05; done
check "--xact: one ROLLBACK (the failure), the success committed" "$((rolled_before + 1))" "$(rollbacks)"
capture "$A" run --xact --shared "$name" -- sh -c 'psql -X -At -c "$xact_sql"'
check "--xact --shared" "ShareLock|idle in transaction|t" "$OUT"
"$A" run -q --xact "$name" -- "${until_let_go[@]}" &
first=$!
wait_for_holder
capture "$A" run -q --xact -w 0.3 "$name" -- echo never
check "--xact: busy lock times out" 1 "$RC"
check "--xact: timeout message" "advlock: Could not acquire migration lock for '$name' within 0.3s." "$ERR"
capture "$A" run -q --xact --wait -w 0.3 "$name" -- echo never
check "--xact --wait: busy lock times out" 1 "$RC"
touch "$TMPDIR_RUN/let-go"
wait "$first"
check "--xact: holder's status" 0 "$?"
rm -f "$TMPDIR_RUN/let-go"
check "--xact: nothing held after the timeouts" 0 "$(held)"
# idle_in_transaction_session_timeout, even the client's own, does not end
# the session under the command: the session check turns it off.
PGOPTIONS='-c idle_in_transaction_session_timeout=1000' capture "$A" run --xact "$name" -- \
    sh -c 'sleep 2; echo survived'
check "--xact, idle timeout: status" 0 "$RC"
check "--xact, idle timeout: the command ran" survived "$OUT"
check "--xact, idle timeout: nothing said" "" "$ERR"
check "--xact, idle timeout: nothing held" 0 "$(held)"

# --allow-standby changes nothing on a primary (tests/deploy/standby.sh
# has the standby); a session claimed by another token (advlock.session set
# at connect) does not matter on a direct connection.
capture "$A" run --allow-standby "$name" -- sh -c 'psql -X -At -c "$held_sql"'
check "--allow-standby on a primary: status" 0 "$RC"
check "--allow-standby on a primary: held" 1 "$OUT"
PGOPTIONS='-c advlock.session=999' capture "$A" run "$name" -- sh -c 'psql -X -At -c "$held_sql"'
check "direct, session claimed by another token: status" 0 "$RC"
check "direct, session claimed by another token: held" 1 "$OUT"

capture "$A" run -d "host=/nonexistent-dir" "$name" -- echo never
check "no server" "$EXIT_NO_SERVER" "$RC"
"$A" run -d "host=/nonexistent-dir" "$name" -- echo never 2>"$TMPDIR_RUN/err"
[ -n "$(tail -n 1 "$TMPDIR_RUN/err")" ] && pass || fail "no server: a blank line ends the message"
# Conninfo syntax errors are usage errors, found before connecting, with
# libpq's message on one line.
capture "$A" run -d bogus_param=1 "$name" -- echo never
check "conninfo syntax error: status" "$EXIT_USAGE" "$RC"
check "conninfo syntax error: message" "advlock: bad connection string: invalid connection option \"bogus_param\"" "$ERR"
capture "$A" run -d 'postgresql://%zz' "$name" -- echo never
check "bad URI: status" "$EXIT_USAGE" "$RC"
case "$ERR" in "advlock: bad connection string: "*'"%zz"'*) pass ;; *) fail "bad URI: message [$ERR]" ;; esac
check "bad URI: one line" 1 "$(wc -l <<<"$ERR")"
capture "$A" run --no-such-option "$name" -- true
check "unknown option: status" "$EXIT_USAGE" "$RC"
check "unknown option: prefix" "advlock: unrecognized option '--no-such-option'" "$(head -n 1 <<<"$ERR")"
capture "$A" run "$(printf 'bad\xc0\x80')" -- echo never
check "bad key" 2 "$RC"
case "$ERR" in "advlock: lock key 'bad\xc0\x80': "*) pass ;; *) fail "bad key shown escaped: [$ERR]" ;; esac
capture "$A" run "$name"
check "no command" "$EXIT_USAGE" "$RC"
capture "$A" run --timeout -1 "$name" -- true
check "negative timeout" "$EXIT_USAGE" "$RC"
capture "$A" run --timeout 0.0001 "$name" -- true
check "timeout finer than a millisecond" "$EXIT_USAGE" "$RC"
# A Unix socket has no lease, so no --kill-after is too long for it.
capture "$A" run --kill-after 30 "$name" -- true
check "--kill-after 30 on a Unix socket" "0:" "$RC:$ERR"

capture "$A" run "$name" -- /nonexistent/command
check "command not found" "$EXIT_NO_COMMAND" "$RC"
check "nothing held at the end" 0 "$(held)"

finish
