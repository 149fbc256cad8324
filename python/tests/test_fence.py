"""Fencing tokens from Python against a real PostgreSQL: fence=True on
both drivers, lock.fence, and advlock.fence_ok() guarding a write."""

import asyncio
import threading
import time

import psycopg
import pytest

import advlock
from clients import FLAVOURS, Recording, call, close, connect
from conftest import holds, need_server

pytestmark = need_server

NO_SCHEMA_DB = "advlock_fence_no_schema"


@pytest.fixture(scope="module", autouse=True)
def schema():
    """The schema, installed twice: the script is idempotent."""
    with psycopg.connect(autocommit=True) as conn:
        conn.execute(advlock.fence_setup_sql())
        conn.execute(advlock.fence_setup_sql())
        conn.execute("CREATE TABLE IF NOT EXISTS fenced_work (id int PRIMARY KEY, by_token bigint)")
        conn.execute("INSERT INTO fenced_work VALUES (1, 0) ON CONFLICT (id) DO NOTHING")


def newest(conn, key):
    row = conn.execute("SELECT token FROM advlock.fence WHERE key = %s", (key,)).fetchone()
    return None if row is None else row[0]


def guarded_write(conn, key, token):
    """The resource's side: the write lands only if token is the newest."""
    return conn.execute("UPDATE fenced_work SET by_token = %s WHERE id = 1"
                        " AND advlock.fence_ok(%s, %s)", (token, key, token)).rowcount


def with_conns(flavour, body, n=2, conninfo=""):
    async def main():
        conns = [await connect(flavour, conninfo) for _ in range(n)]
        try:
            await body(*conns)
        finally:
            for c in conns:
                await close(c)
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tokens_increase_across_holders_and_only_the_newest_writes(flavour, pg_conn):
    key = advlock.derive_key("fenced-" + flavour)
    seen = []

    async def body(a, b):
        for conn in (a, b, a, b):
            lk = advlock.lock(conn, "fenced-" + flavour, timeout=5, fence=True)
            await call(lk.acquire)
            assert lk.report.fence == lk.fence >= 1
            assert newest(pg_conn, key) == lk.fence
            seen.append(lk.fence)
            await call(lk.release)
            assert lk.fence is None  # a token belongs to a hold
        assert holds(pg_conn, key) == []

    with_conns(flavour, body)
    assert all(later > earlier for earlier, later in zip(seen, seen[1:])), seen
    stale, latest = seen[-2], seen[-1]
    assert pg_conn.execute("SELECT advlock.fence_ok(%s, %s), advlock.fence_ok(%s, %s)",
                           (key, latest, key, stale)).fetchone() == (True, False)
    assert guarded_write(pg_conn, key, stale) == 0   # the paused holder's late write
    assert guarded_write(pg_conn, key, latest) == 1  # the newest holder's
    fresh = advlock.derive_key("never-fenced-" + flavour)
    assert pg_conn.execute("SELECT advlock.fence_ok(%s, 1)", (fresh,)).fetchone() == (True,)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_only_a_fenced_lock_sends_the_fenced_statement(flavour):
    async def body(a):
        plain = advlock.lock(a, "fence-plain", timeout=5)
        fenced = advlock.lock(a, "fence-plain", timeout=5, fence=True)
        rec = Recording(plain)  # the connection's statements, both locks'
        sent = []
        for lk in (plain, fenced):
            await call(lk.acquire)
            await call(lk.release)
            sent.append(list(rec.sql))
            rec.sql.clear()
        plain_sql, fenced_sql = sent
        assert advlock.Sql.TRY_LOCK in plain_sql
        assert advlock.Sql.TRY_LOCK_FENCED not in plain_sql and plain.report.fence == 0
        assert advlock.Sql.TRY_LOCK_FENCED in fenced_sql and fenced.report.fence >= 1

    with_conns(flavour, body, n=1)


@pytest.mark.parametrize("kw", [{"mode": advlock.SHARED}, {"wait": advlock.WAIT_SERVER}])
def test_fence_is_refused_for_shared_locks_and_server_side_waits(kw):
    with psycopg.connect(autocommit=True) as conn:
        with pytest.raises(advlock.CallError) as caught:
            advlock.lock(conn, "fence-refused", fence=True, **kw)
        assert caught.value.code == advlock.ADVLOCK_EINVAL


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_transaction_scoped_token_commits_with_the_transaction(flavour, pg_conn):
    name = "fenced-xact-" + flavour
    key = advlock.derive_key(name)
    tokens = []

    async def in_transaction(a, end):
        lk = advlock.lock(a, name, timeout=5, fence=True, scope=advlock.TRANSACTION)
        if flavour == "asyncpg":
            tx = a.transaction()
            await tx.start()
            await lk.acquire()
            await (tx.commit() if end == "COMMIT" else tx.rollback())
        else:
            await call(a.execute, "BEGIN")
            await call(lk.acquire)
            await call(a.execute, end)
        tokens.append(lk.report.fence)

    async def body(a):
        await in_transaction(a, "COMMIT")
        await in_transaction(a, "ROLLBACK")  # its token never counted
        await in_transaction(a, "COMMIT")

    with_conns(flavour, body, n=1)
    first, rolled_back, last = tokens
    assert rolled_back == first + 1 == last
    assert newest(pg_conn, key) == last


