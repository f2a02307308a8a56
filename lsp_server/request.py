"""The LSP inputs of an edit (the open document, the region, the user's settings) -> the engine's
:class:`engine.api.EditRequest`, built and validated in this one place.

The edit session builds it once before loading a model (so a request the engine would refuse
fails fast) and the live edit builds it again when it runs (the document may have changed while
the model loaded, and the mode ``auto`` is resolved by the loaded engine); both go through
:func:`document_request`, which takes every request-level setting through
:meth:`EditRequest.from_settings` as the CLI and the HTTP endpoint do, and the same ``language``
the CLI derives for the same file (the code fences of the prompt, and the syntax check of the result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pygls.uris import urlparse

from engine.api import EditRequest, language_for
from engine.core.choices import FocusPolicy, Mode

if TYPE_CHECKING:
    from engine.settings import Settings
    from lsp_server.documents import Document

# The editors' language identifiers (VS Code's languageId, Neovim's filetype) -> the engine's fence
# language (engine.core.languages.LANGUAGE_BY_SUFFIX: what the CLI derives from a file's suffix). An id not
# listed here falls back to the document's suffix, so an editor never sends a language the CLI
# would not send for the same file.
EDITOR_LANGUAGES = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "go": "go", "rust": "rust",
    "java": "java", "c": "c", "cpp": "cpp", "ruby": "ruby", "lua": "lua", "csharp": "csharp", "cs": "csharp",
    "php": "php", "kotlin": "kotlin", "swift": "swift", "scala": "scala", "dart": "dart", "elixir": "elixir",
    "haskell": "haskell", "perl": "perl", "r": "r", "julia": "julia", "sql": "sql", "html": "html", "css": "css",
    "scss": "scss", "json": "json", "yaml": "yaml", "toml": "toml", "xml": "xml", "vue": "vue", "svelte": "svelte",
    "javascriptreact": "jsx", "typescriptreact": "tsx",  # VS Code and Neovim alike
    "shellscript": "bash",  # VS Code
    "sh": "bash", "bash": "bash",  # Neovim's filetypes for shell scripts
}


def document_language(uri: str, language_id: str = "") -> str:
    """The engine's language for a document: from the editor's ``language_id`` (the user may have
    picked it, and an unsaved buffer has no suffix), else from the URI's suffix as the CLI reads
    a file name (:func:`engine.api.language_for`); empty when neither is known."""
    return EDITOR_LANGUAGES.get(language_id) or language_for(urlparse(uri)[2])


def document_request(doc: "Document", instruction: str, lines: tuple[int, int] | None, settings: "Settings",
                     mode: Mode | None = None, focus_line: int | None = None,
                     focus_policy: FocusPolicy | None = None, update: str | None = None,
                     partial: bool = False) -> EditRequest:
    """The validated request for editing ``doc`` (its current text, its language) under ``settings``.

    ``lines``: engine lines (1-based, inclusive; None: the whole document, see
    :func:`lsp_server.actions.region_lines`); ``mode``: the mode to run (default: the setting,
    which may be ``auto``); ``focus_line``: 1-based document line the user pointed at;
    ``focus_policy``: the engine's (engine.decoding.localize.plan_focus), None for its default;
    ``update``: the text to merge into the document (an apply; ``partial``: write the chunks that
    could be placed when others cannot). Raises :class:`engine.api.EditError` saying why the
    engine would refuse it."""
    return EditRequest.from_settings(settings, doc.text, instruction, lines=lines, mode=mode,
                                     language=document_language(doc.uri, doc.language_id),
                                     focus_line=focus_line, focus_policy=focus_policy, update=update,
                                     partial=partial)
