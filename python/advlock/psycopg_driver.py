"""psycopg 3: the machine's statements on a psycopg connection, blocking
(psycopg.Connection) or on asyncio (psycopg.AsyncConnection).

    with advlock.lock(conn, "migrations", timeout=30):
        ...

psycopg is built on libpq. Statements go out with bigint parameters (int8,
binary) through one cursor per lock, and on a direct connection psycopg
prepares them once they repeat. Behind a proxy (the session row's pid is not
the announced info.backend_pid), and until the session row has said, they
go out unprepared (prepare=False: libpq's unnamed statement, parsed, bound
and run in one round trip): a transaction-pooling proxy would run a named
statement on whichever server session is free. A server-side wait's cancel
at its deadline is psycopg's own conn.cancel() (libpq's PQcancel): from a
thread of its own for a blocking connection (_blocking), from the default executor for an
asyncio one.

psycopg connections are not in autocommit mode unless you ask: then the
lock statements run inside your transaction (session-level locks outlive it;
a failed transaction makes the unlock fail with 25P02). Use autocommit=True
for session locks taken outside your transactions, and scope=TRANSACTION
inside `with conn.transaction():`.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Dict, Optional, Union

import psycopg
from psycopg.types.numeric import Int8BinaryDumper

from . import _binding as B

from . import _watch
from ._asyncio_task import nothing_held
from ._engine import Busy, CapacityRow, Engine, FencedRow, SessionRow
from ._lease import shut_socket
from ._machine import SQL_ANSWER, SQL_TEXT

if TYPE_CHECKING:
    from ._types import Answer, Args, Call, ErrorAnswer

    AnyConnection = Union[psycopg.Connection[Any], psycopg.AsyncConnection[Any]]

_TRUE, _FALSE, _NULL = B.RESULT_TRUE, B.RESULT_FALSE, B.RESULT_NULL
_ERROR, _LOST = B.RESULT_SERVER_ERROR, B.RESULT_CONNECTION_LOST
_VOID, _SESSION, _FENCED, _CAPACITY = (B.ANSWER_VOID, B.ANSWER_SESSION, B.ANSWER_FENCED,
                                       B.ANSWER_CAPACITY)
_IDLE, _INERROR = psycopg.pq.TransactionStatus.IDLE, psycopg.pq.TransactionStatus.INERROR
_LEASE_SETUP = B.SQL_LEASE_SETUP
_HEARTBEATS = frozenset({B.SQL_HEARTBEAT, B.SQL_HEARTBEAT_GUARDED})

# The table's $n placeholders in psycopg's style (any % doubled): %s for a
# statement naming $1 once, else %(pN)s with a dict (a name may repeat).
_NAMED = tuple(len(re.findall(r"\$\d+", t)) > 1 for t in SQL_TEXT)
_TEXT = tuple(re.sub(r"\$(\d+)", r"%(p\1)s" if named else "%s", t.replace("%", "%%"))
              for t, named in zip(SQL_TEXT, _NAMED))


def _args(args: Args) -> Dict[str, int]:
    """A named statement's parameters as psycopg's dict."""
    return {"p%d" % (i + 1): v for i, v in enumerate(args)}


def _prepare(state: Engine) -> Optional[bool]:
    """psycopg's prepare= for a statement: its own choice (None) on a
    direct connection, never (False) behind a proxy or before it is known."""
    return None if state.proxied is False else False


def _cursor(conn: Any) -> Any:
    """The lock's cursor: every int it sends is a bigint (int8, binary),
    whatever its size, so each statement is prepared once for every key."""
    cur = conn.cursor()
    cur.adapters.register_dumper(int, Int8BinaryDumper)
    return cur


_ONE_ROW = frozenset(i for i, kind in enumerate(SQL_ANSWER) if kind != B.ANSWER_HOLDERS)


def _one(sql: int, row: Any, client: _Client) -> Answer:
    """The answer of a statement with one row (not HOLDERS): a boolean, a
    void (SQL NULL when a guarded wait did not run), the session row or a
    fenced try's row."""
    kind = SQL_ANSWER[sql]
    value = row[0] if row is not None else None
    if kind == _VOID:
        return _NULL if value is None else _TRUE
    if kind == _SESSION:
        pid, in_recovery, ours = row
        return SessionRow(pid, in_recovery, ours, not client.outside_transaction())
    if kind == _CAPACITY:
        return CapacityRow(row)
    if kind == _FENCED:
        return FencedRow(value, row[1] if row is not None else None)
    return _TRUE if value is True else _FALSE if value is False else _NULL


