#!/usr/bin/env bash
# Fencing tokens against a real server: advlock setup (twice), a token asked
# for without the schema, tokens strictly increasing over concurrent holders
# (the deployment tests' load) and across a crash restart, fence_ok accepting
# the newest token and refusing older ones, and a paused holder whose late
# guarded write is refused while the new holder's is accepted.
# Runs under tests/pg/with-postgres.sh.
# The commands below expand ADVLOCK_FENCE and ADVLOCK_KEY themselves.
# shellcheck disable=SC2016
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
here=$(dirname "$0")
name="fence-test"
read -r key _ < <("$A" key "$name")
T=$(mktemp -d)
trap 'kill -CONT "${holder:-0}" 2>/dev/null; rm -rf "$T"' EXIT
sql() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }

# Asked for before the schema exists: refused before anything is locked,
# naming the command that installs it.
capture "$A" run --fence "$name" -- echo never
check "no schema: lock error" "$EXIT_LOCK_ERROR" "$RC"
case $ERR in *"advlock setup"*) pass ;; *) fail "no schema: message names advlock setup: $ERR" ;; esac
check "no schema: nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"

capture "$A" run --fence --shared "$name" -- echo never
check "--fence --shared refused" "$EXIT_USAGE" "$RC"
capture "$A" run --fence --wait "$name" -- echo never
check "--fence --wait refused" "$EXIT_USAGE" "$RC"

# The role that deploys (no CREATE on the database) cannot install the
# schema: said, with what it needs.
sql "CREATE ROLE fence_deployer LOGIN" >/dev/null
capture "$A" setup -d "user=fence_deployer"
check "setup by a role without CREATE, no schema yet" "$EXIT_LOCK_ERROR" "$RC"
case $ERR in *"permission denied for database"*"needs CREATE on the database"*) pass ;; *) fail "setup without CREATE: [$ERR]" ;; esac

# setup is idempotent: twice, the second changes nothing and says nothing.
capture "$A" setup
check "setup" "0:" "$RC:$ERR"
capture "$A" setup
check "setup again" "0:" "$RC:$ERR"
# And so for the deploying role once it has the grants docs/operators.md
# lists (read from there): it finds everything installed.
sql "$(sed -n '/^GRANT USAGE ON SCHEMA advlock/,/^GRANT EXECUTE/{p;/^GRANT EXECUTE/q}' "$here/../../docs/operators.md" |
    sed 's/lock_users/fence_deployer/')" >/dev/null
capture "$A" setup -d "user=fence_deployer"
check "setup again by the role with the documented grants" "0:" "$RC:$ERR"
check "the counter table" "key bigint token bigint" \
    "$(sql "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ' ' ORDER BY attnum)
            FROM pg_attribute WHERE attrelid = 'advlock.fence'::regclass AND attnum > 0")"

# The token and key reach the command; the next holder's token is higher.
capture "$A" run --fence "$name" -- sh -c 'echo "$ADVLOCK_FENCE $ADVLOCK_KEY"'
check "first token and key" "1 $key" "$OUT"
capture "$A" run --fence "$name" -- sh -c 'echo "$ADVLOCK_FENCE"'
check "second token" 2 "$OUT"
capture "$A" run "$name" -- sh -c 'echo "${ADVLOCK_FENCE-unset}"'
check "no --fence: no token, no statement of its own" "unset 2" "$OUT $(sql "SELECT token FROM advlock.fence")"

# --xact: refused. Its token would commit only with the run's transaction,
# after the command, so the command's guarded write (fence_ok reads the
# key's row FOR SHARE) would wait for advlock, which waits for it: a
# deadlock from the key's second acquisition on. Refused before connecting.
capture timeout -s KILL 20 "$A" run --xact --fence "$name" -- \
    sh -c 'psql -X -At -c "SELECT advlock.fence_ok($ADVLOCK_KEY, $ADVLOCK_FENCE)"'
check "--xact --fence: refused" "$EXIT_USAGE" "$RC"
case $ERR in *"not with --xact"*"fence_ok"*) pass ;; *) fail "--xact --fence: the reason: $ERR" ;; esac
check "--xact --fence: no token taken" 2 "$(sql "SELECT token FROM advlock.fence")"
capture "$A" run --fence "$name" -- sh -c 'echo "$ADVLOCK_FENCE"'
check "third token" 3 "$OUT"

# fence_ok: true for the newest token (and any later), false for older;
# true for a key that never had one.
check "fence_ok newest, older, later, unknown key" "t f t t" \
    "$(sql "SELECT advlock.fence_ok($key, 3), advlock.fence_ok($key, 2),
                   advlock.fence_ok($key, 4), advlock.fence_ok(42, 1)" | tr '|' ' ')"

