"""On a real streaming hot standby (tests/pg/with-standby.sh), from each
Python driver: an acquire is refused with StandbyError by default, nothing
locked, and allowed with allow_standby=True; a fenced acquire never issues
a token there. Run by `make python-deploy-test` (part of `make test`)."""

import asyncio
import os
import time

import pytest

import advlock
from clients import FLAVOURS, Recording, call, close, connect

STANDBY = os.environ.get("ADVLOCK_TEST_STANDBY")
PRIMARY = os.environ.get("ADVLOCK_TEST_PRIMARY")
pytestmark = pytest.mark.skipif(not STANDBY or not PRIMARY,
                                reason="needs tests/pg/with-standby.sh")
REFUSED = ("Refused to lock 'nightly': the server is a standby in recovery, where advisory"
           " locks exclude nobody on the primary (connect to the primary, or allow standby"
           " locks).")


def advisory_locks(conninfo):
    import psycopg
    with psycopg.connect(conninfo, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_standby_refused_by_default(flavour):
    async def main():
        conn = await connect(flavour, STANDBY)
        lk = advlock.lock(conn, "nightly", timeout=5)
        rec = Recording(lk)
        with pytest.raises(advlock.StandbyError) as info:
            await call(lk.acquire)
        assert str(info.value) == REFUSED
        assert info.value.report.failure == advlock.Failure.ESTANDBY
        assert info.value.report.sql == advlock.Sql.SESSION
        assert rec.sql == [advlock.Sql.CAPACITY, advlock.Sql.SESSION]  # nothing else sent
        assert advisory_locks(STANDBY) == 0
        # Refused again with no second check; a release is allowed.
        with pytest.raises(advlock.StandbyError):
            await call(advlock.lock(conn, "nightly", timeout=5).acquire)
        assert (await call(lk.release)).outcome == advlock.Outcome.NOT_HELD
        await close(conn)
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_standby_allowed_with_the_option(flavour):
    async def main():
        conn = await connect(flavour, STANDBY)
        primary = await connect(flavour, PRIMARY)
        lk = advlock.lock(conn, "nightly", timeout=5, allow_standby=True)
        assert (await call(lk.acquire)).outcome == advlock.Outcome.ACQUIRED
        assert advisory_locks(STANDBY) == 1
        # Why it is refused by default: the primary's lock ignores it.
        on_primary = advlock.lock(primary, "nightly", timeout=0)
        assert (await call(on_primary.acquire)).outcome == advlock.Outcome.ACQUIRED
        await call(on_primary.release)
        assert (await call(lk.release)).outcome == advlock.Outcome.RELEASED
        await close(conn)
        await close(primary)
    asyncio.run(main())


def install_fence_schema():
    """The schema on the primary, waited for on the standby."""
    import psycopg
    with psycopg.connect(PRIMARY, autocommit=True) as c:
        c.execute(advlock.fence_setup_sql())
    with psycopg.connect(STANDBY, autocommit=True) as c:
        for _ in range(100):
            if c.execute("SELECT to_regproc('advlock.fence_ok') IS NOT NULL").fetchone()[0]:
                return
            time.sleep(0.1)
    raise AssertionError("the fence schema did not reach the standby")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_standby_never_issues_a_token(flavour):
    install_fence_schema()

    async def main():
        conn = await connect(flavour, STANDBY)
        lk = advlock.lock(conn, "nightly", timeout=5, allow_standby=True, fence=True)
        with pytest.raises(advlock.LockFailed) as info:
            await call(lk.acquire)
        assert info.value.report.sqlstate == "25006"  # read-only transaction
        assert lk.fence is None and info.value.report.fence == 0
        assert advisory_locks(STANDBY) == 0  # nothing left locked there
        await close(conn)
    asyncio.run(main())
    import psycopg
    with psycopg.connect(PRIMARY, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM advlock.fence WHERE key = %s",
                         (advlock.derive_key("nightly"),)).fetchone() == (0,)


@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_a_lock_set_on_a_standby_is_refused_and_allowed_with_the_option(flavour):
    async def main():
        conn = await connect(flavour, STANDBY)
        locks = advlock.LockSet(conn)
        with pytest.raises(advlock.StandbyError) as info:
            async with locks.lock("nightly", timeout=5):
                pass
        assert str(info.value) == REFUSED
        assert advisory_locks(STANDBY) == 0
        assert locks.in_use == 0
        async with locks.lock("nightly", timeout=5, allow_standby=True):
            assert advisory_locks(STANDBY) == 1
        assert advisory_locks(STANDBY) == 0
        await close(conn)
    asyncio.run(main())
