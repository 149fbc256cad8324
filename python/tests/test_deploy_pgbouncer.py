"""Through the real PgBouncer (tests/pg/with-pgbouncer.sh: transaction mode
with a pool of 3 server sessions, and session mode), from each Python driver:
session mode works as a direct connection does (with guarded statements);
transaction mode with session-scoped locks fails with ServerSessionError,
and never lets two clients hold a lock at once; a fenced acquire is refused
in both modes. Run by `make python-deploy-test` (part of `make test`)."""

import asyncio
import os
import signal
import time

import pytest

import advlock
from clients import FLAVOURS, Recording, announced_pid, call, close, connect
from conftest import holds

TX = os.environ.get("ADVLOCK_TEST_PGBOUNCER_TX")
SESSION = os.environ.get("ADVLOCK_TEST_PGBOUNCER_SESSION")
pytestmark = pytest.mark.skipif(not TX or not SESSION,
                                reason="needs tests/pg/with-pgbouncer.sh")
S = advlock.Sql
ESESSION_WORDS = advlock.strerror(advlock.Failure.ESESSION)
# The possible causes follow the fact observed, from its first colon on; the
# session check's refusal states its own fact: a claimed server session.
SESSION_CAUSES = ESESSION_WORDS[ESESSION_WORDS.index(":"):]
CLAIMED_WORDS = ("the server session this connection reached was claimed by another "
                 "connection, or holds another client's advisory lock" + SESSION_CAUSES)


@pytest.fixture(autouse=True)
def fresh_server_sessions(pg_conn):
    """Claims stay on a pooled server session until it closes: each test
    starts and ends with PgBouncer's server sessions closed (it opens new
    ones on demand), so no test meets another's claims or stranded locks."""
    def close_all():
        pg_conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
        time.sleep(0.1)
    close_all()
    yield
    close_all()


async def prepared_statements(conn):
    """pg_prepared_statements' count on the connection's server session,
    asked without preparing anything."""
    query = "SELECT count(*) FROM pg_prepared_statements"
    if hasattr(conn, "copy_from_query"):
        out = []

        async def collect(data):
            out.append(bytes(data))
        await conn.copy_from_query(query, output=collect)
        return int(b"".join(out))
    cur = await call(lambda: conn.execute(query, prepare=False))
    return (await call(cur.fetchone))[0]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_session_mode_works_with_guarded_statements(flavour, pg_conn):
    async def main():
        a, b = await connect(flavour, SESSION), await connect(flavour, SESSION)
        lk = advlock.lock(a, "pgb-session", timeout=5)
        rec = Recording(lk)
        r = await call(lk.acquire)
        assert r.outcome == advlock.Outcome.ACQUIRED
        assert rec.sql == [S.CAPACITY, S.SESSION, S.TRY_LOCK_GUARDED]
        assert lk._engine.proxied is True
        assert len(holds(pg_conn, r.key)) == 1
        # The other client is refused by the lock itself, as directly, and
        # the holders query (diagnose) names the holder's server session.
        with pytest.raises(advlock.LockTimeout) as info:
            await call(advlock.lock(b, "pgb-session", timeout=0.3, diagnose=True).acquire)
        assert info.value.report.holder_pid == holds(pg_conn, r.key)[0][0]
        assert info.value.report.holder_state == "idle"
        with pytest.raises(advlock.LockTimeout):
            await call(advlock.lock(b, "pgb-session", timeout=0.3,
                                    wait=advlock.WAIT_SERVER).acquire)
        assert (await call(lk.release)).outcome == advlock.Outcome.RELEASED
        # A guarded server-side wait that ran answers void, not NULL.
        waiter = advlock.lock(b, "pgb-session", timeout=5, wait=advlock.WAIT_SERVER)
        rec_b = Recording(waiter)
        await call(lk.acquire)

        async def hand_over():
            await asyncio.sleep(0.3)
            await call(lk.release)
        releaser = asyncio.ensure_future(hand_over()) if flavour != "psycopg" else None
        if releaser is None:
            await call(lk.release)
        assert (await call(waiter.acquire)).outcome == advlock.Outcome.ACQUIRED
        if releaser is not None:
            await releaser
            assert S.LOCK_GUARDED in rec_b.sql
        assert (await call(waiter.release)).outcome == advlock.Outcome.RELEASED
        assert holds(pg_conn, r.key) == []
        # Behind a proxy no statement was prepared by name.
        assert await prepared_statements(a) == 0 and await prepared_statements(b) == 0
        await close(a)
        await close(b)
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("mode", ["session", "transaction"])
def test_fencing_needs_a_direct_connection(flavour, mode, pg_conn):
    async def main():
        conn = await connect(flavour, SESSION if mode == "session" else TX)
        lk = advlock.lock(conn, "pgb-fenced", timeout=5, fence=True)
        rec = Recording(lk)
        with pytest.raises(advlock.ServerSessionError) as info:
            await call(lk.acquire)
        assert info.value.report.failure == advlock.Failure.ESESSION
        assert rec.sql == [S.CAPACITY, S.SESSION]  # no fenced statement through a proxy
        assert lk.fence is None and holds(pg_conn, lk.key) == []
        await close(conn)
    asyncio.run(main())


