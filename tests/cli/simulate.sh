#!/usr/bin/env bash
# advlock simulate: timeline and summary, the thundering-herd figure, a
# reproducible trace, faults, bad options. No server needed.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

capture "$A" simulate --clients 3 --hold 250
check "default run: status" 0 "$RC"
check "header" "3 clients, 1 lock name, timeout 10000 ms, hold 250 ms, seed 1" "$(sed -n 1p <<<"$OUT")"
grep -q "client 0   tries 'BrighterMigration_public.Outbox' (attempt 1)" <<<"$OUT" && pass || fail "no first try in [$OUT]"
grep -q "sleeps 100 ms" <<<"$OUT" && pass || fail "no 100 ms sleep"
grep -q "sleeps 200 ms" <<<"$OUT" && pass || fail "no 200 ms sleep"
check "acquisitions" 3 "$(grep -c ACQUIRED <<<"$OUT")"
check "summary" "3 clients: 3 acquired, 0 timed out, 3 released," "$(tail -n 1 <<<"$OUT" | cut -d" " -f1-9)"

# 50 clients starting together with the reference schedule retry in lockstep:
# each wave grants one lock, and most time out.
capture "$A" simulate --clients 50 --timeout 10000 --hold 50 --quiet
timed_out=$(grep -o '[0-9]* timed out' <<<"$OUT" | cut -d' ' -f1)
[ "${timed_out:-0}" -ge 30 ] && pass || fail "herd: only [$timed_out] of 50 timed out: $OUT"
grep -q "Could not acquire" <<<"$("$A" simulate --clients 50 --hold 50 | grep timed_out)" && pass ||
    fail "timeline shows no timeout message"

# The same seed writes the same trace, byte for byte; another seed does not.
"$A" simulate --clients 12 --keys 3 --faults --seed 42 --trace "$dir/a" --quiet >/dev/null
"$A" simulate --clients 12 --keys 3 --faults --seed 42 --trace "$dir/b" --quiet >/dev/null
"$A" simulate --clients 12 --keys 3 --faults --seed 43 --trace "$dir/c" --quiet >/dev/null
check "same seed, same trace" "$(sha256sum <"$dir/a")" "$(sha256sum <"$dir/b")"
[ "$(sha256sum <"$dir/a")" != "$(sha256sum <"$dir/c")" ] && pass || fail "different seeds gave one trace"
bad_lines=$(grep -cv '^{"t":[0-9]*,"clock":-\?[0-9]*,"client":[0-9]*,"event":"[a-z_]*","key":"-\?[0-9]*".*}$' "$dir/a")
check "every trace line is an object with t, client, event, key" 0 "$bad_lines"
grep -q '"event":"sleep".*"ms":100' "$dir/a" && pass || fail "no sleep with ms in the trace"

capture "$A" simulate --clients 40 --keys 4 --cycles 3 --faults --seed 9 --quiet
check "faults: invariants hold" 0 "$RC"
grep -q "[1-9][0-9]* faults injected" <<<"$OUT" && pass || fail "no faults injected: $OUT"

capture "$A" simulate --clients 0
check "zero clients" 64 "$RC"
capture "$A" simulate --clients 65
check "too many clients" 64 "$RC"
capture "$A" simulate --timeout abc
check "bad timeout" 64 "$RC"
capture "$A" simulate --trace /nonexistent/dir/trace
check "unwritable trace" 74 "$RC"
finish
