#!/usr/bin/env bash
# advlock run with several names against a real server: all held on one
# session while the command runs and none after; two runs naming the same
# locks in opposite orders never deadlock nor overlap; a name that cannot be
# taken (timeout, signal) gives back the names taken before it; a name given
# twice is refused. Runs under tests/pg/with-postgres.sh, or under
# tests/pg/with-pgbouncer.sh, which adds runs through its session pool.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
TMPDIR_NAMES=$(mktemp -d)
trap 'rm -rf "$TMPDIR_NAMES"' EXIT

# Two names, lo and hi, lo's key the smaller: every run takes lo first.
one="names-migration"
two="names-tenant-42"
key_of() { "$A" key "$1" | cut -f1; }
if [ "$(key_of "$one")" -lt "$(key_of "$two")" ]; then lo=$one hi=$two; else lo=$two hi=$one; fi

# How many sessions hold the named lock, in any mode (a psql -c of it).
held_sql() {
    local classid objid
    read -r _ _ classid objid < <("$A" key "$1")
    echo "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
          AND classid = $classid AND objid = $objid AND objsubid = 1"
}
held() { psql -X -At -c "$(held_sql "$1")"; }
advisory_locks() { psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"; }
wait_until_held() {
    for _ in $(seq 200); do [ "$(held "$1")" = 1 ] && return 0; sleep 0.05; done
    return 1
}
# Holds a lock from a psql session of its own (application names-holder)
# until release_outside.
hold_outside() {
    psql -X -q -c "SET application_name = 'names-holder'" \
         -c "SELECT pg_advisory_lock($(key_of "$1"))" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
    outside=$!
    wait_until_held "$1" || fail "the outside holder never took '$1'"
}
# Ends the server sessions the condition picks (pg_stat_activity's columns).
end_sessions() {
    psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE $1" >/dev/null
}
release_outside() {
    end_sessions "application_name = 'names-holder'"
    wait "$outside" 2>/dev/null
    for _ in $(seq 100); do [ "$(advisory_locks)" = 0 ] && return 0; sleep 0.05; done
    fail "the outside holder's lock stayed"
}

# The statements the server ran, from its log, while log_statement = all.
log_all() {
    psql -X -q -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.2 # the postmaster's reload, before the next session forks
    log_from=$(cat "$ADVLOCK_PG_DATA"/log/* | wc -l)
}
log_none() {
    psql -X -q -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null
}
# The lock parameter ($1) of each logged statement that holds TEXT, in order.
logged_keys() {
    cat "$ADVLOCK_PG_DATA"/log/* | tail -n +$((log_from + 1)) | grep -A1 -F "$1" |
        sed -n "s/.*DETAIL:  parameters: \$1 = '\(-\{0,1\}[0-9]*\)'.*/\1/p" | xargs
}

# Taken by key whatever the order given, released the other way round.
log_all
capture "$A" run -q "$hi" "$lo" -- true
log_none
check "taken by key" "$(key_of "$lo") $(key_of "$hi")" "$(logged_keys "pg_try_advisory_lock(")"
check "released the other way round" "$(key_of "$hi") $(key_of "$lo")" "$(logged_keys "pg_advisory_unlock(")"

# Both names held, by one session, while the command runs; none after; the
# command's status is the run's.
export HELD_BOTH_SQL="SELECT count(*) || ' ' || count(DISTINCT pid) FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'"
capture "$A" run "$hi" "$lo" -- sh -c 'psql -X -At -c "$HELD_BOTH_SQL"; exit 3'
check "two names: held by one session while the command runs" "2 1" "$OUT"
check "two names: the command's status" 3 "$RC"
check "two names: none held after" 0 "$(advisory_locks)"
check "two names: said once both are held, in the order taken" "advlock: holding locks '$lo', '$hi'" "$ERR"
# A line written for one name with a "--" among the command's arguments:
# every word before the "--" is a name now, and the run says so.
capture "$A" run "$lo" true -- echo ran
check "KEY COMMAND -- ARG: what runs" "0 ran" "$RC $OUT"
case "$ERR" in
    "advlock: holding locks '$lo', 'true'" | "advlock: holding locks 'true', '$lo'") pass ;;
    *) fail "KEY COMMAND -- ARG: both words before -- are names, said [$ERR]" ;;
esac
# Sixty long names do not fit the line: it ends with a mark, in quotes.
many=()
for i in $(seq 10 69); do many+=("a-rather-long-lock-name-number-$i"); done
capture "$A" run "${many[@]}" -- true
case "$ERR" in
    "advlock: holding locks '"*"', '...'") pass ;;
    *) fail "sixty names: the list is cut with a mark [${ERR: -60}]" ;;
