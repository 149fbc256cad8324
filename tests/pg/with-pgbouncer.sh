#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server with two PgBouncers in
# front of it: one in pool_mode = transaction, one in pool_mode = session.
#
# Usage: tests/pg/with-pgbouncer.sh COMMAND [ARGS...]
#
# The server comes from tests/pg/with-postgres.sh (everything it exports is
# exported here too: PGHOST, PGPORT, PGUSER, PGDATABASE, ADVLOCK_PG_DATA,
# ADVLOCK_PG_BIN; PG* still name the server directly). Besides, exports
#     ADVLOCK_TEST_DIRECT            conninfo of the server itself
#     ADVLOCK_TEST_PGBOUNCER_TX      conninfo through the transaction-mode PgBouncer
#     ADVLOCK_TEST_PGBOUNCER_SESSION conninfo through the session-mode PgBouncer
#     ADVLOCK_TEST_PGBOUNCER_TX_ADMIN, ADVLOCK_TEST_PGBOUNCER_SESSION_ADMIN
#                                    conninfo of each one's admin console
#                                    (dbname=pgbouncer: SHOW SERVERS, SHOW POOLS)
#     ADVLOCK_TEST_PGBOUNCER_DIR     the directory holding both ini files, logs
#                                    (tx.log, session.log) and sockets
# then runs COMMAND and always stops both PgBouncers and the server and
# removes their directories: when the command succeeds, fails, or this script
# is interrupted (INT, TERM, HUP). Exits with COMMAND's status.
#
# Both PgBouncers are Debian's (installed when missing and this runs as root),
# run as postgres (PgBouncer refuses root), listen on a Unix socket in their
# own directory only, and trust the postgres user (auth_file lists it). The
# database name is postgres on both, so a lock taken through either is the
# same lock as one taken directly. Pool sizes:
#     transaction mode: ADVLOCK_TEST_PGBOUNCER_TX_POOL server connections
#                       (default 3), so that with more clients than that,
#                       successive statements of one client land on different
#                       server sessions;
#     session mode:     ADVLOCK_TEST_PGBOUNCER_SESSION_POOL server connections
#                       (default 40: one per client, as direct; 1 makes a
#                       pool that one busy client saturates).
# The session-mode PgBouncer resets a server session between clients with
# its default server_reset_query (DISCARD ALL); when
# ADVLOCK_TEST_PGBOUNCER_SESSION_RESET_QUERY is set, even to nothing, that is
# its server_reset_query instead (empty: a server session keeps its settings
# for the next client).
#
# ADVLOCK_TEST_PGBOUNCER_LISTEN=ADDRESS makes both listen on that TCP address
# too (their listen_addr; exported then: ADVLOCK_TEST_PGBOUNCER_SESSION_TCP,
# the session-mode one's conninfo over TCP), and each line of
# ADVLOCK_TEST_PGBOUNCER_SETTINGS ("tcp_keepidle = 3", ...) is added to both
# ini files. Run already under with-postgres.sh (as
# tests/partition/with-partition.sh runs its command),
#     tests/pg/with-pgbouncer.sh --inside-postgres COMMAND [ARGS...]
# puts the PgBouncers in front of that server instead of starting another.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/pg/scratch.sh
. "$here/scratch.sh"

