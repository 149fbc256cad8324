#!/usr/bin/env bash
# harness: pgbouncer
# Session-scoped locks (the default) through PgBouncer in pool_mode =
# transaction: statements of one client hop between server sessions, so a
# run must either hold alone or fail loudly: exit 70 with the "different
# server sessions" message, the command stopped. Never two commands at once.
# Runs under tests/pg/with-pgbouncer.sh.
set -u
. "$(dirname "$0")/lib.sh"
PBX=${ADVLOCK_TEST_PGBOUNCER_TX:?run under tests/pg/with-pgbouncer.sh}

# The hazard: two runs 0.5 s apart on one name. Unguarded, both would run
# their commands at once and exit 0.
name=deploy-tx-pair
rec() { echo "bash -c 'echo \$EPOCHREALTIME >$T/\$0.s; sleep 2; echo \$EPOCHREALTIME >$T/\$0.e' $1"; }
"$A" run -q --timeout 10 -d "$PBX" "$name" -- bash -c "$(rec first)" 2>"$T/first.err" &
first=$!
sleep 0.5
capture "$A" run -q --timeout 10 -d "$PBX" "$name" -- bash -c "$(rec second)"
second_rc=$RC second_err=$ERR
wait "$first"
first_rc=$?
both=0
if [ -s "$T/first.s" ] && [ -s "$T/second.s" ]; then
    overlap=$(awk -v a="$(cat "$T/first.s")" -v b="$(cat "$T/first.e" 2>/dev/null || echo 9e18)" \
                  -v c="$(cat "$T/second.s")" -v d="$(cat "$T/second.e" 2>/dev/null || echo 9e18)" \
                  'BEGIN { print (a < d && c < b) ? 1 : 0 }')
    [ "$overlap" = 1 ] && both=1
fi
echo "pair: first exit $first_rc, second exit $second_rc, commands overlapped: $both"
check "pair: the two commands never overlap" 0 "$both"
for who in first second; do
    if [ "$who" = first ]; then rc=$first_rc; err=$(cat "$T/first.err"); else rc=$second_rc; err=$second_err; fi
    case "$rc" in
        0 | 1) pass ;;
        70) # shellcheck disable=SC2053
            [[ $err == $SESSION_MOVED_MESSAGE ]] && pass || fail "pair: $who exit 70 without the message: [$err]" ;;
        *) fail "pair: $who exited $rc: [$err]" ;;
    esac
done

# The load: $CLIENTS clients x $ROUNDS rounds on one name (8 x 20).
load "$T/load" -d "$PBX" -n "$CLIENTS" -r "$ROUNDS" -s 0.1 -t 10 -k deploy-tx-session
check "load: overlapping commands" 0 "$overlaps"
check "load: runs that exited 0 with an overlapping command" 0 "$zero_exit_overlapping"
at_most "load: max concurrency" 1 "$max_concurrency"
check "load: runs exiting other than 0, 1, 70" 0 "$((exit_69 + exit_other))"
[ "$exit_70" -ge 1 ] && pass || fail "load: the pooler was never noticed (no run exited 70)"
messages_all_match "$T/load" 70 "$SESSION_MOVED_MESSAGE" && pass \
    || fail "load: some run exited 70 without the message [$SESSION_MOVED_MESSAGE]"
# The run that held the lock gives it back although its unlock may land on
# other server sessions first: nothing stranded on a pooled server session.
check "load: advisory locks left on any server session" 0 "$leftover_all"

# A release whose claimed server session is busy for a moment (another
# client's statement, landing there as PgBouncer hands out the idle server
# session used last, ends about 1.2 s into the release) tries again until
# it reaches it, within ADVLOCK_GUARD_RETRY_MS (1.5 s) however short
# --timeout is: exit 0, nothing left. Fresh server sessions first: the load
# left claims on the pooled ones.
psql -X -q -d "$ADVLOCK_TEST_PGBOUNCER_TX_ADMIN" -c "RECONNECT postgres" >/dev/null
name=deploy-tx-busy-release
capture "$A" run -q --timeout 0 --verify-interval 0 -d "$PBX" "$name" -- \
    bash -c "setsid psql -X -q -d '$PBX' -c 'SELECT pg_sleep(1.7)' >/dev/null & sleep 0.5"
check "release on a busy claimed session, --timeout 0: status" 0 "$RC"
check "release on a busy claimed session, --timeout 0: stderr" "" "$ERR"
sleep 1.5 # the other client's statement ends
check "release on a busy claimed session, --timeout 0: advisory locks left" 0 \
    "$(psql -X -At -d "$ADVLOCK_TEST_DIRECT" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")"

finish
