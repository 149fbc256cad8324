#!/usr/bin/env bash
# Runs deployment tests, each under the harness its "# harness:" line names
# (pgbouncer: tests/pg/with-pgbouncer.sh, standby: tests/pg/with-standby.sh,
# else tests/pg/with-postgres.sh), each with fresh servers, and ends with a
# one-line tally. Exit status is non-zero if any test failed. A test's
# "# harness-env: NAME=VALUE" line sets that variable for its harness.
#
# Usage: ADVLOCK=build/advlock tests/deploy/run.sh [TEST.sh...]
#        (default: every tests/deploy/*.sh but lib.sh, load.sh, run.sh, facts.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${ADVLOCK:?set ADVLOCK to the advlock binary}"
ADVLOCK=$(cd "$(dirname "$ADVLOCK")" && pwd)/$(basename "$ADVLOCK")
export ADVLOCK

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    for t in "$here"/*.sh; do
        case "$(basename "$t")" in lib.sh | load.sh | run.sh | facts.sh) continue ;; esac
        tests+=("$t")
    done
fi

passed=0 failed=0 names=()
for t in "${tests[@]}"; do
    harness=$(sed -n 's/^# harness: *//p' "$t" | head -n 1)
    case "$harness" in
        pgbouncer) with="$here/../pg/with-pgbouncer.sh" ;;
        standby) with="$here/../pg/with-standby.sh" ;;
        *) with="$here/../pg/with-postgres.sh" ;;
    esac
    echo "== $(basename "$t") (${harness:-postgres})"
    start=$SECONDS
    harness_env=$(sed -n 's/^# harness-env: *//p' "$t" | head -n 1)
    if env ${harness_env:+"$harness_env"} "$with" "$t"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        names+=("$t")
    fi
    echo "   ($((SECONDS - start)) s)"
done
echo
[ $failed -eq 0 ] || printf 'FAILED: %s\n' "${names[@]}"
echo "deploy tests: $passed passed, $failed failed"
[ $failed -eq 0 ]
