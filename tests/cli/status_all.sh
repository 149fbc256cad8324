#!/usr/bin/env bash
# advlock status with no name against a real server: every advisory lock of
# the database (session and transaction scope, exclusive and shared, holders
# and a waiter with its wait), named from the command line and from
# --names-from (a line that is not UTF-8 said by its number, the rest
# kept), an unknown key shown by key, the time a lock-delay holder took its
# lock and a fencing token once `advlock setup` ran, and not before (no
# schema); text, JSON (parsed), the Prometheus format (checked strictly
# below) and --watch. Runs under tests/pg/with-postgres.sh, in a database
# of its own so that its schema and locks meet no other test.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
db=status_all_test
psql -X -q -c "CREATE DATABASE $db" >/dev/null
export PGDATABASE=$db
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    psql -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = '$db' AND pid <> pg_backend_pid()" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

key() { "$A" key "$1" | cut -f1; }
# Waits until the database shows N advisory rows, granted or not as asked.
await_rows() {
    for _ in $(seq 100); do
        [ "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
              AND database = (SELECT oid FROM pg_database WHERE datname = '$db') AND $1")" = "$2" ] && return
        sleep 0.05
    done
    fail "never saw $2 advisory rows where $1"
}

capture "$A" status
check "no lock: status" 0 "$RC"
check "no lock: output" "no advisory lock is held or awaited in this database" "$OUT"

m=$(key migrations) r=$(key reports) x=$(key nightly-xact)
# Exclusive at session level (and an unknown key beside it); shared twice;
# a transaction's lock; a waiter on migrations, queued on the server.
psql -X -q -c "SET application_name = 'st-holder'" \
     -c "SELECT pg_advisory_lock($m), pg_advisory_lock(12345)" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
pids+=($!)
for i in 1 2; do
    psql -X -q -c "SET application_name = 'st-reader-$i'" -c "SELECT pg_advisory_lock_shared($r)" \
         -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
    pids+=($!)
done
psql -X -q -c "SET application_name = 'st-xact'" -c "BEGIN" -c "SELECT pg_advisory_xact_lock($x)" \
     -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
pids+=($!)
await_rows granted 5
psql -X -q -c "SET application_name = 'st-waiter'" -c "SELECT pg_advisory_lock($m)" >/dev/null 2>&1 &
pids+=($!)
await_rows "NOT granted" 1
sleep 1.1 # the waiter's wait reaches a whole second

# Names: migrations from the command line, reports from the file (after a
# line that is not UTF-8, which is said and skipped); 12345 and the
# transaction's key unnamed.
printf 'not-held\r\n\xff\xfe bad\nreports\n\n' >"$work/names"
capture "$A" status --names-from "$work/names" migrations
check "no schema: status (a name skipped)" "$EXIT_BAD_KEY" "$RC"
check "bad line: said with its number" \
    "advlock: $work/names line 2: '\\xff\\xfe bad': lock key is not valid UTF-8; skipped" "$ERR"
check "rows: 4 locks, 6 sessions" "4 6" "$(grep -c $'^[^ ]' <<<"$OUT") $(grep -c '^  ' <<<"$OUT")"
case "$OUT" in
    *"migrations	held	key $m	classid "*) pass ;;
    *) fail "migrations named from the command line: [$OUT]" ;;
esac
case "$OUT" in
    *"reports	held	key $r	"*"holder	pid "*"mode ShareLock	application 'st-reader-"[12]"'"*"holder	pid "*"mode ShareLock	application 'st-reader-"[12]"'"*) pass ;;
    *) fail "reports named from the file, two shared holders: [$OUT]" ;;
esac
case "$OUT" in
    *"12345	held	key 12345	classid 0	objid 12345"$'\n'"  holder	pid "*"application 'st-holder'"*) pass ;;
    *) fail "unknown key shown by key: [$OUT]" ;;
esac
case "$OUT" in
    *"$x	held	key $x	"*"mode ExclusiveLock	application 'st-xact'	client local	state active"*) pass ;;
    *) fail "transaction-scoped lock listed: [$OUT]" ;;
esac
case "$OUT" in
    *"waiter	pid "*"application 'st-waiter'"*"waiting for 0:00:0"[1-9]*) pass ;;
    *) fail "waiter with its wait: [$OUT]" ;;
esac
case "$OUT" in
    *"fence token"* | *" since "*) fail "no schema, yet a token or a mark: [$OUT]" ;;
    *"application 'st-holder'"*"held for unknown"*) pass ;;
    *) fail "no schema: a holder's time unknown: [$OUT]" ;;
esac
capture "$A" status --names-from "$work/missing"
check "names file missing: status" "$EXIT_IO" "$RC"

# The schema: a lock-delay holder's mark gives its time, a fenced holder
# its token.
"$A" setup >/dev/null || fail "advlock setup"
"$A" run --lock-delay delayed -- sleep 60 &
pids+=($!)
"$A" run --fence fenced -- sleep 60 &
pids+=($!)
await_rows granted 7
for _ in $(seq 100); do # the mark is written after the grant
    [ "$(psql -X -At -c "SELECT count(*) FROM advlock.mark")" = 1 ] && break
    sleep 0.05
done
capture "$A" status delayed fenced
check "named mode unchanged" 1 "$RC"
capture "$A" status --all delayed fenced
check "schema: status" 1 "$RC"
case "$OUT" in
    *"delayed	held	key $(key delayed)	"*"holder	pid "*"held for 0:00:0"?" since 20"??-??-??T??:??:??Z*) pass ;;
    *) fail "lock-delay mark's held-since: [$OUT]" ;;
