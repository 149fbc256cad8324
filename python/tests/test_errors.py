"""What the package raises: one root (advlock.Error), the documented
exceptions for bad arguments and a busy connection, and a `with` body's
exception kept over a failed release, against a real server."""

import asyncio
import math
import os
import re

import pytest

import advlock
from advlock import _binding as B
from clients import FLAVOURS, announced_pid, call, close, connect
from conftest import TREE, holds, need_server

PACKAGE = os.path.join(TREE, "python", "advlock")


def test_every_exception_of_the_package_derives_from_error():
    from advlock import fake
    for cls in (advlock.LockError, advlock.LockTimeout, advlock.LockFailed,
                advlock.StandbyError, advlock.ServerSessionError, advlock.LockCancelled,
                advlock.CallError, advlock.ArgumentTypeError, fake.InvariantViolation):
        assert issubclass(cls, advlock.Error), cls
    assert issubclass(advlock.LockTimeout, TimeoutError)
    assert issubclass(advlock.CallError, ValueError)
    with pytest.raises(advlock.ArgumentTypeError) as info:
        advlock.lock(object(), "x")
    assert isinstance(info.value, TypeError) and info.value.code == B.ADVLOCK_EINVAL
    with pytest.raises(advlock.Error):
        advlock.derive_key(12)


def test_a_name_with_a_lone_surrogate_is_refused_as_not_utf8():
    for call_with in (advlock.derive_key, advlock.escape_name):
        with pytest.raises(advlock.CallError) as info:
            call_with("lock-\udc80")
        assert info.value.code == B.ADVLOCK_EUTF8
        assert str(info.value) == "lock key is not valid UTF-8"


def test_timeouts_infinity_is_no_limit_and_nan_or_negative_are_refused():
    from advlock._machine import timeout_ms
    assert timeout_ms(math.inf) == timeout_ms(None) == B.INT64_MAX
    assert timeout_ms(1e300) == B.INT64_MAX and timeout_ms(0.5) == 500
    for bad in (math.nan, -1, -math.inf):
        with pytest.raises(advlock.CallError) as info:
            timeout_ms(bad)
        assert info.value.code == B.ADVLOCK_EINVAL
    with pytest.raises(advlock.ArgumentTypeError):
        timeout_ms("5")


def test_no_private_name_of_asyncio_or_asyncpg_outside_their_shims():
    private = re.compile(
        r"_asyncio_future_blocking|_fut_waiter|_cancel_current_command|\._con\b")
    found = {}
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
                hits = private.findall(f.read())
            if hits:
                found[name] = hits
    assert found == {"_asyncpg_cancel.py": ["_cancel_current_command"] * 2,
                     "_asyncio_task.py": ["_fut_waiter", "_asyncio_future_blocking"] * 2
                     + ["_asyncio_future_blocking"] * 2}


def run(coro_fn):
    asyncio.run(coro_fn())


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_names_and_timeouts_against_a_server(flavour, pg_conn):
    async def main():
        conn = await connect(flavour)
        try:
            with pytest.raises(advlock.CallError) as info:
                advlock.lock(conn, "\udcff", timeout=0)
            assert info.value.code == B.ADVLOCK_EUTF8
            lk = advlock.lock(conn, "no-limit", timeout=math.inf)
            r = await call(lk.acquire)
            assert r.outcome == advlock.Outcome.ACQUIRED and r.timeout_ms == B.INT64_MAX
            assert holds(pg_conn, r.key) == [(announced_pid(conn), "ExclusiveLock")]
            await call(lk.release)
            with pytest.raises(advlock.CallError):
                await call(advlock.lock(conn, "nan", timeout=math.nan).acquire)
        finally:
            await close(conn)
    run(main)


class WorkFailed(Exception):
    """The body's own failure."""


async def abort_a_transaction(conn):
    """Leaves conn in a failed transaction block (the unlock then fails
    with 25P02)."""
    await call(conn.execute, "BEGIN")
    with pytest.raises(Exception):
        await call(conn.execute, "SELECT 1/0")


