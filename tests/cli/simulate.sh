#!/usr/bin/env bash
# advlock simulate: timeline and summary, the thundering-herd figures (the
# idealised world's and the built-in profile's), a reproducible trace,
# faults, profiles, bad options. No server needed.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

capture "$A" simulate --clients 3 --hold 250 --ideal
check "idealised run: status" 0 "$RC"
check "header" "3 clients, 1 lock name, timeout 10000 ms, hold 250 ms, seed 1, idealised world" "$(sed -n 1p <<<"$OUT")"
check "the idealised world named" "world: idealised: all start at once, statements take 1-3 ms, timers fire on time" "$(sed -n 2p <<<"$OUT")"
check "the idealised world: no timer wakes late" 0 "$(grep -c 'late' <<<"$OUT")"
grep -q "client 0   tries 'BrighterMigration_public.Outbox' (attempt 1)" <<<"$OUT" && pass || fail "no first try in [$OUT]"
grep -q "sleeps 100 ms" <<<"$OUT" && pass || fail "no 100 ms sleep"
grep -q "sleeps 200 ms" <<<"$OUT" && pass || fail "no 200 ms sleep"
check "acquisitions" 3 "$(grep -c ACQUIRED <<<"$OUT")"
check "summary" "3 clients: 3 acquired, 0 timed out, 3 released," "$(tail -n 1 <<<"$OUT" | cut -d" " -f1-9)"

# The idealised herd: 50 clients starting in the same millisecond
# with the reference schedule retry in lockstep: each wave grants one lock,
# and most time out.
# Full jitter spreads the retries and server-side waiting hands the lock
# over in turn: none time out. Clipping keeps the lockstep but ends every
# timeout at the deadline (plus the last try's round trip, 1-3 ms).
herd() {
    capture "$A" simulate --clients 50 --timeout 10000 --hold 50 --quiet --ideal "$@"
    timed_out=$(grep -o '[0-9]* timed out' <<<"$OUT" | cut -d' ' -f1)
}
herd
[ "${timed_out:-0}" -ge 30 ] && pass || fail "herd: only [$timed_out] of 50 timed out: $OUT"
grep -q "Could not acquire" <<<"$("$A" simulate --clients 50 --hold 50 --ideal | grep timed_out)" && pass ||
    fail "timeline shows no timeout message"
herd --jitter
check "herd with full jitter: none time out" "0" "$timed_out"
check "herd with full jitter: all acquire" 1 "$(grep -c '50 acquired' <<<"$OUT")"
herd --wait
check "herd waiting on the server: none time out" "0" "$timed_out"
# No polling: a try, then at most one wait in the server's queue, each.
attempts=$(grep -o '[0-9]* attempts' <<<"$OUT" | cut -d' ' -f1)
[ "${attempts:-999}" -le 100 ] && pass || fail "herd waiting on the server: [$attempts] queries for 50 clients"
herd --clip
[ "${timed_out:-0}" -ge 30 ] && pass || fail "clipped herd: only [$timed_out] timed out: $OUT"
last=$("$A" simulate --clients 50 --hold 50 --clip --ideal | grep timed_out | tail -n 1 | awk '{ print $1 }')
[ "${last:-99999}" -le 10003 ] && pass || fail "clipped: a timeout at [$last] ms, past 10003"
last=$("$A" simulate --clients 50 --hold 50 --ideal | grep timed_out | tail -n 1 | awk '{ print $1 }')
[ "${last:-0}" -gt 10003 ] && pass || fail "unclipped: the last timeout at [$last] ms, expected later"
for seed in 2 3; do
    herd --jitter --seed "$seed"
    check "herd with full jitter, seed $seed" "0" "$timed_out"
done

# Waiting on the server: the timeline shows each wait after a failed try,
# the server ending one at the deadline (lock_timeout), and (with
# --diagnose) who held the lock.
capture "$A" simulate --clients 3 --hold 250 --timeout 400 --wait --diagnose --ideal
check "wait: status" 0 "$RC"
check "wait: header" "3 clients, 1 lock name, timeout 400 ms, hold 250 ms, seed 1, idealised world, waiting on the server, diagnosing" \
    "$(sed -n 1p <<<"$OUT")"
