"""One edit request, from its arrival to its answer (the commands ``copyAsDecode.server.edit`` and
``copyAsDecode.server.applyUpdate``: an apply is an edit of the whole document with an update).

A request claims its document in the edit queue (a newer request for the same document cancels
it: ``superseded``), waits for the edit slot when its backend runs on this machine, loads its
model (an apply the aligner merges loads none, unless its rules leave a choice that the user's
own model decides), and plays its :class:`lsp_server.jobs.LiveEdit` into the document. A cancel while it
waits (for the slot or for the model's load) ends it at once. An edit sent for review is
awaited after the slot is given up, so other edits are not held up while the user reviews.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator

from lsprotocol import types

from engine.api import EditError
from lsp_server.actions import EditArgs, edit_region, focus_line
from engine.core.modes import needs_model
from engine.dispatch import ModelFree
from lsp_server.client import report
from lsp_server.documents import Document, path_of
from lsp_server.jobs import SUPERSEDED, Cancel, LiveEdit
from lsp_server.models import ModelKey, unless_stopped
from lsp_server.outcome import Outcome
from lsp_server.request import document_request
from lsp_server.services import EditServices
from lsp_server.verified import NO_FILE, CheckedFix, check_spec

if TYPE_CHECKING:
    from engine.api import Engine
    from engine.settings import Settings

CLOSED_BEFORE = "the document was closed before the edit started"
CANCELLED_BEFORE = "AI edit cancelled before it started"
QUEUED = "queued behind another AI edit"
LOAD_FAILED = "cannot load the model: {error}"


class _Ended(Exception):
    """The request ends before its edit runs, answering ``outcome``; ``told``: the user has been
    told already (or need not be), so the answer is not reported again."""

    def __init__(self, outcome: Outcome, told: bool = False):
        super().__init__(outcome.message)
        self.outcome = outcome
        self.told = told


class EditSession:
    """One edit request: its ticket in the edit queue, the edit slot it holds, its cancel.

    It runs on the server's services (:class:`lsp_server.services.EditServices`): it tells the
    user through their client port, and leaves what the request keeps (an edit held for review, a
    checked fix's other candidates) in their document state."""

    def __init__(self, services: EditServices, args: EditArgs):
        self.services = services
        self.args = args
        self.ticket = object()
        self.cancel = Cancel()

    async def run(self) -> dict:
        """The command's answer (JSON); the user is told how the edit ended."""
        services, uri = self.services, self.args.uri
        services.queue.claim(uri, self.ticket, self.cancel.set)
        services.warmups.edit_began()  # no warm-up starts; the engine stops a running one, or the fix follows it
        try:
            outcome = await self._edit()
        except _Ended as ended:
            return ended.outcome.json() if ended.told else report(services.client, ended.outcome)
        finally:
            services.queue.release(uri, self.ticket)
            services.warmups.edit_ended(uri)
        if outcome.pending is not None:
            services.state.hold(outcome.pending)
        return report(services.client, outcome)

    async def _edit(self) -> Outcome:
        settings, warnings = await self.services.settings.pulled(self.args.uri)
        settings = self.args.over(settings)  # an apply's own mode, if it asks one
        engine = await self._engine(settings, warnings)
        async with self._slot(engine):
            outcome = await self._run(engine, settings)
        if outcome.review is not None:  # the edit slot is free while the user reviews
            outcome = await self._review(outcome)
        return outcome

    @asynccontextmanager
    async def _slot(self, engine: "Engine | ModelFree") -> AsyncIterator[None]:
        """The edit slot, while the edit runs. In-process backends share this machine's CPU/GPU:
        one edit at a time. A server batches concurrent requests itself (``Engine.concurrent``),
        so edits that go to it do not wait for each other."""
        queue = self.services.queue
        local = not engine.concurrent
        if local and queue.busy:
            self.services.client.status("editing", QUEUED)
        # A cancel while queued ends the request at once.
        if local and not (await unless_stopped(queue.slot().acquire(), self.cancel.waiter, abandon=True))[0]:
            raise self._stopped_early()
        try:
            yield
        finally:
            if local:
                queue.slot().release()

    async def _engine(self, settings: "Settings", warnings: list[str]) -> "Engine | ModelFree":
        """The engine for ``settings``, loaded (or the pool's), once the request is known to be one
        it would take; the settings' problems are told first. An apply the aligner merges alone
        gets :class:`engine.dispatch.ModelFree` and loads no model."""
        services = self.services
        self._check_cancel()
        for warning in warnings:
            services.client.log(f"copy-as-decode: {warning}", types.MessageType.Warning)
        services.settings.warn_once(warnings)
        problem = self._check_request(self._document(), settings)
        if problem:
            raise _Ended(Outcome("error", problem))
        if self.args.update is not None and not needs_model(settings.edit.mode, apply=True) \
                and not await asyncio.to_thread(self._decides_choice, settings):
            return ModelFree()  # the aligner merges it: no model to load
        try:
            loaded, engine = await unless_stopped(services.models.engine_for(ModelKey.of(settings)),
                                                  self.cancel.waiter)
        except Exception as exc:  # noqa: BLE001 - reported by engine_for
            raise _Ended(Outcome("error", LOAD_FAILED.format(error=exc)), told=True) from None
        if not loaded:
            raise self._stopped_early()
        return engine

    def _decides_choice(self, settings: "Settings") -> bool:
        """Whether the apply's merge leaves a choice that the user's own model decides
        (engine.dispatch.ModelFree.loads_for_choice): then its engine is loaded, and decides it
        under its lock, as the CLI's and the HTTP server's do."""
        doc = self._document()
        try:
            request = document_request(doc, self.args.instruction or "", self._region(doc, settings), settings,
                                       update=self.args.update, partial=self.args.partial)
        except EditError:
            return False
        return ModelFree.loads_for_choice(settings.model.name, request)

    async def _run(self, engine: "Engine | ModelFree", settings: "Settings") -> Outcome:
        services, args = self.services, self.args
        services.warmups.edit_uses(engine)
        doc = self._document()
        self._check_cancel()
        edit = self._live_edit(doc, settings)
        services.client.status("editing", f"{args.kind}: {engine.resolve_mode(settings.edit.mode, args.update is not None)} "
                                          f"with {engine.name}")
        with services.state.running(args.uri, edit):
            outcome = await edit.run(engine)
        if isinstance(edit, CheckedFix) and edit.alternatives is not None:
            services.state.offer(edit.alternatives)
        return outcome

    def _live_edit(self, doc: Document, settings: "Settings") -> LiveEdit:
        """The edit to play: an AI fix under a check command searches for one the check passes
        (lsp_server.verified); anything else streams as the engine decodes it."""
        args = self.args
        line = focus_line(doc.text, args.focus, self.services.encoding)
        region = self._region(doc, settings)
        path = path_of(args.uri)
        ctx = self.services.context()  # the edit's timings start here, once its model is loaded
        if self._checked(settings) and path is not None:
            spec = check_spec(settings, self.services.settings.root_for(path.resolve()))
            return CheckedFix(ctx, args.uri, region, args.instruction or "", settings, self.cancel,
                              check=spec, path=path, focus_line=line, focus_policy=args.focus_policy)
        return LiveEdit(ctx, args.uri, region, args.instruction or "", settings, self.cancel,
                        focus_line=line, focus_policy=args.focus_policy, kind=args.kind, update=args.update,
                        partial=args.partial)

    def _checked(self, settings: "Settings") -> bool:
        return self.args.kind == "fix" and bool(settings.check.command)

    async def _review(self, sent: Outcome) -> Outcome:
        """Wait for the user's answer to a preview; the result keeps the edit's summary and findings."""
        self.services.client.status("ready", sent.message)
        assert sent.review is not None
        answer = await sent.review()
        answer.summary, answer.damage, answer.far, answer.total_s = sent.summary, sent.damage, sent.far, sent.total_s
        return answer

    def _region(self, doc: Document, settings: "Settings") -> tuple[int, int] | None:
        return edit_region(doc.text, self.args, self.services.encoding, settings.editor.whole_document_lines)

    def _check_request(self, doc: Document, settings: "Settings") -> str | None:
        """Why the engine would refuse this request (size limits, range), before loading a model
        (the edit builds the same request again, with the loaded engine's mode, when it runs)."""
        if self._checked(settings) and path_of(self.args.uri) is None:
            return NO_FILE
        try:
            document_request(doc, self.args.instruction or "", self._region(doc, settings), settings,
                         focus_line=focus_line(doc.text, self.args.focus, self.services.encoding),
                         focus_policy=self.args.focus_policy, update=self.args.update, partial=self.args.partial)
        except EditError as exc:
            return str(exc)
        return None

    def _document(self) -> Document:
        doc = self.services.documents.get(self.args.uri)
        if doc is None:
            raise _Ended(Outcome("error", CLOSED_BEFORE))
        return doc

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise self._stopped_early()

    def _stopped_early(self) -> _Ended:
        if self.cancel.reason == "superseded":
            return _Ended(Outcome("superseded", f"AI edit {SUPERSEDED}"), told=True)
        return _Ended(Outcome("cancelled", CANCELLED_BEFORE), told=True)
