# shellcheck shell=bash
# The partition harness: a lock holder reaching a real PostgreSQL over real
# TCP through a veth pair, and a silent network partition between them made
# by the kernel, not simulated.
#
#   holder (in namespace advlock-p-N)        PostgreSQL (host side)
#   alpNc 198.18.x.(y+2)/30  <── veth ──>  alpNs 198.18.x.(y+1)/30 : $PGPORT
#                                          + its Unix socket ($PGHOST), for
#                                            contenders outside the partition
#
# tests/partition/with-partition.sh COMMAND... claims a free /30 of
# 198.18.0.0/15 (N is the subnet's index: concurrent runs take different
# ones), makes the namespace and the veth pair with static neighbour entries
# on both ends (so that a partition is silence, not a local ARP failure),
# starts a throwaway server with tests/pg/with-postgres.sh listening on the
# host end too, runs COMMAND, and always removes what it made: it resumes the
# processes paused through partition_pause, ends every process left in the
# namespace, deletes the nftables tables, the veth pair and the namespace.
# Where no namespace can be made (not root, no veth or nftables netdev
# support) it prints why and exits PARTITION_SKIP (77), which
# scripts/run-tests.sh counts as skipped.
#
# A test script sources this file and calls `partition_enter "$0" "$@"`
# first (`partition_enter_advlock "$0" "$@"` if it runs the advlock binary
# ADVLOCK names): outside the harness it runs the script again inside one and
# exits with its status. Inside, the script has:
#   partition_on        drop every frame arriving at either veth end: a
#                       netdev table per end, its ingress chain's policy
#                       drop (the namespace's end inside the namespace), a
#                       counter rule before the policy
#   partition_off       heal: delete both tables
#   partition_dropped   frames dropped so far at "server_end client_end"
#   in_ns CMD...        run CMD in the namespace (the holder's side), with
#                       PGHOST set to the server's TCP address, so libpq
#                       there reaches it over the veth, never the socket
#   partition_conninfo  the conninfo of the server over TCP
#   partition_end_processes
#                       end every process in the namespace (TERM, then KILL)
#   partition_pause PID, partition_resume PID
#                       SIGSTOP / SIGCONT, with the cleanup resuming any
#                       process left paused
#   now_s               wall clock, seconds with nanoseconds
# and the environment with-partition.sh exports: ADVLOCK_PARTITION_NS,
# _SERVER_IF, _CLIENT_IF, _SERVER_ADDR, _CLIENT_ADDR, _TABLE, _DIR (a scratch
# directory, removed on exit), besides with-postgres.sh's PG* variables.
# Only addresses of the namespace's own /30 are ever used.

PARTITION_SKIP=77
partition_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

now_s() { date +%s.%N; }

partition_enter() {
    local script=$1
    shift
    if [ -z "${ADVLOCK_PARTITION_NS:-}" ]; then
        local status=0
        "$partition_lib_dir/with-partition.sh" "$script" "$@" || status=$?
        exit "$status"
    fi
}

# partition_absolute PATH: PATH from /, still valid once the harness has
# run the script again from another directory.
partition_absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

# partition_enter_advlock SCRIPT ARGS...: partition_enter for a script that
# runs the advlock binary ADVLOCK names, which must be set: exported as an
# absolute path, for the run inside the harness.
partition_enter_advlock() {
    : "${ADVLOCK:?set ADVLOCK to the advlock binary}"
    ADVLOCK=$(partition_absolute "$ADVLOCK")
    export ADVLOCK
    partition_enter "$@"
}

in_ns() {
    ip netns exec "$ADVLOCK_PARTITION_NS" env PGHOST="$ADVLOCK_PARTITION_SERVER_ADDR" "$@"
}

partition_conninfo() {
    echo "host=$ADVLOCK_PARTITION_SERVER_ADDR port=$PGPORT user=postgres dbname=postgres"
}

# ---- the partition ---------------------------------------------------------

# Adds the dropping table on the end DEVICE, with nft run after the
# rest of the line (nothing: the host's namespace).
drop_table_add() {
    local device=$1
    shift
    "$@" nft -f - <<EOF
table netdev $ADVLOCK_PARTITION_TABLE {
    chain ingress {
        type filter hook ingress device "$device" priority 0; policy drop;
        counter
    }
}
EOF
}

