"""The language server: registration of the LSP handlers, and their wiring to the services.

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

The work is done by :class:`lsp_server.services.EditServices`, built once the client has
initialized; the command bodies are in :mod:`lsp_server.workspace_commands`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from engine.settings import SECTION
from lsp_server import __version__
from lsp_server import workspace_commands as commands
from lsp_server.actions import (
    COMMAND_APPLY_PENDING,
    COMMAND_APPLY_UPDATE,
    COMMAND_CANCEL,
    COMMAND_EDIT,
    COMMAND_NEXT_CANDIDATE,
    COMMAND_SETTINGS,
    code_actions,
)
from lsp_server.client import PyglsClient
from lsp_server.documents import DocumentStore, path_of
from lsp_server.models import ModelPool
from lsp_server.positions import Encoding, negotiate
from lsp_server.services import EditServices
from lsp_server.workspace_config import WorkspaceConfig

NOT_INITIALIZED = "the server has not been initialized yet (the client sends 'initialized' first)"


class CopyAsDecodeServer(LanguageServer):
    """The pygls server: what ``initialize`` says, kept until ``initialized`` builds the services."""

    def __init__(self, pool: ModelPool | None = None):
        super().__init__("copy-as-decode", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.pool = pool or ModelPool()
        self.documents = DocumentStore()
        self.config = WorkspaceConfig()
        self.encoding: Encoding = "utf-16"
        self.init_warnings: list[str] = []  # the initializationOptions' problems, shown once initialized
        self.client_info: types.ClientInfo | None = None  # the client's name and version, as it said
        self._services: EditServices | None = None
        self.startup: asyncio.Future[None] | None = None  # the registration and first pull after initialized

    @property
    def services(self) -> EditServices:
        if self._services is None:
            raise RuntimeError(NOT_INITIALIZED)
        return self._services

    def start_services(self) -> EditServices:
        """The services for the client that has just initialized, and the watch on its config files."""
        services = EditServices.build(PyglsClient(self), self.config, self.pool, self.documents, self.encoding)
        services.watch_config_files(asyncio.get_running_loop())
        self._services = services
        return services

    def close_services(self) -> None:
        """The client shuts the session down: stop every edit and warm-up, free the engines."""
        if self._services is not None:
            self._services.shutdown()
        else:
            self.pool.close_all()


def create_server(pool: ModelPool | None = None) -> CopyAsDecodeServer:
    """The server with its features registered (tests may pass a ModelPool with a fake loader)."""
    server = CopyAsDecodeServer(pool)

    @server.feature(types.INITIALIZE)
    def initialize(ls: CopyAsDecodeServer, params: types.InitializeParams) -> None:
        ls.encoding = negotiate(params.capabilities)
        ls.client_info = params.client_info
        ls.documents.encoding = ls.encoding
        roots = [p for p in (path_of(f.uri) for f in params.workspace_folders or []) if p]
        if not roots and params.root_uri and (root := path_of(params.root_uri)):
            roots = [root]
        ls.config = WorkspaceConfig(roots)
        ls.init_warnings = ls.config.set_user(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: CopyAsDecodeServer, params: types.InitializedParams) -> None:
        # Built here, synchronously: the messages that follow (didOpen...) find the services even
        # when they arrive in the same read; the registration and the first pull run after.
        services = ls.start_services()
        services.settings.warn(ls.init_warnings)
        ls.startup = asyncio.ensure_future(register_and_pull(ls, services))

    async def register_and_pull(ls: CopyAsDecodeServer, services: EditServices) -> None:
        if services.client.features.configuration_registration:
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(id="copy-as-decode-config", method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                                       register_options={"section": SECTION})]))
            except Exception as exc:  # noqa: BLE001
                services.client.log(f"copy-as-decode: cannot register for configuration changes: {exc}")
        services.settings.warn(await services.settings.pull(None))

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: CopyAsDecodeServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        removed = [p.resolve() for p in (path_of(f.uri) for f in params.event.removed) if p]
        added = [p.resolve() for p in (path_of(f.uri) for f in params.event.added) if p]
        ls.services.settings.folders_changed(removed, added)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CopyAsDecodeServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.documents.open(params.text_document)
        ls.services.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CopyAsDecodeServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.documents.change(params)
        ls.services.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CopyAsDecodeServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.close(params.text_document.uri)
        ls.services.closed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: CopyAsDecodeServer, params: types.DidChangeConfigurationParams) -> None:
        await ls.services.configuration_changed(params.settings)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]))
    def code_action(ls: CopyAsDecodeServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        services = ls.services
        doc = services.documents.get(params.text_document.uri)
        if doc is None:
            return None
        settings, _ = services.settings.shared(doc.uri)
        services.warmups.moved(doc.uri, params)
        return (code_actions(doc.uri, doc.text, params, services.encoding, settings.editor.whole_document_lines)
                + commands.next_candidate_actions(services, doc.uri, doc.text, params))

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: CopyAsDecodeServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.services.state.cancel_progress(params.token)

    @server.command(COMMAND_EDIT)
    async def edit(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await commands.run_edit(ls.services, list(args))

    @server.command(COMMAND_CANCEL)
    def cancel(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return commands.cancel(ls.services, args)

    @server.command(COMMAND_APPLY_UPDATE)
    async def apply_update(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await commands.run_apply(ls.services, list(args))

    @server.command(COMMAND_APPLY_PENDING)
    async def apply_pending(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await commands.apply_pending(ls.services, list(args))

    @server.command(COMMAND_NEXT_CANDIDATE)
    async def next_candidate(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await commands.next_candidate(ls.services, list(args))

    @server.command(COMMAND_SETTINGS)
    async def settings(ls: CopyAsDecodeServer, *args: Any) -> dict:
        return await commands.settings(ls.services, args)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CopyAsDecodeServer, *args: Any) -> None:
        ls.close_services()

    return server
