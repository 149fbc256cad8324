#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server.
#
# Usage: tests/pg/with-postgres.sh COMMAND [ARGS...]
#
# Starts a fresh server (initdb into a temporary directory, trust
# authentication, a Unix socket in that directory and no TCP), exports
#     PGHOST            the socket directory
#     PGPORT            the port number in the socket's name
#     PGUSER=postgres   PGDATABASE=postgres
#     ADVLOCK_PG_DATA   the data directory, for pg_ctl -D
#     ADVLOCK_PG_BIN    the directory holding pg_ctl, initdb, postgres
# runs COMMAND, and always stops the server and removes the directory: when
# the command succeeds, fails, or this script is interrupted. Exits with
# COMMAND's status (128 + signal number when interrupted).
#
# ADVLOCK_PG_LISTEN=ADDRESS/PREFIX (opt-in) makes the server listen on TCP
# too, on ADDRESS and the same port, trusting clients from ADDRESS's network
# (the partition harness, tests/partition/lib.sh, gives it a veth address).
# ADDRESS must already exist on an interface when the server starts.
#
# ADVLOCK_PG_CONF (opt-in) holds more lines for postgresql.conf, appended
# after the harness's own (so they win): "max_locks_per_transaction = 10".
#
# A test may stop the server (pg_ctl stop -m immediate) and start it again
# with "$ADVLOCK_PG_BIN/pg_ctl" -D "$ADVLOCK_PG_DATA" -w start: every setting
# lives in the data directory, and the server logs to $ADVLOCK_PG_DATA/log.
# pg_ctl must run as the data directory's owner (as root: runuser -u postgres).
#
# The server binaries come from `pg_config --bindir` when that holds initdb,
# else from the newest /usr/lib/postgresql/*/bin; when neither exists and
# this runs as root, the Debian postgresql package is installed.
#
# PG_VERSION=MAJOR (13 to 18) asks for a server of that major version
# instead: Debian's when it is that version, else the build that
# tests/pg/server-builds pins, installed on first use into a cache outside
# the source tree (tests/pg/install-server.sh). The clients (psql, libpq,
# the drivers) stay Debian's whatever the server. ADVLOCK_PG_MAJOR is
# exported: the running server's major version.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi

find_bindir() {
    local dir
    dir=$(pg_config --bindir 2>/dev/null || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
        echo "$dir"
        return 0
    fi
    # Debian's pg_config from libpq-dev says /usr/bin, which has no initdb.
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
        echo "$dir"
        return 0
    fi
    return 1
}

# The major version of the server in directory $1.
server_major() {
    "$1/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)[.].*/\1/p'
}

bindir=$(find_bindir || true)
if [ -n "${PG_VERSION:-}" ] && { [ -z "$bindir" ] || [ "$(server_major "$bindir")" != "$PG_VERSION" ]; }; then
    bindir=$("$(dirname "${BASH_SOURCE[0]}")/install-server.sh" "$PG_VERSION")
elif [ -z "$bindir" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "error: no PostgreSQL server binaries found. Run:" >&2
        echo "    sudo apt-get install -y postgresql" >&2
        exit 1
    fi
    echo "installing the PostgreSQL server (apt-get install postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt=("$(dirname "${BASH_SOURCE[0]}")/../../scripts/apt-get.sh")
    "${apt[@]}" update -qq >&2
    "${apt[@]}" install -y -qq postgresql >&2
    bindir=$(find_bindir) || { echo "error: postgresql installed but no initdb found" >&2; exit 1; }
fi

# shellcheck source=tests/pg/scratch.sh
. "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

base=$(scratch_dir advlock-pg)
data="$base/data"
stop_server() {
    if [ -f "$data/postmaster.pid" ]; then
        (cd "$base" && "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -m immediate -w stop) \
            >/dev/null 2>&1 || true
    fi
}
guard_scratch "$base" stop_server

# The socket's name is all the port number is used for (unless TCP is asked
# for, on an address of that run's own), so any number works; a random one
# keeps concurrent runs apart in logs.
port=$((40000 + RANDOM % 20000))

# Run server tools from inside the directory: the postgres user may not be
# allowed to read the caller's working directory.
cd "$base"
if ! "${as_owner[@]}" "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 \
        --locale=C --no-sync >"$base/initdb.log" 2>&1; then
    cat "$base/initdb.log" >&2
    exit 1
fi
cat >>"$data/postgresql.conf" <<EOF

# advlock tests: a throwaway server, fast and quiet, reachable on a socket only.
listen_addresses = ''
unix_socket_directories = '$base'
port = $port
max_connections = 120
shared_buffers = 16MB
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = on
log_directory = 'log'
EOF
if [ -n "${ADVLOCK_PG_CONF:-}" ]; then
    printf '%s\n' "$ADVLOCK_PG_CONF" >>"$data/postgresql.conf"
fi
if [ -n "${ADVLOCK_PG_LISTEN:-}" ]; then
    echo "listen_addresses = '${ADVLOCK_PG_LISTEN%/*}'" >>"$data/postgresql.conf"
    echo "host all all $ADVLOCK_PG_LISTEN trust" >>"$data/pg_hba.conf"
fi
if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -w -t 60 start >"$base/pg_ctl.log" 2>&1; then
    cat "$base/pg_ctl.log" >&2
    cat "$data"/log/* >&2 2>/dev/null || true
    exit 1
fi
cd "$OLDPWD"

export PGHOST="$base" PGPORT="$port" PGUSER=postgres PGDATABASE=postgres
export ADVLOCK_PG_DATA="$data" ADVLOCK_PG_BIN="$bindir" ADVLOCK_PG_MAJOR="$(server_major "$bindir")"
# Settings from the caller's environment must not redirect the tests.
unset PGHOSTADDR PGSERVICE PGSERVICEFILE PGOPTIONS PGPASSWORD PGSSLMODE 2>/dev/null || true

# In the background so that a signal to this script is handled at once;
# the explicit <&0 keeps the caller's standard input.
"$@" <&0 &
child=$!
status=0
wait "$child" || status=$?
child=
exit "$status"
