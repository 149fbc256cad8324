#!/usr/bin/env bash
# The pictures: advlock simulate --svg's timeline and make herd's waits
# (tests/herd/waits_svg.c, fed a small fixed herd). Each must parse as XML,
# hold the rows and bars its run had, be self-contained (no scripts, links
# or external references), and render in headless Chromium to a PNG that
# shows the palette's colours (tests/cli/picture.py reads both). No server.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
WAITS_SVG=${WAITS_SVG:?set WAITS_SVG to the herd picture tool}
facts_of="$(dirname "$0")/picture.py"
# Debian's python3 (deps-svg): another python3 may come first on PATH.
py=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# fact NAME FILE: the value picture.py gives NAME (first match).
fact() { awk -v n="$1" '$1 == n { sub(/^[^ ]* /, ""); print; exit }' "$2"; }

# render SVG PNG: headless Chromium draws SVG at its own size into PNG.
render() {
    local size
    size=$("$py" -c 'import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot(); print(r.get("width") + "," + r.get("height"))' "$1")
    timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --user-data-dir="$dir/chromium" --screenshot="$2" \
        --window-size="$size" "file://$1" >/dev/null 2>&1
}

# self_contained NAME SVG: nothing in it would reach outside the file.
self_contained() {
    check "$1: no external reference" 0 "$(fact external "$2.facts")"
    check "$1: no http but the namespace" "http://www.w3.org/2000/svg" "$(grep -o 'http[^"]*' "$2" | sort -u)"
    check "$1: no script, link or font" 0 "$(grep -ciE '<script|href|url\(|@import|@font-face' "$2")"
}

