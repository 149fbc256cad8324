"""Both drivers against a real PostgreSQL: psycopg blocking, psycopg async
and asyncpg, through the same checks."""

import asyncio
import time

import pytest

import advlock
from conftest import holds, need_server

pytestmark = need_server

FLAVOURS = ["psycopg", "psycopg-async", "asyncpg"]


class Conn:
    """One client session of a flavour, with await-or-call helpers."""

    def __init__(self, flavour):
        self.flavour = flavour
        self.conn = None

    async def open(self):
        if self.flavour == "asyncpg":
            import asyncpg
            self.conn = await asyncpg.connect()
        elif self.flavour == "psycopg-async":
            import psycopg
            self.conn = await psycopg.AsyncConnection.connect(autocommit=True)
        else:
            import psycopg
            self.conn = psycopg.connect(autocommit=True)
        return self

    async def close(self):
        r = self.conn.close()
        if asyncio.iscoroutine(r):
            await r

    async def pid(self):
        if self.flavour == "asyncpg":
            return self.conn.get_server_pid()
        return self.conn.info.backend_pid

    async def call(self, fn):
        r = fn()
        return await r if asyncio.iscoroutine(r) else r

    async def sql(self, text):
        if self.flavour == "asyncpg":
            return await self.conn.execute(text)
        return await self.call(lambda: self.conn.execute(text))


