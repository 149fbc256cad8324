#!/usr/bin/env bash
# Proves two builds of the simulation campaign give byte-identical traces:
# each prints one hash of each seed's whole trace (campaign --hashes), the
# lists must match, and on the first seed that differs both traces are
# replayed and the first differing line is shown.
# Usage: tests/sim/same-trace.sh SEEDS CAMPAIGN_A CAMPAIGN_B
# Exit status: 0 identical, 1 a seed differs, 2 a build could not run.
set -u
seeds=$1 a=$2 b=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Status 1 (a violated invariant) is sim-test's to report; here it is just
# another part of the run that must not differ.
for side in a b; do
    "${!side}" --seeds "$seeds" --start 1 --hashes >"$work/$side" 2>"$work/$side.log"
    status=$?
    echo "$status" >"$work/$side.status"
    if [ "$status" -gt 1 ]; then
        echo "same trace: ${!side} exited with status $status:" >&2
        tail -n 5 "$work/$side.log" >&2
        exit 2
    fi
    if [ "$(wc -l <"$work/$side")" -ne "$seeds" ]; then
        echo "same trace: ${!side} printed $(wc -l <"$work/$side") hashes for $seeds seeds" >&2
        exit 2
    fi
done

# Both lists are "SEED HASH" in seed order: the first line that differs
# names the first seed whose trace differs.
seed=$(paste -d ' ' "$work/a" "$work/b" | awk '$2 != $4 {print $1; exit}')
if [ -z "$seed" ]; then
    if ! cmp -s "$work/a.status" "$work/b.status"; then
        echo "same trace: equal traces but exit status $(cat "$work/a.status") from $a," \
            "$(cat "$work/b.status") from $b" >&2
        exit 1
    fi
    events=$(sed -n 's/.* \([0-9]*\) events,.*/\1/p' "$work/a.log")
    modelled=$(sed -n 's/.* \([0-9]*\) modelled;.*/\1/p' "$work/a.log")
    echo "same trace: seeds 1..$seeds ($modelled in the built-in world model; $events events)," \
        "identical from $a and $b"
    exit 0
fi
"$a" --seed "$seed" --trace >"$work/a.trace" 2>/dev/null
"$b" --seed "$seed" --trace >"$work/b.trace" 2>/dev/null
# cmp names the line of the first differing byte, or, when one trace is a
# prefix of the other ("EOF on FILE after byte N, line L"), its last line:
# the first difference is then the line after it.
said=$(cmp "$work/a.trace" "$work/b.trace" 2>&1)
line=$(sed -n 's/.*, line \([0-9]*\)$/\1/p' <<<"$said")
case "$said" in *EOF*) line=$((line + 1)) ;; esac
echo "same trace: seed $seed differs first, at trace line ${line:-?}" \
    "(replay: CAMPAIGN --seed $seed --trace)" >&2
if [ -z "$said" ]; then
    echo "  (its replays agree: the difference is not repeatable)" >&2
    exit 1
fi
for side in a b; do
    text=$(sed -n "${line}p" "$work/$side.trace" | cut -c 1-300)
    printf '  %s: %s\n' "${!side}" "${text:-(the trace has ended)}" >&2
done
exit 1
