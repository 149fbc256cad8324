#!/usr/bin/env bash
# advlock run --log-format json against a real server: every line of stderr
# one JSON object with the fields every event has, and the events of a run
# in order: an uncontended run, a contended one that waits and acquires,
# one that times out naming the holder (--diagnose), a forwarded SIGTERM, a
# lease renewed and then lost (its server backend stopped), names and
# arguments that need escaping. Text mode says nothing where it never did.
# Runs under tests/pg/with-postgres.sh with ADVLOCK_PG_LISTEN set (the lease
# needs TCP: on a Unix socket a run holds none).
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
: "${ADVLOCK_PG_LISTEN:?run under tests/pg/with-postgres.sh with ADVLOCK_PG_LISTEN=ADDRESS/32}"
tcp="host=${ADVLOCK_PG_LISTEN%/*} port=$PGPORT"
name="json-test-日本"
read -r _ _ classid objid < <("$A" key "$name")
held() {
    psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
                    AND classid = $classid AND objid = $objid AND objsubid = 1"
}
wait_for_holder() {
    for _ in $(seq 100); do [ "$(held)" = 1 ] && return 0; sleep 0.05; done
    return 1
}
backend_of() { psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$1'"; }
T=$(mktemp -d)
trap 'kill -CONT "${stopped_backend:-0}" 2>/dev/null; rm -rf "$T"' EXIT

# Debian's python3 (deps-cli): its json module is the judge of every line.
py=/usr/bin/python3
# events FILE: checks every line of FILE (one JSON object, "ts" in RFC 3339
# UTC with milliseconds, a level, a message, the key of a lock as a decimal
# string, the fields each event must have, "lock" on the events about one
# lock and "locks" with as many "keys" on those about the whole run) and
# prints the events in order, or the first fault.
events() {
    "$py" - "$1" <<'EOF'
import json, re, sys
required = {
    "trying": ["attempt"], "waiting": ["attempt", "retry_in_ms"],
    "acquired": ["attempts", "wait_ms"], "lease_renewed": ["deadline_ms"],
    "lock_lost": ["reason", "command_stopped"], "command_started": ["pid", "command"],
    "signal_sent": ["signal"], "command_exited": ["pid", "status"], "released": ["by"],
    "release_failed": [], "timed_out": ["attempts", "wait_ms", "timeout_ms"],
    "failed": [], "cancelled": ["signal"], "message": [], "exit": ["status"],
}
one_lock = {"trying", "waiting", "acquired", "released", "release_failed", "timed_out",
            "failed", "cancelled"}
whole_run = {"lease_renewed", "lock_lost", "command_started", "signal_sent", "command_exited"}
names = []
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    try:
        o = json.loads(line)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["ts"]), "ts"
        assert o["level"] in ("debug", "info", "warning", "error"), "level"
        assert isinstance(o["message"], str) and o["message"], "message"
        assert ("lock" in o) == ("key" in o), "lock and key together"
        assert "key" not in o or re.fullmatch(r"-?\d{1,19}", o["key"]), "key"
        if o["event"] in one_lock:
            assert "lock" in o and "locks" not in o, "one lock's event"
        if o["event"] in whole_run or "locks" in o:
            assert o["event"] in whole_run | {"exit"}, "locks on an event about one lock"
            assert isinstance(o["locks"], list) and o["locks"], "locks"
            assert len(o["keys"]) == len(o["locks"]), "a key for each lock"
            assert all(re.fullmatch(r"-?\d{1,19}", k) for k in o["keys"]), "keys"
            assert "lock" not in o or o["reason"] == "unverified", "lock on the run's event"
        missing = [f for f in required[o["event"]] if f not in o]
        assert not missing, "missing " + " ".join(missing)
        names.append(o["event"])
    except Exception as e:
        print("line %d: %r: %s" % (n, e, line.rstrip()))
        sys.exit(0)
print(" ".join(names))
EOF
}
# field FILE EVENT PATH: the value at PATH (dotted; "command.1") in the last
# EVENT of FILE (EVENT#N: the Nth; EVENT@LOCK: of those about LOCK), as
# JSON; null where there is none.
field() {
    "$py" - "$@" <<'EOF'
import json, sys
path = sys.argv[3].split(".")
event, _, nth = sys.argv[2].partition("#")
event, _, lock = event.partition("@")
found = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
found = [o for o in found if o["event"] == event and (not lock or o.get("lock") == lock)]
value = found[int(nth) - 1 if nth else -1] if len(found) >= int(nth or 1) else None
for p in path:
    value = None if value is None else value[int(p)] if isinstance(value, list) else value.get(p)
print(json.dumps(value, ensure_ascii=False))
EOF
}

