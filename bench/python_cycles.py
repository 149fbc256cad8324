#!/usr/bin/python3
"""Uncontended acquire+release cycles per second through each Python
driver of advlock (asyncpg, psycopg blocking, psycopg async), beside the same
driver running the two statements by hand on the same connection
(SELECT pg_try_advisory_lock($1); SELECT pg_advisory_unlock($1)), and the
driver's cycle with fence=True (a fencing token per grant: one durable
write; the schema is installed first). And, for the asyncio clients, 1,000
distinct locks taken and released on one connection through an
advlock.LockSet (a task per lock) beside the same statements by hand.

Each round runs the sides in alternating batches of 10 cycles on one
connection per driver (so a busy machine's drift weighs on all alike); the
figure is each side's median over the rounds. Needs a server (PG* variables: run it
through tests/pg/with-postgres.sh, as `make bench-python` does).

Usage: bench/python_cycles.py [--seconds S] [--rounds N] [--json OUT]
Writes {"name": {"value", "unit", "ratio"}} as bench/run.sh's report does;
ratio is driver / by hand (goal >= 0.9).
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import advlock  # noqa: E402

NAME = "bench-python-cycles"


def interleaved(sides, seconds):
    """Cycles per second of each side, measured in alternating batches so
    that a busy machine's drift weighs on every side alike."""
    spent = {k: 0.0 for k in sides}
    done = {k: 0 for k in sides}
    end = time.perf_counter() + seconds * len(sides)
    while time.perf_counter() < end:
        for k, batch in sides.items():
            t0 = time.perf_counter()
            done[k] += batch()
            spent[k] += time.perf_counter() - t0
    return {k: done[k] / spent[k] for k in sides}


async def ainterleaved(sides, seconds):
    spent = {k: 0.0 for k in sides}
    done = {k: 0 for k in sides}
    end = time.perf_counter() + seconds * len(sides)
    while time.perf_counter() < end:
        for k, batch in sides.items():
            t0 = time.perf_counter()
            done[k] += await batch()
            spent[k] += time.perf_counter() - t0
    return {k: done[k] / spent[k] for k in sides}


BATCH = 10  # short batches: a busy machine's bursts fall on every side alike


def cycles(lk):
    """A batch of acquire + release cycles of a blocking lock."""
    def batch():
        for _ in range(BATCH):
            lk.acquire()
            lk.release()
        return BATCH
    return batch


def acycles(lk):
    """A batch of acquire + release cycles of an asyncio lock."""
    async def batch():
        for _ in range(BATCH):
            await lk.acquire()
            await lk.release()
        return BATCH
    return batch


def awith_blocks(conn):
    """A batch of `async with advlock.lock(...)` blocks on an asyncio connection."""
    async def batch():
        for _ in range(BATCH):
            async with advlock.lock(conn, NAME, timeout=0):
                pass
        return BATCH
    return batch


def psycopg_sides():
    import psycopg
    conn = psycopg.connect(autocommit=True)
    lk = advlock.lock(conn, NAME, timeout=0)
    fenced = advlock.lock(conn, NAME, timeout=0, fence=True)
    key = advlock.derive_key(NAME)
    cur = conn.cursor()

    def by_hand():
        for _ in range(BATCH):
            cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            assert cur.fetchone()[0] is True
            cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
            cur.fetchone()
        return BATCH

    def with_block():
        for _ in range(BATCH):
            with advlock.lock(conn, NAME, timeout=0):
                pass
        return BATCH

    return conn, {"driver": cycles(lk), "by_hand": by_hand, "with": with_block,
                  "fenced": cycles(fenced)}


async def psycopg_async_sides():
    import psycopg
    conn = await psycopg.AsyncConnection.connect(autocommit=True)
    lk = advlock.lock(conn, NAME, timeout=0)
    fenced = advlock.lock(conn, NAME, timeout=0, fence=True)
    key = advlock.derive_key(NAME)
    cur = conn.cursor()

    async def by_hand():
        for _ in range(BATCH):
            await cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            assert (await cur.fetchone())[0] is True
            await cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
            await cur.fetchone()
        return BATCH

    return conn, {"driver": acycles(lk), "by_hand": by_hand, "with": awith_blocks(conn),
                  "fenced": acycles(fenced)}


async def asyncpg_sides():
    import asyncpg
    conn = await asyncpg.connect()
    lk = advlock.lock(conn, NAME, timeout=0)
    fenced = advlock.lock(conn, NAME, timeout=0, fence=True)
    key = advlock.derive_key(NAME)

    async def by_hand():
        for _ in range(BATCH):
            assert await conn.fetchval("SELECT pg_try_advisory_lock($1)", key) is True
            await conn.fetchval("SELECT pg_advisory_unlock($1)", key)
        return BATCH

    return conn, {"driver": acycles(lk), "by_hand": by_hand, "with": awith_blocks(conn),
                  "fenced": acycles(fenced)}


LOCKS = 1000  # many_locks_one_connection's N, as bench/many_locks.c's default


