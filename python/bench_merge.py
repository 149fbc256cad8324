#!/usr/bin/python3
"""Merges benchmark figures into build/bench.json.

Usage: python/bench_merge.py FIGURES.json BENCH.json
Both hold {"name": {"value", "unit", "ratio"}} (bench/report.c's format);
BENCH.json keeps its figures, FIGURES.json's are added or replaced, and it
is written back one figure per line, as the report writes it. A missing
BENCH.json is created.
"""

import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_merge.py FIGURES.json BENCH.json")
    with open(sys.argv[1]) as f:
        figures = json.load(f)
    merged = {}
    if os.path.exists(sys.argv[2]):
        with open(sys.argv[2]) as f:
            merged = json.load(f)
    merged.update(figures)
    lines = ["  %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in merged.items()]
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    os.replace(tmp, sys.argv[2])
    print("figures: %s (+%d from %s)" % (sys.argv[2], len(figures), sys.argv[1]))


if __name__ == "__main__":
    main()
