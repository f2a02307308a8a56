"""Blocking engine work off the event loop: the one way the server runs it.

The engine is synchronous and CPU-heavy, so its calls run in the loop's default executor
(``loop.run_in_executor``) while the loop keeps answering the editor. :func:`run_blocking` is for
one call with one answer (the warm-up's read, a checked fix's search; :func:`on_loop` brings its
progress back to the loop); :class:`BlockingStream` is for an iterator whose
items the loop takes as they come (an edit's events): the worker puts them in a thread-safe queue
and wakes the loop, which takes everything that arrived at once, so a consumer slower than the
engine sees fewer, larger batches, never a backlog.
"""

from __future__ import annotations

import asyncio
import queue
from typing import AsyncIterator, Callable, Generic, Iterable, TypeVar, cast

T = TypeVar("T")
_END = object()  # the worker's last item: the iterator is exhausted (or raised: BlockingStream.error)


async def run_blocking(work: Callable[[], T], stop: Callable[[], None]) -> T:
    """``work()`` in the loop's executor; its result (or its error) on the loop. When the waiting
    task is cancelled (the server exits), ``stop()`` tells the work to end early."""
    try:
        return await asyncio.get_running_loop().run_in_executor(None, work)
    except asyncio.CancelledError:
        stop()
        raise


def on_loop(callback: Callable[[T], None]) -> Callable[[T], None]:
    """``callback`` as the worker thread may call it (a progress message): it runs on the current
    loop, and is dropped once that loop has closed (the server shut down)."""
    loop = asyncio.get_running_loop()

    def call(value: T) -> None:
        try:
            loop.call_soon_threadsafe(callback, value)
        except RuntimeError:  # the loop is closed: nobody listens
            pass

    return call


class BlockingStream(Generic[T]):
    """``produce()`` iterated in the loop's executor, its items handed to the loop in batches.

    ``error`` is what the iterator raised, once :meth:`batches` has ended (None when it finished):
    the consumer reports it after the items that came before it. When the consuming task is
    cancelled (the server exits) or stops reading, ``stop()`` tells the iterator to end early: iterate
    it under ``contextlib.aclosing`` so that a cancel landing in the consumer's own awaits closes
    it at once rather than when the generator is collected."""

    def __init__(self, produce: Callable[[], Iterable[T]], stop: Callable[[], None]):
        self._produce = produce
        self._stop = stop
        self._items: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.error: BaseException | None = None

    async def batches(self) -> AsyncIterator[list[T]]:
        """Every item, in order, in lists of what arrived while the consumer was busy."""
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()

        def wake() -> bool:
            try:
                loop.call_soon_threadsafe(arrived.set)
            except RuntimeError:  # the loop is closed (the server shut down): nobody listens
                return False
            return True

        def run() -> None:
            try:
                for item in self._produce():
                    self._items.put(item)
                    if not wake():
                        break
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer as .error
                self.error = exc
            finally:
                self._items.put(_END)
                wake()

        loop.run_in_executor(None, run)
        ended = False
        try:
            while True:
                arrived.clear()
                batch: list[T] = []
                while True:
                    try:
                        item = self._items.get_nowait()
                    except queue.Empty:
                        break
                    if item is _END:
                        ended = True
                        if batch:
                            yield batch
                        return
                    batch.append(cast(T, item))  # every item but the end is the iterator's
                if batch:
                    yield batch
                else:
                    await arrived.wait()
        finally:
            if not ended:  # cancelled while waiting, or closed by a consumer that stopped early
                self._stop()
