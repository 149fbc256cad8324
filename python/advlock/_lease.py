"""A lock's lease= and lease_stop= (seconds) as the connection engine's
numbers, checked with the words a Python caller reads; the lease itself
(setup, heartbeats, deadline, expiry and its words) is the engine's
(advlock_conn_set_lease(); docs/python.md "Leases"). And the one way to
end a connection's socket under its library's feet.
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any, Optional, Tuple

from . import _binding as B
from .errors import CallError
from ._machine import format_seconds

_lib = B.core
DEFAULT = object()  # lease= not given: ADVLOCK_LEASE_DEFAULT_MS
DEFAULT_STOP_S = 1.0


def _seconds_ms(value: Any, what: str) -> int:
    """lease= or lease_stop= (seconds) in whole milliseconds. Raises
    CallError, naming the value given, for one that is not a number, not
    finite (inf, nan), negative, or longer than the longest lease (which a
    lease_stop, shorter than its lease, can never be either)."""
    try:
        ms = value * 1000
        negative = ms < 0
    except TypeError:
        raise CallError(B.ADVLOCK_EINVAL, "%s is seconds (a number) or None, not %s"
                        % (what, type(value).__name__)) from None
    if ms != ms or ms in (math.inf, -math.inf):
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r is not a finite number of seconds"
                        % (what, value))
    if negative:
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r must be >= 0 seconds" % (what, value))
    whole: int = round(ms)
    if whole > B.LEASE_MAX_MS:
        raise CallError(B.ADVLOCK_EINVAL, "%s=%r is too long: at most %s s (the longest lease,"
                        " 9 h: Linux takes tcp_keepalives_idle up to 32767 s)"
                        % (what, value, format_seconds(B.LEASE_MAX_MS)))
    return whole


def lease_of(lease: object, lease_stop: Optional[float]) -> Tuple[int, int]:
    """(lease_ms, stop_ms) for lease= and lease_stop= (seconds), (0, 0)
    for no lease (None or 0). Raises CallError for a value _seconds_ms
    refuses, or a lease the core refuses (too short for lease_stop: at
    least lease_stop + 6 s)."""
    if lease is DEFAULT:
        lease_ms = B.LEASE_DEFAULT_MS
    elif lease is None:
        return (0, 0)
    else:
        lease_ms = _seconds_ms(lease, "lease")
        if lease_ms == 0:
            return (0, 0)
    stop_ms = _seconds_ms(DEFAULT_STOP_S if lease_stop is None else lease_stop, "lease_stop")
    if _lib.advlock_lease_plan_init(B.LeasePlan(), lease_ms, stop_ms):
        raise CallError(B.ADVLOCK_EINVAL, "lease=%s is too short for lease_stop=%s: the lease"
                        " must be at least lease_stop + 6 s (3 s for the server's timers, 1 s"
                        " margin, 2 s to notice a loss)"
                        % (format_seconds(lease_ms), format_seconds(stop_ms)))
    return (lease_ms, stop_ms)


def shut_socket(fd: int) -> None:
    """Ends a connection's socket under its library's feet: the statement in
    flight and every later one fail at once, and no late answer is read.
    shutdown() acts on the socket, not on a descriptor (a dup is enough),
    and unlike close() cannot pull the descriptor from under the library."""
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()
