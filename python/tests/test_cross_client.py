"""C clients (the blocking libpq adapter, as `advlock run`) and Python
clients (asyncpg, psycopg) contend for the same names on one server at
once: never two inside a critical section, and pg_locks agrees."""

import asyncio
import os
import subprocess
import threading
import time

import pytest

import advlock
from conftest import TREE, build_dir, holds, need_server

pytestmark = need_server

NAMES = ["cross-a", "cross-b"]
ROUNDS = 12
HOLD_S = 0.015

SQL_GRANTED = ("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
               " AND granted AND ((classid::bigint << 32) | objid::bigint) = $1")


def cli():
    path = os.environ.get("ADVLOCK_CLI") or os.path.join(build_dir(), "advlock")
    if not os.path.exists(path):
        pytest.skip("no advlock command (make all builds it)")
    return path


class Arena:
    """Marker files: entering creates NAME.inside with O_EXCL, so a second
    holder at the same time is seen as an overlap whoever it is."""

    def __init__(self, d):
        self.dir = d
        self.overlaps = []
        self.counts = {}
        self.guard = threading.Lock()

    def enter(self, name, who):
        try:
            os.close(os.open(os.path.join(self.dir, name + ".inside"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            with self.guard:
                self.overlaps.append((name, who))

    def leave(self, name, who):
        os.unlink(os.path.join(self.dir, name + ".inside"))
        with self.guard:
            self.counts[who] = self.counts.get(who, 0) + 1


def c_client(arena, name, extra):
    # The critical section in sh: noclobber (set -C) creates with O_EXCL.
    section = ('set -C; : > "$D/$N.inside" 2>/dev/null || echo "$N c" >> "$D/overlaps";'
               ' sleep %s; rm -f "$D/$N.inside"; echo x >> "$D/$N.c-count"' % HOLD_S)
    script = 'for i in $(seq %d); do "$A" run -q -w 30 %s "$N" -- sh -c \'%s\' || exit 1; done' \
        % (ROUNDS, extra, section)
    env = dict(os.environ, A=cli(), D=arena.dir, N=name)
    return subprocess.Popen(["sh", "-c", script], env=env)


async def asyncpg_client(arena, name, who, **options):
    import asyncpg
    conn = await asyncpg.connect()
    me = conn.get_server_pid()
    key = advlock.derive_key(name)
    for _ in range(ROUNDS):
        async with advlock.lock(conn, name, timeout=30, **options):
            arena.enter(name, who)
            assert [r[0] for r in await conn.fetch(SQL_GRANTED, key)] == [me]
            await asyncio.sleep(HOLD_S)
            arena.leave(name, who)
    await conn.close()


def psycopg_client(arena, name, who, errors, **options):
    import psycopg
    try:
        with psycopg.connect(autocommit=True) as conn:
            me = conn.info.backend_pid
            key = advlock.derive_key(name)
            for _ in range(ROUNDS):
                with advlock.lock(conn, name, timeout=30, **options):
                    arena.enter(name, who)
                    rows = conn.execute(SQL_GRANTED.replace("$1", "%s"), (key,)).fetchall()
                    assert [r[0] for r in rows] == [me]
                    time.sleep(HOLD_S)
                    arena.leave(name, who)
    except BaseException as exc:  # noqa: B902 - reported by the test
        errors.append(exc)


def monitor(stop, samples, violations):
    import psycopg
    keys = {advlock.derive_key(n): n for n in NAMES}
    with psycopg.connect(autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT ((classid::bigint << 32) | objid::bigint), count(*) FROM pg_locks"
                " WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
                " GROUP BY 1").fetchall()
            samples.append(len(rows))
            for key, n in rows:
                if key in keys and n > 1:
                    violations.append((keys[key], n))
            time.sleep(0.002)


def test_c_and_python_clients_exclude_each_other(tmp_path, pg_conn):
    arena = Arena(str(tmp_path))
    stop, samples, violations, errors = threading.Event(), [], [], []
    mon = threading.Thread(target=monitor, args=(stop, samples, violations))
    mon.start()
    procs = []
    for name in NAMES:
        procs.append(c_client(arena, name, ""))
        procs.append(c_client(arena, name, "--jitter"))
    threads = []
    for name in NAMES:
        threads.append(threading.Thread(target=psycopg_client,
                                        args=(arena, name, "psycopg-poll-" + name, errors)))
        threads.append(threading.Thread(
            target=psycopg_client, args=(arena, name, "psycopg-wait-" + name, errors),
            kwargs=dict(wait=advlock.WAIT_SERVER)))
    for t in threads:
        t.start()

    async def python_async():
        await asyncio.gather(*(
            c for name in NAMES for c in (
                asyncpg_client(arena, name, "asyncpg-poll-" + name),
                asyncpg_client(arena, name, "asyncpg-wait-" + name, wait=advlock.WAIT_SERVER),
                asyncpg_client(arena, name, "asyncpg-jitter-" + name,
                               backoff=advlock.FULL_JITTER))))
    try:
        asyncio.run(python_async())
    finally:
        for t in threads:
            t.join()
        for p in procs:
            assert p.wait(timeout=120) == 0
        stop.set()
        mon.join()
    assert errors == []
    c_overlaps = open(os.path.join(arena.dir, "overlaps")).read() \
        if os.path.exists(os.path.join(arena.dir, "overlaps")) else ""
    assert arena.overlaps == [] and c_overlaps == "" and violations == []
    for name in NAMES:
        with open(os.path.join(arena.dir, name + ".c-count")) as f:
            assert len(f.read().split()) == 2 * ROUNDS
        for kind in ("psycopg-poll-", "psycopg-wait-", "asyncpg-poll-", "asyncpg-wait-",
                     "asyncpg-jitter-"):
            assert arena.counts[kind + name] == ROUNDS
        assert holds(pg_conn, advlock.derive_key(name)) == []
    assert len(samples) > 10
