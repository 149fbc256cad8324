#!/usr/bin/env bash
# advlock status against a real server: free, held (holder and waiter listed),
# free again; exit statuses. Runs under tests/pg/with-postgres.sh.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
name="status-test-Straße"
key=$("$A" key "$name" | cut -f1)

capture "$A" status "$name"
check "free: status" 0 "$RC"
check "free: output" "$(printf '%s\tfree\tkey %s' "$name" "$key")" "$OUT"

# A holder sleeping inside its session, and a second session queued behind it.
psql -X -q -v ON_ERROR_STOP=1 -c "SET application_name = 'status-holder'" \
     -c "SELECT pg_advisory_lock($key)" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" = 1 ] && break
    sleep 0.1
done
psql -X -q -c "SET application_name = 'status-waiter'" -c "SELECT pg_advisory_lock($key)" >/dev/null 2>&1 &
waiter=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" = 1 ] && break
    sleep 0.1
done

capture "$A" status "$name" "another-free-lock"
check "held: status" 1 "$RC"
check "held: first line" "$(printf '%s\theld\tkey %s' "$name" "$key")" "$(sed -n 1p <<<"$OUT")"
holder_line=$(sed -n 2p <<<"$OUT")
waiter_line=$(sed -n 3p <<<"$OUT")
holder_pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'status-holder'")
case "$holder_line" in
    *"holder	pid $holder_pid	mode ExclusiveLock	application 'status-holder'	client local	state active	backend start 20"*"held for 0:00:0"*) pass ;;
    *) fail "holder line: [$holder_line]" ;;
esac
case "$waiter_line" in
    *"waiter	pid "*"application 'status-waiter'"*"waiting for 0:00:0"*) pass ;;
    *) fail "waiter line: [$waiter_line]" ;;
esac
check "held: the free key" "$(printf 'another-free-lock\tfree\tkey %s' "$("$A" key another-free-lock | cut -f1)")" "$(sed -n 4p <<<"$OUT")"

psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name IN ('status-holder', 'status-waiter')" >/dev/null
wait "$holder" "$waiter" 2>/dev/null
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")" = 0 ] && break
    sleep 0.1
done
capture "$A" status "$name"
check "free again: status" 0 "$RC"

# A name with a newline and a tab, held: still one line per row, the name
# escaped as every message shows it.
odd=$'a\nb\tc'
odd_key=$("$A" key "$odd" | cut -f1)
psql -X -q -c "SET application_name = 'odd-holder'" -c "SELECT pg_advisory_lock($odd_key)" \
     -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" = 1 ] && break
    sleep 0.1
done
capture "$A" status "$odd"
check "odd name: status" 1 "$RC"
check "odd name: one line per row" 2 "$(wc -l <<<"$OUT")"
check "odd name: first line" "$(printf 'a\\nb\\tc\theld\tkey %s' "$odd_key")" "$(sed -n 1p <<<"$OUT")"
case "$(sed -n 2p <<<"$OUT")" in *"holder	pid "*"application 'odd-holder'"*) pass ;; *) fail "odd name: holder line [$OUT]" ;; esac
psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'odd-holder'" >/dev/null
wait "$holder" 2>/dev/null

# Its answer cannot be written: an I/O error (74), said.
capture bash -c "'$A' status '$name' >/dev/full"
check "stdout full" "${EXIT_IO} advlock: writing standard output: No space left on device" "$RC $ERR"

capture "$A" status -d "host=/nonexistent-dir" "$name"
check "no server: status" "$EXIT_NO_SERVER" "$RC"
case "$ERR" in "advlock: cannot connect: "*) pass ;; *) fail "no server: message [$ERR]" ;; esac
# libpq's message ends with a newline: not printed as a blank line.
errfile=$(mktemp)
"$A" status -d "host=/nonexistent-dir" "$name" 2>"$errfile"
[ -n "$(tail -n 1 "$errfile")" ] && pass || fail "no server: a blank line ends the message"
rm -f "$errfile"
capture "$A" status -d "bogus_param=1" "$name"
check "conninfo syntax error: status" "$EXIT_USAGE" "$RC"
check "conninfo syntax error: message" "advlock: bad connection string: invalid connection option \"bogus_param\"" "$ERR"
capture "$A" status "$(printf 'bad\xff')"
check "bad key: status" 2 "$RC"
case "$ERR" in "advlock: 'bad\xff': "*) pass ;; *) fail "bad key shown escaped: [$ERR]" ;; esac
# No key: the list of every lock (tests/cli/status_all.sh), here empty.
capture "$A" status
check "no keys: every lock listed, none held" "0 no advisory lock is held or awaited in this database" "$RC $OUT"

# The server refuses who connects (a wrong or missing password, SQLSTATE
# 28P01; no such role, 28000): 77 (EX_NOPERM), not an unreachable server's
# 69. A role of its own asks for a password on the socket (the harness
# trusts everyone else), for as long as the test runs.
: "${ADVLOCK_PG_DATA:?run under tests/pg/with-postgres.sh}"
hba="$ADVLOCK_PG_DATA/pg_hba.conf"
cp -p "$hba" "$hba.status-test"
trap 'mv "$hba.status-test" "$hba"; psql -X -q -c "SELECT pg_reload_conf()" >/dev/null' EXIT
psql -X -q -c "CREATE ROLE status_pw LOGIN PASSWORD 'right'" >/dev/null
{ echo "local all status_pw scram-sha-256"; cat "$hba.status-test"; } >"$hba"
psql -X -q -c "SELECT pg_reload_conf()" >/dev/null
capture env PGPASSWORD=wrong "$A" status -d "user=status_pw" "$name"
check "wrong password: status" "$EXIT_NO_PERM" "$RC"
case "$ERR" in *"password authentication failed"*) pass ;; *) fail "wrong password: message [$ERR]" ;; esac
capture env -u PGPASSWORD PGPASSFILE=/nonexistent "$A" status -d "user=status_pw" "$name"
check "no password: status" "$EXIT_NO_PERM" "$RC"
capture env PGPASSWORD=right "$A" status -d "user=status_pw" "$name"
check "right password: status" 0 "$RC"
capture "$A" status -d "user=no_such_role" "$name"
check "no such role: status" "$EXIT_NO_PERM" "$RC"
psql -X -q -c "DROP ROLE status_pw" >/dev/null

finish
