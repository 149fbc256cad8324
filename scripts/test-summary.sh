#!/usr/bin/env bash
# The last line of `make test`: the tallies every suite added to FILE
# ("passed failed" lines, see scripts/run-tests.sh) summed up. Exit status 1
# if any test failed or no suite reported.
# Usage: scripts/test-summary.sh FILE
set -u
read -r passed failed < <(awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }' "$1" 2>/dev/null)
echo "${passed:-0} passed, ${failed:-0} failed"
[ "${failed:-0}" -eq 0 ] && [ "${passed:-0}" -gt 0 ]