esac
# The run holds at most --capacity-share of the server's lock table, refused
# before it takes anything. make cli-test starts this server with
# max_locks_per_transaction = 10, so 1% of it is a dozen names.
lock_table=$(psql -X -At -c "SELECT current_setting('max_locks_per_transaction')::int *
    (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int)")
share=$((lock_table / 100))
if [ "$share" -lt 64 ]; then
    past=()
    for i in $(seq 0 "$share"); do past+=("capacity-$i"); done
    capture "$A" run -q --capacity-share 1 "${past[@]}" -- echo ran
    check "past the share: refused, the command not run" "${EXIT_LOCK_ERROR} " "$RC $OUT"
    case "$ERR" in
        *"cannot take $((share + 1)) names: "*"max_locks_per_transaction 10 x"*"--capacity-share"*) pass ;;
        *) fail "past the share: the settings and numbers not said [$ERR]" ;;
    esac
    check "past the share: nothing held" 0 "$(advisory_locks)"
    capture "$A" run -q --capacity-share 1 "${past[@]:1}" -- echo ran
    check "at the share: the run holds them" "0 ran" "$RC $OUT"
else
    fail "the server's lock table ($lock_table) is too large for the share's test"
fi
capture "$A" run -q --xact "$lo" "$hi" -- psql -X -At -c "$HELD_BOTH_SQL"
check "--xact: both held in the transaction" "2 1" "$OUT"
check "--xact: none held after" 0 "$(advisory_locks)"
capture "$A" run -q --wait "$lo" "$hi" -- psql -X -At -c "$HELD_BOTH_SQL"
check "--wait: both held" "2 1" "$OUT"
capture "$A" run -q --shared "$lo" "$hi" -- "$A" run -q --shared -w 0 "$hi" "$lo" -- \
    psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ShareLock'"
check "--shared: two runs share both names" 4 "$OUT"

