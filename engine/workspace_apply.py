"""A chat answer that names several files, applied to all of them or to none.

The answer is split into one block per file (engine.apply.answer). Each block is merged in memory
(an update: the engine's apply, as ``copy-as-decode apply FILE`` runs it; a diff: its hunks,
engine.apply.patch) and judged by the one verdict (engine.verdict) with the file's syntax check.
Only when every file's merge may be written is anything written (:func:`write_all`, each file
via a temporary file and a rename, the ones already written restored if a later one fails); the
language server sends the same changes as one ``WorkspaceEdit`` instead.

Refused before any merge, with every file unchanged (exit status 2): a path outside the root
(absolute, ``..``, or a symbolic link that leads out) or inside ``.git`` (``.hg``, ``.svn``), a
file that does not exist (unless ``create``; in a folder that does not exist either, unless
``create_folders`` too), two blocks for the same file (they are not merged in order: which one
wins is a guess), a diff that deletes a file, a binary (or not UTF-8) file, and a file longer
than ``applyMaxLines``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Callable, Literal, Protocol

from engine.api import EditError, EditRequest, language_for
from engine.apply.answer import Answer, FileBlock, normalised, split_answer
from engine.apply.markers import is_marker
from engine.apply.patch import apply_hunks
from engine.checks.syntax import SyntaxVerdict, check_edit
from engine.core.lines import split_lines
from engine.core.staged import staged
from engine.decoding.events import EditResult
from engine.dispatch import ModelFree
from engine.settings import Settings
from engine.verdict import EXIT_BAD_REQUEST, EXIT_SYNTAX, EXIT_UNPLACED, judge

ChangeKind = Literal["write", "unchanged", "bad_input", "cancelled", "unfinished", "destructive", "syntax",
                     "unplaced"]
# Which file's refusal the whole answer's exit status is: bad input first, then unplaced chunks,
# then the verdict's own order (engine.verdict.judge).
_PRIORITY = ("bad_input", "cancelled", "unplaced", "unfinished", "destructive", "syntax")
# Refusals --force overrides (as for one file: never a cancel, an unplaced chunk or bad input).
FORCEABLE = ("unfinished", "destructive", "syntax")
# Folders an answer never writes into: a repository's own config can name commands that run
# (git's core.fsmonitor, hooks).
VCS_FOLDERS = {".git", ".hg", ".svn"}


class Merger(Protocol):
    """What merges one file: :class:`engine.api.Engine`, :class:`engine.dispatch.ModelFree` or
    :class:`ChoosingMerger`."""

    def edit(self, request: EditRequest) -> EditResult: ...


class ChoosingMerger:
    """The aligner's merge (no model) of every file, the model loaded (``load``) at the first
    file whose merge leaves a choice that a user's own model ``name`` decides
    (engine.dispatch.ModelFree.loads_for_choice); that file and every later one are then merged
    by its engine, which decides under its lock, as one file's apply does. ``load`` returns None
    when the model does not load: the rule decides (each result says who did)."""

    def __init__(self, name: str, load: Callable[[], Merger | None]):
        self.free = ModelFree(name)
        self._load = load
        self._engine: Merger | None = None
        self._tried = False

    def edit(self, request: EditRequest) -> EditResult:
        if not self._tried and ModelFree.loads_for_choice(self.free.name, request):
            self._tried = True
            self._engine = self._load()
        return (self._engine or self.free).edit(request)


@dataclass
class FileChange:
    """One file of an answer: the ``path`` as the answer wrote it, the ``target`` under the root
    (None when refused before it was resolved), its text ``before`` (None: it does not exist and
    is created) and ``after`` the merge (None: nothing to write), the verdict's ``kind`` with its
    ``exit_code`` and ``message`` (the CLI's words), the chunks not placed (``unplaced``: update
    lines or diff hunks, in words) and the syntax check's verdict."""

    path: str
    target: Path | None
    kind: ChangeKind
    exit_code: int = 0
    message: str = ""
    before: str | None = None
    after: str | None = None
    unplaced: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    syntax: SyntaxVerdict | None = None
    result: EditResult | None = None

    @property
    def choice(self) -> dict[str, Any] | None:
        """Where the merge's rules left a choice: who decided and the alternative
        (engine.apply.choice.Decision.json); None when there was none."""
        return self.result.breakdown.get("choice") if self.result is not None else None

    @property
    def changed(self) -> bool:
        if self.after is None:
            return False
        return self.before is None or self.after != self.before

    def json(self, written: bool) -> dict[str, Any]:
        return {"path": self.path, "target": str(self.target) if self.target else None, "status": self.kind,
                "exit_code": self.exit_code, "message": self.message or None, "created": self.before is None,
                "changed": self.changed, "unplaced": self.unplaced, "warnings": self.warnings,
                "syntax": self.syntax.json() if self.syntax else None, "written": written and self.changed,
                "choice": self.choice}


