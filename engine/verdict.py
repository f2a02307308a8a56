"""The one verdict on a finished edit, shared by every front door (the CLI, the language server and the
HTTP edit endpoint): write it, or refuse it as cancelled, unfinished, destructive or syntax-breaking,
with the CLI's exit status for each. A refused edit can still be shown as a preview."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.api import EditError
from engine.checks.guards import EditDamage, assess_edit, destructive_reason
from engine.checks.syntax import check_edit
from engine.core.lines import split_lines
from engine.decoding.events import EditResult

EXIT_CANCELLED, EXIT_BAD_REQUEST, EXIT_UNFINISHED, EXIT_DESTRUCTIVE, EXIT_SYNTAX = 1, 2, 3, 4, 5


def check_focus(focus: int | None, text: str, lines: tuple[int, int] | None) -> None:
    """``--focus`` must name a line of the edited region (1-based, document numbering)."""
    if focus is None:
        return
    n = len(split_lines(text)) or 1
    first, last = lines if lines else (1, n)
    if not first <= focus <= min(last, n):
        where = f"the edited lines {first}-{last}" if lines else f"the file's {n} lines"
        raise EditError(f"--focus {focus} is outside {where}; give a line of the region (1-based)")


def refusal(result: EditResult, instruction: str, max_new_tokens: int,
            language: str = "") -> tuple[int, str, EditDamage | None]:
    """(exit status, message, damage) for a result that must not be written without --force;
    exit status 0 when it may be written. ``language`` (``language_for``): checks the syntax of
    the whole document before and after (none when empty or unsupported)."""
    if result.stop_reason == "cancelled":
        return EXIT_CANCELLED, "the edit was cancelled", None
    if result.stop_reason == "max_tokens":
        return EXIT_UNFINISHED, (f"the edit did not finish: the model used all {max_new_tokens} new tokens "
                                 "(raise --max-new-tokens or edit fewer --lines)"), None
    if result.stop_reason == "loop":
        why = next((w for w in result.warnings if "loop" in w), "the output became a degenerate loop")
        return EXIT_UNFINISHED, f"the edit did not finish: {why}", None
    damage = assess_edit(result.region_input, result.region_output)
    reason = destructive_reason(damage, instruction)
    if reason:
        return EXIT_DESTRUCTIVE, f"refusing a destructive edit: it {reason}", damage
    broken = check_edit(result.input_text, result.output_text, language).reason()
    if broken:
        return EXIT_SYNTAX, f"refusing an edit that breaks the syntax: it {broken}", damage
    return 0, "", damage


def json_summary(result: EditResult, compared: dict[str, EditResult], damage: EditDamage | None, message: str,
                 written: list[Path], language: str = "") -> dict[str, Any]:
    """What ``--json`` prints (the OpenAI-compatible server's edit endpoint answers the same).
    ``syntax``: the parser's verdict on the whole document (engine.checks.syntax.SyntaxVerdict.json)."""
    summary = result.summary()
    summary["syntax"] = check_edit(result.input_text, result.output_text, language).json()
    summary["compare"] = {m: r.summary() for m, r in compared.items()}
    summary["damage"] = damage.json() if damage is not None else None
    summary["refused"] = message or None
    summary["written"] = [str(path) for path in written]
    return summary
