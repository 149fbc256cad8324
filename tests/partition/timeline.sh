# shellcheck shell=bash
# What the partition tests share to time a holder against a contender: the
# holder stamps its work and its end into files, the contender takes the
# server's clock at its grant (this host's clock too), and the timeline is
# compared in seconds. Source it after lib.sh and tests/cli/lib.sh (check),
# with ADVLOCK set; judge also reads LEASE_S and writes to $figures.

minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
before() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# Waits up to SECONDS for FILE to be non-empty.
wait_for_file() {
    for _ in $(seq $(($2 * 20))); do
        [ -s "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# contend KEY BOUND OUT [CONNINFO]: one session (libpq's defaults, or
# CONNINFO) polling the key every 50 ms within BOUND s, then writing the
# server's clock at the grant into OUT (nothing if it never came) and
# letting go at once.
contend() {
    local key=$1 bound=$2 out=$3
    psql -X -At -q -v ON_ERROR_STOP=1 ${4:+"$4"} >"$out" 2>"$out.err" <<SQL
CREATE TEMP TABLE grant_at (at float8);
DO \$\$ DECLARE
    until timestamptz := clock_timestamp() + interval '$bound s';
    tried timestamptz;
BEGIN
    LOOP
        tried := clock_timestamp(); -- before the grant, never after it
        IF pg_try_advisory_lock($key) THEN
            INSERT INTO grant_at VALUES (extract(epoch FROM tried));
            EXIT;
        END IF;
        EXIT WHEN clock_timestamp() > until;
        PERFORM pg_sleep(0.05);
    END LOOP;
END \$\$;
SELECT to_char(at, 'FM9999999999.000000') FROM grant_at;
SQL
}

# The key advlock derives from NAME, as a signed bigint.
key_of() { "$ADVLOCK" key "$1" | cut -f 1; }

# Waits up to SECONDS for DIR/end ("STATUS TIME", written by the holder's
# shell when advlock run exits) and reads STATUS and END from it ('' for
# both when it never came).
read_end() {
    STATUS='' END=''
    wait_for_file "$1/end" "$2" || return 0
    read -r STATUS END <"$1/end" || true
}

# Checks one partition's timeline and records its figures. end: when the
# holder (advlock run: its process group reaped) ended, or "" for the
# in-process holder, whose work is its process.
judge() {
    local name=$1 cut=$2 work=$3 end=$4 grant=$5
    check "$name: the contender got the lock" 1 "$([ -n "$grant" ] && echo 1 || echo 0)"
    [ -n "$grant" ] || return 0
    check "$name: the holder's work ended before the contender's grant" 1 \
        "$(before "$work" "$grant" && echo 1 || echo "0 ($(minus "$work" "$grant") s late)")"
    if [ -n "$end" ]; then
        check "$name: the holder's group was reaped before the grant" 1 \
            "$(before "$end" "$grant" && echo 1 || echo "0 ($(minus "$end" "$grant") s late)")"
    fi
    check "$name: the lock was free within the lease + 2 s" 1 \
        "$(before "$grant" "$(awk -v c="$cut" -v l="$LEASE_S" 'BEGIN { printf "%.3f", c + l + 2 }')" \
            && echo 1 || echo "0 ($(minus "$grant" "$cut") s)")"
    echo "$name $cut $work ${end:-$work} $grant" >>"$figures"
}

# The figures of every partition judged (not the restart, which is none):
# release (grant - cut), stop (work's end - cut), the holder's end (for
# advlock run: its exit, the group reaped and the connection closed) after
# the cut, margin (grant - the holder's end). With CASE, that case's alone.
report_figures() {
    [ -s "$figures" ] || return 0
    awk -v only="${1:-}" '
        $1 == "restart" || (only != "" && $1 != only) { next }
        { n++; release[n] = $5 - $2; stop[n] = $3 - $2; ended[n] = $4 - $2; margin[n] = $5 - $4
          if ($3 >= $5 || $4 >= $5) overlaps++ }
        function sort(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
        END {
            if (n == 0) exit
            if (only != "") printf "%s ", only
            sort(release, n); sort(stop, n); sort(ended, n); sort(margin, n)
            printf "figures: %d partitions, %d overlaps; release after the partition p50 %.2f s, max %.2f s; " \
                   "holder stopped p50 %.2f s, max %.2f s; holder ended p50 %.2f s, max %.2f s; " \
                   "stop-to-release margin p50 %.2f s, min %.2f s\n",
                n, overlaps + 0, release[int((n + 1) / 2)], release[n], stop[int((n + 1) / 2)], stop[n],
                ended[int((n + 1) / 2)], ended[n],
                margin[int((n + 1) / 2)], margin[1]
        }' "$figures"
}
