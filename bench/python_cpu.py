#!/usr/bin/python3
"""Process CPU time per uncontended acquire+release cycle of the Python
package with a fake client (no server): what the package itself costs, the
pump and the connection engine, blocking and on asyncio.

Usage: ADVLOCK_LIBRARY=build/libadvlock.so bench/python_cpu.py [CYCLES]
(make bench-python-cpu runs it, then bench/python_cpu_server.py)
"""

import asyncio
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "python", "tests")]

from advlock._engine import Engine  # noqa: E402
from advlock._lock import AsyncLock, Lock  # noqa: E402
from clients import ScriptedClient  # noqa: E402


class Fake(ScriptedClient):
    """A client whose statements answer at once: the session row of a
    direct connection, TRUE for the rest."""


class AsyncFake(Fake):
    async def start(self, sql, args):
        return self.answer(sql, args)

    def hold_body(self, body):
        return lambda: None


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    lk = Lock(Engine(Fake()), None, "bench", lease=None)
    lk.acquire()
    lk.release()
    t = time.process_time()
    for _ in range(n):
        lk.acquire()
        lk.release()
    print("blocking: %.2f us CPU per cycle" % ((time.process_time() - t) / n * 1e6))

    async def cycles():
        alk = AsyncLock(Engine(AsyncFake()), None, "bench", lease=None)
        await alk.acquire()
        await alk.release()
        t = time.process_time()
        for _ in range(n):
            await alk.acquire()
            await alk.release()
        print("asyncio: %.2f us CPU per cycle" % ((time.process_time() - t) / n * 1e6))
    asyncio.run(cycles())


if __name__ == "__main__":
    main()
