"""The types the package's modules share: what a client offers (the two
kinds advlock._loop drives) and what a statement answers. For type
checkers only: the modules import it under TYPE_CHECKING."""

from __future__ import annotations

import asyncio
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, List, Optional, Protocol,
                    Tuple, Union)

if TYPE_CHECKING:
    from ._loop import CapacityRow, FencedRow
    from ._session import Busy, ConnSession, SessionRow

# A failed statement's answer: (RESULT_SERVER_ERROR or
# RESULT_CONNECTION_LOST, sqlstate or None, the first line of the message).
ErrorAnswer = Tuple[int, Optional[str], str]
# A holders row: pid, granted, mode, application_name, client, state,
# backend_start, seconds.
HolderRow = Tuple[Any, ...]
# What a statement answers (advlock._loop's docstring): a RESULT_* int, an
# ErrorAnswer, holder rows, or a row of its own kind.
Answer = Union[int, ErrorAnswer, List[HolderRow], "SessionRow", "FencedRow", "CapacityRow",
               "Busy"]
# A lock name: str, or UTF-8 bytes.
Name = Union[str, bytes, bytearray, memoryview]
# A statement's $1, $2.. (bigints).
Args = Tuple[int, ...]
# A call without arguments: the one that stops a watch, lets a held-back
# task go on, or says a session ended.
Call = Callable[[], None]


class Client(Protocol):
    """What both kinds of client offer (advlock._loop's docstring)."""

    state: ConnSession

    def pid(self) -> int: ...
    def outside_transaction(self) -> bool: ...
    def close_now(self) -> None: ...
    def ended(self) -> bool: ...
    def watch(self, on_end: Call) -> Call: ...


class BlockingClient(Client, Protocol):
    """A client whose statements run on the calling thread."""

    def run(self, sql: int, args: Args) -> Answer: ...
    def cancel(self) -> None: ...
    def heartbeat_client(self) -> BlockingClient: ...
    def heartbeat_blocked(self, body: object) -> bool: ...


class AsyncClient(Client, Protocol):
    """A client whose statements are coroutines on the running loop."""

    def start(self, sql: int, args: Args) -> Coroutine[Any, Any, Answer]: ...
    def cancel(self) -> Optional[Awaitable[Any]]: ...
    def heartbeat_client(self) -> AsyncClient: ...
    def hold_body(self, body: Optional[asyncio.Task[Any]]) -> Optional[Call]: ...
    async def control(self, text: str) -> Optional[Answer]: ...


AnyClient = Union[BlockingClient, AsyncClient]


class AsyncWatch(Protocol):
    """What drives an AsyncLock's held lease while its body runs."""

    async def stop(self) -> None: ...
