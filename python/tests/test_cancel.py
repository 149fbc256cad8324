"""asyncio cancellation: task.cancel() and asyncio.timeout() map onto the
machine's cancel, and never leave a lock granted in the race behind."""

import asyncio

import pytest

import advlock
from clients import Recording, until_sent
from conftest import holds, need_server

pytestmark = need_server
FLAVOURS = ["asyncpg", "psycopg-async"]


async def connect(flavour):
    """A connection whose server session is checked already (a first lock
    did it), so a lock made on it next sends only its lock statements."""
    if flavour == "asyncpg":
        import asyncpg
        conn = await asyncpg.connect()
        pid = conn.get_server_pid()
    else:
        import psycopg
        conn = await psycopg.AsyncConnection.connect(autocommit=True)
        pid = conn.info.backend_pid
    async with advlock.lock(conn, "warm-up", timeout=0):
        pass
    return conn, pid


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_while_the_try_lock_is_in_flight_gives_the_grant_back(flavour, pg_conn):
    async def main():
        conn, pid = await connect(flavour)
        lk = advlock.lock(conn, "race", timeout=10)
        rec = Recording(lk)
        task = asyncio.create_task(lk.acquire())
        await until_sent(rec, advlock.Sql.TRY_LOCK)  # sent, its answer not read
        assert rec.sql == [advlock.Sql.TRY_LOCK]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The grant came and was given back before the CancelledError.
        assert rec.sql == [advlock.Sql.TRY_LOCK, advlock.Sql.UNLOCK]
        assert lk._member_report().outcome == advlock.Outcome.CANCELLED
        assert holds(pg_conn, lk.key, pid) == []
        await conn.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_during_a_sleep_ends_at_once(flavour, pg_conn):
    async def main():
        holder, _ = await connect(flavour)
        conn, pid = await connect(flavour)
        await advlock.lock(holder, "sleepy", timeout=0).acquire()
        lk = advlock.lock(conn, "sleepy", timeout=30)
        task = asyncio.create_task(lk.acquire())
        await asyncio.sleep(0.15)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        r = lk._member_report()
        assert r.outcome == advlock.Outcome.CANCELLED and r.attempts == 2
        assert holds(pg_conn, lk.key, pid) == []
        await conn.close()
        await holder.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_asyncio_timeout_around_a_server_side_wait(flavour, pg_conn):
    async def main():
        holder, _ = await connect(flavour)
        conn, pid = await connect(flavour)
        await advlock.lock(holder, "queue-" + flavour, timeout=0).acquire()
        lk = advlock.lock(conn, "queue-" + flavour, timeout=30, wait=advlock.WAIT_SERVER)
        rec = Recording(lk)
        with pytest.raises(TimeoutError) as info:
            async with asyncio.timeout(0.3):
                await lk.acquire()
        assert not isinstance(info.value, advlock.LockError)  # asyncio's own timeout
        # The wait was cancelled with the client's own cancellation, then the
        # machine gave back whatever a 57014 may hide.
        assert advlock.Sql.LOCK in rec.sql and "cancel" in rec.sql
        assert rec.sql.index(advlock.Sql.LOCK) < rec.sql.index("cancel")
        assert lk._member_report().outcome == advlock.Outcome.CANCELLED
        assert holds(pg_conn, lk.key, pid) == []
        if flavour == "asyncpg":
            assert await conn.fetchval("SELECT 1") == 1  # the session is usable
        await conn.close()
        await holder.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_grant_racing_the_cancel_of_a_server_side_wait_is_given_back(flavour, pg_conn):
    """The holder lets go while the waiter's task is being cancelled: many
    rounds, each ending with the waiter holding nothing."""
    async def main():
        holder, _ = await connect(flavour)
        conn, pid = await connect(flavour)
        outcomes = set()
        for i in range(30):
            h = advlock.lock(holder, "grant-race", timeout=0)
            await h.acquire()
            lk = advlock.lock(conn, "grant-race", timeout=30, wait=advlock.WAIT_SERVER)
            task = asyncio.create_task(lk.acquire())
            await asyncio.sleep(0.01)
            release = asyncio.create_task(h.release())
            for _ in range(i % 4):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
                outcomes.add("acquired")
                await lk.release()
            except asyncio.CancelledError:
                outcomes.add("cancelled")
            await release
            assert holds(pg_conn, lk.key) == [], i
        assert "cancelled" in outcomes
        await conn.close()
        await holder.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_during_the_release_lets_it_finish(flavour, pg_conn):
    async def main():
        conn, pid = await connect(flavour)
        lk = advlock.lock(conn, "rel", timeout=0)
        await lk.acquire()
        task = asyncio.create_task(lk.release())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert lk.release_report is None or True  # the task ended by CancelledError
        assert lk._member_report().outcome == advlock.Outcome.RELEASED
        assert holds(pg_conn, lk.key, pid) == []
        await conn.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_racing_a_poll_at_random_moments(flavour, pg_conn):
    async def main():
        holder, _ = await connect(flavour)
        conn, pid = await connect(flavour)
        h = advlock.lock(holder, "poll-race", timeout=0)
        for i in range(40):
            if i % 2:
                await h.acquire()
            lk = advlock.lock(conn, "poll-race", timeout=5)
            task = asyncio.create_task(lk.acquire())
            for _ in range(i % 7):
                await asyncio.sleep(0)
            if i % 2:
                await h.release()
            task.cancel()
            try:
                await task
                await lk.release()
            except asyncio.CancelledError:
                pass
            assert holds(pg_conn, lk.key, pid) == [], i
        await conn.close()
        await holder.close()
    asyncio.run(main())