find_pgbouncer() {
    command -v pgbouncer 2>/dev/null && return 0
    [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer && return 0
    return 1
}

if [ "${1:-}" != "--inside-postgres" ]; then
    if [ $# -eq 0 ]; then
        echo "usage: $0 COMMAND [ARGS...]" >&2
        exit 2
    fi
    if ! find_pgbouncer >/dev/null; then
        if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
            echo "error: PgBouncer not found. Run:" >&2
            echo "    sudo apt-get install -y pgbouncer" >&2
            exit 1
        fi
        echo "installing PgBouncer (apt-get install pgbouncer)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt=("$here/../../scripts/apt-get.sh")
        "${apt[@]}" install -y -qq pgbouncer >&2 2>/dev/null \
            || { "${apt[@]}" update -qq >&2 && "${apt[@]}" install -y -qq pgbouncer >&2; }
        # The package enables a system service; it is not ours to run.
        find_pgbouncer >/dev/null || { echo "error: pgbouncer installed but not found" >&2; exit 1; }
    fi
    exec "$here/with-postgres.sh" "$here/with-pgbouncer.sh" --inside-postgres "$@"
fi
shift

: "${PGHOST:?run under with-postgres.sh}" "${PGPORT:?}"
pgbouncer_bin=$(find_pgbouncer)


dir=$(scratch_dir advlock-pgb)
pidfiles=("$dir/tx.pid" "$dir/session.pid")

stop_pgbouncers() {
    local pidfile pid
    for pidfile in "${pidfiles[@]}"; do
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [ -n "$pid" ] || continue
        # SIGTERM: immediate shutdown in PgBouncer 1.18.
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
}

guard_scratch "$dir" stop_pgbouncers

tx_port=$((PGPORT + 1))
session_port=$((PGPORT + 2))
tx_pool=${ADVLOCK_TEST_PGBOUNCER_TX_POOL:-3}
session_pool=${ADVLOCK_TEST_PGBOUNCER_SESSION_POOL:-40}

printf '"postgres" ""\n' >"$dir/userlist.txt"

# write_ini NAME PORT POOL_MODE POOL_SIZE
write_ini() {
    cat >"$dir/$1.ini" <<EOF
[databases]
postgres = host=$PGHOST port=$PGPORT dbname=postgres user=postgres

[pgbouncer]
; advlock tests: a throwaway PgBouncer on a Unix socket (and listen_addr).
listen_addr = ${ADVLOCK_TEST_PGBOUNCER_LISTEN:-}
listen_port = $2
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = $3
default_pool_size = $4
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
max_db_connections = 0
ignore_startup_parameters = extra_float_digits
logfile = $dir/$1.log
pidfile = $dir/$1.pid
log_connections = 0
log_disconnections = 0
${ADVLOCK_TEST_PGBOUNCER_SETTINGS:-}
EOF
    if [ ${#as_owner[@]} -gt 0 ]; then
        chown postgres: "$dir/$1.ini" "$dir/userlist.txt"
    fi
}

# start_pgbouncer NAME PORT
start_pgbouncer() {
    if ! (cd "$dir" && "${as_owner[@]}" "$pgbouncer_bin" -d -q "$dir/$1.ini") >"$dir/$1.start" 2>&1; then
        cat "$dir/$1.start" "$dir/$1.log" >&2 2>/dev/null || true
        return 1
    fi
    for _ in $(seq 100); do
        if psql -X -At -q "host=$dir port=$2 dbname=postgres user=postgres" \
                -c 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.05
    done
    echo "error: PgBouncer $1 did not answer on $dir port $2" >&2
    cat "$dir/$1.log" >&2 2>/dev/null || true
    return 1
}

write_ini tx "$tx_port" transaction "$tx_pool"
write_ini session "$session_port" session "$session_pool"
if [ -n "${ADVLOCK_TEST_PGBOUNCER_SESSION_RESET_QUERY+set}" ]; then
    echo "server_reset_query = $ADVLOCK_TEST_PGBOUNCER_SESSION_RESET_QUERY" >>"$dir/session.ini"
fi
start_pgbouncer tx "$tx_port"
start_pgbouncer session "$session_port"

export ADVLOCK_TEST_DIRECT="host=$PGHOST port=$PGPORT dbname=postgres user=postgres"
export ADVLOCK_TEST_PGBOUNCER_TX="host=$dir port=$tx_port dbname=postgres user=postgres"
export ADVLOCK_TEST_PGBOUNCER_SESSION="host=$dir port=$session_port dbname=postgres user=postgres"
export ADVLOCK_TEST_PGBOUNCER_TX_ADMIN="host=$dir port=$tx_port dbname=pgbouncer user=postgres"
export ADVLOCK_TEST_PGBOUNCER_SESSION_ADMIN="host=$dir port=$session_port dbname=pgbouncer user=postgres"
export ADVLOCK_TEST_PGBOUNCER_DIR="$dir"
if [ -n "${ADVLOCK_TEST_PGBOUNCER_LISTEN:-}" ]; then
    export ADVLOCK_TEST_PGBOUNCER_SESSION_TCP="host=$ADVLOCK_TEST_PGBOUNCER_LISTEN port=$session_port dbname=postgres user=postgres"
fi

"$@" <&0 &
child=$!
status=0
wait "$child" || status=$?
child=
exit "$status"
