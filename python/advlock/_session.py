"""What the locks on one connection share about its server session.

The core checks the server session once per connection it is told of
(advlock_set_session): one ADVLOCK_SQL_SESSION row learns whether the
server is a standby and whether a proxy stands between (the server
session's pid differs from the one announced at connect), and behind a
proxy claims the server session with the machine's token. Every lock
object has its own machine, so the facts are kept here, per connection:

- the token the check claimed with: one check per token, since behind a
  transaction pooler one token checked twice would claim two server
  sessions (a release landing on the other would find nothing to unlock
  there, and the lock would stay); the locks that copy the checked machine
  (below) use its token, and a lock whose first operation starts before any
  check has ended draws a token of its own (its claim may then be refused,
  loudly: ADVLOCK_ESESSION);
- whether a proxy is in between, for the drivers, which then send no named
  prepared statement (a transaction-pooling proxy runs each statement on
  whichever server session is free, where another client's statement may
  hold the same name);
- a copy of a machine that has checked the session, which a lock created
  later on the same connection starts from (a machine may be copied), so
  that the check is one round trip per connection, not per lock object.
"""

import os
import threading
import weakref

from . import _binding as B


def new_token():
    """64 random bits, never 0 (the core reads 0 as "not told")."""
    return int.from_bytes(os.urandom(8), "little") or 1


class ConnSession:
    """One connection's checked machine, its token and the proxy fact."""

    __slots__ = ("token", "proxied", "template", "__weakref__")

    def __init__(self):
        self.token = 0        # the template's token
        self.proxied = None   # unknown until a session row says
        self.template = None  # B.MachineStorage of a machine that checked

    def remember(self, machine, token):
        """Keeps a copy of an idle machine that has checked the session
        with token, for the locks made on the connection later."""
        if self.template is None and machine.session_checked:
            self.token = token  # first: a reader that sees the template sees it
            self.template = B.MachineStorage.from_buffer_copy(machine._m)


_by_conn = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def for_connection(conn):
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
    """The session query's answer, fed to advlock_on_session."""

    __slots__ = ("pid", "in_recovery", "ours")

    def __init__(self, pid, in_recovery, ours):
        self.pid, self.in_recovery, self.ours = pid, in_recovery, ours


def session_row(state, announced_pid, pid, in_recovery, ours):
    """The answer for a session row, after noting in state whether a proxy
    is in between, by the machine's own test: the server session's pid is
    not the announced one, or either is unknown (0)."""
    pid = int(pid or 0)
    state.proxied = pid == 0 or pid != announced_pid
    return SessionRow(pid, bool(in_recovery), bool(ours))