def _error(conn: AnyConnection, exc: BaseException) -> ErrorAnswer:
    if not isinstance(exc, psycopg.Error):
        raise exc
    diag = getattr(exc, "diag", None)
    message = (diag.message_primary if diag is not None else None) or str(exc) \
        or type(exc).__name__
    lost = conn.closed or getattr(conn, "broken", False)
    return (_LOST if lost else _ERROR, exc.sqlstate, message.splitlines()[0])


class _Client:
    """What both clients share: the connection, the lock's cursor, the
    connection's session state and its announced pid."""

    __slots__ = ("conn", "_cur", "state", "_running")

    conn: Any
    state: Engine
    _watch_socket: Callable[[int, Call], Call]
    # Who runs the engine's statement (a thread's ident, an asyncio task),
    # None while none runs.
    _running: object

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._cur = _cursor(conn)
        self._running = None

    def commits_alone(self) -> bool:
        """True when each statement commits on its own (autocommit): a
        lock-delay mark must, or psycopg's implicit transaction would hold
        it uncommitted, and a terminated session would take it back."""
        return bool(self.conn.autocommit)

    @staticmethod
    def _who() -> object:
        """Who runs this code: the one a notice came to (psycopg calls its
        handlers on the thread, and in the task, that reads the result)."""
        return threading.get_ident()

    def heard(self, diag: Any) -> None:
        """psycopg's notice handler (Diagnostic: a WARNING, a NOTICE): one
        that came while the engine's statement ran, to the one running it,
        goes to the engine, before that statement's answer; the caller's
        statements' notices, on the same connection, do not."""
        running = self._running
        if running is not None and running == self._who():
            self.state.notice(diag.sqlstate, diag.message_primary or "")

    def outside_transaction(self) -> bool:
        """The connection is idle outside any transaction block."""
        return not self.conn.closed and self.conn.pgconn.transaction_status == _IDLE

    def pid(self) -> int:
        """The backend pid announced at connect (a proxy's own number):
        info.backend_pid, read from the PGconn without building an info;
        0 once the connection is closed (its next statement finds it so)."""
        try:
            pid: int = self.conn.pgconn.backend_pid
            return pid
        except psycopg.OperationalError:
            return 0

    def blocked(self, sql: int) -> Optional[Busy]:
        """Busy for a heartbeat that cannot go out now: the body's
        transaction failed (every statement would, until its rollback).
        The body's statements themselves queue with it on the
        connection's lock."""
        if sql in _HEARTBEATS and self.conn.pgconn.transaction_status == _INERROR:
            return Busy("the connection's transaction failed")
        return None

    @staticmethod
    def hold_body(_body: object) -> Optional[Call]:
        """The body is never held back for a heartbeat (its statements queue
        behind it on the connection's lock)."""
        return nothing_held

    def close_now(self) -> None:
        """Ends the connection's socket (the lease expired): the statement
        in flight and the next ones fail at once; close() is the owner's."""
        fd = self._socket()
        if fd is not None:
            shut_socket(fd)

    def _socket(self) -> Optional[int]:
        """The connection's socket descriptor, or None once closed."""
        try:
            fd: int = self.conn.pgconn.socket
            return fd
        except psycopg.Error:
            return None

    def ended(self) -> bool:
        """True when the server has closed the connection's socket (read
        nothing: the FATAL message stays psycopg's to read)."""
        fd = self._socket()
        return fd is None or _watch.peer_closed(fd)

    def watch(self, on_end: Call) -> Call:
        """Calls on_end once the server closes the socket (at once if the
        connection is closed already), on the thread _watch_socket says;
        returns the call that stops the watch (_watch)."""
        fd = self._socket()
        if fd is None:
            on_end()
            return _nothing
        return self._watch_socket(fd, on_end)

    def _own_transaction(self, sql: int) -> bool:
        """The lease's setup outlives the caller's transactions: outside
        one, on a connection that is not autocommit, it is committed in a
        block of its own (inside one, a rollback undoes it, and the next
        heartbeat says so)."""
        conn = self.conn
        return bool(sql == _LEASE_SETUP and not conn.autocommit
                    and conn.pgconn.transaction_status == _IDLE)


