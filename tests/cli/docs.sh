#!/usr/bin/env bash
# The man page and --help agree: every long option a subcommand's --help
# lists is documented in docs/advlock.1, and every subcommand in the man
# page's synopsis is in advlock --help. And the page renders its sentences
# with their spaces: an alternating-font macro (.BR, .IR, ...) joins its
# arguments without one, so a sentence written on such a line runs its
# words together.
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

# Three plain words in a row among a font macro's unquoted arguments are a
# sentence that lost its spaces (".BR message . Fields may be added").
while IFS= read -r line; do
    fail "man page: words run together in [$line]"
done < <(awk '/^\.(BR|RB|IR|RI|BI|IB) / {
        rest = substr($0, 5); gsub(/"[^"]*"/, " \"\" ", rest)
        n = split(rest, w, " "); run = 0
        for (i = 1; i <= n; i++) { run = w[i] ~ /^[A-Za-z]+$/ ? run + 1 : 0; if (run >= 3) { print NR ": " $0; next } }
    }' "$man_page")
pass
rendered=$(MANWIDTH=80 man -l "$man_page" 2>/dev/null | tr -s ' \n' ' ')
case $rendered in
    *"is a message. Fields may be added to events"*) pass ;;
    *) fail "man page: the log format's last sentence does not render with its spaces" ;;
esac

# The page's EXIT STATUS lists exactly the statuses src/cli/cli.h defines
# (lib.sh reads them as EXIT_* variables).
documented=$(awk '/^\.SH EXIT STATUS/ { on = 1; next } /^\.SH/ { on = 0 } on && /^\.B [0-9, ]+$/ { gsub(",", " "); for (i = 2; i <= NF; i++) print $i }' \
    "$man_page" | sort -n | tr '\n' ' ')
defined=$(for v in ${!EXIT_@}; do echo "${!v}"; done | sort -n | tr '\n' ' ')
check "man page: EXIT STATUS lists the statuses src/cli/cli.h defines" "$defined" "$documented"
finish
