#!/usr/bin/env bash
# Makes sure the Debian packages a build step needs are present.
# Usage: scripts/ensure-deps.sh PACKAGE:PROBE ...
#   PROBE is a header to find (cmocka.h), a command to find (cmd:initdb), or
#   a module Debian's Python must import (py:asyncpg; PYTHON names the
#   interpreter, /usr/bin/python3 by default).
# As root, missing packages are installed; otherwise the script prints the
# exact command to run and fails. NO_RECOMMENDS=1 installs them without
# their Recommends (chromium's are desktop services a headless run never
# opens).
set -euo pipefail

# CC may carry flags ("gcc --coverage"): split it into words.
read -r -a cc <<<"${CC:-cc}"
missing=()
for spec in "$@"; do
    pkg=${spec%%:*}
    probe=${spec#*:}
    case "$probe" in
        cmd:*) command -v "${probe#cmd:}" >/dev/null 2>&1 && continue ;;
        py:*) "${PYTHON:-/usr/bin/python3}" -c "import ${probe#py:}" >/dev/null 2>&1 && continue ;;
        *) printf '#include <%s>\n' "$probe" | "${cc[@]}" -E -x c - >/dev/null 2>&1 && continue ;;
    esac
    missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
flags=()
[ "${NO_RECOMMENDS:-0}" = 1 ] && flags=(--no-install-recommends)

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing missing packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "$(dirname "$0")/apt-get.sh" update -qq >&2
    "$(dirname "$0")/apt-get.sh" install -y -qq "${flags[@]}" "${missing[@]}" >&2
    exit 0
fi
echo "error: missing packages. Run:" >&2
echo "    sudo apt-get install -y ${flags[*]}${flags[*]:+ }${missing[*]}" >&2
exit 1
