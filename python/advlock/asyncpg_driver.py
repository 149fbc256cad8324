"""asyncio + asyncpg: the machine's statements on an asyncpg connection.

    async with advlock.lock(conn, "migrations", timeout=30):
        ...

On a direct connection asyncpg prepares and caches each statement text per
connection, so every statement is parsed once. Behind a proxy (the session
row's pid is not the announced get_server_pid()), and for the session row
itself, no statement is prepared: asyncpg's prepared statements are named
(its cache) or parsed in a round trip of their own, and a
transaction-pooling proxy may run the next message on another server
session, where another client's statement may hold that name. Those
statements go out as one simple-protocol message, `COPY (statement) TO
STDOUT` with the bigint parameters written into the text as literals (their
values are the machine's integers), which a proxy keeps on one server
session, and whose text output tells a SQL NULL from a void.

A server-side wait's cancel at its deadline is asyncpg's own query
cancellation (a CancelRequest over a new connection, as asyncpg sends when a
query's task is cancelled), sent while the statement's task keeps waiting
for its answer: asyncpg has no public call for that (_asyncpg_cancel).
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Coroutine, Dict, List, Optional, Sequence

import asyncpg

from . import _binding as B
from ._asyncio_task import hold_back, nothing_held
from ._asyncpg_cancel import send_cancel
from ._engine import Busy, CapacityRow, Engine, FencedRow, SessionRow
from ._machine import SQL_ANSWER, SQL_GUARDED, SQL_PARAMS, SQL_TEXT

if TYPE_CHECKING:
    from ._types import Answer, Args, Call, HolderRow

_TRUE, _FALSE, _NULL = B.RESULT_TRUE, B.RESULT_FALSE, B.RESULT_NULL
_ERROR, _LOST = B.RESULT_SERVER_ERROR, B.RESULT_CONNECTION_LOST
_BOOLEAN, _VOID, _HOLDERS, _SESSION, _FENCED, _CAPACITY = (
    B.ANSWER_BOOLEAN, B.ANSWER_VOID, B.ANSWER_HOLDERS, B.ANSWER_SESSION, B.ANSWER_FENCED,
    B.ANSWER_CAPACITY)
_PARAM = re.compile(r"\$(\d+)")

# Every parameter is a bigint, but asyncpg binds each one as the type the
# server infers for it, and one the statement only casts ($2::text) is
# inferred as text. Declaring each as int8 where it appears keeps them all
# bigints (as libpq and psycopg declare them in the Parse message); a
# statement taking $1 alone (the key, passed to a bigint function) is sent
# as the table has it.
_PREPARED_TEXT = tuple(_PARAM.sub(r"$\1::int8", t) if n > 1 else t
                       for t, n in zip(SQL_TEXT, SQL_PARAMS))
# The same statements for copy_from_query (which wraps them in COPY (...) TO
# STDOUT): each $n a literal ('%(pN)d'::int8, quoted so that the least bigint
# needs no negation), any % doubled.
_COPY_TEXT = tuple(_PARAM.sub(r"'%(p\1)d'::int8", t.replace("%", "%%")) for t in SQL_TEXT)
# The session row and the guarded rows: the ones that read the claim, sent
# as COPY wherever the connection is thought to be.
_CLAIM_ROWS = frozenset(i for i, guarded in enumerate(SQL_GUARDED) if guarded) | {B.SQL_SESSION}
# COPY's text format escapes a backslash and these control characters.
_UNESCAPE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPED = re.compile(r"\\(.)")


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


def _field(text: str) -> Optional[str]:
    """One field of COPY's text format: None for \\N, else the text."""
    if text == "\\N":
        return None
    if "\\" not in text:
        return text
    return _ESCAPED.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), text)


def _copy_rows(data: bytes) -> List[List[Optional[str]]]:
    """COPY's text output as rows of fields (str or None). Every row ends
    with a newline; a row of one void is an empty line."""
    lines = data.decode("utf-8", "replace").split("\n")
    lines.pop()  # what follows the last newline: nothing
    return [[_field(f) for f in line.split("\t")] for line in lines]


def _holder(row: Sequence[Optional[str]]) -> HolderRow:
    """A holders row from text: pid and seconds numbers, granted a bool."""
    return (int(row[0] or 0), row[1] == "t", *row[2:7], int(row[7] or 0))


