#!/usr/bin/env bash
# The load checker: CLIENTS concurrent `advlock run` x ROUNDS rounds on one
# name through one conninfo; each command records when it started and ended;
# then the intervals are checked for overlaps, and the server for locks left.
#
# Usage: tests/deploy/load.sh -d CONNINFO [options] [-- ADVLOCK_RUN_OPTIONS...]
#   -a ADVLOCK   the advlock binary (default $ADVLOCK)
#   -d CONNINFO  where the runs connect (a PgBouncer, a server, a multi-host)
#   -c CONNINFO  the server itself, for the check of locks left afterwards
#                (default $ADVLOCK_TEST_DIRECT, else the PG* variables)
#   -n CLIENTS   concurrent clients (8)      -r ROUNDS  runs per client (20)
#   -s SECONDS   how long each command sleeps holding the lock (0.1)
#   -t SECONDS   advlock run --timeout (10)  -k NAME    the lock's name
#   -o DIR       keep every record in DIR (default: a temporary directory,
#                removed at the end)
#   -m           mixed scopes: even-numbered clients add --xact (the others
#                take session-scoped locks), all on the one name
# Options after -- go to every `advlock run` (--xact, --allow-standby, ...).
#
# Prints a summary and, with -o, writes it to DIR/summary as shell
# assignments a test can source:
#   runs           advlock run invocations
#   commands       of which the command started (the lock was reported held)
#   exit_0 exit_1 exit_69 exit_70 exit_other   how the runs exited
#   overlaps       pairs of command intervals that overlap
#   overlapping_runs  runs whose command overlapped another's
#   zero_exit_overlapping  runs that exited 0 although their command overlapped
#   nonzero_ran    runs whose command started but that exited nonzero
#   max_concurrency  most commands running at one instant
#   wait_ms_max    longest time from a run's start to its command's start
#   leftover_key   advisory locks on NAME's key left on the server afterwards
#   leftover_all   advisory locks of any key left on the server afterwards
#   fence_tokens   commands that were given a fencing token (advlock run --fence)
#   fence_disorder of those, taken in the order the commands started: tokens
#                  not strictly above the one before (0: strictly increasing)
#   wall_s         seconds the whole load took
# and the most frequent stderr lines (numbers of 3+ digits shown as N) in
# DIR/messages. Each command's interval is [start, end] as the command itself
# saw it (bash's $EPOCHREALTIME): inside the time advlock held (or believed it
# held) the lock, so any overlap is a real one. A command that was terminated
# writes its end from its TERM trap; if it wrote none, the run's exit counts.
# Exits 0 when the load ran (whatever it found), 2 on a usage error.
set -u
export LC_ALL=C

A=${ADVLOCK:-}
conninfo=
server=${ADVLOCK_TEST_DIRECT:-}
clients=8 rounds=20 hold=0.1 timeout_s=10 name="deploy-load" out= mixed=0
while getopts "a:d:c:n:r:s:t:k:o:m" opt; do
    case "$opt" in
        a) A=$OPTARG ;;
        d) conninfo=$OPTARG ;;
        c) server=$OPTARG ;;
        n) clients=$OPTARG ;;
        r) rounds=$OPTARG ;;
        s) hold=$OPTARG ;;
        t) timeout_s=$OPTARG ;;
        k) name=$OPTARG ;;
        o) out=$OPTARG ;;
        m) mixed=1 ;;
        *) sed -n '2,22p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
extra=("$@")
if [ -z "$A" ] || [ -z "$conninfo" ]; then
    echo "usage: $0 -a ADVLOCK -d CONNINFO [options] [-- RUN_OPTIONS]" >&2
    exit 2
fi
A=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")

keep=1
if [ -z "$out" ]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/advlock-load.XXXXXX")
    keep=0
