"""Writing into an open document the user may also be typing in.

:func:`apply_edit` is the server's one ``workspace/applyEdit``: with a timeout, and an answer
that says why an edit did not apply (no answer, an error response, or the editor's refusal).

:class:`DocumentWriter` writes one edit's steps into one document and keeps it the edit's own.
After each applied step it waits until the client's ``didChange`` brings the server's mirror to
exactly the text it expects (the client's echo) and uses the version that came with it for the
next step; it never guesses version numbers. Any other change (the user typed, the buffer was
reloaded or closed), a refused or unanswered applyEdit, or a missing echo loses the document: the
writer sends nothing more (so nothing the user wrote is overwritten) and tells its owner
(``on_lost``: stop decoding).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal

from lsprotocol import types

from lsp_server.client import ClientPort
from lsp_server.documents import Document, DocumentStore
from lsp_server.edits import LiveRegion, text_edit, workspace_edit
from lsp_server.positions import Encoding
from lsp_server.waiting import within

ECHO_TIMEOUT_S = 10.0     # how long an applied edit may take to come back as didChange
SETTLE_S = 0.4            # quiet time after which a non-matching document counts as changed
APPLY_TIMEOUT_S = 60.0    # an applyEdit the client never answers

DOCUMENT_CHANGED = "the document changed while the AI edit was running"
DOCUMENT_CLOSED = "the document was closed while the AI edit was running"
NO_ECHO = "the editor did not report the applied edit back (no matching didChange within {seconds:.0f} s)"
NO_ANSWER = "the editor did not answer workspace/applyEdit within {seconds:.0f} s"
APPLY_FAILED = "the editor failed to apply the edit: {error}"
REFUSED = "the editor refused the edit: {reason}"

LossReason = Literal["conflict", "rejected", "closed"]


@dataclass(frozen=True)
class ApplyAnswer:
    """How a ``workspace/applyEdit`` ended: ``problem`` says why it did not apply, for the user;
    ``reason`` is the editor's own ``failureReason`` when it answered no."""

    applied: bool
    problem: str = ""
    answered: bool = True
    reason: str | None = None


async def apply_edit(client: ClientPort, edit: types.WorkspaceEdit, label: str,
                     timeout: float = APPLY_TIMEOUT_S) -> ApplyAnswer:
    """Send ``edit`` to the client and wait at most ``timeout`` seconds for its answer."""
    try:
        result = await within(
            client.apply_workspace_edit(types.ApplyWorkspaceEditParams(edit=edit, label=label)), timeout)
    except asyncio.TimeoutError:
        return ApplyAnswer(False, NO_ANSWER.format(seconds=timeout), answered=False)
    except Exception as exc:  # noqa: BLE001 - an error response from the client
        return ApplyAnswer(False, APPLY_FAILED.format(error=exc), answered=False)
    if result is None or not result.applied:
        reason = result.failure_reason if result is not None else None
        return ApplyAnswer(False, REFUSED.format(reason=reason or "no reason given"), reason=reason)
    return ApplyAnswer(True)


class DocumentLost(Exception):
    """The document is no longer the edit's to write (``reason``: conflict | rejected | closed)."""

    def __init__(self, reason: LossReason, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class EditContext:
    """What one edit needs: the client it writes to (its features say how), the open documents,
    the negotiated position encoding, and when the request arrived (its timings)."""

    client: ClientPort
    documents: DocumentStore
    encoding: Encoding
    started_at: float = field(default_factory=time.monotonic)


class DocumentWriter:
    """Pushes, echoes and restores one edit's region in one document (module docstring)."""

    def __init__(self, ctx: EditContext, uri: str, on_lost: Callable[[], None]):
        self.ctx = ctx
        self.uri = uri
        self.on_lost = on_lost
        self.lost: DocumentLost | None = None
        self.expected = ""            # the document's text as this writer left it
        self.edits_applied = 0
        self.first_edit_s: float | None = None
        self._awaiting = False        # an applyEdit or its echo is in flight: changes may be ours
        self._changed = asyncio.Event()
        self._last_change = 0.0

    @contextmanager
    def owning(self, text: str) -> Iterator[None]:
        """While inside, the document is the writer's from ``text`` on: any change not its own
        loses it."""
        self.expected = text
        stop_listening = self.ctx.documents.listen(self.uri, self._on_change)
        try:
            yield
        finally:
            stop_listening()

    def lose(self, lost: DocumentLost) -> None:
        """Give the document up (the first reason counts) and stop the edit."""
        if self.lost is None:
            self.lost = lost
        self.on_lost()

    def current(self) -> Document:
        """The document, still exactly as the writer left it; raises DocumentLost otherwise."""
        doc = self.ctx.documents.get(self.uri)
        if doc is None:
            raise DocumentLost("closed", DOCUMENT_CLOSED)
        if doc.text != self.expected:
            raise DocumentLost("conflict", DOCUMENT_CHANGED)
        return doc

    async def push(self, live: LiveRegion, new_region: str) -> None:
        """Show ``new_region`` in the editor with one minimal edit and wait for its echo; a loss
        is recorded (:meth:`lose`) and raised."""
        try:
            await self._push(live, new_region)
        except DocumentLost as lost:
            self.lose(lost)
            raise

    async def restore(self, live: LiveRegion) -> bool:
        """Put the region's original text back while the document is still the writer's; whether
        it did (False also when nothing was shown)."""
        if live.shown == live.input or self.lost is not None:
            return False
        try:
            await self.push(live, live.input)
        except DocumentLost:
            return False
        return True

    def _on_change(self, doc: Document) -> None:
        self._last_change = time.monotonic()
        self._changed.set()
        if self._awaiting or self.lost is not None:
            return
        try:
            self.current()
        except DocumentLost as lost:
            self.lose(lost)

    async def _push(self, live: LiveRegion, new_region: str) -> None:
        replacement = live.step(new_region)
        if replacement is None:
            return
        if self.lost is not None:
            raise self.lost
        doc = self.current()
        before = doc.text
        after = replacement.apply(before)
        edit = workspace_edit(self.uri, doc.version, text_edit(before, replacement, self.ctx.encoding),
                              self.ctx.client.features.document_changes)
        self._awaiting = True
        self._changed.clear()
        try:
            answer = await apply_edit(self.ctx.client, edit, "AI edit")
            if not answer.applied:
                current = self.ctx.documents.get(self.uri)
                if answer.answered and current is not None and current.text != before:
                    raise DocumentLost("conflict", f"{DOCUMENT_CHANGED} ({answer.problem})")
                raise DocumentLost("rejected", answer.problem)
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
                raise DocumentLost("closed", DOCUMENT_CLOSED)
            if doc.text == after:
                return
            now = loop.time()
            quiet = time.monotonic() - self._last_change
            if doc.text != before and quiet >= SETTLE_S:
                raise DocumentLost("conflict", DOCUMENT_CHANGED)
            if now >= deadline:
                raise DocumentLost("conflict", NO_ECHO.format(seconds=ECHO_TIMEOUT_S))
            self._changed.clear()
            try:
                await within(self._changed.wait(), min(SETTLE_S, deadline - now))
            except asyncio.TimeoutError:
                pass
