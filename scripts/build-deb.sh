#!/usr/bin/env bash
# Builds the Debian packages (debian/) into DEB_DIR, default build/deb:
# copies the files git tracks (as they are in the working tree, edits
# included; files not yet added are left out, and counted on stderr) to
# DEB_DIR/advlock-VERSION, runs
# dpkg-buildpackage there (the .deb files land in DEB_DIR, its parent), and
# checks them with lintian, failing on any error and listing the rest.
# Its one warning, initial-upload-closes-no-bugs, asks for the Debian bug
# (an ITP) that a first upload to Debian's archive would close: these
# packages are built from the project's tree, not uploaded there.
#   scripts/build-deb.sh [DEB_DIR]        from the top of the tree
# Prints one line (V=1: the whole lintian report); the build's log is
# DEB_DIR/build.log, lintian's DEB_DIR/lintian.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/deb}
# It is emptied first: a directory of its own, never the tree or a root.
case ${out%/} in '' | . | .. | / | */. | */..) echo "build-deb: refusing DEB_DIR '$out'" >&2; exit 2 ;; esac
version=$(dpkg-parsechangelog -S Version)
src=$out/advlock-${version%-*}
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar -c --null -T - | tar -x -C "$src"
untracked=$(git ls-files --others --exclude-standard | wc -l)
[ "$untracked" -eq 0 ] ||
    echo "build-deb: left out $untracked file(s) git does not track (git status lists them)" >&2
# A make that runs this one hands down its flags and command-line variables
# (BUILD=..., -s): the package's own make must not see them.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
# The four packages only: no -dbgsym packages beside them for
# apt-get install ./build/deb/*.deb to pick up.
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }noautodbgsym"
log=$out/build.log
if ! (cd "$src" && dpkg-buildpackage -b -us -uc) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "build-deb: dpkg-buildpackage failed; the whole log is $log" >&2
    exit 1
fi
rm -rf "$src"
changes=$(ls "$out"/*.changes)
report=$out/lintian.txt
status=0
lintian --fail-on error --display-info "$changes" >"$report" 2>&1 || status=$?
# One line, as the build's own; every tag when something fails, or with V=1.
if [ "$status" -ne 0 ] || [ "${V:-0}" = 1 ]; then
    cat "$report"
fi
count() { grep -c "^$1: " "$report" || true; }
printf '  DEB     %s (lintian: %s errors, %s warnings, %s notes; %s)\n' \
    "$(cd "$out" && echo *.deb)" "$(count E)" "$(count W)" "$(count I)" "$report"
exit "$status"
