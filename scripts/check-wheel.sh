#!/usr/bin/env bash
# Proves the wheel docs/python.md starts from, and the package's rules for
# finding its libraries (python/advlock/_binding.py) that the other suites
# do not cover, each from outside the tree with an emptied environment:
#   the wheel       `pip wheel --no-build-isolation --no-index ./python`
#                   (what `pip install ./python` builds) is tagged for this
#                   platform, carries py.typed and both libraries, byte for byte the
#                   ones make built; installed offline into fresh virtual
#                   environments, its package runs on those copies: with
#                   Debian's asyncpg it takes and releases a lock on the
#                   server tests/pg/with-postgres.sh started, and it imports
#                   in a venv that sees no system package at all;
#   ADVLOCK_LIBRARY overrides the wheel's copies;
#   the tree        the checkout's python/ loads BUILD's libraries;
#   the linker      the package alone (no libraries beside it, no tree, no
#                   install record) loads libadvlock.so.1 where the dynamic
#                   linker finds it (LD_LIBRARY_PATH here; the system's
#                   directories for a Debian package).
# The install record is scripts/check-install-python.sh's.
# BUILD names the build directory (default build).
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
build=${BUILD:-build}
tree=$PWD
built=$(realpath -m "$build")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
fail() { echo "wheel: $*" >&2; exit 1; }
probe=$tree/python/tests/wheel_probe.py
vector=$(sed -n 2p tests/vectors/keys.tsv)
name=$(cut -f1 <<<"$vector" | sed 's/^"//; s/"$//')
key=$(cut -f2 <<<"$vector")
# clean COMMAND...: COMMAND from a directory outside the tree, in an
# environment holding only PATH, HOME and the server's PG* variables.
clean() {
    (cd "$stage" && env -i PATH=/usr/bin:/bin HOME="$HOME" PYTHONDONTWRITEBYTECODE=1 \
        PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER="${PGUSER:-}" \
        PGDATABASE="${PGDATABASE:-}" "$@")
}

ADVLOCK_BUILD=$build "$python" -m pip wheel --quiet --no-build-isolation --no-deps --no-index \
    --disable-pip-version-check -w "$stage/dist" ./python >"$stage/pip.log" 2>&1 ||
    { cat "$stage/pip.log" >&2; fail "pip wheel ./python failed"; }
wheel=$(find "$stage/dist" -name 'advlock-*.whl')
case ${wheel##*/} in
    advlock-*-py3-none-linux_*.whl) ;;
    *) fail "the wheel is not tagged for this platform: ${wheel##*/}" ;;
esac
"$python" -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    lines = whl.read(meta).decode().splitlines()
sys.exit("License: MIT" not in lines)' "$wheel" || fail "the wheel's metadata does not say License: MIT"
for lib in libadvlock libadvlock_fake; do
    "$python" -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl, open(sys.argv[3], "rb") as built:
    sys.exit(whl.read(sys.argv[2]) != built.read())' "$wheel" "advlock/$lib.so.1" \
        "$built/$lib.so" ||
        fail "the wheel does not carry $build/$lib.so as advlock/$lib.so.1"
done
"$python" -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    sys.exit("advlock/py.typed" not in whl.namelist())' "$wheel" ||
    fail "the wheel does not carry advlock/py.typed (type checkers read the hints by it)"

# package_in VENV: where VENV's interpreter imports advlock from, which must
# be VENV itself (the wheel's copy, not Debian's or the tree's).
package_in() {
    local package
    package=$(clean "$1/bin/python" -c \
        'import os, advlock; print(os.path.dirname(advlock.__file__))')
    case $package in
        "$1/"*) echo "$package" ;;
        *) fail "the virtual environment imports advlock from $package, not from the wheel" ;;
    esac
}

# --system-site-packages: asyncpg is Debian's (python3-asyncpg).
"$python" -m venv --system-site-packages "$stage/venv"
clean "$stage/venv/bin/python" -m pip install --quiet --no-index --no-deps \
    --disable-pip-version-check "$wheel" || fail "pip install of ${wheel##*/} failed"
package=$(package_in "$stage/venv")
clean "$stage/venv/bin/python" "$probe" "$package" "$name" "$key" --server
# And in a venv that sees none of the system's packages.
"$python" -m venv --without-pip "$stage/alone"
"$python" -m pip --python "$stage/alone/bin/python" install --quiet --no-index --no-deps \
    --disable-pip-version-check "$wheel" || fail "pip install of ${wheel##*/} failed"
package=$(package_in "$stage/alone")
clean "$stage/alone/bin/python" "$probe" "$package" "$name" "$key"
# ADVLOCK_LIBRARY goes before the wheel's copies.
clean env ADVLOCK_LIBRARY="$built/libadvlock.so" \
    "$stage/venv/bin/python" "$probe" "$built" "$name" "$key"
# The checkout's package loads the checkout's build.
clean env PYTHONPATH="$tree/python" ADVLOCK_BUILD="$build" \
    "$python" "$probe" "$built" "$name" "$key"
# The package's modules alone load what the linker's path holds.
mkdir "$stage/bare"
cp -r python/advlock "$stage/bare/"
clean env PYTHONPATH="$stage/bare" LD_LIBRARY_PATH="$built" \
    "$python" "$probe" "$built" "$name" "$key"
echo "wheel check: ${wheel##*/} carries the libraries, installs offline and locks;" \
    "ADVLOCK_LIBRARY, the tree and the linker's path find theirs"
