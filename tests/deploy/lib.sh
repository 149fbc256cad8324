# Shared by the deployment tests (tests/deploy/*.sh). Source it; call
# `finish` at the end. Gives the assertions of tests/cli/lib.sh (pass, fail,
# check, capture, finish) and:
#   load DIR LOAD_OPTIONS...   runs tests/deploy/load.sh -o DIR, prints its
#                              report and sets runs, commands, exit_0, exit_1,
#                              exit_69, exit_70, exit_other, overlaps,
#                              zero_exit_overlapping, nonzero_ran,
#                              max_concurrency, leftover_key, leftover_all...
#   held_on CONNINFO NAME      granted advisory locks on NAME's key on that server
#   wait_held CONNINFO NAME    until one is granted (5 s at most)
#   messages_all_match DIR CODE PATTERN
#                              every run of the last load that exited CODE
#                              printed a line matching the glob PATTERN
#   at_most NAME MAX ACTUAL    passes when ACTUAL <= MAX
#   now_ms                     wall clock in milliseconds
#   stop_primary [MODE], start_primary, promote_standby
#                              (under tests/pg/with-standby.sh)
# Tests run with set -u and a temporary directory $T removed on exit.
deploy_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../cli/lib.sh
. "$deploy_dir/../cli/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}
export LC_ALL=C

T=$(mktemp -d "${TMPDIR:-/tmp}/advlock-deploy.XXXXXX")
trap 'rm -rf "$T"' EXIT

# The load: 8 clients x 20 rounds (smaller for a quick look:
# ADVLOCK_DEPLOY_CLIENTS=4 ADVLOCK_DEPLOY_ROUNDS=5 tests/deploy/run.sh ...).
CLIENTS=${ADVLOCK_DEPLOY_CLIENTS:-8}
ROUNDS=${ADVLOCK_DEPLOY_ROUNDS:-20}

# The message a run prints when a statement reached a server session it did
# not claim, or the one it reached was claimed by another connection (a
# distinct error, exit 70). A glob, so that the final wording may differ in
# detail.
SESSION_MOVED_MESSAGE='advlock: *server session*claim*'
# The message when the server is a standby: it must name the server as one.
STANDBY_MESSAGE='advlock: *standby*'

load() {
    local dir=$1
    shift
    "$deploy_dir/load.sh" -a "$A" -o "$dir" "$@"
    # shellcheck disable=SC1091
    . "$dir/summary"
}

held_on() {
    local classid objid
    read -r _ _ classid objid < <("$A" key "$2")
    psql -X -At -d "$1" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
        AND granted AND classid = $classid AND objid = $objid AND objsubid = 1" 2>/dev/null
}

wait_held() {
    for _ in $(seq 100); do
        [ "$(held_on "$1" "$2")" = 1 ] && return 0
        sleep 0.05
    done
    return 1
}

# any_line_matches FILE PATTERN: some line of FILE matches the glob PATTERN.
any_line_matches() {
    local line
    while IFS= read -r line; do
        # shellcheck disable=SC2053
        [[ $line == $2 ]] && return 0
    done <"$1"
    return 1
}

messages_all_match() {
    local dir=$1 code=$2 pattern=$3 f id rc bad=0
    for f in "$dir"/runs/*.r; do
        read -r id rc _ <"$f"
        [ "$rc" = "$code" ] || continue
        any_line_matches "$dir/runs/$id.err" "$pattern" || bad=$((bad + 1))
    done
    [ "$bad" -eq 0 ]
}

at_most() {
    if [ "$3" -le "$2" ] 2>/dev/null; then pass; else fail "$1: expected at most $2, got [$3]"; fi
}

now_ms() {
    local t=$EPOCHREALTIME
    echo $(( ${t%.*} * 1000 + 10#${t#*.} / 1000 ))
}

stop_primary() { "${ADVLOCK_STANDBY_CTL:?run under with-standby.sh}" --ctl stop-primary "${1:-fast}"; }
start_primary() { "${ADVLOCK_STANDBY_CTL:?run under with-standby.sh}" --ctl start-primary; }
promote_standby() { "${ADVLOCK_STANDBY_CTL:?run under with-standby.sh}" --ctl promote; }