def run(flavour, body, n=2):
    async def main():
        conns = [await Conn(flavour).open() for _ in range(n)]
        try:
            await body(*conns)
        finally:
            for c in conns:
                await c.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_acquire_release_and_pg_locks(flavour, pg_conn):
    async def body(a, b):
        lk = advlock.lock(a.conn, "migrations", timeout=30)
        r = await a.call(lk.acquire)
        assert r.outcome == advlock.Outcome.ACQUIRED and r.attempts == 1 and lk.held
        assert holds(pg_conn, r.key) == [(await a.pid(), "ExclusiveLock")]
        r2 = await a.call(lk.release)
        assert r2.outcome == advlock.Outcome.RELEASED and r2.key == r.key and not lk.held
        assert holds(pg_conn, r.key) == []
        r3 = await a.call(lk.release)
        assert r3.outcome == advlock.Outcome.NOT_HELD
        assert r3.describe() == "This session held no lock 'migrations' to release."
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_timeout_follows_the_reference(flavour, pg_conn):
    async def body(a, b):
        held = advlock.lock(a.conn, "migrations", timeout=0)
        await a.call(held.acquire)
        t0 = time.monotonic()
        with pytest.raises(advlock.LockTimeout) as info:
            await b.call(advlock.lock(b.conn, "migrations", timeout=0.5).acquire)
        took = time.monotonic() - t0
        assert isinstance(info.value, TimeoutError)
        assert str(info.value) == "Could not acquire migration lock for 'migrations' within 0.5s."
        # Tries at 0, 100, 300 and 700 ms: the first false at or past 500 ms ends it.
        assert info.value.report.attempts == 4 and 0.69 <= took < 1.5
        assert holds(pg_conn, held.key) == [(await a.pid(), "ExclusiveLock")]
        await a.call(held.release)
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_context_manager_and_a_waiter_that_gets_it(flavour):
    async def body(a, b):
        async def hold_then_let_go():
            lk = advlock.lock(a.conn, "handover", timeout=0)
            await a.call(lk.acquire)
            await asyncio.sleep(0.5)
            await a.call(lk.release)

        if flavour == "psycopg":  # blocking: the holder lets go from a thread
            import threading
            lk = advlock.lock(a.conn, "handover", timeout=0)
            lk.acquire()
            threading.Timer(0.45, lk.release).start()
            with advlock.lock(b.conn, "handover", timeout=5) as got:
                assert got.report.attempts == 4  # 0, 100, 300, 700 ms
            return
        task = asyncio.create_task(hold_then_let_go())
        await asyncio.sleep(0.05)
        async with advlock.lock(b.conn, "handover", timeout=5) as got:
            assert got.report.attempts == 4
        await task
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("wait", [advlock.WAIT_POLL, advlock.WAIT_SERVER])
def test_shared_holders_together_exclusive_apart(flavour, wait, pg_conn):
    async def body(a, b):
        sa = advlock.lock(a.conn, "readers", timeout=0, mode=advlock.SHARED)
        sb = advlock.lock(b.conn, "readers", timeout=0, mode=advlock.SHARED, wait=wait)
        await a.call(sa.acquire)
        await b.call(sb.acquire)
        assert [m for _, m in holds(pg_conn, sa.key)] == ["ShareLock", "ShareLock"]
        await b.call(sb.release)
        with pytest.raises(advlock.LockTimeout):
            await b.call(advlock.lock(b.conn, "readers", timeout=0.2, wait=wait).acquire)
        assert holds(pg_conn, sa.key) == [(await a.pid(), "ShareLock")]
        await a.call(sa.release)
        assert holds(pg_conn, sa.key) == []
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_server_side_wait_is_cancelled_at_the_deadline(flavour, pg_conn):
    async def body(a, b):
        held = advlock.lock(a.conn, "waiting", timeout=0)
        await a.call(held.acquire)
        t0 = time.monotonic()
        with pytest.raises(advlock.LockTimeout) as info:
            await b.call(advlock.lock(b.conn, "waiting", timeout=0.4, wait=advlock.WAIT_SERVER,
                                      diagnose=True).acquire)
        assert 0.39 <= time.monotonic() - t0 < 2
        r = info.value.report
        # One waiting statement (after a first try, where the core tries once).
        assert r.attempts in (1, 2) and r.detail == advlock.Detail.DIAGNOSED
        assert r.holder_pid == await a.pid()
        assert str(info.value).startswith("Could not acquire migration lock for 'waiting' within"
                                          " 0.4s. Held by pid %d" % r.holder_pid)
        # The session is usable and holds nothing.
        assert holds(pg_conn, held.key, await b.pid()) == []
        await b.sql("SELECT 1")
        await a.call(held.release)
        got = await b.call(advlock.lock(b.conn, "waiting", timeout=1,
                                        wait=advlock.WAIT_SERVER).acquire)
        assert got.outcome == advlock.Outcome.ACQUIRED
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_jitter_and_clipping(flavour):
    async def body(a, b):
        held = advlock.lock(a.conn, "j", timeout=0)
        await a.call(held.acquire)
        t0 = time.monotonic()
        with pytest.raises(advlock.LockTimeout):
            await b.call(advlock.lock(b.conn, "j", timeout=0.3, backoff=advlock.FULL_JITTER,
                                      jitter_seed=5).acquire)
        # Jitter always clips to the deadline: the last try is at 300 ms.
        assert time.monotonic() - t0 < 0.45
        t0 = time.monotonic()
        with pytest.raises(advlock.LockTimeout) as info:
            await b.call(advlock.lock(b.conn, "j", timeout=0.25, clip_to_deadline=True).acquire)
        assert time.monotonic() - t0 < 0.4 and info.value.report.attempts == 3
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_transaction_scope(flavour, pg_conn):
    async def body(a, b):
        key = advlock.derive_key("xact")
        lk = advlock.lock(a.conn, "xact", timeout=0, scope=advlock.TRANSACTION)
        if flavour == "asyncpg":
            tx = a.conn.transaction()
            await tx.start()
        else:
            await a.sql("BEGIN")
        await a.call(lk.acquire)
        assert holds(pg_conn, key) == [(await a.pid(), "ExclusiveLock")]
        r = await a.call(lk.release)
        assert r.outcome == advlock.Outcome.ENDS_WITH_TRANSACTION
        assert holds(pg_conn, key) == [(await a.pid(), "ExclusiveLock")]
        if flavour == "asyncpg":
            await tx.commit()
        else:
            await a.sql("COMMIT")
        assert holds(pg_conn, key) == []
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_server_error_and_lost_connection_are_failures(flavour, pg_conn):
    async def body(a, b):
        # A failed transaction block: 25P02 for the try-lock.
        # The server session checked first, so the error is the try-lock's.
        warm = advlock.lock(a.conn, "f", timeout=0)
        await a.call(warm.acquire)
        await a.call(warm.release)
        if flavour == "asyncpg":
            tx = a.conn.transaction()
            await tx.start()
        else:
            await a.sql("BEGIN")
        with pytest.raises(Exception):
            await a.sql("SELECT 1/0")
        with pytest.raises(advlock.LockFailed) as info:
            await a.call(advlock.lock(a.conn, "f", timeout=1).acquire)
        r = info.value.report
        assert (r.failure, r.sqlstate) == (advlock.Failure.ESERVER, "25P02")
        assert str(info.value).startswith(
            "pg_try_advisory_lock for 'f' failed with SQLSTATE 25P02: current transaction is"
            " aborted")
        if flavour == "asyncpg":
            await tx.rollback()
        else:
            await a.sql("ROLLBACK")
        # The session is terminated while it waits on the server.
        held = advlock.lock(a.conn, "f", timeout=0)
        await a.call(held.acquire)
        pid = await b.pid()

        async def kill():
            await asyncio.sleep(0.3)
            pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

        if flavour == "psycopg":
            import threading
            killer = None
            threading.Timer(0.3, lambda: pg_conn.execute("SELECT pg_terminate_backend(%s)",
                                                         (pid,))).start()
        else:
            killer = asyncio.create_task(kill())
        with pytest.raises(advlock.LockFailed) as info:
            await b.call(advlock.lock(b.conn, "f", timeout=5, wait=advlock.WAIT_SERVER).acquire)
        assert info.value.report.failure == advlock.Failure.ECONNLOST
        assert str(info.value).startswith("pg_advisory_lock for 'f' failed: connection lost")
        if killer is not None:
            await killer
        await a.call(held.release)
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_names_that_are_not_utf8_are_refused_before_any_query(flavour):
    async def body(a, b):
        with pytest.raises(advlock.CallError):
            await a.call(advlock.lock(a.conn, b"\xff", timeout=0).acquire)
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_closed_connection_that_held_a_lock_is_collected(flavour):
    # The engine a connection's locks share refers to the connection: kept
    # beside it in a table, it would keep every connection that ever locked
    # alive (a pool that replaces connections would grow for ever). A
    # blocking connection's helper thread lets go of it once idle (1 s).
    import gc
    import weakref

    async def main():
        c = await Conn(flavour).open()
        lk = advlock.lock(c.conn, "collected", timeout=1)
        await c.call(lk.acquire)
        await c.call(lk.release)
        await c.close()
        return weakref.ref(c.conn)
    gone = asyncio.run(main())
    for _ in range(50):
        gc.collect()
        if gone() is None:
            break
        time.sleep(0.1)
    assert gone() is None