@dataclass
class AnswerPlan:
    """Every file's change, merged in memory; nothing is written yet (:func:`write_all`).
    ``unnamed``: how many fenced blocks of the answer named no file (not applied: said so)."""

    root: Path
    changes: list[FileChange]
    unnamed: int = 0

    def notice(self) -> str:
        """What the answer held that was not applied ("" when nothing)."""
        if not self.unnamed:
            return ""
        return (f"{self.unnamed} fenced block(s) of the answer name no file and were not applied (head a block "
                "with its path to apply it)")

    def refusal(self, force: bool = False) -> FileChange | None:
        """The file whose refusal stops the whole answer (``force``: the forceable ones do not), or None."""
        for kind in _PRIORITY:
            if force and kind in FORCEABLE:
                continue
            for change in self.changes:
                if change.kind == kind:
                    return change
        return None

    def exit_code(self, force: bool = False) -> int:
        refused = self.refusal(force)
        return refused.exit_code if refused else 0

    def message(self, force: bool = False) -> str:
        """What refuses the answer, every refused file named ("" when it may be written)."""
        if self.refusal(force) is None:
            return ""
        lines = [f"{c.path}: {c.message}" for c in self.changes if c.kind in _PRIORITY
                 and not (force and c.kind in FORCEABLE)]
        return "nothing was written:\n" + "\n".join(f"  {line}" for line in lines)

    def to_write(self) -> list[FileChange]:
        return [c for c in self.changes if c.changed and c.target is not None]

    def json(self, written: list[Path], force: bool = False) -> dict[str, Any]:
        done = set(written)
        return {"root": str(self.root), "exit_code": self.exit_code(force), "refused": self.message(force) or None,
                "written": [str(p) for p in written], "not_applied": self.notice() or None,
                "files": [c.json(c.target in done) for c in self.changes]}


def names_files(answer: str) -> bool:
    """Does ``answer`` name at least one file (a block headed by its path, or a diff)? An update
    for one file (the code alone, or a fenced block without a path) names none."""
    return bool(split_answer(answer).blocks)


def update_for_document(answer: str, root: Path, document: Path) -> str | None:
    """The update for ``document`` alone when ``answer``'s one block (an update, not a diff) is
    headed by it: its path under ``root``, or its file name when that path names no file there
    (a chat model that left the folders out). None otherwise: the answer is for its files."""
    blocks = split_answer(answer).blocks
    if len(blocks) != 1 or blocks[0].kind != "update":
        return None
    block = blocks[0]
    try:
        target = inside_root(root, block.path)
    except EditError:
        return None
    if target == document.resolve() or (not target.exists() and target.name == document.name):
        return block.text
    return None


def inside_root(root: Path, path: str) -> Path:
    """``path`` (an answer's, relative) resolved under ``root``; :class:`EditError` when it is
    absolute, climbs out with ``..``, or leads out through a symbolic link."""
    if not path.strip():
        raise EditError("the answer names an empty path")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive \
            or path.startswith("~"):
        raise EditError(f"{path} is an absolute path: the answer's paths must be relative to the root {root}")
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise EditError(f"{path} climbs out of the root {root} ('..'): refused")
    if set(PurePosixPath(path.replace("\\", "/")).parts) & VCS_FOLDERS:
        raise EditError(f"{path} is inside a version control folder: refused (its config can run commands)")
    base = root.resolve()
    target = (base / normalised(path)).resolve()
    if not target.is_relative_to(base):
        raise EditError(f"{path} leads outside the root {root} (through a symbolic link to {target}): refused")
    if target.exists() and not target.is_file():
        raise EditError(f"{path} is not a regular file")
    return target


