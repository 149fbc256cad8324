"""A session the server ends while a lock is held (docs/python.md "A session
the server ends"): every driver hears it at once, on a Unix socket (no lease,
no heartbeat) as over TCP, whatever ended it: pg_terminate_backend or a
server restart. The asyncio body is cancelled and leaving it raises
LockLost; a blocking body's lost is set and its next check() raises
LockLost; never LockFailed. And the ending a holder turns off: a DBA's
idle_session_timeout ends no holder's session, however long it idles.

Each case runs SESSION_END_TRIALS trials (1 in make python-test) and
asserts each body was told within SESSION_END_BOUND seconds of the end (1 s
here, generous for a shared machine; make python-session-end-bounds runs
20 trials of each and asserts the 0.25 s the docs promise), and prints
p50/max with -s.
"""

import asyncio
import os
import signal
import statistics
import subprocess
import threading
import time

import psycopg
import pytest

import advlock
from clients import announced_pid, close, connect
from conftest import holds, need_server

TRIALS = int(os.environ.get("SESSION_END_TRIALS", "1"))
BOUND = float(os.environ.get("SESSION_END_BOUND", "1.0"))
TCP_ADDR = os.environ.get("ADVLOCK_PG_LISTEN", "").split("/")[0]
DRIVERS = ["asyncpg", "psycopg-async", "psycopg", "lockset-asyncpg", "lockset-psycopg-async"]
TRANSPORTS = ["unix", "tcp"]
IDLE_ROLE = "advlock_idle_dba"  # a role the DBA gave idle_session_timeout
IDLE_S = 1     # its timeout
HOLD_IDLE_S = 3.0  # how long a holder of that role idles, with nothing sent
SET_LOCKS = 3  # the locks a lock set holds at once in a trial


def conninfo(transport, user="postgres"):
    host = os.environ["PGHOST"] if transport == "unix" else TCP_ADDR
    return "host=%s port=%s user=%s dbname=postgres" % (host, os.environ["PGPORT"], user)


def admin():
    return psycopg.connect(conninfo("unix"), autocommit=True)


def need(transport):
    if transport == "tcp" and not TCP_ADDR:
        pytest.skip("no server on TCP (make python-test provides one)")


# ---- how the server ends the session: each returns the instant it did --------


class Terminate:
    def __init__(self, pid):
        self.pid = pid

    def end(self):
        with admin() as a:
            at = time.monotonic()
            a.execute("SELECT pg_terminate_backend(%s)", (self.pid,))
        return at

    def finish(self):
        pass


