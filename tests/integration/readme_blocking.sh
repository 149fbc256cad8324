#!/usr/bin/env bash
# README's blocking example, compiled and run as printed there against the
# real server (with-postgres.sh's PG* variables): the block after the
# "tested: tests/integration/readme_blocking.sh" mark, inside a main() that
# connects and defines run_migrations(). It must
#   take the lock and run the migrations, leaving no lock behind;
#   report a timeout in the reference's words while another session holds
#     the lock (the block's 30 s timeout, shortened here by rewriting it);
#   report a refused call (the connection busy with a statement of the
#     caller's: nothing sent) as refused, in advlock_strerror()'s words,
#     never as a failed pg_try_advisory_lock.
# BUILD names the build directory (default build).
set -u
. "$(dirname "$0")/../cli/lib.sh"
build=${BUILD:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

awk '/<!-- tested: tests\/integration\/readme_blocking.sh/ {armed = 1; next}
     armed && /^```c/ {inside = 1; next} inside && /^```/ {exit} inside {print}' \
    README.md >"$work/block.c"
[ -s "$work/block.c" ] || { fail "README.md has no block marked for this test"; finish; exit; }
{
    echo '#include <stdio.h>'
    echo '#include <string.h>'
    grep '^#include' "$work/block.c"
    cat <<'C'
static void run_migrations(PGconn *conn)
{
    printf("migrating on %d\n", PQbackendPID(conn));
}

int main(int argc, char **argv)
{
    PGconn *conn = PQconnectdb("");
    if (PQstatus(conn) != CONNECTION_OK)
        return 2;
    if (argc > 1 && strcmp(argv[1], "busy") == 0 && PQsendQuery(conn, "SELECT 1") != 1) /* busy: the caller's statement */
        return 2;
C
    grep -v '^#include' "$work/block.c" | sed 's/"migrations", 10, 30000/"migrations", 10, TIMEOUT_MS/'
    echo '    PQfinish(conn);'
    echo '    return 0;'
    echo '}'
} >"$work/readme.c"
grep -q TIMEOUT_MS "$work/readme.c" || fail "the block's acquire call is not the one this test knows"

${CC:-cc} -std=c11 -Wall -Wextra -Werror -DTIMEOUT_MS=300 -Iinclude -I"$(pg_config --includedir)" \
    -o "$work/readme" "$work/readme.c" "$build/libadvlock_pq.a" "$build/libadvlock.a" \
    -lpq -lcrypto -lpthread || { fail "the README block does not compile"; finish; exit; }

locks() { psql -XAtqc "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"; }

capture "$work/readme"
check "acquired: status" 0 "$RC"
grep -q '^migrating on [0-9]*$' <<<"$OUT" && pass || fail "acquired: no migration ran: $OUT"
check "acquired: nothing on stderr" "" "$ERR"
check "acquired: no lock left" 0 "$(locks)"

# Another session holds the lock (the derived key of "migrations").
key=$("${ADVLOCK:-$build/advlock}" key migrations | awk '{ print $1 }')
psql -Xq -c "SELECT pg_advisory_lock($key)" -c "SELECT pg_sleep(5)" >/dev/null &
holder=$!
for _ in $(seq 50); do [ "$(locks)" = 1 ] && break; sleep 0.1; done
capture "$work/readme"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
check "held elsewhere: status" 0 "$RC"
check "held elsewhere: no migration" "" "$OUT"
check "held elsewhere: the reference's sentence" \
    "Could not acquire migration lock for 'migrations' within 0.3s." "$ERR"

capture "$work/readme" busy
check "refused: status" 0 "$RC"
check "refused: no migration" "" "$OUT"
check "refused: said as refused" \
    "advlock_pq_acquire refused the call: call not allowed in the lock machine's current state" "$ERR"
finish
