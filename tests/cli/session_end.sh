#!/usr/bin/env bash
# advlock run against the server's own ways of ending a holder's session,
# on the Unix socket and over TCP (ADVLOCK_PG_LISTEN), on a server of its
# own (it sets timeouts for the whole server and restarts it):
# - idle_session_timeout and idle_in_transaction_session_timeout (and
#   transaction_timeout where the server has it) at 1 s, set by the DBA on
#   the role and as the server's default, end neither a run's session nor
#   a --xact run's transaction: the command runs its 3 s, the lock held;
# - pg_terminate_backend of the holder's session, and the postmaster's
#   fast and immediate shutdown signals: the run signals its command's
#   process group at once. The time from the server being asked to the
#   signal_sent event's ts is printed per way and transport (p50, max) and
#   bounded at ADVLOCK_SESSION_END_BOUND_MS (1000; make session-end-bounds
#   asserts the 250 aimed at); ADVLOCK_SESSION_END_TRIALS sets the trials (3).
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
: "${ADVLOCK_PG_LISTEN:?run under tests/pg/with-postgres.sh with ADVLOCK_PG_LISTEN=ADDRESS/32}"
: "${ADVLOCK_PG_DATA:?run under tests/pg/with-postgres.sh}"
trials=${ADVLOCK_SESSION_END_TRIALS:-3}
bound_ms=${ADVLOCK_SESSION_END_BOUND_MS:-1000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
transports=("" "host=${ADVLOCK_PG_LISTEN%/*} port=$PGPORT")
transport_name() { if [ -z "$1" ]; then echo "Unix socket"; else echo TCP; fi; }
observe() { psql -X -At -v ON_ERROR_STOP=1 -c "SET idle_session_timeout = 0" -c "$1" | tail -n 1; }
held_sql="SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
held() { observe "$held_sql"; }
holder_pid() { observe "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"; }
wait_for_holder() {
    for _ in $(seq 200); do [ "$(held)" = 1 ] && return 0; sleep 0.05; done
    return 1
}
timeouts=(idle_session_timeout idle_in_transaction_session_timeout)
[ -n "$(observe "SELECT current_setting('transaction_timeout', true)")" ] &&
    timeouts+=(transaction_timeout)

# dba_timeouts role|system VALUE|RESET: as the DBA would, then waits until a
# new session reads it (a reload is asynchronous).
dba_timeouts() {
    local s sql want=0
    for s in "${timeouts[@]}"; do
        case $1:$2 in
            role:RESET) sql="ALTER ROLE CURRENT_USER RESET $s" ;;
            role:*) sql="ALTER ROLE CURRENT_USER SET $s = '$2'" ;;
            system:RESET) sql="ALTER SYSTEM RESET $s" ;;
            system:*) sql="ALTER SYSTEM SET $s = '$2'" ;;
        esac
        observe "$sql" >/dev/null
    done
    [ "$1" = system ] && observe "SELECT pg_reload_conf()" >/dev/null
    [ "$2" = RESET ] || want=$2
    for _ in $(seq 200); do
        [ "$(psql -X -At -c 'SHOW idle_session_timeout')" = "$want" ] && return 0
        sleep 0.05
    done
    fail "idle_session_timeout never read $want"
}

# ---- the DBA's timeouts end no run ----
for way in role system; do
    dba_timeouts "$way" 1s
    for conninfo in "${transports[@]}"; do
        for xact in "" --xact; do
            what="$way timeouts, $(transport_name "$conninfo")${xact:+, $xact}"
            # The command itself looks, 2.5 s in: a look from outside after
            # the acquire could come too late on a loaded machine.
            capture "$A" run -d "$conninfo" $xact "session-end/idle" -- \
                sh -c 'sleep 2.5; psql -X -At -c "$0"' "$held_sql"
            check "$what: status" 0 "$RC"
            check "$what: still held after 2.5 s" 1 "$OUT"
            check "$what: said nothing" "" "$ERR"
        done
    done
    dba_timeouts "$way" RESET
done

# ---- a session the server ends is heard at once ----
postmaster() { head -n 1 "$ADVLOCK_PG_DATA/postmaster.pid"; }
as_owner=()
[ "$(id -u)" = 0 ] && as_owner=(runuser -u "$(stat -c %U "$ADVLOCK_PG_DATA")" --)
restart() {
    local old=$1
    while kill -0 "$old" 2>/dev/null; do sleep 0.01; done
    (cd "$ADVLOCK_PG_DATA" && "${as_owner[@]}" "$ADVLOCK_PG_BIN/pg_ctl" -D "$ADVLOCK_PG_DATA" \
        -w -t 60 start >/dev/null) || fail "the server did not start again"
}
# ms from a date +%s.%N to the signal_sent event's ts in a JSON log
since() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import datetime, json, sys
for line in open(sys.argv[2], encoding="utf-8"):
    o = json.loads(line)
    if o["event"] == "signal_sent":
        at = datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
        at = at.replace(tzinfo=datetime.timezone.utc).timestamp()
        print(round((at - float(sys.argv[1])) * 1000))
        break
else:
    print("none")
PY
}
summary() {
    /usr/bin/python3 - "$@" <<'PY'
import sys
label, values = sys.argv[1], sorted(int(v) for v in sys.argv[2:])
print(f"session end heard: {label:<32} advlock run   p50 {values[(len(values) - 1) // 2]:3d} ms"
      f"  max {values[-1]:3d} ms  ({len(values)} trials)")
PY
}
for conninfo in "${transports[@]}"; do
    for ending in terminate fast immediate; do
        took=()
        for _ in $(seq "$trials"); do
            "$A" run --log-format json -d "$conninfo" "session-end/ended" -- sleep 60 2>"$T/log" &
            runner=$!
            wait_for_holder || fail "$ending: the run never held the lock"
            pid=$(holder_pid) pm=$(postmaster)
            # When the server was asked: the server's clock just before it
            # sends the termination signal (not psql's start-up: the
            # subquery's row comes first), or just before the postmaster's.
            asked=$(date +%s.%N)
            case $ending in
                terminate)
                    asked=$(observe "SELECT CASE WHEN pg_terminate_backend($pid) THEN t.at END
                        FROM (SELECT extract(epoch FROM clock_timestamp()) AS at OFFSET 0) t") ;;
                fast) kill -INT "$pm" ;;
                immediate) kill -QUIT "$pm" ;;
            esac
            wait "$runner"
            check "$ending: status" "$EXIT_LOCK_ERROR" "$?"
            [ "$ending" = terminate ] || restart "$pm"
            ms=$(since "$asked" "$T/log")
            if [ "$ms" = none ]; then
                fail "$ending: no signal_sent: $(cat "$T/log")"
                continue
            fi
            # The log's times are whole milliseconds, cut down: a signal
            # sent within the millisecond of the server's clock reads -1.
            [ "$ms" -ge -1 ] && [ "$ms" -le "$bound_ms" ] && pass || fail "$ending: signalled after $ms ms"
            took+=("$ms")
        done
        [ ${#took[@]} -gt 0 ] && summary "$ending $(transport_name "$conninfo")" "${took[@]}"
    done
done
finish
