#!/usr/bin/env bash
# scripts/check-file-circles.sh finds a planted circle (a.c calls b.c, which
# calls c.c, which calls a.c) and names its three files, and passes the same
# files once c.c calls nothing back.
set -u
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
plant() { # plant FILE DEFINES CALLS: FILE.o whose function DEFINES calls CALLS
    printf 'int %s(void);\nint %s(void);\nint %s(void) { return %s() + 1; }\n' "$2" "$3" "$2" "$3" \
        >"$dir/$1.c"
    cc -c -o "$dir/$1.o" "$dir/$1.c" || exit 1
}
plant a fa fb
plant b fb fc
plant c fc fa
if out=$(scripts/check-file-circles.sh "$dir"/a.o "$dir"/b.o "$dir"/c.o 2>&1); then
    echo "a circle of a.c, b.c and c.c was not found: $out"
    exit 1
fi
case "$out" in
*"a b c"*) ;;
*) echo "the circle's files are not named: $out"; exit 1 ;;
esac
printf 'int fc(void);\nint fc(void) { return 1; }\n' >"$dir/c.c"
cc -c -o "$dir/c.o" "$dir/c.c" || exit 1
scripts/check-file-circles.sh "$dir"/a.o "$dir"/b.o "$dir"/c.o >/dev/null || exit 1
echo "file circles: a planted circle found and named; the same files without it pass"