async def _pin_server_session_of(token):
    """A psycopg connection through transaction-mode PgBouncer holding open
    a transaction on the server session that `token` claimed, so that the
    claimer's next statements run elsewhere; None if PgBouncer handed out
    another server session."""
    import psycopg
    pin = await psycopg.AsyncConnection.connect(TX, autocommit=True)
    await pin.execute("BEGIN")
    cur = await pin.execute("SELECT current_setting('advlock.session', true)")
    if (await cur.fetchone())[0] == str(advlock._binding.c_int64(token).value):
        return pin
    await pin.execute("ROLLBACK")
    await pin.close()
    return None


async def _two_clients_one_holding(flavour, name):
    """Two connections through transaction-mode PgBouncer, the first holding
    `name` (its lock object and report returned too)."""
    a, b = await connect(flavour, TX), await connect(flavour, TX)
    lk = advlock.lock(a, name, timeout=2)
    try:
        r = await call(lk.acquire)
    except advlock.ServerSessionError:
        pytest.skip("the try-lock already hopped (PgBouncer chose another session)")
    assert r.outcome == advlock.Outcome.ACQUIRED
    return a, b, lk, r


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_transaction_mode_statements_that_hop_fail_with_server_session_error(flavour,
                                                                              pg_conn):
    async def main():
        a, b, lk, r = await _two_clients_one_holding(flavour, "pgb-tx")
        # Hold the holder's own server session in another client's
        # transaction: its next statements must run on another one.
        pin = await _pin_server_session_of(lk._engine.session().token)
        if pin is None:
            pytest.skip("PgBouncer gave the pin another server session")
        # Another client: never a holder while the first one holds.
        with pytest.raises((advlock.ServerSessionError, advlock.LockTimeout)):
            await call(advlock.lock(b, "pgb-tx", timeout=0.5).acquire)
        # Whether it still holds cannot be told from another server session.
        with pytest.raises(advlock.ServerSessionError):
            await call(lk.verify)
        # The holder's release reaches a server session it never claimed:
        # nothing is unlocked there, and it says so.
        with pytest.raises(advlock.ServerSessionError) as info:
            await call(lk.release)
        assert info.value.report.failure == advlock.Failure.ESESSION
        assert str(info.value) == ("pg_advisory_unlock for 'pgb-tx' failed: " + ESESSION_WORDS
                                   + " (the lock may still be held on another server session)")
        assert len(holds(pg_conn, r.key)) == 1  # still held, on the pinned session
        await pin.execute("ROLLBACK")
        await pin.close()
        await close(a)
        await close(b)
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_transaction_mode_a_shared_server_session_is_refused(flavour, pg_conn):
    async def main():
        a, b, lk, r = await _two_clients_one_holding(flavour, "pgb-shared")
        # PgBouncer hands the next client the server session used last: the
        # holder's, claimed and holding a lock. The other client's check
        # refuses it before any lock statement goes out.
        other = advlock.lock(b, "pgb-shared", timeout=2)
        rec = Recording(other)
        with pytest.raises(advlock.ServerSessionError) as info:
            await call(other.acquire)
        assert rec.sql == [S.CAPACITY, S.SESSION]
        assert str(info.value) == ("the server session check for 'pgb-shared' failed: "
                                   + CLAIMED_WORDS)
        # And refused at once from then on, with nothing sent.
        with pytest.raises(advlock.ServerSessionError):
            await call(other.acquire)
        assert rec.sql == [S.CAPACITY, S.SESSION]
        assert len(holds(pg_conn, r.key)) == 1
        await close(a)
        await close(b)
    asyncio.run(main())


