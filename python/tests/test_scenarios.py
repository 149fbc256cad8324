"""The connection scenarios of tests/scenarios/connection.tsv through the
Python drivers (asyncpg, psycopg on asyncio, blocking psycopg) against a
real PostgreSQL: the same table, and the same judgement of each report,
as tests/integration/test_scenarios.c gives the C drivers. The table says
which report each scenario judges and what it must hold; this file only
sets each scenario up. Rows that need PgBouncer are skipped without
with-pgbouncer.sh's variables (make python-scenarios-test has them)."""

import asyncio
import csv
import os
import re
import signal

import pytest

import advlock
from clients import announced_pid, call, close, connect
from conftest import TREE, holds, need_server

TABLE = os.path.join(TREE, "tests", "scenarios", "connection.tsv")
DRIVERS = ["asyncpg", "psycopg_async", "psycopg"]
FLAVOUR = {"asyncpg": "asyncpg", "psycopg_async": "psycopg-async", "psycopg": "psycopg"}
NEEDS = {"pgbouncer-session": "ADVLOCK_TEST_PGBOUNCER_SESSION",
         "pgbouncer-tx": "ADVLOCK_TEST_PGBOUNCER_TX", "standby": "ADVLOCK_TEST_STANDBY",
         "tcp": "ADVLOCK_PG_LISTEN"}
# ADVLOCK_SCENARIOS_NEEDS=standby: only the rows that need that harness.
ONLY = os.environ.get("ADVLOCK_SCENARIOS_NEEDS")


