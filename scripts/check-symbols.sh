#!/usr/bin/env bash
# Proves the installed libraries keep to their names: every global symbol a
# static library defines, and every symbol a shared library exports, starts
# with advlock_ (a static link must not collide with a user's own names), and
# the core library holds nothing of the fake's or the simulator's.
# Usage: scripts/check-symbols.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check-symbols.sh BUILD_DIR}
status=0

# Defined global symbols (nm types in capitals, not U/w/v).
globals() { nm "$@" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ { print $3 }' | sort -u; }

# A gcc --coverage build (make coverage) links gcc's runtime, libgcov, into
# each shared library, and libgcov leaves some of its own names global
# (__gcov_master, mangle_path, ...). Those names, read from the libgcov.a the
# library was linked with, are allowed in an instrumented file (one that
# names __gcov_init) and nowhere else: a normal build is checked in full.
gcov_names=$(mktemp)
trap 'rm -f "$gcov_names"' EXIT
runtime_names() {
    local file=$1
    : >"$gcov_names"
    nm "$file" 2>/dev/null | awk '$NF == "__gcov_init" { found = 1 } END { exit !found }' || return 0
    globals --defined-only "$(${CC:-gcc} -print-file-name=libgcov.a)" >"$gcov_names"
}

check() {
    local what=$1 file=${*: -1}; shift
    local bad
    runtime_names "$file"
    bad=$(globals "$@" | grep -v '^advlock_' | grep -vxF -f "$gcov_names" || true)
    if [ -n "$bad" ]; then
        echo "$what: global symbols without the advlock_ prefix:" >&2
        echo "$bad" | sed 's/^/    /' >&2
        status=1
    fi
}

for lib in libadvlock libadvlock_fake libadvlock_pq; do
    [ -e "$build/$lib.a" ] || { echo "check-symbols: $build/$lib.a is missing" >&2; exit 1; }
    check "$build/$lib.a" "$build/$lib.a"
    check "$build/$lib.so (exports)" -D --defined-only "$build/$lib.so"
done

# The fake database and the simulator live in libadvlock_fake only.
leaked=$(nm --defined-only "$build/libadvlock.a" 2>/dev/null \
         | awk 'NF == 3 { print $3 }' | grep -E '^advlock_(fake|sim|prng|lt|db)_' | sort -u || true)
if [ -n "$leaked" ]; then
    echo "$build/libadvlock.a holds the fake's or the simulator's symbols:" >&2
    echo "$leaked" | sed 's/^/    /' >&2
    status=1
fi

[ "$status" -eq 0 ] && echo "symbols: libadvlock, libadvlock_fake, libadvlock_pq (.a and .so) define only advlock_ names; the core holds none of the fake's"
exit "$status"