# Opposite orders, started together, round after round: each run gets both
# names within its timeout, and the commands never overlap (a command's
# begin is always followed by its own end).
opposite_rounds() { # ROUNDS LABEL [advlock options...]
    local rounds=$1 label=$2 log="$TMPDIR_NAMES/overlap-$2" r rc1 rc2
    shift 2
    : >"$log"
    local cmd='echo "begin $0" >>"$1"; sleep 0.05; echo "end $0" >>"$1"'
    local deadlocked=0
    for r in $(seq "$rounds"); do
        "$A" run -q -w 5 "$@" "$lo" "$hi" -- sh -c "$cmd" "$r-a" "$log" &
        local p1=$!
        "$A" run -q -w 5 "$@" "$hi" "$lo" -- sh -c "$cmd" "$r-b" "$log" &
        local p2=$!
        wait "$p1" && rc1=0 || rc1=$?
        wait "$p2" && rc2=0 || rc2=$?
        [ "$rc1" = 0 ] && [ "$rc2" = 0 ] || deadlocked=$((deadlocked + 1))
    done
    check "$label: every run got both names in time" 0 "$deadlocked"
    local bad
    bad=$(awk 'NR % 2 == 1 { if ($1 != "begin") { print NR; exit } open = $2 }
               NR % 2 == 0 { if ($1 != "end" || $2 != open) { print NR; exit } }' "$log")
    check "$label: commands never overlapped" "" "$bad"
    check "$label: every command ran" $((2 * 2 * rounds)) "$(wc -l <"$log")"
}
opposite_rounds 20 "opposite orders"
opposite_rounds 5 "opposite orders, --wait" --wait
opposite_rounds 5 "opposite orders, --xact" --xact

# Opposite orders, staged in the server's queue (--wait: first come, first
# served), where taking names in the order given deadlocks every time: hi
# is held from outside, a hi-lo run queues, then a lo-hi run. In the order
# given, the hi-lo run would queue for hi holding nothing and the lo-hi run
# take lo and queue for hi behind it; hi freed, the hi-lo run would get it
# and wait for lo: a cycle, which the server breaks by failing one run
# ("deadlock detected"). By key, both runs take lo first.
waiting() { psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"; }
wait_until_waiting() {
    for _ in $(seq 200); do [ "$(waiting)" = "$1" ] && return 0; sleep 0.05; done
    return 1
}
stuck=0
for r in 1 2 3; do
    hold_outside "$hi"
    "$A" run -q --wait -w 5 "$hi" "$lo" -- sleep 0.1 &
    p1=$!
    wait_until_waiting 1 || fail "staged round $r: the first run never queued"
    "$A" run -q --wait -w 5 "$lo" "$hi" -- sleep 0.1 &
    p2=$!
    wait_until_waiting 2 || fail "staged round $r: the second run never queued"
    release_outside
    wait "$p1" || stuck=$((stuck + 1))
    wait "$p2" || stuck=$((stuck + 1))
done
check "staged opposite orders: no run failed" 0 "$stuck"

# --xact: waiting for the second name keeps the transaction, and the first
# name in it, open between the tries.
hold_outside "$hi"
"$A" run -q --xact "$lo" "$hi" -- psql -X -At -c "$HELD_BOTH_SQL" >"$TMPDIR_NAMES/xact.out" &
waiter=$!
wait_until_held "$lo" || fail "--xact wait: lo never taken"
sleep 0.5
release_outside
wait "$waiter"
check "--xact: a wait for the second name keeps the first" "2 1" "$(cat "$TMPDIR_NAMES/xact.out")"

# A timeout on the second name gives back the first, and says which name was
# busy (and, with --diagnose, who holds it).
hold_outside "$hi"
holder_pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'names-holder'")
capture "$A" run -q --diagnose -w 1 "$hi" "$lo" -- echo never
check "timeout on the second name: status" 1 "$RC"
check "timeout on the second name: command not run" "" "$OUT"
case "$ERR" in
    "advlock: Could not acquire migration lock for '$hi' within 1s. Held by pid $holder_pid (application 'names-holder', state active) for "*"s."$'\n'"advlock: lock '$lo' released: the run holds all its names or none") pass ;;
    *) fail "timeout on the second name: message [$ERR]" ;;
esac
check "timeout on the second name: the first not held after" 0 "$(held "$lo")"
# status names the busy one.
capture "$A" status "$lo" "$hi"
check "status: busy one named" "$(printf '%s\tfree\n%s\theld' "$lo" "$hi")" "$(grep -v '^ ' <<<"$OUT" | cut -f1,2)"
# A signal while waiting for the second name gives back the first.
"$A" run -q "$lo" "$hi" -- echo never 2>"$TMPDIR_NAMES/signal.err" &
waiter=$!
wait_until_held "$lo" || fail "SIGTERM: the waiter never took lo"
sleep 0.2
kill -TERM "$waiter"
wait "$waiter"
check "SIGTERM while waiting for the second name: status" 143 "$?"
check "SIGTERM while waiting for the second name: the first not held after" 0 "$(held "$lo")"
check "SIGTERM while waiting for the second name: said" \
    "advlock: lock '$lo' released: the run holds all its names or none" "$(cat "$TMPDIR_NAMES/signal.err")"
