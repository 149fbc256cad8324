#!/usr/bin/env bash
# Runs a command against a throwaway primary and a streaming hot standby.
#
# Usage: tests/pg/with-standby.sh COMMAND [ARGS...]
#        tests/pg/with-standby.sh --ctl ACTION      (from inside COMMAND)
#
# The primary comes from tests/pg/with-postgres.sh (everything it exports is
# exported here too; PGHOST, PGPORT and ADVLOCK_PG_DATA name the primary).
# The standby is made from it with pg_basebackup -R (streaming, hot_standby),
# in a directory of its own with its own Unix socket, and is promotable.
# Exports
#     ADVLOCK_TEST_PRIMARY     conninfo of the primary
#     ADVLOCK_TEST_STANDBY     conninfo of the standby
#     ADVLOCK_TEST_MULTIHOST   host=PRIMARY_DIR,STANDBY_DIR port=P1,P2 ...
#                              target_session_attrs=read-write
#     ADVLOCK_STANDBY_DATA     the standby's data directory (log in its log/)
#     ADVLOCK_STANDBY_HOST, ADVLOCK_STANDBY_PORT
#     ADVLOCK_STANDBY_CTL      this script's path, for the --ctl actions:
#
#   "$ADVLOCK_STANDBY_CTL" --ctl stop-primary [fast|immediate|smart]
#                      stop the primary (default fast: its backends are
#                      terminated and their clients see the socket close)
#   "$ADVLOCK_STANDBY_CTL" --ctl start-primary
#                      start it again (still a primary: nothing rewinds it)
#   "$ADVLOCK_STANDBY_CTL" --ctl promote
#                      pg_ctl promote -w the standby (it then accepts writes)
#   "$ADVLOCK_STANDBY_CTL" --ctl wait-streaming
#                      wait until the primary shows the standby streaming
#
# then runs COMMAND, and always stops both servers and removes their
# directories: when the command succeeds, fails, or this script is
# interrupted (INT, TERM, HUP). Exits with COMMAND's status.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/pg/scratch.sh
. "$here/scratch.sh"

# pg_ctl as the data directory's owner, from a directory it may read.
pgctl() {
    (cd / && "${as_owner[@]}" "$ADVLOCK_PG_BIN/pg_ctl" "$@")
}

wait_streaming() {
    for _ in $(seq 200); do
        if [ "$(psql -X -At -d "$ADVLOCK_TEST_PRIMARY" \
                -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" \
                2>/dev/null)" = 1 ]; then
            return 0
        fi
        sleep 0.05
    done
    echo "error: the standby is not streaming" >&2
    return 1
}

if [ "${1:-}" = "--ctl" ]; then
    : "${ADVLOCK_PG_DATA:?}" "${ADVLOCK_STANDBY_DATA:?}" "${ADVLOCK_PG_BIN:?}"
    case "${2:-}" in
        stop-primary) pgctl -D "$ADVLOCK_PG_DATA" -m "${3:-fast}" -w stop >/dev/null ;;
        start-primary) pgctl -D "$ADVLOCK_PG_DATA" -w -t 60 start >/dev/null ;;
        promote) pgctl -D "$ADVLOCK_STANDBY_DATA" -w -t 60 promote >/dev/null ;;
        wait-streaming) wait_streaming ;;
        *) echo "usage: $0 --ctl stop-primary [MODE]|start-primary|promote|wait-streaming" >&2; exit 2 ;;
    esac
    exit
fi

if [ "${1:-}" != "--inside-postgres" ]; then
    if [ $# -eq 0 ]; then
        echo "usage: $0 COMMAND [ARGS...]" >&2
        exit 2
    fi
    exec "$here/with-postgres.sh" "$here/with-standby.sh" --inside-postgres "$@"
fi
shift

: "${PGHOST:?run under with-postgres.sh}" "${PGPORT:?}" "${ADVLOCK_PG_BIN:?}"

# The standby is a pg_basebackup of the primary, and pg_basebackup refuses a
# server of another major version than its own: Debian's server is the only
# one whose pg_basebackup is at hand (the builds PG_VERSION installs hold
# none), so the standby suites run on Debian's server only.
if [ ! -x "$ADVLOCK_PG_BIN/pg_basebackup" ]; then
    echo "error: with-standby.sh needs Debian's server (with pg_basebackup); PG_VERSION=${PG_VERSION:-} is PostgreSQL $ADVLOCK_PG_MAJOR without one" >&2
    exit 1
fi

sbase=$(scratch_dir advlock-standby)
sdata="$sbase/data"
stop_standby() {
    if [ -f "$sdata/postmaster.pid" ]; then
        pgctl -D "$sdata" -m immediate -w stop >/dev/null 2>&1 || true
    fi
}
guard_scratch "$sbase" stop_standby
sport=$((PGPORT + 3))

# initdb's trust pg_hba.conf already allows local replication connections,
# and PostgreSQL 15's defaults (wal_level = replica, max_wal_senders = 10)
# allow streaming.
if ! (cd / && "${as_owner[@]}" "$ADVLOCK_PG_BIN/pg_basebackup" -h "$PGHOST" -p "$PGPORT" \
        -U postgres -D "$sdata" -R -X stream -c fast --no-sync) >"$sbase/basebackup.log" 2>&1; then
    cat "$sbase/basebackup.log" >&2
    exit 1
fi
# The copy carries the primary's settings; these come later and win.
cat >>"$sdata/postgresql.conf" <<EOF

# advlock tests: the standby, on a socket of its own.
unix_socket_directories = '$sbase'
port = $sport
hot_standby = on
EOF
rm -rf "$sdata/log"
if ! pgctl -D "$sdata" -w -t 60 start >"$sbase/pg_ctl.log" 2>&1; then
    cat "$sbase/pg_ctl.log" >&2
    cat "$sdata"/log/* >&2 2>/dev/null || true
    exit 1
fi

export ADVLOCK_TEST_PRIMARY="host=$PGHOST port=$PGPORT dbname=postgres user=postgres"
export ADVLOCK_TEST_STANDBY="host=$sbase port=$sport dbname=postgres user=postgres"
export ADVLOCK_TEST_MULTIHOST="host=$PGHOST,$sbase port=$PGPORT,$sport dbname=postgres user=postgres target_session_attrs=read-write"
export ADVLOCK_STANDBY_DATA="$sdata" ADVLOCK_STANDBY_HOST="$sbase" ADVLOCK_STANDBY_PORT="$sport"
export ADVLOCK_STANDBY_CTL="$here/with-standby.sh"

wait_streaming
if [ "$(psql -X -At -d "$ADVLOCK_TEST_STANDBY" -c 'SELECT pg_is_in_recovery()')" != t ]; then
    echo "error: the standby is not in recovery" >&2
    exit 1
fi

"$@" <&0 &
child=$!
status=0
wait "$child" || status=$?
child=
exit "$status"