def many_locks_sides(conn, try_lock, unlock):
    """LOCKS distinct names taken and given back on one connection, each by
    a task of its own through an advlock.LockSet, beside the same
    statements sent one after another by hand on the same client
    (try_lock(key), unlock(key): coroutines)."""
    locks = advlock.LockSet(conn, lease=None)
    names = ["%s-many-%d" % (NAME, i) for i in range(LOCKS)]
    keys = [advlock.derive_key(n) for n in names]

    async def through_set():
        members = [locks.lock(n, timeout=0) for n in names]
        await asyncio.gather(*(m.acquire() for m in members))
        await asyncio.gather(*(m.release() for m in members))
        return LOCKS

    async def by_hand():
        for k in keys:
            assert await try_lock(k) is True
        for k in keys:
            await unlock(k)
        return LOCKS

    return {"set": through_set, "by_hand": by_hand}


async def many_locks_rates(sides, rounds):
    """Each side's median locks/s over the rounds, the sides alternating."""
    for side in sides.values():  # warm up: statements prepared, the session checked
        await side()
    rates = {k: [] for k in sides}
    for _ in range(rounds):
        for k, side in sides.items():
            t0 = time.perf_counter()
            n = await side()
            rates[k].append(n / (time.perf_counter() - t0))
    return {k: statistics.median(v) for k, v in rates.items()}


async def many_locks_asyncpg(rounds):
    import asyncpg
    conn = await asyncpg.connect()
    try:
        sides = many_locks_sides(
            conn, lambda k: conn.fetchval("SELECT pg_try_advisory_lock($1)", k),
            lambda k: conn.fetchval("SELECT pg_advisory_unlock($1)", k))
        return await many_locks_rates(sides, rounds)
    finally:
        await conn.close()


async def many_locks_psycopg_async(rounds):
    import psycopg
    conn = await psycopg.AsyncConnection.connect(autocommit=True)
    cur = conn.cursor()

    async def one(sql, key):
        await cur.execute(sql, (key,))
        return (await cur.fetchone())[0]

    try:
        sides = many_locks_sides(conn, lambda k: one("SELECT pg_try_advisory_lock(%s)", k),
                                 lambda k: one("SELECT pg_advisory_unlock(%s)", k))
        return await many_locks_rates(sides, rounds)
    finally:
        await conn.close()


def median_rounds(rounds):
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    per = args.seconds / 4
    results = {}
    import psycopg
    with psycopg.connect(autocommit=True) as conn:
        conn.execute(advlock.fence_setup_sql())

    conn, sides = psycopg_sides()
    interleaved(sides, per / 4)  # warm up: statements prepared, caches filled
    results["psycopg"] = median_rounds([interleaved(sides, per) for _ in range(args.rounds)])
    conn.close()

    async def run_async():
        for label, make in (("asyncpg", asyncpg_sides), ("psycopg_async", psycopg_async_sides)):
            conn, sides = await make()
            await ainterleaved(sides, per / 4)
            results[label] = median_rounds([await ainterleaved(sides, per)
                                            for _ in range(args.rounds)])
            await conn.close()
        for label, measure in (("asyncpg", many_locks_asyncpg),
                               ("psycopg_async", many_locks_psycopg_async)):
            many[label] = await measure(args.rounds)
    many = {}
    asyncio.run(run_async())

    out = {}
    print("%-15s %12s %12s %12s %12s %7s %7s %7s" % (
        "driver", "advlock/s", "with/s", "fenced/s", "by hand/s", "ratio", "with", "fenced"))
    for label, r in results.items():
        ratio = r["driver"] / r["by_hand"]
        with_ratio = r["with"] / r["by_hand"]
        fenced_ratio = r["fenced"] / r["by_hand"]
        print("%-15s %12.0f %12.0f %12.0f %12.0f %7.3f %7.3f %7.3f" % (
            label, r["driver"], r["with"], r["fenced"], r["by_hand"], ratio, with_ratio,
            fenced_ratio))
        out["python_%s_cycles_per_s" % label] = {"value": round(r["driver"], 1),
                                                 "unit": "cycles/s", "ratio": round(ratio, 4)}
        out["python_%s_new_lock_cycles_per_s" % label] = {
            "value": round(r["with"], 1), "unit": "cycles/s", "ratio": round(with_ratio, 4)}
        out["python_%s_fenced_cycles_per_s" % label] = {
            "value": round(r["fenced"], 1), "unit": "cycles/s", "ratio": round(fenced_ratio, 4)}
        out["python_%s_by_hand_cycles_per_s" % label] = {"value": round(r["by_hand"], 1),
                                                         "unit": "cycles/s", "ratio": None}
    print("\n%d distinct locks acquired + released on one connection (locks/s, median of %d)"
          % (LOCKS, args.rounds))
    print("%-15s %12s %12s %7s" % ("driver", "LockSet", "by hand", "ratio"))
    for label, r in many.items():
        ratio = r["set"] / r["by_hand"]
        print("%-15s %12.0f %12.0f %7.3f" % (label, r["set"], r["by_hand"], ratio))
        out["python_%s_many_locks_one_connection" % label] = {
            "value": round(r["set"], 1), "unit": "locks/s", "ratio": round(ratio, 4)}
        out["python_%s_many_locks_by_hand" % label] = {
            "value": round(r["by_hand"], 1), "unit": "locks/s", "ratio": None}
    out["python_many_locks_one_connection_locks"] = {"value": LOCKS, "unit": "locks",
                                                     "ratio": None}
    write_figures(args.json, out)


def write_figures(path, out):
    """Writes the figures as JSON to path (None: nowhere), for bench_merge.py."""
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