# Uncontended: the command's status is advlock's, every step said.
"$A" run --log-format json "$name" -- sh -c 'exit 3' 2>"$T/plain"
check "uncontended: status" 3 "$?"
check "uncontended: events" "trying acquired command_started command_exited released exit" \
    "$(events "$T/plain")"
check "uncontended: the lock's name" "\"$name\"" "$(field "$T/plain" acquired lock)"
check "uncontended: the key, a string" "\"$("$A" key "$name" | awk '{ print $1 }')\"" \
    "$(field "$T/plain" acquired key)"
check "uncontended: one attempt" 1 "$(field "$T/plain" acquired attempts)"
check "uncontended: the command" '["sh", "-c", "exit 3"]' "$(field "$T/plain" command_started command)"
check "uncontended: the run's events name its locks" "[\"$name\"]" "$(field "$T/plain" command_started locks)"
check "uncontended: the exit too" "[\"$name\"]" "$(field "$T/plain" exit locks)"
check "uncontended: exit code" 3 "$(field "$T/plain" command_exited exit_code)"
check "uncontended: released by unlock" '"unlock"' "$(field "$T/plain" released by)"
check "uncontended: exit status" 3 "$(field "$T/plain" exit status)"
check "uncontended: nothing held" 0 "$(held)"
"$A" run "$name" -- true 2>"$T/text"
check "text: a clean run says nothing" "" "$(cat "$T/text")"

# Contended: tries and sleeps until the holder lets go, then acquires; with
# --diagnose the first waiting event names the holder, asked then.
"$A" run -q --application-name json-holder "$name" -- sleep 1.5 &
holder=$!
wait_for_holder || fail "the holder never appeared"
holder_pid=$(backend_of json-holder)
"$A" run --log-format json --diagnose -w 20 "$name" -- true 2>"$T/waited"
check "contended: status" 0 "$?"
seq_waited=$(events "$T/waited")
[[ $seq_waited =~ ^(trying\ waiting\ )+trying\ acquired\ command_started\ command_exited\ released\ exit$ ]] &&
    pass || fail "contended: events [$seq_waited]"
tries=$(grep -o trying <<<"$seq_waited" | wc -l)
check "contended: attempts counted" "$tries" "$(field "$T/waited" acquired attempts)"
check "contended: the first sleep is the reference's" 100 "$(field "$T/waited" 'waiting#1' retry_in_ms)"
check "contended, --diagnose: the first wait names the holder" "$holder_pid" \
    "$(field "$T/waited" 'waiting#1' holder.pid)"
check "contended, --diagnose: its application" '"json-holder"' \
    "$(field "$T/waited" 'waiting#1' holder.application)"
check "contended, --diagnose: asked once" null "$(field "$T/waited" 'waiting#2' holder)"
wait_ms=$(field "$T/waited" acquired wait_ms)
[ "$wait_ms" -ge 500 ] && pass || fail "contended: waited ${wait_ms} ms for a holder of 1.5 s"
wait "$holder"

# Timed out with --diagnose: the holder named, no command run.
"$A" run -q --application-name json-holder "$name" -- sleep 3 &
holder=$!
wait_for_holder || fail "the holder never appeared"
holder_pid=$(backend_of json-holder)
"$A" run --log-format json --diagnose -w 0.5 "$name" -- echo never >"$T/out" 2>"$T/timeout"
check "timeout: status" 1 "$?"
check "timeout: command not run" "" "$(cat "$T/out")"
seq_timeout=$(events "$T/timeout")
[[ $seq_timeout =~ ^(trying\ waiting\ )+trying\ timed_out\ exit$ ]] &&
    pass || fail "timeout: events [$seq_timeout]"
check "timeout: the holder's pid" "$holder_pid" "$(field "$T/timeout" timed_out holder.pid)"
check "timeout: the holder's application" '"json-holder"' \
    "$(field "$T/timeout" timed_out holder.application)"
