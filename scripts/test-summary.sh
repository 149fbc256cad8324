#!/usr/bin/env bash
# The last line of `make test`: the tallies every suite added to FILE
# ("passed failed skipped" lines, see scripts/run-tests.sh) summed up, the
# skipped named only when there are some. Exit status 1 if any test failed
# or no suite reported.
# Usage: scripts/test-summary.sh FILE
set -u
read -r passed failed skipped < <(awk '{ p += $1; f += $2; s += $3 }
    END { print p + 0, f + 0, s + 0 }' "$1" 2>/dev/null)
echo "${passed:-0} passed, ${failed:-0} failed$([ "${skipped:-0}" -eq 0 ] || echo ", $skipped skipped")"
[ "${failed:-0}" -eq 0 ] && [ "${passed:-0}" -gt 0 ]
