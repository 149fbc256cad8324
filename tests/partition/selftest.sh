#!/usr/bin/env bash
# Checks the partition harness (tests/partition/lib.sh) itself, so that a
# lease test built on it proves something: from the namespace the server
# answers over TCP; under partition_on the link is silent both ways (a
# connection attempt from either side times out with no RST or ICMP, a
# query on an open session hangs while the server keeps its backend and
# lock); partition_off lets the same session go on; and the run leaves no
# namespace, link, table, process in the namespace or paused process behind.
#
# Usage: tests/partition/selftest.sh   (as root; exits 77 where namespaces
#                                       cannot be made)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/partition/lib.sh
. "$here/lib.sh"
# shellcheck source=tests/cli/lib.sh
. "$here/../cli/lib.sh"

# A connection attempt gets 3 s: a refused port answers within milliseconds.
SILENCE_S=3

# ---- outside the harness: run the checks in it, then look for leftovers ----

if [ -z "${ADVLOCK_PARTITION_NS:-}" ]; then
    left=$(mktemp "${TMPDIR:-/tmp}/advlock-partition-selftest.XXXXXX")
    trap 'rm -f "$left"' EXIT
    status=0
    SELFTEST_LEFT=$left "$here/with-partition.sh" "$0" || status=$?
    [ "$status" -eq "$PARTITION_SKIP" ] && exit "$PARTITION_SKIP"
    check "the checks inside the harness" 0 "$status"
    read -r ns link table in_ns_pid paused_pid <"$left" || true
    check "the namespace is removed" "" "$(ip netns list | grep -w "^${ns:-none}" || true)"
    capture ip link show "${link:-none}"
    check "the veth pair is removed" 1 "$RC"
    capture nft list table netdev "${table:-none}"
    check "the host end's table is removed" 1 "$RC"
    # Ended: gone, or a zombie its new parent has not reaped yet.
    check "the process left in the namespace is ended" "" "$(process_state "${in_ns_pid:-0}" | tr -d Z)"
    check "the process left paused is resumed" S "$(process_state "${paused_pid:-0}")"
    [ -n "${paused_pid:-}" ] && kill "$paused_pid" 2>/dev/null
    finish
    exit
fi

# ---- inside the harness -------------------------------------------------------

d=$ADVLOCK_PARTITION_DIR
server=$ADVLOCK_PARTITION_SERVER_ADDR
client=$ADVLOCK_PARTITION_CLIENT_ADDR

# From the host to a closed port in the namespace: refused at once (1), or,
# when the partition swallows the SYN, timed out (124).
host_to_ns_closed_port() {
    capture timeout "$SILENCE_S" bash -c "</dev/tcp/$client/9"
}

# Static neighbours: a partition must not turn into an ARP failure.
check "the server's end knows its peer for good" PERMANENT \
    "$(ip neigh show "$client" dev "$ADVLOCK_PARTITION_SERVER_IF" | awk '{ print $NF }')"
check "the namespace's end knows its peer for good" PERMANENT \
    "$(in_ns ip neigh show "$server" dev "$ADVLOCK_PARTITION_CLIENT_IF" | awk '{ print $NF }')"
capture in_ns psql -X -At -c 'SELECT host(inet_client_addr())'
check "a query from the namespace arrives over the veth" "$client" "$OUT"
host_to_ns_closed_port
check "before the partition a closed port refuses" 1 "$RC"

# A session in the namespace holding a lock, fed one statement at a time.
mkfifo "$d/in"
in_ns psql -X -At -v ON_ERROR_STOP=1 <"$d/in" >"$d/out" 2>"$d/err" &
session=$!
exec 3>"$d/in"
echo 'SELECT pg_backend_pid() FROM pg_advisory_lock(42);' >&3
for _ in $(seq 50); do [ -s "$d/out" ] && break; sleep 0.1; done
backend=$(head -n 1 "$d/out")
held_by_backend() {
    psql -X -At -c "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l USING (pid)
        WHERE pid = ${backend:-0} AND l.locktype = 'advisory' AND l.granted"
}
check "the session holds its lock" 1 "$(held_by_backend)"

partition_on
echo "SELECT 'after the partition';" >&3
# Each side tries to connect; each must wait out its timeout.
in_ns timeout "$SILENCE_S" psql -X -At -c 'SELECT 1' >"$d/new.out" 2>"$d/new.err" &
new_session=$!
in_ns timeout "$SILENCE_S" bash -c "</dev/tcp/$server/$PGPORT" 2>"$d/tcp.err" &
ns_to_host=$!
host_to_ns_closed_port
check "during the partition a closed port in the namespace is silent" 124 "$RC"
wait "$ns_to_host" && RC=0 || RC=$?
check "during the partition a connect to the server is silent" "124 " "$RC $(cat "$d/tcp.err")"
wait "$new_session" && RC=0 || RC=$?
check "during the partition a new session times out client-side" "124 " "$RC $(cat "$d/new.err")"
check "the open session's query hangs" 1 "$(wc -l <"$d/out")"
check "the server keeps the session's backend and its lock" 1 "$(held_by_backend)"
read -r dropped_server dropped_client < <(partition_dropped)
check "frames were dropped at the server's end" 1 "$((dropped_server > 0))"
check "frames were dropped at the namespace's end" 1 "$((dropped_client > 0))"

partition_off
# The query waits for TCP's next retransmission (seconds after a 3 s cut).
for _ in $(seq 150); do [ "$(wc -l <"$d/out")" -ge 2 ] && break; sleep 0.1; done
check "after the heal the open session's query is answered" "after the partition" \
    "$(sed -n 2p "$d/out")"
capture in_ns psql -X -At -c 'SELECT 1'
check "after the heal a new session works" 1 "$OUT"
host_to_ns_closed_port
check "after the heal a closed port refuses again" 1 "$RC"
echo 'SELECT pg_backend_pid();' >&3
exec 3>&-
wait "$session" && RC=0 || RC=$?
check "the session went on on the same backend" "0 $backend" "$RC $(sed -n 3p "$d/out")"

# Left for the cleanup: a partition, a process in the namespace, a paused one.
partition_on
in_ns sleep 300 >/dev/null 2>&1 &
in_ns_pid=$!
sleep 300 >/dev/null 2>&1 &
paused_pid=$!
partition_pause "$paused_pid"
echo "$ADVLOCK_PARTITION_NS $ADVLOCK_PARTITION_SERVER_IF $ADVLOCK_PARTITION_TABLE $in_ns_pid $paused_pid" \
    >"$SELFTEST_LEFT"
finish
