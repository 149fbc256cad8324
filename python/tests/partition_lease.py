"""Python leases under the real kernel: a holder in the partition harness's
namespace (tests/partition/lib.sh) reaching PostgreSQL over TCP with
advlock.lock(..., lease=8), cut off silently; a contender outside, on the
Unix socket, polling the lock every 50 ms and taking the server's clock at
the grant.

Per partition it checks zero overlap (the body's last timestamp comes
before the contender's grant), that the holder learned (LockLost), and the
release bound (the grant comes within the lease + 2 s of the partition's
start, which is later than the last message the server received). Holders:
asyncpg and psycopg (blocking: the body calls lock.check() between writes),
PARTITION_RUNS each (default 2), then one psycopg AsyncConnection. Prints
the figures: the holder's stop, the release and the margin between them,
after the partition's start. Then a blip per driver: a 1 s partition under
lease=12 (D = 7 s), which the holder rides out: no stop, the lock never
free for the contender until the body ends on its own.

Usage (root; exits 77 where namespaces cannot be made):
  ADVLOCK_LIBRARY=build/libadvlock.so PYTHONPATH=python \\
    tests/partition/with-partition.sh /usr/bin/python3 python/tests/partition_lease.py
(run outside the harness, it runs itself inside one).
"""

import asyncio
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.normpath(os.path.join(HERE, "..", ".."))
LIB = os.path.join(TREE, "tests", "partition", "lib.sh")
LEASE_S = 8
SLACK_S = 2  # scheduling slack on top of the lease for the release bound
STAMP_S = 0.02  # how often a body writes its timestamp


# ---- the holder (inside the namespace) -------------------------------------------


def holder(flavour, name, out_path, lease=LEASE_S, seconds=None):
    """Takes the lock over TCP with a lease and writes a timestamp every
    STAMP_S until the lease is lost (or `seconds` passed); the last line
    says how it ended."""
    sys.path.insert(0, os.path.join(TREE, "python"))
    import advlock

    out = open(out_path, "a", buffering=1)
    lease = float(lease)
    end = time.monotonic() + float(seconds) if seconds else float("inf")

    def stamp(word):
        out.write("%s %.6f\n" % (word, time.time()))

    async def run_async():
        if flavour == "asyncpg":
            import asyncpg
            conn = await asyncpg.connect()
        else:
            import psycopg
            conn = await psycopg.AsyncConnection.connect("", autocommit=True)
        async with advlock.lock(conn, name, timeout=5, lease=lease):
            stamp("acquired")
            while time.monotonic() < end:
                stamp("work")
                await asyncio.sleep(STAMP_S)

    try:
        if flavour == "psycopg":
            import psycopg
            conn = psycopg.connect("", autocommit=True)
            with advlock.lock(conn, name, timeout=5, lease=lease) as lk:
                stamp("acquired")
                while time.monotonic() < end:
                    lk.check()
                    stamp("work")
                    time.sleep(STAMP_S)
        else:
            asyncio.run(run_async())
    except advlock.LockLost as exc:
        stamp("lost")
        out.write("reason %d\n" % exc.reason)
        return 0
    stamp("ended")
    return 0


# ---- the run (in the harness, outside the namespace) -------------------------------


def shell(command):
    """A function of tests/partition/lib.sh, with the harness's environment."""
    subprocess.run(["bash", "-c", '. "$0"; ' + command, LIB], check=True)


def lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def wait_for(predicate, seconds, step=0.02):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def start_holder(flavour, n, scratch, *args):
    """A holder in the namespace; returns (process, its output file, the
    lock's key) once it works, and a contender's connection on the Unix
    socket."""
    import psycopg
    sys.path.insert(0, os.path.join(TREE, "python"))
    import advlock

    name = "partition-%s-%d-%d" % (flavour, n, os.getpid())
    out = os.path.join(scratch, "holder-%s-%d" % (flavour, n))
    env = dict(os.environ, PGHOST=os.environ["ADVLOCK_PARTITION_SERVER_ADDR"])
    proc = subprocess.Popen(["ip", "netns", "exec", os.environ["ADVLOCK_PARTITION_NS"],
                             sys.executable, os.path.abspath(__file__), "holder", flavour, name,
                             out] + [str(a) for a in args], env=env)
    contender = psycopg.connect("", autocommit=True)  # the Unix socket
    if not wait_for(lambda: sum(1 for w in lines(out) if w[0] == "work") > 5, 15):
        proc.kill()
        raise AssertionError("%s: the holder did not start working" % flavour)
    return proc, out, advlock.derive_key(name), contender


