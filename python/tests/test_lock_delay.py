"""Lock-delay from Python against a real PostgreSQL (docs/python.md
"Lock-delay"): lock_delay=True on each driver writes the holder's mark and
clears it at release; the holder after one whose session was terminated
waits out that holder's lease; the engine's refusals. And the server's
notices reach the engine while its statement is in flight, before that
statement's answer (lock.warning is the member's only then)."""

import asyncio
import time

import psycopg
import pytest

import advlock
from advlock import _binding as B
from clients import FLAVOURS, announced_pid, call, close, connect
from conftest import holds, need_server

pytestmark = need_server

# The shortest lease lease_stop=0 allows: the mark's stop bound U is 3 s,
# so the holder after a terminated one waits U + the margin, 4 s.
LEASE, STOP = 6, 0
MARGIN_S = B.C.get("ADVLOCK_LEASE_MARGIN_MS", 1000) / 1000
NOT_OWNED = "you don't own a lock of type ExclusiveLock"


@pytest.fixture(scope="module", autouse=True)
def schema():
    """advlock.mark, as `advlock setup` installs it."""
    with psycopg.connect(autocommit=True) as conn:
        conn.execute(advlock.fence_setup_sql())


def mark(conn, key):
    """The key's row in advlock.mark: (token, stop_ms), or None."""
    return conn.execute("SELECT token, stop_ms FROM advlock.mark WHERE key = %s",
                        (key,)).fetchone()


def with_conns(flavour, body, n=1):
    async def main():
        conns = [await connect(flavour) for _ in range(n)]
        try:
            await body(*conns)
        finally:
            for c in conns:
                try:
                    await close(c)
                except Exception:  # noqa: BLE001 - a terminated session's close
                    pass
    asyncio.run(main())


def delayed(conn, name, **kw):
    kw.setdefault("timeout", 30)
    return advlock.lock(conn, name, lock_delay=True, lease=LEASE, lease_stop=STOP, **kw)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_holder_marks_its_hold_and_its_release_clears_the_mark(flavour, pg_conn):
    name = "delay-mark-" + flavour
    key = advlock.derive_key(name)

    async def body(conn):
        lk = delayed(conn, name)
        await call(lk.acquire)
        row = mark(pg_conn, key)
        assert row is not None and row[0] != 0, row
        assert row[1] == (LEASE - 3) * 1000  # U: the lease's stop bound
        assert lk.warning is None  # a clean hand-off: nothing waited out
        await call(lk.release)
        assert mark(pg_conn, key) is None
        assert holds(pg_conn, key) == []
        await call(lk.acquire)  # again: the same one statement
        assert mark(pg_conn, key)[0] == row[0]  # the connection's token
        await call(lk.release)
        assert mark(pg_conn, key) is None

    with_conns(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_next_holder_waits_out_a_terminated_holders_lease(flavour, pg_conn):
    name = "delay-terminated-" + flavour
    key = advlock.derive_key(name)

    async def body(old_conn, new_conn):
        old = delayed(old_conn, name)
        await call(old.acquire)
        old_mark = mark(pg_conn, key)
        # The server ends the holder's session: its lock is free at once,
        # its mark stays.
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (announced_pid(old_conn),))
        for _ in range(500):
            if holds(pg_conn, key) == []:
                break
            time.sleep(0.01)
        assert holds(pg_conn, key) == []
        assert mark(pg_conn, key) == old_mark
        new = delayed(new_conn, name)
        started = time.monotonic()
        await call(new.acquire)
        waited = time.monotonic() - started
        assert waited >= old_mark[1] / 1000 + MARGIN_S, waited
        assert waited < old_mark[1] / 1000 + MARGIN_S + 5, waited
        assert new.warning is not None and "waiting out the previous holder's lease" \
            in new.warning[1], new.warning
        token, _ = mark(pg_conn, key)
        assert token not in (0, old_mark[0])
        assert [pid for pid, _ in holds(pg_conn, key)] == [announced_pid(new_conn)]
        await call(new.release)
        assert mark(pg_conn, key) is None

    with_conns(flavour, body, n=2)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("case", ["shared", "transaction", "no lease"])
