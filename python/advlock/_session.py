"""What the locks on one connection share about its server session.

The core checks the server session once per session value it is given
(advlock_session; the check and the claim are explained in docs/design.md,
"The server session check"). Every lock object has its own machine, so the
checked value is kept here, per connection, and handed to each machine:

- one check per token, as a token must never claim two server sessions: a
  lock copies the connection's checked value, token included; a lock whose
  first operation starts before any check has ended gets a fresh value with
  a token of its own (its claim may then be refused, loudly: ESESSION);
- whether a proxy is in between (the value's proxied), for the drivers,
  which then send no named prepared statement;
- whether the row answered inside a transaction block (provisional): a
  rollback undoes what it set, so the next acquire outside any block has
  the value checked again, with the same token (docs/design.md, "The
  server session check").
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Optional, Tuple

from . import _binding as B


def new_token() -> int:
    """64 random bits, never 0 (the core reads 0 as "not told")."""
    return int.from_bytes(os.urandom(8), "little") or 1


class ConnSession:
    """One connection's checked session value (a _binding.Session), once a
    lock's session row has answered."""

    __slots__ = ("value", "lease_setup", "provisional", "epoch", "__weakref__")

    def __init__(self) -> None:
        self.value: Optional[B.Session] = None
        # the value's row answered inside a transaction block
        self.provisional = False
        # counts the values checked again; a lock whose machine has an
        # older one tells it the connection's at its next acquire
        self.epoch = 0
        # (tcp_user_timeout ms, advlock_lease_setup) of the last lease setup
        # made on the connection, or None
        self.lease_setup: Optional[Tuple[int, int]] = None

    @property
    def proxied(self) -> Optional[bool]:
        """True behind a proxy, False direct, None until a row has said."""
        value = self.value
        return None if value is None else bool(value.proxied)

    def value_for(self, pid: int) -> B.Session:
        """A session value for a lock's machine on the connection, which
        announced pid: a copy of the checked one, or a fresh one with a
        token of its own."""
        value = self.value
        if value is not None and value.client_pid == pid:
            return B.Session.from_buffer_copy(value)
        fresh = B.Session()
        B.core.advlock_session_init(fresh, pid, new_token())
        return fresh

    def remember(self, value: B.Session, provisional: bool = False) -> None:
        """Keeps the first checked value, for the locks made later (or the
        one that replaces a provisional value)."""
        kept = self.value
        if value.checked and (kept is None or kept.client_pid != value.client_pid
                              or not kept.checked or self.provisional):
            self.value = value
            self.provisional = provisional

    def end_provisional(self, outside_transaction: bool) -> None:
        """Before an acquire: a value whose row answered inside a block,
        now that the connection is outside any, is to be checked again
        (the block may have rolled back what the row set)."""
        kept = self.value
        if not (self.provisional and outside_transaction and kept is not None):
            return
        fresh = B.Session()
        B.core.advlock_session_init(fresh, kept.client_pid, kept.token)
        self.value = fresh
        self.provisional = False
        self.epoch += 1


_by_conn: weakref.WeakKeyDictionary[object, ConnSession] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def for_connection(conn: object) -> ConnSession:
    """The ConnSession of a connection object, made on first use and gone
    with the connection. A connection that cannot be weakly referenced
    gets one per call (per lock object): a session row per lock object
    then, and behind a proxy the second lock's claim is refused, loudly
    (ADVLOCK_ESESSION), never shared."""
    try:
        state = _by_conn.get(conn)
    except TypeError:
        return ConnSession()
    if state is None:
        with _registry_lock:
            state = _by_conn.setdefault(conn, ConnSession())
    return state


class SessionRow:
    """The session query's answer, fed to advlock_on_session; shared: the
    ConnSession of the connection it came from, which keeps the value the
    machine then holds."""

    __slots__ = ("shared", "pid", "in_recovery", "ours", "provisional")

    def __init__(self, shared: ConnSession, pid: Optional[int], in_recovery: object,
                 ours: object, provisional: bool = False) -> None:
        self.shared = shared
        self.pid, self.in_recovery, self.ours = int(pid or 0), bool(in_recovery), bool(ours)
        # answered inside a transaction block (see ConnSession)
        self.provisional = bool(provisional)


class Busy:
    """An answer: the client refused to send the statement because its
    connection is busy with another operation (nothing was sent). The
    machine is told a server error, and the lock raises CallError; a
    heartbeat is tried again."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message
