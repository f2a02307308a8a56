"""A fake of the language server's client port (lsp_server.client.ClientPort) for tests that
run the server's services without a server: it records what the server tells the user, keeps
its progress bars, answers settings pulls from ``configured`` and every applyEdit with
``applied`` (a fake editor subclass applies them to its own copy of the document)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from lsprotocol import types

from lsp_server.client import ClientFeatures


class FakeProgress:
    """pygls' work-done progress tracker: the tokens created and every value sent."""

    def __init__(self) -> None:
        self.tokens: dict[Any, Future] = {}
        self.values: list = []

    async def create_async(self, token: str) -> None:
        self.tokens[token] = Future()

    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None:
        self.values.append(value)

    def report(self, token: str, value: types.WorkDoneProgressReport) -> None:
        self.values.append(value)

    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None:
        self.values.append(value)


class FakeClient:
    """The client port, recorded (module docstring)."""

    def __init__(self, features: ClientFeatures | None = None, configured: Any = None):
        self.features = features or ClientFeatures(work_done_progress=True, document_changes=True)
        self.work_done_progress = FakeProgress()
        self.configured = configured  # what workspace/configuration answers
        self.pulls: list[str | None] = []
        self.sent: list[types.ApplyWorkspaceEditParams] = []
        self.statuses: list[tuple[str, str]] = []
        self.logged: list[tuple[str, types.MessageType]] = []
        self.shown: list[tuple[str, types.MessageType]] = []

    async def apply_workspace_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.sent.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    async def configuration(self, scope: str | None) -> Any:
        self.pulls.append(scope)
        return self.configured

    def status(self, state: str, message: str) -> None:
        self.statuses.append((state, message))

    def log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.logged.append((message, kind))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.shown.append((message, kind))