def test_the_engine_refuses_lock_delay_where_it_cannot_hold(flavour, case, pg_conn):
    name = "delay-refused-" + flavour
    key = advlock.derive_key(name)
    words = {"shared": "mode=advlock.SHARED", "transaction": "scope=advlock.TRANSACTION",
             "no lease": "no lease"}[case]

    async def attempt(conn):
        if case == "shared":
            lk = delayed(conn, name, mode=advlock.SHARED)
        elif case == "transaction":
            lk = delayed(conn, name, scope=advlock.TRANSACTION)
        else:
            lk = advlock.lock(conn, name, timeout=5, lock_delay=True, lease=None)
        with pytest.raises(advlock.CallError, match="refused lock_delay=True") as err:
            await call(lk.acquire)
        assert err.value.code == advlock.ADVLOCK_EINVAL
        assert words in str(err.value)
        assert lk.state == advlock.LockState.NOT_HELD

    async def body(conn):
        if case != "transaction":
            await attempt(conn)
        elif flavour == "asyncpg":
            async with conn.transaction():
                await attempt(conn)
        elif flavour == "psycopg-async":
            async with conn.transaction():
                await attempt(conn)
        else:
            with conn.transaction():
                await attempt(conn)
        assert holds(pg_conn, key) == [] and mark(pg_conn, key) is None

    with_conns(flavour, body)


def test_a_psycopg_connection_not_autocommit_is_refused(pg_conn):
    # Its mark would wait uncommitted in psycopg's own transaction, and a
    # session ended before the caller's commit would take it back.
    name = "delay-not-autocommit"
    with psycopg.connect(autocommit=False) as conn:
        lk = delayed(conn, name)
        with pytest.raises(advlock.CallError, match="autocommit=True") as err:
            lk.acquire()
        assert err.value.code == advlock.ADVLOCK_EINVAL
        assert lk.state == advlock.LockState.NOT_HELD
    key = advlock.derive_key(name)
    assert holds(pg_conn, key) == [] and mark(pg_conn, key) is None


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_servers_warning_reaches_the_engine_before_the_statements_answer(flavour, pg_conn):
    """The engine's unlock of a lock its session no longer holds (the
    caller's own statement unlocked it): the server answers false with a
    WARNING. The warning is the lock's only if the engine heard it while
    the unlock was in flight, before its answer; after, it would be the
    connection's (no member)."""
    name = "delay-notice-" + flavour
    key = advlock.derive_key(name)
    other = advlock.derive_key("delay-notice-other-" + flavour)

    async def body(conn):
        # A short lease: heartbeats every 0.5 s while it is held.
        lk = advlock.lock(conn, name, timeout=5, lease=LEASE, lease_stop=STOP)
        await call(lk.acquire)
        engine = lk._engine
        # The caller's own statement's warning (unlocking a key it does
        # not hold), while the engine's heartbeats are due (one may be in
        # flight, waiting for the connection), is not the engine's.
        if flavour == "asyncpg":
            await conn.fetchval("SELECT pg_sleep(1.2), pg_advisory_unlock($1)", other)
            await asyncio.sleep(0.05)  # asyncpg's listeners run after the answer
        else:
            await call(conn.execute, "SELECT pg_sleep(1.2), pg_advisory_unlock(%s)", (other,))
        assert lk.warning is None
        assert B.core.advlock_conn_warning(engine._c) == b""
        # The caller unlocks the lock behind the engine's back.
        if flavour == "asyncpg":
            assert await conn.fetchval("SELECT pg_advisory_unlock($1)", key) is True
        else:
            cur = await call(conn.execute, "SELECT pg_advisory_unlock(%s)", (key,))
            assert (await call(cur.fetchone))[0] is True
        try:
            await call(lk.release)
        except advlock.LockError:
            pass  # the engine's unlock found nothing held: said either way
        assert lk.warning == ("01000", NOT_OWNED), lk.warning
        assert B.core.advlock_conn_warning(engine._c).decode() == NOT_OWNED
        assert B.core.advlock_conn_warning_sqlstate(engine._c) == b"01000"
        assert holds(pg_conn, key) == []

    with_conns(flavour, body)
