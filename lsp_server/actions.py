"""The code actions, the edit command's argument contract, and which lines an edit covers.

Command ``copyAsDecode.server.edit`` takes ONE argument object::

    {"uri": str, "range": LSP Range | null, "instruction": str | null, "kind": "fix" | "edit",
     "focus": LSP Position | null}

``focus`` (optional) is where the user pointed: "AI fix" sets it to the start of the first
diagnostic, else to the cursor (an empty range or a selection within one line); the server
turns it into the engine's ``focus_line`` (document coordinates) and the prompt says "The
problem is at or near line K".

Command ``copyAsDecode.server.applyUpdate`` takes ONE argument object::

    {"uri": str, "update": str, "instruction": str | null, "partial": bool | null,
     "mode": "auto" | "program" | "speculative" | "ar" | "aligner" | null}

and merges ``update`` (a change written elsewhere: a chat answer, an agent's edit, the clipboard)
into the whole document as the engine's apply; it runs as an edit of kind ``apply``. ``mode``:
the mode asked for this apply (``aligner``: the rules alone, the rule deciding any choice they
leave and no model loaded); null: the ``mode`` setting.

Region rule (which lines the model may rewrite; the rest of the file is read-only context):

* a non-empty ``range`` (a selection): every line it touches, whole (a selection that ends at
  column 0 of a line does not take that line);
* an empty ``range`` (the cursor) or a diagnostic without a selection: the whole document when it
  has at most ``wholeDocumentLines`` lines (default 200); otherwise the top-level block around
  the cursor / diagnostics (from the nearest line above that starts at column 0, through the
  line before the next one; a block longer than 150 lines is cut to 60 lines either side);
* ``range`` null: the whole document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from lsprotocol import types

from engine.core.choices import APPLY_USER_MODES, FIX_INSTRUCTION
from engine.core.lines import line_offsets, split_lines
from engine.settings import DEFAULTS, Settings
from lsp_server.positions import DEFAULT, Encoding, LineIndex

COMMAND_EDIT = "copyAsDecode.server.edit"
COMMAND_CANCEL = "copyAsDecode.server.cancel"
COMMAND_SETTINGS = "copyAsDecode.server.settings"
COMMAND_APPLY_PENDING = "copyAsDecode.server.applyPending"
COMMAND_APPLY_UPDATE = "copyAsDecode.server.applyUpdate"
COMMAND_NEXT_CANDIDATE = "copyAsDecode.server.nextCandidate"
FIX_TITLE = "AI fix"
NEXT_TITLE = "AI fix: next candidate ({number} of {total})"
EDIT_TITLE = "AI edit\u2026"
DEFAULT_FIX_INSTRUCTION = FIX_INSTRUCTION
MAX_BLOCK_LINES = 150
BLOCK_WINDOW = 60
_CONTINUATIONS = (")", "]", "}", "else", "elif", "except", "finally", "catch", "end")


@dataclass(frozen=True)
class EditArgs:
    """The validated argument object of ``copyAsDecode.server.edit`` (or, with ``update``, of
    ``copyAsDecode.server.applyUpdate``: kind ``apply``)."""

    uri: str
    range: types.Range | None
    instruction: str | None
    kind: str = "edit"
    focus: types.Position | None = None
    focus_source: str = "cursor"  # "diagnostic": a tool found the problem there (see focus_policy)
    update: str | None = None  # the text to merge into the document (kind "apply")
    partial: bool = False  # apply: write the chunks that could be placed when others cannot
    mode: str | None = None  # apply: the mode asked for it (engine.core.choices.APPLY_USER_MODES); None: the setting's

    def over(self, settings: Settings) -> Settings:
        """``settings`` with the mode this apply asks for over the ``mode`` setting: who may decide
        a choice the merge's rules leave follows it (``aligner``: the rule, no model loaded)."""
        return settings if self.mode is None else settings.with_values({"mode": self.mode})

    @property
    def focus_policy(self) -> str | None:
        """The engine's focus policy for this request: a diagnostic's line is where a tool found
        the problem, not a guess, so the hint stays on it (``keep``; on HumanEvalFix-Python a hint
        exactly on the bug passes 31 of 164 kept against 25 under the default); a cursor, which
        is near the bug, gets the engine's default (None: ``guard``, engine/decoding/localize.py)."""
        return "keep" if self.focus is not None and self.focus_source == "diagnostic" else None

    @classmethod
    def parse(cls, raw: Any) -> "EditArgs":
        """Raises ValueError with a message that shows the expected shape."""
        shape = ('{"uri": str, "range": Range | null, "instruction": str | null, "kind": "fix" | "edit", '
                 '"focus": Position & {"source"?: "cursor" | "diagnostic"} | null}')
        if isinstance(raw, (list, tuple)) and len(raw) == 1:
            raw = raw[0]
        uri = uri_argument(raw, COMMAND_EDIT, shape, required=True) or ""  # required: never None
        rng = raw.get("range")
        parsed_range = None
        if rng is not None:
            try:
                parsed_range = types.Range(
                    start=types.Position(line=int(rng["start"]["line"]), character=int(rng["start"]["character"])),
                    end=types.Position(line=int(rng["end"]["line"]), character=int(rng["end"]["character"])))
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{COMMAND_EDIT}: 'range' must be an LSP Range or null, got {rng!r}") from None
        instruction = raw.get("instruction")
        if instruction is not None and not isinstance(instruction, str):
            raise ValueError(f"{COMMAND_EDIT}: 'instruction' must be a string or null, got {instruction!r}")
        focus = raw.get("focus")
        parsed_focus, source = None, "cursor"
        if focus is not None:
            try:
                parsed_focus = types.Position(line=int(focus["line"]), character=int(focus.get("character", 0)))
                source = focus.get("source") or "cursor"
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ValueError(f"{COMMAND_EDIT}: 'focus' must be an LSP Position or null, got {focus!r}") from None
            if source not in ("cursor", "diagnostic"):
                raise ValueError(f"{COMMAND_EDIT}: 'focus.source' must be \"cursor\" or \"diagnostic\", got {source!r}")
        kind = raw.get("kind") or "edit"
        if kind not in ("fix", "edit"):
            raise ValueError(f"{COMMAND_EDIT}: 'kind' must be \"fix\" or \"edit\", got {kind!r}")
        if kind == "fix" and not (instruction or "").strip():
            instruction = DEFAULT_FIX_INSTRUCTION
        return cls(uri, parsed_range, instruction.strip() if instruction else None, kind, parsed_focus, source)

    @classmethod
    def parse_apply(cls, raw: Any) -> "EditArgs":
        """The argument object of ``copyAsDecode.server.applyUpdate``; raises ValueError with a
        message that shows the expected shape."""
        shape = ('{"uri": str, "update": str, "instruction": str | null, "partial": bool | null, '
                 f'"mode": {" | ".join(map(repr, APPLY_USER_MODES))} | null}}')
        if isinstance(raw, (list, tuple)) and len(raw) == 1:
            raw = raw[0]
        uri = uri_argument(raw, COMMAND_APPLY_UPDATE, shape, required=True) or ""  # required: never None
        update = raw.get("update")
        if not isinstance(update, str):
            raise ValueError(f"{COMMAND_APPLY_UPDATE}: 'update' must be the text to apply, got {update!r}; "
                             f"expected {shape}")
        instruction = raw.get("instruction")
        if instruction is not None and not isinstance(instruction, str):
            raise ValueError(f"{COMMAND_APPLY_UPDATE}: 'instruction' must be a string or null, got {instruction!r}")
        partial = raw.get("partial")
        if partial is not None and not isinstance(partial, bool):
            raise ValueError(f"{COMMAND_APPLY_UPDATE}: 'partial' must be true, false or null, got {partial!r}")
        mode = raw.get("mode")
        if mode is not None and mode not in APPLY_USER_MODES:
            raise ValueError(f"{COMMAND_APPLY_UPDATE}: 'mode' must be one of {', '.join(APPLY_USER_MODES)} or null, "
                             f"got {mode!r}")
        return cls(uri, None, (instruction or "").strip() or None, "apply", update=update, partial=bool(partial),
                   mode=mode)


