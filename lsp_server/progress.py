"""One work-done progress bar in the client (``window/workDoneProgress``): a model's load, an edit.

A client without progress support, or one that does not answer the create request, gets none,
and every call is then a no-op: no progress UI is not a reason to fail the work it shows.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future

from lsprotocol import types

from lsp_server.client import ClientPort
from lsp_server.waiting import within

CREATE_TIMEOUT_S = 10.0  # a client that never answers window/workDoneProgress/create


class WorkDoneProgress:
    """A progress bar in ``client`` from :meth:`begin` to :meth:`end` (none when the client has
    no progress support)."""

    def __init__(self, client: ClientPort, cancellable: bool = False):
        self.client = client
        self.cancellable = cancellable
        self.token: str | None = None
        self._future: Future | None = None  # the token's future: cancelled by a progress cancel

    async def begin(self, title: str, message: str, percentage: int | None = None) -> None:
        if not self.client.features.work_done_progress:
            return
        token = f"copy-as-decode/{uuid.uuid4().hex}"
        progress = self.client.work_done_progress
        try:
            await within(progress.create_async(token), CREATE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - no progress UI is not a reason to fail the work
            return
        self.token = token
        self._future = progress.tokens.get(token)
        progress.begin(token, types.WorkDoneProgressBegin(
            title=title, message=message, cancellable=self.cancellable, percentage=percentage))

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.token is not None:
            self.client.work_done_progress.report(self.token, types.WorkDoneProgressReport(
                message=message, percentage=percentage, cancellable=self.cancellable or None))

    def end(self, message: str) -> None:
        if self.token is not None:
            progress = self.client.work_done_progress
            progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            progress.tokens.pop(self.token, None)

    def cancelled(self) -> bool:
        """The user cancelled it from the progress UI (thread-safe: the engine polls it)."""
        return self._future is not None and self._future.cancelled()
