#!/usr/bin/env bash
# Proves `make install` honours PREFIX and DESTDIR and that each installed
# library works from the staged copy alone: installs into a staging
# directory, then builds one program per library with nothing but what
# pkg-config says about the staged copy (no -I or -L of the source tree) and
# runs it against the staged shared libraries:
#   advlock       derives a key and checks it against a reference vector;
#   advlock_pq    compiles and links (no server here): a connection-free call;
#   advlock_fake  the deterministic lock test of docs/simulation.md, exactly
#                 as printed there, shared and static.
# BUILD names the build directory (default build).
set -euo pipefail
stage=$(mktemp -d) stage2=$(mktemp -d)
trap 'rm -rf "$stage" "$stage2"' EXIT
prefix=/opt/advlock-check
build=${BUILD:-build}
make -s install BUILD="$build" DESTDIR="$stage" PREFIX="$prefix" >/dev/null
root="$stage$prefix"
for f in include/advlock.h include/advlock_pq.h include/advlock_fake.h \
         lib/libadvlock.a lib/libadvlock.so lib/libadvlock.so.0 \
         lib/libadvlock_pq.a lib/libadvlock_pq.so lib/libadvlock_pq.so.0 \
         lib/libadvlock_fake.a lib/libadvlock_fake.so lib/libadvlock_fake.so.0 \
         lib/pkgconfig/advlock.pc lib/pkgconfig/advlock_pq.pc lib/pkgconfig/advlock_fake.pc; do
    [ -e "$root/$f" ] || { echo "install: missing $prefix/$f" >&2; exit 1; }
done
for pc in advlock advlock_pq advlock_fake; do
    grep -qx "prefix=$prefix" "$root/lib/pkgconfig/$pc.pc" ||
        { echo "install: $pc.pc does not name PREFIX $prefix" >&2; exit 1; }
done
# Installed again from the same build with another PREFIX, every .pc file
# names the new one (advlock_pq.pc once kept the PREFIX it was first built for).
prefix2=/opt/advlock-check-2
make -s install BUILD="$build" DESTDIR="$stage2" PREFIX="$prefix2" >/dev/null
for pc in advlock advlock_pq advlock_fake; do
    grep -qx "prefix=$prefix2" "$stage2$prefix2/lib/pkgconfig/$pc.pc" ||
        { echo "install: $pc.pc installed again does not name the new PREFIX $prefix2" >&2; exit 1; }
done

# The .pc files name the final PREFIX; the sysroot points them at the stage.
# (It prefixes the system packages' paths too: libpq's header directory is
# added from the system's own libpq.pc below.)
pc() { PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config "$@"; }
cc=${CC:-cc}
run() { LD_LIBRARY_PATH="$root/lib" "$@"; }

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
$cc -std=c11 -o "$stage/core" "$stage/core.c" $(pc --cflags --libs advlock)
got=$(run "$stage/core")
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
$cc -std=c11 -o "$stage/pq" "$stage/pq.c" $(pc --cflags --libs advlock_pq) \
    $(pkg-config --cflags libpq 2>/dev/null || echo "-I$(pg_config --includedir)")
run "$stage/pq" || { echo "install: the libadvlock_pq program failed" >&2; exit 1; }

# libadvlock_fake: the user's deterministic lock test, from the page that
# teaches it, built both ways the page shows.
awk '/<!-- tested: doc_example.c -->/ {armed = 1; next}
     armed && /^```c/ {inside = 1; next} inside && /^```/ {exit} inside {print}' \
    docs/simulation.md > "$stage/fake.c"
[ -s "$stage/fake.c" ] || { echo "install: docs/simulation.md has no doc_example.c" >&2; exit 1; }
$cc -std=c11 -o "$stage/fake" "$stage/fake.c" $(pc --cflags --libs advlock_fake)
run "$stage/fake" | grep -qx "deterministic lock test: ok" ||
    { echo "install: the deterministic lock test failed against the shared libraries" >&2; exit 1; }
$cc -std=c11 -static-libgcc -o "$stage/fake-static" "$stage/fake.c" \
    -Wl,-Bstatic $(pc --static --libs-only-l advlock_fake | sed 's/-lcrypto//; s/-lpthread//') \
    -Wl,-Bdynamic $(pc --static --cflags --libs-only-L advlock_fake) -lcrypto -lpthread
"$stage/fake-static" | grep -qx "deterministic lock test: ok" ||
    { echo "install: the deterministic lock test failed against the static libraries" >&2; exit 1; }

echo "install check: PREFIX (installed twice) and DESTDIR honoured; advlock, advlock_pq and advlock_fake build and run from the staged copy (the fake shared and static)"