def try_lock(contender, key):
    """The contender's try; (granted, the server's clock)."""
    return contender.execute(
        "SELECT pg_try_advisory_lock(%s), extract(epoch FROM clock_timestamp())::float8",
        (key,)).fetchone()


def poll_for_grant(contender, key, within_s):
    """The contender tries every 50 ms for within_s seconds; the server's
    clock at the grant, or None."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        got, at = try_lock(contender, key)
        if got:
            return at
        time.sleep(0.05)
    return None


def one_partition(flavour, n, scratch):
    """One partition of one holder; returns its figures (seconds after the
    partition's start): stop, release, margin (release minus last work)."""
    proc, out, key, contender = start_holder(flavour, n, scratch)
    try:
        # Somewhere between two heartbeats (H = 0.75 s for lease=8).
        time.sleep(random.uniform(0.5, 2.0))
        cut = time.time()
        shell("partition_on")
        grant = poll_for_grant(contender, key, LEASE_S + SLACK_S + 5)
        assert wait_for(lambda: proc.poll() is not None, 10), "%s: the holder went on" % flavour
        shell("partition_off")
        record = lines(out)
        last_work = max(float(w[1]) for w in record if w[0] == "work")
        lost = [float(w[1]) for w in record if w[0] == "lost"]
        assert lost, "%s: the holder never learned: %s" % (flavour, record[-2:])
        assert grant is not None, "%s: the lock was not free within %d s" % (
            flavour, LEASE_S + SLACK_S + 5)
        assert last_work < grant, "%s: overlap: work until %.3f, granted %.3f" % (
            flavour, last_work, grant)
        assert grant - cut <= LEASE_S + SLACK_S, "%s: released %.3f s after the cut" % (
            flavour, grant - cut)
        contender.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return lost[0] - cut, grant - cut, grant - last_work
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        contender.close()


def one_blip(flavour, n, scratch, blip_s=1.0, lease=12, body_s=6.0):
    """A partition shorter than the holder's deadline: it keeps the lock
    (no LockLost), and the contender gets it only after the body's end."""
    proc, out, key, contender = start_holder(flavour, n, scratch, lease, body_s)
    try:
        time.sleep(random.uniform(0.3, 1.0))
        shell("partition_on")
        time.sleep(blip_s)
        shell("partition_off")
        grant = poll_for_grant(contender, key, body_s + 5)
        assert wait_for(lambda: proc.poll() is not None, 10), "%s: the holder went on" % flavour
        record = lines(out)
        assert record[-1][0] == "ended", "%s: the holder stopped: %s" % (flavour, record[-2:])
        last_work = max(float(w[1]) for w in record if w[0] == "work")
        assert grant is not None, "%s: not released after the body" % flavour
        assert last_work < grant, "%s: overlap after a blip: work until %.3f, granted %.3f" % (
            flavour, last_work, grant)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        contender.close()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "holder":
        return holder(*sys.argv[2:7])
    if not os.environ.get("ADVLOCK_PARTITION_NS"):
        os.execv(os.path.join(TREE, "tests", "partition", "with-partition.sh"),
                 ["with-partition.sh", sys.executable, os.path.abspath(__file__)])
    runs = int(os.environ.get("PARTITION_RUNS", "2"))
    plan = [f for f in ("asyncpg", "psycopg") for _ in range(runs)] + ["psycopg-async"]
    figures = []
    for n, flavour in enumerate(plan):
        stop, release, margin = one_partition(flavour, n, os.environ["ADVLOCK_PARTITION_DIR"])
        print("%-13s stop %.3f s, release %.3f s after the cut; margin %.3f s"
              % (flavour, stop, release, margin))
        figures.append((stop, release, margin))
    for n, flavour in enumerate(("asyncpg", "psycopg"), len(plan)):
        one_blip(flavour, n, os.environ["ADVLOCK_PARTITION_DIR"])
        print("%-13s a 1 s blip under lease=12: kept the lock, no stop" % flavour)
    stops, releases, margins = zip(*figures)
    print("python leases (lease=%d): %d partitions, 0 overlaps; stop p50 %.3f max %.3f s;"
          " release p50 %.3f max %.3f s; margin p50 %.3f min %.3f s"
          % (LEASE_S, len(figures), statistics.median(stops), max(stops),
             statistics.median(releases), max(releases), statistics.median(margins),
             min(margins)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
