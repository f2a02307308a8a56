"""Where decodes run: a worker thread per request, one at a time on an in-process backend.

An in-process model (transformers, llama.cpp) decodes one request at a time: the others wait,
at most ``max_waiting`` of them; one more is refused at once with 429 (admission happens before
the response starts, so a streamed request gets its 429 as a status too). A remote backend
(vLLM) batches concurrent requests itself, so there every request runs at once.

A decode runs in its own thread and hands its items to the event loop; when the consumer goes
away (client disconnected, stream closed) the decode's ``cancelled`` flag is set, the decode
stops where the engine polls it (on transformers between two layers of a forward, elsewhere at
its next step or prompt chunk), and only then is the slot given to the next request, so two
decodes never share the model.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from engine.openai_api.errors import ApiError

T = TypeVar("T")
_END = object()


class Ticket:
    """An admitted request; ``cancel`` stops its decode where the engine polls it. Its place among the
    waiting is given up once (:meth:`settle`): when its decode starts, or when the ticket is
    dropped unused (a client that left before its streamed response began)."""

    def __init__(self, queue: DecodeQueue, loop: asyncio.AbstractEventLoop):
        self.cancel = threading.Event()
        self._queue, self._loop, self._settled = queue, loop, False

    def settle(self) -> None:
        if not self._settled:
            self._settled = True
            self._queue.waiting -= 1

    def __del__(self) -> None:
        if not self._settled and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.settle)


class DecodeQueue:
    def __init__(self, max_waiting: int, concurrent: bool = False):
        self.max_waiting, self.concurrent = max_waiting, concurrent
        self.running = 0
        self.waiting = 0
        self._slot = asyncio.Lock()

    def admit(self) -> Ticket:
        """Reserve a place or raise 429 (queue full). Call from the event loop."""
        if not self.concurrent and self.running + self.waiting > self.max_waiting:
            raise ApiError(429, f"the server is busy: one decode runs and {self.waiting} wait (at most "
                                f"{self.max_waiting}); retry later", "queue_full")
        self.waiting += 1
        return Ticket(self, asyncio.get_running_loop())

    def stats(self) -> dict[str, Any]:
        return {"running": self.running, "waiting": self.waiting, "max_waiting": self.max_waiting,
                "concurrent": self.concurrent}

    async def run(self, ticket: Ticket, work: Callable[[Callable[[], bool]], Iterator[T]]) -> AsyncIterator[T]:
        """Items of ``work(cancelled)``, produced in a worker thread once the slot is free. The
        slot is given back by the worker thread when it ends, not by the consumer: a consumer that
        leaves early only sets the cancel flag, so the next decode never overlaps this one."""
        loop = asyncio.get_running_loop()
        try:
            if not self.concurrent:
                await self._slot.acquire()
        finally:
            ticket.settle()
        self.running += 1

        def finished() -> None:
            self.running -= 1
            if not self.concurrent:
                self._slot.release()

        items: asyncio.Queue = asyncio.Queue()

        def hand(callback: Callable[..., None], *args: Any) -> None:
            """``callback`` run on the server's loop; once the loop has closed (the server shut
            down while this decode ran) nobody waits for it, so it is dropped."""
            try:
                loop.call_soon_threadsafe(callback, *args)
            except RuntimeError:
                if not loop.is_closed():
                    raise

        def produce() -> None:
            try:
                for item in work(ticket.cancel.is_set):
                    hand(items.put_nowait, (item, None))
                    if ticket.cancel.is_set():
                        break
                hand(items.put_nowait, (_END, None))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                hand(items.put_nowait, (_END, exc))
            finally:
                hand(finished)

        try:
            threading.Thread(target=produce, name="openai-decode", daemon=True).start()
        except BaseException:
            finished()
            raise
        try:
            while True:
                item, error = await items.get()
                if error is not None:
                    raise error
                if item is _END:
                    return
                yield item
        finally:
            ticket.cancel.set()
