"""Which libadvlock an imported advlock runs on, and that it works there.

  python wheel_probe.py LIBDIR NAME KEY [--server]

Imports advlock as the interpreter finds it, loads both libraries (the
core, and the fake on demand), and fails unless every libadvlock file mapped
into the process lies in LIBDIR (symbolic links resolved: the process's own
map is the truth, not what the package says it asked for), NAME derives KEY,
and an installed package's version is its distribution's (the C header's).
With --server, also takes and releases NAME's lock with asyncpg on the
server the PG* variables name, checked from a second session in pg_locks.
scripts/check-wheel.sh runs it for each of the package's library-finding
rules it covers.
"""

import asyncio
import os
import sys
from importlib import metadata

import advlock
from advlock import _binding


def mapped_libraries():
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return sorted({line.split(None, 5)[5].strip() for line in maps
                       if "/libadvlock" in line})


async def lock_cycle(name, key):
    import asyncpg
    conn, observer = await asyncpg.connect(), await asyncpg.connect()
    # A bigint key shows in pg_locks as its high and low 32 bits.
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 " \
           "AND classid = $2::bigint::oid AND objid = $3::bigint::oid AND objsubid = 1"
    row = (conn.get_server_pid(), (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)
    try:
        async with advlock.lock(conn, name, timeout=5) as lock:
            assert lock.key == key, (lock.key, key)
            assert await observer.fetchval(held, *row) == 1, "pg_locks does not show the lock"
        assert await observer.fetchval(held, *row) == 0, "the lock outlived its release"
    finally:
        await conn.close()
        await observer.close()


def main():
    libdir, name, key = os.path.realpath(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    _binding.fake()
    libraries = mapped_libraries()
    found = [os.path.dirname(path) for path in libraries]
    assert found == [libdir, libdir], "advlock from %s mapped %s; wanted the core and the " \
        "fake from %s" % (advlock.__file__, libraries, libdir)
    assert advlock.derive_key(name) == key, (advlock.derive_key(name), key)
    try:  # installed: the distribution's version is the C header's
        version = metadata.version("advlock")
    except metadata.PackageNotFoundError:
        version = advlock.__version__
    assert advlock.__version__ == version, (advlock.__version__, version)
    if "--server" in sys.argv[4:]:
        asyncio.run(lock_cycle(name, key))
    print("advlock %s from %s runs on %s" % (advlock.__version__, os.path.dirname(advlock.__file__),
                                             " ".join(libraries)))


main()