# The server ending the session while the second name is waited for: the
# first went with the session.
"$A" run -q --application-name names-lost "$lo" "$hi" -- echo never 2>"$TMPDIR_NAMES/lost.err" &
waiter=$!
wait_until_held "$lo" || fail "lost: the waiter never took lo"
end_sessions "application_name = 'names-lost'"
wait "$waiter"
check "session ended while waiting for the second name: status" "$EXIT_LOCK_ERROR" "$?"
check "session ended while waiting for the second name: the first not held after" 0 "$(held "$lo")"
grep -q "'$hi'" "$TMPDIR_NAMES/lost.err" && pass || fail "lost: message does not name '$hi': [$(cat "$TMPDIR_NAMES/lost.err")]"
# --xact: the same, by ROLLBACK.
capture "$A" run -q --xact -w 0.5 "$lo" "$hi" -- echo never
check "--xact timeout on the second name: status" 1 "$RC"
case "$ERR" in
    *"lock '$lo' released: the run holds all its names or none") pass ;;
    *) fail "--xact timeout on the second name: message [$ERR]" ;;
esac
check "--xact timeout on the second name: the first not held after" 0 "$(held "$lo")"
release_outside
# The session ending while the command runs: every name goes with it, the
# run says so once, naming them all, and stops the command.
for xact in "" --xact; do
    rm -f "$TMPDIR_NAMES/gone.ran"
    "$A" run -q $xact --application-name names-gone "$lo" "$hi" -- \
        sh -c "touch '$TMPDIR_NAMES/gone.ran'; sleep 30" 2>"$TMPDIR_NAMES/gone.err" &
    runner=$!
    for _ in $(seq 200); do [ -e "$TMPDIR_NAMES/gone.ran" ] && break; sleep 0.05; done
    [ -e "$TMPDIR_NAMES/gone.ran" ] || fail "gone$xact: the command never ran"
    end_sessions "application_name = 'names-gone'"
    wait "$runner"
    check "session ended while the command ran$xact: status" "$EXIT_LOCK_ERROR" "$?"
    check "session ended while the command ran$xact: said once, every name" \
        "advlock: connection to the server lost while the command ran: lock '$lo', '$hi' is no longer held; terminating the command" \
        "$(cat "$TMPDIR_NAMES/gone.err")"
    check "session ended while the command ran$xact: none held after" 0 "$(advisory_locks)"
done

# On a terminal, the progress line's elapsed time is the run's, as its one
# --timeout is: waiting for the second name, it goes on from the first's.
hold_outside "$hi"
"$A" run -q "$lo" -- sleep 1.5 &
holder_lo=$!
wait_until_held "$lo" || fail "progress: the holder never took '$lo'"
tty_out=$(script -qec "'$A' run -w 3 '$lo' '$hi' -- echo never" /dev/null)
wait "$holder_lo"
# The elapsed seconds of each progress line for a name, in order.
elapsed() {
    grep -o "waiting for '$1': attempt [0-9]*, [0-9.]*s elapsed" <<<"$tty_out" |
        sed 's/.*, \([0-9.]*\)s elapsed/\1/'
}
last_lo=$(elapsed "$lo" | tail -n 1)
first_hi=$(elapsed "$hi" | head -n 1)
awk -v lo="${last_lo:-x}" -v hi="${first_hi:-0}" 'BEGIN { exit !(lo != "x" && hi > 0 && hi >= lo) }' &&
    pass ||
    fail "progress: the second name's elapsed time starts again ('$lo' last ${last_lo}s, '$hi' first ${first_hi}s)"
grep -q "waiting for '$lo': attempt" <<<"$tty_out" && pass || fail "progress: the first name's line [$tty_out]"
release_outside

# A timeout on the first name: nothing was taken, nothing to give back.
hold_outside "$lo"
capture "$A" run -q -w 0 "$hi" "$lo" -- echo never
check "timeout on the first name" "1 advlock: Could not acquire migration lock for '$lo' within 0s." "$RC $ERR"
release_outside

# A command that cannot be executed: every name given back.
capture "$A" run -q "$lo" "$hi" -- /nonexistent/command
check "command not found: status" "$EXIT_NO_COMMAND" "$RC"
check "command not found: none held after" 0 "$(advisory_locks)"

