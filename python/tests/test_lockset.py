"""Lock sets against the real server: many tasks' locks over one asyncpg or
psycopg AsyncConnection, kept apart in the process, contending with other
connections, lost together, and leaving nothing behind when cancelled."""

import asyncio
import random
import time

import pytest

import advlock
from advlock import _binding as B
from advlock import _engine as E
from clients import announced_pid, call, close, connect
from conftest import holds, need_server
from test_lease import need_tcp, tcp

pytestmark = need_server
FLAVOURS = ["asyncpg", "psycopg-async"]


def advisory_count(pg_conn, pid):
    """pg_locks' granted advisory rows of backend pid."""
    return pg_conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                           " AND granted AND pid = %s", (pid,)).fetchone()[0]


async def until(predicate, seconds=10):
    """Yields to the loop until predicate() holds (or fails the test)."""
    for _ in range(int(seconds * 100)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("still not so after %s s" % seconds)


async def hold_many(locks, prefix, n):
    """n tasks, each holding the set's lock "<prefix>-<i>" until the event
    is set; returns once all hold: (the tasks, their locks, the event)."""
    go, holding = asyncio.Event(), []

    async def hold(i):
        async with locks.lock("%s-%d" % (prefix, i), timeout=10) as lk:
            holding.append(lk)
            await go.wait()

    tasks = [asyncio.create_task(hold(i)) for i in range(n)]
    await until(lambda: len(holding) == n)
    return tasks, holding, go


class _Recorder:
    """The set's client, recording the statements it sends."""

    def __init__(self, inner):
        self.inner, self.sent = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def start(self, sql, args):
        self.sent.append(advlock.Sql(sql))
        return self.inner.start(sql, args)


def record(locks):
    """The list of the statements the set sends from now on."""
    locks._engine.client = _Recorder(locks._engine.client)
    return locks._engine.client.sent


async def try_on_the_wire(locks, name):
    """A lock of the set whose acquire's try-lock is sent, its answer not
    read: (the lock, the acquire's task, the statements sent from then)."""
    sent = record(locks)
    lk = locks.lock(name, timeout=10)
    task = asyncio.create_task(lk.acquire())
    while advlock.Sql.TRY_LOCK not in sent:
        await asyncio.sleep(0)
    return lk, task, sent


def run(flavour, body, conninfo="", **set_kwargs):
    """asyncio.run(body(conn, locks)) on a fresh connection and its set."""
    async def main():
        conn = await connect(flavour, conninfo)
        try:
            await body(conn, advlock.LockSet(conn, **set_kwargs))
        finally:
            await conn.close()
    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_thousand_tasks_hold_a_thousand_names_on_one_backend(flavour, pg_conn):
    async def body(conn, locks):
        pid, n = announced_pid(conn), 1000
        tasks, holding, go = await hold_many(locks, "many", n)
        assert advisory_count(pg_conn, pid) == n
        assert locks.in_use == n
        go.set()
        await asyncio.gather(*tasks)
        assert advisory_count(pg_conn, pid) == 0
        assert locks.in_use == 0
        assert all(lk.state == advlock.LockState.NOT_HELD for lk in holding)
    run(flavour, body)


def set_limit(pg_conn, share):
    """How many locks a set may hold on the test server: share percent of
    max_locks_per_transaction x (max_connections + max_prepared_transactions)."""
    a, b, c = (int(pg_conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0])
               for name in ("max_locks_per_transaction", "max_connections",
                            "max_prepared_transactions"))
    return a * (b + c) * share // 100


async def take_many(flavour, pg_conn, conn, locks, share, n=20000):
    """n tasks ask for n names at once: the set holds its share of the
    server's lock table and refuses the rest in words; meanwhile a new
    client connects and runs DDL (a full table fails both with "out of
    shared memory")."""
    pid = announced_pid(conn)
    many = [locks.lock("capacity-%d" % i, timeout=0) for i in range(n)]
    answers = await asyncio.gather(*(lk.acquire() for lk in many), return_exceptions=True)
    refused = [a for a in answers if isinstance(a, BaseException)]
    limit = set_limit(pg_conn, share)
    assert n - len(refused) == limit
    for failure in refused:
        assert isinstance(failure, advlock.LockFailed), repr(failure)
        assert failure.report.sqlstate == "53400"
        assert "max_locks_per_transaction 64 x (max_connections" in str(failure)
        assert "raise max_locks_per_transaction" in str(failure)
    assert advisory_count(pg_conn, pid) == limit == locks.in_use

    newcomer = await connect(flavour)
    try:
        await call(newcomer.execute, "CREATE TABLE lockset_newcomer (id int PRIMARY KEY)")
        await call(newcomer.execute, "DROP TABLE lockset_newcomer")
    finally:
        await close(newcomer)

    await asyncio.gather(*(lk.release() for lk in many if lk.held))
    assert advisory_count(pg_conn, pid) == 0 and locks.in_use == 0


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_twenty_thousand_names_stop_at_the_share_of_the_lock_table(flavour, pg_conn):
    async def body(conn, locks):
        await take_many(flavour, pg_conn, conn, locks, 25)
    run(flavour, body)


