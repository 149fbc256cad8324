"""The types the package's modules share: what a client offers (the two
kinds advlock._engine pumps) and what a statement answers. For type
checkers only: the modules import it under TYPE_CHECKING."""

from __future__ import annotations

import asyncio
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, List, Optional, Protocol,
                    Tuple, Union)

if TYPE_CHECKING:
    from ._engine import Busy, CapacityRow, Engine, FencedRow, SessionRow

# A failed statement's answer: (RESULT_SERVER_ERROR or
# RESULT_CONNECTION_LOST, sqlstate or None, the first line of the message).
ErrorAnswer = Tuple[int, Optional[str], str]
# A holders row: pid, granted, mode, application_name, client, state,
# backend_start, seconds.
HolderRow = Tuple[Any, ...]
# What a statement answers: a RESULT_* int, an ErrorAnswer, holder rows, a
# row of its own kind, or Busy (not sent).
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
    """What both kinds of client offer: the connection (conn: a pool's
    proxy changes it), the engine whose session check says which form to
    send in (state), the announced backend pid, the transaction state,
    whether each statement commits on its own, a watch for the server's
    close, the end of the socket."""

    conn: Any
    state: Engine

    def pid(self) -> int: ...
    def outside_transaction(self) -> bool: ...
    def commits_alone(self) -> bool: ...
    def close_now(self) -> None: ...
    def ended(self) -> bool: ...
    def watch(self, on_end: Call) -> Call: ...


class BlockingClient(Client, Protocol):
    """A client whose statements run on the calling thread."""

    def run(self, sql: int, args: Args) -> Answer: ...
    def cancel(self) -> None: ...


class AsyncClient(Client, Protocol):
    """A client whose statements are coroutines on the running loop."""

    def start(self, sql: int, args: Args) -> Coroutine[Any, Any, Answer]: ...
    def cancel(self) -> Optional[Awaitable[Any]]: ...
    def hold_body(self, body: Optional[asyncio.Task[Any]]) -> Optional[Call]: ...


AnyClient = Union[BlockingClient, AsyncClient]
