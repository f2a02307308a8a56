"""One edit played into the editor: the engine's events, live in the open document, then judged.

The engine runs in the loop's executor and its events come back in batches
(:class:`lsp_server.worker.BlockingStream`); the loop keeps answering other requests. In
``stream`` mode each batch of resolved ops becomes ONE ``workspace/applyEdit`` (ops that arrive
while an edit is in flight are coalesced into the next one, so a slow client sees fewer, larger
steps, never a backlog). The document stays the edit's own through
:class:`lsp_server.writer.DocumentWriter`: a change by anyone else, a refused or unanswered
applyEdit, or a missing echo stops the edit (decoding is cancelled, no further edit is sent, so
nothing the user wrote is overwritten) and the user is told what happened and that undo reverts
the partial edit. An apply (the request carries an ``update``) runs the same way; one that could
not place its update writes nothing and names the update lines it could not place (with
``partial`` it writes what was placed and names the rest). A cancel (work-done progress cancel,
the cancel command, or a newer request for the same document) restores the region's original
text with one final edit when the document is still as the edit left it; so does a stop at the
token limit or at a degenerate loop (the engine's guard), with the reason in the message.

Review before applying: the final result gets the verdict every front door gives
(:func:`engine.verdict.judge`, the CLI's exit codes and the HTTP endpoint's ``refused``): an edit
that would delete or rewrite most of its region for a fix, an edit that breaks the syntax (the
whole document parsed before and does not after: :mod:`engine.checks.syntax`; the message names
the parser's error), a fix whose every touched line lies more than three lines from the line the
user pointed at (the cursor or diagnostic "AI fix" sends: "it edits lines 4-4, far from line 10
where you pointed"), and every edit under ``applyMode = "preview"``, is never applied silently.
Streaming holds back (the region is put back) as soon as the live text looks destructive (a far
or syntax-breaking edit is only known at the end, and is put back then); at the end the region shows its original text and the edit goes out as a preview: to a client with
``changeAnnotationSupport`` a ``WorkspaceEdit`` whose edit is annotated ``needsConfirmation``
(the server waits for the answer after giving up its edit slot, so other edits are not held up
while the user reviews); to other clients (Neovim) a message, the diff in the log, and a
:class:`lsp_server.outcome.PendingEdit` that the command ``copyAsDecode.server.applyPending``
applies.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from contextlib import aclosing, suppress
from typing import TYPE_CHECKING

from lsprotocol import types

from engine.api import EditError, EditRequest, unplaced_message
from engine.decoding.events import EditFinished, EditResult, EditStarted, OpResolved
from engine.verdict import NoFix, destructive, judge, no_fix
from lsp_server.actions import COMMAND_APPLY_PENDING
from lsp_server.edits import LiveRegion, preview_workspace_edit, text_edit, unified_diff
from lsp_server.outcome import Outcome, PendingEdit
from lsp_server.progress import WorkDoneProgress
from lsp_server.request import document_request
from lsp_server.worker import BlockingStream
from lsp_server.writer import DocumentLost, DocumentWriter, EditContext, apply_edit

if TYPE_CHECKING:
    from engine.api import Engine
    from engine.settings import Settings
    from engine.dispatch import ModelFree

REVIEW_TIMEOUT_S = 3600.0  # a preview the user leaves open (the edit slot is free meanwhile)

NOT_OPEN = "the document is not open in the editor"
SUPERSEDED = "replaced by a newer request for this document"
UNDO = " (undo reverts the part already applied)"
STOPPED = "AI edit stopped: {why}; nothing more was changed{undo}"
FAILED = "AI edit failed: {detail}"
CANCELLED = "AI edit {what}{restored}"
RESTORED = "; the original text was restored"
LEFT_UNCHANGED = "the document was left unchanged"
LEFT_PARTIAL = "the partial edit was left in place (undo reverts it)"
LOOP = "AI edit stopped: {why}; {note}. Try another instruction, mode or a smaller region"
MAX_TOKENS = ("AI edit stopped: the model used all {limit} new tokens (copyAsDecode.maxNewTokens) before "
              "finishing; {note}. Raise maxNewTokens or select a smaller region")
UNCHANGED = "AI edit: the model left the code unchanged ({mode}, {tokens} tokens)"
NO_FIX = "AI fix: no fix found: {why}. Try {advice}"
NAMED = "AI edit… with an instruction that names the problem (e.g. \"{example}\")"
DONE = "AI edit done{summary}"
UNPLACED = "apply not done: {why}"
PENDING = ("AI edit not applied: {what}. The change is in the log; run the command " + COMMAND_APPLY_PENDING
           + " to apply it (a new edit or a change to the document drops it)")
PREVIEW = "AI edit sent for review: {what}"
PREVIEW_LOST = "AI edit not applied: {problem}"
DECLINED = "AI edit not applied ({reason}); the document is unchanged"
REVIEWED = "AI edit applied after review ({what})"


def summary_text(result: EditResult) -> str:
    """" in 2.1 s (program): 120 tokens, 100 copied + 5 forced + 15 generated; ≈8.0x fewer decode
    steps than regenerating" — the estimate counts one decode step per generated token, and one
    per output token for plain regeneration (copied and forced tokens enter the cache in one
    forward per span)."""
    t = result.tokens
    seconds = result.timings.get("total_s") if result.timings else None
    timing = f" in {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
    text = f"{timing} ({result.mode}): {t.total} tokens"
    if t.copied or t.forced:
        speedup = t.total / max(t.generated, 1)
        text += (f", {t.copied} copied + {t.forced} forced + {t.generated} generated; "
                 f"≈{speedup:.1f}x fewer decode steps than regenerating")
    else:
        text += " generated"
    return text


def chosen(result: EditResult) -> str:
    """An apply's choice where its rules left one, for the status line: "; the model chose: …
    (the alternative: …)" (engine.apply.choice); "" when there was none."""
    choice = result.breakdown.get("choice")
    return f"; {choice['note']}" if choice else ""