check "timeout: the bound" 500 "$(field "$T/timeout" timed_out timeout_ms)"
case "$(field "$T/timeout" timed_out message)" in
    "\"Could not acquire migration lock for '$name' within 0.5s. Held by pid $holder_pid (application 'json-holder', state idle) for "*"s.\"") pass ;;
    *) fail "timeout: message [$(field "$T/timeout" timed_out message)]" ;;
esac
check "timeout: level" '"warning"' "$(field "$T/timeout" timed_out level)"
"$A" run --log-format json -w 0 "$name" -- true 2>"$T/undiagnosed"
check "timeout without --diagnose: no holder" null "$(field "$T/undiagnosed" timed_out holder)"
"$A" run -w 0 "$name" -- true 2>"$T/text"
check "text: the timeout's sentence as before" \
    "advlock: Could not acquire migration lock for '$name' within 0s." "$(cat "$T/text")"
wait "$holder"

# With --xact the question goes between the transactions of the tries.
"$A" run -q --application-name json-holder "$name" -- sleep 1.5 &
holder=$!
wait_for_holder || fail "the holder never appeared"
holder_pid=$(backend_of json-holder)
"$A" run --log-format json --xact --diagnose -w 20 "$name" -- true 2>"$T/xact"
check "--xact --diagnose: status" 0 "$?"
check "--xact --diagnose: the first wait names the holder" "$holder_pid" \
    "$(field "$T/xact" 'waiting#1' holder.pid)"
check "--xact --diagnose: released by COMMIT" '"commit"' "$(field "$T/xact" released by)"
wait "$holder"

# SIGTERM to advlock reaches the command; the lock is released after.
"$A" run --log-format json "$name" -- sh -c 'trap "exit 5" TERM; sleep 30 & wait' 2>"$T/term" &
runner=$!
wait_for_holder || fail "SIGTERM: the run never held the lock"
sleep 0.2
kill -TERM "$runner"
wait "$runner"
check "SIGTERM: status" 5 "$?"
check "SIGTERM: events" "trying acquired command_started signal_sent command_exited released exit" \
    "$(events "$T/term")"
check "SIGTERM: forwarded" '"SIGTERM"' "$(field "$T/term" signal_sent signal)"
check "SIGTERM: the command's exit code" 5 "$(field "$T/term" command_exited exit_code)"
check "SIGTERM: nothing held" 0 "$(held)"

# Cancelled while waiting: SIGINT ends the wait.
"$A" run -q "$name" -- sleep 2 &
holder=$!
wait_for_holder || fail "the holder never appeared"
"$A" run --log-format json "$name" -- true 2>"$T/cancel" &
runner=$!
sleep 0.5
kill -INT "$runner"
wait "$runner"
check "cancelled: status" 130 "$?"
seq_cancel=$(events "$T/cancel")
[[ $seq_cancel =~ ^(trying\ waiting\ )+cancelled\ exit$ ]] && pass || fail "cancelled: events [$seq_cancel]"
check "cancelled: the signal" '"SIGINT"' "$(field "$T/cancel" cancelled signal)"
wait "$holder"

# A lease over TCP: heartbeats renew it while the command runs (--lease 7
# --kill-after 1: a heartbeat every 0.5 s, the stop deadline 2 s after it).
"$A" run --log-format json -d "$tcp" --lease 7 --kill-after 1 "$name" -- sleep 2.5 2>"$T/lease"
check "lease: status" 0 "$?"
seq_lease=$(events "$T/lease")
[[ $seq_lease =~ ^trying\ acquired\ command_started\ (lease_renewed\ ){2,}command_exited\ released\ exit$ ]] &&
    pass || fail "lease: events [$seq_lease]"
check "lease: its length" 7000 "$(field "$T/lease" acquired lease_ms)"
deadline=$(field "$T/lease" lease_renewed deadline_ms)
[ "$deadline" -gt 0 ] && [ "$deadline" -le 2000 ] && pass || fail "lease: deadline_ms $deadline"
"$A" run -d "$tcp" --lease 7 --kill-after 1 "$name" -- sleep 1 2>"$T/text"
check "text: a lease run says nothing" "" "$(cat "$T/text")"

# The lease runs out: the session's backend is stopped, no heartbeat
# answers, the run stops the command and fails; the lock is not released
# by advlock (the server frees it with the session).
"$A" run --log-format json -d "$tcp" --lease 7 --kill-after 1 --application-name json-lease \
    "$name" -- sleep 30 2>"$T/lost" &
