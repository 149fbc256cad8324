#!/usr/bin/python3
"""A Python lock set's rate as it grows: per round, LOCKS distinct names
taken and given back through an advlock.LockSet (a task per lock) whose
connection holds HELD - LOCKS other names throughout, so that each round
runs with up to HELD held; for each HELD given and each asyncio client.
The server's cost of ending a transaction grows with the locks its session
holds (docs/performance.md, "A lock set as it grows"), so the server needs
max_locks_per_transaction raised for the largest HELD: `make
bench-lockset-growth` starts one so, and runs bench/many_locks --held for
the C set beside it.

Usage: bench/lockset_growth.py [--held 1000,10000] [--locks 1000]
                               [--rounds 7] [--json OUT]
Writes {"name": {"value", "unit", "ratio"}} as bench/run.sh's report does;
ratio is the rate at HELD / the rate at the first HELD (goal >= 0.5).
"""

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import advlock  # noqa: E402
from python_cycles import write_figures  # noqa: E402


async def connect(flavour):
    if flavour == "asyncpg":
        import asyncpg
        return await asyncpg.connect()
    import psycopg
    return await psycopg.AsyncConnection.connect(autocommit=True)


async def rate(flavour, held, locks, rounds):
    """The set's median locks/s (acquire + release) over the rounds, with
    up to held held."""
    conn = await connect(flavour)
    try:
        lockset = advlock.LockSet(conn, lease=None, capacity_share=100)
        beside = [lockset.lock("growth-beside-%d" % i, timeout=0) for i in range(held - locks)]
        await asyncio.gather(*(b.acquire() for b in beside))
        names = ["growth-%d" % i for i in range(locks)]
        rates = []
        for _ in range(rounds + 1):  # the first warms up
            members = [lockset.lock(n, timeout=0) for n in names]
            t0 = time.perf_counter()
            await asyncio.gather(*(m.acquire() for m in members))
            await asyncio.gather(*(m.release() for m in members))
            rates.append(locks / (time.perf_counter() - t0))
        await asyncio.gather(*(b.release() for b in beside))
        return statistics.median(rates[1:])
    finally:
        await conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--held", default="1000,10000")
    ap.add_argument("--locks", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    levels = [int(h) for h in args.held.split(",")]
    if any(h < args.locks for h in levels):
        ap.error("every --held is at least --locks")
    out = {}
    print("%-15s %10s %12s %7s" % ("driver", "held", "locks/s", "ratio"))
    for flavour in ("asyncpg", "psycopg_async"):
        first = None
        for held in levels:
            r = asyncio.run(rate(flavour, held, args.locks, args.rounds))
            first = first or r
            print("%-15s %10d %12.0f %7.3f" % (flavour, held, r, r / first))
            out["python_%s_lockset_%d_held" % (flavour, held)] = {
                "value": round(r, 1), "unit": "locks/s", "ratio": round(r / first, 4)}
    write_figures(args.json, out)


if __name__ == "__main__":
    main()