def test_transaction_mode_never_two_holders_under_load(pg_conn):
    """Six clients (two of each flavour) take one name in turns through
    transaction-mode PgBouncer with 3 server sessions: every hold recorded
    is alone, and every failure is the documented one."""
    rounds, held, failures = 8, [], []

    async def client(flavour, n):
        conn = await connect(flavour, TX)
        lk = advlock.lock(conn, "pgb-load", timeout=0.5)
        for _ in range(rounds):
            try:
                await call(lk.acquire)
            except (advlock.ServerSessionError, advlock.LockTimeout) as e:
                failures.append(e)
                continue
            start = time.monotonic()
            await asyncio.sleep(0.005)
            held.append((start, time.monotonic(), n))
            try:
                await call(lk.release)
            except advlock.ServerSessionError as e:
                failures.append(e)
        await close(conn)

    async def main():
        await asyncio.gather(*(client(f, i) for i, f in enumerate(FLAVOURS[1:] * 2)),
                             asyncio.to_thread(asyncio.run, client("psycopg", 6)),
                             asyncio.to_thread(asyncio.run, client("psycopg", 7)))
    asyncio.run(main())
    held.sort()
    overlaps = [(x, y) for x, y in zip(held, held[1:]) if y[0] < x[1]]
    assert overlaps == []
    sessions = [e for e in failures if isinstance(e, advlock.ServerSessionError)]
    assert sessions, "no hop detected: %d holds, %d timeouts" % (len(held), len(failures))
    for e in sessions:
        assert str(e).endswith(SESSION_CAUSES) or SESSION_CAUSES + " (" in str(e)
    print("transaction mode: %d holds, %d ServerSessionError, %d LockTimeout, 0 overlaps"
          % (len(held), len(sessions), len(failures) - len(sessions)))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_transaction_scope_works_in_transaction_mode(flavour, pg_conn):
    """A transaction-scoped lock inside the caller's transaction needs no
    claim: PgBouncer keeps a transaction on one server session. Its try is
    guarded (it runs only where no other client holds the key)."""
    async def main():
        a = await connect(flavour, TX)
        if flavour == "asyncpg":
            tx = a.transaction()
            await tx.start()
        else:
            await call(a.execute, "BEGIN")
        lk = advlock.lock(a, "pgb-xact", timeout=2, scope=advlock.TRANSACTION)
        r = await call(lk.acquire)
        assert r.outcome == advlock.Outcome.ACQUIRED
        assert r.sql == S.TRY_XACT_LOCK_GUARDED  # guarded behind the proxy
        assert len(holds(pg_conn, r.key)) == 1
        if flavour == "asyncpg":
            await tx.commit()
        else:
            await call(a.execute, "COMMIT")
        assert holds(pg_conn, r.key) == []
        assert announced_pid(a) != 0
        await close(a)
    asyncio.run(main())


