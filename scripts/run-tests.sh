#!/usr/bin/env bash
# Runs each test program given, keeps going after a failure, and ends with a
# one-line tally of programs. Exit status is non-zero if any program failed.
# A program that exits 77 (automake's convention) could not run here, said
# why, and is counted as skipped, not failed.
#   scripts/run-tests.sh PROGRAM...
#   scripts/run-tests.sh -c COMMAND [ARGS...]   one command line as one test,
#                                               its status as the exit status
# A program that passes shows one line, its name, the last line it
# printed (its tally) and how many seconds it took (what CI's time goes to); one that fails shows everything it printed. V=1
# shows every program's output as it comes.
# TEST_RUNNER, if set, prefixes each program (valgrind, say).
# TEST_COUNTS, if set (`make test` sets it), names a file that collects every
# suite's tally: this one is added there as "passed failed skipped" instead of
# printed, and the exit status is 0 so that the other suites run too;
# scripts/test-summary.sh sums the file into make test's last line.
set -u
read -r -a runner <<<"${TEST_RUNNER:-}"
passed=0 failed=0 skipped=0 names=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# record NAME COMMAND...: exit 77 counts as skipped (a test that cannot run
# here, and says why).
record() {
    local name=$1
    shift
    local started=$SECONDS
    if [ "${V:-0}" = 1 ]; then
        "$@"
    else
        "$@" >"$log" 2>&1
    fi
    local status=$?
    local last
    last="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1) ($((SECONDS - started)) s)"
    case $status in
        0)
            passed=$((passed + 1))
            [ "${V:-0}" = 1 ] || printf '  PASS    %s: %s\n' "$name" "$last"
            ;;
        77)
            skipped=$((skipped + 1))
            [ "${V:-0}" = 1 ] || printf '  SKIP    %s: %s\n' "$name" "$last"
            ;;
        *)
            failed=$((failed + 1))
            names+=("$*")
            [ "${V:-0}" = 1 ] || cat "$log"
            ;;
    esac
}
single=
if [ "${1:-}" = -c ]; then
    shift
    single=1
    record "${1##*/}" "${runner[@]}" "$@"
else
    for t in "$@"; do record "$t" "${runner[@]}" "$t"; done
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