check "wait: the two that find it held ask once" 2 "$(grep -c "asks the server for 'BrighterMigration_public.Outbox' and waits" <<<"$OUT")"
grep -q "  40[0-9] ms  client [0-9]   the server ends its wait at lock_timeout (SQLSTATE 55P03)" <<<"$OUT" &&
    pass || fail "no wait ended at the deadline: $OUT"
grep -q "timed_out: Could not acquire migration lock for 'BrighterMigration_public.Outbox' within 0.4s. Held by pid 10[0-9][0-9] (application '', state idle) for 0s." <<<"$OUT" &&
    pass || fail "no diagnosed timeout: $OUT"
"$A" simulate --clients 8 --jitter --seed 5 --trace "$dir/j1" --quiet >/dev/null
"$A" simulate --clients 8 --jitter --seed 5 --trace "$dir/j2" --quiet >/dev/null
check "jitter: same seed, same trace" "$(sha256sum <"$dir/j1")" "$(sha256sum <"$dir/j2")"
capture "$A" simulate --clients 30 --keys 3 --cycles 3 --faults --wait --diagnose --seed 11 --quiet
check "wait with faults: invariants hold" 0 "$RC"

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

# The measured world: the built-in profile by default, or a file's. The same
# profile and seed give the same trace.
capture "$A" simulate --clients 3 --hold 250
check "built-in world: status" 0 "$RC"
check "built-in world: header" "3 clients, 1 lock name, timeout 10000 ms, hold 250 ms, seed 1, built-in profile" \
    "$(sed -n 1p <<<"$OUT")"
check "built-in world: named" "world: measured (the built-in profile): staggered starts, a server queue, timers that wake late; --ideal for the lockstep" \
    "$(sed -n 2p <<<"$OUT")"
