"""The language server: thin LSP handlers that delegate to config, actions, models and jobs.

Features: "AI fix" / "AI edit…" code actions, the commands ``copyAsDecode.server.edit``
(stream an edit into the document), ``copyAsDecode.server.cancel`` (``{"uri": str | null}``:
stop running/queued edits), ``copyAsDecode.server.applyPending`` (``{"uri": str | null}``: apply
the edit held for review, for clients that cannot preview an annotated edit) and
``copyAsDecode.server.settings`` (``{"uri": str}``: the effective settings, for debugging), and
the notification ``copyAsDecode/status``
(``{"state": "loading" | "ready" | "editing" | "error", "message": str}``) that status bars show.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer

from engine.settings import SECTION, Settings
from lsp_server import __version__
from lsp_server.actions import (
    COMMAND_CANCEL,
    COMMAND_EDIT,
    COMMAND_SETTINGS,
    EditArgs,
    code_actions,
    focus_line,
    region_lines,
    uri_argument,
)
from lsp_server.documents import Document, DocumentStore, path_of
from lsp_server.edits import minimal_replacement, text_edit, workspace_edit
from lsp_server.jobs import APPLY_TIMEOUT_S, COMMAND_APPLY_PENDING, EditJob, JobContext, Outcome, PendingEdit
from lsp_server.models import EditQueue, ModelKey, ModelPool, unless_stopped
from lsp_server.positions import LineIndex, negotiate
from lsp_server.request import document_request
from lsp_server.warmup import WarmUps
from lsp_server.workspace_config import ConfigWatcher, WorkspaceConfig

log = logging.getLogger(__name__)
STATUS = "copyAsDecode/status"


class CopyAsDecodeServer(LanguageServer):
    def __init__(self, pool: ModelPool | None = None):
        super().__init__("copy-as-decode", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents = DocumentStore()
        self.config = WorkspaceConfig()
        self.pool = pool or ModelPool()
        self.queue = EditQueue()
        self.running: dict[str, EditJob] = {}       # document URI -> its running edit
        self.pending: dict[str, PendingEdit] = {}   # document URI -> the edit held for applyPending
        self.watcher: ConfigWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.encoding = "utf-16"
        self._init_warnings: list[str] = []
        self._shown: set[str] = set()  # settings problems already shown (once per change of their source)
        self.warmups = WarmUps(self)  # the prompt read while the buffer is idle (lsp_server/warmup.py)

    # -- client capabilities -----------------------------------------------------------------
    def supports(self, field: str) -> bool:
        """Whether the client advertised the capability at dotted ``field``
        ("window.work_done_progress"; a missing or null level counts as no)."""
        return bool(get_capability(self.client_capabilities, field))

    @property
    def supports_pull(self) -> bool:
        return self.supports("workspace.configuration")

    @property
    def supports_review(self) -> bool:
        """Can the client show an edit annotated ``needsConfirmation`` and apply it on the user's
        word (VS Code's refactor preview)? Annotated edits need ``documentChanges`` too."""
        return (self.supports("workspace.workspace_edit.change_annotation_support")
                and self.supports("workspace.workspace_edit.document_changes"))

    # -- messages ----------------------------------------------------------------------------
    def status(self, state: str, message: str) -> None:
        self.protocol.notify(STATUS, {"state": state, "message": message})

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, "%s", message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"copy-as-decode: {message}"))

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def warn(self, warnings: list[str]) -> None:
        for warning in warnings:
            self.show(warning, types.MessageType.Warning)

    def warn_once(self, warnings: list[str]) -> None:
        """Show each settings problem once; :meth:`config_file_changed` forgets a file's, so a
        change to the file shows what is still wrong in it once more."""
        self.warn([w for w in dict.fromkeys(warnings) if w not in self._shown])
        self._shown.update(warnings)

    def forget_shown(self, path: Path) -> None:
        self._shown = {w for w in self._shown if not w.startswith(f"{path}:")}

    # -- settings ----------------------------------------------------------------------------
    async def pull_settings(self, scope: str | None) -> list[str]:
        """workspace/configuration for ``scope`` (a document or folder URI; None: global)."""
        if not self.supports_pull:
            return []
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(scope_uri=scope, section=SECTION)])), 10)
        except Exception as exc:  # noqa: BLE001 - keep the previous pulled settings
            self.log_to_client(f"workspace/configuration failed: {exc}", types.MessageType.Warning)
            return []
        return self.config.set_pulled(scope or "", result[0] if result else None)

    async def settings_for(self, uri: str, pull: bool = True) -> tuple[Settings, list[str]]:
        warnings = await self.pull_settings(uri) if pull else []
        settings, more = self.config.settings_for(path_of(uri), uri if uri in self.config.pulled else None)
        return settings, warnings + more

    def watch_config_for(self, uri: str) -> None:
        path = path_of(uri)
        if path is None or self.watcher is None:
            return
        root = self.config.root_for(path)
        folder = path.parent
        while True:
            self.watcher.watch(folder)
            if root is None or folder == root or folder == folder.parent:
                break
            folder = folder.parent
        for file in self.config.config_files(path):
            self.watcher.watch(file.parent)

    def config_file_changed(self, path: Path) -> None:
        """On the loop: a watched config file changed; reload it, keep the last good on error."""
        self.forget_shown(path)
        self.warmups.stop()
        if path.exists():
            layer, error = self.config.files.reload(path)
            if error:
                self._shown.add(error)
                self.show(error, types.MessageType.Error)
                self.status("error", f"invalid config file {path.name}")
                return
            self.warn_once(layer.warnings)
            self.log_to_client(f"copy-as-decode: reloaded settings from {path}", types.MessageType.Info)
        else:
            self.config.files.forget(path)
            self.log_to_client(f"copy-as-decode: {path} was removed", types.MessageType.Info)
        self.preload_changed_models()

    def preload_changed_models(self) -> None:
        """After a settings change, load the models open documents now use (hot reload), but only
        once the user has used the server (nothing is loaded before the first edit)."""
        if not self.pool.names():
            return
        keys = set()
        for uri in self.documents.uris():
            settings, _ = self.config.settings_for(path_of(uri), uri if uri in self.config.pulled else None)
            keys.add(ModelKey.of(settings))
        for key in keys:
            if not self.pool.loaded(key):
                asyncio.ensure_future(self._preload(key))

    async def _preload(self, key: ModelKey) -> None:
        try:
            await self.engine_for(key)
        except Exception:  # noqa: BLE001 - already reported to the user by engine_for
            pass

    async def engine_for(self, key: ModelKey) -> Any:
        """The engine for ``key``; loads it with a progress bar and status notifications.
        Raises engine.runtime.models.ModelLoadError (reported to the user here)."""
        if self.pool.loaded(key):
            return await self.pool.get(key)
        self.status("loading", f"loading {key.describe()}")
        token = None
        if self.supports("window.work_done_progress"):
            token = f"copy-as-decode/load/{id(key)}-{asyncio.get_running_loop().time()}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), 10)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="Loading model", message=key.describe(), cancellable=False))
            except Exception:  # noqa: BLE001
                token = None

        def progress(message: str) -> None:
            self.log_to_client(f"copy-as-decode: {message}")
            if token is not None:
                self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))

        try:
            engine = await self.pool.get(key, progress)
        except Exception as exc:
            from engine.api import ModelLoadError

            message = str(exc) if isinstance(exc, ModelLoadError) else f"model {key.model!r}: {exc}"
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=f"failed: {message}"))
            self.status("error", message)
            self.show(f"cannot load the model: {message}. Fix copyAsDecode.model (the server keeps running).",
                      types.MessageType.Error)
            raise
        if token is not None:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="loaded"))
            self.work_done_progress.tokens.pop(token, None)
        self.status("ready", f"{key.describe()} loaded")
        return engine

    # -- the edit command --------------------------------------------------------------------
    async def run_edit(self, raw: Any) -> dict:
        try:
            args = EditArgs.parse(raw)
        except ValueError as exc:
            return self._fail(str(exc))
        doc = self.documents.get(args.uri)
        if doc is None:
            return self._fail(f"{args.uri} is not open in the editor; open it first (edits apply to the "
                              "editor's buffer, not to the file on disk)")
        if not args.instruction:
            return self._fail("an instruction is needed for \"AI edit\": pass it in the command's "
                              "'instruction' field (editors prompt for it)")
        self.pending.pop(args.uri, None)  # a new request replaces an edit held for review
        stop = threading.Event()
        stopped = asyncio.Event()  # the same, for the waits on the loop (the slot, the model's load)
        ticket = object()
        holder: dict[str, Any] = {"reason": "cancelled"}

        def cancel(reason: str) -> None:
            if not stop.is_set():
                holder["reason"] = reason
            job = holder.get("job")
            if job is not None:
                job.cancel(reason)
            stop.set()
            stopped.set()

        def stopped_early() -> dict:
            if holder["reason"] == "superseded":
                return Outcome("superseded", "AI edit replaced by a newer request for this document").json()
            return Outcome("cancelled", "AI edit cancelled before it started").json()

        self.queue.claim(args.uri, ticket, cancel)
        self.warmups.edit_began()  # no warm-up starts; the engine stops a running one, or the fix follows it
        try:
            settings, warnings = await self.settings_for(args.uri)
            # Local backends share this machine's CPU/GPU: one edit at a time. A remote server
            # batches concurrent requests itself, so edits that go to it do not wait for each other.
            local = settings.backend != "vllm"
            if local and self.queue.busy:
                self.status("editing", "queued behind another AI edit")
            # A cancel while queued (or while the model loads, below) ends the request at once.
            if local and not (await unless_stopped(self.queue.slot().acquire(), stopped, abandon=True))[0]:
                return stopped_early()
            try:
                if stop.is_set():
                    return stopped_early()
                for warning in warnings:
                    self.log_to_client(f"copy-as-decode: {warning}", types.MessageType.Warning)
                self.warn_once(warnings)
                doc = self.documents.get(args.uri)
                if doc is None:
                    return self._fail("the document was closed before the edit started")
                problem = self._check_request(doc, args, settings)
                if problem:
                    return self._fail(problem)
                try:
                    loaded, engine = await unless_stopped(self.engine_for(ModelKey.of(settings)), stopped)
                except Exception as exc:  # noqa: BLE001 - reported by engine_for
                    return Outcome("error", f"cannot load the model: {exc}").json()
                if not loaded:
                    return stopped_early()
                self.warmups.edit_uses(engine)
                doc = self.documents.get(args.uri)
                if doc is None:
                    return self._fail("the document was closed before the edit started")
                if stop.is_set():
                    return stopped_early()
                lines = self._region(doc.text, args, settings)
                ctx = JobContext(server=self, documents=self.documents, encoding=self.encoding,
                                 document_changes=self.supports("workspace.workspace_edit.document_changes"),
                                 progress=self.supports("window.work_done_progress"),
                                 annotations=self.supports_review)
                job = EditJob(ctx, args.uri, lines, args.instruction, settings, stop,
                              focus_line=focus_line(doc.text, args.focus, self.encoding),
                              focus_policy=args.focus_policy)
                holder["job"] = job
                if stop.is_set():
                    return stopped_early()
                self.status("editing", f"{args.kind}: {engine.resolve_mode(settings.mode)} with {engine.name}")
                self.running[args.uri] = job
                try:
                    outcome = await job.run(engine)
                finally:
                    if self.running.get(args.uri) is job:
                        del self.running[args.uri]
            finally:
                if local:
                    self.queue.slot().release()
            if outcome.review is not None:  # the edit slot is free while the user reviews
                outcome = await self._review(outcome)
        finally:
            self.queue.release(args.uri, ticket)
            self.warmups.edit_ended(args.uri)
        if outcome.pending is not None:
            self.pending[args.uri] = outcome.pending
        return self._report(outcome)

    async def _review(self, sent: Outcome) -> Outcome:
        """Wait for the user's answer to a preview; the result keeps the edit's summary."""
        self.status("ready", sent.message)
        assert sent.review is not None
        answer = await sent.review()
        answer.summary, answer.damage, answer.total_s = sent.summary, sent.damage, sent.total_s
        return answer

    async def apply_pending(self, raw: Any) -> dict:
        """``copyAsDecode.server.applyPending``: apply the edit held for review, if the document
        is still exactly what it was computed on."""
        try:
            uri = uri_argument(raw, COMMAND_APPLY_PENDING)
        except ValueError as exc:
            return self._fail(str(exc))
        if uri is None and len(self.pending) == 1:
            uri = next(iter(self.pending))
        pending = self.pending.pop(uri, None) if uri else None
        if pending is None:
            return self._fail("no AI edit is waiting to be applied" + (f" for {uri}" if uri else ""))
        doc = self.documents.get(pending.uri)
        if doc is None or doc.text != pending.before:
            return self._fail("the document changed since the AI edit was computed, so it was dropped; "
                              "run the AI edit again")
        replacement = minimal_replacement(doc.text, pending.after)
        if replacement is None:
            return self._report(Outcome("unchanged", "AI edit: nothing to apply"))
        edit = workspace_edit(pending.uri, doc.version, text_edit(doc.text, replacement, self.encoding),
                              self.supports("workspace.workspace_edit.document_changes"))
        try:
            answer = await asyncio.wait_for(self.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=edit, label="AI edit")), APPLY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a timeout or an error response
            return self._report(Outcome("rejected", f"the editor did not apply the AI edit: {exc or 'no answer'}"))
        if answer is None or not answer.applied:
            reason = (answer.failure_reason if answer is not None else None) or "no reason given"
            return self._report(Outcome("rejected", f"the editor refused the AI edit: {reason}"))
        return self._report(Outcome("done", f"AI edit applied ({pending.reason})", edits_applied=1))

    def _report(self, outcome: Outcome) -> dict:
        """Tell the user how an edit ended (a log line when it went well, a message otherwise)."""
        if outcome.status in ("done", "unchanged"):
            self.log_to_client(f"copy-as-decode: {outcome.message}", types.MessageType.Info)
        else:
            quiet = outcome.status in ("cancelled", "superseded", "declined")
            self.show(outcome.message, types.MessageType.Info if quiet else
                      types.MessageType.Error if outcome.status == "error" else types.MessageType.Warning)
        self.status("error" if outcome.status == "error" else "ready", outcome.message)
        return outcome.json()

    def _region(self, text: str, args: EditArgs, settings: Settings) -> tuple[int, int] | None:
        if args.range is None:
            return None
        start, end = LineIndex(text).offsets_of(args.range, self.encoding)
        return region_lines(text, (start, end), (), settings.whole_document_lines)

    def _check_request(self, doc: Document, args: EditArgs, settings: Settings) -> str | None:
        """Why the engine would refuse this request (size limits, range), before loading a model
        (the job builds the same request again, with the loaded engine's mode, when it runs)."""
        from engine.api import EditError

        try:
            document_request(doc, args.instruction or "", self._region(doc.text, args, settings), settings,
                         focus_line=focus_line(doc.text, args.focus, self.encoding), focus_policy=args.focus_policy)
        except EditError as exc:
            return str(exc)
        return None

    def _fail(self, message: str) -> dict:
        self.show(message, types.MessageType.Error)
        self.status("error", message)
        return Outcome("error", message).json()


