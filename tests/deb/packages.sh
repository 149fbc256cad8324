#!/usr/bin/env bash
# The Debian packages as their users meet them: installs DEB_DIR's packages
# (default build/deb, from `make deb`) on this system with apt-get, then, with
# nothing of the source tree in reach,
#   advlock          /usr/bin/advlock derives the reference's key, and
#                    `advlock run` holds the lock on the server while the
#                    command runs; its man page is where man looks;
#   libadvlock-dev   pkg-config names the multiarch libraries, and a program
#                    built with what it says alone (no rpath) takes a lock on
#                    the server through libadvlock_pq, the loader finding
#                    the installed libraries;
#   python3-advlock  /usr/bin/python3 under `env -i` imports the package,
#                    which loads the installed libadvlock.so.1 by its soname,
#                    derives the key, and locks on the server with the client
#                    the package recommends (psycopg 3, else asyncpg);
#   the systemd example of docs/operators.md, run as printed
#                    (systemd-unit.sh);
# then purges the packages and checks that no file any of them held remains
# (the Python byte code compiled at install time included). Always purges,
# on failure too: an installed advlock must not stand in for the source
# tree's in the other tests. Needs root (installs on the real system, as CI
# runs it), else skipped. Packages of these four names found on the system
# first (what a run killed before its purge leaves: SIGKILL runs no trap) are
# purged, and the output says so: the test then starts from none of them.
# Runs under tests/pg/with-postgres.sh, its server listening on TCP too
# (ADVLOCK_PG_LISTEN).
set -u
. "$(dirname "$0")/../cli/lib.sh"
apt=("$(dirname "$0")/../../scripts/apt-get.sh")
deb_dir=$(realpath "${DEB_DIR:-build/deb}")
packages=(libadvlock1 libadvlock-dev advlock python3-advlock)

if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: installing the packages needs root (CI runs make deb-test as root)"
    exit 77
fi
# One run at a time on this machine: a second would purge the first's
# packages as leftovers. The kernel drops the lock with the process, even
# one killed by SIGKILL.
exec 9>/run/lock/advlock-deb-test.lock
flock -w 300 9 || { echo "another deb-test held /run/lock/advlock-deb-test.lock for 300 s" >&2; exit 1; }
debs=("$deb_dir"/*.deb)
[ "${#debs[@]}" -eq 4 ] || { echo "expected the 4 packages in $deb_dir, found: ${debs[*]}" >&2; exit 1; }
# The libraries' file names carry the version, as the Makefile names them.
version=$(scripts/version.sh)

work=$(mktemp -d)
export DEBIAN_FRONTEND=noninteractive
# Any state but not-installed (installed, config-files, half-installed...).
leftovers=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) || continue
    [ "$status" = not-installed ] || leftovers+=("$p")
done
if [ "${#leftovers[@]}" -gt 0 ]; then
    echo "purging leftovers of an earlier run first: ${leftovers[*]}"
    "${apt[@]}" purge -y -qq "${leftovers[@]}" >"$work/leftovers.log" 2>&1 ||
        { cat "$work/leftovers.log" >&2; echo "apt-get purge of the leftovers failed" >&2; rm -rf "$work"; exit 1; }
fi
purge() { "${apt[@]}" purge -y -qq "${packages[@]}" >"$work/purge.log" 2>&1; }
trap 'purge; rm -rf "$work"' EXIT
"${apt[@]}" install -y -qq "${debs[@]}" >"$work/install.log" 2>&1 ||
    { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq "${debs[@]}"; } >>"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; echo "apt-get install failed" >&2; exit 1; }
# Every file and link the packages put in place, for the check after the purge.
for p in "${packages[@]}"; do
    dpkg -L "$p"
done | while IFS= read -r path; do [ -d "$path" ] && [ ! -L "$path" ] || echo "$path"; done \
    >"$work/files"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
pg_env=(PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" PGDATABASE="$PGDATABASE")

# ---- advlock -------------------------------------------------------------------
vector=$(sed -n 2p tests/vectors/keys.tsv)
name=$(printf '%s' "$vector" | cut -f1 | sed 's/^"//; s/"$//')
want_key=$(printf '%s' "$vector" | cut -f2)
capture env -i /usr/bin/advlock key "$name"
check "advlock key: the reference's key" "$want_key" "$(printf '%s' "$OUT" | cut -f1)"
for p in "${packages[@]}"; do
    check "$p: MIT (Expat) in its copyright file" "License: Expat" \
        "$(grep -m 1 '^License: Expat$' "/usr/share/doc/$p/copyright")"
done
capture env -i /usr/bin/advlock --version
check "advlock --version" "advlock $(dpkg-query -W -f='${Version}' advlock | sed 's/-[^-]*$//')" "$OUT"
check "man page found" /usr/share/man/man1/advlock.1.gz "$(man -w advlock 2>/dev/null)"
check "man page: the version in its footer" "$OUT" \
    "$(zcat /usr/share/man/man1/advlock.1.gz | sed -n 's/^\.TH ADVLOCK 1 "[^"]*" "\([^"]*\)".*/\1/p')"
read -r _ _ classid objid < <(/usr/bin/advlock key deb-test-run)
held_sql="SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
          AND classid = $classid AND objid = $objid AND objsubid = 1"
capture env -i "${pg_env[@]}" /usr/bin/advlock run --timeout 10 deb-test-run -- \
    /usr/bin/psql -X -At -c "$held_sql"
check "advlock run: status" 0 "$RC"
check "advlock run: the lock held while the command runs" 1 "$OUT"
check "advlock run: released after" 0 "$(psql -X -At -c "$held_sql")"

# ---- libadvlock-dev ------------------------------------------------------------
pc_env=(env -i PATH=/usr/bin:/bin)
capture "${pc_env[@]}" pkg-config --libs advlock_pq
check "pkg-config --libs advlock_pq" "0 -ladvlock_pq -ladvlock -lpq" "$RC ${OUT% }$ERR"
check "pkg-config: the multiarch libdir" "$libdir" \
    "$("${pc_env[@]}" pkg-config --variable=libdir advlock_pq)"
cat >"$work/lock.c" <<'C'
#include <advlock_pq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Takes "deb-test-c" on the server PG* names, counts this session's granted
 * advisory locks while holding it and after releasing it: prints "1 0". */
static long held(PGconn *conn)
{
    PGresult *res = PQexec(conn, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                                 " AND granted AND pid = pg_backend_pid()");
    long n = PQresultStatus(res) == PGRES_TUPLES_OK ? strtol(PQgetvalue(res, 0, 0), NULL, 10) : -1;
    PQclear(res);
    return n;
}

int main(void)
{
    PGconn *conn = PQconnectdb("");
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(conn));
        return 1;
    }
    advlock_pq a;
    advlock_pq_report r;
    const char *name = "deb-test-c";
    if (advlock_pq_init(&a, conn) != 0 || advlock_pq_acquire(&a, name, strlen(name), 10000, &r) != 0 ||
        r.lock.outcome != ADVLOCK_ACQUIRED)
        return 2;
    long during = held(conn);
    if (advlock_pq_release_key(&a, r.lock.key, &r) != 0)
        return 3;
    printf("%ld %ld\n", during, held(conn));
    PQfinish(conn);
    return 0;
}
C
# shellcheck disable=SC2046 # pkg-config's words are the compiler's arguments
if "${CC:-cc}" -std=c11 -Wall -Wextra -Werror -o "$work/lock" "$work/lock.c" \
    $("${pc_env[@]}" pkg-config --cflags --libs advlock_pq) 2>"$work/cc.log"; then
    pass
    capture env -i "${pg_env[@]}" "$work/lock"
    check "a program built against libadvlock-dev locks" "0 1 0" "$RC $OUT"
    # /lib is /usr/lib on a merged /usr: the same file, under either name.
    check "its libadvlock_pq: the package's" "$(realpath "$libdir/libadvlock_pq.so.1")" \
        "$(realpath "$(ldd "$work/lock" | awk '$1 == "libadvlock_pq.so.1" { print $3 }')")"
    check "no rpath in it" "" "$(readelf -d "$work/lock" | grep -E 'RPATH|RUNPATH')"
