#!/usr/bin/env bash
# The measurements behind the server session check's design, against the real components.
# Not a test: it prints what it sees. Needs `make deploy-probe` (the probe).
#
# Usage: ADVLOCK=build/advlock PROBE=build/deploy/probe tests/deploy/facts.sh SECTION
#   pgbouncer  (a) named prepared vs unnamed statements through transaction
#              mode, (b) which server pid runs each try-lock (6 clients, pool 3)
#   cost       (c) a try-lock that reports "held before" (pg_locks) vs the
#              plain one, 10,000 executions each, pgbench -M prepared
#   standby    (d) pg_try_advisory_lock on a hot standby; pg_is_in_recovery()'s cost
#   failover   (e) what libpq reports to an idle lock holder when the primary
#              stops (fast, immediate), and when advlock run exits
# Each section starts its own servers (with-pgbouncer.sh or with-standby.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
A=$(cd "$(dirname "${ADVLOCK:?set ADVLOCK}")" && pwd)/$(basename "$ADVLOCK")
P=$(cd "$(dirname "${PROBE:?set PROBE (make deploy-probe)}")" && pwd)/$(basename "$PROBE")
export A P
K=-6330443736081384332
export K
# The candidate acquire statement: held-before count, then the try only when
# this server session does not hold the key already.
HELD_SQL='SELECT h.n, CASE WHEN h.n = 0 THEN pg_try_advisory_lock($1) END AS got, pg_backend_pid()
 FROM (SELECT count(*) AS n FROM pg_catalog.pg_locks WHERE locktype = '"'advisory'"' AND objsubid = 1
 AND granted AND pid = pg_backend_pid() AND classid = (($1 >> 32) & 4294967295)::oid
 AND objid = ($1 & 4294967295)::oid) h'
export HELD_SQL

section_pgbouncer() {
    local o
    o=$(mktemp -d)
    echo "== (a) named prepared statements, 1 client alone through transaction mode"
    "$P" "$ADVLOCK_TEST_PGBOUNCER_TX" prepared 20 | tail -n 1
    echo "== (a) named prepared, 6 clients at once (pool 3), 30 statements each, 10 ms apart"
    for i in 1 2 3 4 5 6; do "$P" "$ADVLOCK_TEST_PGBOUNCER_TX" prepared 30 10 >"$o/prep.$i" & done; wait
    tail -qn 1 "$o"/prep.*
    grep -h 'prepare:\|exec.*26000' "$o"/prep.* | cut -d' ' -f2- | sort | uniq -c
    echo "== (a) unnamed (PQexecParams), 6 clients at once, 30 statements each"
    for i in 1 2 3 4 5 6; do "$P" "$ADVLOCK_TEST_PGBOUNCER_TX" params 30 10 >"$o/par.$i" & done; wait
    tail -qn 1 "$o"/par.*
    echo "== (b) SELECT pg_try_advisory_lock(\$1), pg_backend_pid(): 6 clients, 20 each"
    for i in 1 2 3 4 5 6; do "$P" "$ADVLOCK_TEST_PGBOUNCER_TX" trylock 20 777 10 >"$o/tl.$i" & done; wait
    tail -qn 1 "$o"/tl.*
    echo "-- one client's first statements:"; sed -n 2,9p "$o/tl.1"
    echo "-- advisory locks on the server afterwards (pid mode granted):"
    psql -X -At -d "$ADVLOCK_TEST_DIRECT" -c "SELECT pid, mode, granted FROM pg_locks WHERE locktype = 'advisory'"
    echo "== libpq's PQbackendPID vs pg_backend_pid(): direct, session mode, transaction mode"
    for c in "$ADVLOCK_TEST_DIRECT" "$ADVLOCK_TEST_PGBOUNCER_SESSION" "$ADVLOCK_TEST_PGBOUNCER_TX"; do
        "$P" "$c" params 1 | head -n 2 | cut -d' ' -f2- | tr '\n' ' '; echo
    done
    rm -rf "$o"
}

bench() { # LABEL SCRIPT CONNINFO: 3 x 10,000 transactions
    local f times="" s
    f=$(mktemp); chmod 644 "$f"; printf '%s\n' "$2" >"$f"
    for _ in 1 2 3; do
        s=$(date +%s%N)
        pgbench -n -M prepared -c 1 -t 10000 -f "$f" "$3" >/dev/null 2>&1
        times="$times $(( ($(date +%s%N) - s) / 1000000 ))"
    done
    rm -f "$f"
    printf '%-34s 10,000 in ms:%s\n' "$1" "$times"
}

