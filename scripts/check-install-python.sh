#!/usr/bin/env bash
# Proves `make install-python` puts the package where docs/python.md says
# PYTHON (Debian's /usr/bin/python3) finds it:
#   PREFIX=/usr/local  into a directory on PYTHON's own sys.path (staged with
#                      DESTDIR, so nothing outside a temporary directory is
#                      touched);
#   another PREFIX     installed there with the libraries, then imported with
#                      the PYTHONPATH install-python prints, and the package
#                      loads the libraries of that prefix (no source tree);
#   py.typed           the marker that type checkers read hints by (PEP 561).
# BUILD names the build directory (default build).
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
build=${BUILD:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
fail() { echo "install-python: $*" >&2; exit 1; }

make -s --no-print-directory install-python PYTHON="$python" DESTDIR="$stage/dest" PREFIX=/usr/local >/dev/null
found=$(cd "$stage/dest" && find . -name _installed.py -path '*/advlock/*')
[ -n "$found" ] || fail "nothing installed under DESTDIR"
sitedir=${found#.}
sitedir=${sitedir%/advlock/_installed.py}
"$python" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$sitedir" ||
    fail "PREFIX=/usr/local installed into $sitedir, which $python does not read"
# The PEP 561 marker: type checkers read the package's hints.
[ -f "$stage/dest$sitedir/advlock/py.typed" ] || fail "py.typed is not installed beside the package"

prefix=$stage/prefix
make -s --no-print-directory install BUILD="$build" PREFIX="$prefix" >/dev/null
said=$(make -s --no-print-directory install-python PYTHON="$python" PREFIX="$prefix")
pythonpath=$(sed -n 's/.*: run it with PYTHONPATH=//p' <<<"$said")
[ -n "$pythonpath" ] || fail "install-python into $prefix did not say which PYTHONPATH to use: [$said]"
vector=$(sed -n 2p tests/vectors/keys.tsv)
name=$(cut -f1 <<<"$vector" | sed 's/^"//; s/"$//')
want=$(cut -f2 <<<"$vector")
got=$(cd / && env -u ADVLOCK_LIBRARY -u ADVLOCK_FAKE_LIBRARY -u ADVLOCK_BUILD -u LD_LIBRARY_PATH \
    PYTHONPATH="$pythonpath" "$python" -c 'import sys, advlock; print(advlock.derive_key(sys.argv[1]))' "$name") ||
    fail "import advlock with PYTHONPATH=$pythonpath failed"
[ "$got" = "$want" ] || fail "the installed package derived $got for \"$name\", the vector says $want"
echo "install-python check: PREFIX=/usr/local lands on $python's path; another prefix imports with the PYTHONPATH it prints"
