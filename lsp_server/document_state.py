"""What the server keeps per open document between requests: the edit running on it, the edit
held for review (``applyPending``) and a checked fix's other candidates ("AI fix: next
candidate"). Every read and write of them goes through :class:`DocumentState`'s methods, so the
rules (one running edit per document, a change drops the candidates unless it is their own echo,
a new request replaces what the previous one left) live in one place."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Protocol

from lsp_server.alternatives import Alternatives
from lsp_server.outcome import PendingEdit


class Cancellable(Protocol):
    def set(self, reason: str = "cancelled") -> None: ...


class RunningJob(Protocol):
    """An edit or a next candidate while it runs: its document, its progress token (what a
    work-done progress cancel names) and its cancel."""

    uri: str
    cancel: Cancellable

    @property
    def token(self) -> str | None: ...


class DocumentState:
    """Running edits, edits held for review and candidates on offer, by document URI."""

    def __init__(self) -> None:
        self._running: dict[str, RunningJob] = {}
        self._pending: dict[str, PendingEdit] = {}
        self._offers: dict[str, Alternatives] = {}

    # -- running edits -----------------------------------------------------------------------
    @contextmanager
    def running(self, uri: str, job: RunningJob) -> Iterator[None]:
        """``job`` is the edit running on ``uri`` while inside."""
        self._running[uri] = job
        try:
            yield
        finally:
            if self._running.get(uri) is job:
                del self._running[uri]

    def is_running(self, uri: str) -> bool:
        return uri in self._running

    def any_running(self) -> bool:
        return bool(self._running)

    def cancel(self, uri: str | None = None) -> int:
        """Cancel the running edits (of ``uri`` when given); how many."""
        count = 0
        for job in list(self._running.values()):
            if uri is None or job.uri == uri:
                job.cancel.set("cancelled")
                count += 1
        return count

    def cancel_progress(self, token: str | int) -> None:
        """The user cancelled the progress bar ``token``: the edit that shows it stops."""
        for job in list(self._running.values()):
            if job.token == token:
                job.cancel.set("cancelled")

    # -- the edit held for review ------------------------------------------------------------
    def hold(self, pending: PendingEdit) -> None:
        self._pending[pending.uri] = pending

    def take_pending(self, uri: str | None) -> PendingEdit | None:
        """The edit held for ``uri`` (None: the only one held), no longer held."""
        if uri is None and len(self._pending) == 1:
            uri = next(iter(self._pending))
        return self._pending.pop(uri, None) if uri else None

    def drop_pending(self, uri: str) -> None:
        self._pending.pop(uri, None)

    # -- a checked fix's candidates on offer -------------------------------------------------
    def offer(self, alternatives: Alternatives) -> None:
        self._offers[alternatives.uri] = alternatives

    def on_offer(self, uri: str) -> Alternatives | None:
        return self._offers.get(uri)

    def offer_for(self, uri: str, text: str | None) -> Alternatives | None:
        """The candidates on offer while the document's ``text`` (None: closed) is as they
        expect; otherwise they are dropped."""
        alternatives = self._offers.get(uri)
        if alternatives is not None and text != alternatives.expected:
            del self._offers[uri]
            return None
        return alternatives

    def drop_offer(self, uri: str) -> None:
        self._offers.pop(uri, None)

    # -- what the editor does ----------------------------------------------------------------
    def changed(self, uri: str, text: str | None) -> None:
        """A change to the document drops its candidates unless it is the one a candidate being
        written leaves (its echo)."""
        self.offer_for(uri, text)

    def closed(self, uri: str) -> None:
        self._pending.pop(uri, None)
        self._offers.pop(uri, None)