class Restart:
    """A fast restart, as pg_ctl restart makes it: SIGINT to the postmaster
    (its backends send FATAL and exit), then pg_ctl start."""

    def __init__(self, _pid):
        data = os.environ["ADVLOCK_PG_DATA"]
        with open(os.path.join(data, "postmaster.pid")) as f:
            self.postmaster = int(f.readline())
        self.data = data

    def end(self):
        at = time.monotonic()
        os.kill(self.postmaster, signal.SIGINT)
        return at

    def finish(self):
        for _ in range(3000):
            try:
                os.kill(self.postmaster, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
        owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(owner + [os.path.join(os.environ["ADVLOCK_PG_BIN"], "pg_ctl"), "-D",
                                self.data, "-w", "-t", "60", "start"],
                       cwd=os.path.dirname(self.data), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def idle_role():
    """A role whose sessions the server ends after IDLE_S idle: the DBA's
    ALTER ROLE, as a managed service may set it."""
    if not os.environ.get("PGHOST"):
        pytest.skip("no PostgreSQL")
    with admin() as a:
        a.execute("DROP ROLE IF EXISTS %s" % IDLE_ROLE)
        a.execute("CREATE ROLE %s LOGIN" % IDLE_ROLE)
        a.execute("ALTER ROLE %s SET idle_session_timeout = '%ds'" % (IDLE_ROLE, IDLE_S))
    yield IDLE_ROLE
    with admin() as a:
        a.execute("DROP ROLE IF EXISTS %s" % IDLE_ROLE)


def ender(ending, conn):
    return (Terminate if ending == "terminate" else Restart)(announced_pid(conn))


# ---- one trial: a lock held, the session ended, how long until the body knew --


def _locks(driver, conn, name):
    """(the lock set or None, the locks) a trial of driver holds on conn."""
    if driver.startswith("lockset-"):
        locks = advlock.LockSet(conn)
        return locks, [locks.lock("%s-%d" % (name, i), timeout=5) for i in range(SET_LOCKS)]
    return None, [advlock.lock(conn, name, timeout=5)]


async def _asyncio_trial(driver, transport, ending, n):
    flavour = driver.replace("lockset-", "")
    conn = await connect(flavour, conninfo(transport))
    locks, lks = _locks(driver, conn, "end-%s-%s-%s-%d" % (driver, transport, ending, n))
    held, stopped = asyncio.Event(), {}

    async def body(lk):
        async with lk:
            if locks is None:  # the body's own statements on the connection
                for _ in range(3):
                    await conn.execute("SELECT 1")
            if len(stopped) == 0 and all(k.held for k in lks):
                held.set()
            try:
                await asyncio.sleep(30)
            finally:
                stopped[lk] = time.monotonic()

    tasks = [asyncio.create_task(body(lk)) for lk in lks]
    await asyncio.wait_for(held.wait(), 10)
    end = ender(ending, conn)
    try:
        at = end.end()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await asyncio.to_thread(end.finish)
    for lk, result in zip(lks, done):
        assert type(result) is advlock.LockLost, result  # never LockFailed
        assert isinstance(result.__cause__, asyncio.CancelledError)
        assert result.reason is advlock.LeaseExpiry.CONNECTION and result.ended
        assert lk.state == advlock.LockState.NOT_HELD and lk.lost.is_set()
    if locks is not None:
        assert locks.lost and locks.in_use == 0
    await close(conn)
    return max(stopped.values()) - at


def _blocking_trial(transport, ending, n):
    conn = psycopg.connect(conninfo(transport), autocommit=True)
    lk = advlock.lock(conn, "end-psycopg-%s-%s-%d" % (transport, ending, n), timeout=5)
    end = ender(ending, conn)
    try:
        with pytest.raises(advlock.LockLost) as caught:
            with lk:
                conn.execute("SELECT 1")
                at = end.end()
                assert lk.lost.wait(10), "the body was not told"
                told = time.monotonic()
                lk.check()
    finally:
        end.finish()
    assert type(caught.value) is advlock.LockLost and caught.value.ended
    assert lk.state == advlock.LockState.NOT_HELD
    conn.close()
    return told - at


def run_trials(driver, transport, ending):
    """TRIALS trials; asserts each within BOUND; prints p50 and max."""
    took = []
    for n in range(TRIALS):
        if driver == "psycopg":
            took.append(_blocking_trial(transport, ending, n))
        else:
            took.append(asyncio.run(_asyncio_trial(driver, transport, ending, n)))
    print("\nsession end %-9s %-22s %-4s: %d trials, p50 %.4f s, max %.4f s"
          % (ending, driver, transport, len(took), statistics.median(took), max(took)))
    assert max(took) < BOUND, took


@need_server
@pytest.mark.parametrize("ending", ["terminate", "restart"])
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_session_the_server_ends_is_heard_at_once(driver, transport, ending):
    need(transport)
    run_trials(driver, transport, ending)


# ---- a DBA's idle_session_timeout: turned off for the holder ------------------


async def _asyncio_idle_holder(driver, transport, pg_conn):
    """Holds the driver's lock(s) HOLD_IDLE_S with nothing sent; returns
    whether the server still held every key, then releases."""
    flavour = driver.replace("lockset-", "")
    conn = await connect(flavour, conninfo(transport, IDLE_ROLE))
    _set, lks = _locks(driver, conn, "idle-%s-%s" % (driver, transport))
    for lk in lks:
        await lk.acquire()
    await asyncio.sleep(HOLD_IDLE_S)
    pid = announced_pid(conn)
    kept = all(holds(pg_conn, lk.key) == [(pid, "ExclusiveLock")] for lk in lks)
    assert not any(lk.lost.is_set() for lk in lks)
    for lk in lks:
        assert (await lk.release()).outcome == advlock.Outcome.RELEASED
    await close(conn)
    return kept


def _blocking_idle_holder(transport, pg_conn):
    conn = psycopg.connect(conninfo(transport, IDLE_ROLE), autocommit=True)
    lk = advlock.lock(conn, "idle-psycopg-" + transport, timeout=5)
    with lk:
        time.sleep(HOLD_IDLE_S)
        kept = holds(pg_conn, lk.key) == [(conn.info.backend_pid, "ExclusiveLock")]
        lk.check()
    assert lk.release_report.outcome == advlock.Outcome.RELEASED
    conn.close()
    return kept


@need_server
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_dbas_idle_session_timeout_ends_no_holder(driver, transport, idle_role, pg_conn):
    # The role's sessions end after 1 s idle; the session check turns the
    # timeout off for the holder's session (docs/design.md "The server's
    # own timeouts"), so a holder idle 3 s, nothing sent (no heartbeat
    # either: the default lease's first comes after 6.25 s), keeps its lock.
    need(transport)
    if driver == "psycopg":
        kept = _blocking_idle_holder(transport, pg_conn)
    else:
        kept = asyncio.run(_asyncio_idle_holder(driver, transport, pg_conn))
    assert kept
# ---- psycopg on asyncio: the body's own statements on the lock's connection ----


@need_server
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_psycopg_async_statements_in_the_body_do_not_blind_the_watch(transport, pg_conn):
    # psycopg adds its own reader on the socket for every statement and
    # removes it after: the watch must hear the end whether the body is
    # running a statement at that moment or sits idle after many.
    need(transport)

    async def main():
        conn = await connect("psycopg-async", conninfo(transport))
        lk = advlock.lock(conn, "end-statements-" + transport, timeout=5)
        pid = announced_pid(conn)
        ran, at, stopped = [0], [], []

        def terminate():
            at.append(time.monotonic())
            pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

        # Busy: statements back to back when the server ends the session.
        with pytest.raises(advlock.LockLost) as caught:
            async with lk:
                threading.Timer(0.3, terminate).start()
                try:
                    while True:
                        await conn.execute("SELECT 1")
                        ran[0] += 1
                finally:
                    stopped.append(time.monotonic())
        assert ran[0] > 10 and caught.value.ended
        assert lk.state == advlock.LockState.NOT_HELD
        assert stopped[0] - at[0] < BOUND
        await close(conn)

        # Idle after 200 statements, each of which took psycopg's reader
        # on and off the socket.
        conn = await connect("psycopg-async", conninfo(transport))
        lk = advlock.lock(conn, "end-statements-" + transport, timeout=5)
        pid = announced_pid(conn)
        at.clear(), stopped.clear()
        with pytest.raises(advlock.LockLost) as caught:
            async with lk:
                for _ in range(200):
                    await conn.execute("SELECT 1")
                threading.Timer(0.1, terminate).start()
                try:
                    await asyncio.sleep(30)
                finally:
                    stopped.append(time.monotonic())
        assert isinstance(caught.value.__cause__, asyncio.CancelledError)
        assert stopped[0] - at[0] < BOUND
        assert holds(pg_conn, lk.key) == []
        await close(conn)
    asyncio.run(main())


@need_server
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async", "psycopg"])
def test_a_released_lock_hears_nothing_of_the_end(flavour, pg_conn):
    # The connection stays watched after the release, but a session ended
    # then tells the lock nothing; the watch is spent (the socket leaves
    # the epoll set: a closed socket cannot wake it again and again).
    from advlock import _watch

    async def main():
        conn = await connect(flavour)
        lk = advlock.lock(conn, "watch-released", timeout=5)
        if flavour == "psycopg":
            lk.acquire()
            lk.release()
            hubs = [_watch._thread_hub]
        else:
            await lk.acquire()
            await lk.release()
            hubs = [_watch._loop_hubs.get(asyncio.get_running_loop())]
        fd = None if flavour == "asyncpg" else conn.pgconn.socket
        pg_conn.execute("SELECT pg_terminate_backend(%s, 5000)", (announced_pid(conn),))
        await asyncio.sleep(0.1)
        assert not lk.lost.is_set() and lk.state == advlock.LockState.NOT_HELD
        assert lk._engine.unwatch is None
        assert all(fd not in hub.callbacks for hub in hubs if hub)
        await close(conn)
    asyncio.run(main())


@need_server
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async", "psycopg"])
def test_a_connection_is_watched_once_for_many_holds(flavour, monkeypatch):
    # The watch is added at the first hold and kept: a lock taken and
    # released again and again costs no watch (epoll_ctl) per cycle.
    async def main():
        conn = await connect(flavour)
        lk = advlock.lock(conn, "watch-once", timeout=5)
        client = lk._engine.client
        added = []
        watch = type(client).watch

        def counted(self, on_end):
            added.append(on_end)
            return watch(self, on_end)
        monkeypatch.setattr(type(client), "watch", counted)
        for _ in range(3):
            if flavour == "psycopg":
                lk.acquire()
                lk.release()
            else:
                await lk.acquire()
                await lk.release()
        assert len(added) == 1
        await close(conn)
    asyncio.run(main())


@need_server
def test_blocking_locks_share_one_watcher_thread(pg_conn):
    # One thread for every blocking connection of the process, not one per
    # lock or per connection; every lock on it hears its own session's end.
    conns = [psycopg.connect(autocommit=True) for _ in range(5)]
    lks = [advlock.lock(c, "shared-watcher-%d" % i, timeout=5) for i, c in enumerate(conns)]
    for lk in lks:
        lk.acquire()
    watchers = [t for t in threading.enumerate() if t.name == "advlock-session-watch"]
    assert len(watchers) == 1
    pg_conn.execute("SELECT pg_terminate_backend(%s)", (conns[2].info.backend_pid,))
    assert lks[2].lost.wait(BOUND)
    assert not any(lk.lost.is_set() for i, lk in enumerate(lks) if i != 2)
    with pytest.raises(advlock.LockLost):
        lks[2].release()
    for i, lk in enumerate(lks):
        if i != 2:
            assert lk.release().outcome == advlock.Outcome.RELEASED
    for c in conns:
        c.close()
