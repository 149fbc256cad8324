#!/usr/bin/env bash
# make test's installs wait for another apt or dpkg instead of failing: with
# dpkg's front-end lock held for a few seconds (as an unattended upgrade
# holds it), scripts/apt-get.sh waits and then succeeds, where a plain
# apt-get fails at once. Needs root and apt, else skipped (77).
set -u
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 || { echo "skipped: needs root and apt"; exit 77; }
hold=3
ready=$(mktemp -u)
mkfifo "$ready"
trap 'rm -f "$ready"' EXIT
python3 -c '
import fcntl, sys, time
lock = open("/var/lib/dpkg/lock-frontend", "w")
fcntl.lockf(lock, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[1]))
' "$hold" "$ready" &
read -r _ <"$ready"
# An installed package asked for again, never upgraded: a no-op that takes the lock.
again=(install -y -qq --no-upgrade bash)
plain_rc=0; apt-get "${again[@]}" >/dev/null 2>&1 || plain_rc=$?
start=$(date +%s%N)
wrapped_rc=0; out=$(scripts/apt-get.sh "${again[@]}" 2>&1) || wrapped_rc=$?
waited_ms=$((($(date +%s%N) - start) / 1000000))
wait
failed=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1 ($3)"; failed=1; fi; }
check "plain apt-get fails while the lock is held" '[ "$plain_rc" -ne 0 ]' "exit $plain_rc"
check "scripts/apt-get.sh waits for it and succeeds" '[ "$wrapped_rc" -eq 0 ]' "exit $wrapped_rc: $out"
check "it waited for the holder (>= 1.5 s of ${hold} s)" '[ "$waited_ms" -ge 1500 ]' "${waited_ms} ms"
[ "$failed" -eq 0 ] && echo "apt lock: 3 passed, 0 failed"
exit "$failed"
