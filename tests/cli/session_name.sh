#!/usr/bin/env bash
# advlock run names its session after its locks: application_name as
# pg_stat_activity shows it, against a real server. Runs under
# tests/pg/with-postgres.sh.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
unset PGAPPNAME

# The application_name of the session that holds run's locks, as the
# server shows it, from inside the run.
shown_by_server() {
    "$A" run -q "$@" -- psql -X -At -c \
        "SELECT application_name FROM pg_stat_activity a JOIN pg_locks l USING (pid)
         WHERE l.locktype = 'advisory' AND l.granted LIMIT 1"
}

capture shown_by_server nightly-migration
check "one name: status" 0 "$RC"
check "one name" "advlock: nightly-migration" "$OUT"

# Several names: in the order they are taken, by key (beta's is the smaller).
[ "$("$A" key beta | cut -f1)" -lt "$("$A" key alpha | cut -f1)" ] || fail "beta's key: not the smaller"
capture shown_by_server alpha beta
check "two names, in key order" "advlock: beta, alpha" "$OUT"

# Every byte that is not printable ASCII as \xNN, whatever the server's
# version would make of it: a tab and UTF-8.
capture shown_by_server $'Stra\xc3\x9fe\tx'
check "escaped" 'advlock: Stra\xc3\x9fe\x09x' "$OUT"

# More than PostgreSQL keeps: at most 63 bytes, cut on a whole byte's form
# and ended by "...".
long=$(printf 'n%.0s' $(seq 70))
capture shown_by_server "$long"
check "long: cut to 63 bytes" 63 "${#OUT}"
check "long: ends with ..." "advlock: $(printf 'n%.0s' $(seq 51))..." "$OUT"
capture shown_by_server "$(printf 'n%.0s' $(seq 47))é"
check "long: no escape cut in half" "advlock: $(printf 'n%.0s' $(seq 47))\\xc3..." "$OUT"

# A name the user gives wins: the option, the connection string, PGAPPNAME.
capture shown_by_server --application-name nightly-job lock-a
check "--application-name" "nightly-job" "$OUT"
capture shown_by_server -d "application_name=from-conninfo" lock-a
check "conninfo" "from-conninfo" "$OUT"
capture env PGAPPNAME=from-env "$A" run -q lock-a -- psql -X -At -c \
    "SELECT application_name FROM pg_stat_activity a JOIN pg_locks l USING (pid)
     WHERE l.locktype = 'advisory' AND l.granted LIMIT 1"
check "PGAPPNAME" "from-env" "$OUT"

finish