# A name given twice is refused before connecting; so is --fence with several.
capture "$A" run "$lo" "$hi" "$lo" -- echo never
check "a name twice: refused" "${EXIT_USAGE} advlock: lock '$lo' is named twice" "$RC $ERR"
capture "$A" run --fence "$lo" "$hi" -- echo never
check "--fence with several names: refused" "${EXIT_USAGE} advlock: --fence: one name only (a token fences one lock)" "$RC $ERR"
# Without "--", the first word alone is the name, as ever.
capture "$A" run -q "$lo" sh -c 'psql -X -At -c "$HELD_BOTH_SQL"'
check "no --: one name" "1 1" "$OUT"

# Over TCP (ADVLOCK_PG_LISTEN), under a lease: it is the session's, for every
# name; while the second name is waited for, the first is held under it, and
# its heartbeats go between the tries, so a wait longer than the lease does
# not run it out.
if [ -n "${ADVLOCK_PG_LISTEN:-}" ]; then
    psql -X -q -c "SET application_name = 'names-holder'" -c "SELECT pg_advisory_lock($(key_of "$hi"))" \
         -c "SELECT pg_sleep(7)" >/dev/null 2>&1 &
    outside=$!
    wait_until_held "$hi" || fail "lease: the outside holder never took '$hi'"
    tcp="host=${ADVLOCK_PG_LISTEN%/*} port=$PGPORT dbname=$PGDATABASE user=$PGUSER"
    capture "$A" run -q -d "$tcp" --lease 6 --kill-after 0 -w 30 "$lo" "$hi" -- psql -X -At -c "$HELD_BOTH_SQL"
    check "lease: a wait for the second name longer than the lease" "0 2 1" "$RC $OUT"
    wait "$outside"
    capture "$A" run -q -d "$tcp" --wait "$lo" "$hi" -- echo never
    check "lease: --wait with several names refused" "$EXIT_USAGE" "$RC"
    capture "$A" run -q -d "$tcp" --lease 0 --wait "$lo" "$hi" -- echo ran
    check "lease: --wait with several names and --lease 0" "0 ran" "$RC $OUT"
fi

