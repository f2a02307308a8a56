"""A checked fix's candidates on offer: what "AI fix: next candidate" writes in turn
(:class:`lsp_server.verified.NextCandidate`), kept per document by
:class:`lsp_server.document_state.DocumentState`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.candidates import CheckOutcome, CheckSpec


@dataclass
class Offer:
    """One candidate on offer: its whole document and its check (None: not run yet; it runs
    before the candidate is written)."""

    document: str
    check: CheckOutcome | None


@dataclass
class Alternatives:
    """The candidates of one checked fix that "AI fix: next candidate" offers in turn (the applied
    one first, so the turn comes back to it), while the document is ``expected``: as the last
    one written left it."""

    uri: str
    offers: list[Offer]
    expected: str
    check: CheckSpec
    path: Path
    shown: int = 0  # the offer the document holds

    def following(self) -> int | None:
        """The offer after the one shown (round the list), or None when it is the only one."""
        return (self.shown + 1) % len(self.offers) if len(self.offers) > 1 else None
