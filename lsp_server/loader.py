"""The models as the editor sees them load: a progress bar, status notifications, and a failure
told with its fix. The engines themselves are the :class:`lsp_server.models.ModelPool`'s."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Iterable

from lsprotocol import types

from lsp_server.client import ClientPort
from lsp_server.models import ModelKey, ModelPool
from lsp_server.progress import WorkDoneProgress

if TYPE_CHECKING:
    from engine.api import Engine


class ModelLoader:
    """The pool's engines, loaded in the user's sight (module docstring)."""

    def __init__(self, pool: ModelPool, client: ClientPort):
        self.pool = pool
        self.client = client

    def loaded(self, key: ModelKey) -> bool:
        return self.pool.loaded(key)

    def names(self) -> list[str]:
        return self.pool.names()

    async def engine_for(self, key: ModelKey) -> "Engine":
        """The engine for ``key``; loads it with a progress bar and status notifications.
        Raises engine.api.ModelLoadError (reported to the user here)."""
        client = self.client
        if self.pool.loaded(key):
            return await self.pool.get(key)
        client.status("loading", f"loading {key.describe()}")
        progress = WorkDoneProgress(client)
        await progress.begin("Loading model", key.describe())

        def report(message: str) -> None:
            client.log(f"copy-as-decode: {message}")
            progress.report(message)

        try:
            engine = await self.pool.get(key, report)
        except Exception as exc:
            from engine.api import ModelLoadError

            message = str(exc) if isinstance(exc, ModelLoadError) else f"model {key.model!r}: {exc}"
            progress.end(f"failed: {message}")
            client.status("error", message)
            client.show(f"cannot load the model: {message}. Fix copyAsDecode.model (the server keeps running).",
                        types.MessageType.Error)
            raise
        progress.end("loaded")
        client.status("ready", f"{key.describe()} loaded")
        return engine

    def preload(self, keys: Iterable[ModelKey]) -> None:
        """Load the models of ``keys`` not loaded yet, in the background (hot reload)."""
        for key in set(keys):
            if not self.pool.loaded(key):
                asyncio.ensure_future(self._preload(key))

    async def _preload(self, key: ModelKey) -> None:
        try:
            await self.engine_for(key)
        except Exception:  # noqa: BLE001 - already reported to the user by engine_for
            pass

    def close_all(self) -> None:
        self.pool.close_all()