def set_pool(size):
    """The transaction pool's size, and fresh server sessions (PgBouncer's
    admin console speaks the simple protocol only: psql)."""
    import subprocess
    subprocess.run(["psql", "-X", "-q", "-d", os.environ["ADVLOCK_TEST_PGBOUNCER_TX_ADMIN"],
                    "-c", "SET default_pool_size = %d" % size, "-c", "RECONNECT postgres"],
                   check=True, capture_output=True)


def session_hold(held, name, seconds):
    """A session-scoped lock over asyncpg through the transaction pool, held
    for seconds; its interval recorded (None: refused, ServerSessionError)."""
    async def run():
        conn = await connect("asyncpg", TX)
        lk = advlock.lock(conn, name, timeout=8)
        try:
            await lk.acquire()
        except advlock.ServerSessionError:
            held.append(None)
            await close(conn)
            return
        start = time.time()
        await asyncio.sleep(seconds)
        held.append((start, time.time(), "session"))
        await lk.release()
        await close(conn)
    return run()


def transaction_hold(held, name, seconds):
    """A transaction-scoped lock over psycopg through the transaction pool,
    held for seconds inside the transaction; tried in short transactions
    (rolled back when busy) so that no server session stays pinned between
    tries, for up to 8 s."""
    def run():
        import psycopg
        conn = psycopg.connect(TX, autocommit=True)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            conn.execute("BEGIN")
            try:
                advlock.lock(conn, name, timeout=0.2, scope=advlock.TRANSACTION).acquire()
            except advlock.LockTimeout:
                conn.execute("ROLLBACK")
                time.sleep(0.1)
                continue
            start = time.time()
            time.sleep(seconds)
            held.append((start, time.time(), "transaction"))
            conn.execute("COMMIT")
            break
        conn.close()
    return asyncio.to_thread(run)


@pytest.mark.parametrize("pool", [1, 3])
@pytest.mark.parametrize("first", ["session", "transaction"])
def test_transaction_mode_session_and_transaction_scopes_exclude(first, pool, pg_conn):
    """A session lock over asyncpg and a transaction-scoped lock over psycopg
    on one name through the transaction pool, either one first: the
    transaction must not land on the server session holding the key at
    session level and be granted it there. Never two holders; the
    transaction-scoped side always gets its turn; nothing left."""
    set_pool(pool)
    try:
        mixed_scopes(first, pool, pg_conn)
    finally:
        set_pool(int(os.environ.get("ADVLOCK_TEST_PGBOUNCER_TX_POOL", "3")))


