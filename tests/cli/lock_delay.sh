#!/usr/bin/env bash
# Lock-delay against a real server: refused without the schema (nothing
# left locked) and beside the options it cannot hold with; a clean
# hand-off that waits for nothing and leaves no mark; a holder whose
# session the server ends (pg_terminate_backend) while its command runs:
# the next --lock-delay run waits out its lease (U + 1 s from the grant)
# before its command starts, and one without --lock-delay does not; a run
# that times out while waiting leaves the mark for the next; a mark whose
# commit waits for a synchronous standby holds the run back, one whose
# wait was cancelled gives the grant back, and so does one whose commit
# fails after its statement answered; a mark statement blocked on another
# transaction ends with the timeout; a role without the grants is told
# which, and the documented grants suffice.
# Runs under tests/pg/with-postgres.sh (a Unix socket: --lock-delay keeps
# the lease there).
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
name="lock-delay-test"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
sql() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }
# A lease of 7 s with --kill-after 1: U = 4 s, so the wait is 5 s.
short=(--lock-delay --lease 7 --kill-after 1)
waiting="lock-delay: waiting out the previous holder's lease"

capture "$A" run --lock-delay "$name" -- echo never
check "no schema: lock error" "$EXIT_LOCK_ERROR" "$RC"
case $ERR in *"advlock setup creates it"*) pass ;; *) fail "no schema: names advlock setup: $ERR" ;; esac
check "no schema: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"

for refused in --shared --xact "--lease 0"; do
    # shellcheck disable=SC2086 # the option and its value
    capture "$A" run --lock-delay $refused "$name" -- echo never
    check "--lock-delay $refused refused" "$EXIT_USAGE" "$RC"
done

capture "$A" setup
check "setup" "0:" "$RC:$ERR"

# A clean hand-off: no mark before, none after, nothing waited out.
capture "$A" run "${short[@]}" "$name" -- echo ran
check "clean: ran" "0:ran" "$RC:$OUT"
case $ERR in *"$waiting"*) fail "clean: waited: $ERR" ;; *) pass ;; esac
check "clean: the release cleared the mark" 0 "$(sql "SELECT count(*) FROM advlock.mark")"

# A holder whose session the server ends, its command still running.
# Prints the holder's token once its mark is there.
terminate_holder() {
    "$A" run "${short[@]}" "$name" -- sleep 60 2>"$T/holder.err" &
    holder=$!
    local token=""
    for _ in $(seq 100); do
        token=$(sql "SELECT token FROM advlock.mark")
        [ -n "$token" ] && break
        sleep 0.1
    done
    sql "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted" >/dev/null
    wait "$holder"
    echo $? >"$T/holder.rc"
    echo "$token"
}

token=$(terminate_holder)
check "terminated: the holder stopped" "$EXIT_LOCK_ERROR" "$(cat "$T/holder.rc")"
check "terminated: its mark stays" "$token" "$(sql "SELECT token FROM advlock.mark")"
# Timed out before the wait ends: given back, the mark left as it was.
capture "$A" run "${short[@]}" --timeout 2 "$name" -- echo never
check "waiting: timed out" "$EXIT_BUSY:" "$RC:$OUT"
case $ERR in *"$waiting"*) pass ;; *) fail "waiting: said why: $ERR" ;; esac
check "timed out: the mark left" "$token" "$(sql "SELECT token FROM advlock.mark")"
check "timed out: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
# The next run waits U + 1 s from its grant, which comes after its start.
start=$(date +%s%N)
capture "$A" run "${short[@]}" --log-format json "$name" -- date +%s%N
check "waited: ran" 0 "$RC"
case $ERR in *"$waiting"*) pass ;; *) fail "waited: said why: $ERR" ;; esac
check "waited out U + 1 s before the command" 1 "$(((OUT - start) / 1000000 >= 5000))"
check "waited: its release cleared its mark" 0 "$(sql "SELECT count(*) FROM advlock.mark")"

# Without --lock-delay a run reads no mark: it starts at once.
token=$(terminate_holder)
capture "$A" run "$name" -- echo ran
check "off: ran" "0:ran" "$RC:$OUT"
case $ERR in *"$waiting"*) fail "off: waited: $ERR" ;; *) pass ;; esac
check "off: the mark left" "$token" "$(sql "SELECT token FROM advlock.mark")"

