"""A server older than advlock supports (PostgreSQL 13: `make
test-versions` runs this file with PG_VERSION=13) is refused by both
drivers before anything is locked, with the minimum version and why."""

import asyncio
import os

import pytest

import advlock
from conftest import need_server

MAJOR = int(os.environ.get("ADVLOCK_PG_MAJOR") or 0)
pytestmark = [need_server,
              pytest.mark.skipif(MAJOR == 0 or MAJOR >= 14,
                                 reason="a supported server: run with PG_VERSION=13")]

WHY = "advlock needs PostgreSQL 14 or later"


def test_psycopg_is_refused_with_the_minimum_version(pg_conn):
    import psycopg
    with psycopg.connect(autocommit=True) as conn:
        with pytest.raises(advlock.LockFailed, match=WHY):
            with advlock.lock(conn, "old-server"):
                pytest.fail("locked on PostgreSQL %d" % MAJOR)
    assert pg_conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") \
        .fetchone()[0] == 0


def test_asyncpg_is_refused_with_the_minimum_version(pg_conn):
    import asyncpg

    async def main():
        conn = await asyncpg.connect()
        try:
            with pytest.raises(advlock.LockFailed, match=WHY):
                async with advlock.lock(conn, "old-server"):
                    pytest.fail("locked on PostgreSQL %d" % MAJOR)
        finally:
            await conn.close()
    asyncio.run(main())
    assert pg_conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") \
        .fetchone()[0] == 0
