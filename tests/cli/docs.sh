#!/usr/bin/env bash
# The man page and --help agree: every long option a subcommand's --help
# lists is documented in docs/advlock.1, and every subcommand in the man
# page's synopsis is in advlock --help.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
man_page="$(dirname "$0")/../../docs/advlock.1"
# groff writes "\-" for a hyphen; compare plain text.
man_text=$(sed 's/\\-/-/g' "$man_page")

for cmd in $("$A" --help | awk '/^commands:/ { on = 1; next } on && !NF { exit } on { print $1 }'); do
    grep -q "^\.B advlock $cmd" <<<"$man_text" && pass || fail "'$cmd' is in --help but not in the man page synopsis"
    for opt in $("$A" "$cmd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        [ "$opt" = "--help" ] && continue
        grep -q -- "$opt" <<<"$man_text" && pass || fail "advlock $cmd $opt is not in the man page"
    done
done
for cmd in $(grep -o '^\.B advlock [a-z]*' "$man_page" | awk '{ print $3 }'); do
    "$A" --help | grep -q "^  $cmd " && pass || fail "man page documents '$cmd', which --help does not list"
done
finish
