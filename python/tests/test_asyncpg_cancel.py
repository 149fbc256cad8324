"""The one private asyncpg call the package makes (advlock._asyncpg_cancel),
against a real server: an asyncpg that changes it fails here."""

import asyncio
import time

import pytest

from advlock._asyncpg_cancel import send_cancel
from conftest import need_server

pytestmark = need_server


def test_send_cancel_ends_the_statement_in_flight_and_its_caller_gets_57014():
    import asyncpg

    async def main():
        conn = await asyncpg.connect()
        try:
            statement = asyncio.create_task(conn.fetchval("SELECT pg_sleep(30)"))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            await send_cancel(conn, asyncio.get_running_loop())  # delivered
            with pytest.raises(asyncpg.QueryCanceledError):
                await statement
            assert time.monotonic() - started < 5
            assert await conn.fetchval("SELECT 1") == 1  # the connection goes on
        finally:
            await conn.close()
    asyncio.run(main())
