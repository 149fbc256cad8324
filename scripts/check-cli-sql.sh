#!/usr/bin/env bash
# Proves the advlock command sends no SQL of its own: every statement it
# sends is a row of the core's table (src/core/sql.c), sent through
# advlock_pq_send_row() or the libpq adapters. Its objects may not call
# libpq's functions that take SQL text.
#   scripts/check-cli-sql.sh OBJECT...
set -euo pipefail
senders='^(PQexec|PQexecParams|PQprepare|PQexecPrepared|PQsendQuery|PQsendQueryParams|PQsendPrepare|PQsendQueryPrepared)$'
bad=$(nm -A -u "$@" | awk '{ print $1, $NF }' | awk -v re="$senders" '$2 ~ re' | sort -u || true)
if [ -n "$bad" ]; then
    echo "the command's objects send SQL text of their own (make it a row of src/core/sql.c):" >&2
    echo "$bad" >&2
    exit 1
fi
echo "command SQL: every statement is a row of the core's table ($# objects checked)"
