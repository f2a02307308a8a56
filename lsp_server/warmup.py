"""The AI fix read ahead while the user looks at the buffer (``warmUp``).

When the document last touched (opened, changed, or its cursor moved: VS Code asks for code
actions whenever the cursor moves) has not changed for ``warmUpDelayMs`` milliseconds, the server
takes the request the "AI fix" code action would send now and, with ``warmUp = "fix"`` (the
default), decodes its answer ahead (engine.api.Engine.read_ahead): the fix, when the user asks
for it, is given at once, or follows the decode still running. With ``"prompt"`` it only reads
the fix's prompt (Engine.warm_prompt: the localizer's forward, kept in the prompt cache with its
per-line surprise), so the fix starts where a second fix on an unchanged buffer does. On a vLLM
server both send the fix's first prompt ahead, into the server's prefix cache. Without a code
action seen (Neovim before its first request) the fix's region is the whole document when it has
at most ``wholeDocumentLines`` lines.

It never costs the user: one warm-up at a time, for the document last touched; none while an edit
runs or waits; none before a model is loaded (the server loads none until the first edit); none for
an answer or prompt the caches hold. A keystroke, a cursor move or a settings change stops a
running warm-up between two prompt chunks or decode steps, and what it had read stays usable; an
AI fix for another request stops it the same way (the engine does, when the fix reaches it), and
one for the same request follows it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from lsp_server.actions import (
    COMMAND_EDIT,
    DEFAULT_FIX_INSTRUCTION,
    FIX_TITLE,
    EditArgs,
    code_actions,
    edit_region,
    focus_line,
)
from engine.settings import Settings
from lsp_server.client import ClientPort
from lsp_server.document_state import DocumentState
from lsp_server.documents import DocumentStore
from lsp_server.models import EditQueue, ModelKey, ModelPool
from lsp_server.positions import Encoding
from lsp_server.request import document_request
from lsp_server.settings_source import SettingsSource
from lsp_server.worker import run_blocking

if TYPE_CHECKING:
    from engine.api import Engine
    from engine.dispatch import ModelFree

log = logging.getLogger(__name__)


@dataclass
class Running:
    uri: str
    stop: threading.Event
    task: "asyncio.Future[Any]"
    engine: "Engine | None" = None  # the engine it reads on, once known


class WarmUps:
    """The server's warm-ups: a timer for the document last touched and at most one running read.

    It reads the documents' settings and mirror, and the pool's loaded engines; it waits for the
    edits (``state``: running; ``queue``: waiting for the slot) and tells the client's log what
    each warm-up did."""

    def __init__(self, client: ClientPort, settings: SettingsSource, documents: DocumentStore, pool: ModelPool,
                 queue: EditQueue, state: DocumentState, encoding: Encoding):
        self.client = client
        self.settings = settings
        self.documents = documents
        self.pool = pool
        self.queue = queue
        self.state = state
        self.encoding = encoding
        self.timer: asyncio.TimerHandle | None = None
        self.cursor: dict[str, types.CodeActionParams] = {}  # uri -> the last code-action request
        self.running: Running | None = None
        self.done: list[dict[str, Any]] = []  # what each warm-up did (the settings command shows the last)
        self.count = 0  # warm-ups ended so far (each entry's "n")
        self.edits = 0  # edit requests in flight, from their arrival (settings pull, queue) to their end

    # -- what the editor does ----------------------------------------------------------------
    def touched(self, uri: str) -> None:
        """The document changed or was opened: stop a running warm-up, start the idle timer again."""
        self.stop()
        settings = self._settings(uri)
        if settings.editor.warm_up == "off":
            return
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(settings.editor.warm_up_delay_ms / 1000, lambda: self._start(uri))

    def moved(self, uri: str, params: types.CodeActionParams) -> None:
        """A code-action request (the cursor moved): the fix's region and focus follow it."""
        previous = self.cursor.get(uri)
        self.cursor[uri] = params
        if previous is None or previous.range != params.range or \
                previous.context.diagnostics != params.context.diagnostics:
            self.touched(uri)

    def closed(self, uri: str) -> None:
        self.cursor.pop(uri, None)
        if self.running is not None and self.running.uri == uri:
            self.stop()

    def edit_began(self) -> None:
        """An AI fix or edit arrived: none starts until it ends. A running one goes on until the
        edit reaches its engine, which stops it for another request or follows it for this one."""
        self.edits += 1
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def edit_uses(self, engine: "Engine | ModelFree") -> None:
        """The edit runs on ``engine``: a warm-up on another engine (another model) stops."""
        if self.running is not None and self.running.engine is not engine:
            self.running.stop.set()

    def edit_ended(self, uri: str) -> None:
        self.edits -= 1
        self.touched(uri)  # the buffer the edit left is read once it is idle again

    def stop(self) -> None:
        """A keystroke, a cursor move, a settings change: no warm-up runs past its current chunk."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.running is not None:
            self.running.stop.set()

    # -- the read ----------------------------------------------------------------------------
    def _settings(self, uri: str) -> Settings:
        return self.settings.current(uri)[0]

    def _start(self, uri: str) -> None:
        self.timer = None
        if self.running is not None:
            return
        if self.edits or self.state.any_running() or self.queue.busy:  # an edit_ended starts it again
            return
        stop = threading.Event()
        task = asyncio.ensure_future(self._run(uri, stop))
        self.running = Running(uri, stop, task)
        task.add_done_callback(lambda _t: self._finished(task))

    def _finished(self, task: "asyncio.Future[Any]") -> None:
        if self.running is not None and self.running.task is task:
            self.running = None
        if not task.cancelled() and task.exception() is not None:
            log.warning("warm-up failed: %s", task.exception())

    async def _run(self, uri: str, stop: threading.Event) -> None:
        settings = self._settings(uri)
        key = ModelKey.of(settings)
        doc = self.documents.get(uri)
        if settings.editor.warm_up == "off" or doc is None or not self.pool.loaded(key):
            return
        engine = await self.pool.get(key)
        if self.running is not None and self.running.stop is stop:
            self.running.engine = engine
        args = self._fix_args(uri, doc.text, settings)
        if args is None or stop.is_set():
            return
        lines = edit_region(doc.text, args, self.encoding, settings.editor.whole_document_lines)
        request = document_request(doc, args.instruction or DEFAULT_FIX_INSTRUCTION, lines, settings,
                               mode=engine.resolve_mode(settings.edit.mode),
                               focus_line=focus_line(doc.text, args.focus, self.encoding),
                               focus_policy=args.focus_policy)
        read = engine.read_ahead if settings.editor.warm_up == "fix" else engine.warm_prompt
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await run_blocking(lambda: read(request, stop.is_set, settings.editor.warm_up_max_tokens), stop=stop.set)
        self.count += 1
        entry = {"n": self.count, "uri": uri, "status": result.status, "promptTokens": result.prompt_tokens,
                 "forwarded": result.forwarded, "answered": result.answered, "reason": result.reason,
                 "seconds": round(loop.time() - started, 3)}
        self.done.append(entry)
        del self.done[:-20]
        what = "the AI fix decoded ahead" if result.answered else f"{result.prompt_tokens} prompt tokens"
        self.client.log(f"copy-as-decode: warm-up {result.status}: {what}, {result.forwarded} tokens forwarded"
                             + (f" ({result.reason})" if result.reason else ""))

    def _fix_args(self, uri: str, text: str, settings: Settings) -> EditArgs | None:
        """What "AI fix" would send now: from the last code-action request, else the whole
        document when it is short enough to be the fix's region without a cursor."""
        params = self.cursor.get(uri)
        if params is None:
            if len(text.splitlines()) > settings.editor.whole_document_lines:
                return None
            return EditArgs.parse({"uri": uri, "range": None, "instruction": None, "kind": "fix"})
        try:
            actions = code_actions(uri, text, params, self.encoding, settings.editor.whole_document_lines)
        except (ValueError, IndexError):  # the request's positions are past the changed text
            return None
        for action in actions:
            command = action.command
            if action.title == FIX_TITLE and command is not None and command.command == COMMAND_EDIT:
                return EditArgs.parse(command.arguments)
        return None
