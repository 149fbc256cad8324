#!/usr/bin/python3
"""Process CPU time per uncontended acquire+release cycle of each Python
driver (blocking psycopg, psycopg on asyncio, asyncpg) against a real
server, beside the same client sending the two statements by hand
(SELECT pg_try_advisory_lock($1); SELECT pg_advisory_unlock($1)) on the
same connection: the issue's bar is driver <= 1.1x by hand. CPU time, not
wall-clock: the shared machine's load disturbs it far less.

The sides alternate in batches of BATCH cycles; each side's figure is its
median batch, the ratio the median of the batches' ratios (a burst of load
falls on one pair of batches). Needs a server (PG* variables: run it through
tests/pg/with-postgres.sh, as `make bench-python-cpu` does). asyncio's
transport reads into a fresh 256 KiB buffer that glibc maps per read until
its threshold rises (docs/performance.md, "Python drivers"): set
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576 to compare runs.

Usage: bench/python_cpu_server.py [CYCLES] [psycopg|psycopg_async|asyncpg ...]
"""

import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import advlock  # noqa: E402

BATCH = 20
NAME = "bench-python-cpu"
TRY, UNLOCK = "SELECT pg_try_advisory_lock(%s)", "SELECT pg_advisory_unlock(%s)"


def summary(per):
    """{side: us per cycle of each batch} -> medians and the median ratio."""
    r = {k: statistics.median(v) for k, v in per.items()}
    r["ratio"] = statistics.median(d / h for d, h in zip(per["driver"], per["by_hand"]))
    return r


def measure(sides, cycles):
    """Each side (a function running BATCH cycles) in turn."""
    per = {k: [] for k in sides}
    for side in sides.values():  # warm up: statements prepared, the session checked
        side()
    while len(per["driver"]) * BATCH < cycles:
        for k, side in sides.items():
            t = time.process_time()
            side()
            per[k].append((time.process_time() - t) / BATCH * 1e6)
    return summary(per)


async def ameasure(sides, cycles):
    """measure() for coroutine functions."""
    per = {k: [] for k in sides}
    for side in sides.values():
        await side()
    while len(per["driver"]) * BATCH < cycles:
        for k, side in sides.items():
            t = time.process_time()
            await side()
            per[k].append((time.process_time() - t) / BATCH * 1e6)
    return summary(per)


def sides(lk, one):
    """The driver's cycles on lk, and by hand through one(sql, key), on
    asyncio."""
    key = advlock.derive_key(NAME)

    async def driver():
        for _ in range(BATCH):
            await lk.acquire()
            await lk.release()

    async def by_hand():
        for _ in range(BATCH):
            await one(TRY, key)
            await one(UNLOCK, key)
    return {"driver": driver, "by_hand": by_hand}


def psycopg_blocking(cycles):
    """The blocking driver's figures (no event loop on either side)."""
    import psycopg
    conn = psycopg.connect(autocommit=True)
    cur = conn.cursor()
    lk = advlock.lock(conn, NAME, timeout=0)
    key = advlock.derive_key(NAME)

    def driver():
        for _ in range(BATCH):
            lk.acquire()
            lk.release()

    def by_hand():
        for _ in range(BATCH):
            cur.execute(TRY, (key,))
            cur.fetchone()
            cur.execute(UNLOCK, (key,))
            cur.fetchone()
    try:
        return measure({"driver": driver, "by_hand": by_hand}, cycles)
    finally:
        conn.close()


async def psycopg_async_sides():
    import psycopg
    conn = await psycopg.AsyncConnection.connect(autocommit=True)
    cur = conn.cursor()

    async def one(sql, key):
        await cur.execute(sql, (key,))
        return (await cur.fetchone())[0]
    return conn, sides(advlock.lock(conn, NAME, timeout=0), one)


async def asyncpg_sides():
    import asyncpg
    conn = await asyncpg.connect()

    async def one(sql, key):
        return await conn.fetchval(sql.replace("%s", "$1"), key)
    return conn, sides(advlock.lock(conn, NAME, timeout=0), one)


def show(label, r):
    print("%-14s %12.1f %12.1f %7.2f" % (label, r["driver"], r["by_hand"], r["ratio"]),
          flush=True)


async def on_asyncio(which, cycles):
    made = {"psycopg_async": psycopg_async_sides, "asyncpg": asyncpg_sides}
    for label in which:
        if label in made:
            conn, both = await made[label]()
            try:
                show(label, await ameasure(both, cycles))
            finally:
                await conn.close()


def main():
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    which = sys.argv[2:] or ["psycopg", "psycopg_async", "asyncpg"]
    print("%-14s %12s %12s %7s  (CPU us per cycle, median batch)" % (
        "client", "driver", "by hand", "ratio"))
    if "psycopg" in which:
        show("psycopg", psycopg_blocking(cycles))
    asyncio.run(on_asyncio(which, cycles))


if __name__ == "__main__":
    main()