class Client(_Client):
    """Runs the core's statements on a blocking psycopg connection."""

    __slots__ = ()

    def run(self, sql: int, args: Args) -> Answer:
        """Runs one statement; returns its answer (advlock._engine)."""
        busy = self.blocked(sql)
        if busy is not None:
            return busy
        if self._own_transaction(sql):
            with self.conn.transaction():
                return self._run(sql, args)
        return self._run(sql, args)

    def _run(self, sql: int, args: Args) -> Answer:
        cur = self._cur
        self._running = threading.get_ident()
        try:
            cur.execute(_TEXT[sql], args if not _NAMED[sql] else _args(args),
                        prepare=_prepare(self.state))
            if sql in _ONE_ROW:
                row = cur.fetchone()
                if SQL_ANSWER[sql] == B.ANSWER_BOOLEAN:
                    value = row[0] if row is not None else None
                    return _TRUE if value is True else _FALSE if value is False else _NULL
                return _one(sql, row, self)
            return [tuple(r) for r in cur.fetchall()]
        except psycopg.Error as exc:
            return _error(self.conn, exc)
        finally:
            self._running = None

    def cancel(self) -> None:
        """PQcancel for the statement in flight (thread-safe)."""
        self.conn.cancel()

    _watch_socket = staticmethod(_watch.watch_blocking)  # on the process's watcher thread


class AsyncClient(_Client):
    """Runs the core's statements on a psycopg AsyncConnection."""

    __slots__ = ("_loop",)

    _loop: Optional[asyncio.AbstractEventLoop]

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self._loop = None

    def start(self, sql: int, args: Args) -> Coroutine[Any, Any, Answer]:
        """The statement, as a coroutine returning its answer (advlock._engine
        awaits it)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._run(sql, args)

    async def _run(self, sql: int, args: Args) -> Answer:
        busy = self.blocked(sql)
        if busy is not None:
            return busy
        if self._own_transaction(sql):
            async with self.conn.transaction():
                return await self._run_here(sql, args)
        return await self._run_here(sql, args)

    async def _run_here(self, sql: int, args: Args) -> Answer:
        cur = self._cur
        self._running = asyncio.current_task()
        try:
            await cur.execute(_TEXT[sql], args if not _NAMED[sql] else _args(args),
                              prepare=_prepare(self.state))
            if sql in _ONE_ROW:
                return _one(sql, await cur.fetchone(), self)
            return [tuple(r) for r in await cur.fetchall()]
        except psycopg.Error as exc:
            return _error(self.conn, exc)
        finally:
            self._running = None

    @staticmethod
    def _who() -> object:
        try:
            return asyncio.current_task()
        except RuntimeError:  # no loop runs here: not the engine's statement
            return None

    def cancel(self) -> asyncio.Future[None]:
        """PQcancel for the statement in flight, from the default executor;
        returns the future of its delivery."""
        loop = self._loop or asyncio.get_running_loop()
        return loop.run_in_executor(None, self.conn.cancel)

    _watch_socket = staticmethod(_watch.watch_async)  # on the running loop


def _nothing() -> None:
    pass


def unusable(conn: Any) -> Optional[str]:
    """Why conn cannot take a lock (closed), or None."""
    return "it is closed" if conn.closed else None


# The attribute of a psycopg connection that keeps its engine. On the
# connection, not in a table beside it: the engine's client refers to the
# connection, so a table's entry would keep the connection alive for ever,
# while the two referring to each other are collected together.
_ENGINE = "_advlock_engine"


def engine(conn: Any) -> Engine:
    """The engine of a psycopg connection, made on first use and gone with
    the connection."""
    found: Optional[Engine] = getattr(conn, _ENGINE, None)
    if found is None:
        made: Union[Client, AsyncClient] = AsyncClient(conn) \
            if isinstance(conn, psycopg.AsyncConnection) else Client(conn)
        found = Engine(made)
        setattr(conn, _ENGINE, found)
        # Once per connection, beside the caller's own handlers.
        conn.add_notice_handler(made.heard)
    return found
