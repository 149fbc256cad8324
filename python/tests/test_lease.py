"""Leases (docs/python.md "Leases"): the setup, heartbeats while the body
runs, and LockLost when the server ends the session under the holder. The
TCP tests reach the harness's server on the loopback address make
python-test has it listen on (ADVLOCK_PG_LISTEN): a Unix socket needs no
lease, and the setup says so."""

import asyncio
import contextlib
import os
import threading
import time

import asyncpg
import pytest

import advlock
from advlock._lock import Lock
from clients import FLAVOURS, Recording, announced_pid, call, close, connect
from conftest import holds, need_server

S = advlock.Sql
TCP_ADDR = os.environ.get("ADVLOCK_PG_LISTEN", "").split("/")[0]
need_tcp = pytest.mark.skipif(not (TCP_ADDR and os.environ.get("PGPORT")),
                              reason="no server on TCP (make python-test provides one)")
# lease=8 with the default lease_stop (1 s): tcp_user_timeout U = 5 s, the
# deadline D = 3 s after a heartbeat's send, heartbeats every H = 0.75 s.
LEASE, D, H = 8, 3.0, 0.75


def tcp():
    return "host=%s port=%s user=postgres dbname=postgres" % (TCP_ADDR, os.environ["PGPORT"])


@pytest.mark.parametrize("lease", [6.9, 5, -1, "8", 9 * 3600 + 1])
def test_a_lease_the_core_refuses_is_a_call_error(lease):
    with pytest.raises(advlock.CallError):
        Lock(None, None, "x", lease=lease)


def test_a_longer_stop_time_needs_a_longer_lease():
    Lock(None, None, "x", lease=16, lease_stop=10)
    with pytest.raises(advlock.CallError, match="lease_stop \\+ 6 s"):
        Lock(None, None, "x", lease=15, lease_stop=10)


def test_no_lease_is_none_or_zero():
    assert Lock(None, None, "x", lease=None)._lease == (0, 0)
    assert Lock(None, None, "x", lease=0)._lease == (0, 0)
    assert Lock(None, None, "x")._lease[0] == 30000  # ADVLOCK_LEASE_DEFAULT_MS


