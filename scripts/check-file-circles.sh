#!/usr/bin/env bash
# Fails when source files call each other in a circle: A calls a function B
# defines and B, directly or through others, calls one A defines. Given the
# object files of one or more folders, it draws an edge from each object to
# every other whose global symbols it uses, and asks tsort(1) for an order:
# tsort names the files of any loop. Files calling downwards only, as
# docs/architecture.md asks, always have one.
set -euo pipefail
defined=$(for o in "$@"; do
    nm -g --defined-only "$o" | awk -v f="$(basename "$o" .o)" 'NF == 3 { print $3, f }'
done | sort)
edges=$(for o in "$@"; do
    f=$(basename "$o" .o)
    echo "$f $f" # every file, even one that calls no other
    nm -u "$o" | awk 'NF == 2 { print $2 }' | sort -u | join - <(echo "$defined") \
        | awk -v f="$f" '$2 != f { print f, $2 }'
done)
if ! out=$(tsort <<<"$edges" 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "files that call each other in a circle:" \
        "$(grep -v 'input contains a loop' <<<"$out" | sed 's/^tsort: //' | sort -u | tr '\n' ' ')" >&2
    exit 1
fi
echo "file circles: none among $# objects (each file calls only files below it)"
