"""What a front door does with a finished search (engine.candidates.search): which candidate to
write, the CLI's exit status and words, and the ``--json`` summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import EditRequest
from engine.candidates.search import Candidate, Search
from engine.verdict import EXIT_CANCELLED, EXIT_NO_FIX, EXIT_NO_VERIFIED_FIX, NoFix, json_summary, judge, no_fix


@dataclass(frozen=True)
class Decision:
    """``write``: the candidate to write (None: nothing); ``exit_code``: the CLI's status;
    ``message``: why nothing (or what) was written, "" when there is nothing to add; ``no_fix``:
    set when the edit as asked came back unchanged (engine.verdict.no_fix)."""

    write: Candidate | None
    exit_code: int
    message: str
    no_fix: NoFix | None = None

    @staticmethod
    def line(candidate: Candidate) -> str:
        """One candidate in a line: its number, variant, score, and what became of it."""
        if candidate.refused is not None:
            fate = f"refused: {candidate.refused}"
        elif candidate.check is None:
            fate = "not checked"
        else:
            fate = ("passed" if candidate.check.passed else "timed out" if candidate.check.timed_out
                    else f"failed (exit {candidate.check.exit_code})")
            fate += f" in {candidate.check.seconds:.1f}s"
        return (f"candidate {candidate.index} (round {candidate.round}, {candidate.how}): score "
                f"{candidate.score:.2f}, decoded in {candidate.seconds:.1f}s, {fate}")


def decide(search: Search, checked: bool, k: int = 1) -> Decision:
    """With a check: the candidate that passed (exit 0) or nothing (EXIT_NO_VERIFIED_FIX, saying
    how many distinct candidates were checked and what became of the other decodes). Without one:
    the best-scored candidate a guard let through (the message says so when fewer than K were
    distinct: "the model had no fourth"); when every one was refused, the
    best one's own verdict (an unchanged one is written as is and says no fix was found:
    EXIT_NO_FIX). ``k``: the candidates asked, so the no-fix advice suggests no flag already given."""
    first = next((c for c in sorted(search.candidates, key=lambda c: c.index)), None)
    unchanged = no_fix(first.result, candidates=k, checked=checked) if first is not None else None
    if search.stop_reason == "cancelled":
        return Decision(None, EXIT_CANCELLED, "the search was cancelled; nothing was written")
    if checked:
        if search.passed is not None:
            return Decision(search.passed, 0, "")
        rounds = f" in {search.rounds} rounds" if search.rounds > 1 else ""
        words = f"no candidate passed the check{rounds}; nothing was written\n{search.words()}"
        if unchanged is not None:
            words += f"\n{unchanged.message}"
        return Decision(None, EXIT_NO_VERIFIED_FIX, words, unchanged)
    usable = next((c for c in search.candidates if c.refused is None), None)
    if usable is not None:
        return Decision(usable, 0, search.shortfall())
    best = search.candidates[0]
    if not best.result.changed:
        return Decision(best, EXIT_NO_FIX if unchanged else 0, unchanged.message if unchanged else "", unchanged)
    return Decision(None, best.exit_code, f"{best.refused}; nothing was written\n{search.words()}")


def search_summary(search: Search, decision: Decision, request: EditRequest, written: list[Path]) -> dict[str, Any]:
    """``edit --json`` for a search: the summary of the candidate written (or the best one), then
    every candidate with its program, check result, check output and times."""
    shown = decision.write or search.best
    out: dict[str, Any] = {}
    if shown is not None:
        verdict = judge(shown.result, request.instruction, request.max_new_tokens, request.language,
                        request.focus_line)
        refused = decision.message if decision.exit_code not in (0, EXIT_NO_FIX) else ""
        out = json_summary(shown.result, {}, verdict.damage, refused, written, request.language, verdict.syntax,
                           verdict.far)
    out["exit_code"] = decision.exit_code
    out["no_fix"] = decision.no_fix.json() if decision.no_fix else out.get("no_fix")
    out["search"] = search.json()
    return out
