#!/usr/bin/env bash
# Makes sure Debian's Python (PYTHON, default /usr/bin/python3) can import
# the modules the Python suite needs. Usage: python/ensure-deps.sh PACKAGE:MODULE ...
# As root, missing packages are installed with apt-get; otherwise the script
# prints the command to run and fails (as scripts/ensure-deps.sh does).
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
missing=()
for spec in "$@"; do
    pkg=${spec%%:*} module=${spec#*:}
    [ -x "$python" ] && "$python" -c "import $module" 2>/dev/null && continue
    missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing missing packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
    exit 0
fi
echo "error: missing packages. Run:" >&2
echo "    sudo apt-get install -y ${missing[*]}" >&2
exit 1
