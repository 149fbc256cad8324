#!/usr/bin/env bash
# Proves `make install` honours PREFIX and DESTDIR and that each installed
# library works from an install alone: installs into a staging directory
# (DESTDIR) and checks what is there, then into a temporary PREFIX (no
# DESTDIR, as a user without root installs) and builds one program per
# library with nothing but what pkg-config says about that prefix (no -I or
# -L of the source tree), linked as README's Install section says (an rpath
# to pkg-config's libdir), and runs it with no LD_LIBRARY_PATH:
#   advlock       derives a key and checks it against a reference vector;
#   advlock_pq    compiles and links (no server here): a connection-free call;
#   advlock_fake  the deterministic lock test of docs/simulation.md, built
#                 with the page's "# shared" and "# static" lines as printed;
#                 the static program must need no advlock library at all.
# BUILD names the build directory (default build).
set -euo pipefail
stage=$(mktemp -d) stage2=$(mktemp -d)
trap 'rm -rf "$stage" "$stage2"' EXIT
prefix=/opt/advlock-check
build=${BUILD:-build}
make -s install BUILD="$build" DESTDIR="$stage" PREFIX="$prefix" >/dev/null
root="$stage$prefix"
for f in include/advlock.h include/advlock_pq.h include/advlock_fake.h \
         lib/libadvlock.a lib/libadvlock.so lib/libadvlock.so.1 \
         lib/libadvlock_pq.a lib/libadvlock_pq.so lib/libadvlock_pq.so.1 \
         lib/libadvlock_fake.a lib/libadvlock_fake.so lib/libadvlock_fake.so.1 \
         lib/pkgconfig/advlock.pc lib/pkgconfig/advlock_pq.pc lib/pkgconfig/advlock_fake.pc; do
    [ -e "$root/$f" ] || { echo "install: missing $prefix/$f" >&2; exit 1; }
done
for pc in advlock advlock_pq advlock_fake; do
    grep -qx "prefix=$prefix" "$root/lib/pkgconfig/$pc.pc" ||
        { echo "install: $pc.pc does not name PREFIX $prefix" >&2; exit 1; }
done
# Installed again from the same build with another PREFIX, every .pc file
# names the new one (advlock_pq.pc once kept the PREFIX it was first built for).
# This install, in a directory of its own, is the one the programs use.
prefix2=$stage2/prefix
make -s install BUILD="$build" PREFIX="$prefix2" >/dev/null
for pc in advlock advlock_pq advlock_fake; do
    grep -qx "prefix=$prefix2" "$prefix2/lib/pkgconfig/$pc.pc" ||
        { echo "install: $pc.pc installed again does not name the new PREFIX $prefix2" >&2; exit 1; }
done

export PKG_CONFIG_PATH=$prefix2/lib/pkgconfig
unset LD_LIBRARY_PATH
cc=${CC:-cc}
# README: a program linked against a prefix outside the loader's search.
rpath() { echo "-Wl,-rpath,$(pkg-config --variable=libdir "$1")"; }

# libadvlock: the first reference vector's key.
vector=$(sed -n 2p tests/vectors/keys.tsv)
name=$(printf '%s' "$vector" | cut -f1 | sed 's/^"//; s/"$//')
want=$(printf '%s' "$vector" | cut -f2)
cat > "$stage/core.c" <<C
#include <advlock.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    int64_t key;
    if (advlock_derive_key("$name", strlen("$name"), &key) != 0)
        return 1;
    printf("%" PRId64 "\n", key);
    return 0;
}
C
$cc -std=c11 -o "$stage/core" "$stage/core.c" $(pkg-config --cflags --libs advlock) $(rpath advlock)
got=$("$stage/core")
[ "$got" = "$want" ] ||
    { echo "install: libadvlock derived $got for \"$name\", the vector says $want" >&2; exit 1; }

# libadvlock_pq: links against libpq and the core; no server needed.
cat > "$stage/pq.c" <<'C'
#include <advlock_pq.h>
#include <stdio.h>
int main(void)
{
    const char *name = advlock_pq_statement_name(ADVLOCK_SQL_TRY_LOCK);
    return name != NULL && name[0] != '\0' ? 0 : 1;
}
C
$cc -std=c11 -o "$stage/pq" "$stage/pq.c" $(pkg-config --cflags --libs advlock_pq) $(rpath advlock_pq)
"$stage/pq" || { echo "install: the libadvlock_pq program failed" >&2; exit 1; }

# libadvlock_fake: the user's deterministic lock test, from the page that
# teaches it, built with the page's own command lines (cc is CC).
mkdir "$stage/fake"
awk '/<!-- tested: doc_example.c -->/ {armed = 1; next}
     armed && /^```c/ {inside = 1; next} inside && /^```/ {exit} inside {print}' \
    docs/simulation.md > "$stage/fake/test.c"
[ -s "$stage/fake/test.c" ] || { echo "install: docs/simulation.md has no doc_example.c" >&2; exit 1; }
for how in shared static; do
    line=$(grep -m1 "^cc test\.c .*# $how\$" docs/simulation.md) ||
        { echo "install: docs/simulation.md has no '# $how' build line" >&2; exit 1; }
    (cd "$stage/fake" && rm -f a.out && CC_LINE="$cc ${line#cc }" && eval "$CC_LINE") ||
        { echo "install: docs/simulation.md's $how line failed: $line" >&2; exit 1; }
    "$stage/fake/a.out" | grep -qx "deterministic lock test: ok" ||
        { echo "install: the deterministic lock test built $how did not run: $line" >&2; exit 1; }
    needed=$(readelf -d "$stage/fake/a.out" | { grep -o 'libadvlock[a-z_]*\.so[.0-9]*' || true; } |
        sort -u | tr '\n' ' ')
    case $how in
    shared) [ "$needed" = "libadvlock.so.1 libadvlock_fake.so.1 " ] ||
        { echo "install: the shared doc example needs [$needed], not both libraries" >&2; exit 1; } ;;
    static) [ -z "$needed" ] ||
        { echo "install: the static doc example still needs $needed: $line" >&2; exit 1; } ;;
    esac
done

echo "install check: PREFIX (installed twice) and DESTDIR honoured; advlock, advlock_pq and advlock_fake build and run from an install alone, with the rpath README gives (the fake shared and static as docs/simulation.md prints)"
