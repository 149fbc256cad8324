"""The server session check on a direct connection: one session row per
connection (not per lock object), plain statements after it, one token per
connection; and the options and errors it brings."""

import asyncio

import pytest

import advlock
from advlock import _engine
from clients import (FLAVOURS, Recording, ScriptedClient, announced_pid, call, close, connect,
                     until_sent)
from conftest import holds, need_server

S = advlock.Sql


def session(pid, token):
    """A fresh advlock_session value."""
    s = advlock._binding.Session()
    assert advlock._binding.core.advlock_session_init(s, pid, token) == 0
    return s


async def recorded_lock(flavour, name):
    """A new direct connection and a lock on it whose statements are recorded."""
    conn = await connect(flavour)
    lk = advlock.lock(conn, name, timeout=1)
    return conn, lk, Recording(lk)


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_direct_connection_checks_once_and_sends_no_guarded_sql(flavour):
    async def main():
        conn, first, rec = await recorded_lock(flavour, "direct")
        await call(first.acquire)
        await call(first.release)
        # The lock table's settings are read with the session check; the
        # default lease's setup runs once per connection, after the
        # session row (it needs to know whether a proxy is in between).
        assert rec.sql == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK, S.UNLOCK]
        # A second lock object on the connection starts from what the first
        # learned: no second session row, no second setup.
        second = advlock.lock(conn, "direct", timeout=1, wait=advlock.WAIT_SERVER)
        rec2 = Recording(second)
        await call(second.acquire)
        await call(second.release)
        assert rec2.sql == [S.TRY_LOCK, S.UNLOCK]
        assert first._engine is second._engine
        assert first._engine.proxied is False
        await close(conn)
    asyncio.run(main())


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_verify_says_whether_the_session_holds_the_lock(flavour):
    async def main():
        conn, lk, rec = await recorded_lock(flavour, "verified")
        await call(lk.acquire)
        assert (await call(lk.verify)).outcome == advlock.Outcome.HELD
        await call(lk.release)
        r = await call(lk.verify)
        assert r.outcome == advlock.Outcome.NOT_HELD
        assert r.describe() == "Lock 'verified' is no longer held by this session."
        # A verify of a lock the object does not hold says so unsent.
        assert rec.sql == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK, S.HELD, S.UNLOCK]
        await close(conn)
    asyncio.run(main())


@need_server
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_cancel_during_the_session_row(flavour, pg_conn):
    async def main():
        conn = await connect(flavour)
        lk = advlock.lock(conn, "checking", timeout=10)
        rec = Recording(lk)
        task = asyncio.create_task(lk.acquire())
        await until_sent(rec, S.SESSION)  # the session row is sent, its answer not read
        # The lease's setup may follow it in the same batch.
        checking = [[S.CAPACITY, S.SESSION], [S.CAPACITY, S.SESSION, S.LEASE_SETUP]]
        assert rec.sql in checking
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rec.sql in checking  # no lock statement after the cancel
        assert lk._member_report().outcome == advlock.Outcome.CANCELLED
        assert holds(pg_conn, lk.key) == []
        # The session row's answer, read after the cancel, still counts: the
        # next acquire does not check the session again.
        await lk.acquire()
        await lk.release()
        assert rec.sql == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK, S.UNLOCK]
        await close(conn)
    asyncio.run(main())


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_locks_on_a_connection_share_the_checked_token(flavour):
    async def main():
        a, b = await connect(flavour), await connect(flavour)
        first = advlock.lock(a, "x", timeout=0)
        await call(first.acquire)
        await call(first.release)
        token = first._engine.session().token
        assert token != 0
        later = advlock.lock(a, "y", timeout=0)
        assert later._engine is first._engine  # one engine per connection
        rec = Recording(later)
        await call(later.acquire)
        await call(later.release)
        assert rec.sql == [S.TRY_LOCK, S.UNLOCK]
        other = advlock.lock(b, "x", timeout=0)
        await call(other.acquire)
        await call(other.release)
        assert other._engine.session().token != token
        await close(a)
        await close(b)
    asyncio.run(main())


