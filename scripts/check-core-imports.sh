#!/usr/bin/env bash
# Proves the core is sans-I/O: its object files may only call libcrypto's
# digest functions, pthread's once/thread-specific calls, a few string
# functions and each other. Any clock, sleep, allocation, file or socket call
# (or anything from libpq) shows up as an undefined symbol and fails here.
set -euo pipefail
allowed='^(EVP_(MD_fetch|MD_free|MD_CTX_new|MD_CTX_free|DigestInit_ex2|DigestUpdate|DigestFinal_ex)|pthread_(once|key_create|getspecific|setspecific|mutex_lock|mutex_unlock)|mem(cpy|set|move|cmp)|str(len|nlen|cmp|ncmp|cspn)|bcmp|advlock_[a-z0-9_]+|__stack_chk_fail|__tls_get_addr|_GLOBAL_OFFSET_TABLE_|__gcov_[a-z_]+)$'
bad=$(nm -u "$@" | awk 'NF == 2 { print $2 }' | sort -u | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
    echo "core objects call functions outside the sans-I/O allowance:" >&2
    echo "$bad" >&2
    exit 1
fi
echo "core imports: only libcrypto digests, pthread once/TLS/mutex and string functions ($# objects checked)"
