"""The one place advlock uses a private part of asyncpg.

asyncpg has no public call that sends a cancel request for the statement in
flight while its caller still awaits the statement's answer: what libpq's
PQcancel and psycopg's Connection.cancel() are. Its only public
cancellation is cancelling the task that awaits the query, which drops the
answer (a lock granted in the race would be lost) and refuses the
connection's next statement ("another operation is cancelling") until the
cancel is done, with no public way to wait for that. So the server-side
wait's cancel at its deadline calls Connection._cancel_current_command, the
method asyncpg itself calls for a cancelled task (a CancelRequest on a new
connection). python/tests/test_asyncpg_cancel.py checks it against a real
server, so an asyncpg that changes it fails there first.
"""

from __future__ import annotations

import asyncio
from typing import Any


def send_cancel(conn: Any, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    """Asks the server to cancel the statement in flight on conn (an asyncpg
    Connection or a pool's proxy of one); returns a future of loop's, done
    once the request is delivered. The statement's caller gets its answer:
    57014 (query_canceled), or what the statement answered first."""
    done = loop.create_future()
    conn._cancel_current_command(done)
    return done
