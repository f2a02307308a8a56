"""One edit job: the engine in a worker thread, its events streamed into the editor.

The engine is synchronous and CPU-heavy, so it runs in its own thread and hands every event to
the event loop (``call_soon_threadsafe`` into an ``asyncio.Queue``); the loop keeps answering
other requests. In ``stream`` mode each batch of resolved ops becomes ONE ``workspace/applyEdit``
(events that arrive while an edit is in flight are coalesced into the next one, so a slow client
sees fewer, larger steps, never a backlog).

Versions and ownership: after each applied edit the job waits until the client's ``didChange``
brings the server's mirror to exactly the text it expects (the client's echo) and uses the
version that came with it for the next edit; it never guesses version numbers. Any other change
(the user typed, the buffer was reloaded or closed), a refused or unanswered applyEdit, or a
missing echo stops the job: decoding is cancelled, no further edit is sent (so nothing the user
wrote is overwritten), and the user is told what happened and that undo reverts the partial
edit. A cancel (work-done progress cancel, the cancel command, or a newer request for the same
document) restores the region's original text with one final edit when the document is still
as the job left it; so does a stop at the token limit or at a degenerate loop (the engine's
guard), with the reason in the message.

Review before applying: the final result gets the verdict every front door gives
(:func:`engine.verdict.judge`, the CLI's exit codes and the HTTP endpoint's ``refused``): an edit
that would delete or rewrite most of its region for a fix, an edit that breaks the syntax (the
whole document parsed before and does not after: :mod:`engine.checks.syntax`; the message names
the parser's error), and every edit under ``applyMode = "preview"``, is never applied silently. Streaming holds back (the region is put
back) as soon as the live text looks destructive; at the end the region shows its original text
and the edit goes out as a preview: to a client with ``changeAnnotationSupport`` a
``WorkspaceEdit`` whose edit is annotated ``needsConfirmation`` (the server waits for the
answer after giving up its edit slot, so other edits are not held up while the user reviews);
to other clients (Neovim) a message, the diff in the log, and a :class:`PendingEdit` that the
command ``copyAsDecode.server.applyPending`` applies.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal

from lsprotocol import types

from engine.api import EditError, EditRequest
from engine.decoding.events import EditFinished, EditResult, EditStarted, OpResolved
from engine.verdict import destructive, judge
from lsp_server.documents import Document, DocumentStore
from lsp_server.edits import LiveRegion, preview_workspace_edit, text_edit, unified_diff, workspace_edit
from lsp_server.positions import Encoding
from lsp_server.request import document_request

if TYPE_CHECKING:
    from engine.settings import Settings

ECHO_TIMEOUT_S = 10.0     # how long an applied edit may take to come back as didChange
SETTLE_S = 0.4            # quiet time after which a non-matching document counts as changed
APPLY_TIMEOUT_S = 60.0    # an applyEdit the client never answers
REVIEW_TIMEOUT_S = 3600.0  # a preview the user leaves open (the edit slot is free meanwhile)
COMMAND_APPLY_PENDING = "copyAsDecode.server.applyPending"

StopReason = Literal["conflict", "rejected", "closed"]
# What a job ended as (the command's answer): applied (``done``), nothing to apply (``unchanged``),
# stopped (``cancelled``, ``superseded``, a StopReason), failed (``error``), refused as unfinished
# (``max_tokens``, ``loop``), or left to the user (``preview``, then ``done`` or ``declined``;
# ``pending`` for applyPending).
JobStatus = Literal["done", "unchanged", "cancelled", "superseded", "conflict", "rejected", "closed", "error",
                    "max_tokens", "loop", "preview", "pending", "declined"]


@dataclass(frozen=True)
class PendingEdit:
    """An edit that waits for the user (a client without change-annotation support): it applies
    to the document only while the document is still exactly ``before``."""

    uri: str
    before: str
    after: str
    reason: str


@dataclass
class Outcome:
    """What the command returns to the client (JSON). ``pending`` (kept by the server for
    applyPending) and ``review`` (awaited by the server once the edit slot is free: sends the
    preview and waits for the user's answer) never go out as JSON."""

    status: JobStatus
    message: str
    edits_applied: int = 0
    first_edit_s: float | None = None
    total_s: float | None = None
    summary: dict | None = None
    damage: dict | None = None
    syntax: dict | None = None  # the parser's verdict on the final edit (engine.checks.syntax.SyntaxVerdict.json)
    pending: PendingEdit | None = None
    review: Callable[[], Awaitable["Outcome"]] | None = None

    def json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "editsApplied": self.edits_applied,
                "firstEditS": self.first_edit_s, "totalS": self.total_s, "summary": self.summary,
                "damage": self.damage, "syntax": self.syntax}


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