async def show(conn, setting):
    """SHOW setting on conn, whichever the flavour."""
    if hasattr(conn, "fetchval"):
        return await conn.fetchval("SHOW " + setting)
    cur = await call(conn.execute, "SHOW " + setting)
    return (await call(cur.fetchone))[0]


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_session_row_rolled_back_is_sent_again(flavour, pg_conn):
    """A session row answered inside a block that rolls back is undone with
    it: the next acquire outside any block sends it again, so a timeout
    the connection has (as a DBA's on the role) does not end the holder."""
    async def main():
        conn = await connect(flavour)
        await call(conn.execute, "SET idle_session_timeout = '1s'")
        lk = advlock.lock(conn, "rolled-back/" + flavour, timeout=1)
        rec = Recording(lk)
        await call(conn.execute, "BEGIN")
        await call(lk.acquire)
        await call(lk.release)
        await call(conn.execute, "ROLLBACK")
        assert await show(conn, "idle_session_timeout") == "1s"
        await call(lk.acquire)
        await asyncio.sleep(2.5)
        assert holds(pg_conn, lk.key, announced_pid(conn))
        assert rec.sql.count(S.SESSION) == 2
        await call(lk.release)
        await close(conn)
    asyncio.run(main())


@need_server
def test_an_asyncpg_pool_shares_its_connection_s_session():
    async def main():
        import asyncpg
        async with asyncpg.create_pool(min_size=1, max_size=1) as pool:
            async with pool.acquire() as c1:
                s1 = advlock.lock(c1, "p")._engine
            async with pool.acquire() as c2:
                s2 = advlock.lock(c2, "p")._engine
            assert c1 is not c2 and s1 is s2
    asyncio.run(main())


@need_server
def test_an_asyncpg_connection_s_session_goes_when_it_closes():
    async def main():
        import asyncpg
        from advlock import asyncpg_driver
        conn = await asyncpg.connect()
        state = advlock.lock(conn, "p")._engine
        assert advlock.lock(conn, "q")._engine is state
        assert asyncpg_driver._engines.get(conn.get_settings()) is state
        await conn.close()
        await asyncio.sleep(0)  # the termination listener's turn
        assert conn.get_settings() not in asyncpg_driver._engines
    asyncio.run(main())


def test_allow_standby_is_an_option():
    o = advlock.Options(allow_standby=True)
    assert o.to_c().allow_standby == 1 and advlock.Options().to_c().allow_standby == 0
    assert advlock.Options.coerce(o, diagnose=True).allow_standby is True


def test_session_failures_raise_their_own_errors():
    # A machine in virtual time, told of a connection behind a proxy (the
    # session row's pid differs) whose server session another client claimed.
    m = advlock.Machine()
    m.set_session(session(4242, 77))
    m.start_acquire("jobs", 1000, now=0)
    a = m.next_action()
    assert (a.sql, a.param) == (S.SESSION, 77)
    m.on_session(1001, False, False, now=1)
    report = m.report()
    assert report.failure == advlock.Failure.ESESSION
    with pytest.raises(advlock.ServerSessionError) as info:
        advlock._machine.raise_for(report, "jobs")
    assert isinstance(info.value, advlock.LockFailed)
    # The check's refusal says what it saw, then the causes strerror gives.
    words = advlock.strerror(advlock.Failure.ESESSION)
    assert str(info.value).endswith(words[words.index(":"):])
    assert "the server session this connection reached was claimed by another connection" \
        in str(info.value)

    m = advlock.Machine()
    m.set_session(session(1001, 78))
    m.start_acquire("jobs", 1000, now=0)
    m.on_session(1001, True, True, now=1)
    with pytest.raises(advlock.StandbyError) as info:
        advlock._machine.raise_for(m.report(), "jobs")
    assert str(info.value) == (
        "Refused to lock 'jobs': the server is a standby in recovery, where advisory locks"
        " exclude nobody on the primary (connect to the primary, or allow standby locks).")


def test_the_token_is_nonzero_and_random():
    tokens = {_engine.new_token() for _ in range(64)}
    assert len(tokens) == 64 and 0 not in tokens


class _LostAtTheSettings(ScriptedClient):
    """A blocking client whose connection is gone at the first statement
    (the lock table's settings row): every statement answers lost."""

    sent = 0

    def answer(self, sql, args):
        self.sent += 1
        return (advlock._binding.RESULT_CONNECTION_LOST, None, "the connection is closed")


def test_a_settings_row_answered_lost_fails_the_acquire_once():
    """The client answers the first row "connection lost": the pump tells
    the engine the connection closed, so the acquire fails ECONNLOST at once
    instead of the engine asking for its settings again."""
    client = _LostAtTheSettings()
    lk = advlock._lock.Lock(_engine.Engine(client), None, "gone", timeout=5, lease=None)
    with pytest.raises(advlock.LockFailed) as raised:
        lk.acquire()
    assert raised.value.report.failure == advlock.Failure.ECONNLOST
    assert client.sent == 1
