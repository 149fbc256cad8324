"""The one place advlock uses a private part of asyncio.

A lease's heartbeat may share an asyncpg connection with the body it
guards, and asyncpg refuses a second statement while one runs. So the
heartbeat goes out only while the body's task waits on something, and
never just as it is about to run (it may start a statement at once). asyncio
has no public way to ask what a task is waiting on (Task has get_stack()
and get_coro(), not the future it awaits); Task._fut_waiter, which asyncio
itself sets while a task waits and clears when it is runnable, is that
answer. python/tests/test_lease.py runs heartbeats beside a busy body on a
real server, so an asyncio that changes it fails there first.
"""


def awaited_future(task):
    """The future task waits on now, or None while it is runnable (or for
    task None)."""
    return None if task is None else task._fut_waiter
