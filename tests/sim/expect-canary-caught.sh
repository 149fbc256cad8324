#!/usr/bin/env bash
# Proves the simulation campaign catches a broken schedule: CAMPAIGN is built
# from core objects compiled with -DADVLOCK_CANARY (first backoff delay
# 150 ms instead of 100 ms). Passes only if the campaign reports violations
# (exit status 1) and they name the planted delay.
# Usage: tests/sim/expect-canary-caught.sh CAMPAIGN
set -u
campaign=$1
out=$("$campaign" --seeds 500 --start 1 2>&1)
status=$?
if [ "$status" -ne 1 ]; then
    echo "canary: the campaign exited with status $status; it should have found violations (1)" >&2
    printf '%s\n' "$out" | tail -n 5 >&2
    exit 1
fi
if ! grep -q 'schedule: sleep 1 lasted 150 ms; the reference policy says 100 ms' <<<"$out"; then
    echo "canary: the campaign failed, but not on the planted first delay:" >&2
    printf '%s\n' "$out" | head -n 5 >&2
    exit 1
fi
echo "canary: caught; $(grep -c '^FAIL' <<<"$out") failing seeds listed, e.g.:"
grep -m 1 '^FAIL' <<<"$out"