# rendered NAME PNG COLOUR MIN...: the PNG is not blank, and has at least
# MIN pixels of each COLOUR (the legend's swatches alone have under 200).
rendered() {
    local name=$1 png=$2
    shift 2
    [ -s "$png" ] || { fail "$name: Chromium wrote no PNG"; return; }
    local want=() mins=()
    while [ $# -gt 0 ]; do want+=("$1") && mins+=("$2") && shift 2; done
    "$py" "$facts_of" png "$png" "${want[@]}" >"$png.facts"
    [ "$(fact colours "$png.facts")" -ge 20 ] && pass || fail "$name: only $(fact colours "$png.facts") colours"
    [ "$(fact nonwhite "$png.facts")" -ge 50 ] && pass || fail "$name: $(fact nonwhite "$png.facts") per mille not white"
    for i in "${!want[@]}"; do
        local got
        got=$(awk -v c="${want[$i]}" '$1 == "colour" && $2 == c { print $3 }' "$png.facts")
        [ "${got:-0}" -ge "${mins[$i]}" ] && pass || fail "$name: ${got:-0} pixels of ${want[$i]}, want ${mins[$i]}"
    done
}

# ---- the timeline -----------------------------------------------------------

capture "$A" simulate --clients 8 --hold 250 --svg "$dir/eight.svg"
check "eight: status" 0 "$RC"
check "eight: the printed timeline is the same with --svg" "$("$A" simulate --clients 8 --hold 250)" "$OUT"
"$py" "$facts_of" svg "$dir/eight.svg" >"$dir/eight.svg.facts" && pass || fail "eight: not XML"
check "eight: an SVG" "{http://www.w3.org/2000/svg}svg" "$(fact root "$dir/eight.svg.facts")"
check "eight: titled with the run" "$(head -n 1 <<<"$OUT")" "$(fact title "$dir/eight.svg.facts")"
check "eight: a row per client" 8 "$(fact rows.client "$dir/eight.svg.facts")"
check "eight: one owner row" 1 "$(fact rows.owner "$dir/eight.svg.facts")"
check "eight: a hold per client" 8 "$(fact class.hold "$dir/eight.svg.facts")"
check "eight: a try per attempt" "$(grep -o '[0-9]* attempts' <<<"$OUT" | cut -d' ' -f1)" "$(fact class.try "$dir/eight.svg.facts")"
check "eight: a sleep per client that slept" "$(grep 'sleeps' <<<"$OUT" | awk '{ print $4 }' | sort -u | wc -l)" \
    "$(fact class.sleep "$dir/eight.svg.facts")"
check "eight: no waits at the server" "" "$(fact class.wait "$dir/eight.svg.facts")"
check "eight: the owner row, in the order they acquired" \
    "$(grep ACQUIRED <<<"$OUT" | awk '{ print $4 }' | paste -sd,)" "$(fact owner-0.holders "$dir/eight.svg.facts")"
check "eight: owners never overlap" 0 "$(fact owner-0.overlaps "$dir/eight.svg.facts")"
check "eight: the summary as caption" 1 "$(grep -cxF "text $(tail -n 1 <<<"$OUT")" "$dir/eight.svg.facts")"
for label in try sleep "wait at the server" hold "timed out" failed; do
    grep -qxF "text $label" "$dir/eight.svg.facts" && pass || fail "eight: no '$label' in the legend"
done
self_contained eight "$dir/eight.svg"
"$A" simulate --clients 8 --hold 250 --quiet --svg "$dir/again.svg" >/dev/null
cmp -s "$dir/eight.svg" "$dir/again.svg" && pass || fail "eight: the same run drew another picture"
cmp -s "$dir/eight.svg" "$(dirname "$0")/../../docs/simulate-timeline.svg" && pass ||
    fail "docs/simulate-timeline.svg is not what the command draws today: run
    advlock simulate --clients 8 --hold 250 --quiet --svg docs/simulate-timeline.svg"
render "$dir/eight.svg" "$dir/eight.png"
rendered eight "$dir/eight.png" "#009E73" 2000 "#9ACBEA" 2000 "#0072B2" 300
check "eight: rendered at the picture's size" "1000 $(fact height "$dir/eight.svg.facts")" \
    "$(fact width "$dir/eight.png.facts") $(fact height "$dir/eight.png.facts")"

# More clients than rows: 50 drawn, the rest counted; waits at the server.
capture "$A" simulate --clients 60 --hold 50 --wait --quiet --svg "$dir/sixty.svg"
check "sixty: status" 0 "$RC"
"$py" "$facts_of" svg "$dir/sixty.svg" >"$dir/sixty.svg.facts"
check "sixty: 50 rows drawn" 50 "$(fact rows.client "$dir/sixty.svg.facts")"
check "sixty: the rest counted" 1 "$(grep -cxF 'text 10 more clients not drawn (clients 50 to 59)' "$dir/sixty.svg.facts")"
[ "$(fact class.wait "$dir/sixty.svg.facts")" -ge 40 ] && pass || fail "sixty: $(fact class.wait "$dir/sixty.svg.facts") waits drawn"
check "sixty: owners never overlap" 0 "$(fact owner-0.overlaps "$dir/sixty.svg.facts")"
self_contained sixty "$dir/sixty.svg"
render "$dir/sixty.svg" "$dir/sixty.png"
rendered sixty "$dir/sixty.png" "#E69F00" 20000 "#009E73" 2000

# The idealised herd: a cross per timeout.
capture "$A" simulate --clients 50 --hold 50 --ideal --quiet --svg "$dir/herd.svg"
"$py" "$facts_of" svg "$dir/herd.svg" >"$dir/herd.svg.facts"
check "idealised herd: a cross per timeout" "$(grep -o '[0-9]* timed out' <<<"$OUT" | cut -d' ' -f1)" \
    "$(fact class.timed-out "$dir/herd.svg.facts")"

# Several lock names, with faults: the first four have owner rows, a cross
# per failure.
capture "$A" simulate --clients 20 --keys 6 --cycles 3 --faults --wait --seed 4 --quiet --svg "$dir/keys.svg"
"$py" "$facts_of" svg "$dir/keys.svg" >"$dir/keys.svg.facts"
check "keys: four owner rows" 4 "$(fact rows.owner "$dir/keys.svg.facts")"
check "keys: the rest counted" 1 "$(grep -cxF 'text 2 more lock names have no owner row' "$dir/keys.svg.facts")"
check "keys: a cross per failure" "$(grep -o '[0-9]* failed' <<<"$OUT" | cut -d' ' -f1)" \
    "$(fact class.failed "$dir/keys.svg.facts")"
for k in 0 1 2 3; do
    check "keys: owner row $k never overlaps" 0 "$(fact "owner-$k.overlaps" "$dir/keys.svg.facts")"
done

# A long run: bars that would touch are merged, so the picture stays small.
capture "$A" simulate --clients 64 --cycles 300 --keys 2 --hold 5 --quiet --svg "$dir/long.svg"
check "long run: status" 0 "$RC"
size=$(wc -c <"$dir/long.svg")
[ "$size" -lt 400000 ] && pass || fail "long run: $size bytes"
"$py" "$facts_of" svg "$dir/long.svg" >"$dir/long.svg.facts" && pass || fail "long run: not XML"
[ "$(fact class.try "$dir/long.svg.facts")" -lt 5000 ] && pass || fail "long run: $(fact class.try "$dir/long.svg.facts") tries drawn"

capture "$A" simulate --clients 2 --svg "$dir/no/such/dir.svg"
check "unwritable picture: status" "$EXIT_IO" "$RC"
grep -q "cannot write '$dir/no/such/dir.svg'" <<<"$ERR" && pass || fail "unwritable picture: [$ERR]"

# ---- the herd's waits ---------------------------------------------------------

# Two sizes, two policies, a few timeouts: what herd.sh collects.
for n in 10 30; do
    for policy in reference wait; do
        for i in $(seq 1 "$n"); do
            echo "$n $policy real $((i * 40 + n))"
            echo "$n $policy simulated $((i * 35 + 2 * n))"
        done
        [ "$policy" = wait ] || printf '%s reference real timeout\n%s reference simulated timeout\n' "$n" "$n"
    done
done >"$dir/samples"
capture "$WAITS_SVG" "$dir/waits.svg" "make herd: acquire waits" <"$dir/samples"
check "waits: status" 0 "$RC"
"$py" "$facts_of" svg "$dir/waits.svg" >"$dir/waits.svg.facts" && pass || fail "waits: not XML"
check "waits: a panel per size and policy" 4 "$(fact rows.panel "$dir/waits.svg.facts")"
check "waits: a real curve each" 4 "$(fact class.real "$dir/waits.svg.facts")"
check "waits: a simulated curve each" 4 "$(fact class.simulated "$dir/waits.svg.facts")"
check "waits: timeouts said" 2 "$(grep -cxF 'text timed out: 1 real, 1 simulated' "$dir/waits.svg.facts")"
self_contained waits "$dir/waits.svg"
render "$dir/waits.svg" "$dir/waits.png"
rendered waits "$dir/waits.png" "#0072B2" 400 "#D55E00" 300
capture "$WAITS_SVG" "$dir/bad.svg" "bad" <<<"10 reference real soon"
check "waits: a bad sample is refused" "$EXIT_USAGE" "$RC"

finish
