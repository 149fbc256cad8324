# Sourced by the harness scripts (with-postgres.sh, with-pgbouncer.sh,
# with-standby.sh, tests/partition/with-partition.sh): the servers they
# start run as postgres when the harness runs as root, in a scratch
# directory that is always removed, whatever happens to the command or to
# the script.

# PostgreSQL and PgBouncer refuse to run as root: as root, run them as postgres.
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
    as_owner=(runuser -u postgres --)
fi

# Prints a new directory named PREFIX.XXXXXX that the servers' user owns.
scratch_dir() {
    local dir
    dir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    if [ ${#as_owner[@]} -gt 0 ]; then
        chown postgres: "$dir"
    fi
    chmod 755 "$dir"
    printf '%s\n' "$dir"
}

# From now on, the script's exit (or INT, TERM, HUP, which end it) ends the
# command in $child, runs STOP (the harness's servers), removes DIR and
# keeps the exit status. Usage: guard_scratch DIR STOP
guard_scratch() {
    scratch_guarded=$1
    scratch_stop=$2
    child=
    trap scratch_cleanup EXIT
    local sig
    for sig in INT TERM HUP; do
        # shellcheck disable=SC2064
        trap "exit $((128 + $(kill -l $sig)))" "$sig"
    done
}

scratch_cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    "$scratch_stop"
    rm -rf "$scratch_guarded"
    exit "$status"
}
