#!/usr/bin/env bash
# What `advlock run` does today under a silent partition: a holder in the
# namespace runs a command that stamps the time into a file every 100 ms;
# about 2 s after it acquires, the link drops every frame; a contender
# outside (on the Unix socket) polls with `advlock run --timeout 1` until it
# acquires. Prints, from the moment of the partition: the holder's command's
# last stamp, when and how the holder exited, when the server ended the
# holder's session, when the contender acquired (or that the lock stayed
# wedged for the whole bound), and the overlap: how long the holder's
# command went on after the contender held the lock.
#
# Usage: ADVLOCK=build/advlock tests/partition/reproduce.sh [SCENARIO...]
#   defaults     PostgreSQL's keepalive settings (the kernel's: 2 h idle)
#   keepalives   the server's tcp_keepalives_idle/interval/count 5/2/2,
#                set with ALTER SYSTEM: the race in seconds, not hours
# (default: defaults keepalives). ADVLOCK_REPRO_BOUND: seconds to wait for
# the contender after the partition (default 120). Needs root; not part of
# make test (minutes long): make partition-reproduce.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/partition/lib.sh
. "$here/lib.sh"
partition_enter_advlock "$0" "$@"

BOUND=${ADVLOCK_REPRO_BOUND:-120}
KEY=partition-test
client=$ADVLOCK_PARTITION_CLIENT_ADDR

# A - B in seconds, to 0.1 s.
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", a - b }'; }
later() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# set_keepalives IDLE INTERVAL COUNT: the server's, for every new session;
# with no arguments, back to PostgreSQL's defaults.
set_keepalives() {
    local names=(tcp_keepalives_idle tcp_keepalives_interval tcp_keepalives_count) values=("$@") i
    for i in 0 1 2; do
        if [ $# -eq 0 ]; then
            psql -X -q -c "ALTER SYSTEM RESET ${names[i]}"
        else
            psql -X -q -c "ALTER SYSTEM SET ${names[i]} = ${values[i]}"
        fi
    done
    psql -X -q -At -c 'SELECT pg_reload_conf()' >/dev/null
}

# Every 0.25 s, from outside: the moment the server has no session from the
# namespace any more, into FILE.
watch_server_session() {
    while [ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity
            WHERE client_addr = '$client'")" != 0 ]; do
        sleep 0.25
    done
    now_s >"$1"
}

# The backend's socket as the kernel sees it (its keepalive timer).
server_socket() {
    ss -tnoH state established "( sport = :$PGPORT and dst $client )" | sed 's/^/    /'
}

scenario() {
    local name=$1 dir=$ADVLOCK_PARTITION_DIR/$1.$2
    mkdir -p "$dir"
    case "$name" in
        defaults) set_keepalives ;;
        keepalives) set_keepalives 5 2 2 ;;
        *) echo "unknown scenario: $name" >&2 && return 2 ;;
    esac
    echo "== $name, run $2: a TCP session gets tcp_keepalives_idle/interval/count" \
        "$(in_ns psql -X -At -c "SELECT current_setting('tcp_keepalives_idle') || '/' ||
            current_setting('tcp_keepalives_interval') || '/' || current_setting('tcp_keepalives_count')")"

    # The holder, in the namespace: its exit status and time go to "end".
    # shellcheck disable=SC2016
    in_ns bash -c '"$ADVLOCK" run -d "$1" --timeout 5 '"$KEY"' -- \
            bash -c "while :; do date +%s.%N >>\"$2/work\"; sleep 0.1; done"
        echo "$? $(date +%s.%N)" >"$2/end"' _ "$(partition_conninfo)" "$dir" 2>"$dir/holder.err" &
    for _ in $(seq 100); do [ -s "$dir/work" ] && break; sleep 0.1; done
    [ -s "$dir/work" ] || { echo "the holder did not start:" >&2; cat "$dir/holder.err" >&2; return 1; }
    local acquired
    acquired=$(head -n 1 "$dir/work")
    sleep 2
    partition_on
    local cut
    cut=$(now_s)
    watch_server_session "$dir/server-ended" &
    local watcher=$!

    # The contender, outside, until it acquires and the holder has exited,
    # or the bound.
    local got='' status
    local deadline
    deadline=$(awk -v c="$cut" -v b="$BOUND" 'BEGIN { printf "%.3f", c + b }')
    while ! later "$(now_s)" "$deadline"; do
        if [ -z "$got" ]; then
            status=0
            "$ADVLOCK" run -q --timeout 1 "$KEY" -- date +%s.%N >"$dir/contender.out" \
                2>"$dir/contender.err" || status=$?
            case "$status" in
                0) got=$(cat "$dir/contender.out") ;;
                1) ;;
                *) echo "contender: exit $status: $(cat "$dir/contender.err")" >&2 ;;
            esac
        else
            sleep 0.2
        fi
        if [ -n "$got" ] && [ -f "$dir/end" ]; then break; fi
    done

    local ended_at='' server_socket_now
    server_socket_now=$(server_socket)
    [ -f "$dir/server-ended" ] && ended_at=$(cat "$dir/server-ended")
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true

    local last end_status='' end_at='' at_least=''
    last=$(tail -n 1 "$dir/work")
    [ -f "$dir/end" ] && read -r end_status end_at <"$dir/end"
    # A command still running at the bound worked at least that long.
    [ -n "$end_at" ] || at_least='>= '
    printf '  holder acquired                 %s s\n' "$(minus "$acquired" "$cut")"
    printf '  partition                       +0.0 s\n'
    printf '  holder'\''s command last worked    %s%s s\n' "$at_least" "$(minus "$last" "$cut")"
    if [ -n "$end_at" ]; then
        printf '  holder exited                   %s s, status %s: %s\n' "$(minus "$end_at" "$cut")" \
            "$end_status" "$(tr '\n' ' ' <"$dir/holder.err")"
    else
        printf '  holder exited                   not within %s s\n' "$BOUND"
    fi
    if [ -n "$ended_at" ]; then
        printf '  server ended the session        %s s (seen within 0.25 s)\n' "$(minus "$ended_at" "$cut")"
    else
        printf '  server ended the session        not within %s s; its socket:\n%s\n' "$BOUND" \
            "$server_socket_now"
    fi
    if [ -n "$got" ]; then
        printf '  contender acquired              %s s\n' "$(minus "$got" "$cut")"
        printf '  overlap (holder worked after)   %s%s s\n' "$at_least" \
            "$(awk -v l="$last" -v g="$got" 'BEGIN { d = l - g; printf "%.1f", (d > 0 ? d : 0) }')"
    else
        printf '  contender acquired              never within %s s: the lock is WEDGED\n' "$BOUND"
    fi

    # Free the lock for the next scenario: end the holder and its session.
    partition_end_processes
    partition_off
    psql -X -q -At -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE client_addr = '$client'" >/dev/null
}

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(defaults keepalives)
run=0
for s in "${scenarios[@]}"; do
    run=$((run + 1))
    scenario "$s" "$run"
done