else
    fail "a program with pkg-config's flags alone did not build: $(cat "$work/cc.log")"
fi

# ---- python3-advlock -----------------------------------------------------------
cat >"$work/key.py" <<'PY'
import sys

import advlock
from advlock import _binding

_binding.fake()  # libadvlock_fake, for advlock.fake's deterministic tests
with open("/proc/self/maps") as maps:
    loaded = sorted({line.split()[-1] for line in maps if "/libadvlock" in line})
print(advlock.derive_key(sys.argv[1]), advlock.__file__, *loaded)
PY
capture env -i /usr/bin/python3 "$work/key.py" "$name"
check "python3: import advlock and derive the key" \
    "$want_key /usr/lib/python3/dist-packages/advlock/__init__.py $libdir/libadvlock.so.$version $libdir/libadvlock_fake.so.$version" \
    "$OUT$ERR"
cat >"$work/lock.py" <<'PY'
import asyncio
import importlib.util

import advlock

HELD = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND pid = pg_backend_pid()")

if importlib.util.find_spec("psycopg"):
    import psycopg
    with psycopg.connect(autocommit=True) as conn:
        with advlock.lock(conn, "deb-test-py", timeout=10):
            print("psycopg", conn.execute(HELD).fetchone()[0])
elif importlib.util.find_spec("asyncpg"):
    import asyncpg

    async def main():
        conn = await asyncpg.connect()
        async with advlock.lock(conn, "deb-test-py", timeout=10):
            print("asyncpg", await conn.fetchval(HELD))
        await conn.close()
    asyncio.run(main())
else:
    print("neither python3-psycopg nor python3-asyncpg, though recommended")
PY
capture env -i "${pg_env[@]}" /usr/bin/python3 "$work/lock.py"
case "$RC $OUT" in
"0 psycopg 1" | "0 asyncpg 1") pass ;;
*) fail "python3: a lock on the server: status $RC, [$OUT] $ERR" ;;
esac

# ---- the systemd example ----------------------------------------------------------
. "$(dirname "$0")/systemd-unit.sh"

# ---- purge ---------------------------------------------------------------------
purge || fail "apt-get purge: $(cat "$work/purge.log")"
left=$(while IFS= read -r path; do [ -e "$path" ] || [ -L "$path" ] && echo "$path"; done <"$work/files")
check "purged: no file of the packages left" "" "$left"
check "purged: no directory of the packages left" "" \
    "$(ls -d /usr/lib/python3/dist-packages/advlock /usr/share/doc/{libadvlock1,libadvlock-dev,advlock,python3-advlock} 2>/dev/null)"
[ -s "$work/files" ] || fail "dpkg -L listed no files"
# A passing run shows its last line alone: the leftovers purged are said there too.
if [ "${#leftovers[@]}" -gt 0 ]; then
    tally=$(finish) && rc=0 || rc=$?
    echo "$tally (having purged an earlier run's leftovers first: ${leftovers[*]})"
    exit "$rc"
fi
finish
