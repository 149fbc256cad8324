#!/usr/bin/env bash
# Prints line and branch coverage per file of src/ from a --coverage build
# tree (see mk/coverage.mk) and enforces the gates. Objects were built twice
# (plain and "san", here without sanitizers), so their counters are merged.
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

status=0
printf '%-38s %8s %9s\n' file lines branches
for src in $(git ls-files 'src/*.c'); do
    obj_dir="$merged/$(dirname "$src")"
    [ -f "$obj_dir/$(basename "${src%.c}").gcno" ] || continue
    out=$(cd "$obj_dir" && gcov -b -n -o . "$OLDPWD/$src" 2>/dev/null | sed -n "/File '.*$(basename "$src")'/,/^$/p")
    lines=$(sed -n 's/^Lines executed:\([0-9.]*\)%.*/\1/p' <<<"$out" | head -n1)
    branches=$(sed -n 's/^Taken at least once:\([0-9.]*\)%.*/\1/p' <<<"$out" | head -n1)
    lines=${lines:-0}; branches=${branches:--}
    verdict=""
    case "$src" in
        src/core/*)
            awk -v l="$lines" -v b="${branches/-/100}" 'BEGIN { exit !(l >= 95 && b >= 90) }' ||
                { verdict="  below the core's gate (95 % lines, 90 % branches)"; status=1; } ;;
        src/adapters/*)
            awk -v l="$lines" 'BEGIN { exit !(l >= 85) }' ||
                { verdict="  below the adapters' gate (85 % lines)"; status=1; } ;;
    esac
    printf '%-38s %7s%% %8s%%%s\n' "$src" "$lines" "$branches" "$verdict"
done
exit $status
