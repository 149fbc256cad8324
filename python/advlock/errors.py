"""Exceptions. Every exception the package raises derives from Error (one
root to catch). Every message of a lock's outcome is the core's own sentence
(advlock_describe): the reference's exact words where it has them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._machine import LeaseExpiry, Report
    from ._types import Name


class Error(Exception):
    """The root of every exception advlock raises."""


class LockError(Error):
    """An operation on a lock ended without doing what was asked.

    Attributes: report (advlock.Report: the facts), name (the lock's name as
    given), server_message (the server's or driver's words, or None).
    str(error) is advlock_describe's sentence.
    """

    def __init__(self, message: str, report: Optional[Report] = None,
                 name: Optional[Name] = None, server_message: Optional[str] = None) -> None:
        super().__init__(message)
        self.report = report
        self.name = name
        self.server_message = server_message


class LockTimeout(LockError, TimeoutError):
    """TIMED_OUT: the lock stayed busy until the timeout.
    "Could not acquire migration lock for '<name>' within <seconds>s." """


class LockFailed(LockError):
    """FAILED: the server answered NULL or an error, or the connection was
    lost (report.failure, report.sqlstate say which)."""


class StandbyError(LockFailed):
    """FAILED with ADVLOCK_ESTANDBY: the server is a hot standby in recovery,
    whose advisory locks exclude nobody on the primary; nothing was locked.
    "Refused to lock '<name>': the server is a standby in recovery, ..."
    Connect to the primary, or pass allow_standby=True."""


class ServerSessionError(LockFailed):
    """FAILED with ADVLOCK_ESESSION: this connection's statements ran on
    different server sessions, or on one another client had claimed: a
    transaction-pooling proxy (PgBouncer pool_mode = transaction) is in
    between, and session advisory locks need a session-pooled or direct
    connection (or use scope=advlock.TRANSACTION). The statement that found
    it locked or unlocked nothing; report.detail, and the sentence, say when
    a lock taken earlier may still be held on another server session."""


class LockLost(LockError):
    """A held lock was lost: its connection closed under it, heard at once
    (the server ended the session: pg_terminate_backend, a restart or a
    crash; its idle timeouts are turned off for a holder; docs/python.md "A
    session the server ends"), or its lease expired (docs/python.md "Leases": no heartbeat
    answered by the deadline, or the server session's lease settings
    changed; the lock is not necessarily free yet, the server frees it
    within the lease of the last message it received). The connection has
    been closed. Raised on leaving the body (asyncio: the body was
    cancelled first), by Lock.check(), and by release(), never LockFailed.

    Attributes besides LockError's: reason (an advlock.LeaseExpiry:
    NO_ANSWER, CONNECTION lost, SETTINGS changed, SERVER_ERROR),
    deadline (the stop deadline, time.monotonic() seconds), lease
    (seconds), ended (True when the connection closed under the lock: on a
    direct connection the server session, and the lock, ended with it)."""

    reason: Optional[LeaseExpiry] = None
    deadline: Optional[float] = None
    lease: Optional[float] = None
    ended = False


class LockCancelled(LockError):
    """CANCELLED where no asyncio cancellation can carry it (the blocking
    driver interrupted by KeyboardInterrupt re-raises that instead)."""


class CallError(Error, ValueError):
    """A call refused before anything was sent (ADVLOCK_EINVAL, EUTF8,
    EMISUSE, ECRYPTO, ENOMEM), changing nothing: a wrong argument, a call in the
    wrong state, or a connection busy with another operation.
    Attribute code: the advlock_error value."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ArgumentTypeError(CallError, TypeError):
    """A CallError (ADVLOCK_EINVAL) for an argument of the wrong type: a
    lock name that is neither str nor bytes, a connection of neither
    asyncpg nor psycopg. Also a TypeError."""