# make run's timeline: a try that comes after its sleep's end says by how
# much, and that the world model made it late; every mark agrees with the
# client's sleep before it.
capture "$A" simulate --clients 8 --hold 250
marks=$(grep -c 'woke [0-9]* ms late (world model)$' <<<"$OUT")
[ "$marks" -ge 1 ] && pass || fail "make run's timeline marks no late wake-up: $OUT"
wrong=$(awk '$5 == "sleeps" { due[$4] = $1 + $6 }
             $5 == "tries" && due[$4] != "" { late = $1 - due[$4]; due[$4] = ""
                 marked = match($0, /woke [0-9]+ ms late/) ? substr($0, RSTART + 5, RLENGTH - 13) + 0 : 0
                 if (late != marked) print }' <<<"$OUT")
check "every late wake-up marked, with its lateness" "" "$wrong"
cat >"$dir/p" <<'PROFILE'
advlock-profile 1
# a world where processes take 0.2 to 0.6 s to start
clients 10
servers 1
launch_us 0 50000 100000
startup_us 200000 400000 600000
statement_us 100 200 5000
wakeup_us 0 100 20000
command_us 2000 5000 30000
PROFILE
capture "$A" simulate --profile "$dir/p" --clients 10 --hold 50 --trace "$dir/p1"
check "profile: status" 0 "$RC"
check "profile: header" "10 clients, 1 lock name, timeout 10000 ms, hold 50 ms, seed 1, $dir/p" "$(sed -n 1p <<<"$OUT")"
first=$(sed -n 4p <<<"$OUT" | awk '{ print $1 }')
[ "${first:-0}" -ge 200 ] && [ "${first:-0}" -le 700 ] && pass || fail "first try at [$first] ms, not after startup"
grep -q "^10 clients: 10 acquired, 0 timed out" <<<"$OUT" && pass || fail "profile: $(tail -n 1 <<<"$OUT")"
"$A" simulate --profile "$dir/p" --clients 10 --hold 50 --trace "$dir/p2" --quiet >/dev/null
check "profile: same seed, same trace" "$(sha256sum <"$dir/p1")" "$(sha256sum <"$dir/p2")"
capture "$A" simulate --profile "$dir/p" --clients 30 --keys 3 --cycles 3 --faults --wait --seed 4 --quiet
check "profile with faults: invariants hold" 0 "$RC"
sed 's/^advlock-profile 1/advlock-profile 2/' "$dir/p" >"$dir/v2"
capture "$A" simulate --profile "$dir/v2"
check "profile version 2: status" "$EXIT_USAGE" "$RC"
check "profile version 2: said so" "advlock: $dir/v2:1: profile version 2 is not supported (this advlock reads version 1)" "$ERR"
sed 's/^startup_us .*/startup_us 600000 400000/' "$dir/p" >"$dir/down"
capture "$A" simulate --profile "$dir/down"
check "decreasing quantiles: status" "$EXIT_USAGE" "$RC"
check "decreasing quantiles: the line named" "advlock: $dir/down:6: startup_us: values must not decrease (400000 after 600000)" "$ERR"
capture "$A" simulate --profile "$dir/none"
check "no such profile" "$EXIT_USAGE" "$RC"
check "no such profile: named" "advlock: $dir/none: cannot open: No such file or directory" "$ERR"
capture "$A" simulate --profile "$dir/p" --ideal
check "--profile and --ideal" "$EXIT_USAGE" "$RC"

capture "$A" simulate --clients 0
check "zero clients" "$EXIT_USAGE" "$RC"
capture "$A" simulate --clients 65
check "too many clients" "$EXIT_USAGE" "$RC"
check "too many clients: the option named" "advlock: --clients wants a whole number from 1 to 64, not '65'" "$ERR"
capture "$A" simulate --timeout abc
check "bad timeout" "$EXIT_USAGE" "$RC"
check "bad timeout: the option named" "advlock: --timeout wants a whole number from 0 to 604800000, not 'abc'" "$ERR"
# Out-of-range input is a usage error naming the option and its range, never
# a run that outlasts the simulator's bound and reports a violation (70).
capture "$A" simulate --hold 9999999999999 --clients 2
check "huge hold" "$EXIT_USAGE" "$RC"
check "huge hold: the option and range named" \
    "advlock: --hold wants a whole number from 0 to 604800000, not '9999999999999'" "$ERR"
for bad in "timeout 604800001" "hold 604800001" "think 604800001" "cycles 1000001" \
           "seed 9223372036854775808" "keys 17"; do
    read -r opt value <<<"$bad"
    capture "$A" simulate "--$opt" "$value" --quiet
    check "--$opt $value" "$EXIT_USAGE" "$RC"
    grep -q "^advlock: --$opt wants a whole number from [0-9]* to [0-9]*, not '$value'\$" <<<"$ERR" &&
        pass || fail "--$opt $value: no range named: $ERR"
done
# The largest values allowed run to their end, faults and all.
capture "$A" simulate --clients 8 --keys 2 --cycles 3 --timeout 604800000 --hold 604800000 \
    --think 604800000 --faults --seed 5 --quiet
check "largest values: the run ends" 0 "$RC"
# Many clients waiting on the server, each leaving its wait's long
# lock_timeout behind when granted early: the superseded timers must not
# fill the event queue.
capture "$A" simulate --clients 64 --keys 16 --cycles 20 --think 1000 --seed 123 --faults --wait --quiet
check "64 clients waiting on the server with faults: the run ends" 0 "$RC"
capture "$A" simulate --clients 2 --hold 604800000 --timeout 604800000 --cycles 2 --quiet --ideal
check "week-long holds: the run ends" 0 "$RC"
# Every error says advlock:, getopt's own included (not "simulate:").
capture "$A" simulate --no-such-option
check "unknown option: status" "$EXIT_USAGE" "$RC"
check "unknown option: prefix" "advlock: unrecognized option '--no-such-option'" "$(head -n 1 <<<"$ERR")"
# Think time is not waiting: in the measured world a client that thinks up
# to 5 s before its acquire waits only its startup and its statements.
capture "$A" simulate --clients 2 --hold 10 --think 5000
longest=$(grep -o 'after waiting [0-9]* ms' <<<"$OUT" | awk '$3 > m { m = $3 } END { print m + 0 }')
[ "$longest" -lt 1000 ] && pass || fail "--think 5000: think time counted as waiting ($longest ms)"

capture "$A" simulate --trace /nonexistent/dir/trace
check "unwritable trace" "$EXIT_IO" "$RC"
capture bash -c "'$A' simulate --clients 2 >/dev/full"
check "stdout full" "${EXIT_IO} advlock: writing standard output: No space left on device" "$RC $ERR"
capture bash -c "'$A' simulate --clients 2 --quiet >/dev/full"
check "stdout full, summary only" "$EXIT_IO" "$RC"
finish