def test_the_share_is_the_callers(pg_conn):
    async def body(conn, locks):
        for wrong in (0, 101, 2.5, "25"):
            with pytest.raises(advlock.CallError) as caught:
                advlock.LockSet(conn, capacity_share=wrong)
            assert "capacity_share" in str(caught.value)
        await take_many("asyncpg", pg_conn, conn, locks, 5, n=2000)
    run("asyncpg", body, capacity_share=5)


class _Failing(_Recorder):
    """The set's client, recording its transaction control too, whose n-th
    try-lock is a statement the server fails (division by zero)."""

    def __init__(self, inner, n):
        super().__init__(inner)
        self.n, self.control_sent = n, []

    def start(self, sql, args):
        if sql == advlock.Sql.TRY_LOCK:
            self.n -= 1
            if self.n == 0:
                async def failed():
                    return (advlock._binding.RESULT_SERVER_ERROR, "22012", "division by zero")
                return failed()
        return super().start(sql, args)


def in_transaction(conn):
    if hasattr(conn, "is_in_transaction"):
        return conn.is_in_transaction()
    import psycopg
    return conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_failure_among_statements_queued_together_is_one_locks(flavour, pg_conn):
    # The 300th try fails on the server: that lock alone fails, and every
    # other grant holds (one statement at a time: no block to roll back).
    async def body(conn, locks):
        await locks.lock("block-warm-up", timeout=0).acquire()  # the session checked
        client = locks._engine.client = _Failing(locks._engine.client, 300)
        members = [locks.lock("block-%d" % i, timeout=0) for i in range(1000)]
        answers = await asyncio.gather(*(m.acquire() for m in members), return_exceptions=True)
        failed = [a for a in answers if isinstance(a, BaseException)]
        assert len(failed) == 1 and isinstance(failed[0], advlock.LockFailed)
        assert failed[0].report.sqlstate == "22012"
        assert advisory_count(pg_conn, announced_pid(conn)) == 1 + 999 == locks.in_use
        assert client.n < 0 and not in_transaction(conn)
        await asyncio.gather(*(m.release() for m in members if m.held))
        assert not in_transaction(conn)
        assert advisory_count(pg_conn, announced_pid(conn)) == 1
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_callers_open_transaction_is_left_alone(flavour, pg_conn):
    # Inside the caller's own transaction the set opens no block (its COMMIT
    # would be the caller's): the statements run in it, as they come.
    async def body(conn, locks):
        await call(conn.execute, "BEGIN")
        client = locks._engine.client = _Failing(locks._engine.client, 0)
        members = [locks.lock("callers-%d" % i, timeout=0) for i in range(50)]
        await asyncio.gather(*(m.acquire() for m in members))
        assert in_transaction(conn)
        await call(conn.execute, "ROLLBACK")
        assert advisory_count(pg_conn, announced_pid(conn)) == 50  # session locks outlive it
        await asyncio.gather(*(m.release() for m in members))
    run(flavour, body)


