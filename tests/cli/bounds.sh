#!/usr/bin/env bash
# advlock run's bounds: --timeout bounds the whole run (connect, session
# check, attempts, the server-side wait, the release), and a stop signal
# ends it promptly in every phase, against a server that does not answer:
# a stopped postmaster (kill -STOP: a hung host, a full accept queue), a
# stopped backend (a hung statement), a saturated PgBouncer session pool.
# Without --timeout, run still gives up connecting, on its session check and
# on the statements before it (two names, --xact) after 30 s; status, setup and calibrate take --timeout (default 30 s); a
# user's connect_timeout or PGCONNECT_TIMEOUT bounds connecting too: all
# against a listener that accepts connections and never answers.
# Runs under tests/pg/with-pgbouncer.sh with
# ADVLOCK_TEST_PGBOUNCER_SESSION_POOL=1 (its transaction pool: the default
# 3). Prints each measured exit time.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
: "${ADVLOCK_PG_DATA:?run under tests/pg/with-pgbouncer.sh}" "${ADVLOCK_TEST_PGBOUNCER_SESSION:?}"
name="bounds-test"
postmaster=$(head -n 1 "$ADVLOCK_PG_DATA/postmaster.pid")
T=$(mktemp -d)
export T

# Whatever happens, nothing stays stopped: the harness could not stop the
# server, and a stopped backend would keep its locks.
stopped=()
resume_all() {
    local p
    for p in "${stopped[@]}"; do kill -CONT "$p" 2>/dev/null; done
    stopped=()
}
bg_pids=()
cleanup() {
    resume_all
    local p
    for p in "${bg_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
stop() {
    stopped+=("$1")
    kill -STOP "$1"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
backend_of() { psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$1'"; }
wait_backend() {
    local pid
    for _ in $(seq 200); do
        pid=$(backend_of "$1")
        [ -n "$pid" ] && echo "$pid" && return 0
        sleep 0.02
    done
    return 1
}
holders() {
    psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
}
wait_holders() { for _ in $(seq 200); do [ "$(holders)" = "$1" ] && return 0; sleep 0.05; done; return 1; }

# within NAME LIMIT_MS: the last timed run (ELAPSED) ended within LIMIT_MS.
within() {
    echo "$1: exited after ${ELAPSED} ms"
    [ "$ELAPSED" -lt "$2" ] && pass || fail "$1: took ${ELAPSED} ms, limit $2 ms"
}
# timed CMD...: capture with the time it took in ELAPSED; killed after 20 s
# (status 137), where an unbounded run would hang the test.
timed() {
    local start
    start=$(now_ms)
    capture timeout -s KILL 20 "$@"
    ELAPSED=$(($(now_ms) - start))
}
# reap PID: waits for PID (RC: its status), killed 10 s on (status 137).
reap() {
    for _ in $(seq 500); do kill -0 "$1" 2>/dev/null || break; sleep 0.02; done
    kill -9 "$1" 2>/dev/null
    wait "$1" && RC=0 || RC=$?
}
# signal SIGNAL PID: sends SIGNAL to PID and waits for it: RC, and ELAPSED
# from the signal.
signal() {
    local start
    start=$(now_ms)
    kill -"$1" "$2"
    reap "$2"
    ELAPSED=$(($(now_ms) - start))
}
# signalled SIGNAL AFTER_S CMD...: starts CMD in the background and signals
# it AFTER_S seconds later, as signal does.
signalled() {
    local sig=$1 after=$2 pid
    shift 2
    "$@" 2>/dev/null &
    pid=$!
    sleep "$after"
    signal "$sig" "$pid"
}

# ---- connecting: a stopped postmaster never answers the startup packet ----
stop "$postmaster"
timed "$A" run --timeout 2 "$name" -- echo never
check "stopped postmaster, --timeout 2: status (unreachable)" "$EXIT_NO_SERVER" "$RC"
check "stopped postmaster, --timeout 2: message" "advlock: could not connect within 2s" "$ERR"
check "stopped postmaster: command not run" "" "$OUT"
[ "$ELAPSED" -ge 2000 ] && pass || fail "stopped postmaster: gave up after ${ELAPSED} ms, before 2 s"
within "connecting, --timeout 2" 4500

timed "$A" run -d "connect_timeout=2" "$name" -- echo never
check "connect_timeout=2: status" "$EXIT_NO_SERVER" "$RC"
check "connect_timeout=2: message" "advlock: could not connect within 2s (connect_timeout)" "$ERR"
within "connecting, connect_timeout=2" 4500

for sig in TERM INT HUP; do
    signalled "$sig" 0.5 "$A" run "$name" -- echo never
    check "SIG$sig while connecting: status" "$((128 + $(kill -l "$sig")))" "$RC"
    within "connecting, SIG$sig" 2000
done
resume_all
wait_holders 0 || fail "the postmaster did not come back"

# ---- the session check: its statement hangs on a lock another session holds
# on the pg_locks view (the check reads it on a fresh session) ----
# lock_pg_locks SECONDS: that lock, held SECONDS in the background (locker).
lock_pg_locks() {
    psql -X -q -c "BEGIN; LOCK pg_catalog.pg_locks IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep($1)" \
        >/dev/null 2>&1 &
    locker=$!
    bg_pids+=("$locker")
    for _ in $(seq 100); do
        [ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK%'")" = 1 ] && break
        sleep 0.05
    done
}
lock_pg_locks 8
sleep 0.2
timed "$A" run --timeout 1 "$name" -- echo never
check "hung session check, --timeout 1: status" "$EXIT_NO_SERVER" "$RC"
check "hung session check: message" \
    "advlock: no answer from the server within 1s to the session check; connection closed" "$ERR"
within "session check, --timeout 1" 3500
signalled TERM 0.5 "$A" run "$name" -- echo never
check "SIGTERM in the session check: status" 143 "$RC"
within "session check, SIGTERM" 2000
kill "$locker" 2>/dev/null
psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK%'" >/dev/null
wait "$locker" 2>/dev/null

# ---- trying and waiting: the waiter's backend stopped mid-wait, so its
# next attempt (or its queued pg_advisory_lock) never answers ----
"$A" run -q --application-name bounds-holder "$name" -- sleep 120 &
holder=$!
bg_pids+=("$holder")
wait_holders 1 || fail "the holder never took the lock"
# hung_run WAIT_OPTION LABEL [POSTMASTER]: a waiter whose backend (and
# POSTMASTER, given its pid: a cancel request then gets no answer either)
# is stopped 1 s in.
hung_run() {
    local start
    start=$(now_ms)
    "$A" run -q --application-name bounds-waiter $1 --timeout 3 "$name" -- echo never \
        >/dev/null 2>"$T/bounds.err" &
    local waiter=$!
    local backend
    backend=$(wait_backend bounds-waiter) || fail "$2: the waiter never connected"
    sleep 1
    stop "$backend"
    [ -n "${3:-}" ] && stop "$3"
    for _ in $(seq 1000); do kill -0 "$waiter" 2>/dev/null || break; sleep 0.02; done
    reap "$waiter"
    ELAPSED=$(($(now_ms) - start))
    ERR=$(cat "$T/bounds.err")
    resume_all
}
hung_run "" "trying"
check "hung attempt, --timeout 3: status" "$EXIT_NO_SERVER" "$RC"
check "hung attempt: message" \
    "advlock: no answer from the server within 3s to the attempt on lock '$name'; connection closed" "$ERR"
within "trying, --timeout 3" 5500
hung_run --wait "waiting"
check "hung server-side wait, --timeout 3: status" "$EXIT_NO_SERVER" "$RC"
check "hung server-side wait: message" \
    "advlock: no answer from the server within 3s to the attempt on lock '$name'; connection closed" "$ERR"
within "waiting (--wait), --timeout 3" 5500
hung_run --wait "waiting, no cancel" "$postmaster"
check "hung server-side wait, cancel undeliverable: status" "$EXIT_NO_SERVER" "$RC"
within "waiting (--wait), postmaster stopped too, --timeout 3" 5500
wait_holders 1 || fail "a stopped waiter left a lock behind"

# A stop signal while a statement hangs: answered or not, the run ends;
# with --wait, whether or not its cancel request can be delivered.
for wait_option in "" --wait --wait-postmaster; do
    "$A" run -q --application-name bounds-waiter ${wait_option%-postmaster} "$name" -- echo never \
        2>/dev/null &
    waiter=$!
    backend=$(wait_backend bounds-waiter) || fail "signal$wait_option: the waiter never connected"
    sleep 0.5
    stop "$backend"
    [ "$wait_option" = --wait-postmaster ] && stop "$postmaster"
    sleep 0.3
    signal TERM "$waiter"
    resume_all
    check "SIGTERM, hung statement ${wait_option:-polling}: status" 143 "$RC"
    within "${wait_option:-trying}, hung, SIGTERM" 2000
done
kill "$holder"
wait "$holder" 2>/dev/null
wait_holders 0 || fail "locks left after the waiters"

# ---- releasing: the command stops advlock's own backend before it ends ----
stop_own='kill -STOP $(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = '"'bounds-releaser'"'") && echo $(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = '"'bounds-releaser'"'") >"$T/bounds.backend"'
rm -f "$T/bounds.backend"
timed "$A" run --application-name bounds-releaser --timeout 1 "$name" -- sh -c "$stop_own"
[ -s "$T/bounds.backend" ] && stopped+=("$(cat "$T/bounds.backend")")
check "hung release, --timeout 1: status (lock error)" "$EXIT_LOCK_ERROR" "$RC"
check "hung release: message" \
    "advlock: no answer from the server within 1s to the release of lock '$name'; connection closed" "$ERR"
within "releasing, --timeout 1 (command included)" 3500
resume_all
# The same with the postmaster stopped too: the cancel request cannot be
# delivered, and whatever tries to deliver it must not keep advlock's
# output open (the capture waits for its end).
rm -f "$T/bounds.backend"
timed "$A" run --application-name bounds-releaser --timeout 1 "$name" -- \
    sh -c "$stop_own; kill -STOP $postmaster"
stopped+=("$postmaster")
[ -s "$T/bounds.backend" ] && stopped+=("$(cat "$T/bounds.backend")")
check "hung release, postmaster stopped: status" "$EXIT_LOCK_ERROR" "$RC"
within "releasing, postmaster stopped too, --timeout 1 (command included)" 3500
resume_all
rm -f "$T/bounds.backend"
"$A" run --application-name bounds-releaser "$name" -- sh -c "$stop_own" 2>/dev/null &
releaser=$!
for _ in $(seq 200); do [ -s "$T/bounds.backend" ] && break; sleep 0.02; done
stopped+=("$(cat "$T/bounds.backend")")
sleep 0.5
signal TERM "$releaser"
resume_all
check "SIGTERM in a hung release: status (lock error)" "$EXIT_LOCK_ERROR" "$RC"
within "releasing, SIGTERM" 2000
rm -f "$T/bounds.backend"
timed "$A" run --xact --application-name bounds-releaser --timeout 1 "$name" -- sh -c "$stop_own"
[ -s "$T/bounds.backend" ] && stopped+=("$(cat "$T/bounds.backend")")
check "--xact, hung COMMIT, --timeout 1: status (lock error)" "$EXIT_LOCK_ERROR" "$RC"
check "--xact, hung COMMIT: message" \
    "advlock: no answer from the server within 1s to COMMIT; connection closed" "$ERR"
within "releasing (--xact COMMIT), --timeout 1 (command included)" 3500
resume_all
wait_holders 0 || fail "a lock left after the hung releases"

# ---- a saturated PgBouncer session pool: its one server connection busy,
# the run waits in PgBouncer's queue ----
# The pool stays busy past the 30 s default bound, for the run without
# --timeout below (PgBouncer drops a busy server connection whose client
# leaves: its client stays until then).
psql -X -q "$ADVLOCK_TEST_PGBOUNCER_SESSION" -c "SELECT pg_sleep(45)" >/dev/null 2>&1 &
pool_busy=$!
bg_pids+=("$pool_busy")
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(45)'")" = 1 ] && break
    sleep 0.05
done
# Without --timeout, two names: the lock-table settings' query (and
# --xact's BEGIN) are bounded by the 30 s the session check has. It runs
# meanwhile, and is reaped at the end.
pool_start=$(now_ms)
(
    timeout -s KILL 60 "$A" run -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" "$name-a" "$name-b" -- \
        echo never >"$T/pool-default.out" 2>"$T/pool-default.err"
    echo $? >"$T/pool-default.rc"
    now_ms >"$T/pool-default.end"
) &
pool_default=$!
timed "$A" run -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" --timeout 1 "$name" -- echo never
check "saturated pool, --timeout 1: status" "$EXIT_NO_SERVER" "$RC"
case "$ERR" in
    "advlock: could not connect within 1s" | \
        "advlock: no answer from the server within 1s to the session check; connection closed") pass ;;
    *) fail "saturated pool: message [$ERR]" ;;
esac
echo "saturated PgBouncer pool: $ERR"
within "saturated PgBouncer pool, --timeout 1" 3500
signalled TERM 0.5 "$A" run -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" "$name" -- echo never
check "SIGTERM in PgBouncer's queue: status" 143 "$RC"
within "saturated PgBouncer pool, SIGTERM" 2000
timed "$A" run -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" --xact --timeout 1 "$name" -- echo never
check "saturated pool, --xact --timeout 1: status" "$EXIT_NO_SERVER" "$RC"
check "saturated pool, --xact: message" \
    "advlock: no answer from the server within 1s to BEGIN; connection closed" "$ERR"
within "saturated PgBouncer pool, --xact BEGIN, --timeout 1" 3500
signalled TERM 0.5 "$A" run -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" --xact "$name" -- echo never
check "SIGTERM in PgBouncer's queue, --xact: status" 143 "$RC"
within "saturated PgBouncer pool, --xact BEGIN, SIGTERM" 2000

# ---- a release behind a transaction-pooling PgBouncer whose helpers meet a
# stopped backend: the claimed server session is busy (another client's
# statement), so the unlock lands elsewhere and is retried with helpers
# (reach.c), and one helper's backend is stopped mid-statement. The release
# still ends by its bound: the guarded retries (1.5 s) plus the grace ----
rm -f "$T/proxied.ready" "$T/proxied.go"
"$A" run -d "$ADVLOCK_TEST_PGBOUNCER_TX" --timeout 1 --verify-interval 0 "$name" -- \
    sh -c "touch '$T/proxied.ready'; while [ ! -e '$T/proxied.go' ]; do sleep 0.02; done" \
    >/dev/null 2>"$T/proxied.err" &
proxied=$!
bg_pids+=("$proxied")
for _ in $(seq 250); do [ -e "$T/proxied.ready" ] && break; sleep 0.02; done
# The idle server session used last, the claimed one, serves this client.
psql -X -q "$ADVLOCK_TEST_PGBOUNCER_TX" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
busy=$!
bg_pids+=("$busy")
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")" = 1 ] && break
    sleep 0.05
done
start=$(now_ms)
touch "$T/proxied.go"
helper_backend=
for _ in $(seq 200); do
    helper_backend=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE state = 'active'
        AND query LIKE 'SELECT pg_catalog.pg_sleep(CASE WHEN%' LIMIT 1")
    [ -n "$helper_backend" ] && break
    sleep 0.01
done
[ -n "$helper_backend" ] && stop "$helper_backend" || fail "proxied release: no helper seen"
reap "$proxied"
ELAPSED=$(($(now_ms) - start))
resume_all
ERR=$(cat "$T/proxied.err")
check "proxied release, helper's backend stopped: status (lock error)" "$EXIT_LOCK_ERROR" "$RC"
echo "proxied release: $ERR"
within "proxied release, helper hung, --timeout 1" 3000
kill "$busy" 2>/dev/null
wait "$busy" 2>/dev/null
# The lock stayed on the claimed server session, which PgBouncer keeps.
psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'" >/dev/null
wait_holders 0 || fail "locks left after the proxied release"

# ---- a peer that accepts connections and never says a word ----
python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])
' >"$T/silent.port" &
listener=$!
bg_pids+=("$listener")
for _ in $(seq 100); do [ -s "$T/silent.port" ] && break; sleep 0.05; done
silent="host=127.0.0.1 port=$(cat "$T/silent.port")"
# The defaults take 30 s: both run meanwhile. A run that would wait for the
# lock forever, against the silent peer; and one whose session check hangs
# (pg_locks locked, as above, for longer than the default bound).
lock_pg_locks 40
default_start=$(now_ms)
timeout -s KILL 60 "$A" run -d "$silent" "$name" -- echo never >"$T/default-connect.out" \
    2>"$T/default-connect.err" &
