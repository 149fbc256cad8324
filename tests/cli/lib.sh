# Assertions for the command-line tests. Source it; call `finish` at the end.
passed=0
failed=0

# advlock's exit statuses by their names (EXIT_USAGE, EXIT_NO_SERVER, ...),
# read from their one definition, src/cli/cli.h.
eval "$(sed -n 's/^ *\(EXIT_[A-Z_]*\) = \([0-9]*\).*/\1=\2/p' \
    "$(dirname "${BASH_SOURCE[0]}")/../../src/cli/cli.h")"
[ -n "${EXIT_LOCK_ERROR:-}" ] || { echo "lib.sh: no exit statuses in src/cli/cli.h" >&2; exit 2; }

pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); printf 'FAIL: %s\n' "$*" >&2; }

# check NAME EXPECTED ACTUAL
check() {
    if [ "$2" == "$3" ]; then pass; else fail "$1: expected [$2], got [$3]"; fi
}

# Runs the rest of the line, capturing stdout, stderr and status in OUT, ERR, RC.
capture() {
    local errfile
    errfile=$(mktemp)
    OUT=$("$@" 2>"$errfile") && RC=0 || RC=$?
    ERR=$(cat "$errfile")
    rm -f "$errfile"
}

finish() {
    echo "$(basename "$0" .sh): $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
