"""The reference's schedule and messages, through the Python binding of the
machine in virtual time (now= on every input) and through the simulator."""

import pytest

import advlock
from advlock import _binding as B
from advlock import fake

FALSE, TRUE, NULL = B.RESULT_FALSE, B.RESULT_TRUE, B.RESULT_NULL


def run_busy(timeout_ms, answer_ms=0):
    """Drives an acquire against a lock that is always busy; returns the
    sleeps, the attempts' times and the final report."""
    m = advlock.Machine()
    t = 0
    m.start_acquire("migrations", timeout_ms, now=t)
    sleeps, tries = [], []
    while True:
        a = m.next_action()
        if a.kind == B.ACTION_QUERY:
            assert advlock._machine.SQL_TEXT[a.sql] == "SELECT pg_try_advisory_lock($1)"
            assert a.param == advlock.derive_key("migrations")
            tries.append(t)
            t += answer_ms
            m.on_result(FALSE, now=t)
        elif a.kind == B.ACTION_SLEEP:
            sleeps.append(a.sleep_ms)
            assert a.wake_at_ms == t + a.sleep_ms
            t = a.wake_at_ms
            m.on_timer(now=t)
        else:
            return sleeps, tries, advlock.Report(B.Report.from_buffer_copy(a.report.contents),
                                                 "migrations")


def test_the_reference_schedule():
    sleeps, tries, r = run_busy(5000)
    assert sleeps == [100, 200, 400, 800, 1000, 1000, 1000, 1000]
    assert tries == [0, 100, 300, 700, 1500, 2500, 3500, 4500, 5500]
    assert r.outcome == advlock.Outcome.TIMED_OUT and r.attempts == 9


def test_timeout_zero_is_one_attempt():
    sleeps, tries, r = run_busy(0)
    assert (sleeps, tries, r.attempts) == ([], [0], 1)
    assert str(r.describe()) == "Could not acquire migration lock for 'migrations' within 0s."


@pytest.mark.parametrize("ms,text", [(30000, "30"), (500, "0.5"), (1250, "1.25"),
                                     (2000, "2"), (100, "0.1")])
def test_timeout_messages_print_seconds_as_the_reference(ms, text):
    r = run_busy(ms)[2]
    assert r.describe() == "Could not acquire migration lock for 'migrations' within %ss." % text
    assert advlock.format_seconds(ms) == text


def test_null_is_a_failure_with_the_reference_message():
    m = advlock.Machine()
    m.start_acquire("migrations", 1000, now=0)
    m.on_result(NULL, now=1)
    r = m.report()
    assert r.outcome == advlock.Outcome.FAILED and r.failure == advlock.Failure.ENULL
    assert r.describe("migrations") == \
        "pg_try_advisory_lock for 'migrations' returned null (expected boolean)."
    with pytest.raises(advlock.LockFailed) as info:
        advlock._machine.raise_for(r, "migrations")
    assert str(info.value) == r.describe("migrations")


def test_release_false_is_not_held_a_value():
    m = advlock.Machine()
    m.start_release("migrations", now=0)
    m.on_result(FALSE, now=1)
    r = m.report()
    assert r.outcome == advlock.Outcome.NOT_HELD
    assert r.describe("migrations") == "This session held no lock 'migrations' to release."
    advlock._machine.raise_for(r, "migrations")  # no exception


def test_a_cancel_while_the_try_lock_is_out_gives_the_grant_back():
    m = advlock.Machine()
    m.start_acquire("migrations", 1000, now=0)
    assert m.cancel(now=1)
    m.on_result(TRUE, now=2)
    a = m.next_action()
    assert a.kind == B.ACTION_QUERY and advlock.Sql(a.sql) == advlock.Sql.UNLOCK
    m.on_result(TRUE, now=3)
    assert m.report().outcome == advlock.Outcome.CANCELLED


def test_misuse_is_refused_and_changes_nothing():
    m = advlock.Machine()
    with pytest.raises(advlock.CallError) as info:
        m.on_result(TRUE, now=0)
    assert info.value.code == -3  # ADVLOCK_EMISUSE
    assert m.next_action().kind == B.ACTION_NONE


def test_the_simulated_reference_timeline():
    """docs/simulation.md's C example, from Python."""
    sim = fake.Simulation()
    sim.add_script([fake.acquire("migrations"), fake.pause(10000), fake.release("migrations")])
    ours = sim.add_script([fake.pause(1), fake.acquire("migrations", timeout_ms=2000)])
    sim.run()
    assert ours[1].report.outcome == advlock.Outcome.TIMED_OUT
    assert ours[1].report.attempts == 6 and ours[1].ended_ms == 2501
    assert ours[1].describe() == "Could not acquire migration lock for 'migrations' within 2s."