def create_server(pool: ModelPool | None = None) -> CopyAsDecodeServer:
    """The server with its features registered (tests may pass a ModelPool with a fake loader)."""
    server = CopyAsDecodeServer(pool)

    @server.feature(types.INITIALIZE)
    def initialize(ls: CopyAsDecodeServer, params: types.InitializeParams) -> None:
        ls.encoding = negotiate(params.capabilities)
        ls.documents.encoding = ls.encoding
        roots = [p for p in (path_of(f.uri) for f in params.workspace_folders or []) if p]
        if not roots and params.root_uri and (root := path_of(params.root_uri)):
            roots = [root]
        ls.config = WorkspaceConfig(roots)
        ls._init_warnings = ls.config.set_user(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CopyAsDecodeServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        loop = ls.loop
        ls.watcher = ConfigWatcher(lambda path: loop.call_soon_threadsafe(ls.config_file_changed, path))
        for root in ls.config.roots:
            ls.watcher.watch(root)
        ls.warn(ls._init_warnings)
        if ls.supports("workspace.did_change_configuration.dynamic_registration"):
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(id="copy-as-decode-config", method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                                       register_options={"section": SECTION})]))
            except Exception as exc:  # noqa: BLE001
                ls.log_to_client(f"copy-as-decode: cannot register for configuration changes: {exc}")
        ls.warn(await ls.pull_settings(None))

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: CopyAsDecodeServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        removed = {p.resolve() for p in (path_of(f.uri) for f in params.event.removed) if p}
        added = [p.resolve() for p in (path_of(f.uri) for f in params.event.added) if p]
        ls.config.roots = [r for r in ls.config.roots if r not in removed] + added
        for root in added:
            if ls.watcher is not None:
                ls.watcher.watch(root)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CopyAsDecodeServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.documents.open(params.text_document)
        ls.watch_config_for(params.text_document.uri)
        path = path_of(params.text_document.uri)
        if path is not None:  # the problems of the config files that apply to it, each shown once
            ls.warn_once(ls.config.settings_for(path)[1])
        ls.warmups.touched(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CopyAsDecodeServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.documents.change(params)
        ls.warmups.touched(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CopyAsDecodeServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.close(params.text_document.uri)
        ls.pending.pop(params.text_document.uri, None)
        ls.warmups.closed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: CopyAsDecodeServer, params: types.DidChangeConfigurationParams) -> None:
        ls.warmups.stop()
        if isinstance(params.settings, dict) and params.settings:
            ls.warn(ls.config.set_pushed(params.settings))
        ls.config.pulled.clear()  # per-document settings are pulled again at each edit
        ls.warn(await ls.pull_settings(None))
        ls.preload_changed_models()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]))
    def code_action(ls: CopyAsDecodeServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return None
        settings, _ = ls.config.settings_for(path_of(doc.uri))
        ls.warmups.moved(doc.uri, params)
        return code_actions(doc.uri, doc.text, params, ls.encoding, settings.whole_document_lines)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: CopyAsDecodeServer, params: types.WorkDoneProgressCancelParams) -> None:
        for job in list(ls.running.values()):
            if job.token == params.token:
                job.cancel("cancelled")

    @server.command(COMMAND_EDIT)
    async def edit(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.run_edit(list(args))

    @server.command(COMMAND_CANCEL)
    def cancel(ls: CopyAsDecodeServer, *args: Any) -> dict:
        try:
            uri = uri_argument(args, COMMAND_CANCEL)
        except ValueError as exc:
            return ls._fail(str(exc))
        count = 0
        for job in list(ls.running.values()):
            if uri is None or job.uri == uri:
                job.cancel("cancelled")
                count += 1
        queued = ls.queue.cancel_all(uri)
        count = max(count, queued)
        return {"cancelled": count}

    @server.command(COMMAND_APPLY_PENDING)
    async def apply_pending(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.apply_pending(list(args))

    @server.command(COMMAND_SETTINGS)
    async def settings(ls: CopyAsDecodeServer, *args: Any) -> dict:
        try:
            uri = uri_argument(args, COMMAND_SETTINGS)
        except ValueError as exc:
            return ls._fail(str(exc))
        effective, warnings = await ls.settings_for(uri) if uri else ls.config.settings_for(None)
        return {"settings": effective.lsp_dict(), "warnings": warnings, "loadedModels": ls.pool.names(),
                "warmUps": ls.warmups.done[-5:]}

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CopyAsDecodeServer, *args: Any) -> None:
        ls.warmups.stop()
        ls.queue.cancel_all()
        for job in list(ls.running.values()):
            job.cancel("cancelled")
        if ls.watcher is not None:
            ls.watcher.stop()
        ls.pool.close_all()

    return server
