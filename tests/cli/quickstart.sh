#!/usr/bin/env bash
# README's quick start, as printed: the block after "<!-- tested: quick
# start -->", its commands run one by one (the harness's PG* variables stand
# in for its `export` line, build/advlock is ADVLOCK). The first holds the
# lock and ends well; the second times out with the sentence the block
# shows; status names the lock held. Runs under tests/pg/with-postgres.sh.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
readme="$(dirname "$0")/../../README.md"

block=$(awk '/<!-- tested: quick start -->/ {armed = 1; next}
             armed && /^```sh/ {inside = 1; next} inside && /^```/ {exit} inside {print}' "$readme")
[ -n "$block" ] && pass || fail "README has no tested quick start"
commands=$(grep -v -e '^#' -e '^export ' <<<"$block" | sed "s|^build/advlock |\"\$A\" |")
check "three commands" 3 "$(grep -c . <<<"$commands")"
holder=$(sed -n 1p <<<"$commands")
contender=$(sed -n 2p <<<"$commands")
status=$(sed -n 3p <<<"$commands")
said=$(sed -n 's/^# \(advlock: .*\)/\1/p' <<<"$block")

eval "$holder"
holder_pid=$!
for _ in $(seq 100); do
    "$A" status migrations >/dev/null 2>&1 || break
    sleep 0.05
done
capture eval "$contender"
check "the second waits, then times out: status" 1 "$RC"
check "the second says what the block shows" "$said" "$ERR"
capture eval "$status"
check "status: held" 1 "$RC"
grep -q "^migrations	held" <<<"$OUT" && pass || fail "status does not show the lock held: $OUT"
wait "$holder_pid" && RC=0 || RC=$?
check "the first holder's command ran and ended well" 0 "$RC"
capture "$A" status migrations
check "free after" 0 "$RC"
finish
