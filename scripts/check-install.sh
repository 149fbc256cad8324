#!/usr/bin/env bash
# Proves `make install` honours PREFIX and DESTDIR: installs into a staging
# directory, then builds and runs a program against the staged copy through
# pkg-config, linked against the shared library.
set -euo pipefail
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=/opt/advlock-check
make -s install DESTDIR="$stage" PREFIX="$prefix" >/dev/null
root="$stage$prefix"
for f in include/advlock.h lib/libadvlock.a lib/libadvlock.so lib/libadvlock.so.0 \
         lib/pkgconfig/advlock.pc; do
    [ -e "$root/$f" ] || { echo "install: missing $prefix/$f" >&2; exit 1; }
done
grep -qx "prefix=$prefix" "$root/lib/pkgconfig/advlock.pc" ||
    { echo "install: advlock.pc does not name PREFIX $prefix" >&2; exit 1; }
# The .pc file names the final PREFIX; point the compiler at the staged copy.
flags=$(PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
        pkg-config --cflags --libs advlock)
${CC:-cc} -std=c11 -o "$stage/example" examples/contended_acquire.c $flags
LD_LIBRARY_PATH="$root/lib" "$stage/example" | grep -q "DONE   acquired after 6 attempts" ||
    { echo "install: the program built against the staged library misbehaved" >&2; exit 1; }
echo "install check: PREFIX and DESTDIR honoured; a program builds and runs against the staged library"