runner=$!
wait_for_holder || fail "lease lost: the run never held the lock"
stopped_backend=$(backend_of json-lease)
kill -STOP "$stopped_backend"
wait "$runner"
check "lease lost: status" "$EXIT_LOCK_ERROR" "$?"
kill -CONT "$stopped_backend"
seq_lost=$(events "$T/lost")
[[ $seq_lost =~ ^trying\ acquired\ command_started\ (lease_renewed\ )*lock_lost\ signal_sent\ command_exited\ exit$ ]] &&
    pass || fail "lease lost: events [$seq_lost]"
check "lease lost: reason" '"lease"' "$(field "$T/lost" lock_lost reason)"
check "lease lost: the command stopped" true "$(field "$T/lost" lock_lost command_stopped)"
check "lease lost: level" '"error"' "$(field "$T/lost" lock_lost level)"
case "$(field "$T/lost" lock_lost message)" in
    "\"lock '$name' lost: its lease ran out: "*"; terminating the command\"") pass ;;
    *) fail "lease lost: message [$(field "$T/lost" lock_lost message)]" ;;
esac
check "lease lost: exit status" "$EXIT_LOCK_ERROR" "$(field "$T/lost" exit status)"
for _ in $(seq 100); do [ "$(held)" = 0 ] && break; sleep 0.05; done
check "lease lost: freed with the session" 0 "$(held)"

# The session killed while the command runs: the lock lost, the command
# stopped, nothing to release.
kill_me="SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'json-killed'"
"$A" run --log-format json --application-name json-killed "$name" -- \
    sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 10" 2>"$T/killed"
check "session killed: status" "$EXIT_LOCK_ERROR" "$?"
check "session killed: events" \
    "trying acquired command_started lock_lost signal_sent command_exited exit" "$(events "$T/killed")"
check "session killed: reason" '"connection"' "$(field "$T/killed" lock_lost reason)"
check "session killed: the text's sentence" \
    "\"connection to the server lost while the command ran: lock '$name' is no longer held; terminating the command\"" \
    "$(field "$T/killed" lock_lost message)"

# Over TCP the default lease (30 s) is too short for --kill-after 30:
# refused once connected, naming the minimum; a Unix socket runs it.
capture "$A" run -d "$tcp" --kill-after 30 "$name" -- echo never
check "TCP, default lease, --kill-after 30: refused" "${EXIT_USAGE} " "$RC $OUT"
case $ERR in *"--lease 30 is too short for --kill-after 30"*"at least 36 s"*) pass ;; *) fail "default lease too short: $ERR" ;; esac
capture "$A" run --xact -d "$tcp" --kill-after 30 "$name" -- true
check "TCP, --xact (no lease), --kill-after 30" "0" "$RC"

# A command that ignores SIGTERM gets SIGKILL after --kill-after.
"$A" run --log-format json --kill-after 0.3 "$name" -- \
    sh -c 'trap "" TERM; kill -TERM $PPID; sleep 5' 2>"$T/killed"
check "--kill-after: status" 137 "$?"
check "--kill-after: events" \
    "trying acquired command_started signal_sent signal_sent command_exited released exit" \
    "$(events "$T/killed")"
check "--kill-after: SIGKILL" '"SIGKILL"' "$(field "$T/killed" signal_sent signal)"
check "--kill-after: ended by it" '"SIGKILL"' "$(field "$T/killed" command_exited signal)"

# --wait: the second statement waits in the server's queue: no sleeps.
"$A" run -q "$name" -- sleep 1.5 &
holder=$!
wait_for_holder || fail "the holder never appeared"
"$A" run --log-format json --wait -w 0.5 "$name" -- true 2>"$T/queued"
check "--wait: status" 1 "$?"
check "--wait: events" "trying trying timed_out exit" "$(events "$T/queued")"
wait "$holder"

# A failed acquire: --fence without the schema, the server's SQLSTATE given.
"$A" run --log-format json --fence "$name" -- true 2>"$T/failed"
check "failed: status" "$EXIT_LOCK_ERROR" "$?"
check "failed: events" "trying failed exit" "$(events "$T/failed")"
check "failed: SQLSTATE" '"42P01"' "$(field "$T/failed" failed sqlstate)"
check "failed: level" '"error"' "$(field "$T/failed" failed level)"

