#!/usr/bin/env bash
# A server older than advlock supports (PostgreSQL 13: PG_VERSION=13, as
# `make test-versions` runs it) is refused before anything is locked, with
# the minimum version and why: `run` with one name and with several, with
# and without a lease's startup options, --xact, and `status`.
set -uo pipefail
here=$(dirname "$0")
# shellcheck source=tests/cli/lib.sh
. "$here/lib.sh"
: "${ADVLOCK:?set ADVLOCK to the advlock binary}" "${ADVLOCK_PG_MAJOR:?run under with-postgres.sh}"

if [ "$ADVLOCK_PG_MAJOR" -ge 14 ]; then
    echo "old_server: PostgreSQL $ADVLOCK_PG_MAJOR is supported: run it with PG_VERSION=13" >&2
    exit 77
fi

marker=$(mktemp -u)
# refused NAME COMMAND...: exits 70, says why, runs nothing, locks nothing.
refused() {
    local what=$1
    shift
    capture "$@"
    check "$what: exit status" "$EXIT_LOCK_ERROR" "$RC"
    case "$ERR" in
        *"advlock needs PostgreSQL 14 or later"*client_connection_check_interval*) pass ;;
        *) fail "$what: no word of the minimum version: $ERR" ;;
    esac
    [ ! -e "$marker" ] && pass || { fail "$what: the command ran"; rm -f "$marker"; }
}

refused "run (a lease's startup options)" "$ADVLOCK" run old-a -- touch "$marker"
refused "run --lease 0" "$ADVLOCK" run --lease 0 old-a -- touch "$marker"
refused "run --xact" "$ADVLOCK" run --xact old-a -- touch "$marker"
refused "run with two names" "$ADVLOCK" run old-a old-b -- touch "$marker"
refused "status" "$ADVLOCK" status old-a
check "nothing locked" 0 "$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"
finish
