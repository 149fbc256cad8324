#!/usr/bin/env bash
# Runs every benchmark program against the server tests/pg/with-postgres.sh
# started, prints the table and writes the JSON (see mk/bench.mk).
#
# Usage: bench/run.sh [--smoke] BENCH_DIR OUT.json
#   --smoke  tiny sizes, table not shown: only proves every program still
#            runs to its end (make test); the figures mean nothing.
# BENCH_CONTENTION_SECONDS sets the contention run's length (default 20);
# ADVLOCK names the advlock command (bench/status_listing.sh runs it).
set -euo pipefail

smoke=0
if [ "${1:-}" = --smoke ]; then
    smoke=1
    shift
fi
if [ $# -ne 2 ]; then
    echo "usage: $0 [--smoke] BENCH_DIR OUT.json" >&2
    exit 2
fi
dir=$1 json=$2
results=$dir/results.tsv
[ $smoke -eq 0 ] || results=$dir/results-smoke.tsv
: >"$results"

note() { printf '#\t%s\n' "$*" >>"$results"; }

# Runs one program, appending its records; says on stderr how long it took.
step() {
    local what=$1 started=$SECONDS
    shift
    [ $smoke -eq 1 ] || echo "bench: $what ..." >&2
    "$@" >>"$results"
    [ $smoke -eq 1 ] || echo "bench: $what: $((SECONDS - started)) s" >&2
}

server=$("$ADVLOCK_PG_BIN/postgres" --version)
note "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $server; $(openssl version 2>/dev/null || echo 'OpenSSL ?'); one connection per client over a Unix socket"

if [ $smoke -eq 1 ]; then
    step "sizes" "$dir/sizes"
    step "key derivation" "$dir/key_derivation" --rounds 1 --iterations 1000
    step "core cost" "$dir/core_cost" --iterations 100 --valgrind 0
    step "uncontended cycles" "$dir/uncontended_cycles" --rounds 1 --cycles 20
    step "uncontended cycles, fsync on" "$dir/uncontended_cycles" --rounds 1 --cycles 5 --fsync 1
    step "event-loop scale" "$dir/event_loop_scale" --rounds 1 --seconds 0.05
    for policy in reference full-jitter server-wait; do
        step "contention ($policy)" "$dir/contention" --policy $policy --seconds 0.3 --rounds 1 \
            --timeout-ms 100
    done
    step "contention (think)" "$dir/contention" --seconds 0.3 --rounds 1 --think-ms 20
    step "many locks" "$dir/many_locks" --locks 20 --rounds 1 --connections 4
    step "many locks, more held" "$dir/many_locks" --locks 20 --rounds 1 --held 60
    step "status listing" bench/status_listing.sh "${ADVLOCK:?set ADVLOCK to the advlock command}" 50 1
    "$dir/report" "$results" "$json" >/dev/null
    echo "bench-smoke: every benchmark program ran ($(grep -vc '^#' "$results") figures, not checked)"
    exit 0
fi

seconds=${BENCH_CONTENTION_SECONDS:-20}
step "sizes" "$dir/sizes"
step "key derivation" "$dir/key_derivation"
step "core cost (callgrind)" "$dir/core_cost"
step "uncontended cycles" "$dir/uncontended_cycles"
# The fenced cycle's durable write where every commit reaches the disk
# (the harness's server runs with fsync off; see uncontended_cycles.c).
step "uncontended cycles, fsync on" "$dir/uncontended_cycles" --fsync 1 --rounds 11 --cycles 100
step "event-loop scale" "$dir/event_loop_scale"
step "many locks, one connection" "$dir/many_locks"
# advlock status with no name, 10,000 locks held: the whole command.
step "status listing" bench/status_listing.sh "${ADVLOCK:?set ADVLOCK to the advlock command}"
# Two workloads per policy: clients that want the lock again at once (who
# gets it: fairness, starvation) and clients that pause 20 ms between holds
# (how long the lock lies free while others wait).
for policy in reference full-jitter server-wait; do
    for think in 0 20; do
        step "contention ($policy, think $think ms, ${seconds} s)" \
            "$dir/contention" --policy $policy --think-ms $think --seconds "$seconds"
    done
done
# A timeout shorter than a hold makes most acquires time out: how often does
# a timed-out or cancelled acquire leave the lock held (leaked_locks)?
for policy in reference server-wait; do
    step "contention ($policy, timeout 15 ms, 10 s)" \
        "$dir/contention" --policy $policy --timeout-ms 15 --seconds 10
done
echo >&2
"$dir/report" "$results" "$json"
echo
echo "figures: $json"
