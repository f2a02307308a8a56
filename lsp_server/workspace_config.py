"""The language server's settings: every source of one server, and hot reload of config files.

The engine reads settings once per command (:func:`engine.settings.sources.load_workspace_settings`);
a server lives on while its sources change, so it keeps them here: the user's, pushed and pulled
settings (:class:`WorkspaceConfig`), each workspace file's last good parse (:class:`FileLayers`:
a file that stops being valid TOML keeps its last good version in force) and a watchdog observer
on the folders that hold them (:class:`ConfigWatcher`). Precedence and the model rules are the
engine's (:mod:`engine.settings.sources`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from watchdog.events import FileSystemEventHandler

from engine.settings import (
    CONFIG_FILE,
    PYPROJECT,
    ConfigError,
    Layer,
    Settings,
    find_config_files,
    lsp_section,
    merge_layers,
    parse_layer,
    read_config_file,
)

log = logging.getLogger(__name__)


class FileLayers:
    """The workspace config files seen so far, each with its last good parse.

    ``get(path)`` parses a file the first time; ``reload(path)`` re-parses it after a change and
    keeps the previous good layer when the new content cannot be read as TOML (returning the
    error). A readable file's bad keys are in its layer's warnings; its other keys apply."""

    def __init__(self) -> None:
        self._good: dict[Path, Layer] = {}
        self._errors: dict[Path, str] = {}  # why the file's current content is not in force
        self._lock = threading.Lock()

    def get(self, path: Path) -> tuple[Layer, str | None]:
        with self._lock:
            if path in self._good:
                return self._good[path], self._errors.get(path)
        return self.reload(path)

    def reload(self, path: Path) -> tuple[Layer, str | None]:
        try:
            layer = read_config_file(path)
        except ConfigError as exc:
            with self._lock:
                previous = self._good.get(path)
                kept = "the last good configuration stays in force" if previous else "its settings are not used"
                self._errors[path] = error = f"{exc} ({kept})"
            return previous or Layer(str(path)), error
        with self._lock:
            self._good[path] = layer
            self._errors.pop(path, None)
        return layer, None

    def forget(self, path: Path) -> None:
        with self._lock:
            self._good.pop(path, None)
            self._errors.pop(path, None)


class ConfigWatcher:
    """watchdog observer on the folders that hold config files; calls ``on_change(path)`` (from
    the observer thread) for changes to ``.copy-as-decode.toml`` / ``pyproject.toml``, debounced."""

    def __init__(self, on_change: Callable[[Path], None], debounce_s: float = 0.15):
        self._on_change = on_change
        self._debounce_s = debounce_s
        self._observer = None
        self._watched: set[Path] = set()
        self._timers: dict[Path, threading.Timer] = {}
        self._lock = threading.Lock()

    def watch(self, folder: Path) -> None:
        folder = folder.resolve()
        with self._lock:
            if folder in self._watched or not folder.is_dir():
                return
            self._watched.add(folder)
            try:
                observer = self._ensure_observer()
                observer.schedule(_Handler(self._fire), str(folder), recursive=False)
            except Exception as exc:  # noqa: BLE001 - a missing watch only costs hot reload
                log.warning("cannot watch %s for config changes: %s", folder, exc)

    def _ensure_observer(self):
        if self._observer is None:
            from watchdog.observers import Observer

            self._observer = Observer()
            self._observer.daemon = True
            self._observer.start()
        return self._observer

    def _fire(self, path: Path) -> None:
        if path.name not in (CONFIG_FILE, PYPROJECT):
            return
        with self._lock:
            old = self._timers.pop(path, None)
            if old is not None:
                old.cancel()
            timer = threading.Timer(self._debounce_s, self._on_change, args=(path,))
            timer.daemon = True
            self._timers[path] = timer
            timer.start()

    def stop(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=2)


class _Handler(FileSystemEventHandler):
    """Passes the paths of a watched folder's changes on to :meth:`ConfigWatcher._fire`."""

    def __init__(self, fire: Callable[[Path], None]):
        super().__init__()
        self._fire = fire

    def on_any_event(self, event) -> None:  # noqa: D401 - watchdog callback
        if event.event_type in ("opened", "closed_no_write"):
            return
        for attr in ("src_path", "dest_path"):
            value = getattr(event, attr, None)
            if value:
                self._fire(Path(value.decode() if isinstance(value, bytes) else value))


class WorkspaceConfig:
    """All settings sources of one server, and the effective Settings of a document.

    The server feeds it (initialization options, pushed and pulled settings, file changes) and
    asks :meth:`settings_for`; it never talks to the client itself."""

    def __init__(self, roots: Iterable[Path] = ()):
        self.roots = [root.resolve() for root in roots]
        self.user = Layer("initializationOptions")
        self.pushed = Layer("workspace/didChangeConfiguration")
        self.pulled: dict[str, Layer] = {}
        self.files = FileLayers()

    def set_user(self, raw: Any) -> list[str]:
        self.user = parse_layer(lsp_section(raw), "initializationOptions", user_level=True)
        return self.user.warnings

    def set_pushed(self, raw: Any) -> list[str]:
        self.pushed = parse_layer(lsp_section(raw), "workspace/didChangeConfiguration")
        return self.pushed.warnings

    def set_pulled(self, scope: str, raw: Any) -> list[str]:
        self.pulled[scope] = parse_layer(raw, f"workspace/configuration [{scope or 'global'}]")
        return self.pulled[scope].warnings

    def root_for(self, path: Path) -> Path | None:
        candidates = [r for r in self.roots if r == path or r in path.parents]
        return max(candidates, key=lambda r: len(r.parts)) if candidates else None

    def config_files(self, path: Path) -> list[Path]:
        """The config files that apply to a document at ``path``, lowest precedence first."""
        return find_config_files(path.parent, self.root_for(path))

    def settings_for(self, path: Path | None, scope: str | None = None) -> tuple[Settings, list[str]]:
        """Effective settings for the document at ``path`` (None: an unsaved/untitled buffer,
        which sees only LSP settings); the warnings are its files' (a bad key, with its line; a file
        that is not TOML, whose last good version is kept) and the model rules'."""
        warnings: list[str] = []
        layers: list[Layer] = []
        if path is not None:
            for file in self.config_files(path):
                layer, error = self.files.get(file)
                warnings.extend([error] if error else layer.warnings)
                layers.append(layer)
        layers.append(self.user)
        layers.append(self.pushed)
        if "" in self.pulled:
            layers.append(self.pulled[""])
        if scope and scope in self.pulled:
            layers.append(self.pulled[scope])
        settings, more = merge_layers(layers, self.user)
        return settings, warnings + more