def mixed_scopes(first, pool, pg_conn):
    name, held = "pgb-mixed-%s-%d" % (first, pool), []

    async def main():
        if first == "session":
            a = asyncio.ensure_future(session_hold(held, name, 1.5))
            await asyncio.sleep(0.3)
            await asyncio.gather(a, transaction_hold(held, name, 0.1))
        else:
            a = asyncio.ensure_future(transaction_hold(held, name, 1.5))
            await asyncio.sleep(0.3)
            await asyncio.gather(a, session_hold(held, name, 0.1))
    asyncio.run(main())
    holds_ = sorted(h for h in held if h is not None)
    assert [x for x, y in zip(holds_, holds_[1:]) if y[0] < x[1]] == []
    assert "transaction" in [h[2] for h in holds_]
    # A session-scoped contender may fail loudly (its statements hopping
    # between server sessions of a pool of several), never a holder or a
    # session-scoped client alone on a pool of one.
    if first == "session" or pool == 1:
        assert None not in held
    key = advlock.derive_key(name)
    for _ in range(20):
        if holds(pg_conn, key) == []:
            break
        time.sleep(0.1)
    assert holds(pg_conn, key) == []


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_leases_behind_pgbouncer_beat_on_the_claimed_session_only(flavour, pg_conn):
    # Behind a proxy no setup is sent (the server's socket is the proxy's);
    # a session lock's heartbeats are guarded: they reach the claimed server
    # session. A transaction-scoped lock claims nothing: no heartbeats.
    async def main():
        conn = await connect(flavour, SESSION)
        lk = advlock.lock(conn, "pgb-lease", timeout=5, lease=8)  # H = 0.75 s
        rec = Recording(lk)
        await call(lk.acquire)
        await asyncio.sleep(2)
        lk.check()
        await call(lk.release)
        assert rec.sql[:3] == [S.CAPACITY, S.SESSION, S.TRY_LOCK_GUARDED]
        assert rec.sql[-1] == S.UNLOCK_GUARDED
        assert rec.sql[3:-1].count(S.HEARTBEAT_GUARDED) >= 2
        assert set(rec.sql[3:-1]) == {S.HEARTBEAT_GUARDED}
        await close(conn)

        conn = await connect(flavour, TX)
        lk = advlock.lock(conn, "pgb-lease-tx", timeout=5, lease=8, scope=advlock.TRANSACTION)
        rec = Recording(lk)
        if flavour == "asyncpg":
            async with conn.transaction():
                await lk.acquire()
                await asyncio.sleep(1.5)
        else:
            async def body():
                await call(lk.acquire)
                await asyncio.sleep(1.5)
            if flavour == "psycopg":
                with conn.transaction():
                    await body()
            else:
                async with conn.transaction():
                    await body()
        assert S.HEARTBEAT_GUARDED not in rec.sql and S.HEARTBEAT not in rec.sql
        await close(conn)
    asyncio.run(main())


def test_lease_expiry_behind_pgbouncer_promises_no_free_time(pg_conn):
    # Behind a proxy the lease set nothing on the server: when it runs out
    # (the holder's backend frozen, no heartbeat answers), LockLost names the
    # proxy's bound, not the lease's.
    import psycopg
    conn = psycopg.connect(SESSION, autocommit=True)
    lk = advlock.lock(conn, "pgb-lease-lost", timeout=5, lease=8)  # D = 3 s
    lk.acquire()
    (pid, _), = holds(pg_conn, advlock.derive_key("pgb-lease-lost"))
    os.kill(pid, signal.SIGSTOP)
    try:
        assert lk.lost.wait(6), "the lease never ran out"
        with pytest.raises(advlock.LockLost) as info:
            lk.check()
    finally:
        os.kill(pid, signal.SIGCONT)
    said = str(info.value)
    assert ("behind a proxy the server frees the lock when the proxy drops this connection:"
            " its own tcp settings bound that") in said
    assert "within 8 s" not in said


@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_a_lock_set_in_session_mode_uses_one_server_session(flavour, pg_conn):
    async def main():
        conn = await connect(flavour, SESSION)
        locks = advlock.LockSet(conn)
        go, holding = asyncio.Event(), []

        async def hold(i):
            async with locks.lock("pgb-set-%d" % (i % 20), timeout=10) as lk:
                holding.append(lk)
                await go.wait()
                holding.remove(lk)

        tasks = [asyncio.create_task(hold(i)) for i in range(40)]
        deadline = asyncio.get_running_loop().time() + 10
        while len(holding) < 20 and asyncio.get_running_loop().time() < deadline:
            if any(t.done() for t in tasks):
                break  # a task that ended early has failed: its error is raised below
            await asyncio.sleep(0.01)
        for t in tasks:
            if t.done():
                t.result()
        await asyncio.sleep(0.3)  # the other 20 keep trying: the set answers them busy
        assert len(holding) == 20
        rows = [holds(pg_conn, lk.key) for lk in holding]
        assert all(len(r) == 1 for r in rows)
        assert len({r[0][0] for r in rows}) == 1  # one server session holds them all
        assert locks._engine.proxied is True
        go.set()
        await asyncio.gather(*tasks)
        assert locks.in_use == 0
        assert all(holds(pg_conn, advlock.derive_key("pgb-set-%d" % i)) == [] for i in range(20))
        await close(conn)
    asyncio.run(main())