async def _body(flavour, lk, seconds, check=True):
    """The body: waits `seconds`, checking the lease (blocking) on the way."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if flavour == "psycopg":
            if check:
                lk.check()
            time.sleep(0.01)
        else:
            await asyncio.sleep(0.01)


async def _hold_for(flavour, lk, seconds, during=None):
    """Holds lk for `seconds` (calling during() once inside); returns the
    LockLost that ended it, or None, and when the body stopped."""
    stopped = None
    try:
        async with contextlib.AsyncExitStack() as held:
            if flavour == "psycopg":
                held.enter_context(lk)
            else:
                await held.enter_async_context(lk)
            if during:
                during()
            try:
                await _body(flavour, lk, seconds)
            finally:
                stopped = time.monotonic()
    except advlock.LockLost as exc:
        return exc, stopped
    return None, stopped


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_over_a_unix_socket_heartbeats_run_as_in_every_driver(flavour, pg_conn):
    # The lease is the connection engine's: over a Unix socket too its
    # heartbeats run, as the C drivers' do.
    async def main():
        conn = await connect(flavour)
        lk = advlock.lock(conn, "unix", timeout=1, lease=LEASE)
        rec = Recording(lk)
        lost, _ = await _hold_for(flavour, lk, 2 * H)
        assert lost is None
        assert rec.sql[:4] == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK]
        assert S.HEARTBEAT in rec.sql and rec.sql[-1] == S.UNLOCK
        assert holds(pg_conn, lk.key) == []
        await close(conn)
    asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_over_tcp_the_setup_applies_the_plan_and_heartbeats_run(flavour, pg_conn):
    async def main():
        conn = await connect(flavour, tcp())
        lk = advlock.lock(conn, "tcp", timeout=1, lease=LEASE)
        rec = Recording(lk)
        lost, _ = await _hold_for(flavour, lk, 4 * H + 0.3)
        assert lost is None
        assert rec.sql[:4] == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK]
        assert rec.sql[-1] == S.UNLOCK
        assert rec.sql[3:-1].count(S.HEARTBEAT) >= 3
        assert holds(pg_conn, lk.key) == []
        pid = announced_pid(conn)
        row = pg_conn.execute("SELECT client_addr IS NOT NULL FROM pg_stat_activity"
                              " WHERE pid = %s", (pid,)).fetchone()
        assert row == (True,)
        settings = await call(_settings, flavour, conn)
        assert settings == ["5000", "3", "1", "2", "1s"]
        await close(conn)
    asyncio.run(main())


SHOW = ("tcp_user_timeout", "tcp_keepalives_idle", "tcp_keepalives_interval",
        "tcp_keepalives_count", "client_connection_check_interval")


async def _settings(flavour, conn):
    if flavour == "asyncpg":
        return [await conn.fetchval("SHOW " + name) for name in SHOW]
    out = []
    for name in SHOW:
        cur = await call(conn.execute, "SHOW " + name)
        out.append((await call(cur.fetchone))[0])
    return out


def _ended_by_server(flavour, pg_conn, lease, before, during_fn):
    """Holds a lock over TCP while the server ends its session (during_fn,
    given the pid); returns the LockLost and how long after the end the
    body stopped."""
    async def main():
        conn = await connect(flavour, tcp())
        if before:
            await call(conn.execute, before)
        lk = advlock.lock(conn, "ended-" + flavour, timeout=1, lease=lease)
        pid = announced_pid(conn)
        at = []
        lost, stopped = await _hold_for(flavour, lk, 20, lambda: at.append(during_fn(pid)))
        assert isinstance(lost, advlock.LockLost), "the body ran on without being told"
        # Heard by the session watch (test_session_end.py): gone with its session.
        assert lk.state == advlock.LockState.NOT_HELD and not lk.held and lost.ended
        assert lk.lost.is_set()
        return lost, stopped - at[0]
    return asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_terminated_session_is_lock_lost_within_a_heartbeat(flavour, pg_conn):
    def terminate(pid):
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return time.monotonic()
    lost, after = _ended_by_server(flavour, pg_conn, LEASE, None, terminate)
    assert lost.reason is advlock.LeaseExpiry.CONNECTION
    assert "lost: the connection holding it closed" in str(lost)
    assert after < H + 1.0, after  # the next heartbeat finds it (+ a loaded machine)
    print("%s: stopped %.3f s after pg_terminate_backend" % (flavour, after))


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_idle_session_timeout_ends_no_holder(flavour, pg_conn):
    # The session check turns the timeout off (docs/design.md, "The
    # server's own timeouts"): with lease=16 (heartbeats every 2.75 s,
    # longer than the 1 s idle timeout), a body holding 4 s keeps the lock.
    async def main():
        conn = await connect(flavour, tcp())
        await call(conn.execute, "SET idle_session_timeout = '1s'")
        lk = advlock.lock(conn, "idle-" + flavour, timeout=1, lease=16)
        lost, _ = await _hold_for(flavour, lk, 4.0)
        assert lost is None, lost
        assert holds(pg_conn, lk.key) == []
        await close(conn)
    asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_a_cancel_from_elsewhere_stays_a_cancelled_error(flavour, pg_conn):
    async def main():
        conn = await connect(flavour, tcp())
        lk = advlock.lock(conn, "cancelled", timeout=1, lease=LEASE)

        async def holder():
            async with lk:
                await asyncio.sleep(30)
        task = asyncio.create_task(holder())
        await asyncio.sleep(2 * H)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert holds(pg_conn, lk.key) == []
        assert lk._lost is None
        await close(conn)
    asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_the_lease_cancels_the_body_and_leaves_the_task_uncancelled(flavour, pg_conn):
    # The LockLost leaves `async with`, from the body's CancelledError,
    # and the task can go on awaiting: no cancellation is left pending.
    async def plain():
        conn = await connect(flavour, tcp())
        lk = advlock.lock(conn, "expired", timeout=1, lease=LEASE)
        with pytest.raises(advlock.LockLost) as info:
            async with lk:
                pg_conn.execute("SELECT pg_terminate_backend(%s)", (announced_pid(conn),))
                await asyncio.sleep(30)
        assert isinstance(info.value.__cause__, asyncio.CancelledError)
        assert asyncio.current_task().cancelling() == 0
        await asyncio.sleep(0.01)  # not cancelled
        await close(conn)
    asyncio.run(plain())


@need_tcp
def test_blocking_check_and_the_lost_event(pg_conn):
    import psycopg
    conn = psycopg.connect(tcp(), autocommit=True)
    lk = advlock.lock(conn, "event", timeout=1, lease=LEASE)
    lk.acquire()
    lk.check()
    told = threading.Event()
    threading.Thread(target=lambda: (lk.lost.wait(10), told.set()), daemon=True).start()
    pg_conn.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    assert told.wait(H + 1)
    with pytest.raises(advlock.LockLost):
        lk.check()
    with pytest.raises(advlock.LockLost):
        lk.release()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_server_side_wait_longer_than_the_deadline_renews_before_the_body(flavour, pg_conn):
    # The grant's statement went out D + 1 s before its answer: the body
    # starts only after one more heartbeat answered.
    async def main():
        conn = await connect(flavour, tcp())
        lk = advlock.lock(conn, "waited-" + flavour, timeout=10, lease=LEASE,
                          wait=advlock.WAIT_SERVER)
        pg_conn.execute("SELECT pg_advisory_lock(%s)", (lk.key,))
        threading.Timer(D + 1, pg_conn.execute, ("SELECT pg_advisory_unlock(%s)", (lk.key,))
                        ).start()
        rec = Recording(lk)
        started = time.monotonic()
        lost, _ = await _hold_for(flavour, lk, H)
        assert lost is None
        assert time.monotonic() - started > D + 1
        assert rec.sql[:6] == [S.CAPACITY, S.SESSION, S.LEASE_SETUP, S.TRY_LOCK, S.LOCK, S.HEARTBEAT]
        await close(conn)
    asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_confirming_heartbeat_that_fails_is_lock_lost_before_the_body(flavour, pg_conn):
    # The grant came after a wait longer than H but shorter than D, and the
    # server session ended before its confirming heartbeat: that heartbeat
    # does not answer TRUE, so the lock cannot be proven held and the body
    # never starts (the stale anchor alone would still be within D).
    class EndingSession(Recording):
        def _before(self, sql):
            if sql == S.HEARTBEAT and S.HEARTBEAT not in self.sql:
                (pid, _), = holds(pg_conn, lk.key)
                pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
                for _ in range(200):
                    if not pg_conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                           (pid,)).fetchall():
                        break
                    time.sleep(0.01)

        def start(self, sql, args):
            self._before(sql)
            return super().start(sql, args)

        def run(self, sql, args):
            self._before(sql)
            return super().run(sql, args)

    async def main():
        conn = await connect(flavour, tcp())
        nonlocal lk
        lk = advlock.lock(conn, "confirm-" + flavour, timeout=10, lease=LEASE,
                          wait=advlock.WAIT_SERVER)
        pg_conn.execute("SELECT pg_advisory_lock(%s)", (lk.key,))
        threading.Timer((H + D) / 2, pg_conn.execute,
                        ("SELECT pg_advisory_unlock(%s)", (lk.key,))).start()
        rec = EndingSession(lk)
        body = []
        lost, _ = await _hold_for(flavour, lk, H, during=lambda: body.append(1))
        assert isinstance(lost, advlock.LockLost)
        assert body == []
        assert "the heartbeat after a long wait for the grant failed" in str(lost)
        assert S.HEARTBEAT in rec.sql
        await close(conn)
    lk = None
    asyncio.run(main())


@need_tcp
@pytest.mark.parametrize("flavour", ["asyncpg", "psycopg-async"])
def test_an_outside_cancel_with_the_lease_expired_stays_a_cancelled_error(flavour, pg_conn,
                                                                          monkeypatch):
    # As asyncio.timeout(): the lease's own cancel becomes LockLost, but a
    # cancel from elsewhere in the same moment is not swallowed.
    # The lock is lost here by its session watch, which stops the body as
    # the lease's expiry does (_cancel_body).
    from advlock._lock import AsyncLock
    cancel_body = AsyncLock._cancel_body

    def cancel_body_and_from_elsewhere(self):
        cancel_body(self)
        task.cancel()
    monkeypatch.setattr(AsyncLock, "_cancel_body", cancel_body_and_from_elsewhere)

    async def main():
        nonlocal task
        conn = await connect(flavour, tcp())
        lk = advlock.lock(conn, "both", timeout=1, lease=LEASE)

        async def holder():
            async with lk:
                pg_conn.execute("SELECT pg_terminate_backend(%s)", (announced_pid(conn),))
                await asyncio.sleep(30)
        task = asyncio.create_task(holder())
        with pytest.raises(asyncio.CancelledError):
            await task
        assert lk.state == advlock.LockState.NOT_HELD  # gone with its session
    task = None
    asyncio.run(main())


@need_tcp
def test_asyncpg_heartbeats_never_make_the_bodys_statements_fail(pg_conn):
    # asyncpg refuses a second operation on a connection: heartbeats go out
    # only while the body's task waits on something else, or is held back
    # for them between its statements. A body that leaves the connection no
    # gap gets them through that way, or, when the loop runs it ahead of the
    # hold, starves them and the lease expires (the safe side): which one
    # depends on the machine's timing, and either way none of its
    # statements failed.
    async def body(conn, seconds, pause, tally):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                await conn.fetchval("SELECT 1")
                tally[0] += 1
            except asyncpg.InterfaceError:
                tally[1] += 1
            if pause:
                await asyncio.sleep(pause)

    async def main():
        conn = await connect("asyncpg", tcp())
        lk = advlock.lock(conn, "shared", timeout=1, lease=LEASE)
        rec = Recording(lk)
        gaps, back_to_back = [0, 0], [0, 0]  # statements run, failed
        async with lk:
            await body(conn, 4 * H, 0.001, gaps)
        assert gaps[1] == 0 and gaps[0] > 100
        assert rec.sql.count(S.HEARTBEAT) >= 2
        try:
            async with lk:
                await body(conn, 2 * D, 0, back_to_back)
        except advlock.LockLost:
            pass
        assert back_to_back[1] == 0 and back_to_back[0] > 100
        await close(conn)
    asyncio.run(main())


@need_tcp
def test_asyncpg_nested_locks_on_one_connection_share_their_heartbeats(pg_conn):
    # Two `async with` locks on one connection in one task: one body task
    # for both, held back once per heartbeat (holding it back twice found
    # its wake-up already taken, and the heartbeat was put off for good).
    async def main():
        conn = await connect("asyncpg", tcp())
        outer = advlock.lock(conn, "nested-outer", timeout=1, lease=LEASE)
        rec = Recording(outer)
        ran = 0
        async with outer:
            inner = advlock.lock(conn, "nested-inner", timeout=1, lease=LEASE)
            async with inner:
                end = time.monotonic() + 2 * D
                while time.monotonic() < end:
                    await conn.fetchval("SELECT 1")
                    ran += 1
                    await asyncio.sleep(0.01)
            assert holds(pg_conn, outer.key) and holds(pg_conn, inner.key) == []
        assert ran > 50 and rec.sql.count(S.HEARTBEAT) >= 2 * D / H - 2
        await close(conn)
    asyncio.run(main())


@need_tcp
def test_asyncpg_a_heartbeat_slower_than_the_bodys_wait_holds_the_body_back(pg_conn,
                                                                           monkeypatch):
    # A heartbeat answered after the body's wait has ended (a loaded machine
    # or network; here each one made 50 ms slower on the server): the
    # body's task resumes after the answer, and its statement does not fail.
    from advlock import asyncpg_driver
    start = asyncpg_driver.Client.start

    def slow_heartbeat(self, sql, args):
        if sql != S.HEARTBEAT:
            return start(self, sql, args)

        async def slow():
            try:
                await self.conn.execute("SELECT pg_sleep(0.05)")
            except asyncpg.InterfaceError:
                pass  # the body's statement runs: the heartbeat's answer is Busy
            return await start(self, sql, args)
        return slow()
    monkeypatch.setattr(asyncpg_driver.Client, "start", slow_heartbeat)

    async def main():
        conn = await connect("asyncpg", tcp())
        lk = advlock.lock(conn, "shared", timeout=1, lease=LEASE)
        rec = Recording(lk)
        ran = failed = 0
        async with lk:
            end = time.monotonic() + 4 * H
            while time.monotonic() < end:
                try:
                    await conn.fetchval("SELECT 1")
                    ran += 1
                except asyncpg.InterfaceError:
                    failed += 1
                await asyncio.sleep(0.001)
        assert failed == 0 and ran > 100
        assert rec.sql.count(S.HEARTBEAT) >= 2
        await close(conn)
    asyncio.run(main())


@need_tcp
def test_asyncpg_a_heartbeat_never_answered_holds_the_body_back_no_longer(pg_conn,
                                                                          monkeypatch):
    # A heartbeat in flight holds the body's task back until its answer;
    # when none comes (a partition; here the server sleeps in its stead)
    # the deadline loses the lock: the body goes on at once, and stops
    # with LockLost, well within the lease.
    from advlock import asyncpg_driver
    start = asyncpg_driver.Client.start
    stalled = []

    def stalled_heartbeat(self, sql, args):
        if sql != S.HEARTBEAT or not stalled:
            return start(self, sql, args)

        async def stall():
            stalled.append(time.monotonic())
            with contextlib.suppress(Exception):  # its connection closed under it
                await self.conn.execute("SELECT pg_sleep(30)")
            return await start(self, sql, args)
        return stall()
    monkeypatch.setattr(asyncpg_driver.Client, "start", stalled_heartbeat)

    async def main():
        conn = await connect("asyncpg", tcp())
        pid = announced_pid(conn)
        lk = advlock.lock(conn, "stalled", timeout=1, lease=LEASE)
        lost, stopped = await _hold_for("asyncpg", lk, 30, during=lambda: stalled.append(0))
        assert lost is not None and lost.reason == advlock.LeaseExpiry.NO_ANSWER
        assert stopped - stalled[1] < LEASE
        assert conn.is_closed()  # the server frees the lock once it sees that
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))  # no 30 s sleep
    asyncio.run(main())


def test_a_task_held_back_resumes_as_it_would_have_once_given_back():
    # _asyncio_task.hold_back: the wake-up it takes off is given back with
    # the awaited future's result, or a cancel that came meanwhile.
    from advlock._asyncio_task import hold_back

    async def sleeper():
        await asyncio.sleep(0.01)
        return "woke"

    async def held(cancel):
        task = asyncio.create_task(sleeper())
        await asyncio.sleep(0)  # it waits on its sleep now
        give_back = hold_back(task)
        assert give_back is not None
        if cancel:
            task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # its sleep ended (or was cancelled): held back
        give_back()
        return await task

    async def main():
        assert hold_back(asyncio.current_task()) is None  # runnable: nothing held
        assert await held(cancel=False) == "woke"
        with pytest.raises(asyncio.CancelledError):
            await held(cancel=True)
    asyncio.run(main())
