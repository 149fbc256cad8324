#!/usr/bin/env bash
# advlock calibrate against the throwaway server (tests/pg/with-postgres.sh):
# a profile that simulate reads back, the command's cost, bad options.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

capture "$A" calibrate --clients 4 --statements 5 -o "$dir/p"
check "calibrate: status" 0 "$RC"
check "calibrate: nothing on stderr" "" "$ERR"
check "the header" "advlock-profile 1" "$(head -n 1 "$dir/p")"
check "the command line, as a comment" "# advlock calibrate --clients 4 --statements 5 --hold 0 -- true" \
    "$(sed -n 2p "$dir/p")"
check "clients" "clients 4" "$(grep '^clients' "$dir/p")"
for key in launch_us startup_us statement_us wakeup_us command_us; do
    check "$key: 21 quantiles" 22 "$(grep "^$key " "$dir/p" | wc -w)"
done
servers=$(awk '$1 == "servers" { print $2 }' "$dir/p")
[ "${servers:-0}" -ge 1 ] && [ "${servers:-0}" -le 4 ] && pass || fail "servers [$servers] not from 1 to 4"
# Quantiles never decrease (the parser would refuse them).
bad=$(awk '$1 ~ /_us$/ { for (i = 3; i <= NF; i++) if ($i + 0 < $(i - 1) + 0) print $1 }' "$dir/p")
check "quantiles ascend" "" "$bad"
# Processes that start and connect take longer than a statement.
read -r startup statement <<<"$(awk '$1 == "startup_us" { s = $12 } $1 == "statement_us" { t = $12 }
    END { print s, t }' "$dir/p")"
[ "$startup" -gt "$statement" ] && pass || fail "startup p50 [$startup] not above a statement's [$statement]"

capture "$A" simulate --profile "$dir/p" --clients 4 --hold 50 --quiet
check "simulate reads it: status" 0 "$RC"
grep -q "^4 clients: 4 acquired, 0 timed out" <<<"$OUT" && pass || fail "simulate --profile: $OUT"

# To standard output, with a command whose own work (--hold) is left out.
capture "$A" calibrate --clients 2 --statements 3 --hold 20 -- sleep 0.02
check "calibrate to stdout: status" 0 "$RC"
check "calibrate to stdout: the header" "advlock-profile 1" "$(head -n 1 <<<"$OUT")"
check "calibrate to stdout: the command" "# advlock calibrate --clients 2 --statements 3 --hold 20 -- sleep 0.02" \
    "$(sed -n 2p <<<"$OUT")"
check "calibrate to stdout: the command's cost" 22 "$(grep '^command_us ' <<<"$OUT" | wc -w)"

capture "$A" calibrate --clients 2 --statements 2 -- false
check "a failing command" "$EXIT_NO_COMMAND" "$RC"
check "a failing command: named" "advlock: calibrate: the command 'false' failed (status 1)" "$ERR"
capture "$A" calibrate --clients 0
check "zero clients" "$EXIT_USAGE" "$RC"
check "zero clients: the option named" "advlock: --clients wants a whole number from 1 to 1000, not '0'" "$ERR"
capture "$A" calibrate --statements x
check "bad statements" "$EXIT_USAGE" "$RC"
capture "$A" calibrate --no-such-option
check "unknown option" "$EXIT_USAGE" "$RC"
capture "$A" calibrate -d "host=/nonexistent/socket/dir" --clients 2
check "no server" "$EXIT_NO_SERVER" "$RC"
capture "$A" calibrate --clients 2 --statements 2 -o /nonexistent/dir/profile
check "unwritable profile" "$EXIT_IO" "$RC"
finish