# A synchronous standby that never answers: the mark's commit waits for
# it, so the run is not told it holds the lock (its command does not
# start) until the commit returns; a cancel of that wait commits locally
# with the server's warning, and the grant is given back.
sql "DELETE FROM advlock.mark" >/dev/null
sql "ALTER SYSTEM SET synchronous_standby_names = 'advlock_no_such_standby'" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
"$A" run "${short[@]}" --timeout 60 "$name" -- touch "$T/sync.ran" 2>"$T/sync.err" &
runner=$!
waiter=""
for _ in $(seq 100); do
    waiter=$(sql "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    [ -n "$waiter" ] && break
    sleep 0.1
done
check "sync standby: the mark's commit waits" 1 "$([ -n "$waiter" ] && echo 1)"
check "sync standby: not held while it waits" 0 "$([ -e "$T/sync.ran" ] && echo 1 || echo 0)"
sql "SELECT pg_cancel_backend($waiter)" >/dev/null
wait "$runner"
check "sync standby: cancelled: lock error" "$EXIT_LOCK_ERROR" "$?"
check "sync standby: its command never ran" 0 "$([ -e "$T/sync.ran" ] && echo 1 || echo 0)"
case $(cat "$T/sync.err") in *"may not be on the synchronous standby"*) pass ;;
*) fail "sync standby: said why: $(cat "$T/sync.err")" ;; esac
check "sync standby: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sql "DELETE FROM advlock.mark" >/dev/null

# A mark whose commit fails after its statement answered (a deferred
# trigger's error, at the batch's sync): the mark is not there, so the run
# is not told it holds the lock.
sql "CREATE FUNCTION refuse_mark() RETURNS trigger LANGUAGE plpgsql
     AS \$\$BEGIN RAISE EXCEPTION 'no mark at this commit'; END\$\$" >/dev/null
sql "CREATE CONSTRAINT TRIGGER refuse_mark AFTER INSERT OR UPDATE ON advlock.mark
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_mark()" >/dev/null
capture "$A" run "${short[@]}" "$name" -- echo ran
check "commit failed: lock error, never ran" "$EXIT_LOCK_ERROR:" "$RC:$OUT"
case $ERR in *"no mark at this commit"*) pass ;; *) fail "commit failed: said why: $ERR" ;; esac
check "commit failed: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
check "commit failed: no mark" 0 "$(sql "SELECT count(*) FROM advlock.mark")"
sql "DROP TRIGGER refuse_mark ON advlock.mark" >/dev/null

# A role without the grants is told which to ask for.
sql "CREATE ROLE delay_user LOGIN" >/dev/null
capture "$A" run "${short[@]}" -d "user=delay_user" "$name" -- echo never
check "no grants: lock error" "$EXIT_LOCK_ERROR" "$RC"
case $ERR in *"lock-delay needs grants this role lacks; a DBA runs: GRANT USAGE ON SCHEMA advlock TO delay_user;"*"GRANT DELETE ON advlock.mark TO delay_user;"*) pass ;;
*) fail "no grants: named: $ERR" ;; esac
check "no grants: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
# The grants docs/operators.md lists (read from there) are enough.
sql "$(sed -n '/^## Lock-delay/,/^## /{/^GRANT /p}' "$(dirname "$0")/../../docs/operators.md" |
    sed 's/lock_users/delay_user/')" >/dev/null
capture "$A" run "${short[@]}" -d "user=delay_user" "$name" -- echo ran
check "the documented grants" "0:ran" "$RC:$OUT"

# A mark statement blocked on another transaction (its insert of the
# key's row, not committed for 6 s): --timeout bounds it, the statement
# cancelled; nothing is left locked, and no mark.
key=$("$A" run "${short[@]}" "$name" -- psql -X -At -c "SELECT key FROM advlock.mark")
psql -X -At -c "BEGIN; INSERT INTO advlock.mark (key, token, stop_ms, beat)
    VALUES ($key, 42, 1000, now()); SELECT pg_sleep(6); ROLLBACK" >/dev/null &
blocker=$!
for _ in $(seq 50); do
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(6)%'
        AND pid <> pg_backend_pid()")" = 1 ] && break
    sleep 0.1
done
start=$(date +%s%N)
# The default lease: a blocked mark holds up the heartbeats too, and a
# short lease would run out first (the acquire then fails with it).
capture "$A" run --lock-delay --timeout 2 "$name" -- echo never
check "blocked mark: timed out" "$EXIT_BUSY:" "$RC:$OUT"
check "blocked mark: by its timeout" 1 "$((($(date +%s%N) - start) / 1000000 < 3500))"
check "blocked mark: nothing left locked" 0 \
    "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
wait "$blocker"
check "blocked mark: no mark left" 0 "$(sql "SELECT count(*) FROM advlock.mark")"

finish
