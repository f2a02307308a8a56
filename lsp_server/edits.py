"""Engine events -> minimal, versioned LSP text edits (the live-document rule).

While an edit decodes, the region in the editor shows ``resolved + input_lines[consumed:]``
(:meth:`LiveRegion.live_text`): the output so far, followed by the input lines the output has
not moved past yet. It starts as the input and ends as the output, so every intermediate state
is readable code, and each step is sent as ONE ``TextEdit`` that replaces only the differing
middle between what the editor shows and the new text (:func:`minimal_replacement`).

Line endings: LSP clients normalise the line endings of inserted text (VS Code advertises
``normalizesLineEndings``; Neovim converts to the buffer's ``fileformat``), so in a document whose
line breaks are all ``\\r\\n`` every ``\\n`` becomes ``\\r\\n`` here too (:func:`match_eol`);
otherwise the echo of an edit would never equal what was sent. (The engine already edits such a
buffer as its LF twin and gives the output back in CRLF, engine.core.lines; this keeps a stray
bare ``\\n`` from reaching the editor.)

Everything here is pure (no I/O), so it is unit-tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from engine.core.lines import line_offsets, split_lines, uses_crlf
from lsp_server.positions import DEFAULT, Encoding, LineIndex


@dataclass(frozen=True)
class Replacement:
    """Replace ``text[start:end]`` (string offsets into the whole document) with ``new_text``."""

    start: int
    end: int
    new_text: str

    def apply(self, text: str) -> str:
        return text[:self.start] + self.new_text + text[self.end:]


def minimal_replacement(old: str, new: str) -> Replacement | None:
    """The smallest single replacement turning ``old`` into ``new`` (common prefix and suffix
    kept), or None when they are equal. The cut never falls between the ``\\r`` and ``\\n`` of a
    CRLF, which is not a valid LSP position."""
    if old == new:
        return None
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    if prefix > 0 and old[prefix - 1] == "\r" and (old[prefix:prefix + 1] == "\n" or new[prefix:prefix + 1] == "\n"):
        prefix -= 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    while suffix > 0:
        cut_old, cut_new = len(old) - suffix, len(new) - suffix
        splits_crlf = old[cut_old] == "\n" and (
            (cut_old > 0 and old[cut_old - 1] == "\r") or (cut_new > 0 and new[cut_new - 1] == "\r"))
        if not splits_crlf:
            break
        suffix -= 1
    return Replacement(prefix, len(old) - suffix, new[prefix:len(new) - suffix])


def match_eol(text: str, crlf: bool) -> str:
    """``text`` with every bare ``\\n`` turned into ``\\r\\n`` when ``crlf`` (else unchanged)."""
    if not crlf:
        return text
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def region_offsets(text: str, lines: tuple[int, int] | None) -> tuple[int, int]:
    """String offsets [start, end) of engine lines ``lines`` (1-based inclusive; None = all)."""
    offsets = line_offsets(text)
    if lines is None:
        return 0, len(text)
    a, b = lines
    n = len(offsets) - 1
    return offsets[min(a - 1, n)], offsets[min(b, n)]


class LiveRegion:
    """The edited region as the editor shows it, and the edits that move it forward.

    ``shown`` is what the editor displays for the region (after the last confirmed edit);
    :meth:`step` plans the replacement to a new region text and :meth:`commit` records it once
    the client confirmed it.
    """

    def __init__(self, document: str, lines: tuple[int, int] | None, crlf: bool | None = None):
        start, end = region_offsets(document, lines)
        self.before = document[:start]
        self.after = document[end:]
        self.input = document[start:end]
        self.input_lines = split_lines(self.input)
        self.crlf = uses_crlf(document) if crlf is None else crlf
        self.shown = self.input

    @property
    def start(self) -> int:
        return len(self.before)

    def live_text(self, resolved: str, input_lines_consumed: int) -> str:
        """The region while decoding: output so far + the input lines not yet moved past."""
        rest = "".join(self.input_lines[input_lines_consumed:])
        return match_eol(resolved, self.crlf) + rest

    def final_text(self, region_output: str) -> str:
        return match_eol(region_output, self.crlf)

    def document(self, region_text: str | None = None) -> str:
        """The whole document with ``region_text`` (default: what is shown) in the region."""
        return self.before + (self.shown if region_text is None else region_text) + self.after

    def step(self, new_region_text: str) -> Replacement | None:
        """Document-level replacement from what is shown to ``new_region_text`` (None: no change)."""
        rep = minimal_replacement(self.shown, new_region_text)
        if rep is None:
            return None
        return Replacement(self.start + rep.start, self.start + rep.end, rep.new_text)

    def commit(self, new_region_text: str) -> None:
        self.shown = new_region_text


def text_edit(document: str, replacement: Replacement, encoding: Encoding = DEFAULT) -> types.TextEdit:
    """The LSP ``TextEdit`` for ``replacement`` on ``document``, in ``encoding`` code units."""
    index = LineIndex(document)
    return types.TextEdit(range=index.range_at(replacement.start, replacement.end, encoding),
                          new_text=replacement.new_text)


def workspace_edit(uri: str, version: int | None, edit: types.TextEdit,
                   document_changes: bool) -> types.WorkspaceEdit:
    """A ``WorkspaceEdit`` with one edit: a versioned ``TextDocumentEdit`` when the client
    supports ``documentChanges`` (so it refuses the edit if the document moved on), else the
    plain ``changes`` map the specification requires for other clients."""
    if document_changes:
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=ident, edits=[edit])])
    return types.WorkspaceEdit(changes={uri: [edit]})


CONFIRM_ANNOTATION = "copyAsDecode.review"


def preview_workspace_edit(uri: str, version: int | None, edit: types.TextEdit, label: str,
                           description: str) -> types.WorkspaceEdit:
    """A versioned ``WorkspaceEdit`` whose edit carries a change annotation with
    ``needsConfirmation``: a client with ``changeAnnotationSupport`` (VS Code: the refactor
    preview) shows it and applies it only once the user confirms. Annotated edits exist only
    inside ``documentChanges``, so the client must support both."""
    annotated = types.AnnotatedTextEdit(range=edit.range, new_text=edit.new_text, annotation_id=CONFIRM_ANNOTATION)
    ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(text_document=ident, edits=[annotated])],
        change_annotations={CONFIRM_ANNOTATION: types.ChangeAnnotation(
            label=label, needs_confirmation=True, description=description)})


def unified_diff(before: str, after: str, name: str) -> str:
    """The change as a unified diff (for clients that cannot preview it: the log shows it)."""
    import difflib

    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
