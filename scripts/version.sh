#!/usr/bin/env bash
# Prints the project's version, read from the one place it is written:
# ADVLOCK_VERSION in include/advlock.h. Everything that needs the version
# (the Makefile's VERSION, the wheel's setup.py, the tests) reads it here.
#   scripts/version.sh        from anywhere
set -euo pipefail
header="$(dirname "$0")/../include/advlock.h"
version=$(sed -n 's/^#define ADVLOCK_VERSION "\(.*\)"$/\1/p' "$header")
[ -n "$version" ] || { echo "version.sh: no #define ADVLOCK_VERSION \"...\" in $header" >&2; exit 1; }
echo "$version"
