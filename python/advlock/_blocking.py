"""The threads of blocking connections: what must go on beside a blocking
(psycopg) connection's own statements, which run on the caller's thread.

- Timers: one daemon thread for the whole process keeps every deadline of
  the process's blocking locks (a held lease's heartbeats and expiry, a
  server-side wait's cancel). It never waits on a connection or the
  network, so no connection can hold back another's deadline.
- Worker: each blocking connection runs what blocks on it (a heartbeat,
  which waits for the connection while the body's statement runs) on at
  most one thread at a time, started when a job comes and ended when none
  is left: one per connection, however many locks it holds.
- A cancel request at a server-side wait's deadline blocks on the network
  (PQcancel connects to the server and waits for it): it is sent from a
  thread of its own, which lives while it is delivered.

The session watch (_watch) is the process's third kind: one thread for
every blocking connection's socket.
"""

from __future__ import annotations

import collections
import os
import threading
import traceback
import weakref
from typing import Callable, Deque, Optional, Protocol, Set

from ._machine import INT64_MAX, now_ms


class Timer(Protocol):
    """A deadline the timer thread keeps: tick() acts on what is due (it
    must not block) and returns when to be called again (monotonic ms;
    INT64_MAX: only when poked), or None to be dropped."""

    def tick(self) -> Optional[int]: ...


class Timers:
    """The process's timer thread and the timers it keeps."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._timers: Set[Timer] = set()
        self._poked = False
        self._serving_pid = 0  # the process whose thread serves (a fork's child has none)

    def add(self, timer: Timer) -> None:
        """Keeps timer from now on: its first tick comes at once."""
        with self._cond:
            self._timers.add(timer)
            self._poked = True
            if self._serving_pid != os.getpid():
                self._serving_pid = os.getpid()
                threading.Thread(target=self._serve, name="advlock-timers", daemon=True).start()
            self._cond.notify()

    def remove(self, timer: Timer) -> None:
        """Drops timer (its tick may be running: the timer keeps it apart)."""
        with self._cond:
            self._timers.discard(timer)

    def poke(self) -> None:
        """Something changed: every timer ticks again now."""
        with self._cond:
            self._poked = True
            self._cond.notify()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._poked = False
                timers = list(self._timers)
            soonest = INT64_MAX
            for timer in timers:
                try:
                    wake = timer.tick()
                except Exception:  # noqa: B902 - one timer's bug must not stop the others
                    traceback.print_exc()
                    wake = None
                if wake is None:
                    self.remove(timer)
                elif wake < soonest:
                    soonest = wake
            with self._cond:
                if not self._poked:
                    self._cond.wait(None if soonest == INT64_MAX
                                    else max(0, soonest - now_ms()) / 1000)


TIMERS = Timers()


class Worker:
    """One blocking connection's jobs, run one after another on a thread
    that lives while there are jobs."""

    __slots__ = ("_jobs", "_guard", "_serving_pid", "__weakref__")

    def __init__(self) -> None:
        self._jobs: Deque[Callable[[], None]] = collections.deque()
        self._guard = threading.Lock()
        self._serving_pid = 0  # the process whose thread serves now; 0: none

    def submit(self, job: Callable[[], None]) -> None:
        """Runs job after the ones before it, on the connection's thread."""
        with self._guard:
            self._jobs.append(job)
            if self._serving_pid == os.getpid():
                return
            self._serving_pid = os.getpid()
        threading.Thread(target=self._serve, name="advlock-connection", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._guard:
                if not self._jobs:
                    self._serving_pid = 0
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # noqa: B902 - the next job still runs
                traceback.print_exc()


_workers: weakref.WeakKeyDictionary[object, Worker] = weakref.WeakKeyDictionary()
_workers_guard = threading.Lock()


def worker_for(connection_state: object) -> Worker:
    """The Worker of the connection whose shared state (_session.ConnSession)
    is given: one per connection, gone with it."""
    with _workers_guard:
        worker = _workers.get(connection_state)
        if worker is None:
            worker = _workers[connection_state] = Worker()
        return worker
