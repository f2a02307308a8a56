"""An answer that names several files, applied by the editor as one ``WorkspaceEdit``.

``copyAsDecode.server.applyUpdate`` hands its update here when the update names files (a fenced
block headed by its path, a path line above a fence, a unified diff: engine.apply.answer via
engine.workspace_apply). The files are the workspace folder's of the document the command was
run from (its folder when it is in none). Each file's text is its open buffer, else the file on
disk. Every merge runs first, in memory, with the CLI's checks; when any file is refused (an
unplaced chunk, a path outside the folder, a file that does not exist, a syntax break, ...)
nothing is sent and the message names each refused file. Otherwise one ``workspace/applyEdit``
carries every file's change: a versioned ``TextDocumentEdit`` per file (the buffer's version;
none for a file that is not open), each annotated with a change annotation that needs
confirmation when the client can show one (VS Code: one refactor preview for all files, one undo
per file). A client without annotations applies it at once.

A file the answer names that does not exist is created, as ``copy-as-decode apply --create``
creates it (from a block without markers, inside the folder only), when the client takes
``CreateFile`` operations (``workspace.workspaceEdit.resourceOperations`` lists "create"): the
edit opens with a ``CreateFile`` (neither overwriting nor ignoring a file that appeared since)
under the same annotation, followed by the new file's text. A client that lists no "create" gets
the refusal, naming the file and why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lsprotocol import types

from engine.api import EditError, ModelLoadError
from engine.core.modes import needs_model
from engine.workspace_apply import AnswerOptions, ChoosingMerger, FileChange, Merger, plan_answer, read_source
from lsp_server.actions import EditArgs
from lsp_server.client import report
from lsp_server.documents import path_of
from lsp_server.edits import CONFIRM_ANNOTATION, minimal_replacement, text_edit
from lsp_server.models import ModelKey
from lsp_server.outcome import Outcome
from lsp_server.services import EditServices
from lsp_server.writer import apply_edit

if TYPE_CHECKING:
    from engine.settings import Settings

LABEL = "AI apply"
NO_FOLDER = "{uri} is not a file on disk: an answer that names files applies to the files of its workspace folder"
CHANGED = "{uri} changed while the answer was merged: nothing was applied; apply the answer again"
# A created file's text replaces its first line, line break included: VS Code clamps the end to
# the empty document's end; Neovim's empty buffer is one empty line (with 'eol', "\n" to the
# server), and an edit that ends past its last line drops the empty line left after the text,
# where an insert at 0:0 would leave the file a blank line longer.
NEW_FILE_RANGE = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=1, character=0))
NOT_CREATED = ("this editor cannot create it: its language client does not list \"create\" in "
               "workspace.workspaceEdit.resourceOperations (create the file, or run copy-as-decode apply "
               "--update ANSWER --create)")


@dataclass(frozen=True)
class Buffer:
    """An open document as it was when the merge began (the store's documents change in place)."""

    uri: str
    text: str
    version: int | None


def open_buffers(services: EditServices) -> dict[Path, Buffer]:
    """The open documents by their resolved file path, as they are now."""
    buffers: dict[Path, Buffer] = {}
    for uri in services.documents.uris():
        path, doc = path_of(uri), services.documents.get(uri)
        if path is not None and doc is not None:
            buffers[path.resolve()] = Buffer(doc.uri, doc.text, doc.version)
    return buffers


def moved_on(services: EditServices, buffers: dict[Path, Buffer]) -> str | None:
    """The URI of an open document that changed since ``buffers`` was taken, or None."""
    for buffer in buffers.values():
        doc = services.documents.get(buffer.uri)
        if doc is not None and doc.text != buffer.text:
            return buffer.uri
    return None


async def run_answer(services: EditServices, args: EditArgs) -> dict:
    """Merge the answer in ``args.update`` into the files it names, then send one edit (module docstring)."""
    client = services.client
    here = path_of(args.uri)
    if here is None:
        return report(client, Outcome("error", NO_FOLDER.format(uri=args.uri)))
    root = services.settings.root_for(here) or here.parent
    settings, _ = await services.settings.pulled(args.uri)
    settings = args.over(settings)  # the answer's own mode, if it asks one
    buffers = open_buffers(services)

    def read(path: Path) -> str:
        doc = buffers.get(path.resolve())
        return doc.text if doc is not None else read_source(path)

    merger: Merger = ChoosingMerger(settings.model.name, _loader(services, settings, asyncio.get_running_loop()))
    if needs_model(settings.value("mode"), apply=True):
        try:
            merger = await services.models.engine_for(ModelKey.of(settings))
        except ModelLoadError as exc:  # engine_for has shown it
            return report(client, Outcome("error", str(exc)))
    client.status("editing", f"apply: an answer naming files under {root}")
    features = client.features
    options = AnswerOptions(args.instruction or "", None, args.partial, create=features.create_files,
                            create_folders=features.creates_folders, not_created=NOT_CREATED)
    try:
        plan = await asyncio.to_thread(plan_answer, args.update or "", root, merger, lambda _path: settings, options,
                                       read)
    except EditError as exc:
        return report(client, Outcome("error", str(exc)))
    refused = plan.refusal()
    if refused is not None:
        status = "unplaced" if refused.kind == "unplaced" else "error"
        return report(client, Outcome(status, plan.message(), summary=plan.json([])))
    changes = plan.to_write()
    if not changes:
        return report(client, Outcome("unchanged", "AI apply: the answer changes no file", summary=plan.json([])))
    stale = moved_on(services, buffers)  # a client without versioned edits would not notice
    if stale is not None:
        return report(client, Outcome("conflict", CHANGED.format(uri=stale), summary=plan.json([])))
    edit = workspace_edit(changes, buffers, services)
    names = ", ".join(c.path + (" (new)" if c.before is None else "") for c in changes)
    answer = await apply_edit(client, edit, LABEL)
    if not answer.applied:
        return report(client, Outcome("rejected", answer.problem, summary=plan.json([])))
    done = [c.target for c in changes if c.target is not None]
    return report(client, Outcome("done", f"AI apply: {len(changes)} file(s) changed ({names})",
                                  edits_applied=len(changes), summary=plan.json(done)))


def _loader(services: EditServices, settings: "Settings", loop: asyncio.AbstractEventLoop) -> Callable[[], Merger | None]:
    """Loads the user's own model for a file whose merge leaves a choice (from the merging thread,
    on the server's loop: engine_for shows the load, and a failure); None when it fails: the rule
    decides (engine.workspace_apply.ChoosingMerger)."""
    def load() -> Merger | None:
        try:
            return asyncio.run_coroutine_threadsafe(services.models.engine_for(ModelKey.of(settings)), loop).result()
        except Exception:  # noqa: BLE001 - shown by engine_for; the result says the rule decided
            return None

    return load


def workspace_edit(changes: list[FileChange], buffers: dict[Path, Buffer],
                   services: EditServices) -> types.WorkspaceEdit:
    """One edit for every file: versioned document edits (annotated for review when the client
    shows annotations), the files to create first; or the plain ``changes`` map for a client
    without ``documentChanges`` when nothing is created (a ``CreateFile`` travels in
    ``documentChanges`` only, which a client that lists "create" takes)."""
    features = services.client.features
    review = features.review
    annotation = CONFIRM_ANNOTATION if review else None
    creates: list[types.CreateFile] = []
    edits: list[tuple[str, int | None, types.TextEdit]] = []
    for change in changes:
        assert change.target is not None and change.after is not None
        doc = buffers.get(change.target.resolve())
        if change.before is None:
            uri = change.target.as_uri()
            creates.append(types.CreateFile(uri=uri, options=types.CreateFileOptions(
                overwrite=False, ignore_if_exists=False), annotation_id=annotation))
            if change.after:  # an empty new file is the CreateFile alone
                edits.append((uri, None, types.TextEdit(range=NEW_FILE_RANGE, new_text=change.after)))
            continue
        before = doc.text if doc is not None else change.before
        replacement = minimal_replacement(before, change.after)
        if replacement is None:
            continue
        uri = doc.uri if doc is not None else change.target.as_uri()
        edits.append((uri, doc.version if doc is not None else None,
                      text_edit(before, replacement, services.encoding)))
    if not features.document_changes and not creates:
        return types.WorkspaceEdit(changes={uri: [edit] for uri, _, edit in edits})

    def document_edit(uri: str, version: int | None, edit: types.TextEdit) -> types.TextDocumentEdit:
        one: types.TextEdit = (types.AnnotatedTextEdit(range=edit.range, new_text=edit.new_text,
                                                      annotation_id=CONFIRM_ANNOTATION) if review else edit)
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.TextDocumentEdit(text_document=ident, edits=[one])

    annotations = None
    if review:
        created = f", {len(creates)} of them new" if creates else ""
        annotations = {CONFIRM_ANNOTATION: types.ChangeAnnotation(
            label=LABEL, needs_confirmation=True,
            description=f"the answer's changes to {len(changes)} file(s){created}")}
    operations: list = [*creates, *(document_edit(*item) for item in edits)]
    return types.WorkspaceEdit(document_changes=operations, change_annotations=annotations)
