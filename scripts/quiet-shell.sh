#!/bin/sh
# make's shell when the build is quiet (the default; V=1 shows every
# command): runs each recipe line with /bin/sh as make would, and for a
# compiler or archiver line prints one short line instead of the command,
# "  CC      build/obj/src/core/key.o" (compiled), "  LD      ..." (linked),
# "  AR      ..." (archived). When such a line fails, the whole command is
# printed after the compiler's own messages, as loud as a verbose build.
# Every other line runs as it is: its output, and make's own error line,
# are what they always were. make -s prints nothing but failures.
# Usage (from the Makefile): SHELL := scripts/quiet-shell.sh (make passes -c LINE)
[ "${1:-}" = -c ] && shift
line=$1

# The tool is the first word (make passes the line unexpanded by any shell,
# so splitting on blanks is enough to read it); the output follows -o.
tag='' target=''
set -f
# shellcheck disable=SC2086 # splitting the line into words is the point
set -- $line
case ${1##*/} in
*ar | *-ar-[0-9]*) [ "${2:-}" = rcs ] && tag=AR target=${3:-} ;;
*cc | *cc-[0-9]* | *clang | *clang-[0-9]* | ccache | *++) tag=LD ;;
esac
if [ "$tag" = LD ]; then
    while [ $# -gt 0 ]; do
        case $1 in
        -c) tag=CC ;;
        -o) target=${2:-} ;;
        esac
        shift
    done
fi
[ -n "$target" ] || tag=''
set +f
# make -s: not even the short line (make's one-letter flags come first).
say=$tag
case ${MAKEFLAGS%% *} in
*=* | -*) ;;
*s*) say='' ;;
esac

[ -z "$say" ] || printf '  %-7s %s\n' "$tag" "$target"
/bin/sh -c "$line" && exit 0
status=$?
[ -z "$tag" ] || printf 'failed (status %d): %s\n' "$status" "$line" >&2
exit "$status"