async def hold_and_fail(flavour, conn, name, during_body):
    """Takes name with `with` (or `async with`), runs during_body() inside,
    then raises WorkFailed; returns the lock and what propagated."""
    lk = advlock.lock(conn, name, timeout=5)
    try:
        if flavour == "psycopg":
            with lk:
                await during_body()
                raise WorkFailed("the work failed")
        else:
            async with lk:
                await during_body()
                raise WorkFailed("the work failed")
    except BaseException as exc:  # noqa: B902 - what propagates is the test's subject
        return lk, exc
    raise AssertionError("nothing propagated")


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_session_terminated_in_the_body_is_lock_lost_from_the_bodys_exception(flavour,
                                                                                pg_conn):
    """The backend is terminated inside the body, which then raises: the
    lock was lost during the body, so leaving it raises LockLost from the
    body's exception (never LockFailed), and the lock is reported gone with
    its session."""
    async def main():
        conn = await connect(flavour)
        pid = announced_pid(conn)

        async def terminate():
            pg_conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

        try:
            lk, exc = await hold_and_fail(flavour, conn, "body-terminated", terminate)
        finally:
            await close(conn)
        assert type(exc) is advlock.LockLost and exc.reason is advlock.LeaseExpiry.CONNECTION \
            and exc.ended
        assert type(exc.__cause__) is WorkFailed and str(exc.__cause__) == "the work failed"
        assert str(exc).startswith("Lock 'body-terminated' lost: the connection holding it"
                                   " closed: the server ended the session")
        assert exc.report.outcome == advlock.Outcome.FAILED
        assert exc.report.failure == advlock.Failure.ECONNLOST
        assert exc.report.detail == advlock.Detail.LOST
        assert lk.state == advlock.LockState.NOT_HELD
        assert holds(pg_conn, lk.key) == []
    run(main)


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_release_refused_by_the_server_keeps_the_bodys_exception(flavour, pg_conn):
    """The body leaves its transaction aborted, then raises: the unlock
    fails (25P02), the body's exception propagates with that failure as a
    note, and the lock is reported as possibly held, as it is."""
    async def main():
        conn = await connect(flavour)

        try:
            lk, exc = await hold_and_fail(flavour, conn, "body-aborted",
                                          lambda: abort_a_transaction(conn))
            assert type(exc) is WorkFailed
            assert lk.release_report.sqlstate == "25P02"
            assert lk.state == advlock.LockState.MAY_BE_HELD
            assert len(exc.__notes__) == 1 and exc.__notes__[0].startswith(
                "advlock: releasing lock 'body-aborted' failed during this exception:"
                " LockFailed: pg_advisory_unlock for 'body-aborted' failed with SQLSTATE"
                " 25P02")
            assert exc.__notes__[0].endswith("(lock state: may still be held)")
            assert holds(pg_conn, lk.key) == [(announced_pid(conn), "ExclusiveLock")]
            await call(conn.execute, "ROLLBACK")
            assert (await call(lk.release)).outcome == advlock.Outcome.RELEASED
            assert lk.state == advlock.LockState.NOT_HELD
        finally:
            await close(conn)
    run(main)


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_acquire_after_a_failed_release_starts_anew(flavour, pg_conn):
    """A release the server refused leaves the lock in doubt (the session
    still holds it); acquiring through the same object again lets go of
    that hold and takes the lock anew, as the C single-lock adapter does:
    the server session then holds the key twice, once for the hold let go."""
    async def main():
        conn = await connect(flavour)

        try:
            lk, exc = await hold_and_fail(flavour, conn, "again-after-doubt",
                                          lambda: abort_a_transaction(conn))
            assert lk.state == advlock.LockState.MAY_BE_HELD
            await call(conn.execute, "ROLLBACK")
            assert (await call(lk.acquire)).outcome == advlock.Outcome.ACQUIRED
            assert lk.state == advlock.LockState.HELD
            assert (await call(lk.release)).outcome == advlock.Outcome.RELEASED
            assert holds(pg_conn, lk.key) == [(announced_pid(conn), "ExclusiveLock")]
        finally:
            await close(conn)
    run(main)


@need_server
def test_two_concurrent_acquires_on_one_asyncpg_connection_take_turns(pg_conn):
    """asyncpg runs one operation at a time per connection: the locks on a
    connection are members of its one engine, whose pump sends their
    statements one after another, so both acquires succeed."""
    async def main():
        conn = await connect("asyncpg")
        try:
            first = advlock.lock(conn, "busy-first", timeout=5)
            second = advlock.lock(conn, "busy-second", timeout=5)
            results = await asyncio.gather(first.acquire(), second.acquire())
            assert [r.outcome for r in results] == [advlock.Outcome.ACQUIRED] * 2
            assert holds(pg_conn, second.key) != []
            await first.release()
            await second.release()
            assert holds(pg_conn, second.key) == []
        finally:
            await close(conn)
    run(main)


# ---- every error path a caller can reach raises an advlock.Error ----------------

