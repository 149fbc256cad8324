"""Hearing at once that the server ended a held lock's session.

When the server ends a session by itself (pg_terminate_backend, a restart
or a crash; its timeouts are turned off for a holder), it sends a FATAL message and
closes the socket: the client's end sees the peer's close (EOF) at once, on
a Unix socket as over TCP. The drivers listen for that while a lock is held,
each by what its client offers (docs/python.md "A session the server
ends"):

- asyncpg reads its socket all the time (an asyncio transport) and calls
  the connection's termination listeners when it closes: the lock adds one;
- a psycopg connection reads its socket only inside a statement, so its
  socket is watched for the peer's close alone (EPOLLRDHUP, never EPOLLIN:
  the answers of the body's own statements do not wake it, and nothing is
  read from under psycopg), in an epoll set of this module's own. On
  asyncio that set's one descriptor is the event loop's reader (one per
  loop): asyncio keeps one reader per descriptor, and psycopg adds and
  removes its own on the socket's for every statement, so a reader on the
  socket itself would be taken away by the next statement; the set's
  descriptor is never psycopg's. Blocking connections share one daemon
  thread for the whole process, asleep in epoll_wait.

A watch calls its callback once, on the loop's thread (asyncio) or on the
watcher thread (blocking), and costs no statement and no wake-up while the
session lives.
"""

from __future__ import annotations

import asyncio
import os
import select
import heapq
import threading
import time
import weakref
from typing import Callable, Dict, List, Optional, Set, Tuple

Callback = Callable[[], None]

# EPOLLHUP and EPOLLERR are always reported; EPOLLRDHUP is the peer's close.
_MASK = select.EPOLLRDHUP


class Hub:
    """Sockets watched for the peer's close, in one epoll set; each socket
    (by descriptor) with the callbacks of the locks held on it."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.callbacks: Dict[int, Set[Callback]] = {}
        self.guard = threading.Lock()

    def add(self, fd: int, callback: Callback) -> Callback:
        """Watches fd for callback; returns the call that stops it."""
        with self.guard:
            try:
                self.epoll.register(fd, _MASK)
                # A socket new to the set: callbacks left on its number
                # were a closed socket's (closing drops it from the set).
                self.callbacks[fd] = {callback}
            except FileExistsError:
                self.callbacks.setdefault(fd, set()).add(callback)
        return lambda: self.remove(fd, callback)

    def remove(self, fd: int, callback: Callback) -> None:
        with self.guard:
            callbacks = self.callbacks.get(fd)
            if callbacks is None or callback not in callbacks:
                return
            callbacks.discard(callback)
            if not callbacks:
                del self.callbacks[fd]
                try:
                    self.epoll.unregister(fd)
                except OSError:  # closed meanwhile: gone from the set already
                    pass

    def dispatch(self, timeout: Optional[float] = 0) -> None:
        """Waits up to timeout seconds (None: for ever) for closed sockets;
        calls each one's callbacks once, and stops watching it."""
        try:
            events = self.epoll.poll(timeout)
        except InterruptedError:
            return
        due: List[Callback] = []
        with self.guard:
            for fd, _ in events:
                due.extend(self.callbacks.pop(fd, ()))
                try:
                    self.epoll.unregister(fd)
                except OSError:
                    pass
        for callback in due:
            callback()


def peer_closed(fd: int) -> bool:
    """True when fd's peer has closed (or the socket failed): a poll that
    does not wait and reads nothing."""
    p = select.poll()
    p.register(fd, select.POLLRDHUP)
    return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL)
               for _, ev in p.poll(0))


# ---- asyncio: one hub per event loop, its epoll descriptor the loop's reader ----

_loop_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = \
    weakref.WeakKeyDictionary()


def watch_async(fd: int, callback: Callback) -> Callback:
    """Watches fd (a socket psycopg drives on the running loop) for the
    peer's close; callback runs on the loop. Returns the call that stops
    the watch."""
    loop = asyncio.get_running_loop()
    hub = _loop_hubs.get(loop)
    if hub is None:
        hub = _loop_hubs[loop] = Hub()
        loop.add_reader(hub.epoll.fileno(), hub.dispatch)
    return hub.add(fd, callback)


# ---- blocking: one thread for every blocking connection of the process ---------

_thread_hub: Optional[Hub] = None
_thread_guard = threading.Lock()


def _blocking_hub() -> Hub:
    global _thread_hub
    with _thread_guard:
        hub = _thread_hub
        if hub is None:
            hub = _thread_hub = Hub()
            threading.Thread(target=_serve, args=(hub,), name="advlock-session-watch",
                             daemon=True).start()
    return hub


def watch_blocking(fd: int, callback: Callback) -> Callback:
    """Watches fd (a blocking psycopg connection's socket) for the peer's
    close; callback runs on the watcher thread. Returns the call that stops
    the watch."""
    return _blocking_hub().add(fd, callback)


# Deadlines the watcher thread keeps while a blocking connection's own
# thread waits in a statement (a heartbeat a silent server never answers):
# (monotonic seconds, callback), earliest first.
_deadlines: List[Tuple[float, int, Callback]] = []
_wakeup = os.pipe()


def call_at(when: float, callback: Callback) -> None:
    """Calls callback on the watcher thread at time.monotonic() when (or
    soon after)."""
    hub = _blocking_hub()
    with hub.guard:
        heapq.heappush(_deadlines, (when, id(callback), callback))
    os.write(_wakeup[1], b"x")


def _serve(hub: Hub) -> None:
    hub.epoll.register(_wakeup[0], select.EPOLLIN)
    hub.callbacks[_wakeup[0]] = set()
    while True:
        with hub.guard:
            due = []
            now = time.monotonic()
            while _deadlines and _deadlines[0][0] <= now:
                due.append(heapq.heappop(_deadlines)[2])
            timeout = None if not _deadlines else max(0.0, _deadlines[0][0] - now)
        for callback in due:
            callback()
        try:
            events = hub.epoll.poll(timeout)
        except InterruptedError:
            continue
        fired: List[Callback] = []
        with hub.guard:
            for fd, _ in events:
                if fd == _wakeup[0]:
                    os.read(fd, 4096)
                    continue
                fired.extend(hub.callbacks.pop(fd, ()))
                try:
                    hub.epoll.unregister(fd)
                except OSError:
                    pass
        for callback in fired:
            callback()


def _forget_after_fork() -> None:
    # The child has no watcher thread: its first watch starts one.
    global _thread_hub
    _thread_hub = None
    _loop_hubs.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