# Many concurrent holders: every command's token above the one before it.
capture "$here/../deploy/load.sh" -a "$A" -d "dbname=$PGDATABASE" -n 8 -r 4 -s 0.01 -t 30 \
    -k "$name" -o "$T/load" -- --fence --jitter
# shellcheck disable=SC1091
. "$T/load/summary"
check "load: every run held the lock" "32 32 0" "$commands $exit_0 $overlaps"
check "load: tokens strictly increasing" "32 0" "$fence_tokens $fence_disorder"
check "load: the counter is the last token" 35 "$(sql "SELECT token FROM advlock.fence")"

# A crash restart: the committed tokens survive (WAL, synchronous commit).
if [ "$(id -u)" = 0 ]; then ctl=(runuser -u postgres -- "$ADVLOCK_PG_BIN/pg_ctl"); else ctl=("$ADVLOCK_PG_BIN/pg_ctl"); fi
"${ctl[@]}" -D "$ADVLOCK_PG_DATA" -m immediate stop >/dev/null
"${ctl[@]}" -D "$ADVLOCK_PG_DATA" -w start >/dev/null
capture "$A" run --fence "$name" -- sh -c 'echo "$ADVLOCK_FENCE"'
check "after a crash restart: the next token" 36 "$OUT"

# A paused holder. The resource: one row, written only under a token no
# older than the newest (the guarded UPDATE of docs/operators.md).
sql "CREATE TABLE resource (id int PRIMARY KEY, writer text, token bigint);
     INSERT INTO resource VALUES (1, 'nobody', 0)" >/dev/null
# shellcheck disable=SC2016
guarded='psql -X -At -c "UPDATE resource SET writer = '\''$1'\'', token = $ADVLOCK_FENCE
    WHERE id = 1 AND advlock.fence_ok($ADVLOCK_KEY, $ADVLOCK_FENCE)"'
# The first holder's work is in flight: it took its token, then stalls
# until go exists, and ignores the stop advlock sends when it finds the
# lock lost (work that no stop reaches in time: the case fencing covers).
"$A" run --fence --keep-running "$name" -- sh -c \
    'trap "" TERM; echo "$ADVLOCK_FENCE" >"$0/a.token"; while [ ! -e "$0/go" ]; do sleep 0.05; done; '"$guarded"' >"$0/a.out"' \
    "$T" old >/dev/null 2>"$T/a.err" &
holder=$!
for _ in $(seq 100); do [ -s "$T/a.token" ] && break; sleep 0.05; done
# The holder pauses (SIGSTOP), and the server gives its lock up meanwhile:
# the administrator ends the stuck session, as tcp_user_timeout would end
# it for a holder whose whole machine stopped answering.
kill -STOP "$holder"
sql "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted" >/dev/null
for _ in $(seq 100); do [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")" = 0 ] && break; sleep 0.05; done
capture "$A" run --fence --timeout 10 "$name" -- sh -c "$guarded" sh new
check "the new holder's guarded write is accepted" "0 UPDATE 1" "$RC $OUT"
touch "$T/go"
kill -CONT "$holder"
wait "$holder"
check "the paused holder's late write is refused" "UPDATE 0" "$(cat "$T/a.out")"
check "the resource holds the new holder's write" "new $(($(cat "$T/a.token") + 1))" \
    "$(sql "SELECT writer, token FROM resource" | tr '|' ' ')"

# The documented grants are enough for a token and a guarded check; one
# missing is named, as the GRANT a DBA runs.
capture "$A" run --fence -d "user=fence_deployer" fence-grants -- \
    sh -c 'psql -X -At -c "SELECT advlock.fence_ok($ADVLOCK_KEY, $ADVLOCK_FENCE)"'
check "the deploying role: token and fence_ok" "0 t" "$RC $OUT"
sql "REVOKE UPDATE ON advlock.fence FROM fence_deployer" >/dev/null
capture "$A" run --fence -d "user=fence_deployer" fence-grants -- echo never
check "UPDATE missing: lock error" "${EXIT_LOCK_ERROR} " "$RC $OUT"
case $ERR in *"a DBA runs: GRANT UPDATE ON advlock.fence TO fence_deployer;") pass ;; *) fail "UPDATE missing: not named: [$ERR]" ;; esac
sql "REVOKE USAGE ON SCHEMA advlock FROM fence_deployer" >/dev/null
capture "$A" run --fence -d "user=fence_deployer" fence-grants -- echo never
case $ERR in *"GRANT USAGE ON SCHEMA advlock TO fence_deployer; GRANT UPDATE ON advlock.fence TO fence_deployer;") pass ;; *) fail "USAGE missing: not named: [$ERR]" ;; esac
check "nothing left locked" 0 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"

finish