def test_a_try_lock_the_callers_statement_keeps_out_fails_and_leaves_the_set_usable(pg_conn):
    # The caller's own statement holds the connection while the set's
    # try-locks go: asyncpg refuses each (another operation is in
    # progress), so each acquire fails as a misuse (CallError) with
    # asyncpg's words, no lock is left behind, the connection is not taken
    # for lost, and the set locks again once the statement ended.
    async def body(conn, locks):
        await locks.lock("end-warm-up", timeout=0).acquire()  # the session checked
        caller = asyncio.create_task(conn.execute("SELECT pg_sleep(1)"))
        await asyncio.sleep(0.2)  # the caller's statement is on the wire
        members = [locks.lock("end-%d" % i, timeout=0) for i in range(5)]
        outcomes = await asyncio.gather(*(m.acquire() for m in members), return_exceptions=True)
        for outcome in outcomes:
            assert isinstance(outcome, advlock.CallError), outcome
            assert outcome.code == B.ADVLOCK_EMISUSE
            assert "another operation is in progress" in str(outcome)
        assert locks.lost is None and all(m.state == advlock.LockState.NOT_HELD
                                          for m in members)
        await caller
        assert not in_transaction(conn)
        async with locks.lock("end-after", timeout=0):
            assert advisory_count(pg_conn, announced_pid(conn)) == 2
        assert advisory_count(pg_conn, announced_pid(conn)) == 1
    run("asyncpg", body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_session_check_and_the_lease_setup_run_once_for_the_connection(flavour):
    async def body(conn, locks):
        sent = record(locks)

        async def cycle(i):
            async with locks.lock("check-%d" % i, timeout=5):
                pass

        await asyncio.gather(*(cycle(i) for i in range(50)))
        assert sent.count(advlock.Sql.SESSION) == 1
        assert sent.count(advlock.Sql.CAPACITY) == 1
        assert sent.count(advlock.Sql.LEASE_SETUP) == 1
        assert len(sent) == 3 + 50 * 2
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_tasks_on_one_name_exclude_each_other(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        first = locks.lock("same", timeout=0)
        await first.acquire()
        # The server would grant the second again (its locks are re-entrant
        # per session): the set answers busy, as for another process.
        second = locks.lock("same", timeout=0.3)
        with pytest.raises(advlock.LockTimeout) as caught:
            await second.acquire()
        assert str(caught.value) == "Could not acquire migration lock for 'same' within 0.3s."
        assert caught.value.report.attempts == 3
        assert holds(pg_conn, first.key, pid) == [(pid, "ExclusiveLock")]
        # Released, the key is free for the second's next try.
        waiter = locks.lock("same", timeout=5)
        waiting = asyncio.create_task(waiter.acquire())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await first.release()
        assert (await waiting).attempts > 1
        assert holds(pg_conn, first.key, pid) == [(pid, "ExclusiveLock")]
        await waiter.release()
        assert holds(pg_conn, first.key) == [] and locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tasks_racing_for_one_name_get_it_one_at_a_time(flavour, pg_conn):
    async def body(conn, locks):
        inside, most = 0, 0

        async def work():
            nonlocal inside, most
            async with locks.lock("race", timeout=30):
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.002)
                inside -= 1

        await asyncio.gather(*(work() for _ in range(4)))
        assert most == 1
        assert advisory_count(pg_conn, announced_pid(conn)) == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_shared_locks_share_and_exclude_an_exclusive_one(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        one = locks.lock("reports", timeout=0, mode=advlock.SHARED)
        two = locks.lock("reports", timeout=0, mode=advlock.SHARED)
        await one.acquire()
        await two.acquire()
        assert holds(pg_conn, one.key, pid) == [(pid, "ShareLock")]
        with pytest.raises(advlock.LockTimeout):
            await locks.lock("reports", timeout=0.2).acquire()
        # Each released its own hold: the key stays shared until both did.
        await one.release()
        assert holds(pg_conn, one.key, pid) == [(pid, "ShareLock")]
        await two.release()
        assert holds(pg_conn, one.key) == []
        # An exclusive holder keeps a shared one out, too.
        async with locks.lock("reports", timeout=0):
            with pytest.raises(advlock.LockTimeout):
                await locks.lock("reports", timeout=0.2, mode=advlock.SHARED).acquire()
        assert locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_set_and_another_connection_exclude_each_other(flavour):
    async def body(conn, locks):
        other = await connect(flavour)
        try:
            async with advlock.lock(other, "shared-name", timeout=0, lease=None):
                with pytest.raises(advlock.LockTimeout):
                    await locks.lock("shared-name", timeout=0.2).acquire()
                assert locks.in_use == 0
            async with locks.lock("shared-name", timeout=0):
                with pytest.raises(advlock.LockTimeout):
                    await advlock.lock(other, "shared-name", timeout=0.2, lease=None).acquire()
        finally:
            await other.close()
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_terminated_backend_makes_every_held_lock_lost(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        tasks, holding, go = await hold_many(locks, "doomed", 20)
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        await asyncio.sleep(0.1)
        go.set()  # each body ends; its release finds the session gone
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, advlock.LockLost) for r in results), results
        assert all(r.reason is advlock.LeaseExpiry.CONNECTION for r in results)
        assert all(lk.lost.is_set() and not lk.held for lk in holding)
        assert locks.lost and locks.in_use == 0
        # An acquire on the lost set fails, and takes no peer.
        with pytest.raises(advlock.LockFailed):
            await locks.lock("after", timeout=0).acquire()
        assert locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_try_granted_after_its_task_was_cancelled_is_given_back(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        keeper = locks.lock("kept", timeout=0)
        await keeper.acquire()
        lk, task, sent = await try_on_the_wire(locks, "race")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sent[-2:] == [advlock.Sql.TRY_LOCK, advlock.Sql.UNLOCK]
        assert holds(pg_conn, lk.key, pid) == []
        assert holds(pg_conn, keeper.key, pid) == [(pid, "ExclusiveLock")]
        assert locks.in_use == 1
        await keeper.release()
        assert locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancellations_in_the_middle_of_a_batch_leave_nothing(flavour, pg_conn):
    async def body(conn, locks):
        pid, rng, go = announced_pid(conn), random.Random(23), asyncio.Event()
        holding = set()

        async def hold(i):
            # Pairs of tasks share a name: some back off while others hold.
            lk = locks.lock("batch-%d" % (i // 2), timeout=10)
            async with lk:
                holding.add(lk)
                try:
                    await go.wait()
                finally:
                    holding.discard(lk)

        tasks = [asyncio.create_task(hold(i)) for i in range(300)]
        cancelled = set()
        for _ in range(30):  # cancel a few at each turn of the loop
            for t in rng.sample(tasks, 5):
                t.cancel()
                cancelled.add(t)
            await asyncio.sleep(0 if rng.random() < 0.7 else 0.001)
        survivors = [t for t in tasks if t not in cancelled]
        # The survivors' locks are untouched: each name a survivor asked
        # for ends up held by one, once the cancelled tasks have ended.
        names = {i // 2 for i, t in enumerate(tasks) if t not in cancelled}
        await until(lambda: len(holding) == len(names))
        assert advisory_count(pg_conn, pid) == len(names)
        await asyncio.sleep(0.05)
        assert all(t.done() for t in cancelled)
        go.set()
        results = await asyncio.gather(*survivors, return_exceptions=True)
        assert results == [None] * len(survivors)
        assert advisory_count(pg_conn, pid) == 0
        assert locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cancelled_holder_leaves_the_others_held(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        tasks, _, go = await hold_many(locks, "holder", 10)
        tasks[3].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[3]
        assert advisory_count(pg_conn, pid) == 9
        assert locks.in_use == 9
        go.set()
        await asyncio.gather(*tasks[:3], *tasks[4:])
        assert advisory_count(pg_conn, pid) == 0 and locks.in_use == 0
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_what_a_set_refuses(flavour):
    async def body(conn, locks):
        for kwargs in ({"scope": advlock.TRANSACTION}, {"wait": advlock.WAIT_SERVER},
                       {"lease": 30}):
            with pytest.raises(advlock.CallError) as caught:
                locks.lock("refused", **kwargs)
            assert 'docs/design.md, "Lock sets"' in str(caught.value)
    run(flavour, body)


def test_a_blocking_connection_is_refused(pg_conn):
    with pytest.raises(advlock.ArgumentTypeError):
        advlock.LockSet(pg_conn)


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_one_stream_of_heartbeats_keeps_every_lock_of_the_set(flavour, pg_conn):
    async def body(conn, locks):
        sent = record(locks)
        tasks, holding, go = await hold_many(locks, "leased", 20)
        await asyncio.sleep(2)  # heartbeats every 0.75 s (lease=8)
        beats = sent.count(advlock.Sql.HEARTBEAT)
        assert 1 <= beats <= 4
        assert all(lk.held for lk in holding)
        go.set()
        await asyncio.gather(*tasks)
        await asyncio.sleep(1)
        assert sent.count(advlock.Sql.HEARTBEAT) == beats  # stopped with the last lock
        assert advisory_count(pg_conn, announced_pid(conn)) == 0 and locks.in_use == 0
    run(flavour, body, tcp(), lease=8)


@need_tcp
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_heartbeat_finds_the_session_gone_and_every_body_stops(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        tasks, _, _ = await hold_many(locks, "stopped", 5)  # stopped by the set, never let go
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        done, _ = await asyncio.wait(tasks, timeout=5)
        assert len(done) == 5
        assert all(isinstance(t.exception(), advlock.LockLost) for t in tasks)
        assert locks.lost and locks.in_use == 0
    run(flavour, body, tcp(), lease=8)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_fenced_lock_of_the_set_is_busy_for_another_of_the_set(flavour):
    async def body(conn, locks):
        await conn.execute(advlock.fence_setup_sql())
        async with locks.lock("fenced", timeout=0, fence=True) as first:
            assert first.fence >= 1
            with pytest.raises(advlock.LockTimeout):
                await locks.lock("fenced", timeout=0.2, fence=True).acquire()
        async with locks.lock("fenced", timeout=0, fence=True) as second:
            assert second.fence > first.report.fence
        assert locks.in_use == 0
    run(flavour, body)


def backend_alive(pg_conn, pid, seconds=5):
    """Whether backend pid still runs once `seconds` have let it end."""
    for _ in range(int(seconds * 100)):
        if not pg_conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                               (pid,)).fetchall():
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_loop_closed_with_tries_queued_leaves_nothing_held(flavour, pg_conn):
    # asyncio.run's teardown cancels every task, the set's worker too, while
    # tries are queued or on the wire and some locks are held: the worker
    # reads every answer and the grants are given back before the loop
    # closes. The connection stays open (the caller's): its session holds
    # nothing.
    for turns in (1, 2, 3, 5, 8, 10, 15, 20, 30, 50):
        seen = {}

        async def main():
            conn = seen["conn"] = await connect(flavour)
            locks = seen["locks"] = advlock.LockSet(conn)
            seen["pid"], go = announced_pid(conn), asyncio.Event()

            async def hold(i):
                async with locks.lock("teardown-%d" % (i // 2), timeout=10):
                    await go.wait()

            seen["tasks"] = [asyncio.create_task(hold(i)) for i in range(200)]
            for _ in range(turns):
                await asyncio.sleep(0)

        asyncio.run(main())
        try:
            assert advisory_count(pg_conn, seen["pid"]) == 0, turns
            assert seen["locks"].in_use == 0
            assert all(t.cancelled() for t in seen["tasks"])
        finally:
            pg_conn.execute("SELECT pg_terminate_backend(%s)", (seen["pid"],))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cancelled_worker_reads_the_answer_in_flight_and_gives_it_back(flavour, pg_conn):
    # What asyncio.run's teardown does: the pump's task (the lock's own
    # task, pumping inline, or a pump task) and the lock's task cancelled
    # while the lock's try is on the wire.
    async def body(conn, locks):
        pid = announced_pid(conn)
        async with locks.lock("warm-up", timeout=0):
            pass
        lk, task, sent = await try_on_the_wire(locks, "in-flight")
        pump = locks._engine.task
        if isinstance(pump, asyncio.Task):
            pump.cancel()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert holds(pg_conn, lk.key, pid) == [] and locks.in_use == 0
        assert sent == [advlock.Sql.TRY_LOCK, advlock.Sql.UNLOCK]
        async with locks.lock("in-flight", timeout=0):  # the set goes on
            assert holds(pg_conn, lk.key, pid) == [(pid, "ExclusiveLock")]
    run(flavour, body)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_statement_whose_waiter_is_cancelled_leaves_the_next_ones_alone(flavour):
    # As a heartbeat at teardown: the task carrying the connection's own
    # statement cancelled while the statement is on the wire. The cancel is
    # kept away from it: it runs to its answer, which the engine is owed,
    # and the set goes on.
    async def body(conn, locks):
        async with locks.lock("warm-up", timeout=0):
            pass
        sent = record(locks)
        e = locks._engine
        st = B.Statement()  # no member: the connection's own
        st.sql, st.param = advlock.Sql.UNLOCK, advlock.derive_key("not-held")
        beat = asyncio.ensure_future(E._send_async(e, e.client, st, E.Guard()))
        while not sent:
            await asyncio.sleep(0)
        beat.cancel()
        assert await beat == B.RESULT_FALSE and not beat.cancelled()
        async with locks.lock("behind", timeout=5) as lk:
            assert lk.held and locks.in_use == 1
    run(flavour, body)


class _Interrupting(_Recorder):
    """The set's client, interrupted (KeyboardInterrupt) as it starts its
    n-th try-lock."""

    def __init__(self, inner, n):
        super().__init__(inner)
        self.n = n

    def start(self, sql, args):
        if sql == advlock.Sql.TRY_LOCK:
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt
        return super().start(sql, args)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_interrupted_worker_ends_the_session_and_every_lock(flavour, pg_conn):
    # A KeyboardInterrupt in the worker leaves the connection in an unknown
    # state: the set closes it (the server frees every lock of the session),
    # the queued locks fail as for a lost connection, and the interrupt goes
    # on out of the loop.
    seen = {}

    async def main():
        conn = await connect(flavour)
        locks = seen["locks"] = advlock.LockSet(conn, lease=None)
        seen["pid"] = announced_pid(conn)
        locks._engine.client = _Interrupting(locks._engine.client, 30)
        go = asyncio.Event()

        async def hold(i):
            lk = locks.lock("interrupted-%d" % i, timeout=10)
            seen.setdefault("locks_made", []).append(lk)
            async with lk:
                await go.wait()

        tasks = [asyncio.create_task(hold(i)) for i in range(50)]
        await asyncio.gather(*tasks, return_exceptions=True)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert not backend_alive(pg_conn, seen["pid"])
    assert seen["locks"].in_use == 0 and seen["locks"].lost
    assert all(lk.state == advlock.LockState.NOT_HELD for lk in seen["locks_made"])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_lost_set_lock_reads_as_a_single_lock_on_the_same_connection_kind(flavour, pg_conn):
    # Direct connections, their backends terminated while each holds: the
    # session ended, and each lock says so alike.
    async def body(conn, locks):
        other = await connect(flavour)
        single = advlock.lock(other, "lost-single", timeout=0, lease=None)
        member = locks.lock("lost-member", timeout=0)
        await single.acquire()
        await member.acquire()
        for c in (conn, other):
            pg_conn.execute("SELECT pg_terminate_backend(%s)", (announced_pid(c),))
        await asyncio.sleep(0.1)
        with pytest.raises(advlock.LockLost):
            await single.release()
        with pytest.raises(advlock.LockLost):
            await member.release()
        assert single.state == advlock.LockState.NOT_HELD
        assert member.state == single.state
        await other.close()
    run(flavour, body, lease=None)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_set_is_used_from_the_loop_of_its_connection_only(flavour):
    loop = asyncio.new_event_loop()
    try:
        conn = loop.run_until_complete(connect(flavour))
        locks = advlock.LockSet(conn, lease=None)
        loop.run_until_complete(locks.lock("first-loop", timeout=0).acquire())

        async def elsewhere():
            lk = locks.lock("second-loop", timeout=0)
            with pytest.raises(advlock.CallError) as caught:
                await lk.acquire()
            assert "event loop" in str(caught.value)
            assert not lk.held
        asyncio.run(elsewhere())
        assert locks.in_use == 1
        loop.run_until_complete(conn.close())
    finally:
        loop.close()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_connection_closed_by_its_owner_ends_the_set(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        tasks, holding, go = await hold_many(locks, "owner-closed", 5)
        await conn.close()
        go.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, advlock.LockLost) for r in results), results
        assert all(lk.state == advlock.LockState.NOT_HELD for lk in holding)
        assert locks.lost and locks.in_use == 0
        assert not backend_alive(pg_conn, pid)
        # A lock of the lost set fails at once: its client, closed, sends
        # nothing to the server.
        with pytest.raises(advlock.LockFailed) as caught:
            await locks.lock("after-close", timeout=0).acquire()
        assert "connection lost" in str(caught.value)
    run(flavour, body, lease=None)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_body_that_raises_releases_its_lock(flavour, pg_conn):
    async def body(conn, locks):
        pid = announced_pid(conn)
        lk = locks.lock("raising", timeout=0)
        with pytest.raises(ValueError):
            async with lk:
                raise ValueError("the work failed")
        assert holds(pg_conn, lk.key, pid) == [] and locks.in_use == 0
        assert lk.state == advlock.LockState.NOT_HELD
    run(flavour, body)