class StreamStopped(Exception):
    """The document is no longer the job's to edit (``reason``: conflict | rejected | closed)."""

    def __init__(self, reason: StopReason, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class JobContext:
    """What a job needs from the server (kept narrow so jobs can be tested with fakes)."""

    server: Any                     # the LanguageServer (applyEdit, progress, messages)
    documents: DocumentStore
    encoding: Encoding
    document_changes: bool          # client supports versioned TextDocumentEdits
    progress: bool                  # client supports window/workDoneProgress
    annotations: bool = False       # client confirms annotated edits (changeAnnotationSupport)
    started_at: float = field(default_factory=time.monotonic)


class EditJob:
    def __init__(self, ctx: JobContext, uri: str, lines: tuple[int, int] | None, instruction: str,
                 settings: "Settings", stop: threading.Event | None = None, focus_line: int | None = None,
                 focus_policy: str | None = None):
        self.ctx = ctx
        self.uri = uri
        self.lines = lines
        self.instruction = instruction
        self.focus_line = focus_line  # 1-based document line the user pointed at (cursor, diagnostic)
        self.focus_policy = focus_policy  # the engine's focus policy (None: its default; EditArgs.focus_policy)
        self.held = False             # streaming held back: the live text looked destructive
        self.settings = settings
        self.stop_event = stop or threading.Event()
        self.stop_reason = "cancelled"
        self.token: str | None = None
        self._progress_future = None
        self._stopped: StreamStopped | None = None
        self._awaiting = False
        self._changed = asyncio.Event()
        self._last_change = 0.0
        self.expected = ""
        self.edits_applied = 0
        self.first_edit_s: float | None = None
        self.language = ""  # the request's (the document's), for the syntax check (set when the job runs)

    # -- cancellation ------------------------------------------------------------------------
    def cancel(self, reason: str = "cancelled") -> None:
        """Stop decoding within one step (thread-safe). ``reason``: cancelled | superseded."""
        if not self.stop_event.is_set():
            self.stop_reason = reason
        self.stop_event.set()

    def cancelled(self) -> bool:
        """Polled by the engine before every model step (from the worker thread)."""
        future = self._progress_future
        return self.stop_event.is_set() or (future is not None and future.cancelled())

    # -- the document ------------------------------------------------------------------------
    def _on_change(self, doc: Document) -> None:
        self._last_change = time.monotonic()
        self._changed.set()
        if self._awaiting or self._stopped is not None:
            return
        current = self.ctx.documents.get(self.uri)
        if current is None:
            self._stop(StreamStopped("closed", "the document was closed while the AI edit was running"))
        elif current.text != self.expected:
            self._stop(StreamStopped("conflict", "the document changed while the AI edit was running"))

    def _stop(self, stopped: StreamStopped) -> None:
        if self._stopped is None:
            self._stopped = stopped
        self.stop_event.set()

    async def _push(self, live: LiveRegion, new_region: str) -> None:
        """Show ``new_region`` in the editor with one minimal edit and wait for its echo."""
        replacement = live.step(new_region)
        if replacement is None:
            return
        if self._stopped is not None:
            raise self._stopped
        doc = self.ctx.documents.get(self.uri)
        if doc is None:
            raise StreamStopped("closed", "the document was closed while the AI edit was running")
        if doc.text != self.expected:
            raise StreamStopped("conflict", "the document changed while the AI edit was running")
        before = doc.text
        after = replacement.apply(before)
        edit = workspace_edit(self.uri, doc.version, text_edit(before, replacement, self.ctx.encoding),
                              self.ctx.document_changes)
        self._awaiting = True
        self._changed.clear()
        try:
            try:
                result = await asyncio.wait_for(
                    self.ctx.server.workspace_apply_edit_async(
                        types.ApplyWorkspaceEditParams(edit=edit, label="AI edit")),
                    APPLY_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise StreamStopped("rejected", f"the editor did not answer workspace/applyEdit within "
                                                f"{APPLY_TIMEOUT_S:.0f} s") from None
            except Exception as exc:  # noqa: BLE001 - an error response from the client
                raise StreamStopped("rejected", f"the editor failed to apply the edit: {exc}") from None
            if result is None or not result.applied:
                reason = (result.failure_reason if result is not None else None) or "no reason given"
                current = self.ctx.documents.get(self.uri)
                if current is not None and current.text != before:
                    raise StreamStopped("conflict", "the document changed while the AI edit was running "
                                                    f"(the editor refused the edit: {reason})")
                raise StreamStopped("rejected", f"the editor refused the edit: {reason}")
            self.edits_applied += 1
            if self.first_edit_s is None:
                self.first_edit_s = round(time.monotonic() - self.ctx.started_at, 3)
            await self._await_echo(before, after)
        finally:
            self._awaiting = False
        live.commit(new_region)
        self.expected = after

    async def _await_echo(self, before: str, after: str) -> None:
        """Wait until the mirror shows ``after`` (the client's didChange for our edit)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ECHO_TIMEOUT_S
        while True:
            doc = self.ctx.documents.get(self.uri)
            if doc is None:
                raise StreamStopped("closed", "the document was closed while the AI edit was running")
            if doc.text == after:
                return
            now = loop.time()
            quiet = time.monotonic() - self._last_change
            if doc.text != before and quiet >= SETTLE_S:
                raise StreamStopped("conflict", "the document changed while the AI edit was running")
            if now >= deadline:
                raise StreamStopped("conflict", "the editor did not report the applied edit back "
                                                f"(no matching didChange within {ECHO_TIMEOUT_S:.0f} s)")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=min(SETTLE_S, deadline - now))
            except asyncio.TimeoutError:
                pass

    # -- progress ----------------------------------------------------------------------------
    async def _progress_begin(self, title_message: str) -> None:
        if not self.ctx.progress:
            return
        token = f"copy-as-decode/{uuid.uuid4().hex}"
        progress = self.ctx.server.work_done_progress
        try:
            await asyncio.wait_for(progress.create_async(token), 10)
        except Exception:  # noqa: BLE001 - no progress UI is not a reason to fail the edit
            return
        self.token = token
        self._progress_future = progress.tokens.get(token)
        progress.begin(token, types.WorkDoneProgressBegin(
            title="AI edit", message=title_message, cancellable=True, percentage=0))

    def _progress_report(self, message: str, percentage: int | None) -> None:
        if self.token is not None:
            self.ctx.server.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, percentage=percentage, cancellable=True))

    def _progress_end(self, message: str) -> None:
        if self.token is not None:
            progress = self.ctx.server.work_done_progress
            progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            progress.tokens.pop(self.token, None)

    # -- the run -----------------------------------------------------------------------------
    async def run(self, engine: Any) -> Outcome:
        doc = self.ctx.documents.get(self.uri)
        if doc is None:
            return Outcome("error", "the document is not open in the editor")
        try:
            request = document_request(doc, self.instruction, self.lines, self.settings,
                                   mode=engine.resolve_mode(self.settings.mode), focus_line=self.focus_line,
                                   focus_policy=self.focus_policy)
        except EditError as exc:
            return Outcome("error", str(exc))
        self.language = request.language
        live = LiveRegion(doc.text, self.lines)
        self.expected = doc.text
        stop_listening = self.ctx.documents.listen(self.uri, self._on_change)
        try:
            return await self._run(engine, request, live)
        finally:
            stop_listening()

    async def _run(self, engine: Any, request: EditRequest, live: LiveRegion) -> Outcome:
        s = self.settings
        stream = s.apply_mode == "stream"
        region_desc = f"lines {self.lines[0]}-{self.lines[1]}" if self.lines else "whole document"
        await self._progress_begin(f"{engine.name} · {request.mode} · {region_desc}")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        done_marker = object()

        def post(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone (server shutting down)
                pass

        def produce() -> None:
            try:
                for event in engine.stream(request, cancelled=self.cancelled):
                    post(event)
            except BaseException as exc:  # noqa: BLE001 - reported on the loop
                post(exc)
            finally:
                post(done_marker)

        threading.Thread(target=produce, name=f"edit {self.uri}", daemon=True).start()
        result: EditResult | None = None
        failure: BaseException | None = None
        ops = 0
        n_input = max(len(live.input_lines), 1)
        while True:
            item = await queue.get()
            if item is done_marker:
                break
            if isinstance(item, BaseException):
                failure = item
                continue
            if isinstance(item, EditStarted):
                self._progress_report(f"prompt {item.prompt_tokens} tokens; decoding…", 0)
                continue
            if isinstance(item, EditFinished):
                result = item.result
                continue
            if not isinstance(item, OpResolved):
                continue
            latest = item
            ops += 1
            # Coalesce what else is already waiting (the client may be slower than the engine).
            while not queue.empty():
                peek = queue._queue[0]  # type: ignore[attr-defined]
                if not isinstance(peek, OpResolved):
                    break
                latest = queue.get_nowait()
                ops += 1
            t = latest.tokens
            self._progress_report(
                f"{ops} ops · {t.copied} copied / {t.generated} generated tokens",
                min(100, int(100 * latest.input_lines_consumed / n_input)))
            if stream and not self.held and self._stopped is None and not self.stop_event.is_set():
                shown = live.live_text(latest.resolved, latest.input_lines_consumed)
                if self._destructive(live.input, shown):
                    self.held = True  # never stream a destruction: put the region back, decide at the end
                    shown = live.input
                try:
                    await self._push(live, shown)
                except StreamStopped as stopped:
                    self._stop(stopped)
        return await self._finish(live, result, failure, stream)

    async def _finish(self, live: LiveRegion, result: EditResult | None, failure: BaseException | None,
                      stream: bool) -> Outcome:
        elapsed = lambda: round(time.monotonic() - self.ctx.started_at, 3)  # noqa: E731
        summary = result.summary() if result is not None else None

        def outcome(status: JobStatus, message: str) -> Outcome:
            self._progress_end(message)
            return Outcome(status, message, self.edits_applied, self.first_edit_s, elapsed(), summary)

        undo = " (undo reverts the part already applied)" if self.edits_applied else ""
        if (self._stopped is not None and self._stopped.reason == "conflict" and result is not None
                and result.stop_reason == "done" and live.shown == live.final_text(result.region_output)):
            self._stopped = None  # the user typed after the edit had fully landed: nothing was lost
        if self._stopped is not None:
            return outcome(self._stopped.reason, f"AI edit stopped: {self._stopped.message}; "
                                                 f"nothing more was changed{undo}")
        if failure is not None or result is None:
            await self._restore(live, stream)
            detail = f"{type(failure).__name__}: {failure}" if failure is not None else "no result"
            return outcome("error", f"AI edit failed: {detail}")
        verdict = judge(result, self.instruction, self.settings.max_new_tokens, self.language)
        if verdict.kind == "cancelled" or self.stop_event.is_set():
            restored = await self._restore(live, stream)
            what = "replaced by a newer request for this document" if self.stop_reason == "superseded" else "cancelled"
            note = "; the original text was restored" if restored else ""
            return outcome("superseded" if self.stop_reason == "superseded" else "cancelled",
                           f"AI edit {what}{note}")
        if verdict.kind == "unfinished":
            restored = await self._restore(live, stream)
            note = "the document was left unchanged" if restored or live.shown == live.input else \
                "the partial edit was left in place (undo reverts it)"
            if verdict.stop_reason == "loop":
                return outcome("loop", f"AI edit stopped: {verdict.reason}; {note}. Try another instruction, mode or "
                                       "a smaller region")
            return outcome("max_tokens",
                           f"AI edit stopped: the model used all {self.settings.max_new_tokens} new tokens "
                           f"(copyAsDecode.maxNewTokens) before finishing; {note}. Raise maxNewTokens or "
                           "select a smaller region")
        assert verdict.damage is not None and verdict.syntax is not None
        syntax = verdict.syntax
        if verdict.as_preview(always=self.settings.apply_mode == "preview"):
            out = await self._to_review(live, result, verdict.reason or "applyMode is preview", stream)
            out.damage, out.syntax = verdict.damage.json(), syntax.json()
            self._progress_end(out.message)
            out.total_s, out.summary = elapsed(), summary
            return out
        try:
            await self._push(live, live.final_text(result.region_output))
        except StreamStopped as stopped:
            self._stopped = stopped
            return outcome(stopped.reason, f"AI edit stopped: {stopped.message}; nothing more was changed{undo}")
        t = result.tokens
        if not result.changed:
            return outcome("unchanged", f"AI edit: the model left the code unchanged ({result.mode}, "
                                        f"{t.total} tokens)")
        done = outcome("done", f"AI edit done{summary_text(result)}")
        done.syntax = syntax.json()
        return done

    def _destructive(self, region_input: str, region_text: str) -> bool:
        return destructive(region_input, region_text, self.instruction)[0] is not None

    async def _to_review(self, live: LiveRegion, result: EditResult, reason: str, stream: bool) -> Outcome:
        """Put the region back and hand the edit to the user: an annotated preview (the returned
        Outcome's ``review``) or a pending edit for applyPending (module docstring)."""
        if live.shown != live.input:
            await self._restore(live, stream)
        undo = " (undo reverts the part already applied)" if self.edits_applied else ""
        if self._stopped is not None:
            return Outcome(self._stopped.reason, f"AI edit stopped: {self._stopped.message}; nothing more was "
                                                 f"changed{undo}", self.edits_applied, self.first_edit_s)
        doc = self.ctx.documents.get(self.uri)
        if doc is None or doc.text != self.expected:
            return Outcome("conflict", "AI edit stopped: the document changed while the AI edit was running; "
                                       f"nothing more was changed{undo}", self.edits_applied, self.first_edit_s)
        before, after = doc.text, live.document(live.final_text(result.region_output))
        what = f"it {reason}" if reason.startswith("would") else reason
        if not self.ctx.annotations:
            name = self.uri.rsplit("/", 1)[-1]
            log = getattr(self.ctx.server, "log_to_client", None)
            if log is not None:
                log(f"copy-as-decode: pending AI edit for {name} ({what}):\n{unified_diff(before, after, name)}")
            return Outcome("pending", f"AI edit not applied: {what}. The change is in the log; run the command "
                                      f"{COMMAND_APPLY_PENDING} to apply it (a new edit or a change to the "
                                      "document drops it)", self.edits_applied, self.first_edit_s,
                           pending=PendingEdit(self.uri, before, after, reason))
        replacement = live.step(live.final_text(result.region_output))
        edit = preview_workspace_edit(self.uri, doc.version, text_edit(before, replacement, self.ctx.encoding),
                                      label=f"AI edit: review ({what})",
                                      description="copy-as-decode: review the change before it is applied")

        async def review() -> Outcome:
            try:
                answer = await asyncio.wait_for(self.ctx.server.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(edit=edit, label="AI edit (review)")), REVIEW_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a timeout or an error response
                return Outcome("rejected", f"AI edit not applied: the editor did not apply the preview ({exc or 'no answer'})",
                               self.edits_applied, self.first_edit_s)
            if answer is None or not answer.applied:
                detail = (answer.failure_reason if answer is not None else None) or "declined"
                return Outcome("declined", f"AI edit not applied ({detail}); the document is unchanged",
                               self.edits_applied, self.first_edit_s)
            return Outcome("done", f"AI edit applied after review ({what})", self.edits_applied + 1,
                           self.first_edit_s)

        return Outcome("preview", f"AI edit sent for review: {what}", self.edits_applied, self.first_edit_s,
                       review=review)

    async def _restore(self, live: LiveRegion, stream: bool) -> bool:
        """Put the region's original text back (stream mode, document still ours)."""
        if not stream or live.shown == live.input or self._stopped is not None:
            return False
        try:
            await self._push(live, live.input)
        except StreamStopped as stopped:
            self._stopped = stopped
            return False
        return True
