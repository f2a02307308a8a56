"""The server's mirror of the documents the client has open (text + version).

Edits are computed against this mirror, never against the file on disk: an unsaved buffer is
what the user sees. The mirror applies ``didChange`` content changes with the LSP line-break
rules of :mod:`lsp_server.positions` (pygls' own document model splits lines with
``str.splitlines``, which also breaks at U+2028, form feeds and similar characters, so it cannot
be trusted for exact offsets). Listeners hear about every change so a streaming edit can tell
its own echoes from the user's typing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lsprotocol import types
from pygls.uris import to_fs_path

from lsp_server.positions import DEFAULT, Encoding, apply_change


@dataclass
class Document:
    uri: str
    text: str
    version: int | None
    language_id: str = ""


def path_of(uri: str) -> Path | None:
    """The file a ``file:`` URI names (pygls' decoding: percent-escapes, drive letters, UNC);
    None for other schemes (``untitled:``, notebook cells), whose settings are the workspace's."""
    path = to_fs_path(uri)
    return Path(path) if path else None


ChangeListener = Callable[[Document], None]


class DocumentStore:
    """Open documents by URI, kept in sync by didOpen/didChange/didClose."""

    def __init__(self, encoding: Encoding = DEFAULT):
        self.encoding: Encoding = encoding
        self._docs: dict[str, Document] = {}
        self._listeners: dict[str, list[ChangeListener]] = {}

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def uris(self) -> list[str]:
        return list(self._docs)

    def open(self, item: types.TextDocumentItem) -> Document:
        doc = Document(item.uri, item.text, item.version, item.language_id)
        self._docs[item.uri] = doc
        self._notify(doc)
        return doc

    def change(self, params: types.DidChangeTextDocumentParams) -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            return None
        for change in params.content_changes:
            rng = getattr(change, "range", None)
            doc.text = apply_change(doc.text, rng, change.text, self.encoding)
        doc.version = params.text_document.version
        self._notify(doc)
        return doc

    def close(self, uri: str) -> None:
        doc = self._docs.pop(uri, None)
        if doc is not None:
            self._notify(Document(uri, doc.text, None))

    def listen(self, uri: str, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener`` after every change of ``uri``; returns the function that stops it."""
        self._listeners.setdefault(uri, []).append(listener)

        def stop() -> None:
            listeners = self._listeners.get(uri, [])
            if listener in listeners:
                listeners.remove(listener)

        return stop

    def _notify(self, doc: Document) -> None:
        for listener in list(self._listeners.get(doc.uri, ())):
            listener(doc)