default_connect=$!
timeout -s KILL 60 "$A" run "$name" -- echo never >"$T/default-check.out" \
    2>"$T/default-check.err" &
default_check=$!

for cmd in status setup calibrate; do
    keys=()
    [ "$cmd" = status ] && keys=("$name")
    timed "$A" "$cmd" -d "$silent" --timeout 1 "${keys[@]}"
    check "silent peer, $cmd --timeout 1: status" "$EXIT_NO_SERVER" "$RC"
    check "silent peer, $cmd --timeout 1: message" "advlock: could not connect within 1s" "$ERR"
    within "silent peer, $cmd --timeout 1" 3500
done
timed env PGCONNECT_TIMEOUT=2 "$A" status -d "$silent" "$name"
check "silent peer, PGCONNECT_TIMEOUT=2 status: status" "$EXIT_NO_SERVER" "$RC"
check "silent peer, PGCONNECT_TIMEOUT=2: message" \
    "advlock: could not connect within 2s (connect_timeout)" "$ERR"
within "silent peer, PGCONNECT_TIMEOUT=2 status" 4500
timed env PGCONNECT_TIMEOUT=2 "$A" run -d "$silent" "$name" -- echo never
check "silent peer, PGCONNECT_TIMEOUT=2 run: status" "$EXIT_NO_SERVER" "$RC"
within "silent peer, PGCONNECT_TIMEOUT=2 run" 4500

