"""What an edit request answers: the command's JSON, and what the server keeps from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal

# How an edit ended: applied (``done``), nothing to apply (``unchanged``), stopped (``cancelled``,
# ``superseded``; the document lost: ``conflict``, ``rejected``, ``closed``), failed (``error``),
# refused as unfinished (``max_tokens``, ``loop``), an apply whose update could not be placed
# (``unplaced``: nothing written), no candidate passed the check (``unverified``), or left to the
# user (``preview``, then ``done`` or ``declined``; ``pending`` for applyPending).
EditStatus = Literal["done", "unchanged", "cancelled", "superseded", "conflict", "rejected", "closed", "error",
                     "max_tokens", "loop", "unplaced", "unverified", "preview", "pending", "declined"]


@dataclass(frozen=True)
class PendingEdit:
    """An edit that waits for the user (a client without change-annotation support): it applies
    to the document only while the document is still exactly ``before``."""

    uri: str
    before: str
    after: str
    reason: str


@dataclass
class Outcome:
    """What the command returns to the client (JSON). ``pending`` (kept by the server for
    applyPending) and ``review`` (awaited by the server once the edit slot is free: sends the
    preview and waits for the user's answer) never go out as JSON."""

    status: EditStatus
    message: str
    edits_applied: int = 0
    first_edit_s: float | None = None
    total_s: float | None = None
    summary: dict | None = None
    damage: dict | None = None
    syntax: dict | None = None  # the parser's verdict on the final edit (engine.checks.syntax.SyntaxVerdict.json)
    far: dict | None = None  # a fix held as far from the pointed line: where it edits (engine.checks.guards.FarEdit.json)
    candidates: list[dict] | None = None  # a checked fix's candidates and their checks (lsp_server.verified)
    # Where an apply's rules left a choice: who decided, the reading chosen, the alternatives and
    # the note in words (engine.apply.choice.Decision.json, the CLI's breakdown.choice)
    choice: dict | None = None
    pending: PendingEdit | None = None
    review: Callable[[], Awaitable["Outcome"]] | None = None

    def json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "editsApplied": self.edits_applied,
                "firstEditS": self.first_edit_s, "totalS": self.total_s, "summary": self.summary,
                "damage": self.damage, "syntax": self.syntax, "farFromFocus": self.far, "candidates": self.candidates,
                "choice": self.choice}
