"""Where a document's settings come from while the server runs: the client's pulls
(``workspace/configuration``), the watched config files, and each problem shown once.

:class:`SettingsSource` holds the server's :class:`lsp_server.workspace_config.WorkspaceConfig`
(every source and its precedence) and its :class:`lsp_server.workspace_config.ConfigWatcher`,
and says the problems of a source to the user through the client port, once per change of that
source.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from engine.settings import Settings
from lsp_server.client import ClientPort
from lsp_server.documents import path_of
from lsp_server.workspace_config import ConfigWatcher, WorkspaceConfig


class SettingsSource:
    """The effective settings of a document, pulled and watched (module docstring)."""

    def __init__(self, config: WorkspaceConfig, client: ClientPort, watcher: ConfigWatcher | None = None):
        self.config = config
        self.client = client
        self.watcher = watcher
        self._shown: set[str] = set()  # settings problems already shown (once per change of their source)

    # -- reading -----------------------------------------------------------------------------
    def current(self, uri: str) -> tuple[Settings, list[str]]:
        """The settings of ``uri`` from what the server holds now (the last pull included), and
        their problems; asks the client nothing."""
        return self.config.settings_for(path_of(uri), uri if uri in self.config.pulled else None)

    def shared(self, uri: str | None) -> tuple[Settings, list[str]]:
        """The settings of ``uri`` (None: no document) without its own pull: its config files,
        the user's, the pushed and the globally pulled settings (what code actions are offered
        under, and what the settings command shows without a document)."""
        return self.config.settings_for(path_of(uri) if uri else None)

    async def pulled(self, uri: str) -> tuple[Settings, list[str]]:
        """The settings of ``uri`` after pulling the client's for it (what an edit runs under)."""
        warnings = await self.pull(uri)
        settings, more = self.config.settings_for(path_of(uri), uri if uri in self.config.pulled else None)
        return settings, warnings + more

    async def pull(self, scope: str | None) -> list[str]:
        """workspace/configuration for ``scope`` (a document or folder URI; None: global); a
        failed pull keeps the previous pulled settings."""
        if not self.client.features.configuration:
            return []
        try:
            raw = await self.client.configuration(scope)
        except Exception as exc:  # noqa: BLE001 - keep the previous pulled settings
            self.client.log(f"workspace/configuration failed: {exc}", types.MessageType.Warning)
            return []
        return self.config.set_pulled(scope or "", raw)

    def root_for(self, path: Path) -> Path | None:
        """The workspace folder that holds ``path`` (None: outside every folder)."""
        return self.config.root_for(path)

    # -- problems ----------------------------------------------------------------------------
    def warn(self, warnings: list[str]) -> None:
        for warning in warnings:
            self.client.show(warning, types.MessageType.Warning)

    def warn_once(self, warnings: list[str]) -> None:
        """Show each settings problem once; :meth:`file_changed` forgets a file's, so a change to
        the file shows what is still wrong in it once more."""
        self.warn([w for w in dict.fromkeys(warnings) if w not in self._shown])
        self._shown.update(warnings)

    # -- the config files --------------------------------------------------------------------
    def opened(self, uri: str) -> None:
        """A document opened: watch its config files, and show their problems (each once)."""
        self.watch_config_for(uri)
        if path_of(uri) is not None:
            self.warn_once(self.shared(uri)[1])

    def watch(self, watcher: ConfigWatcher) -> None:
        """Watch the workspace folders with ``watcher`` (and, once opened, each document's config
        files' folders)."""
        self.watcher = watcher
        for root in self.config.roots:
            watcher.watch(root)

    def watch_config_for(self, uri: str) -> None:
        path = path_of(uri)
        if path is None or self.watcher is None:
            return
        root = self.config.root_for(path)
        folder = path.parent
        while True:
            self.watcher.watch(folder)
            if root is None or folder == root or folder == folder.parent:
                break
            folder = folder.parent
        for file in self.config.config_files(path):
            self.watcher.watch(file.parent)

    def folders_changed(self, removed: list[Path], added: list[Path]) -> None:
        """Workspace folders removed and added (resolved paths)."""
        self.config.roots = [r for r in self.config.roots if r not in removed] + added
        for root in added:
            if self.watcher is not None:
                self.watcher.watch(root)

    def file_changed(self, path: Path) -> bool:
        """A watched config file changed: reload it (the last good one stays on error); whether
        its settings are in force now."""
        self._shown = {w for w in self._shown if not w.startswith(f"{path}:")}
        if path.exists():
            layer, error = self.config.files.reload(path)
            if error:
                self._shown.add(error)
                self.client.show(error, types.MessageType.Error)
                self.client.status("error", f"invalid config file {path.name}")
                return False
            self.warn_once(layer.warnings)
            self.client.log(f"copy-as-decode: reloaded settings from {path}", types.MessageType.Info)
        else:
            self.config.files.forget(path)
            self.client.log(f"copy-as-decode: {path} was removed", types.MessageType.Info)
        return True

    async def configuration_changed(self, pushed: object) -> None:
        """``workspace/didChangeConfiguration``: the pushed settings, then a new global pull (a
        document's own are pulled again at its next edit)."""
        if isinstance(pushed, dict) and pushed:
            self.warn(self.config.set_pushed(pushed))
        self.config.pulled.clear()
        self.warn(await self.pull(None))

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
