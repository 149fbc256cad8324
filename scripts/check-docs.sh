#!/usr/bin/env bash
# The repository's writing rules that a script can check, over the files git
# tracks: no text refers to an issue by number (a reader of the repository
# cannot see the tracker); README.md's table rows stay readable (at most 300
# characters: detail belongs in docs/ and the man page); every folder of
# tests/ is described in tests/README.md; and no two C test files share a
# name (one file name per subject); README.md names every Debian package a
# make step may install (make deps-list); the version is written once.
#   scripts/check-docs.sh        from the top of the tree
set -u
cd "$(dirname "$0")/.." || exit 1
failures=0
fail() {
    echo "check-docs: $*" >&2
    failures=$((failures + 1))
}

issue_refs=$(git ls-files -z -- ':!*.tsv' ':!fuzz/corpus' \
    | xargs -0 grep -nIE '\b[Ii]ssues? #?[0-9]+' -- 2>/dev/null)
[ -z "$issue_refs" ] || fail "text that refers to issue numbers:
$issue_refs"

long_rows=$(awk '/^\|/ && length > 300 { print FILENAME ":" FNR ": " length " characters" }' README.md)
[ -z "$long_rows" ] || fail "README.md table rows longer than 300 characters:
$long_rows"

for dir in tests/*/; do
    name=$(basename "$dir")
    grep -q "| \`$name/\` |" tests/README.md || fail "tests/$name/ is not in tests/README.md's table"
done

[ "$(head -n 1 LICENSE 2>/dev/null)" = "MIT License" ] || fail "LICENSE is missing or not the MIT licence"
grep -q '^License: Expat$' debian/copyright || fail "debian/copyright does not name the MIT (Expat) licence"

for package in $(make -s --no-print-directory deps-list); do
    grep -q "\`$package\`" README.md || fail "README.md does not name the package $package, which a make step installs"
done

shared=$(git ls-files 'tests/*/test_*.c' | xargs -n 1 basename | sort | uniq -d)
[ -z "$shared" ] || fail "test files that share a name: $shared"

# The version is written once (ADVLOCK_VERSION, include/advlock.h) and read
# through one reader, scripts/version.sh; the copies the tools require agree.
version=$(scripts/version.sh) || exit 1

readers=$(git ls-files -z | xargs -0 grep -lIE 'define ADVLOCK_VERSION' -- 2>/dev/null |
    grep -vxE 'include/advlock.h|scripts/version.sh|scripts/check-docs.sh')
[ -z "$readers" ] || fail "files that read ADVLOCK_VERSION from the header themselves (use scripts/version.sh):
$readers"

# dpkg needs the version in debian/changelog; the package's Python needs one
# in python/advlock/__init__.py until it asks the library (advlock_version()).
copies='include/advlock.h|debian/changelog|python/advlock/__init__.py'
spelt=$(git ls-files -z | xargs -0 grep -nIF -- "$version" 2>/dev/null | grep -vE "^($copies):")
[ -z "$spelt" ] || fail "files that spell the version $version out:
$spelt"

changelog=$(sed -n '1s/^advlock (\([^-)]*\)[-)].*/\1/p' debian/changelog)
[ "$changelog" = "$version" ] || fail "debian/changelog's first entry is $changelog, the header's $version"

python=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/advlock/__init__.py)
[ -z "$python" ] || [ "$python" = "$version" ] ||
    fail "python/advlock/__init__.py's __version__ is $python, the header's $version"

[ "$failures" -eq 0 ] || exit 1
echo "docs and test names follow the rules"
