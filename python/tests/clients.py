"""Connections of each flavour to a given server (a conninfo string, as the
harnesses export them), and a recorder of the statements a lock runs."""

import asyncio

import advlock
from advlock import _binding as B
from advlock._engine import SessionRow

FLAVOURS = ["psycopg", "psycopg-async", "asyncpg"]


def conninfo_kwargs(conninfo):
    """asyncpg's keywords for a libpq key=value conninfo (asyncpg reads URLs)."""
    fields = dict(item.split("=", 1) for item in conninfo.split())
    names = {"host": "host", "port": "port", "dbname": "database", "user": "user"}
    return {names[k]: int(v) if k == "port" else v for k, v in fields.items()}


async def connect(flavour, conninfo=""):
    """An autocommit connection of the flavour (conninfo "" reads PG*)."""
    if flavour == "asyncpg":
        import asyncpg
        return await asyncpg.connect(**conninfo_kwargs(conninfo))
    import psycopg
    if flavour == "psycopg-async":
        return await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    return psycopg.connect(conninfo, autocommit=True)


async def call(fn, *args):
    """Calls fn, awaiting its result when it is a coroutine."""
    r = fn(*args)
    return await r if asyncio.iscoroutine(r) else r


async def close(conn):
    await call(conn.close)


def announced_pid(conn):
    """The pid the server (or a proxy) announced at connect."""
    if hasattr(conn, "get_server_pid"):
        return conn.get_server_pid()
    return conn.info.backend_pid


class Recording:
    """Wraps the client of a lock's connection (its engine's) to record the
    statements it runs."""

    def __init__(self, lk):
        engine = lk._engine
        object.__setattr__(self, "inner", engine.client)
        object.__setattr__(self, "sql", [])
        engine.client = self

    def start(self, sql, args):
        self.sql.append(advlock.Sql(sql))
        return self.inner.start(sql, args)

    def run(self, sql, args):
        self.sql.append(advlock.Sql(sql))
        return self.inner.run(sql, args)

    def cancel(self):
        self.sql.append("cancel")
        return self.inner.cancel()

    def close_now(self):
        self.sql.append("close")
        self.inner.close_now()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):
        setattr(self.inner, name, value)


async def until_sent(rec, sql):
    """Lets the loop run until the recorded client has sent sql (the
    connection's pump is a task of its own): at most 5 s."""
    import asyncio
    for _ in range(5000):
        if sql in rec.sql:
            return
        await asyncio.sleep(0.001 if rec.sql else 0)


class ScriptedClient:
    """A blocking client with no server behind it: each statement answers
    what answer(sql) says (by default the session row of a direct
    connection, TRUE for the rest). bench/python_cpu.py measures the package
    with it."""

    conn = None

    def pid(self):
        return 4242

    def outside_transaction(self):
        return True

    def close_now(self):
        pass

    def ended(self):
        return False

    def watch(self, on_end):
        return lambda: None

    def cancel(self):
        pass

    def answer(self, sql, args):
        return SessionRow(4242, False, True) if sql == B.SQL_SESSION else B.RESULT_TRUE

    def run(self, sql, args):
        return self.answer(sql, args)
