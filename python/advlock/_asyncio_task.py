"""The one place advlock uses private parts of asyncio.

A lease's heartbeat may share an asyncpg connection with the body it
guards, and asyncpg refuses a second statement while one runs (it raises
InterfaceError at once, it does not queue). So the heartbeat goes out only
while the body's task waits on something, and that task is held back until
the heartbeat's answer: its wait may end first (a 1 ms sleep, a heartbeat
slowed by a loaded machine or network), and its next step may start a
statement at once. asyncio has no public way to ask what a task is waiting
on, nor to hold it back: Task._fut_waiter, which asyncio itself sets while
a task waits and clears when it is runnable, is the first answer; taking
the task's wake-up (the done callback whose __self__ is the task) off that
future's _callbacks, and adding it back afterwards, is the second: a done
future runs a callback added late at once, so the task then resumes as it
would have, with the future's result, its cancellation, or a cancel() that
came meanwhile. python/tests/test_lease.py runs heartbeats beside a busy
body on a real server, and one slower than the body's waits, so an asyncio
that changes either fails there first (a wake-up not found holds nothing
back: no heartbeat goes out, and the lease expires, the safe side).

And a statement awaited inline keeps its task's cancel() away from the
statement's future with Waiting, an object the task waits on as on a
future (Task accepts any with _asyncio_future_blocking), one turn of the
loop sooner than through a waiter future.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional


def awaited_future(task: Optional[asyncio.Task[Any]]) -> Optional[asyncio.Future[Any]]:
    """The future task waits on now, or None while it is runnable (or for
    task None)."""
    return None if task is None else task._fut_waiter  # type: ignore[attr-defined]


def hold_back(task: asyncio.Task[Any]) -> Optional[Callable[[], None]]:
    """Keeps task from resuming while it waits on a future that is not done:
    its wake-up is taken off that future. Returns the call that gives it
    back (call it exactly once: the task resumes then, at once if the
    future is done meanwhile), or None when task is runnable now or its
    wake-up was not found (nothing held back)."""
    waiting_on = awaited_future(task)
    if waiting_on is None or waiting_on.done():
        return None
    future = waiting_on
    for callback, context in future._callbacks or ():
        if getattr(callback, "__self__", None) is task:
            break
    else:
        return None
    future.remove_done_callback(callback)
    return lambda: future.add_done_callback(callback, context=context)


def nothing_held() -> None:
    """What gives back a task that was not held back (hold_body() of a
    client whose heartbeats need not hold the body back)."""


class Waiting:
    """What advlock._engine.guarded() yields to its task in place of a
    statement's future: the task waits on the future through it, woken in
    the same turn of the loop as if it waited on the future itself (a
    waiter future of its own would cost a turn of the loop per
    statement), while the task's cancel() never reaches the future: it is
    recorded in guard (an advlock._engine.Guard), or, once guard.let_go,
    cancels the future. asyncio's Task waits on any object that has
    _asyncio_future_blocking, get_loop(), add_done_callback(), cancel()
    and result(), as a Future's __await__ yields itself; the task only
    waits: the statement reads the future's outcome itself."""

    __slots__ = ("_fut", "_guard", "_asyncio_future_blocking")

    def __init__(self, fut: asyncio.Future[Any], guard: Any) -> None:
        self._fut, self._guard = fut, guard
        self._asyncio_future_blocking = True  # as a Future's __await__ yields itself

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._fut.get_loop()

    def add_done_callback(self, fn: Callable[[Any], None], *, context: Any = None) -> None:
        self._fut.add_done_callback(lambda _fut: fn(self), context=context)

    def cancel(self, msg: Any = None) -> bool:
        guard = self._guard
        if guard.let_go:
            return self._fut.cancel(msg)
        guard.cancelled_by = guard.cancelled_by or asyncio.CancelledError(
            *(() if msg is None else (msg,)))
        return True

    def done(self) -> bool:
        return self._fut.done()

    def result(self) -> None:
        return None
