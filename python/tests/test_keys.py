"""Key derivation against the shared vectors (tests/vectors/*.tsv, and the
published /work/shared/vectors/keys.tsv when present), and against a real
server's pg_locks."""

import glob
import json
import os

import pytest

import advlock
from conftest import TREE, holds, need_server

FILES = sorted(glob.glob(os.path.join(TREE, "tests", "vectors", "*.tsv")))
PUBLISHED = os.environ.get("ADVLOCK_PUBLISHED_VECTORS", "/work/shared/vectors/keys.tsv")
if os.path.exists(PUBLISHED):
    FILES.append(PUBLISHED)


def vectors():
    out = []
    for path in FILES:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                name, key, classid, objid = line.rstrip("\n").split("\t")
                # JSON \u escapes: surrogate pairs join into one code point.
                raw = json.loads(name).encode("utf-8")
                out.append(pytest.param(raw, int(key), int(classid), int(objid),
                                        id="%s:%d" % (os.path.basename(path), n)))
    return out


VECTORS = vectors()


def test_vector_files_are_found():
    assert len(FILES) >= 2 and len(VECTORS) >= 30


@pytest.mark.parametrize("raw,key,classid,objid", VECTORS)
def test_key_vector(raw, key, classid, objid):
    assert advlock.derive_key(raw) == key
    assert (key >> 32) & 0xFFFFFFFF == classid and key & 0xFFFFFFFF == objid
    try:
        assert advlock.derive_key(raw.decode("utf-8")) == key  # str names: the same bytes
    except UnicodeDecodeError:
        pass


def test_the_long_published_key():
    assert advlock.derive_key(b"x" * 1048576) == 6838183679466477994


@pytest.mark.parametrize("raw", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                 b"a\x80"])
def test_bytes_that_are_not_utf8_are_refused(raw):
    with pytest.raises(advlock.CallError) as info:
        advlock.derive_key(raw)
    assert info.value.code == -2  # ADVLOCK_EUTF8


@need_server
def test_pg_locks_shows_the_vectors_classid_and_objid(pg_conn):
    import psycopg
    with psycopg.connect(autocommit=True) as conn:
        for p in VECTORS[:12]:
            raw, key, classid, objid = p.values
            with advlock.lock(conn, raw, timeout=0):
                row = pg_conn.execute(
                    "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype ="
                    " 'advisory' AND objsubid = 1 AND pid = %s", (conn.info.backend_pid,)
                ).fetchone()
                assert row == (classid, objid)
            assert holds(pg_conn, key) == []
