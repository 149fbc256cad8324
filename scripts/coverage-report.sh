#!/usr/bin/env bash
# Prints line and branch coverage per file of src/ from a --coverage build
# tree (see mk/coverage.mk), then per area, and enforces the gates on each
# area as a whole: the core >= 95 % of lines and >= 90 % of branches, the
# adapters >= 85 % of lines. Objects were built twice (plain and "san", here
# without sanitizers), so their counters are merged first.
set -euo pipefail
tree=${1:?usage: coverage-report.sh BUILD_TREE}
merged="$tree/merged"
rm -rf "$merged"
if [ -d "$tree/san/obj" ]; then
    gcov-tool merge "$tree/obj" "$tree/san/obj" -o "$merged" >/dev/null
else
    cp -r "$tree/obj" "$merged"
fi
# gcov-tool writes only .gcda files; gcov also needs the .gcno notes.
(cd "$tree/obj" && find . -name '*.gcno' -exec cp --parents {} "../merged/" \;)

declare -A lines_hit lines_all branches_hit branches_all
printf '%-38s %8s %9s\n' file lines branches
for src in $(git ls-files 'src/*.c'); do
    obj_dir="$merged/$(dirname "$src")"
    [ -f "$obj_dir/$(basename "${src%.c}").gcno" ] || continue
    out=$(cd "$obj_dir" && gcov -b -n -o . "$OLDPWD/$src" 2>/dev/null |
          sed -n "/File '.*$(basename "$src")'/,/^$/p")
    read -r lp ln < <(sed -n 's/^Lines executed:\([0-9.]*\)% of \([0-9]*\)/\1 \2/p' <<<"$out" | head -n1) || true
    read -r bp bn < <(sed -n 's/^Taken at least once:\([0-9.]*\)% of \([0-9]*\)/\1 \2/p' <<<"$out" | head -n1) || true
    lp=${lp:-0} ln=${ln:-0} bp=${bp:-100} bn=${bn:-0}
    case "$src" in src/core/*) area=core ;; src/adapters/*) area=adapters ;; *) area=cli ;; esac
    lines_hit[$area]=$(awk -v a="${lines_hit[$area]:-0}" -v p="$lp" -v n="$ln" 'BEGIN { print a + p * n / 100 }')
    lines_all[$area]=$(( ${lines_all[$area]:-0} + ln ))
    branches_hit[$area]=$(awk -v a="${branches_hit[$area]:-0}" -v p="$bp" -v n="$bn" 'BEGIN { print a + p * n / 100 }')
    branches_all[$area]=$(( ${branches_all[$area]:-0} + bn ))
    printf '%-38s %7s%% %8s%%\n' "$src" "$lp" "$bp"
done

status=0
echo
for area in core adapters cli; do
    [ -n "${lines_all[$area]:-}" ] || continue
    l=$(awk -v h="${lines_hit[$area]}" -v n="${lines_all[$area]}" 'BEGIN { printf "%.1f", n ? 100 * h / n : 100 }')
    b=$(awk -v h="${branches_hit[$area]}" -v n="${branches_all[$area]}" 'BEGIN { printf "%.1f", n ? 100 * h / n : 100 }')
    gate=""
    case "$area" in
        core) awk -v l="$l" -v b="$b" 'BEGIN { exit !(l >= 95 && b >= 90) }' ||
                  { gate="  below the gate (95 % lines, 90 % branches)"; status=1; } ;;
        adapters) awk -v l="$l" 'BEGIN { exit !(l >= 85) }' ||
                  { gate="  below the gate (85 % lines)"; status=1; } ;;
    esac
    printf '%-10s %6s%% of %5s lines  %6s%% of %5s branches%s\n' "$area" "$l" "${lines_all[$area]}" \
        "$b" "${branches_all[$area]}" "$gate"
done
exit $status
