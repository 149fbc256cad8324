"""The fake database, clock, PRNG and simulator, reached from Python."""

import pytest

import advlock
from advlock import fake
from advlock._machine import SQL_TEXT


def test_server_side_wait_hands_over_in_one_round_trip():
    sim = fake.Simulation(latency=dict(min_ms=4, max_ms=4))
    sim.add_script([fake.acquire("migrations"), fake.pause(1000), fake.release("migrations")])
    we = sim.add_script([fake.pause(1), fake.acquire("migrations", timeout_ms=5000),
                         fake.release("migrations")], wait=advlock.WAIT_SERVER)
    sim.run()
    # As docs/simulation.md's example: the holder's unlock reaches the
    # server at 1010 ms (each client's session row went first) and the
    # waiter knows at 1012, one way later.
    assert we[1].report.outcome == advlock.Outcome.ACQUIRED
    assert we[1].report.attempts in (1, 2) and we[1].ended_ms == 1012
    assert we[2].report.outcome == advlock.Outcome.RELEASED


def test_diagnose_names_the_holder():
    sim = fake.Simulation()
    holder = sim.add_script([fake.acquire("m"), fake.pause(5000), fake.release("m")])
    we = sim.add_script([fake.pause(1), fake.acquire("m", timeout_ms=300)], diagnose=True)
    sim.run()
    r = we[1].report
    assert r.outcome == advlock.Outcome.TIMED_OUT and r.detail == advlock.Detail.DIAGNOSED
    assert r.holder_pid == 1000 + holder.client
    assert we[1].describe().startswith("Could not acquire migration lock for 'm' within 0.3s."
                                       " Held by pid %d" % r.holder_pid)


def test_a_cancelled_step_and_shared_holders():
    sim = fake.Simulation()
    sim.add_script([fake.acquire("m"), fake.pause(5000), fake.release("m")])
    we = sim.add_script([fake.pause(1), fake.acquire("m", timeout_ms=3000, cancel_after_ms=250)])
    a = sim.add_script([fake.acquire("r"), fake.pause(10), fake.release("r")], mode=advlock.SHARED)
    b = sim.add_script([fake.acquire("r"), fake.pause(10), fake.release("r")], mode=advlock.SHARED)
    sim.run()
    assert we[1].report.outcome == advlock.Outcome.CANCELLED and we[1].cancel_sent
    assert we[1].describe() == "Acquire of lock 'm' was cancelled."
    assert a[0].report.outcome == b[0].report.outcome == advlock.Outcome.ACQUIRED


def test_transaction_scope_lasts_until_commit():
    sim = fake.Simulation()
    we = sim.add_script([fake.begin(), fake.acquire("t"), fake.release("t"), fake.pause(100),
                         fake.commit()], scope=advlock.TRANSACTION)
    other = sim.add_script([fake.pause(50), fake.acquire("t", timeout_ms=0), fake.pause(100),
                            fake.acquire("t", timeout_ms=0), fake.release("t")])
    sim.run()
    assert we[2].report.outcome == advlock.Outcome.ENDS_WITH_TRANSACTION
    assert we[4].command_tag == "COMMIT"
    assert other[1].report.outcome == advlock.Outcome.TIMED_OUT
    assert other[3].report.outcome == advlock.Outcome.ACQUIRED


def test_jitter_replays_by_seed_and_faults_keep_the_invariants():
    def campaign(seed):
        trace = []
        sim = fake.Simulation(seed=seed, latency=dict(min_ms=1, max_ms=5),
                              faults=dict(error_ppm=20000, drop_after_ppm=10000,
                                          drop_detect_max_ms=50), trace=trace.append)
        for _ in range(6):
            sim.add_cycler(["a", "b"], cycles=20, think_ms=(0, 20), hold_ms=(1, 30),
                           timeout_ms=(0, 500), backoff=advlock.FULL_JITTER, jitter_seed=7)
        return sim.run(), trace

    s1, t1 = campaign(42)
    s2, t2 = campaign(42)
    assert s1 == s2 and t1 == t2 and len(t1) > 100
    assert s1["outcomes"]["ACQUIRED"] > 0


def test_database_and_clock():
    db = fake.Database()
    p, q = db.connect(), db.connect()
    k = advlock.derive_key("x")
    assert db.execute(p, "SELECT pg_try_advisory_lock($1)", k).status == fake.FakeStatus.ROW_TRUE
    assert db.execute(q, "SELECT pg_try_advisory_lock($1)", k).status == fake.FakeStatus.ROW_FALSE
    assert db.execute(q, "SELECT pg_advisory_lock($1)", k).status == fake.FakeStatus.WAITING
    assert db.poll(q) is None
    assert db.lock_rows() == [(p, k, "ExclusiveLock", True), (q, k, "ExclusiveLock", False)]
    db.close(p)
    assert db.poll(q).status == fake.FakeStatus.ROW_VOID
    assert db.holds(q, k) == (1, 0) and db.check() == ""
    r = db.execute(p, "SELECT pg_advisory_unlock($1)", k)
    assert r.status == fake.FakeStatus.CONNECTION_LOST
    r = db.execute(q, "SELECT pg_advisory_unlock($1)", k + 1)
    assert (r.status, r.warning) == (fake.FakeStatus.ROW_FALSE,
                                     "you don't own a lock of type ExclusiveLock")
    c = fake.Clock(100)
    c.advance_to(250)
    c.stall(50)
    c.advance_to(400)
    assert (c.now, c.read()) == (400, 350)
    assert [fake.Prng(3).next() for _ in range(2)] == [fake.Prng(3).next()] * 2


def test_the_fake_issues_fencing_tokens_the_machine_reports():
    db = fake.Database()
    p, q = db.connect(), db.connect()
    k = advlock.derive_key("x")
    fenced, unlock = SQL_TEXT[advlock.Sql.TRY_LOCK_FENCED], SQL_TEXT[advlock.Sql.UNLOCK]
    m = advlock.Machine(advlock.Options(fence=True))
    tokens = []
    for pid in (p, q, p):
        m.start_acquire_key(k, 0, now=0)
        a = m.next_action()
        assert a.sql == advlock.Sql.TRY_LOCK_FENCED
        r = db.execute(pid, fenced, a.param)
        assert r.status == fake.FakeStatus.ROW_FENCED
        with pytest.raises(advlock.CallError):  # a fenced row is not a boolean
            m.on_result(0, now=1)
        m.on_fenced(True, r.fence_token, now=1)
        tokens.append(m.report().fence)
        assert db.execute(q if pid == p else p, fenced, k).fence_token == 0  # busy
        db.execute(pid, unlock, k)
    assert tokens == [1, 2, 3]
    db.set_in_recovery(True)  # a standby: refused before anything is locked
    r = db.execute(p, fenced, k)
    assert (r.status, r.sqlstate, db.holds(p, k)) == (fake.FakeStatus.SERVER_ERROR, "25006",
                                                      (0, 0))
