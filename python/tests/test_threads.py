"""The threads of blocking locks (docs/python.md "Threads"): at most one per
blocking connection, however many locks it holds, and one timer thread for
the whole process, never one per lock."""

import os
import resource
import threading
import time

import pytest

import advlock
from clients import Recording
from conftest import holds, need_server

S = advlock.Sql
TCP_ADDR = os.environ.get("ADVLOCK_PG_LISTEN", "").split("/")[0]
need_tcp = pytest.mark.skipif(not (TCP_ADDR and os.environ.get("PGPORT")),
                              reason="no server on TCP (make python-test provides one)")
# lease=8: heartbeats every H = 0.75 s (test_lease.py).
LEASE, H = 8, 0.75
LOCKS = 6


def tcp():
    return "host=%s port=%s user=postgres dbname=postgres" % (TCP_ADDR, os.environ["PGPORT"])


def _advlock_threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("advlock-"))


def _no_helpers_left():
    """Waits for the helpers of earlier tests' connections to end (a helper
    stays HELPER_IDLE_MS after its connection's last timer)."""
    from advlock._engine import HELPER_IDLE_MS
    end = time.monotonic() + 3 * HELPER_IDLE_MS / 1000
    while "advlock-connection" in _advlock_threads() and time.monotonic() < end:
        time.sleep(0.05)


@need_tcp
def test_leased_locks_on_one_blocking_connection_share_its_threads(pg_conn):
    import psycopg
    _no_helpers_left()
    conn = psycopg.connect(tcp(), autocommit=True)
    locks = [advlock.lock(conn, "threads-%d" % i, timeout=1, lease=LEASE) for i in range(LOCKS)]
    recs = [Recording(lk) for lk in locks]
    seen = set()
    most = 0
    for lk in locks:
        lk.acquire()
    try:
        end = time.monotonic() + 3 * H
        while time.monotonic() < end:
            for lk in locks:
                lk.check()
            names = _advlock_threads()
            most = max(most, len(names))
            seen.update(names)
            time.sleep(0.01)
    finally:
        for lk in locks:
            lk.release()
    for lk, rec in zip(locks, recs):
        assert rec.sql.count(S.HEARTBEAT) >= 2, (lk.name, rec.sql)
        assert holds(pg_conn, lk.key) == []
    # The process's session watch, the connection's helper (its heartbeats).
    assert seen <= {"advlock-session-watch", "advlock-connection"}, seen
    assert most <= 2, seen
    conn.close()


@need_server
def test_server_side_waits_keep_their_deadlines_with_one_thread_per_connection(pg_conn):
    import psycopg
    waiters = 3
    key_holder = psycopg.connect(autocommit=True)
    conns = [psycopg.connect(autocommit=True) for _ in range(waiters)]
    locks = [advlock.lock(c, "threads-wait", timeout=1.5, wait=advlock.WAIT_SERVER,
                          lease=None) for c in conns]
    key_holder.execute("SELECT pg_advisory_lock(%s)", (locks[0].key,))
    outcomes = []

    def wait(lk):
        try:
            lk.acquire()
            outcomes.append("acquired")
        except advlock.LockTimeout:
            outcomes.append("timed out")

    before = threading.active_count()
    callers = [threading.Thread(target=wait, args=(lk,)) for lk in locks]
    for t in callers:
        t.start()
    time.sleep(0.75)  # every wait is on the server now, until 1.5 s
    during = threading.active_count()
    for t in callers:
        t.join()
    key_holder.close()
    for c in conns:
        c.close()
    assert outcomes == ["timed out"] * waiters
    # The callers' own threads, and at most one helper per connection (its
    # wait's deadline, kept while the caller's thread blocks in the wait).
    assert during - before <= 2 * waiters, _advlock_threads()


@need_server
def test_a_connections_helper_sleeps_through_its_locks_cycles(pg_conn):
    """The helper tends the heartbeat of a held lock; a lock taken and
    released again and again moves that timer later each time, which never
    needs the helper before its time: it is not woken once per cycle (the
    process's threads sleep about twice a cycle, in the statements)."""
    import psycopg
    conn = psycopg.connect(autocommit=True)
    lk = advlock.lock(conn, "threads-cycles", timeout=1, lease=LEASE)
    lk.acquire()
    lk.release()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    cycles = 300
    for _ in range(cycles):
        lk.acquire()
        lk.release()
    slept = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before
    conn.close()
    assert slept < 4 * cycles, slept
