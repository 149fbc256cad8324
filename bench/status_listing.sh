#!/usr/bin/env bash
# How long `advlock status` with no name takes to list every advisory lock
# of a database while LOCKS of them are held (one session holds them all):
# the whole command, process start and connect included, its output thrown
# away, the median of ROUNDS runs in ms (goal <= 50 ms). The schema is
# installed, so the listing's heaviest form (both joins) runs: first with
# marks and tokens for 10 of the keys (lock-delay's marks live only while
# their holders do, tokens only for fenced keys), in each format; then the
# worst case, a mark and a token for every lock held (text). One record
# each, for bench/report.c.
# Runs against the server tests/pg/with-postgres.sh started, in a database
# of its own.
#
#   bench/status_listing.sh ADVLOCK [LOCKS [ROUNDS]]
set -euo pipefail
advlock=${1:?usage: status_listing.sh ADVLOCK [LOCKS [ROUNDS]]}
locks=${2:-10000}
rounds=${3:-11}
db=advlock_status_bench
psql -X -q -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" 2>/dev/null
export PGDATABASE=$db
"$advlock" setup >/dev/null
# Marks and tokens for the first n keys.
marked() {
    psql -X -q -c "TRUNCATE advlock.mark, advlock.fence" \
         -c "INSERT INTO advlock.mark SELECT g, 1, 1, now() FROM generate_series(1, $1) g" \
         -c "INSERT INTO advlock.fence SELECT g, 1 FROM generate_series(1, $1) g" \
         -c "ANALYZE advlock.mark, advlock.fence"
}
psql -X -q -c "SELECT count(pg_advisory_lock(g)) FROM generate_series(1, $locks) g" \
     -c "SELECT pg_sleep(600)" >/dev/null &
holder=$!
trap 'kill $holder 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 600); do
    held=$(psql -X -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
    [ "$held" -ge "$locks" ] && break
    sleep 0.05
done
[ "$held" -ge "$locks" ] || { echo "status_listing: only $held of $locks locks held" >&2; exit 1; }

# Prints a record: the median time of `status --format $1`, named $2.
measure() {
    local times=() start rc median_us
    for _ in $(seq "$rounds"); do
        start=$(date +%s%N)
        rc=0
        "$advlock" status --format "$1" >/dev/null || rc=$?
        [ "$rc" -eq 1 ] || { echo "status_listing: status exited $rc with locks held" >&2; exit 1; }
        times+=($((($(date +%s%N) - start) / 1000)))
    done
    median_us=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
    awk -v us="$median_us" -v name="$2" 'BEGIN {
        printf "%s\t%.1f\tms\t-\t-\t<= 50 ms\t%s\n", name, us / 1000, us <= 50000 ? "met" : "MISSED" }'
}

marked 10
for format in text json prometheus; do
    measure "$format" "status_listing_${format}_${locks}_locks_ms"
done
marked "$locks"
measure text "status_listing_text_${locks}_locks_all_marked_ms"
printf '#\tstatus_listing: advlock status --format F, %d advisory locks held (10 with a mark and a token; all_marked: every one), median of %d runs, the whole command\n' \
    "$locks" "$rounds"
