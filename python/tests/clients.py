"""Connections of each flavour to a given server (a conninfo string, as the
harnesses export them), and a recorder of the statements a lock runs."""

import asyncio

import advlock

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
    """Wraps a lock's client to record the statements it runs."""

    def __init__(self, lk):
        self.inner = lk._client
        self.sql = []
        lk._client = self

    def start(self, sql, args):
        self.sql.append(advlock.Sql(sql))
        return self.inner.start(sql, args)

    def run(self, sql, args):
        self.sql.append(advlock.Sql(sql))
        return self.inner.run(sql, args)

    def cancel(self):
        self.sql.append("cancel")
        return self.inner.cancel()

    def pid(self):
        return self.inner.pid()

    def outside_transaction(self):
        return self.inner.outside_transaction()

    def heartbeat_blocked(self, body):
        return self.inner.heartbeat_blocked(body)

    def hold_body(self, body):
        return self.inner.hold_body(body)

    def heartbeat_client(self):
        twin = object.__new__(Recording)  # the same list, the heartbeats' client
        twin.inner, twin.sql = self.inner.heartbeat_client(), self.sql
        return twin

    def close_now(self):
        self.sql.append("close")
        self.inner.close_now()

    def watch(self, on_end):
        return self.inner.watch(on_end)

    def ended(self):
        return self.inner.ended()

    @property
    def state(self):
        return self.inner.state
