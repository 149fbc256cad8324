#!/usr/bin/env bash
# Proves scripts/check-symbols.sh judges both builds it meets: the normal
# one (BUILD) and the gcc --coverage one `make coverage` makes (COV_BUILD),
# whose shared libraries carry gcc's coverage runtime. Each passes as built,
# and each fails, naming the symbol, once a global without the advlock_
# prefix is planted in a copy of its static and of its shared library.
# Usage: tests/build/check-symbols.sh BUILD COV_BUILD
set -u
. "$(dirname "$0")/../cli/lib.sh"
build=${1:?usage: check-symbols.sh BUILD COV_BUILD}
cov_build=${2:?usage: check-symbols.sh BUILD COV_BUILD}
check_symbols="$(dirname "$0")/../../scripts/check-symbols.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# plant DIR COMPILER...: a copy of DIR's libraries with a global named
# unprefixed_planted in libadvlock.a and libadvlock_pq.so, built by COMPILER.
plant() {
    local dir=$1 copy=$work/planted; shift
    rm -rf "$copy" && mkdir -p "$copy"
    cp -P "$dir"/lib*.a "$dir"/lib*.so* "$copy"/
    echo 'int unprefixed_planted(void); int unprefixed_planted(void) { return 1; }' >"$work/planted.c"
    "$@" -fPIC -c "$work/planted.c" -o "$work/planted.o" &&
        ar rs "$copy/libadvlock.a" "$work/planted.o" 2>/dev/null &&
        "$@" -shared -o "$copy/libadvlock_pq.so" "$work/planted.o" || fail "could not plant a symbol with $*"
}

for flavour in "normal:$build:gcc" "coverage:$cov_build:gcc --coverage"; do
    IFS=: read -r what dir compiler <<<"$flavour"
    read -r -a cc <<<"$compiler"
    capture "$check_symbols" "$dir"
    check "$what build as built passes ($ERR)" 0 "$RC"
    plant "$dir" "${cc[@]}"
    capture "$check_symbols" "$work/planted"
    check "$what build with a planted symbol fails" 1 "$RC"
    [ "$(grep -c '^    unprefixed_planted$' <<<"$ERR")" = 2 ] && pass ||
        fail "$what build: the planted symbol is not named for the .a and the .so: $ERR"
done
finish