fi
mkdir -p "$out/runs"
rm -f "$out"/runs/* "$out/summary" "$out/messages"

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    [ "$keep" = 1 ] || rm -rf "$out"
}
trap cleanup EXIT
for sig in INT TERM HUP; do
    # shellcheck disable=SC2064
    trap "exit $((128 + $(kill -l $sig)))" "$sig"
done

# The command under the lock: its own start and end, also when terminated.
# shellcheck disable=SC2016
cmd='rec=$1
printf "%s\n" "$EPOCHREALTIME" >"$rec.s"
[ -n "${ADVLOCK_FENCE-}" ] && printf "%s\n" "$ADVLOCK_FENCE" >"$rec.f"
trap '\''printf "%s\n" "$EPOCHREALTIME" >"$rec.e"; exit 143'\'' TERM INT HUP
sleep "$2" & wait $!
printf "%s\n" "$EPOCHREALTIME" >"$rec.e"'

# Each run is bounded: the timeout, the command, and room for a slow machine.
cap=$(awk -v t="$timeout_s" -v s="$hold" 'BEGIN { printf "%d", t + s + 30 }')

client() {
    local c=$1 r id t0 rc cp= scope=()
    [ "$mixed" = 1 ] && [ $((c % 2)) = 0 ] && scope=(--xact)
    trap '[ -n "$cp" ] && kill -TERM "$cp" 2>/dev/null; exit 143' TERM
    for ((r = 1; r <= rounds; r++)); do
        id=$(printf 'c%02d-r%03d' "$c" "$r")
        t0=$EPOCHREALTIME
        timeout -k 5 "$cap" "$A" run -d "$conninfo" --timeout "$timeout_s" "${scope[@]}" "${extra[@]}" \
            "$name" -- bash -c "$cmd" bash "$out/runs/$id" "$hold" \
            </dev/null >/dev/null 2>"$out/runs/$id.err" &
        cp=$!
        wait "$cp" && rc=0 || rc=$?
        cp=
        printf '%s %s %s %s\n' "$id" "$rc" "$t0" "$EPOCHREALTIME" >"$out/runs/$id.r"
    done
}

began=$EPOCHREALTIME
for ((c = 1; c <= clients; c++)); do
    client "$c" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
ended=$EPOCHREALTIME

# Locks left on the server: a direct session's locks go when its backend
# exits, a moment after the client; a lock stranded on a pooled server
# session stays. Poll for up to 2 s.
server_args=()
[ -n "$server" ] && server_args=(-d "$server")
read -r _ _ classid objid < <("$A" key "$name")
leftover_key=? leftover_all=?
for _ in $(seq 40); do
    row=$(psql -X -At -F ' ' "${server_args[@]}" -c "SELECT
            count(*) FILTER (WHERE classid = $classid AND objid = $objid AND objsubid = 1),
            count(*) FROM pg_locks WHERE locktype = 'advisory'" 2>/dev/null) || break
    read -r leftover_key leftover_all <<<"$row"
    [ "$leftover_all" = 0 ] && break
    sleep 0.05
done
if [ "$leftover_all" != 0 ] && [ "$leftover_all" != "?" ]; then
    psql -X -At -F ' ' "${server_args[@]}" -c "SELECT l.pid, l.mode, l.granted, l.classid, l.objid,
            coalesce(a.application_name, ''), a.state, a.backend_type
            FROM pg_locks l LEFT JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory'" >"$out/leftover" 2>&1
fi

# The analysis: intervals from the records, overlaps by pairs (a few hundred
# runs), concurrency by a sweep.
for f in "$out"/runs/*.r; do
    read -r id rc t0 t1 <"$f"
    s=- e=- f=-
    [ -s "$out/runs/$id.s" ] && s=$(cat "$out/runs/$id.s")
    [ -s "$out/runs/$id.e" ] && e=$(cat "$out/runs/$id.e")
    [ -s "$out/runs/$id.f" ] && f=$(cat "$out/runs/$id.f")
    printf '%s %s %s %s %s %s %s\n' "$id" "$rc" "$t0" "$t1" "$s" "$e" "$f"
done >"$out/intervals"

awk -v began="$began" -v ended="$ended" -v lk="$leftover_key" -v la="$leftover_all" '
{
    id[NR] = $1; rc[NR] = $2; t0[NR] = $3; t1[NR] = $4
    runs++
    if ($2 == 0 || $2 == 1 || $2 == 69 || $2 == 70) ex[$2]++; else ex["other"]++
    if ($5 != "-") {
        n++; s[n] = $5 + 0; e[n] = ($6 != "-" ? $6 : $4) + 0; r[n] = $2
        w = ($5 - $3) * 1000; if (w > wmax) wmax = w
        if ($2 != 0) nonzero_ran++
        if ($7 != "-") { nf++; fs[nf] = $5 + 0; ft[nf] = $7 + 0 }
    }
}
END {
    for (i = 1; i <= n; i++)
        for (j = i + 1; j <= n; j++)
            if (s[i] < e[j] && s[j] < e[i]) { pairs++; hit[i] = 1; hit[j] = 1 }
    for (i = 1; i <= n; i++) if (hit[i]) { ovr++; if (r[i] == 0) zero_ov++ }
    # Sweep: +1 at each start, -1 at each end (ends first at equal times).
    m = 0
    for (i = 1; i <= n; i++) { m++; tm[m] = s[i]; d[m] = 1; m++; tm[m] = e[i]; d[m] = -1 }
    for (i = 2; i <= m; i++) {
        x = tm[i]; y = d[i]
        for (j = i - 1; j >= 1 && (tm[j] > x || (tm[j] == x && d[j] > y)); j--) { tm[j+1] = tm[j]; d[j+1] = d[j] }
        tm[j+1] = x; d[j+1] = y
    }
    # Tokens in the order their commands started (insertion sort, as above).
    for (i = 2; i <= nf; i++) {
        x = fs[i]; y = ft[i]
        for (j = i - 1; j >= 1 && fs[j] > x; j--) { fs[j+1] = fs[j]; ft[j+1] = ft[j] }
        fs[j+1] = x; ft[j+1] = y
    }
    for (i = 2; i <= nf; i++) if (ft[i] <= ft[i-1]) disorder++
    cur = 0; maxc = 0
    for (i = 1; i <= m; i++) { cur += d[i]; if (cur > maxc) maxc = cur }
    printf "runs=%d\ncommands=%d\n", runs, n
    printf "exit_0=%d\nexit_1=%d\nexit_69=%d\nexit_70=%d\nexit_other=%d\n", ex[0], ex[1], ex[69], ex[70], ex["other"]
    printf "overlaps=%d\noverlapping_runs=%d\nzero_exit_overlapping=%d\nnonzero_ran=%d\n", pairs, ovr, zero_ov, nonzero_ran
    printf "max_concurrency=%d\nwait_ms_max=%d\n", maxc, wmax
    printf "leftover_key=%s\nleftover_all=%s\nwall_s=%.1f\n", lk, la, ended - began
    printf "fence_tokens=%d\nfence_disorder=%d\n", nf, disorder
}' "$out/intervals" >"$out/summary"

cat "$out"/runs/*.err 2>/dev/null | sed -E 's/[0-9]{3,}/N/g' | sort | uniq -c | sort -rn \
    | head -n 8 >"$out/messages"

echo "load: ${clients} clients x ${rounds} rounds, hold ${hold}s, --timeout ${timeout_s}, through: $conninfo ${extra[*]}"
tr '\n' ' ' <"$out/summary"
echo
if [ -s "$out/messages" ]; then
    echo "stderr (count, line):"
    sed 's/^/  /' "$out/messages"
fi
if [ -s "$out/leftover" ]; then
    echo "advisory locks left on the server (pid mode granted classid objid application state type):"
    sed 's/^/  /' "$out/leftover"
fi
exit 0