def test_psycopg_without_autocommit_commits_the_token_with_its_transaction(pg_conn):
    # The lock's statements run in the connection's transaction: its token
    # counts (for fence_ok and durably) only once that commits.
    with psycopg.connect(autocommit=False) as conn:
        with advlock.lock(conn, "fenced-not-autocommit", timeout=5, fence=True) as lk:
            before = newest(pg_conn, lk.key)
            assert before is None or before < lk.fence
            conn.commit()
            assert newest(pg_conn, lk.key) == lk.fence


def test_a_new_token_waits_for_a_guarded_write_in_flight(pg_conn):
    # fence_ok() reads the counter row FOR SHARE: the next grant's token is
    # issued only after the transaction of the write it guarded has ended.
    key = advlock.derive_key("fenced-order")
    with psycopg.connect(autocommit=True) as a, psycopg.connect(autocommit=True) as b:
        with advlock.lock(a, "fenced-order", timeout=5, fence=True) as lk:
            old = lk.fence
        writer = psycopg.connect()
        try:
            assert guarded_write(writer, key, old) == 1  # transaction still open
            got = []
            taker = threading.Thread(target=lambda: got.append(
                advlock.lock(b, "fenced-order", timeout=5, fence=True).acquire()))
            taker.start()
            time.sleep(0.5)
            assert got == []  # its token waits for the write's transaction
            writer.commit()
            taker.join(10)
            assert got and got[0].fence == old + 1
        finally:
            writer.close()
        assert guarded_write(pg_conn, key, old) == 0


@pytest.fixture
def failing_counter(pg_conn):
    """A trigger that makes the token's write for one key fail: the
    fenced try's error comes after its grant."""
    key = advlock.derive_key("fenced-error")
    pg_conn.execute("""CREATE OR REPLACE FUNCTION advlock.fail_for_test() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'counter refused'; END $$""")
    pg_conn.execute("CREATE TRIGGER fail_for_test BEFORE INSERT OR UPDATE ON advlock.fence"
                    " FOR EACH ROW WHEN (NEW.key = %s) EXECUTE FUNCTION advlock.fail_for_test()"
                    % key)
    yield key
    pg_conn.execute("DROP TRIGGER fail_for_test ON advlock.fence")
    pg_conn.execute("DROP FUNCTION advlock.fail_for_test()")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_error_after_the_grant_is_undone_and_the_holds_in_doubt(flavour, pg_conn,
                                                                    failing_counter):
    async def body(a):
        lk = advlock.lock(a, "fenced-error", timeout=5, fence=True)
        with pytest.raises(advlock.LockFailed) as caught:
            await call(lk.acquire)
        report = caught.value.report
        assert (report.sqlstate, report.detail) == ("P0001",
                                                    advlock.Detail.UNDO_AFTER_FENCE_ERROR)
        assert holds(pg_conn, failing_counter) == []  # the grant was given back
        assert lk.state == advlock.LockState.MAY_BE_HELD and lk.fence is None

    with_conns(flavour, body, n=1)


@pytest.fixture
def no_schema_db(pg_conn):
    pg_conn.execute("DROP DATABASE IF EXISTS " + NO_SCHEMA_DB)
    pg_conn.execute("CREATE DATABASE " + NO_SCHEMA_DB)
    yield "dbname=" + NO_SCHEMA_DB
    pg_conn.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % NO_SCHEMA_DB)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_token_without_the_schema_names_advlock_setup(flavour, pg_conn, no_schema_db):
    async def body(a):
        lk = advlock.lock(a, "fenced-no-schema", timeout=5, fence=True)
        with pytest.raises(advlock.LockFailed) as caught:
            await call(lk.acquire)
        assert "advlock setup" in str(caught.value)
        assert lk.state == advlock.LockState.NOT_HELD and lk.fence is None
        assert holds(pg_conn, lk.key) == []

    with_conns(flavour, body, n=1, conninfo=no_schema_db)