# A note that does not stop the run is a warning.
"$A" run --log-format json --lease 30 "$name" -- true 2>"$T/note"
check "note: events" "message trying acquired command_started command_exited released exit" \
    "$(events "$T/note")"
check "note: level" '"warning"' "$(field "$T/note" message level)"

# Names and arguments any bytes: a name is well-formed UTF-8 (checked
# before anything is said about it) and comes back as it was given; an
# argument that is not UTF-8 comes with U+FFFD where its bad byte was.
odd=$'q"uote\\back\tslash\nnew\x01line \xe2\x80\xa8 日本'
"$A" run --log-format json "$odd" -- true $'a\xffb' 2>"$T/odd"
check "odd name: status" 0 "$?"
check "odd name: every line JSON" "trying acquired command_started command_exited released exit" \
    "$(events "$T/odd")"
check "odd name: one line per event" 6 "$(wc -l <"$T/odd")"
check "odd name: the name round-trips" 1 \
    "$("$py" -c 'import json, sys; print(int(json.loads(open(sys.argv[1]).readline())["lock"] == sys.argv[2]))' "$T/odd" "$odd")"
check "odd argument: U+FFFD" '"a�b"' "$(field "$T/odd" command_started command.1)"

# Messages from outside the lock's events are events too.
"$A" run --log-format json -d "host=/nonexistent-dir" "$name" -- true 2>"$T/noserver"
check "no server: status" "$EXIT_NO_SERVER" "$?"
check "no server: events" "message exit" "$(events "$T/noserver")"
"$A" run --log-format json --timeout x "$name" -- true 2>"$T/usage"
check "usage error after --log-format: events" "message exit" "$(events "$T/usage")"
"$A" run --log-format json "$name" 2>"$T/usage"
check "no command: status" "$EXIT_USAGE" "$?"
check "no command: a message, no usage text" "message exit" "$(events "$T/usage")"
capture "$A" run --log-format yaml "$name" -- true
check "unknown format: status" "$EXIT_USAGE" "$RC"
check "unknown format: message" "advlock: --log-format wants text or json" "$ERR"

# Several names: the events about one name name it, in the order taken
# (by key), the run's events name them all; released the other way round.
set_a="json-set-a"
set_b="json-set-b"
key_of() { "$A" key "$1" | cut -f1; }
if [ "$(key_of "$set_a")" -lt "$(key_of "$set_b")" ]; then lo=$set_a hi=$set_b; else lo=$set_b hi=$set_a; fi
"$A" run --log-format json "$hi" "$lo" -- true 2>"$T/two"
check "two names: status" 0 "$?"
check "two names: events" \
    "trying acquired trying acquired command_started command_exited released released exit" \
    "$(events "$T/two")"
check "two names: tried first" "\"$lo\"" "$(field "$T/two" 'trying#1' lock)"
check "two names: taken first" "\"$lo\"" "$(field "$T/two" 'acquired#1' lock)"
check "two names: tried second" "\"$hi\"" "$(field "$T/two" 'trying#2' lock)"
check "two names: taken second, its own key" "\"$(key_of "$hi")\"" "$(field "$T/two" 'acquired#2' key)"
check "two names: the command's locks, by key" "[\"$lo\", \"$hi\"]" "$(field "$T/two" command_started locks)"
check "two names: their keys" "[\"$(key_of "$lo")\", \"$(key_of "$hi")\"]" \
    "$(field "$T/two" command_started keys)"
check "two names: no one lock on the run's events" null "$(field "$T/two" command_exited lock)"
check "two names: released last first" "\"$hi\" \"$lo\"" \
    "$(field "$T/two" 'released#1' lock) $(field "$T/two" 'released#2' lock)"
check "two names: the exit names both" "[\"$lo\", \"$hi\"]" "$(field "$T/two" exit locks)"