def uri_argument(raw: Any, command: str, shape: str = '{"uri": str | null}', required: bool = False) -> str | None:
    """The document URI in the one argument object of ``command`` (``raw``: the command's argument
    list as the client sent it, or the object itself). None when there is no argument or its
    ``uri`` is missing or null, unless ``required``. Raises ValueError that shows ``shape``."""
    if isinstance(raw, (list, tuple)):
        if not raw and not required:
            return None
        if len(raw) == 1:
            raw = raw[0]
    if not isinstance(raw, Mapping):
        raise ValueError(f"{command} takes one argument object {shape}, got {raw!r}")
    uri = raw.get("uri")
    if uri is None and not required:
        return None
    if not isinstance(uri, str) or not uri:
        what = "the document's URI" + ("" if required else " or null")
        raise ValueError(f"{command}: 'uri' must be {what}, got {uri!r}; expected {shape}")
    return uri


def flag_argument(raw: Any, name: str) -> bool:
    """Whether the one argument object of a command (see :func:`uri_argument`) sets ``name`` to true."""
    if isinstance(raw, (list, tuple)) and len(raw) == 1:
        raw = raw[0]
    return isinstance(raw, Mapping) and raw.get(name) is True


def fix_instruction(diagnostics: Sequence[types.Diagnostic]) -> str:
    """"Fix: <message>; <message>" from the diagnostics (deduplicated), or "Fix the bug"."""
    messages: list[str] = []
    for diagnostic in diagnostics:
        message = " ".join(diagnostic.message.split())
        if message and message not in messages:
            messages.append(message)
    return "Fix: " + "; ".join(messages) if messages else DEFAULT_FIX_INSTRUCTION