class Cancel:
    """One request's cancel: set on the loop (the first reason counts: ``cancelled`` or
    ``superseded``), polled by the engine's thread before every model step; ``waiter`` is the
    same for the loop's waits (the edit slot, the model's load)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.waiter = asyncio.Event()
        self.reason = "cancelled"

    def set(self, reason: str = "cancelled") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()
        self.waiter.set()

    def is_set(self) -> bool:
        return self._event.is_set()


class LiveEdit:
    """One engine edit played into one open document (module docstring); :meth:`run` says how it
    ended."""

    def __init__(self, ctx: EditContext, uri: str, lines: tuple[int, int] | None, instruction: str,
                 settings: "Settings", cancel: Cancel | None = None, focus_line: int | None = None,
                 focus_policy: str | None = None, kind: str = "edit", update: str | None = None,
                 partial: bool = False):
        self.ctx = ctx
        self.kind = kind  # "fix" (AI fix) or "edit" (AI edit…): what an unchanged result is told
        self.uri = uri
        self.lines = lines
        self.instruction = instruction
        self.settings = settings
        self.focus_line = focus_line  # 1-based document line the user pointed at (cursor, diagnostic)
        self.focus_policy = focus_policy  # the engine's focus policy (None: its default; EditArgs.focus_policy)
        self.update, self.partial = update, partial  # an apply: the text merged into the document
        self.cancel = cancel or Cancel()
        self.progress = WorkDoneProgress(ctx.client, cancellable=True)
        self.writer = DocumentWriter(ctx, uri, on_lost=self.cancel.set)
        self.held = False             # streaming held back: the live text looked destructive
        self.language = ""  # the request's (the document's), for the syntax check (set when it runs)

    @property
    def token(self) -> str | None:
        """Its progress bar's token (what a work-done progress cancel names)."""
        return self.progress.token

    def cancelled(self) -> bool:
        """Polled by the engine before every model step (from the worker thread)."""
        return self.cancel.is_set() or self.progress.cancelled()

    async def run(self, engine: "Engine | ModelFree") -> Outcome:
        doc = self.ctx.documents.get(self.uri)
        if doc is None:
            return Outcome("error", NOT_OPEN)
        try:
            request = document_request(doc, self.instruction, self.lines, self.settings,
                                   mode=self.settings.edit.mode,  # as asked: the engine makes it concrete
                                   focus_line=self.focus_line,
                                   focus_policy=self.focus_policy, update=self.update, partial=self.partial)
        except EditError as exc:
            return Outcome("error", str(exc))
        self.language = request.language
        live = LiveRegion(doc.text, self.lines)
        with self.writer.owning(doc.text):
            result, failure = await self._decode(engine, request, live)
            outcome = await self._judge(live, result, failure)
        self.progress.end(outcome.message)
        outcome.edits_applied, outcome.first_edit_s = self.writer.edits_applied, self.writer.first_edit_s
        outcome.total_s = round(time.monotonic() - self.ctx.started_at, 3)
        outcome.summary = result.summary() if result is not None else None
        outcome.choice = result.breakdown.get("choice") if result is not None else None
        return outcome

    # -- decoding ----------------------------------------------------------------------------
    async def _decode(self, engine: "Engine | ModelFree", request: EditRequest,
                      live: LiveRegion) -> tuple[EditResult | None, BaseException | None]:
        """The engine's result (or its failure); each batch's latest op is shown as it comes."""
        region = f"lines {self.lines[0]}-{self.lines[1]}" if self.lines else "whole document"
        await self.progress.begin("AI edit", f"{engine.name} · {engine.resolve_mode(request.mode, request.is_apply)} · {region}", percentage=0)
        events = BlockingStream(lambda: engine.stream(request, cancelled=self.cancelled), stop=self.cancel.set)
        result: EditResult | None = None
        ops = 0
        async with aclosing(events.batches()) as batches:
            async for batch in batches:
                for index, event in enumerate(batch):
                    if isinstance(event, EditStarted):
                        self.progress.report(f"prompt {event.prompt_tokens} tokens; decoding…", 0)
                    elif isinstance(event, EditFinished):
                        result = event.result
                    elif isinstance(event, OpResolved):
                        ops += 1
                        if index + 1 < len(batch) and isinstance(batch[index + 1], OpResolved):
                            continue  # a later op is already here (the client may be slower than the engine)
                        await self._show(live, event, ops)
        return result, events.error

    async def _show(self, live: LiveRegion, op: OpResolved, ops: int) -> None:
        t = op.tokens
        self.progress.report(f"{ops} ops · {t.copied} copied / {t.generated} generated tokens",
                             min(100, int(100 * op.input_lines_consumed / max(len(live.input_lines), 1))))
        if self.settings.editor.apply_mode != "stream" or self.held or self.writer.lost is not None or self.cancel.is_set():
            return
        shown = live.live_text(op.resolved, op.input_lines_consumed)
        if self._destructive(live.input, shown):
            self.held = True  # never stream a destruction: put the region back, decide at the end
            shown = live.input
        with suppress(DocumentLost):  # the writer recorded it and stopped decoding
            await self.writer.push(live, shown)

    def _destructive(self, region_input: str, region_text: str) -> bool:
        return destructive(region_input, region_text, self.instruction)[0] is not None

    # -- the end -----------------------------------------------------------------------------
    async def _judge(self, live: LiveRegion, result: EditResult | None, failure: BaseException | None) -> Outcome:
        """How the edit ends: stopped, failed, cancelled, unfinished, sent for review, or applied."""
        writer = self.writer
        if (writer.lost is not None and writer.lost.reason == "conflict" and result is not None
                and result.stop_reason == "done" and live.shown == live.final_text(result.region_output)):
            writer.lost = None  # the user typed after the edit had fully landed: nothing was lost
        if writer.lost is not None:
            return self._lost()
        if failure is not None or result is None:
            await writer.restore(live)
            return Outcome("error", FAILED.format(
                detail=f"{type(failure).__name__}: {failure}" if failure is not None else "no result"))
        verdict = judge(result, self.instruction, self.settings.edit.max_new_tokens, self.language, self.focus_line)
        if verdict.kind == "cancelled" or self.cancel.is_set():
            return await self._stopped(live)
        if verdict.kind == "unplaced":  # an apply that could not place its update wrote nothing
            await writer.restore(live)
            return Outcome("unplaced", UNPLACED.format(why=verdict.message) + chosen(result))
        if verdict.kind == "unfinished":
            restored = await writer.restore(live)
            note = LEFT_UNCHANGED if restored or live.shown == live.input else LEFT_PARTIAL
            if verdict.stop_reason == "loop":
                return Outcome("loop", LOOP.format(why=verdict.reason, note=note))
            return Outcome("max_tokens", MAX_TOKENS.format(limit=self.settings.edit.max_new_tokens, note=note))
        assert verdict.damage is not None and verdict.syntax is not None
        if verdict.as_preview(always=self.settings.editor.apply_mode == "preview"):
            out = await self._to_review(live, result, verdict.reason or "applyMode is preview")
            out.damage, out.syntax = verdict.damage.json(), verdict.syntax.json()
            out.far = verdict.far.json() if verdict.far is not None else None
            return out
        try:
            await writer.push(live, live.final_text(result.region_output))
        except DocumentLost:
            return self._lost()
        if not result.changed:
            return Outcome("unchanged", self._unchanged(result))
        placed = f"; {unplaced_message(result.unplaced, written=True)}" if result.unplaced else ""
        return Outcome("done", DONE.format(summary=summary_text(result)) + placed + chosen(result),
                       syntax=verdict.syntax.json())

    def _unchanged(self, result: EditResult) -> str:
        """What an edit that changed nothing says: an AI fix that no fix was found, where and why
        the model kept the code (engine.verdict.no_fix) and what to try."""
        found = no_fix(result)
        if self.kind != "fix" or found is None:
            return UNCHANGED.format(mode=result.mode, tokens=result.tokens.total)
        return NO_FIX.format(why=found.why, advice=self.advice(found))

    def advice(self, found: NoFix) -> str:
        """What to try after no fix was found, in this editor's controls."""
        named = NAMED.format(example=found.example)
        return (f"checkCommand (your tests) in your user settings, so that several fixes are tried and checked, "
                f"or {named}")

    async def _stopped(self, live: LiveRegion) -> Outcome:
        """Cancelled or superseded: the region's original text back when the edit had shown any."""
        restored = RESTORED if await self.writer.restore(live) else ""
        if self.cancel.reason == "superseded":
            return Outcome("superseded", CANCELLED.format(what=SUPERSEDED, restored=restored))
        return Outcome("cancelled", CANCELLED.format(what="cancelled", restored=restored))

    def _lost(self) -> Outcome:
        lost = self.writer.lost
        assert lost is not None
        return Outcome(lost.reason, STOPPED.format(why=lost.message, undo=UNDO if self.writer.edits_applied else ""))

    async def _to_review(self, live: LiveRegion, result: EditResult, reason: str) -> Outcome:
        """Put the region back and hand the edit to the user: an annotated preview (the returned
        Outcome's ``review``) or a pending edit for applyPending (module docstring)."""
        await self.writer.restore(live)
        if self.writer.lost is not None:
            return self._lost()
        try:
            doc = self.writer.current()
        except DocumentLost as lost:
            self.writer.lose(lost)
            return self._lost()
        before, after = doc.text, live.document(live.final_text(result.region_output))
        what = f"it {reason}" if reason.startswith("would") else reason
        if not self.ctx.client.features.review:
            name = self.uri.rsplit("/", 1)[-1]
            self.ctx.client.log(f"copy-as-decode: pending AI edit for {name} ({what}):\n"
                                f"{unified_diff(before, after, name)}")
            return Outcome("pending", PENDING.format(what=what), pending=PendingEdit(self.uri, before, after, reason))
        replacement = live.step(live.final_text(result.region_output))
        edit = preview_workspace_edit(self.uri, doc.version, text_edit(before, replacement, self.ctx.encoding),
                                      label=f"AI edit: review ({what})",
                                      description="copy-as-decode: review the change before it is applied")
        return Outcome("preview", PREVIEW.format(what=what), review=functools.partial(self._review, edit, what))

    async def _review(self, edit: types.WorkspaceEdit, what: str) -> Outcome:
        """Send the preview and wait for the user's answer."""
        answer = await apply_edit(self.ctx.client, edit, "AI edit (review)", REVIEW_TIMEOUT_S)
        applied, first = self.writer.edits_applied, self.writer.first_edit_s
        if not answer.answered:
            return Outcome("rejected", PREVIEW_LOST.format(problem=answer.problem), applied, first)
        if not answer.applied:
            return Outcome("declined", DECLINED.format(reason=answer.reason or "declined"), applied, first)
        return Outcome("done", REVIEWED.format(what=what), applied + 1, first)