partition_on() {
    drop_table_add "$ADVLOCK_PARTITION_SERVER_IF" \
        && drop_table_add "$ADVLOCK_PARTITION_CLIENT_IF" ip netns exec "$ADVLOCK_PARTITION_NS"
}

partition_off() {
    nft delete table netdev "$ADVLOCK_PARTITION_TABLE" \
        && ip netns exec "$ADVLOCK_PARTITION_NS" nft delete table netdev "$ADVLOCK_PARTITION_TABLE"
}

# The packets the counter rule of a table saw (nft -f's output, one end).
counted_packets() {
    sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | head -n 1
}

partition_dropped() {
    local server client
    server=$(nft list table netdev "$ADVLOCK_PARTITION_TABLE" | counted_packets)
    client=$(ip netns exec "$ADVLOCK_PARTITION_NS" nft list table netdev "$ADVLOCK_PARTITION_TABLE" \
        | counted_packets)
    echo "$server $client"
}

# ---- paused processes --------------------------------------------------------

partition_pause() {
    echo "$1" >>"$ADVLOCK_PARTITION_DIR/paused"
    kill -STOP "$1"
}

partition_resume() {
    kill -CONT "$1"
}

# The state letter of process PID (R, S, T, Z...), nothing if there is none.
process_state() {
    sed -n 's/^State:[[:space:]]*\([A-Za-z]\).*/\1/p' "/proc/$1/status" 2>/dev/null || true
}

# A process the list in DIR names that is still stopped is resumed; one that
# ended is left alone, whoever has its number now.
resume_paused() {
    local pid
    [ -f "$1/paused" ] || return 0
    while read -r pid; do
        [ "$(process_state "$pid")" = T ] && kill -CONT "$pid" 2>/dev/null
    done <"$1/paused"
    return 0
}

# Ends every process in the namespace (all of them the run's own): TERM,
# and KILL for those still there 2 s later.
partition_end_processes() {
    local pid
    for pid in $(ip netns pids "$ADVLOCK_PARTITION_NS" 2>/dev/null); do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for _ in $(seq 20); do
        [ -z "$(ip netns pids "$ADVLOCK_PARTITION_NS" 2>/dev/null)" ] && return 0
        sleep 0.1
    done
    for pid in $(ip netns pids "$ADVLOCK_PARTITION_NS" 2>/dev/null); do
        kill -KILL "$pid" 2>/dev/null || true
    done
}

# ---- making and removing the network (with-partition.sh) -------------------

# Sets the ADVLOCK_PARTITION_* names for subnet index N (0..32767): the
# N-th /30 of 198.18.0.0/15.
partition_names() {
    local n=$1 offset=$(($1 * 4))
    local net="198.$((18 + offset / 65536)).$((offset / 256 % 256))"
    local host=$((offset % 256))
    ADVLOCK_PARTITION_NS=advlock-p-$n
    ADVLOCK_PARTITION_SERVER_IF=alp${n}s
    ADVLOCK_PARTITION_CLIENT_IF=alp${n}c
    ADVLOCK_PARTITION_SERVER_ADDR=$net.$((host + 1))
    ADVLOCK_PARTITION_CLIENT_ADDR=$net.$((host + 2))
    ADVLOCK_PARTITION_TABLE=advlock_p_$n
}

partition_skip() {
    echo "SKIP: partition tests cannot run here: $*" >&2
    return "$PARTITION_SKIP"
}

# Claims a subnet no one uses: `ip netns add` of its name fails when another
# run holds it, and no address or route of this host may be in it.
claim_subnet() {
    for _ in $(seq 20); do
        partition_names $((RANDOM % 32768))
        if [ -n "$(ip -4 route show to match "$ADVLOCK_PARTITION_SERVER_ADDR" \
            | grep -v '^default' || true)" ]; then
            continue
        fi
        ip link show "$ADVLOCK_PARTITION_SERVER_IF" >/dev/null 2>&1 && continue
        if ip netns add "$ADVLOCK_PARTITION_NS" 2>/dev/null; then
            partition_claimed=1
            return 0
        fi
        ip netns list | grep -q "^$ADVLOCK_PARTITION_NS\b" && continue
        partition_skip "ip netns add $ADVLOCK_PARTITION_NS failed"
        return
    done
    echo "error: no free subnet of 198.18.0.0/15 in 20 tries" >&2
    return 1
}

