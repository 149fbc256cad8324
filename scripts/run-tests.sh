#!/usr/bin/env bash
# Runs each test program given, keeps going after a failure, and ends with a
# one-line tally of programs. Exit status is non-zero if any program failed.
# A program that exits 77 (automake's convention) could not run here, said
# why, and is counted as skipped, not failed.
#   scripts/run-tests.sh PROGRAM...
#   scripts/run-tests.sh -c COMMAND [ARGS...]   one command line as one test,
#                                               its status as the exit status
# TEST_RUNNER, if set, prefixes each program (valgrind, say).
# TEST_COUNTS, if set (`make test` sets it), names a file that collects every
# suite's tally: this one is added there as "passed failed skipped" instead of
# printed, and the exit status is 0 so that the other suites run too;
# scripts/test-summary.sh sums the file into make test's last line.
set -u
read -r -a runner <<<"${TEST_RUNNER:-}"
passed=0 failed=0 skipped=0 names=()
record() {
    local status=0
    "$@" || status=$?
    case $status in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)) ;;
        *)
            failed=$((failed + 1))
            names+=("$*")
            ;;
    esac
}
single=
if [ "${1:-}" = -c ]; then
    shift
    single=1
    record "${runner[@]}" "$@"
else
    for t in "$@"; do record "${runner[@]}" "$t"; done
fi
[ $failed -eq 0 ] || printf 'FAILED: %s\n' "${names[@]}"
if [ -n "${TEST_COUNTS:-}" ]; then
    echo "$passed $failed $skipped" >>"$TEST_COUNTS"
    exit 0
fi
if [ -z "$single" ]; then
    echo
    echo "programs: $passed passed, $failed failed$([ $skipped -eq 0 ] || echo ", $skipped skipped")"
fi
[ $failed -eq 0 ]