def read_table():
    with open(TABLE, newline="", encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#") and line.strip()]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


ROWS = read_table()
LOCKS = []  # the scenario's lock objects: the last one's state is judged
# A "drift: " cell is a known disagreement, skipped saying so until fixed.
CASES = [pytest.param(row, d, id="%s/%s" % (row["scenario"], d),
                      marks=[pytest.mark.skip(reason=row[d])] if row[d] != "yes" else [])
         for row in ROWS for d in DRIVERS
         if (row[d] == "yes" or row[d].startswith("drift: ")) and ONLY in (None, row["needs"])]


def test_every_cell_says_yes_or_why_not():
    for row in ROWS:
        for column in DRIVERS + ["c_blocking", "c_async", "c_lockset"]:
            assert row[column] == "yes" or row[column].startswith(("n/a: ", "drift: ")), (
                row["scenario"], column)


# ---- what a scenario ends with: a report and its words --------------------------


async def acquire(lk):
    """(report, words) of lk's acquire, whether it returned or raised."""
    LOCKS.append(lk)
    try:
        report = await call(lk.acquire)
        return report, report.describe()
    except advlock.LockError as e:
        return e.report, str(e)


async def release(lk):
    report = await call(lk.release)
    return report, report.describe()


async def lost(lk):
    """(report, words) of the LockLost a held lock's user is told of."""
    assert await asyncio.to_thread(lk.lost.wait, 5), "the holder was not told"
    with pytest.raises(advlock.LockLost) as caught:
        lk.check()
    with pytest.raises(advlock.LockLost):  # and the connection is closed
        await call(lk.release)
    return caught.value.report, str(caught.value)


# ---- the scenarios ----------------------------------------------------------------


class Scene:
    def __init__(self, driver, name, pg_conn):
        self.flavour = FLAVOUR[driver]
        self.name = name
        self.key = advlock.derive_key(name)
        self.pg = pg_conn
        self.conn = None

    async def connect(self, conninfo=""):
        self.conn = await connect(self.flavour, conninfo)
        return self.conn

    async def held(self, **options):
        lk = advlock.lock(await self.connect(), self.name, timeout=5, **options)
        report, _ = await acquire(lk)
        assert report.outcome == advlock.Outcome.ACQUIRED, report
        return lk


async def timeout(s, clip):
    s.pg.execute("SELECT pg_advisory_lock(%s)", (s.key,))
    try:
        return await acquire(advlock.lock(await s.connect(), s.name, timeout=1,
                                          clip_to_deadline=clip))
    finally:
        s.pg.execute("SELECT pg_advisory_unlock(%s)", (s.key,))


async def scene_timeout_reference(s):
    return await timeout(s, False)


async def scene_timeout_clipped(s):
    return await timeout(s, True)


async def scene_terminate_holder(s):
    lk = await s.held()
    s.pg.execute("SELECT pg_terminate_backend(%s, 5000)", (announced_pid(s.conn),))
    told = await lost(lk)
    assert holds(s.pg, s.key) == []
    return told


async def scene_idle_session_timeout(s):
    conn = await s.connect()
    await call(conn.execute, "SET idle_session_timeout = 500")
    lk = advlock.lock(conn, s.name, timeout=5)
    assert (await acquire(lk))[0].outcome == advlock.Outcome.ACQUIRED
    await asyncio.sleep(1.2)
    assert holds(s.pg, s.key) == [(announced_pid(conn), "ExclusiveLock")]
    assert not lk.lost.is_set()
    return await release(lk)


async def scene_fence_error_after_grant(s):
    s.pg.execute(advlock.fence_setup_sql())
    s.pg.execute("CREATE OR REPLACE FUNCTION advlock.scenario_refuse() RETURNS trigger"
                 " LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'counter refused'; END$$")
    s.pg.execute("CREATE TRIGGER scenario_refuse BEFORE INSERT OR UPDATE ON advlock.fence"
                 " FOR EACH ROW WHEN (NEW.key = %d) EXECUTE FUNCTION advlock.scenario_refuse()"
                 % s.key)
    try:
        told = await acquire(advlock.lock(await s.connect(), s.name, timeout=1, fence=True))
        assert holds(s.pg, s.key) == []
        return told
    finally:
        s.pg.execute("DROP TRIGGER scenario_refuse ON advlock.fence")
        s.pg.execute("DROP FUNCTION advlock.scenario_refuse()")


async def scene_lease_expiry(s):
    address = os.environ["ADVLOCK_PG_LISTEN"].split("/")[0]
    conn = await s.connect("host=%s port=%s user=postgres dbname=postgres"
                           % (address, os.environ["PGPORT"]))
    lk = advlock.lock(conn, s.name, timeout=5, lease=8, lease_stop=1)
    assert (await acquire(lk))[0].outcome == advlock.Outcome.ACQUIRED
    pid = announced_pid(conn)
    os.kill(pid, signal.SIGSTOP)  # the server stops answering, as behind a partition
    try:
        return await lost(lk)
    finally:
        s.pg.execute("SELECT pg_terminate_backend(%s)", (pid,))
        os.kill(pid, signal.SIGCONT)


async def scene_cancelled_grant_given_back(s):
    conn = await s.connect()
    await acquire(advlock.lock(conn, s.name + "/warm-up", timeout=1))  # the session check
    await release(LOCKS[-1])
    lk = advlock.lock(conn, s.name, timeout=5)
    pid = announced_pid(conn)
    os.kill(pid, signal.SIGSTOP)  # the try goes out, unanswered
    try:
        task = asyncio.create_task(acquire(lk))
        await asyncio.sleep(0.15)
        task.cancel()
    finally:
        os.kill(pid, signal.SIGCONT)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert holds(s.pg, s.key) == []  # the grant was given back
    # The CancelledError carries no report, and the lock object keeps none
    # (lk.report is None): the machine's is the one C's drivers return.
    report = lk._member_report()
    return report, report.describe(s.name)


async def scene_standby(s):
    return await acquire(advlock.lock(await s.connect(os.environ["ADVLOCK_TEST_STANDBY"]),
                                      s.name, timeout=1))


async def through_proxy(s, variable):
    lk = advlock.lock(await s.connect(os.environ[variable]), s.name, timeout=1)
    told = await acquire(lk)
    if told[0].outcome == advlock.Outcome.ACQUIRED:
        assert (await release(lk))[0].outcome == advlock.Outcome.RELEASED
    return told


async def scene_proxy_session_pool(s):
    return await through_proxy(s, "ADVLOCK_TEST_PGBOUNCER_SESSION")


async def scene_proxy_claimed_session(s):
    # A server session claimed by another token, which the transaction
    # pool keeps for the next client, and hands out first (LIFO).
    import psycopg
    with psycopg.connect(os.environ["ADVLOCK_TEST_PGBOUNCER_TX"], autocommit=True) as other:
        other.execute("SELECT pg_catalog.set_config('advlock.session', '999', false)")
    return await through_proxy(s, "ADVLOCK_TEST_PGBOUNCER_TX")


SCENES = {name[len("scene_"):]: fn for name, fn in globals().items()
          if name.startswith("scene_")}


# ---- judging ----------------------------------------------------------------------


def judge(row, report, words, name, who):
    """Asserts report and its words as the row says."""
    said = "%s: %r" % (who, words)
    assert report.outcome == advlock.Outcome[row["outcome"]], said
    assert report.failure == advlock.Failure[row["failure"]], said
    assert report.detail == advlock.Detail[row["detail"]], said
    if row["sql"] != "*":
        assert report.sql == advlock.Sql[row["sql"]], said
    expected = row["words"].replace("{name}", advlock.escape_name(name))
    if expected:
        assert expected in words, said
    else:
        assert words == "", said
    bounds = re.fullmatch(r"(\d+)\.\.(\d+)", row["elapsed_ms"])
    if bounds:
        assert int(bounds[1]) <= report.elapsed_ms <= int(bounds[2]), (said, report.elapsed_ms)
    if row["attempts"] != "-":
        assert report.attempts == int(row["attempts"]), (said, report.attempts)
    # A lock left in doubt is one its object says may be held.
    in_doubt = LOCKS[-1].state == advlock.LockState.MAY_BE_HELD
    assert in_doubt == (row["in_doubt"] == "yes"), (said, LOCKS[-1].state)
    print("%s: %s after %d ms, %d attempts: %s" % (who, report.outcome.name, report.elapsed_ms,
                                                   report.attempts, words))


@need_server
@pytest.mark.parametrize("row,driver", CASES)
def test_scenario(row, driver, pg_conn):
    assert row["needs"] == "-" or row["needs"] in NEEDS, row["needs"]
    variable = NEEDS.get(row["needs"])
    if variable is not None and not os.environ.get(variable):
        pytest.skip("needs %s (make python-scenarios-test)" % row["needs"])
    scene = SCENES.get(row["scenario"])
    assert scene is not None, "no setup here for the table's scenario %s" % row["scenario"]
    who = "%s/%s" % (row["scenario"], driver)
    name = "scenario/ключ/%s/%d" % (who, os.getpid())
    s = Scene(driver, name, pg_conn)
    LOCKS.clear()

    async def main():
        try:
            return await scene(s)
        finally:
            if s.conn is not None:
                await close(s.conn)

    report, words = asyncio.run(main())
    judge(row, report, words, name, who)
