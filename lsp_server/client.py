"""The editor as the server's services see it: one client port, and how an edit's end is told.

:class:`ClientPort` is everything the sessions, the warm-ups, the verified fixes and the model
loader say to the editor (``workspace/applyEdit``, ``workspace/configuration``, work-done
progress, the ``copyAsDecode/status`` notification, log and shown messages) and the capabilities
it advertised (:class:`ClientFeatures`). :class:`PyglsClient` is the port over the running
pygls server; a test gives the services a fake port instead, and no server.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer

from engine.settings import SECTION
from lsp_server.outcome import Outcome
from lsp_server.waiting import within

log = logging.getLogger(__name__)
STATUS = "copyAsDecode/status"
CONFIGURATION_TIMEOUT_S = 10.0  # a client that never answers workspace/configuration


@dataclass(frozen=True)
class ClientFeatures:
    """What the client advertised at ``initialize`` (a missing or null level counts as no)."""

    work_done_progress: bool = False   # window/workDoneProgress
    document_changes: bool = False     # versioned TextDocumentEdits in a WorkspaceEdit
    review: bool = False               # shows an edit annotated needsConfirmation (VS Code's refactor preview)
    configuration: bool = False        # answers workspace/configuration (settings pulls)
    configuration_registration: bool = False  # dynamic registration of didChangeConfiguration
    create_files: bool = False         # a CreateFile operation in a WorkspaceEdit's documentChanges
    creates_folders: bool = True       # ... whose folder does not exist yet (its parents made on the way)

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities | None,
           client: types.ClientInfo | None = None) -> "ClientFeatures":
        def supports(field: str) -> bool:
            return bool(get_capability(capabilities, field)) if capabilities is not None else False

        document_changes = supports("workspace.workspace_edit.document_changes")
        operations = get_capability(capabilities, "workspace.workspace_edit.resource_operations") \
            if capabilities is not None else None
        # Resource operations travel in documentChanges only, so a client that lists "create" takes
        # them (Neovim lists it without documentChanges, and applies documentChanges all the same).
        create = types.ResourceOperationKind.Create in (operations or [])
        return cls(work_done_progress=supports("window.work_done_progress"), document_changes=document_changes,
                   # annotated edits need documentChanges too
                   review=supports("workspace.workspace_edit.change_annotation_support") and document_changes,
                   configuration=supports("workspace.configuration"),
                   configuration_registration=supports("workspace.did_change_configuration.dynamic_registration"),
                   create_files=create, creates_folders=not _neovim_before(client, (0, 8)))


def _neovim_before(client: types.ClientInfo | None, version: tuple[int, int]) -> bool:
    """Is ``client`` a Neovim older than ``version``? Neovim 0.7's CreateFile opens the file
    without making its folder (neovim/neovim#19835, in 0.8), so a file in a new folder fails there."""
    if client is None or client.name.lower() != "neovim" or not client.version:
        return False
    try:
        major, minor = (int(part) for part in client.version.lstrip("v").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < version


class ProgressTracker(Protocol):
    """pygls' work-done progress: tokens created on the client, and their begin/report/end; a
    token's future is cancelled when the user cancels it from the progress UI."""

    tokens: dict[Any, Future]

    async def create_async(self, token: str) -> Any: ...

    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None: ...

    def report(self, token: str, value: types.WorkDoneProgressReport) -> None: ...

    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None: ...


class ClientPort(Protocol):
    """Everything the server's services say to the editor (module docstring)."""

    @property
    def features(self) -> ClientFeatures: ...

    @property
    def work_done_progress(self) -> ProgressTracker: ...

    async def apply_workspace_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult | None:
        """``workspace/applyEdit``: the client's answer (raises on an error response)."""
        ...

    async def configuration(self, scope: str | None) -> Any:
        """``workspace/configuration`` of the settings section for ``scope`` (a document or folder
        URI; None: global): the client's value, None when it has none (raises when the pull fails)."""
        ...

    def status(self, state: str, message: str) -> None:
        """``copyAsDecode/status``: loading | ready | editing | error, for status bars."""
        ...

    def log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        """A line in the client's log (``window/logMessage``)."""
        ...

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """A message the user sees (``window/showMessage``)."""
        ...


class PyglsClient:
    """The client port over the pygls server (built once the client has initialized, with the
    features it advertised)."""

    def __init__(self, server: LanguageServer):
        self._server = server
        self._features = ClientFeatures.of(server.client_capabilities, getattr(server, "client_info", None))

    @property
    def features(self) -> ClientFeatures:
        return self._features

    @property
    def work_done_progress(self) -> ProgressTracker:
        return self._server.work_done_progress

    async def apply_workspace_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult | None:
        return await self._server.workspace_apply_edit_async(params)

    async def configuration(self, scope: str | None) -> Any:
        result = await within(self._server.workspace_configuration_async(types.ConfigurationParams(
            items=[types.ConfigurationItem(scope_uri=scope, section=SECTION)])), CONFIGURATION_TIMEOUT_S)
        return result[0] if result else None

    def status(self, state: str, message: str) -> None:
        self._server.protocol.notify(STATUS, {"state": state, "message": message})

    def log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self._server.window_log_message(types.LogMessageParams(type=kind, message=message))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, "%s", message)
        self._server.window_show_message(types.ShowMessageParams(type=kind, message=f"copy-as-decode: {message}"))


def report(client: ClientPort, outcome: Outcome) -> dict[str, Any]:
    """Tell the user how an edit ended (a log line when it was applied, a message otherwise: an
    edit that changed nothing says so, and why); the command's answer."""
    if outcome.status == "done":
        client.log(f"copy-as-decode: {outcome.message}", types.MessageType.Info)
    else:
        quiet = outcome.status in ("unchanged", "cancelled", "superseded", "declined")
        client.show(outcome.message, types.MessageType.Info if quiet else
                    types.MessageType.Error if outcome.status == "error" else types.MessageType.Warning)
    client.status("error" if outcome.status == "error" else "ready", outcome.message)
    return outcome.json()


def fail(client: ClientPort, message: str) -> dict[str, Any]:
    """A request refused before any edit: an error message, and the error as the answer."""
    return report(client, Outcome("error", message))