wait "$default_connect" && RC=0 || RC=$?
ELAPSED=$(($(now_ms) - default_start))
check "silent peer, run without --timeout: status" "$EXIT_NO_SERVER" "$RC"
check "silent peer, run without --timeout: message" "advlock: could not connect within 30s" \
    "$(cat "$T/default-connect.err")"
check "silent peer, run without --timeout: command not run" "" "$(cat "$T/default-connect.out")"
[ "$ELAPSED" -ge 30000 ] && pass || fail "run without --timeout gave up after ${ELAPSED} ms, before 30 s"
within "silent peer, run without --timeout (default 30 s)" 36000
wait "$default_check" && RC=0 || RC=$?
ELAPSED=$(($(now_ms) - default_start))
check "hung session check, run without --timeout: status" "$EXIT_NO_SERVER" "$RC"
check "hung session check, run without --timeout: message" \
    "advlock: no answer from the server within 30s to the session check; connection closed" \
    "$(cat "$T/default-check.err")"
within "hung session check, run without --timeout (default 30 s)" 36000
wait "$pool_default"
RC=$(cat "$T/pool-default.rc")
ELAPSED=$(($(cat "$T/pool-default.end") - pool_start))
check "saturated pool, two names without --timeout: status" "$EXIT_NO_SERVER" "$RC"
check "saturated pool, two names without --timeout: message" \
    "advlock: no answer from the server within 30s to the lock-table settings' query; connection closed" \
    "$(cat "$T/pool-default.err")"
check "saturated pool, two names without --timeout: command not run" "" "$(cat "$T/pool-default.out")"
within "saturated pool, two names without --timeout (default 30 s)" 36000
kill "$pool_busy" 2>/dev/null
wait "$pool_busy" 2>/dev/null
kill "$locker" 2>/dev/null
psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK%'" >/dev/null
wait "$locker" 2>/dev/null
kill "$listener"
wait "$listener" 2>/dev/null

finish
