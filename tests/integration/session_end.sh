#!/usr/bin/env bash
# Runs test_session_end ($SESSION_END_TEST) on both transports of the
# harness's server: its Unix socket, then TCP (ADVLOCK_PG_LISTEN).
# ADVLOCK_SESSION_END_TRIALS, passed on, sets the trials per measurement.
set -euo pipefail
: "${SESSION_END_TEST:?the test_session_end program}"
: "${ADVLOCK_PG_LISTEN:?run under tests/pg/with-postgres.sh with ADVLOCK_PG_LISTEN=ADDRESS/32}"
"$SESSION_END_TEST"
PGHOST=${ADVLOCK_PG_LISTEN%/*} "$SESSION_END_TEST"
