#!/usr/bin/env bash
# make's own output (README, "Two commands"): by default one short line per
# file built and nothing else, and one line per test program that passes
# (scripts/run-tests.sh); with V=1 every command; and when a command or a
# test fails, the whole command and everything the test printed. Builds the
# core library into temporary build directories.
set -uo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "quiet build: $*" >&2; exit 1; }
# make's flags from a calling make (-s, say) are not this check's.
build() { MAKEFLAGS='' make --no-print-directory V="$1" BUILD="$dir/$2" "${@:3}" 2>&1; }
sources=$(printf '%s\n' src/core/*.c | wc -l)

out=$(build 0 quiet "$dir/quiet/libadvlock.a") || fail "the quiet build failed: $out"
other=$(grep -v -E "^  (CC|AR)      $dir/quiet/" <<<"$out")
[ -z "$other" ] || fail "the quiet build printed more than a line per file: $other"
[ "$(grep -c . <<<"$out")" -eq $((sources + 1)) ] ||
    fail "the quiet build printed $(grep -c . <<<"$out") lines for $sources sources and one archive: $out"

out=$(build 1 verbose "$dir/verbose/libadvlock.a") || fail "the verbose build failed: $out"
[ "$(grep -c -- " -c src/core/.*\.c -o $dir/verbose/obj/src/core/" <<<"$out")" -eq "$sources" ] ||
    fail "V=1 did not show every compiler command: $out"

out=$(build 0 broken CFLAGS=-fno-such-option-for-this-check "$dir/broken/obj/src/core/key.o") &&
    fail "a build with a bad compiler option succeeded"
grep -q -- "^failed (status [1-9][0-9]*): .*-fno-such-option-for-this-check.* -c src/core/key.c -o $dir/broken/obj/src/core/key.o$" <<<"$out" ||
    fail "a failed command was not shown whole in the quiet build: $out"

# A test program: one line when it passes (its name, its tally, its
# seconds), all of
# its output when it fails.
printf '#!/bin/sh\nseq 40\necho "t: 1 passed, 0 failed"\n' >"$dir/pass.sh"
printf '#!/bin/sh\nseq 40\necho "t: 0 passed, 1 failed"\nexit 1\n' >"$dir/fail.sh"
chmod +x "$dir/pass.sh" "$dir/fail.sh"
out=$(env -u TEST_COUNTS V=0 scripts/run-tests.sh "$dir/pass.sh") || fail "a passing program failed: $out"
shown=$(grep -v -e '^$' -e '^programs: 1 passed, 0 failed$' <<<"$out")
[[ $shown =~ ^"  PASS    $dir/pass.sh: t: 1 passed, 0 failed ("[0-9]+" s)"$ ]] ||
    fail "a passing program did not show as one line: $shown"
out=$(env -u TEST_COUNTS V=0 scripts/run-tests.sh "$dir/fail.sh") && fail "a failing program passed"
grep -qx 40 <<<"$out" && grep -qx "t: 0 passed, 1 failed" <<<"$out" && grep -qx "FAILED: $dir/fail.sh" <<<"$out" ||
    fail "a failing program's output was not shown whole: $out"

echo "quiet build: $sources sources, $((sources + 1)) lines; V=1 shows every command; a failed one shown whole; a test a line, a failed one all it printed"
