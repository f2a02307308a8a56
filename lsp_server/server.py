"""The language server: thin LSP handlers that delegate to config, actions, models and edit sessions.

Features: "AI fix" / "AI edit…" code actions, the commands ``copyAsDecode.server.edit``
(stream an edit into the document), ``copyAsDecode.server.applyUpdate`` (merge an update text into
the document the same way), ``copyAsDecode.server.cancel`` (``{"uri": str | null}``:
stop running/queued edits), ``copyAsDecode.server.applyPending`` (``{"uri": str | null}``: apply
the edit held for review, for clients that cannot preview an annotated edit),
``copyAsDecode.server.settings`` (``{"uri": str, "doctor": bool}``: the effective settings, for
debugging; with ``doctor``, also ``copy-as-decode doctor``'s report for them),
``copyAsDecode.server.nextCandidate`` (``{"uri": str}``: write a checked fix's next candidate,
lsp_server/verified.py), and the notification ``copyAsDecode/status``
(``{"state": "loading" | "ready" | "editing" | "error", "message": str}``) that status bars show.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer

from engine.settings import SECTION, Settings
from lsp_server import __version__
from lsp_server.actions import (
    COMMAND_APPLY_PENDING,
    COMMAND_APPLY_UPDATE,
    COMMAND_CANCEL,
    COMMAND_EDIT,
    COMMAND_NEXT_CANDIDATE,
    COMMAND_SETTINGS,
    EditArgs,
    code_actions,
    flag_argument,
    next_candidate_action,
    uri_argument,
)
from lsp_server.documents import DocumentStore, path_of
from lsp_server.edits import minimal_replacement, text_edit, workspace_edit
from lsp_server.jobs import LiveEdit
from lsp_server.models import EditQueue, ModelKey, ModelPool
from lsp_server.outcome import Outcome, PendingEdit
from lsp_server.positions import negotiate
from lsp_server.progress import WorkDoneProgress
from lsp_server.session import EditSession
from lsp_server.verified import NO_NEXT, Alternatives, NextCandidate
from lsp_server.warmup import WarmUps
from lsp_server.workspace_config import ConfigWatcher, WorkspaceConfig
from lsp_server.writer import apply_edit

log = logging.getLogger(__name__)
STATUS = "copyAsDecode/status"

NOT_OPEN = ("{uri} is not open in the editor; open it first (edits apply to the editor's buffer, not to the file "
            "on disk)")
NO_INSTRUCTION = ("an instruction is needed for \"AI edit\": pass it in the command's 'instruction' field "
                  "(editors prompt for it)")
NOTHING_PENDING = "no AI edit is waiting to be applied"
PENDING_DROPPED = ("the document changed since the AI edit was computed, so it was dropped; run the AI edit "
                   "again")
NOTHING_TO_APPLY = "AI edit: nothing to apply"
PENDING_APPLIED = "AI edit applied ({reason})"
BUSY = "an AI edit is already running for this document; wait for it or cancel it"


class CopyAsDecodeServer(LanguageServer):
    def __init__(self, pool: ModelPool | None = None):
        super().__init__("copy-as-decode", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents = DocumentStore()
        self.config = WorkspaceConfig()
        self.pool = pool or ModelPool()
        self.queue = EditQueue()
        self.running: dict[str, LiveEdit | NextCandidate] = {}  # document URI -> its running edit
        self.pending: dict[str, PendingEdit] = {}   # document URI -> the edit held for applyPending
        self.alternatives: dict[str, Alternatives] = {}  # document URI -> a checked fix's other candidates
        self.watcher: ConfigWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.encoding = "utf-16"
        self.init_warnings: list[str] = []  # the initializationOptions' problems, shown once initialized
        self._shown: set[str] = set()  # settings problems already shown (once per change of their source)
        self.warmups = WarmUps(self)  # the AI fix read ahead while the buffer is idle (lsp_server/warmup.py)

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

    async def doctor(self, settings: Settings) -> dict[str, Any]:
        """``copy-as-decode doctor``'s report for ``settings`` (engine.doctor_report): the model as
        an edit loads it (``load_s``: how long it was waited for), the probe in a worker thread once
        no edit or warm-up runs on it; a model that cannot load gives the command's failure
        (``ok`` false, the error and the fix)."""
        from engine.doctor_report import load_failure, report

        began = time.perf_counter()
        try:
            engine = await self.engine_for(ModelKey.of(settings))
        except Exception as exc:  # noqa: BLE001 - answered as doctor answers it (and shown by engine_for)
            return load_failure(exc)
        self.warmups.stop()
        return await asyncio.to_thread(report, engine, settings, time.perf_counter() - began)

    async def engine_for(self, key: ModelKey) -> Any:
        """The engine for ``key``; loads it with a progress bar and status notifications.
        Raises engine.api.ModelLoadError (reported to the user here)."""
        if self.pool.loaded(key):
            return await self.pool.get(key)
        self.status("loading", f"loading {key.describe()}")
        progress = WorkDoneProgress(self if self.supports("window.work_done_progress") else None)
        await progress.begin("Loading model", key.describe())

        def report(message: str) -> None:
            self.log_to_client(f"copy-as-decode: {message}")
            progress.report(message)

        try:
            engine = await self.pool.get(key, report)
        except Exception as exc:
            from engine.api import ModelLoadError

            message = str(exc) if isinstance(exc, ModelLoadError) else f"model {key.model!r}: {exc}"
            progress.end(f"failed: {message}")
            self.status("error", message)
            self.show(f"cannot load the model: {message}. Fix copyAsDecode.model (the server keeps running).",
                      types.MessageType.Error)
            raise
        progress.end("loaded")
        self.status("ready", f"{key.describe()} loaded")
        return engine

    # -- the edit commands ------------------------------------------------------------------
    async def run_edit(self, raw: Any) -> dict:
        """``copyAsDecode.server.edit``: a valid request runs as an :class:`EditSession`."""
        try:
            args = EditArgs.parse(raw)
        except ValueError as exc:
            return self.fail(str(exc))
        if self.documents.get(args.uri) is None:
            return self.fail(NOT_OPEN.format(uri=args.uri))
        if not args.instruction:
            return self.fail(NO_INSTRUCTION)
        self.pending.pop(args.uri, None)  # a new request replaces an edit held for review
        self.alternatives.pop(args.uri, None)  # ... and a checked fix's other candidates
        return await EditSession(self, args).run()

    async def run_apply(self, raw: Any) -> dict:
        """``copyAsDecode.server.applyUpdate``: the update merged into the whole document, played
        in as an :class:`EditSession` like any edit (streaming, preview, undo, cancel)."""
        try:
            args = EditArgs.parse_apply(raw)
        except ValueError as exc:
            return self.fail(str(exc))
        if self.documents.get(args.uri) is None:
            return self.fail(NOT_OPEN.format(uri=args.uri))
        self.pending.pop(args.uri, None)
        return await EditSession(self, args).run()

    async def next_candidate(self, raw: Any) -> dict:
        """``copyAsDecode.server.nextCandidate``: write the checked fix's next candidate, checked
        first when it was not yet, while the document is as the fix left it."""
        try:
            uri = uri_argument(raw, COMMAND_NEXT_CANDIDATE, '{"uri": str}', required=True) or ""
        except ValueError as exc:
            return self.fail(str(exc))
        if uri in self.running:
            return self.fail(BUSY)
        alternatives = self.alternatives.get(uri)
        doc = self.documents.get(uri)
        if alternatives is None or doc is None or doc.text != alternatives.expected:
            self.alternatives.pop(uri, None)
            return self.fail(NO_NEXT)
        step = NextCandidate(self, alternatives)
        self.running[uri] = step
        try:
            return self.report(await step.run())
        finally:
            if self.running.get(uri) is step:
                del self.running[uri]

    def next_candidate_actions(self, uri: str, text: str, params: types.CodeActionParams) -> list[types.CodeAction]:
        """"AI fix: next candidate" while a checked fix's other candidates are on offer."""
        alternatives = self.alternatives.get(uri)
        if alternatives is None or text != alternatives.expected or uri in self.running:
            return []
        following = alternatives.following()
        action = None if following is None else next_candidate_action(uri, following + 1, len(alternatives.offers),
                                                                        params)
        return [action] if action else []

    def keep_alternatives(self, uri: str) -> None:
        """A change to the document drops the other candidates unless it is the one a candidate
        being written leaves (its echo)."""
        alternatives, doc = self.alternatives.get(uri), self.documents.get(uri)
        if alternatives is not None and (doc is None or doc.text != alternatives.expected):
            del self.alternatives[uri]

    async def apply_pending(self, raw: Any) -> dict:
        """``copyAsDecode.server.applyPending``: apply the edit held for review, if the document
        is still exactly what it was computed on."""
        try:
            uri = uri_argument(raw, COMMAND_APPLY_PENDING)
        except ValueError as exc:
            return self.fail(str(exc))
        if uri is None and len(self.pending) == 1:
            uri = next(iter(self.pending))
        pending = self.pending.pop(uri, None) if uri else None
        if pending is None:
            return self.fail(NOTHING_PENDING + (f" for {uri}" if uri else ""))
        doc = self.documents.get(pending.uri)
        if doc is None or doc.text != pending.before:
            return self.fail(PENDING_DROPPED)
        replacement = minimal_replacement(doc.text, pending.after)
        if replacement is None:
            return self.report(Outcome("unchanged", NOTHING_TO_APPLY))
        edit = workspace_edit(pending.uri, doc.version, text_edit(doc.text, replacement, self.encoding),
                              self.supports("workspace.workspace_edit.document_changes"))
        answer = await apply_edit(self, edit, "AI edit")
        if not answer.applied:
            return self.report(Outcome("rejected", answer.problem))
        return self.report(Outcome("done", PENDING_APPLIED.format(reason=pending.reason), edits_applied=1))

    def report(self, outcome: Outcome) -> dict:
        """Tell the user how an edit ended (a log line when it was applied, a message otherwise:
        an edit that changed nothing says so, and why)."""
        if outcome.status == "done":
            self.log_to_client(f"copy-as-decode: {outcome.message}", types.MessageType.Info)
        else:
            quiet = outcome.status in ("unchanged", "cancelled", "superseded", "declined")
            self.show(outcome.message, types.MessageType.Info if quiet else
                      types.MessageType.Error if outcome.status == "error" else types.MessageType.Warning)
        self.status("error" if outcome.status == "error" else "ready", outcome.message)
        return outcome.json()

    def fail(self, message: str) -> dict:
        """A request refused before any edit: an error message, and the error as the answer."""
        return self.report(Outcome("error", message))


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
        ls.init_warnings = ls.config.set_user(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CopyAsDecodeServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        loop = ls.loop
        ls.watcher = ConfigWatcher(lambda path: loop.call_soon_threadsafe(ls.config_file_changed, path))
        for root in ls.config.roots:
            ls.watcher.watch(root)
        ls.warn(ls.init_warnings)
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
        ls.keep_alternatives(params.text_document.uri)
        ls.warmups.touched(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CopyAsDecodeServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.close(params.text_document.uri)
        ls.pending.pop(params.text_document.uri, None)
        ls.alternatives.pop(params.text_document.uri, None)
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
        return (code_actions(doc.uri, doc.text, params, ls.encoding, settings.editor.whole_document_lines)
                + ls.next_candidate_actions(doc.uri, doc.text, params))

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: CopyAsDecodeServer, params: types.WorkDoneProgressCancelParams) -> None:
        for edit in list(ls.running.values()):
            if edit.token == params.token:
                edit.cancel.set("cancelled")

    @server.command(COMMAND_EDIT)
    async def edit(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.run_edit(list(args))

    @server.command(COMMAND_CANCEL)
    def cancel(ls: CopyAsDecodeServer, *args: Any) -> dict:
        try:
            uri = uri_argument(args, COMMAND_CANCEL)
        except ValueError as exc:
            return ls.fail(str(exc))
        count = 0
        for edit in list(ls.running.values()):
            if uri is None or edit.uri == uri:
                edit.cancel.set("cancelled")
                count += 1
        queued = ls.queue.cancel_all(uri)
        count = max(count, queued)
        return {"cancelled": count}

    @server.command(COMMAND_APPLY_UPDATE)
    async def apply_update(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.run_apply(list(args))

    @server.command(COMMAND_APPLY_PENDING)
    async def apply_pending(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.apply_pending(list(args))

    @server.command(COMMAND_NEXT_CANDIDATE)
    async def next_candidate(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await ls.next_candidate(list(args))

    @server.command(COMMAND_SETTINGS)
    async def settings(ls: CopyAsDecodeServer, *args: Any) -> dict:
        try:
            uri = uri_argument(args, COMMAND_SETTINGS)
        except ValueError as exc:
            return ls.fail(str(exc))
        effective, warnings = await ls.settings_for(uri) if uri else ls.config.settings_for(None)
        answer = {"settings": effective.lsp_dict(), "warnings": warnings, "loadedModels": ls.pool.names(),
                  "warmUps": ls.warmups.done[-5:]}
        if flag_argument(args, "doctor"):
            answer["doctor"] = await ls.doctor(effective)
        return answer

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CopyAsDecodeServer, *args: Any) -> None:
        ls.warmups.stop()
        ls.queue.cancel_all()
        for edit in list(ls.running.values()):
            edit.cancel.set("cancelled")
        if ls.watcher is not None:
            ls.watcher.stop()
        ls.pool.close_all()

    return server
