"""What the language server's work runs on, built once the client has initialized.

:class:`EditServices` holds the client port, the settings source, the model loader, the open
documents and their per-document state, the edit queue and the warm-ups. The edit sessions, the
commands, the warm-ups and the verified fixes are given these objects, never the pygls server,
so each can run in a test with a fake client port and no server (``lsp_server/server.py`` only
registers the handlers and wires them to these).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from lsp_server.client import ClientPort
from lsp_server.document_state import DocumentState
from lsp_server.documents import DocumentStore
from lsp_server.loader import ModelLoader
from lsp_server.models import EditQueue, ModelKey, ModelPool
from lsp_server.positions import Encoding
from lsp_server.settings_source import SettingsSource
from lsp_server.warmup import WarmUps
from lsp_server.workspace_config import ConfigWatcher, WorkspaceConfig
from lsp_server.writer import EditContext


@dataclass
class EditServices:
    """The server's services (module docstring)."""

    client: ClientPort
    settings: SettingsSource
    models: ModelLoader
    documents: DocumentStore
    state: DocumentState
    queue: EditQueue
    warmups: WarmUps
    encoding: Encoding

    @classmethod
    def build(cls, client: ClientPort, config: WorkspaceConfig, pool: ModelPool, documents: DocumentStore,
              encoding: Encoding) -> "EditServices":
        """The services of one session with ``client`` (the documents' mirror may already hold
        documents; ``encoding``: the negotiated position encoding)."""
        settings = SettingsSource(config, client)
        state, queue = DocumentState(), EditQueue()
        warmups = WarmUps(client, settings, documents, pool, queue, state, encoding)
        return cls(client, settings, ModelLoader(pool, client), documents, state, queue, warmups, encoding)

    def context(self) -> EditContext:
        """What one edit that starts now needs (its timings start here)."""
        return EditContext(client=self.client, documents=self.documents, encoding=self.encoding)

    # -- settings changes --------------------------------------------------------------------
    def watch_config_files(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch the workspace folders' config files; a change is handled on ``loop``."""
        self.settings.watch(ConfigWatcher(lambda path: loop.call_soon_threadsafe(self.config_file_changed, path)))

    def config_file_changed(self, path: Path) -> None:
        """On the loop: a watched config file changed; reload it, keep the last good on error."""
        self.warmups.stop()
        if self.settings.file_changed(path):
            self.preload_changed_models()

    async def configuration_changed(self, pushed: object) -> None:
        """``workspace/didChangeConfiguration``: the new settings, and the models they name."""
        self.warmups.stop()
        await self.settings.configuration_changed(pushed)
        self.preload_changed_models()

    def preload_changed_models(self) -> None:
        """After a settings change, load the models open documents now use (hot reload), but only
        once the user has used the server (nothing is loaded before the first edit)."""
        if not self.models.names():
            return
        self.models.preload(ModelKey.of(self.settings.current(uri)[0]) for uri in self.documents.uris())

    # -- the editor's documents --------------------------------------------------------------
    def opened(self, uri: str) -> None:
        self.settings.opened(uri)
        self.warmups.touched(uri)

    def changed(self, uri: str) -> None:
        doc = self.documents.get(uri)
        self.state.changed(uri, doc.text if doc is not None else None)
        self.warmups.touched(uri)

    def closed(self, uri: str) -> None:
        self.state.closed(uri)
        self.warmups.closed(uri)

    def shutdown(self) -> None:
        """Stop everything: warm-ups, queued and running edits, the watcher, the engines."""
        self.warmups.stop()
        self.queue.cancel_all()
        self.state.cancel()
        self.settings.stop()
        self.models.close_all()
