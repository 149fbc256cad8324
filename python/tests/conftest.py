"""Shared fixtures. Real-server tests need the throwaway server that
tests/pg/with-postgres.sh starts (PGHOST etc. in the environment); without
it they are skipped, and `make python-test` always provides one."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TREE, "python"))

import advlock  # noqa: E402


def build_dir():
    """The C build directory the package loaded its libraries from."""
    lib = os.environ.get("ADVLOCK_LIBRARY")
    if lib:
        return os.path.dirname(lib)
    return os.path.join(TREE, os.environ.get("ADVLOCK_BUILD", "build"))


need_server = pytest.mark.skipif(not os.environ.get("PGHOST"),
                                 reason="no PostgreSQL (run through tests/pg/with-postgres.sh)")


@pytest.fixture
def pg_conn():
    """A psycopg autocommit connection for looking at pg_locks."""
    import psycopg
    with psycopg.connect(autocommit=True) as conn:
        yield conn


def holds(conn, key, pid=None):
    """pg_locks' granted advisory rows for key: [(pid, mode)]."""
    rows = conn.execute(
        "SELECT pid, mode FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
        " AND granted AND ((classid::bigint << 32) | objid::bigint) = %s ORDER BY pid",
        (key,)).fetchall()
    return [r for r in rows if pid is None or r[0] == pid]
