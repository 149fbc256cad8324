"""asyncio + asyncpg: the machine's statements on an asyncpg connection.

    async with advlock.lock(conn, "migrations", timeout=30):
        ...

asyncpg speaks the protocol itself (no libpq); it prepares and caches each
statement text per connection, so every statement is parsed once. A
server-side wait's cancel at its deadline is asyncpg's own query cancellation
(a CancelRequest over a new connection, as asyncpg sends when a query's task
is cancelled), sent while the statement's task keeps waiting for its answer.
"""

import asyncio

import asyncpg

from . import _binding as B
from ._loop import AsyncLock
from ._machine import SQL_ANSWER, SQL_TEXT

_TRUE, _FALSE, _NULL = B.RESULT_TRUE, B.RESULT_FALSE, B.RESULT_NULL
_ERROR, _LOST = B.RESULT_SERVER_ERROR, B.RESULT_CONNECTION_LOST


def _first_line(exc):
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


class Client:
    """Runs the core's statements on one asyncpg connection."""

    __slots__ = ("conn", "_loop", "_casts")

    def __init__(self, conn):
        self.conn = conn
        self._loop = None
        self._casts = {}

    def start(self, sql, args):
        """The statement, as a coroutine returning its answer (advlock._loop
        awaits it)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if SQL_ANSWER[sql] == B.ANSWER_HOLDERS:
            return self._rows(SQL_TEXT[sql], args)
        return self._value(SQL_TEXT[sql], args, SQL_ANSWER[sql])

    async def _encode(self, text, args):
        # asyncpg binds each parameter as the type the server inferred for
        # it; a bigint the statement only casts ($2::text) is inferred as
        # text and must be sent as its digits.
        if len(args) == 1:
            return args
        casts = self._casts.get(text)
        if casts is None:
            stmt = await self.conn.prepare(text)
            casts = self._casts[text] = tuple(
                str if t.name in ("text", "varchar", "unknown") else int
                for t in stmt.get_parameters())
        return tuple(c(v) for c, v in zip(casts, args))

    async def _value(self, text, args, answer):
        try:
            if len(args) == 1:
                value = await self.conn.fetchval(text, args[0])
            else:
                value = await self.conn.fetchval(text, *await self._encode(text, args))
        except BaseException as exc:  # noqa: B902 - every way a query ends is an answer
            return self._error(exc)
        if answer == B.ANSWER_VOID or value is True:
            return _TRUE
        return _FALSE if value is False else _NULL

    async def _rows(self, text, args):
        try:
            return [tuple(r) for r in await self.conn.fetch(text, *await self._encode(text, args))]
        except BaseException as exc:  # noqa: B902
            return self._error(exc)

    def _error(self, exc):
        if isinstance(exc, asyncio.CancelledError):
            raise exc
        if isinstance(exc, asyncpg.PostgresError):
            state = getattr(exc, "sqlstate", None)
            lost = self.conn.is_closed()
            return (_LOST if lost else _ERROR, state, _first_line(exc))
        if isinstance(exc, (asyncpg.InterfaceError, ConnectionError, OSError, EOFError)):
            return (_LOST, None, _first_line(exc))
        raise exc

    def cancel(self):
        """Asks the server to cancel the statement in flight, with asyncpg's
        own cancellation (a CancelRequest on a new connection); returns a
        future done once the request is delivered."""
        done = self._loop.create_future()
        self.conn._cancel_current_command(done)
        return done


def lock(conn, name, timeout=None, options=None, **option_kwargs):
    """An advlock.AsyncLock on an asyncpg connection (see advlock.lock)."""
    return AsyncLock(Client(conn), name, timeout, options, **option_kwargs)