# Both names busy, with --diagnose: each name's first wait names its own
# holder (lo's freed first, then hi's). Each holder holds until told, and is
# told only once the run is seen waiting for it, however loaded the machine.
"$A" run -q --application-name json-holder-lo "$lo" -- sh -c 'until [ -e "$1" ]; do sleep 0.05; done' sh "$T/go-lo" &
holder_lo=$!
"$A" run -q --application-name json-holder-hi "$hi" -- sh -c 'until [ -e "$1" ]; do sleep 0.05; done' sh "$T/go-hi" &
holder_hi=$!
# Each holder's backend holds its lock (a backend shows before its grant).
holding() {
    psql -X -At -c "SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a
        USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = '$1'"
}
for _ in $(seq 100); do [ "$(holding json-holder-lo)" = 1 ] && [ "$(holding json-holder-hi)" = 1 ] && break; sleep 0.05; done
pid_lo=$(backend_of json-holder-lo)
pid_hi=$(backend_of json-holder-hi)
"$A" run --log-format json --diagnose -w 60 "$lo" "$hi" -- true 2>"$T/both" &
both=$!
let_go_when_waited() {
    for _ in $(seq 600); do [ "$(field "$T/both" "waiting@$1#1" lock 2>/dev/null)" = "\"$1\"" ] && break; sleep 0.05; done
    touch "$2"
}
let_go_when_waited "$lo" "$T/go-lo"
let_go_when_waited "$hi" "$T/go-hi"
wait "$both"
check "both busy: status" 0 "$?"
seq_both=$(events "$T/both")
[[ $seq_both =~ ^(trying\ waiting\ )+trying\ acquired\ (trying\ waiting\ )+trying\ acquired\ command_started ]] &&
    pass || fail "both busy: events [$seq_both]"
check "both busy: the first name's wait, its holder" "$pid_lo" "$(field "$T/both" "waiting@$lo#1" holder.pid)"
check "both busy: the second name's wait names it" "\"$hi\"" "$(field "$T/both" "waiting@$hi#1" lock)"
check "both busy: the second name's wait, its holder" "$pid_hi" "$(field "$T/both" "waiting@$hi#1" holder.pid)"
check "both busy: its application" '"json-holder-hi"' "$(field "$T/both" "waiting@$hi#1" holder.application)"
wait "$holder_lo" "$holder_hi"

# A timeout on the second name: said for it, with its holder; the first
# given back, and said why. The holder holds until told to end, however
# slowly a busy machine runs the two runs against it.
"$A" run -q --application-name json-holder-hi "$hi" -- sleep 60 &
holder_hi=$!
for _ in $(seq 100); do [ -n "$(backend_of json-holder-hi)" ] && break; sleep 0.05; done
pid_hi=$(backend_of json-holder-hi)
"$A" run --log-format json --diagnose -w 0.5 "$hi" "$lo" -- echo never >"$T/out" 2>"$T/second"
check "timeout on the second name: status" 1 "$?"
check "timeout on the second name: command not run" "" "$(cat "$T/out")"
seq_second=$(events "$T/second")
[[ $seq_second =~ ^trying\ acquired\ (trying\ waiting\ )+trying\ timed_out\ released\ exit$ ]] &&
    pass || fail "timeout on the second name: events [$seq_second]"
check "timeout on the second name: its wait names its holder" "$pid_hi" \
    "$(field "$T/second" "waiting@$hi#1" holder.pid)"
check "timeout on the second name: timed out on it" "\"$hi\"" "$(field "$T/second" timed_out lock)"
check "timeout on the second name: its holder" "$pid_hi" "$(field "$T/second" timed_out holder.pid)"
check "timeout on the second name: the whole run's bound" 500 "$(field "$T/second" timed_out timeout_ms)"
check "timeout on the second name: the first given back" "\"$lo\"" "$(field "$T/second" released lock)"
check "timeout on the second name: why" "\"lock '$lo' released: the run holds all its names or none\"" \
    "$(field "$T/second" released message)"
"$A" run --diagnose -w 0.5 "$hi" "$lo" -- echo never 2>"$T/text"
case "$(head -n 1 "$T/text")" in
    "advlock: Could not acquire migration lock for '$hi' within 0.5s. Held by pid $pid_hi (application 'json-holder-hi', "*) pass ;;
    *) fail "text: the busy name and its holder [$(cat "$T/text")]" ;;
esac
kill -TERM "$holder_hi"
wait "$holder_hi"

# The session killed while the command runs: lost for every name.
"$A" run --log-format json --application-name json-killed "$lo" "$hi" -- \
    sh -c "psql -X -q -c \"$kill_me\" >/dev/null; sleep 10" 2>"$T/killed"
check "two names, session killed: status" "$EXIT_LOCK_ERROR" "$?"
check "two names, session killed: lost, both" "[\"$lo\", \"$hi\"]" "$(field "$T/killed" lock_lost locks)"
check "two names, session killed: no one lock" null "$(field "$T/killed" lock_lost lock)"

finish
