#!/usr/bin/env bash
# apt-get as every install step of the project runs it: when another apt or
# dpkg holds its lock (an unattended upgrade, a second `make test`), it waits
# for the lock, up to ADVLOCK_APT_LOCK_WAIT seconds (600 by default), instead
# of failing at once. apt 1.9.11 and later honour DPkg::Lock::Timeout for
# `update` and for `install`/`purge` alike.
exec apt-get -o DPkg::Lock::Timeout="${ADVLOCK_APT_LOCK_WAIT:-600}" "$@"