BAD_CALLS = [
    # (what, the call's keywords, a fragment of the message)
    ("a mode that does not exist", dict(mode="bogus"), "mode must be one of"),
    ("a scope that does not exist", dict(scope=7), "scope must be one of"),
    ("a wait that does not exist", dict(wait="soon"), "wait must be one of"),
    ("a backoff that does not exist", dict(backoff=9), "backoff must be one of"),
    ("a jitter seed that is not an int", dict(jitter_seed="x"), "jitter_seed is an int"),
    ("an option that does not exist", dict(nonsense=1), "no such option: nonsense"),
    ("options= that is not an Options", dict(options="x"), "options is an advlock.Options"),
    ("fence with a shared mode", dict(mode=advlock.SHARED, fence=True),
     "fence=True needs mode=advlock.EXCLUSIVE: a fencing token orders holders"),
    ("fence with a server-side wait", dict(wait=advlock.WAIT_SERVER, fence=True),
     "fence=True needs wait=advlock.WAIT_POLL: the token is issued by the try-lock"),
    ("a lease too long", dict(lease=1e9), "lease=1000000000.0 is too long: at most 32400 s"),
    ("a lease far too long", dict(lease=1e300), "lease=1e+300 is too long: at most 32400 s"),
    ("an int lease far too long", dict(lease=2 ** 70),
     "lease=1180591620717411303424 is too long"),
    ("an infinite lease", dict(lease=float("inf")), "lease=inf is not a finite number"),
    ("a lease that is nan", dict(lease=float("nan")), "lease=nan is not a finite number"),
    ("a lease too short", dict(lease=6.9), "too short for lease_stop=1"),
    ("a lease that is not a number", dict(lease="8"), "lease is seconds"),
    ("a negative stop time", dict(lease_stop=-1), "lease_stop=-1 must be >= 0"),
    ("an infinite stop time", dict(lease_stop=float("-inf")),
     "lease_stop=-inf is not a finite number"),
    ("a stop time far too long", dict(lease_stop=1e300), "lease_stop=1e+300 is too long"),
]


@pytest.mark.parametrize("what,kwargs,words", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_a_refused_argument_is_a_call_error_that_says_why(what, kwargs, words):
    from advlock._lock import Lock
    with pytest.raises(advlock.CallError) as info:
        Lock(None, None, "x", **kwargs)
    assert words in str(info.value), str(info.value)
    assert info.value.code == B.ADVLOCK_EINVAL


def test_the_longest_lease_is_the_cores():
    from advlock._lock import Lock
    assert Lock(None, None, "x", lease=9 * 3600)._lease[0] == B.LEASE_MAX_MS
    with pytest.raises(advlock.CallError, match="too long"):
        Lock(None, None, "x", lease=9 * 3600 + 0.001)


async def _closed(flavour):
    conn = await connect(flavour)
    await close(conn)
    return conn


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_closed_connection_is_a_call_error_that_says_so(flavour):
    conn = asyncio.run(_closed(flavour))
    makers = [lambda: advlock.lock(conn, "closed", timeout=0)]
    if flavour != "psycopg":
        makers.append(lambda: advlock.LockSet(conn))
    for make in makers:
        with pytest.raises(advlock.CallError) as info:
            make()
        assert "the connection cannot take a lock: it is closed" in str(info.value)


@need_server
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_error_path_against_a_server_is_an_advlock_error(flavour, pg_conn):
    """The paths a caller reaches with a real connection, each an
    advlock.Error: bad calls, a timeout, a server error, a connection the
    server ended before and while a lock is held, a set refusing."""
    async def main():
        conn, other = await connect(flavour), await connect(flavour)
        raised = {}

        async def attempt(what, fn, *args):
            try:
                await call(fn, *args)
            except BaseException as exc:  # noqa: B902 - what is raised is the subject
                raised[what] = exc
            else:
                raised[what] = None

        await attempt("a name of the wrong type", advlock.lock, conn, 12)
        await attempt("a timeout of the wrong type",
                      advlock.lock(conn, "e", timeout="1").acquire)
        await attempt("a negative timeout", advlock.lock(conn, "e", timeout=-1).acquire)
        held = advlock.lock(conn, "e-held-" + flavour, timeout=0)
        await call(held.acquire)
        await attempt("a timeout", advlock.lock(other, "e-held-" + flavour, timeout=0).acquire)
        if flavour != "psycopg":
            await attempt("a set on a transaction scope", lambda: advlock.LockSet(other).lock(
                "e", scope=advlock.TRANSACTION))
            await attempt("a lease per set lock", lambda: advlock.LockSet(other).lock(
                "e", lease=8))
        else:
            await attempt("a set on a blocking connection", advlock.LockSet, other)
        pg_conn.execute("SELECT pg_terminate_backend(%s, 5000)", (announced_pid(conn),))
        await asyncio.sleep(0.05)
        await attempt("a lock lost with its session", held.release)
        await attempt("an acquire on a connection the server ended",
                      lambda: advlock.lock(conn, "e-after", timeout=0).acquire())
        await close(conn)
        await attempt("a lock on a connection closed by its owner", advlock.lock, conn, "e")
        await close(other)
        for what, exc in raised.items():
            assert isinstance(exc, advlock.Error), (what, exc)
        assert type(raised["a timeout"]) is advlock.LockTimeout
        assert type(raised["a lock lost with its session"]) is advlock.LockLost
    run(main)