def _line_of(offsets: list[int], offset: int) -> int:
    """0-based engine line containing string ``offset`` (the last line for the end of text)."""
    import bisect

    n = len(offsets) - 1
    if n == 0:
        return 0
    return max(0, min(bisect.bisect_right(offsets, offset) - 1, n - 1))


def _is_block_start(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not line[0].isspace() and not stripped.startswith(_CONTINUATIONS)


def block_around(lines: list[str], index: int) -> tuple[int, int]:
    """0-based inclusive bounds of the top-level block holding line ``index`` (module docstring)."""
    start = index
    while start > 0 and not _is_block_start(lines[start]):
        start -= 1
    end = max(index, start)
    while end + 1 < len(lines) and not _is_block_start(lines[end + 1]):
        end += 1
    while end > index and not lines[end].strip():
        end -= 1
    if end - start + 1 > MAX_BLOCK_LINES:
        start, end = max(start, index - BLOCK_WINDOW), min(end, index + BLOCK_WINDOW)
    return start, end


def region_lines(text: str, selection: tuple[int, int] | None, anchors: Iterable[int] = (),
                 whole_document_lines: int = DEFAULTS.editor.whole_document_lines) -> tuple[int, int] | None:
    """Engine lines (1-based, inclusive) an edit covers, or None for the whole document.

    ``selection``: string offsets (start, end) of the client's range, None when there is none;
    ``anchors``: string offsets of the cursor / diagnostics when the selection is empty."""
    offsets = line_offsets(text)
    n = len(offsets) - 1
    if selection is None or n == 0:
        return None
    start, end = selection
    if end > start:
        first = _line_of(offsets, start)
        last = _line_of(offsets, end)
        if last > first and offsets[last] == end:
            last -= 1
        return first + 1, last + 1
    if n <= whole_document_lines:
        return None
    lines = split_lines(text)
    spans = [block_around(lines, _line_of(offsets, a)) for a in (start, *anchors)]
    return min(s for s, _ in spans) + 1, max(e for _, e in spans) + 1


def edit_region(text: str, args: EditArgs, encoding: Encoding, whole_document_lines: int) -> tuple[int, int] | None:
    """The engine lines an edit request covers (:func:`region_lines` of its range), None for the
    whole document."""
    if args.range is None:
        return None
    return region_lines(text, LineIndex(text).offsets_of(args.range, encoding), (), whole_document_lines)


def _kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    if not only:
        return True
    return any(kind == want or kind.startswith(want + ".") or want == "" for want in only)


def code_actions(uri: str, text: str, params: types.CodeActionParams, encoding: Encoding = DEFAULT,
                 whole_document_lines: int = DEFAULTS.editor.whole_document_lines) -> list[types.CodeAction]:
    """"AI fix" (quickfix; for the diagnostics in the request, or the cursor/selection) and
    "AI edit…" (refactor.rewrite; the client asks the user for the instruction)."""
    only = [getattr(k, "value", k) for k in (params.context.only or [])]
    diagnostics = list(params.context.diagnostics or [])
    index = LineIndex(text)
    sel_start, sel_end = index.offsets_of(params.range, encoding)
    selection_range = index.range_at(sel_start, sel_end, encoding)
    actions: list[types.CodeAction] = []

    if _kind_wanted(types.CodeActionKind.QuickFix.value, only):
        fix_range = selection_range
        if sel_start == sel_end and diagnostics:
            anchors = []
            for diagnostic in diagnostics:
                anchors.extend(index.offsets_of(diagnostic.range, encoding))
            lines = region_lines(text, (sel_start, sel_end), anchors, whole_document_lines)
            if lines is not None:  # a large file: pin the block of the diagnostics now
                a, b = line_offsets(text)[lines[0] - 1], line_offsets(text)[lines[1]]
                fix_range = index.range_at(a, b, encoding)
        argument = {"uri": uri, "range": _range_json(fix_range),
                    "instruction": fix_instruction(diagnostics), "kind": "fix",
                    "focus": _focus(params.range, diagnostics)}
        actions.append(types.CodeAction(
            title=FIX_TITLE, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostics or None,
            is_preferred=bool(diagnostics) or None,
            command=types.Command(title=FIX_TITLE, command=COMMAND_EDIT, arguments=[argument])))

    if _kind_wanted(types.CodeActionKind.RefactorRewrite.value, only):
        argument = {"uri": uri, "range": _range_json(selection_range), "instruction": None, "kind": "edit"}
        actions.append(types.CodeAction(
            title=EDIT_TITLE, kind=types.CodeActionKind.RefactorRewrite,
            command=types.Command(title=EDIT_TITLE, command=COMMAND_EDIT, arguments=[argument])))
    return actions


def next_candidate_action(uri: str, number: int, total: int, params: types.CodeActionParams) -> types.CodeAction | None:
    """"AI fix: next candidate (2 of 3)" (quickfix): the command ``copyAsDecode.server.nextCandidate``
    writes the checked fix's candidate ``number`` in place of the one shown (lsp_server.verified)."""
    only = [getattr(k, "value", k) for k in (params.context.only or [])]
    if not _kind_wanted(types.CodeActionKind.QuickFix.value, only):
        return None
    title = NEXT_TITLE.format(number=number, total=total)
    command = types.Command(title=title, command=COMMAND_NEXT_CANDIDATE, arguments=[{"uri": uri}])
    return types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, command=command)


def _focus(cursor: types.Range, diagnostics: Sequence[types.Diagnostic]) -> dict | None:
    """Where "AI fix" points the model: the first diagnostic's start, else the cursor (an empty
    range or a selection inside one line); None for a selection over several lines. ``source``
    says which (a diagnostic's line is kept as the hint: EditArgs.focus_policy)."""
    if diagnostics:
        start, source = diagnostics[0].range.start, "diagnostic"
    elif cursor.start.line == cursor.end.line:
        start, source = cursor.start, "cursor"
    else:
        return None
    return {"line": start.line, "character": start.character, "source": source}


def focus_line(text: str, focus: types.Position | None, encoding: Encoding = DEFAULT) -> int | None:
    """The engine line (1-based, document coordinates) of an LSP position, or None."""
    if focus is None:
        return None
    offset = LineIndex(text).offset_at(focus, encoding)
    return _line_of(line_offsets(text), offset) + 1


def _range_json(rng: types.Range) -> dict:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}
