#!/usr/bin/env bash
# Runs each test program given, keeps going after a failure, and ends with a
# one-line tally of programs. Exit status is non-zero if any program failed.
# TEST_RUNNER, if set, prefixes each program (valgrind, say).
set -u
read -r -a runner <<<"${TEST_RUNNER:-}"
passed=0 failed=0 names=()
for t in "$@"; do
    if "${runner[@]}" "$t"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        names+=("$t")
    fi
done
echo
[ $failed -eq 0 ] || printf 'FAILED: %s\n' "${names[@]}"
echo "programs: $passed passed, $failed failed"
[ $failed -eq 0 ]
