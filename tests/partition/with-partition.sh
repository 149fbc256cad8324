#!/usr/bin/env bash
# Runs a command inside the partition harness (see tests/partition/lib.sh):
# a network namespace and veth pair of its own, a throwaway PostgreSQL
# (tests/pg/with-postgres.sh) listening on the host end too. Everything made
# is removed when the command ends, fails, or this script is interrupted.
#
# Usage: tests/partition/with-partition.sh COMMAND [ARGS...]
# Exits with COMMAND's status, or 77 (and why, on stderr) where no namespace
# can be made here.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/partition/lib.sh
. "$here/lib.sh"

# shellcheck source=tests/pg/scratch.sh
. "$here/../pg/scratch.sh"

ADVLOCK_PARTITION_DIR=$(scratch_dir advlock-partition)
guard_scratch "$ADVLOCK_PARTITION_DIR" partition_net_down
partition_net_up

# In the background so that a signal to this script is handled at once;
# the explicit <&0 keeps the caller's standard input.
ADVLOCK_PG_LISTEN=$ADVLOCK_PARTITION_SERVER_ADDR/30 "$here/../pg/with-postgres.sh" "$@" <&0 &
child=$!
status=0
wait "$child" || status=$?
child=
exit "$status"