section_cost() {
    local c=$ADVLOCK_TEST_PRIMARY held
    held=${HELD_SQL//\$1/:k::bigint}
    echo "== (c) order: p twice in one session, then c, then p from another session while held"
    psql -X -At -d "$c" <<SQL
PREPARE p(bigint) AS SELECT h.n, pg_try_advisory_lock(\$1) FROM (SELECT count(*) AS n FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid() AND classid = ((\$1 >> 32) & 4294967295)::oid AND objid = (\$1 & 4294967295)::oid) h;
PREPARE c(bigint) AS $HELD_SQL;
EXECUTE p($K);
EXECUTE p($K);
EXECUTE c($K);
\! psql -X -At -d "$c" -c "SELECT h.n, pg_try_advisory_lock($K) FROM (SELECT count(*) AS n FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid() AND classid = (($K::bigint >> 32) & 4294967295)::oid AND objid = ($K::bigint & 4294967295)::oid) h"
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE c($K);
SQL
    echo "== (c) cost on the direct server (pgbench -M prepared -c 1 -t 10000, 3 runs)"
    bench "SELECT 1" "SELECT 1;" "$c"
    bench "try" "\\set k $K
SELECT pg_try_advisory_lock(:k::bigint);" "$c"
    bench "try, pg_is_in_recovery, pid" "\\set k $K
SELECT pg_try_advisory_lock(:k::bigint), pg_is_in_recovery(), pg_backend_pid();" "$c"
    bench "held-before (pg_locks) + try" "\\set k $K
$held;" "$c"
    bench "try + unlock" "\\set k $K
SELECT pg_try_advisory_lock(:k::bigint);
SELECT pg_advisory_unlock(:k::bigint);" "$c"
    bench "held-before + try + unlock" "\\set k $K
$held;
SELECT pg_advisory_unlock(:k::bigint);" "$c"
    echo "== (c) again with 100 other sessions holding 5 advisory locks each"
    for i in $(seq 100); do
        psql -X -q -d "$c" -c "SELECT pg_advisory_lock(g) FROM generate_series($((i * 10)), $((i * 10 + 4))) g" \
            -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
    done
    sleep 3
    psql -X -At -d "$c" -c "SELECT count(*) || ' advisory locks' FROM pg_locks WHERE locktype = 'advisory'"
    bench "try + unlock" "\\set k $K
SELECT pg_try_advisory_lock(:k::bigint);
SELECT pg_advisory_unlock(:k::bigint);" "$c"
    bench "held-before + try + unlock" "\\set k $K
$held;
SELECT pg_advisory_unlock(:k::bigint);" "$c"
    psql -X -q -At -d "$c" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()" >/dev/null
    wait 2>/dev/null
}

section_standby() {
    echo "== (d) on the standby: in recovery, session try-lock, xact try-lock, advisory rows"
    psql -X -At -d "$ADVLOCK_TEST_STANDBY" -c "SELECT pg_is_in_recovery(), pg_try_advisory_lock($K),
        pg_try_advisory_xact_lock(1), (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory')"
    echo "-- the primary meanwhile:"
    psql -X -At -d "$ADVLOCK_TEST_PRIMARY" -c "SELECT pg_try_advisory_lock($K)"
    echo "== (d) pg_is_in_recovery()'s cost (10,000 each, 3 runs)"
    bench "standby: SELECT 1" "SELECT 1;" "$ADVLOCK_TEST_STANDBY"
    bench "standby: SELECT pg_is_in_recovery()" "SELECT pg_is_in_recovery();" "$ADVLOCK_TEST_STANDBY"
    bench "primary: SELECT 1" "SELECT 1;" "$ADVLOCK_TEST_PRIMARY"
    bench "primary: SELECT pg_is_in_recovery()" "SELECT pg_is_in_recovery();" "$ADVLOCK_TEST_PRIMARY"
}

section_failover() {
    local mode w t0 t1 noticed h rc
    for mode in fast immediate; do
        echo "== (e) the probe holding a lock, idle, through the multi-host conninfo; stop -m $mode"
        "$P" "$ADVLOCK_TEST_MULTIHOST" watch 4242 >"$T/watch" 2>&1 &
        w=$!
        sleep 1
        t0=$(date +%s%3N)
        "$ADVLOCK_STANDBY_CTL" --ctl stop-primary "$mode"
        t1=$(date +%s%3N)
        wait "$w"
        sed 's/^/  /' "$T/watch"
        noticed=$(sed -n 's/watch: readable at \([0-9]*\).*/\1/p' "$T/watch" | head -n 1)
        echo "  socket readable +$((noticed - t0)) ms after the stop began; pg_ctl returned +$((t1 - t0)) ms"
        "$ADVLOCK_STANDBY_CTL" --ctl start-primary
        sleep 0.5
    done
    echo "== (e) advlock run (command: sh -c 'sleep 30') through the multi-host conninfo; stop -m fast"
    for _ in 1 2 3; do
        "$A" run -q -d "$ADVLOCK_TEST_MULTIHOST" e -- sh -c 'echo started; sleep 30' >/dev/null \
            2> >(while IFS= read -r l; do echo "$(date +%s%3N) $l"; done >"$T/err") &
        h=$!
        sleep 1
        t0=$(date +%s%3N)
        "$ADVLOCK_STANDBY_CTL" --ctl stop-primary fast &
        while kill -0 "$h" 2>/dev/null; do sleep 0.01; done
        t1=$(date +%s%3N)
        wait "$h"; rc=$?; wait
        echo "  exit $rc: message +$(( $(cut -d' ' -f1 "$T/err" | head -n 1) - t0 )) ms, exit +$((t1 - t0)) ms"
        "$ADVLOCK_STANDBY_CTL" --ctl start-primary
        sleep 0.5
    done
}

if [ "${1:-}" = --inside ]; then
    T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
    "section_$2"
    exit
fi
case "${1:-}" in
    pgbouncer) exec "$here/../pg/with-pgbouncer.sh" "$0" --inside pgbouncer ;;
    cost | standby | failover) exec "$here/../pg/with-standby.sh" "$0" --inside "$1" ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