class Client:
    """Runs the core's statements on one asyncpg connection."""

    __slots__ = ("conn", "_loop", "state", "_sent")

    _loop: Optional[asyncio.AbstractEventLoop]
    state: Engine

    @staticmethod
    def commits_alone() -> bool:
        """asyncpg commits each statement outside a block of the caller's."""
        return True

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._loop = None
        self._sent = ""  # the text of the engine's last statement

    def heard(self, _conn: object, message: Any) -> None:
        """asyncpg's log listener (a WARNING, a NOTICE). asyncpg calls it
        with loop.call_soon when it reads the notice, so before the task
        waiting for the statement's answer goes on (its wake-up is
        scheduled later, when the answer is read): a notice of the
        engine's statement reaches the engine before that statement's
        answer. One of the caller's statements on the same connection
        (asyncpg names the query it came with) does not."""
        query = getattr(message, "query", None)
        if query is None or self._sent in query:
            self.state.notice(getattr(message, "sqlstate", None),
                              str(getattr(message, "message", "") or ""))

    def pid(self) -> int:
        """The backend pid announced at connect (a proxy's own number)."""
        pid: int = self.conn.get_server_pid()
        return pid

    def start(self, sql: int, args: Args) -> Coroutine[Any, Any, Answer]:
        """The statement, as a coroutine returning its answer (advlock._engine
        awaits it)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        # The rows that read the claim (the session row, the guarded ones),
        # and every statement unless the connection is known to be direct.
        if sql in _CLAIM_ROWS or self.state.proxied is not False:
            return self._copy(sql, args)
        text = self._sent = _PREPARED_TEXT[sql]
        if SQL_ANSWER[sql] == _HOLDERS:
            return self._rows(text, args)
        if SQL_ANSWER[sql] == _FENCED:
            return self._fenced(text, args)
        if SQL_ANSWER[sql] == _CAPACITY:  # the lock table's settings; lock-delay's marks
            return self._capacity(text, args)
        return self._value(text, args, SQL_ANSWER[sql])

    async def _value(self, text: str, args: Args, answer: int) -> Answer:
        try:
            value = await self.conn.fetchval(text, *args)
        except BaseException as exc:  # noqa: B902 - every way a query ends is an answer
            return self._error(exc)
        # asyncpg reads void and NULL alike (None); a plain (unguarded) wait,
        # the only kind sent here, answers void whenever it ran.
        if answer == _VOID or value is True:
            return _TRUE
        return _FALSE if value is False else _NULL

    async def _rows(self, text: str, args: Args) -> Answer:
        try:
            return [tuple(r) for r in await self.conn.fetch(text, *args)]
        except BaseException as exc:  # noqa: B902
            return self._error(exc)

    async def _fenced(self, text: str, args: Args) -> Answer:
        try:
            row = await self.conn.fetchrow(text, *args)
        except BaseException as exc:  # noqa: B902
            return self._error(exc)
        return FencedRow(None, None) if row is None else FencedRow(row[0], row[1])

    async def _capacity(self, text: str, args: Args) -> Answer:
        try:
            return CapacityRow(await self.conn.fetchrow(text, *args))
        except BaseException as exc:  # noqa: B902
            return self._error(exc)

    async def _copy(self, sql: int, args: Args) -> Answer:
        """The statement as one COPY message; its answer from the text."""
        chunks: List[bytes] = []

        async def collect(data: bytes) -> None:
            chunks.append(bytes(data))

        text = self._sent = _COPY_TEXT[sql] % {"p%d" % (i + 1): v for i, v in enumerate(args)}
        try:
            await self.conn.copy_from_query(text, output=collect)
        except BaseException as exc:  # noqa: B902
            return self._error(exc)
        return self._copy_answer(sql, _copy_rows(b"".join(chunks)))

    def _copy_answer(self, sql: int, rows: List[List[Optional[str]]]) -> Answer:
        kind = SQL_ANSWER[sql]
        if kind == _HOLDERS:
            return [_holder(r) for r in rows]
        value = rows[0][0] if rows else None
        if kind == _SESSION:
            pid, in_recovery, ours = rows[0]
            return SessionRow(int(pid or 0), in_recovery == "t", ours == "t",
                              not self.outside_transaction())
        if kind == _VOID:
            return _NULL if value is None else _TRUE
        if kind == _CAPACITY:
            return CapacityRow(int(v or 0) for v in rows[0])
        if kind == _FENCED:
            token = rows[0][1] if rows else None
            return FencedRow(None if value is None else value == "t",
                             None if token is None else int(token))
        return _TRUE if value == "t" else _FALSE if value == "f" else _NULL

    def outside_transaction(self) -> bool:
        """The connection is idle outside any transaction block."""
        return not self.conn.is_closed() and not self.conn.is_in_transaction()

    def _error(self, exc: BaseException) -> Answer:
        if isinstance(exc, asyncio.CancelledError):
            raise exc
        if isinstance(exc, asyncpg.PostgresError):
            state = getattr(exc, "sqlstate", None)
            lost = self.conn.is_closed()
            return (_LOST if lost else _ERROR, state, _first_line(exc))
        if isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError)) \
                and not self.conn.is_closed():
            # asyncpg refused to send the statement on a live connection:
            # another operation is under way on it ("another operation is
            # in progress"), a misuse, not a lost session.
            return Busy(_first_line(exc))
        if isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError,
                            ConnectionError, OSError, EOFError)):
            return (_LOST, None, _first_line(exc))
        raise exc

    @staticmethod
    def hold_body(body: Optional[asyncio.Task[Any]]) -> Optional[Call]:
        """asyncpg runs one operation at a time and refuses the next at once
        (InterfaceError), so a heartbeat goes out only while the body's task
        waits on something, and that task is held back until the
        heartbeat's answer (its wait may end first, and its next step may
        start a statement at once). Returns the call that lets it go on, or
        None while the body's task is about to run (tried again after its
        next step); one that finds the body's statement running gets Busy,
        and is tried again too. With no body task (a lock acquired outside
        `async with`), nothing is held back."""
        if body is None:
            return nothing_held
        return hold_back(body)

    def close_now(self) -> None:
        """Closes the connection at once (the lease expired): the statement
        in flight and the next ones fail."""
        self.conn.terminate()

    def ended(self) -> bool:
        """True once asyncpg has seen the connection close (it reads its
        socket all the time)."""
        return bool(self.conn.is_closed())

    def watch(self, on_end: Call) -> Call:
        """Calls on_end (on the loop) once the connection closes: asyncpg's
        termination listener, called when its socket closes, whoever closed
        it. Returns the call that stops the watch."""
        conn = self.conn

        def listener(_conn: object) -> None:
            on_end()
        conn.add_termination_listener(listener)
        if conn.is_closed():  # closed already: no listener will be called
            conn.remove_termination_listener(listener)
            on_end()

        def unwatch() -> None:
            conn.remove_termination_listener(listener)
        return unwatch

    def cancel(self) -> asyncio.Future[None]:
        """Asks the server to cancel the statement in flight, with asyncpg's
        own cancellation (a CancelRequest on a new connection); returns a
        future done once the request is delivered."""
        return send_cancel(self.conn, self._loop or asyncio.get_running_loop())


# Each connection's engine, by the connection's settings object: a pool's
# proxy object changes with every acquire from the pool, and get_settings()
# is asyncpg's one public handle on the connection behind it (not weakly
# referable: the entry goes when the connection closes).
_engines: Dict[object, Engine] = {}


def engine(conn: Any) -> Engine:
    """The engine of an asyncpg connection (or a pool's proxy of one)."""
    if conn.is_closed():
        return Engine(Client(conn))  # closed meanwhile: its statements will find it so
    settings = conn.get_settings()
    found = _engines.get(settings)
    if found is None:
        found = _engines[settings] = Engine(Client(conn))
        conn.add_termination_listener(lambda _closed: _engines.pop(settings, None))
    # At every look-up: a pool's reset() of the connection, at each release
    # to the pool, drops every log listener. Added once (a set), beside the
    # caller's own.
    client: Client = found.client  # type: ignore[assignment]
    conn.add_log_listener(client.heard)
    return found


def unusable(conn: Any) -> Optional[str]:
    """Why conn cannot take a lock (closed, or a pool's connection given
    back), or None."""
    try:
        return "it is closed" if conn.is_closed() else None
    except asyncpg.InterfaceError as exc:  # a pool's proxy, released
        return _first_line(exc)
