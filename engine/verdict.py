"""The one verdict on a finished edit, shared by every front door (the CLI, the language server and the
HTTP edit endpoint): write it, or refuse it as cancelled, unfinished, destructive or syntax-breaking,
with the CLI's exit status for each (:func:`judge`). A refused edit can still be shown as a preview."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.api import EditError
from engine.checks.guards import EditDamage, assess_edit, destructive_reason
from engine.checks.syntax import SyntaxVerdict, check_edit
from engine.core.lines import split_lines
from engine.decoding.events import EditResult

EXIT_CANCELLED, EXIT_BAD_REQUEST, EXIT_UNFINISHED, EXIT_DESTRUCTIVE, EXIT_SYNTAX = 1, 2, 3, 4, 5
EXIT_NO_VERIFIED_FIX = 6  # a check was given and no candidate passed it (engine.candidates)


def check_focus(focus: int | None, text: str, lines: tuple[int, int] | None) -> None:
    """``--focus`` must name a line of the edited region (1-based, document numbering)."""
    if focus is None:
        return
    n = len(split_lines(text)) or 1
    first, last = lines if lines else (1, n)
    if not first <= focus <= min(last, n):
        where = f"the edited lines {first}-{last}" if lines else f"the file's {n} lines"
        raise EditError(f"--focus {focus} is outside {where}; give a line of the region (1-based)")


VerdictKind = Literal["write", "cancelled", "unfinished", "destructive", "syntax"]


@dataclass(frozen=True)
class Verdict:
    """What becomes of a finished edit. ``kind``: ``write`` it, or refuse it as ``cancelled``,
    ``unfinished`` (the token limit or a degenerate loop: ``stop_reason`` says which),
    ``destructive`` or ``syntax``-breaking; ``exit_code`` is the CLI's exit status for it (0 to
    write) and ``message`` the CLI's and the HTTP endpoint's words ("" to write). ``reason``: the
    check's own words (the loop warning, what the destructive edit would do, how the syntax
    breaks), for a front door that words its own message (the language server). ``damage`` and
    ``syntax`` are the checks' findings on a finished edit (None before they ran)."""

    kind: VerdictKind
    exit_code: int
    message: str
    stop_reason: str
    reason: str = ""
    changed: bool = False
    damage: EditDamage | None = None
    syntax: SyntaxVerdict | None = None

    @property
    def refused(self) -> bool:
        return self.kind != "write"

    def as_preview(self, always: bool = False) -> bool:
        """Is the edit shown for review instead of applied: a change the checks refused, or with
        ``always`` (an editor's preview setting) every change?"""
        return self.changed and (self.kind in ("destructive", "syntax") or (always and self.kind == "write"))


def destructive(region_input: str, region_output: str, instruction: str) -> tuple[str | None, EditDamage]:
    """(what a destructive edit would do, or None; the damage) for a region's text before and after."""
    damage = assess_edit(region_input, region_output)
    return destructive_reason(damage, instruction), damage


def judge(result: EditResult, instruction: str, max_new_tokens: int, language: str = "") -> Verdict:
    """The verdict on ``result``. ``language`` (``language_for``): checks the syntax of the whole
    document before and after (none when empty or unsupported)."""
    stop = result.stop_reason
    if stop == "cancelled":
        return Verdict("cancelled", EXIT_CANCELLED, "the edit was cancelled", stop)
    if stop == "max_tokens":
        return Verdict("unfinished", EXIT_UNFINISHED,
                       f"the edit did not finish: the model used all {max_new_tokens} new tokens "
                       "(raise --max-new-tokens or edit fewer --lines)", stop)
    if stop == "loop":
        why = next((w for w in result.warnings if "loop" in w), "the output became a degenerate loop")
        return Verdict("unfinished", EXIT_UNFINISHED, f"the edit did not finish: {why}", stop, reason=why)
    reason, damage = destructive(result.region_input, result.region_output, instruction)
    syntax = check_edit(result.input_text, result.output_text, language)
    found = {"damage": damage, "syntax": syntax, "changed": result.changed}
    if reason:
        return Verdict("destructive", EXIT_DESTRUCTIVE, f"refusing a destructive edit: it {reason}", stop,
                       reason=reason, **found)
    broken = syntax.reason()
    if broken:
        return Verdict("syntax", EXIT_SYNTAX, f"refusing an edit that breaks the syntax: it {broken}", stop,
                       reason=broken, **found)
    return Verdict("write", 0, "", stop, **found)


def json_summary(result: EditResult, compared: dict[str, EditResult], damage: EditDamage | None, message: str,
                 written: list[Path], language: str = "", syntax: SyntaxVerdict | None = None) -> dict[str, Any]:
    """What ``--json`` prints (the OpenAI-compatible server's edit endpoint answers the same);
    ``no_fix`` says why an edit that finished unchanged changed nothing (:func:`no_fix`).
    ``syntax``: the parser's verdict on the whole document (engine.checks.syntax.SyntaxVerdict.json);
    the one :func:`judge` found is passed in, else the document is parsed here."""
    summary = result.summary()
    if syntax is None:
        syntax = check_edit(result.input_text, result.output_text, language)
    summary["syntax"] = syntax.json()
    summary["compare"] = {m: r.summary() for m, r in compared.items()}
    summary["damage"] = damage.json() if damage is not None else None
    summary["refused"] = message or None
    summary["written"] = [str(path) for path in written]
    unchanged = no_fix(result)
    summary["no_fix"] = unchanged.json() if unchanged else None
    return summary


@dataclass(frozen=True)
class NoFix:
    """A finished edit that changed nothing, said so (:func:`no_fix`): ``line`` where the model
    kept the code (document numbering; None: it copied every line), ``why`` in words, and
    ``advice``: what to try, in the CLI's flags (a front door with other controls words its own
    from ``line``)."""

    line: int | None
    why: str
    advice: str

    @property
    def message(self) -> str:
        return f"no fix found: {self.why}; {self.advice}"

    def json(self) -> dict[str, Any]:
        return {"line": self.line, "why": self.why, "advice": self.advice, "message": self.message}


def no_fix(result: EditResult) -> NoFix | None:
    """Why a finished edit came back unchanged, or None when it changed something or did not
    finish (a cancel or a loop says so itself). The line is the one the no-op deviation guarded
    (engine/decoding/noop_gen.py), else the prompt's hint; the breakdown tells whether the model
    wrote that line back and the deviation found no change likely enough to force."""
    if result.changed or result.stop_reason != "done":
        return None
    line = result.focus.guarded or result.focus.hint
    gap = result.breakdown.get("noop_gen_refused_gap_min")
    if line is None:
        why = "the model copied every line as it is"
    elif gap is not None:
        why = (f"the model kept line {line} as it is: it wrote the line back, and the no-op deviation found no "
               f"likelier change (the best change there scored {gap:.2f} nats below keeping it, more than a "
               "forced change may)")
    elif line == result.focus.guarded:
        why = f"the model kept the code at line {line}: it copied the line instead of writing it"
    else:
        why = f"the model kept the code at line {line}, the line it was pointed at"
    named = f"line {line}" if line is not None else "the line"
    advice = (f"try --candidates 4 (other lines and other changes; with --check CMD only one that passes is "
              f"written), or an instruction that names the problem (e.g. \"{named}: the loop stops one short\")")
    return NoFix(line, why, advice)
