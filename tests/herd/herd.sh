#!/usr/bin/env bash
# The thundering herd, real beside simulated (make herd; docs/simulation.md).
#
# Usage (inside tests/pg/with-postgres.sh, which sets PG*):
#   tests/herd/herd.sh BUILD_DIR [ROUNDS] [CLIENTS...]
#
# For each N in CLIENTS (default 10 30 50) and each policy (reference,
# --jitter, --wait), ROUNDS rounds (default 3) of: `advlock calibrate
# --clients N` measures the server into a profile (each round its own: the
# machine's load drifts), then N concurrent
#   advlock run [POLICY] --timeout 10 herd -- stamp LOG sleep 0.05
# started together by tests/herd/launch.c, and that profile's
#   advlock simulate --profile PROFILE --clients N --hold 50 --timeout 10000 \
#       [POLICY] --seed ROUND
# A wait is measured from the client's process start to the lock (real: the
# launcher's stamp in the child to the command's stamp; simulated: the
# client's launch to ACQUIRED). Prints one row per N and policy: the median
# of the rounds' timeouts and of their wait p50 and p99 (nearest rank), real
# and simulated, and whether the row meets the goal: simulated timeouts
# within max(2, N/10) of the real ones, and the p50 within 25 %. Every
# client's wait, real and simulated, is drawn in BUILD_DIR/herd/waits.svg
# (tests/herd/waits_svg.c), or in $HERD_SVG.
set -euo pipefail

build=${1:?usage: herd.sh BUILD_DIR [ROUNDS] [CLIENTS...]}
rounds=${2:-3}
shift $(($# >= 2 ? 2 : $#))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 30 50)
A=$build/advlock
picture=${HERD_SVG:-$build/herd/waits.svg}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The median of the numbers on standard input (the lower of the middle two).
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }

# Nearest-rank percentile P of the numbers on standard input.
percentile() {
    sort -n | awk -v p="$1" '{ v[NR] = $1 } END {
        if (!NR) { print 0; exit }
        r = int((NR * p + 99) / 100); if (r < 1) r = 1; print v[r] }'
}

# One real round: timeouts, wait p50 and p99 (ms) of the clients that got it;
# each client's wait (or "timeout") appended to the picture's samples as
# "N POLICY real WAIT".
real_round() {
    local n=$1 policy=$2 log=$dir/log
    shift 2
    rm -f "$log"
    "$build/herd/launch" "$n" "$log" "$A" run "$@" --timeout 10 herd -- \
        "$build/herd/stamp" "$log" sleep 0.05 2>/dev/null || true
    awk '$1 == "s" { s[$2] = $3 } $1 == "g" { g[$2] = $3 }
         $1 == "x" && $3 == 1 { t++ }
         END { for (c in g) print "w", int((g[c] - s[c]) / 1000); print "t", t + 0 }' "$log" >"$dir/round"
    local waits
    waits=$(awk '$1 == "w" { print $2 }' "$dir/round")
    awk -v n="$n" -v p="$policy" '$1 == "w" { print n, p, "real", $2 }
        $1 == "t" { for (i = 0; i < $2; i++) print n, p, "real", "timeout" }' "$dir/round" >>"$dir/samples"
    echo "$(awk '$1 == "t" { print $2 }' "$dir/round") $(percentile 50 <<<"$waits") $(percentile 99 <<<"$waits")"
}

# One simulated round: the same three figures from the summary line, and
# the samples from the timeline ("ACQUIRED ... after waiting W ms").
sim_round() {
    local n=$1 policy=$2 seed=$3
    shift 3
    "$A" simulate --profile "$dir/profile.$n" --clients "$n" --hold 50 --timeout 10000 \
        --seed "$seed" "$@" >"$dir/timeline"
    local figures
    figures=$(tail -n 1 "$dir/timeline" |
        sed -n 's/.* \([0-9]*\) timed out,.*wait p50 \([0-9]*\) ms, p99 \([0-9]*\) ms.*/\1 \2 \3/p')
    sed -n "s/.* ACQUIRED .* after waiting \([0-9]*\) ms$/$n $policy simulated \1/p" \
        "$dir/timeline" >>"$dir/samples"
    local timeouts=${figures%% *}
    for _ in $(seq 1 "${timeouts:-0}"); do echo "$n $policy simulated timeout"; done >>"$dir/samples"
    echo "$figures"
}

# Medians of each column of "timeouts p50 p99" lines.
medians() {
    local file=$1
    echo "$(awk '{ print $1 }' "$file" | median) $(awk '{ print $2 }' "$file" | median)" \
        "$(awk '{ print $3 }' "$file" | median)"
}

printf '%-4s %-10s | %-20s | %-20s | %s\n' "N" "policy" "real: t/o p50 p99" \
    "simulated: t/o p50 p99" "goal"
printf -- '-----------------+----------------------+------------------------+-----\n'
misses=0
: >"$dir/samples"
for n in "${sizes[@]}"; do
    for policy in reference --jitter --wait; do
        opts=()
        [ "$policy" = reference ] || opts=("$policy")
        : >"$dir/real" && : >"$dir/sim"
        for r in $(seq 1 "$rounds"); do
            # The herd's command, less its 50 ms (the simulation's --hold).
            "$A" calibrate --clients "$n" -o "$dir/profile.$n" --hold 50 -- \
                "$build/herd/stamp" /dev/null sleep 0.05
            [ -z "${HERD_VERBOSE:-}" ] || sed 's/^/    /' "$dir/profile.$n"
            real_round "$n" "${policy#--}" "${opts[@]}" >>"$dir/real"
            sim_round "$n" "${policy#--}" "$r" "${opts[@]}" >>"$dir/sim"
            sleep 0.5 # the server closes the round's sessions
        done
        read -r rt rp50 rp99 <<<"$(medians "$dir/real")"
        read -r st sp50 sp99 <<<"$(medians "$dir/sim")"
        slack=$((n / 10 > 2 ? n / 10 : 2))
        ok=yes
        [ $((st > rt ? st - rt : rt - st)) -le "$slack" ] || ok="no: timeouts"
        # p50 within 25 % of the real one: 4 |sim - real| <= real.
        [ $((4 * (sp50 > rp50 ? sp50 - rp50 : rp50 - sp50))) -le "$rp50" ] ||
            ok="${ok/yes/no:} p50"
        [ "$ok" = yes ] || misses=$((misses + 1))
        printf '%-4s %-10s | %4s %7s %7s | %6s %7s %7s   | %s\n' "$n" "${policy#--}" \
            "$rt" "$rp50" "$rp99" "$st" "$sp50" "$sp99" "$ok"
        if [ -n "${HERD_VERBOSE:-}" ]; then
            sed 's/^/    real /' "$dir/real"
            sed 's/^/    sim  /' "$dir/sim"
        fi
    done
done
echo
echo "rounds: $rounds each; t/o: timeouts; p50, p99: acquire wait in ms from process start;"
echo "medians over the rounds; rows missing the goal: $misses"
"$build/herd/waits_svg" "$picture" "make herd: acquire waits, real and simulated; rounds per panel: $rounds" \
    <"$dir/samples"
echo "every client's wait, real against simulated: $picture"