def read_source(path: Path) -> str:
    """A file's text; :class:`EditError` for a binary file (a NUL byte) or one that is not UTF-8."""
    data = path.read_bytes()
    if b"\0" in data:
        raise EditError("a binary file (it holds NUL bytes): an update is merged into text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"a binary file, or not UTF-8 text ({exc.reason} at byte {exc.start})") from None


@dataclass(frozen=True)
class AnswerOptions:
    """What the front door asks: the ``instruction`` the model reads, the request's ``mode`` (None:
    the settings'), ``partial`` (write what was placed), ``create`` (a named file that does not
    exist is created), ``create_folders`` (... in a folder that does not exist either) and
    ``not_created``: why a file that does not exist is refused, in the front door's words."""

    instruction: str = ""
    mode: str | None = None
    partial: bool = False
    create: bool = False
    create_folders: bool = True
    not_created: str = "--create creates the files an answer names"


def plan_answer(answer: str | Answer, root: Path, merger: Merger, settings_for: Callable[[Path], Settings],
                options: AnswerOptions = AnswerOptions(),
                read: Callable[[Path], str] = read_source) -> AnswerPlan:
    """Every named file's merge, in memory (see the module docstring); ``settings_for`` gives a
    file's settings (the CLI: its workspace files and flags), ``read`` its text (the language
    server: the open buffer, else the disk). :class:`EditError` when the answer names no file."""
    parsed = split_answer(answer) if isinstance(answer, str) else answer
    if not parsed.blocks:
        found = f" ({len(parsed.unnamed)} fenced block(s) without a path)" if parsed.unnamed else ""
        raise EditError("the answer names no file" + found + ": head each block with its path (```python "
                        "path/to/x.py, or a line `path/to/x.py` just above the fence) or give a unified diff, "
                        "or name the file to merge into (apply FILE)")
    duplicates = parsed.duplicates()
    changes = []
    for block in parsed.blocks:
        if normalised(block.path) in duplicates:
            lines = " and ".join(str(b.line) for b in duplicates[normalised(block.path)])
            changes.append(_bad(block, None, f"the answer has several blocks for this file (answer lines {lines}): "
                                             "refused, since which one is meant is a guess; keep one block per "
                                             "file (or apply them one at a time)"))
            continue
        changes.append(_change(block, root, merger, settings_for, options, read))
    return AnswerPlan(root, changes, len(parsed.unnamed))


def _bad(block: FileBlock, target: Path | None, message: str) -> FileChange:
    return FileChange(block.path, target, "bad_input", EXIT_BAD_REQUEST, message)


def _change(block: FileBlock, root: Path, merger: Merger, settings_for: Callable[[Path], Settings],
            options: AnswerOptions, read: Callable[[Path], str]) -> FileChange:
    try:
        target = inside_root(root, block.path)
    except EditError as exc:
        return _bad(block, None, str(exc))
    if block.deleted:
        return _bad(block, target, "the diff deletes this file: deleting is not applied (delete it yourself)")
    exists = target.is_file()
    if not exists and not options.create:
        return _bad(block, target, f"no such file under {root} ({options.not_created})")
    if not exists and not options.create_folders and not target.parent.is_dir():
        return _bad(block, target, f"its folder {target.parent} does not exist, and this client creates a file only in a "
                                   "folder that does (create the folder first)")
    try:
        before = read(target) if exists else ""
    except EditError as exc:
        return _bad(block, target, str(exc))
    except OSError as exc:
        return _bad(block, target, f"cannot read it: {exc.strerror or exc}")
    settings = settings_for(target)
    limit = settings.apply.max_lines
    if len(split_lines(before)) > limit:
        return _bad(block, target, f"file too large to apply an update to: {len(split_lines(before))} lines "
                                   f"(applyMaxLines is {limit})")
    language = language_for(str(target))
    if block.kind == "diff":
        change = _patched(block, target, before, language, options.partial)
    elif not exists and any(is_marker(line) for line in split_lines(block.text)):
        return _bad(block, target, "the file does not exist, and the update elides code of it (\"... existing "
                                   "code ...\"): nothing to keep")
    else:
        change = _merged(block, target, before, merger, settings, options, language)
    if not exists:
        change.before = None
    return change


def _merged(block: FileBlock, target: Path, before: str, merger: Merger, settings: Settings,
            options: AnswerOptions, language: str) -> FileChange:
    """An update block: the engine's apply and its verdict, as for one file."""
    try:
        request = EditRequest.from_settings(settings, before, options.instruction, mode=options.mode,
                                            update=block.text, partial=options.partial, language=language)
        result = merger.edit(request)
    except EditError as exc:
        return _bad(block, target, str(exc))
    verdict = judge(result, request.instruction, request.max_new_tokens, language)
    unplaced = [f"update lines {c.start}-{c.end} of the block at answer line {block.line} "
                f"({c.text.strip().splitlines()[0][:60]!r})" for c in result.unplaced]
    kind: ChangeKind = "unchanged" if verdict.kind == "write" and not result.changed else verdict.kind
    message = verdict.message
    if kind == "unplaced":  # each chunk with its place in the answer (the engine's words stay in warnings)
        message = f"could not place {', '.join(unplaced)} (--partial writes the rest)"
    after = result.output_text if verdict.kind in ("write", *FORCEABLE) and result.stop_reason != "cancelled" \
        else None
    return FileChange(block.path, target, kind, verdict.exit_code, message, before, after, unplaced,
                      list(result.warnings) + _notes(verdict.syntax), verdict.syntax, result)


def _patched(block: FileBlock, target: Path, before: str, language: str, partial: bool) -> FileChange:
    """A diff block: its hunks applied exactly (engine.apply.patch), then the syntax check."""
    patched = apply_hunks(before, block.hunks)
    unplaced = [hunk.describe() for hunk in patched.unplaced]
    syntax = check_edit(before, patched.text, language)
    notes = _notes(syntax)
    if not block.hunks:
        return FileChange(block.path, target, "bad_input", EXIT_BAD_REQUEST, "the diff has no @@ hunk", before)
    if unplaced and not partial:
        message = (f"could not place {', '.join(unplaced)}: its old lines are not in the file (or not once) "
                   "(--partial writes the rest)")
        return FileChange(block.path, target, "unplaced", EXIT_UNPLACED, message, before, None, unplaced, notes,
                          syntax)
    if unplaced:
        notes.insert(0, f"could not place {', '.join(unplaced)}; the rest was merged")
    broken = syntax.reason()
    if broken:
        return FileChange(block.path, target, "syntax", EXIT_SYNTAX,
                          f"refusing an edit that breaks the syntax: it {broken}", before, patched.text, unplaced,
                          notes, syntax)
    kind: ChangeKind = "write" if patched.text != before else "unchanged"
    return FileChange(block.path, target, kind, 0, "", before, patched.text, unplaced, notes, syntax)


def _notes(syntax: SyntaxVerdict | None) -> list[str]:
    return [syntax.note] if syntax is not None and syntax.note else []


def write_all(plan: AnswerPlan) -> list[Path]:
    """Write every changed file of ``plan`` or none: each to a temporary file beside it first,
    then each renamed over its target; if a rename fails, the files already renamed get their
    text back (a created one is removed) and :class:`EditError` says which file failed."""
    changes = plan.to_write()
    ready: list[tuple[FileChange, str]] = []
    try:
        for change in changes:
            assert change.target is not None and change.after is not None
            change.target.parent.mkdir(parents=True, exist_ok=True)
            ready.append((change, staged(change.target, change.after)))
    except OSError as exc:
        for _, tmp in ready:
            Path(tmp).unlink(missing_ok=True)
        raise EditError(f"could not write {changes[len(ready)].path}: {exc.strerror or exc}; nothing was "
                        "written") from None
    done: list[FileChange] = []
    try:
        for change, tmp in ready:
            assert change.target is not None
            os.replace(tmp, change.target)
            done.append(change)
    except OSError as exc:
        failed = ready[len(done)][0].path
        for _, tmp in ready[len(done):]:
            Path(tmp).unlink(missing_ok=True)
        _restore(done)
        raise EditError(f"could not write {failed}: {exc.strerror or exc}; the files written before it were "
                        "restored, nothing was changed") from None
    return [c.target for c in done if c.target is not None]


def _restore(done: list[FileChange]) -> None:
    """Give the files in ``done`` their text before the answer back (remove the created ones)."""
    for change in reversed(done):
        assert change.target is not None
        if change.before is None:
            change.target.unlink(missing_ok=True)
        else:
            change.target.write_text(change.before, encoding="utf-8", newline="")