esac
case "$OUT" in
    *"fenced	held	key $(key fenced)	"*"	fence token 1"$'\n'*) pass ;;
    *) fail "fence token: [$OUT]" ;;
esac

# JSON: one document, read by Debian's Python.
capture "$A" status --format json --names-from "$work/names" migrations delayed fenced
check "json: status" "$EXIT_BAD_KEY" "$RC"
printf '%s' "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["database"] == "'"$db"'", d["database"]
locks = {l["name"] or l["key"]: l for l in d["locks"]}
assert set(locks) == {"migrations", "reports", "12345", "'"$x"'", "delayed", "fenced"}, set(locks)
m = locks["migrations"]
assert m["key"] == "'"$m"'" and m["form"] == "bigint" and m["fence_token"] is None
assert len(m["holders"]) == 1 and m["holders"][0]["held_seconds"] is None
w = m["waiters"][0]
assert w["application_name"] == "st-waiter" and w["waited_seconds"] >= 1, w
assert [h["mode"] for h in locks["reports"]["holders"]] == ["ShareLock", "ShareLock"]
assert locks["12345"]["name"] is None
dl = locks["delayed"]["holders"][0]
assert 0 <= dl["held_seconds"] < 30 and dl["held_since"].endswith("Z"), dl
assert locks["fenced"]["fence_token"] == 1
' && pass || fail "json: [$OUT]"

# Prometheus: the exposition format, checked strictly (no promtool here).
capture "$A" status --format prometheus --names-from "$work/names"
check "prometheus: status" "$EXIT_BAD_KEY" "$RC"
printf '%s\n' "$OUT" | python3 -c '
import math, re, sys
text = sys.stdin.read()
assert text.endswith("\n")
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
value_re = r"\"((?:[^\"\\\n]|\\[\\\"n])*)\""
label_re = r"[a-zA-Z_][a-zA-Z0-9_]*=" + value_re
sample_re = re.compile(r"(" + name_re + r")(?:\{(" + label_re + r"(?:," + label_re + r")*)?\})? (\S+)(?: -?\d+)?$")
typed, helped, done, series, current, samples = {}, set(), set(), set(), None, {}
for line in text.splitlines():
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        kind, rest = line[2:6], line[7:]
        name, _, tail = rest.partition(" ")
        assert re.fullmatch(name_re, name), line
        assert name not in done, "family split: " + line
        if kind == "HELP":
            assert name not in helped and re.fullmatch(r"(?:[^\\\n]|\\[\\n])*", tail), line
            helped.add(name)
        else:
            assert name not in typed and tail in ("counter", "gauge", "summary", "histogram", "untyped"), line
            assert name not in samples, "TYPE after samples: " + line
            typed[name] = tail
        if current not in (None, name):
            done.add(current)
        current = name
        continue
    assert not line.startswith("#") or line.startswith("# "), line
    if line.startswith("#") or not line:
        continue
    m = sample_re.match(line)
    assert m, "bad sample: " + line
    name = m.group(1)
    assert name not in done, "family split: " + line
    if current not in (None, name):
        done.add(current)
    current = name
    labels = tuple(sorted(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=" + value_re, m.group(2) or "")))
    assert len({k for k, _ in labels}) == len(labels), "label twice: " + line
    assert (name, labels) not in series, "series twice: " + line
    series.add((name, labels))
    v = float(m.group(m.lastindex))
    assert not math.isnan(v)
    samples.setdefault(name, []).append((dict(labels), v))
for family in ("advlock_lock_holders", "advlock_lock_waiters", "advlock_lock_oldest_holder_seconds",
               "advlock_lock_oldest_waiter_seconds"):
    assert typed.get(family) == "gauge" and family in helped, family
held = {l.get("name", l["key"]): v for l, v in samples["advlock_lock_holders"]}
assert held["reports"] == 2 and held["12345"] == 1, held
waiting = {l.get("name", l["key"]): v for l, v in samples["advlock_lock_waiters"]}
assert waiting["'"$m"'"] == 1, waiting
assert any(v >= 1 for _, v in samples["advlock_lock_oldest_waiter_seconds"])
assert [l["key"] for l, _ in samples["advlock_lock_oldest_holder_seconds"]] == ["'"$(key delayed)"'"]
' && pass || fail "prometheus: [$OUT]"
# A name with a quote, a backslash and a newline, escaped in its label.
odd=$'na"me\\with\nnewline'
psql -X -q -c "SELECT pg_advisory_lock($(key "$odd"))" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
pids+=($!)
await_rows granted 8
capture "$A" status --format prometheus "$odd"
case "$OUT" in
    *'advlock_lock_holders{key="'"$(key "$odd")"'",name="na\"me\\with\nnewline"} 1'*) pass ;;
    *) fail "prometheus label escaping: [$OUT]" ;;
esac

# --watch: frames redrawn in place until SIGINT, then exit 0.
"$A" status --watch 0.3 >"$work/watch" 2>&1 &
watcher=$!
sleep 1
kill -INT "$watcher"
wait "$watcher"
check "watch: exit after SIGINT" 0 "$?"
frames=$(grep -o $'\033\\[H\033\\[2J' "$work/watch" | wc -l)
[ "$frames" -ge 2 ] && pass || fail "watch: $frames frames"
check "watch: each frame lists the locks" "$frames" "$(grep -c "^12345	held" "$work/watch")"
capture "$A" status --watch 0
check "watch 0: usage" "$EXIT_USAGE" "$RC"
capture "$A" status --format yaml
check "format yaml: usage" "$EXIT_USAGE" "$RC"

finish
