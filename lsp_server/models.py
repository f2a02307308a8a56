"""Loaded models shared by every workspace, and the queue edits wait in.

ModelPool: one ``Engine`` per distinct (model, device, dtype, trustRemoteCode, selector), loaded lazily on
first use in a daemon thread of its own (the event loop keeps serving; unlike an edit, a load cannot
be stopped midway, so it is not run in the loop's executor, whose threads the server waits for at
exit), shared by every workspace and document that names it. At most ``capacity`` engines stay
loaded (least recently used is dropped first; an engine that an edit is still using stays alive
until that edit ends). Concurrent requests for a model that is loading wait for the same load. A
failed load is not cached: the next request retries (the user may have fixed the setting).

EditQueue: edits run one at a time, first come first served (they share the CPU/GPU, and the
engine itself serialises edits on one model); edits that go to a remote backend (vLLM) do not
queue: the server batches concurrent requests itself. A newer request for the SAME document cancels the
older one, running or queued: the older one stops within one decoding step, restores what it had
streamed, and reports "superseded"; then the newer one starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from engine.settings import Settings, engine_arguments

Loader = Callable[..., Any]


@dataclass(frozen=True)
class ModelKey:
    model: str
    device: str
    dtype: str
    trust_remote_code: bool
    selector: str = "auto"
    backend: str = "auto"
    options: Any = None  # engine.runtime.backends.BackendOptions

    @classmethod
    def of(cls, settings: Settings) -> "ModelKey":
        """The key of the engine these settings load: ``Engine.load``'s arguments, as the CLI's."""
        return cls(**engine_arguments(settings))

    def describe(self) -> str:
        selector = "" if self.selector == "auto" else f", selector {self.selector}"
        backend = "" if self.backend == "auto" else f", {self.backend}"
        return f"{self.model} ({self.device}, {self.dtype}{backend}{selector})"


def _default_loader(key: ModelKey, progress: Callable[[str], None]) -> Any:
    from engine.api import Engine

    engine = Engine.load(key.model, device=key.device, dtype=key.dtype, progress=progress,
                         trust_remote_code=key.trust_remote_code, selector=key.selector, backend=key.backend,
                         options=key.options)
    progress("warming up")
    engine.prime()  # one-time costs (decoding tables, first forwards) belong to loading, not the first fix
    return engine


class ModelPool:
    def __init__(self, capacity: int = 2, loader: Loader = _default_loader):
        self.capacity = max(1, capacity)
        self._loader = loader
        self._engines: OrderedDict[ModelKey, Any] = OrderedDict()
        self._loading: dict[ModelKey, asyncio.Future] = {}

    def loaded(self, key: ModelKey) -> bool:
        return key in self._engines

    def names(self) -> list[str]:
        return [key.describe() for key in self._engines]

    async def get(self, key: ModelKey, progress: Callable[[str], None] = lambda _m: None) -> Any:
        """The engine for ``key``, loading it if needed (raises the loader's error, e.g.
        engine.core.errors.ModelLoadError, to every waiter)."""
        if key in self._engines:
            self._engines.move_to_end(key)
            return self._engines[key]
        pending = self._loading.get(key)
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = loop.create_future()
            self._loading[key] = pending

            def report(message: str) -> None:
                loop.call_soon_threadsafe(progress, message)

            def load() -> None:
                try:
                    engine = self._loader(key, report)
                except BaseException as exc:  # noqa: BLE001 - handed to the waiters
                    loop.call_soon_threadsafe(self._finish, key, None, exc)
                else:
                    loop.call_soon_threadsafe(self._finish, key, engine, None)

            threading.Thread(target=load, name=f"load {key.model}", daemon=True).start()
        return await asyncio.shield(pending)

    def _finish(self, key: ModelKey, engine: Any, error: BaseException | None) -> None:
        future = self._loading.pop(key)
        if error is not None:
            future.set_exception(error)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody waits
            return
        self._engines[key] = engine
        self._engines.move_to_end(key)
        while len(self._engines) > self.capacity:
            _key, evicted = self._engines.popitem(last=False)
            # Off the event loop: closing waits for an edit the evicted engine may still be running.
            threading.Thread(target=_close, args=(evicted,), name="close engine", daemon=True).start()
        future.set_result(engine)

    def close_all(self) -> None:
        """Close every loaded engine (the server shuts down; running edits were cancelled)."""
        while self._engines:
            _close(self._engines.popitem(last=False)[1])


def _close(engine: Any) -> None:
    close = getattr(engine, "close", None)
    if close is not None:
        close()


class EditQueue:
    """One edit at a time (FIFO); a newer request for a document cancels the older one."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._latest: dict[str, object] = {}
        self._cancel: dict[object, Callable[[str], None]] = {}

    def claim(self, uri: str, ticket: object, cancel: Callable[[str], None]) -> None:
        """Register ``ticket`` as the newest request for ``uri``; cancels the previous one
        (``cancel("superseded")``)."""
        previous = self._latest.get(uri)
        self._latest[uri] = ticket
        self._cancel[ticket] = cancel
        if previous is not None and previous in self._cancel:
            self._cancel[previous]("superseded")

    def release(self, uri: str, ticket: object) -> None:
        self._cancel.pop(ticket, None)
        if self._latest.get(uri) is ticket:
            del self._latest[uri]

    def cancel_all(self, uri: str | None = None) -> int:
        """Cancel every running/queued edit (of ``uri`` when given); returns how many."""
        count = 0
        for ticket, cancel in list(self._cancel.items()):
            if uri is None or self._latest.get(uri) is ticket:
                cancel("cancelled")
                count += 1
        return count

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def slot(self) -> asyncio.Lock:
        """``async with queue.slot():`` runs one edit."""
        return self._lock


async def unless_stopped(work: Awaitable[Any], stopped: asyncio.Event, abandon: bool = False) -> tuple[bool, Any]:
    """Await ``work`` unless ``stopped`` is set first: ``(True, result)``, or ``(False, None)`` at
    once when stopped, so a queued or loading edit that is cancelled ends now. The work is then
    cancelled with ``abandon`` (waiting for the edit slot), else left to finish in the background
    (a model load still lands in the pool and ends its progress bar)."""
    task = asyncio.ensure_future(work)
    if not stopped.is_set():
        waiter = asyncio.ensure_future(stopped.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
    if task.done() and not task.cancelled():  # (both at once: the work's result counts, a slot is owned)
        return True, task.result()  # (raises the work's error)
    if abandon:
        task.cancel()
    else:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # nobody waits: no "never retrieved"
    return False, None