# Makes the namespace and the veth pair, with ADVLOCK_PARTITION_DIR already
# made (the caller removes it); returns PARTITION_SKIP where the kernel or
# the user cannot, 1 on any other failure.
partition_net_up() {
    [ "$(id -u)" -eq 0 ] || { partition_skip "no network namespace without root"; return; }
    command -v nft >/dev/null 2>&1 || { partition_skip "no nft (apt-get install nftables)"; return; }
    claim_subnet || return
    export ADVLOCK_PARTITION_NS ADVLOCK_PARTITION_SERVER_IF ADVLOCK_PARTITION_CLIENT_IF \
        ADVLOCK_PARTITION_SERVER_ADDR ADVLOCK_PARTITION_CLIENT_ADDR \
        ADVLOCK_PARTITION_TABLE ADVLOCK_PARTITION_DIR
    local ns=(ip netns exec "$ADVLOCK_PARTITION_NS")
    # Locally administered addresses, fixed so the neighbour entries can be
    # written before either end speaks.
    local n=${ADVLOCK_PARTITION_NS#advlock-p-}
    local mac_s mac_c
    mac_s=$(printf '02:ad:10:%02x:%02x:01' $((n / 256)) $((n % 256)))
    mac_c=$(printf '02:ad:10:%02x:%02x:02' $((n / 256)) $((n % 256)))
    ip link add "$ADVLOCK_PARTITION_SERVER_IF" address "$mac_s" type veth \
        peer name "$ADVLOCK_PARTITION_CLIENT_IF" address "$mac_c" netns "$ADVLOCK_PARTITION_NS" \
        2>"$ADVLOCK_PARTITION_DIR/veth.err" \
        || { partition_skip "no veth pair: $(cat "$ADVLOCK_PARTITION_DIR/veth.err")"; return; }
    ip addr add "$ADVLOCK_PARTITION_SERVER_ADDR/30" dev "$ADVLOCK_PARTITION_SERVER_IF"
    ip link set "$ADVLOCK_PARTITION_SERVER_IF" up
    ip neigh replace "$ADVLOCK_PARTITION_CLIENT_ADDR" lladdr "$mac_c" nud permanent \
        dev "$ADVLOCK_PARTITION_SERVER_IF"
    "${ns[@]}" ip link set lo up
    "${ns[@]}" ip addr add "$ADVLOCK_PARTITION_CLIENT_ADDR/30" dev "$ADVLOCK_PARTITION_CLIENT_IF"
    "${ns[@]}" ip link set "$ADVLOCK_PARTITION_CLIENT_IF" up
    "${ns[@]}" ip neigh replace "$ADVLOCK_PARTITION_SERVER_ADDR" lladdr "$mac_s" nud permanent \
        dev "$ADVLOCK_PARTITION_CLIENT_IF"
    # A kernel without netdev ingress hooks cannot partition: try it once.
    partition_on 2>"$ADVLOCK_PARTITION_DIR/nft.err" \
        || { partition_skip "no nftables netdev ingress chain: $(cat "$ADVLOCK_PARTITION_DIR/nft.err")"; return; }
    partition_off
}

# Removes everything partition_net_up and the tests made; safe to run at any
# point of partition_net_up (it touches nothing before the namespace is
# claimed) and more than once.
partition_net_down() {
    [ -n "${partition_claimed:-}" ] || return 0
    [ -n "${ADVLOCK_PARTITION_DIR:-}" ] && resume_paused "$ADVLOCK_PARTITION_DIR"
    partition_end_processes
    nft delete table netdev "$ADVLOCK_PARTITION_TABLE" 2>/dev/null || true
    ip link del "$ADVLOCK_PARTITION_SERVER_IF" 2>/dev/null || true
    ip netns del "$ADVLOCK_PARTITION_NS" 2>/dev/null || true
    partition_claimed=
}