# Through PgBouncer's session pool, verifying the names while the command
# runs (each interval asks about every name); and its transaction pool.
if [ -n "${ADVLOCK_TEST_PGBOUNCER_SESSION:-}" ]; then
    log_all
    capture "$A" run -q -d "$ADVLOCK_TEST_PGBOUNCER_SESSION" --verify-interval 0.1 "$lo" "$hi" -- \
        sh -c 'sleep 0.5; psql -X -At -c "$HELD_BOTH_SQL"'
    log_none
    check "session pool: both held, verified" "0 2 1" "$RC $OUT"
    # About five rounds of verifies, each asking about lo, then hi.
    verified=$(logged_keys "AND granted AND pid = pg_catalog.pg_backend_pid()" |
        tr ' ' '\n' | uniq -c | awk '{ print $1 }' | sort -u | xargs)
    check "session pool: each verify round asks about both names" 1 "$verified"
    rounds=$(logged_keys "AND granted AND pid = pg_catalog.pg_backend_pid()" | wc -w)
    [ "$rounds" -ge 4 ] && pass || fail "session pool: $rounds verifies, not two rounds"
    opposite_rounds 5 "session pool, opposite orders" -d "$ADVLOCK_TEST_PGBOUNCER_SESSION"
    check "session pool: none held after" 0 "$(advisory_locks)"
    # Through the transaction pool, --xact: one transaction holds them all.
    capture "$A" run -q --xact -d "$ADVLOCK_TEST_PGBOUNCER_TX" "$hi" "$lo" -- psql -X -At -c "$HELD_BOTH_SQL"
    check "transaction pool, --xact: both held" "0 2 1" "$RC $OUT"
    opposite_rounds 5 "transaction pool, --xact, opposite orders" --xact -d "$ADVLOCK_TEST_PGBOUNCER_TX"
    check "transaction pool: none held after" 0 "$(advisory_locks)"

    # Another client of the transaction pool can land on the server session
    # that holds the run's names, idle in the pool while the command runs,
    # and unlock one there (unlock_on_pool). Without a verify, the release of
    # that name fails at the end; the others must still be given back, or
    # the pool keeps them held after advlock has gone.
    unlock_on_pool() {
        for _ in $(seq 200); do
            psql -X -q -d "$ADVLOCK_TEST_PGBOUNCER_TX" -c "SELECT pg_advisory_unlock($(key_of "$1"))" \
                >/dev/null 2>&1
            [ "$(held "$1")" = 0 ] && return 0
        done
        return 1
    }
    "$A" run -q -d "$ADVLOCK_TEST_PGBOUNCER_TX" --verify-interval 0 "$lo" "$hi" -- sleep 2 \
        2>"$TMPDIR_NAMES/release.err" &
    runner=$!
    wait_until_held "$lo" && wait_until_held "$hi" || fail "failed release: the run never took both"
    unlock_on_pool "$hi" || fail "failed release: '$hi' never unlocked through the pool"
    wait "$runner"
    check "a failed release: status" "$EXIT_LOCK_ERROR" "$?"
    check "a failed release: the other name given back" 0 "$(held "$lo")"
    grep -q "releasing lock '$hi'" "$TMPDIR_NAMES/release.err" && pass ||
        fail "a failed release: not said [$(cat "$TMPDIR_NAMES/release.err")]"
    # The pool's server sessions keep the run's claim (and, before the fix,
    # the lock): ended, for the next run to claim one afresh.
    end_sessions "backend_type = 'client backend' AND pid <> pg_backend_pid()"

    # The same on the all-or-none path: waiting for a third name, busy (its
    # key the largest), the second is unlocked there; at the timeout, the
    # first must still be given back.
    for third in names-busy-{1..50}; do [ "$(key_of "$third")" -gt "$(key_of "$hi")" ] && break; done
    hold_outside "$third"
    "$A" run -q -d "$ADVLOCK_TEST_PGBOUNCER_TX" -w 4 "$third" "$lo" "$hi" -- echo never \
        2>"$TMPDIR_NAMES/give-back.err" &
    runner=$!
    wait_until_held "$lo" && wait_until_held "$hi" || fail "failed give-back: the run never took two"
    unlock_on_pool "$hi" || fail "failed give-back: '$hi' never unlocked through the pool"
    wait "$runner"
    check "a failed give-back: status" 1 "$?"
    check "a failed give-back: the first name given back" 0 "$(held "$lo")"
    grep -q "lock '$lo' released: the run holds all its names or none" "$TMPDIR_NAMES/give-back.err" && pass ||
        fail "a failed give-back: not said [$(cat "$TMPDIR_NAMES/give-back.err")]"
    release_outside
    end_sessions "backend_type = 'client backend' AND pid <> pg_backend_pid()"

    # With the verify, the second name unlocked there is seen while the
    # command runs: the JSON log's lock_lost names that name.
    "$A" run -q -d "$ADVLOCK_TEST_PGBOUNCER_TX" --verify-interval 0.2 --log-format json "$lo" "$hi" -- \
        sleep 20 2>"$TMPDIR_NAMES/unverified.json" &
    runner=$!
    wait_until_held "$lo" && wait_until_held "$hi" || fail "unverified: the run never took both"
    unlock_on_pool "$hi" || fail "unverified: '$hi' never unlocked through the pool"
    wait "$runner"
    check "unverified second name: status" "$EXIT_LOCK_ERROR" "$?"
    lost=$(grep '"event":"lock_lost"' "$TMPDIR_NAMES/unverified.json")
    check "unverified second name: the event's lock" "\"lock\":\"$hi\"" "$(grep -o '"lock":"[^"]*"' <<<"$lost")"
    check "unverified second name: the event's key" "\"key\":\"$(key_of "$hi")\"" \
        "$(grep -o '"key":"[^"]*"' <<<"$lost")"
    check "unverified second name: none held after" 0 "$(advisory_locks)"
fi
finish
