"""The one verdict on a finished edit, shared by every front door (the CLI, the language server and the
HTTP edit endpoint): write it, or refuse it as cancelled, unfinished, destructive, syntax-breaking or
far from the line the user pointed at, with the CLI's exit status for each (:func:`judge`). A refused
edit can still be shown as a preview."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.api import EditError
from engine.checks.guards import EditDamage, FarEdit, assess_edit, destructive_reason, far_from_focus
from engine.checks.syntax import SyntaxVerdict, check_edit
from engine.core.lines import split_lines
from engine.decoding.events import EditResult

# EXIT_DESTRUCTIVE: held for confirmation (--force writes it): destructive, or far from the pointed line
EXIT_CANCELLED, EXIT_BAD_REQUEST, EXIT_UNFINISHED, EXIT_DESTRUCTIVE, EXIT_SYNTAX = 1, 2, 3, 4, 5
EXIT_NO_VERIFIED_FIX = 6  # a check was given and no candidate passed it (engine.candidates)
EXIT_UNPLACED = 7  # an apply's update could not all be placed, and partial was not asked
EXIT_NO_FIX = 8  # an edit finished and changed nothing: the model found no fix (:func:`no_fix`)


def check_focus(focus: int | None, text: str, lines: tuple[int, int] | None) -> None:
    """``--focus`` must name a line of the edited region (1-based, document numbering)."""
    if focus is None:
        return
    n = len(split_lines(text)) or 1
    first, last = lines if lines else (1, n)
    if not first <= focus <= min(last, n):
        where = f"the edited lines {first}-{last}" if lines else f"the file's {n} lines"
        raise EditError(f"--focus {focus} is outside {where}; give a line of the region (1-based)")


VerdictKind = Literal["write", "cancelled", "unfinished", "destructive", "syntax", "far", "unplaced"]
REVIEWED_KINDS: tuple[VerdictKind, ...] = ("destructive", "syntax", "far")  # refused, yet shown for review


@dataclass(frozen=True)
class Verdict:
    """What becomes of a finished edit. ``kind``: ``write`` it, or refuse it as ``cancelled``,
    ``unfinished`` (the token limit or a degenerate loop: ``stop_reason`` says which),
    ``destructive``, ``syntax``-breaking, ``far`` from the line the user pointed at (``far`` says
    where it edits: engine.checks.guards.far_from_focus), or an apply whose update could not all be placed
    (``unplaced``: nothing to write, the chunks are in ``EditResult.unplaced``); ``exit_code`` is the CLI's exit status for it (0 to
    write) and ``message`` the CLI's and the HTTP endpoint's words ("" to write). ``reason``: the
    check's own words (the loop warning, what the destructive edit would do, how the syntax
    breaks, where a far edit edits), for a front door that words its own message (the language server). ``damage`` and
    ``syntax`` are the checks' findings on a finished edit (None before they ran)."""

    kind: VerdictKind
    exit_code: int
    message: str
    stop_reason: str
    reason: str = ""
    changed: bool = False
    damage: EditDamage | None = None
    syntax: SyntaxVerdict | None = None
    far: FarEdit | None = None

    @property
    def refused(self) -> bool:
        return self.kind != "write"

    def as_preview(self, always: bool = False) -> bool:
        """Is the edit shown for review instead of applied: a change the checks refused, or with
        ``always`` (an editor's preview setting) every change?"""
        return self.changed and (self.kind in REVIEWED_KINDS or (always and self.kind == "write"))


def destructive(region_input: str, region_output: str, instruction: str) -> tuple[str | None, EditDamage]:
    """(what a destructive edit would do, or None; the damage) for a region's text before and after."""
    damage = assess_edit(region_input, region_output)
    return destructive_reason(damage, instruction), damage


def judge(result: EditResult, instruction: str, max_new_tokens: int, language: str = "",
          focus: int | None = None) -> Verdict:
    """The verdict on ``result``. ``language`` (``language_for``): checks the syntax of the whole
    document before and after (none when empty or unsupported). ``focus``: the line the user
    pointed at (1-based, document numbering: the CLI's ``--focus``, the editor's cursor, the HTTP
    body's ``focus``; never a hint the engine chose): an edit whose every touched line lies more
    than ``FOCUS_RADIUS`` lines from it (blank lines not counted: engine.checks.guards.far_from_focus) is held (``far``, exit status 4 like a destructive edit),
    whatever the instruction, since a focus says where the problem is. A destructive or
    syntax-breaking edit is reported as that first."""
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
    if stop == "unplaced":
        why = next((w for w in result.warnings if "could not place" in w), "some of the update could not be placed")
        return Verdict("unplaced", EXIT_UNPLACED, why, stop, reason=why)
    reason, damage = destructive(result.region_input, result.region_output, instruction)
    syntax = check_edit(result.input_text, result.output_text, language)
    far = far_from_focus(result.region_input, result.region_output, focus, result.region[0] if result.region else 1)
    found = {"damage": damage, "syntax": syntax, "changed": result.changed, "far": far}
    if reason:
        return Verdict("destructive", EXIT_DESTRUCTIVE, f"refusing a destructive edit: it {reason}", stop,
                       reason=reason, **found)
    broken = syntax.reason()
    if broken:
        return Verdict("syntax", EXIT_SYNTAX, f"refusing an edit that breaks the syntax: it {broken}", stop,
                       reason=broken, **found)
    if far is not None:
        return Verdict("far", EXIT_DESTRUCTIVE, far.describe(), stop, reason=far.describe(), **found)
    return Verdict("write", 0, "", stop, **found)


def json_summary(result: EditResult, compared: dict[str, EditResult], damage: EditDamage | None, message: str,
                 written: list[Path], language: str = "", syntax: SyntaxVerdict | None = None,
                 far: FarEdit | None = None) -> dict[str, Any]:
    """What ``--json`` prints (the OpenAI-compatible server's edit endpoint answers the same);
    ``no_fix`` says why an edit that finished unchanged changed nothing (:func:`no_fix`);
    ``far_from_focus``: where a fix held for its distance from the pointed line edits (``far``, the
    verdict's), else None.
    ``syntax``: the parser's verdict on the whole document (engine.checks.syntax.SyntaxVerdict.json);
    the one :func:`judge` found is passed in, else the document is parsed here."""
    summary = result.summary()
    if syntax is None:
        syntax = check_edit(result.input_text, result.output_text, language)
    summary["syntax"] = syntax.json()
    summary["compare"] = {m: r.summary() for m, r in compared.items()}
    summary["damage"] = damage.json() if damage is not None else None
    summary["refused"] = message or None
    summary["far_from_focus"] = far.json() if far is not None else None
    summary["written"] = [str(path) for path in written]
    unchanged = no_fix(result)
    summary["no_fix"] = unchanged.json() if unchanged else None
    return summary


@dataclass(frozen=True)
class NoFix:
    """A finished edit that changed nothing, said so (:func:`no_fix`): ``line`` where the model
    kept the code (document numbering; None: it copied every line), ``why`` in words, ``example``:
    an instruction that names a problem the line can have (:func:`example_instruction`), and
    ``advice``: what to try, in the CLI's flags (a front door with other controls words its own
    from ``line`` and ``example``)."""

    line: int | None
    why: str
    advice: str
    example: str = ""

    @property
    def message(self) -> str:
        return f"no fix found: {self.why}; {self.advice}"

    def json(self) -> dict[str, Any]:
        return {"line": self.line, "why": self.why, "advice": self.advice, "message": self.message}


# A comparison at the line, and the one an off-by-one fix would put there (longest first, so
# "<=" is read before "<").
_COMPARISONS = (("<=", "<"), (">=", ">"), ("==", "!="), ("!=", "=="), ("<", "<="), (">", ">="))
_LOOP = re.compile(r"^\s*(for|while)\b|\.(forEach|map)\(|\brange\(")
_RETURN = re.compile(r"^\s*return\b")


def example_instruction(line: int | None, text: str) -> str:
    """An instruction that names the problem, built from what is at ``line`` of ``text`` (1-based):
    a loop's bound, a comparison's operator, a returned value; else, or without a line, a neutral
    one. It never names a kind of bug the line cannot have (a loop at a line without one)."""
    named = f"line {line}" if line is not None else "line N"
    lines = split_lines(text)
    code = lines[line - 1].strip() if line is not None and 1 <= line <= len(lines) else ""
    if _LOOP.search(code):
        return f"{named}: the loop stops one short"
    operator = next(((op, other) for op, other in _COMPARISONS
                     if re.search(rf"(?<![<>=!-]){re.escape(op)}(?![<>=])", code)), None)
    if operator and not code.startswith(("import", "from", "#include")):
        return f"{named}: {operator[0]} should be {operator[1]}"
    if _RETURN.search(code):
        return f"{named}: it returns the wrong value; it should return ..."
    return f"{named}: what is wrong and what it should do"


def no_fix(result: EditResult, *, candidates: int = 1, checked: bool = False) -> NoFix | None:
    """Why a finished edit came back unchanged, or None when it changed something or did not
    finish (a cancel or a loop says so itself), or when the region was empty (nothing was asked of
    the model: that is no missing fix). The line is the one the no-op deviation guarded
    (engine/decoding/noop_gen.py), else the prompt's hint; the breakdown tells whether the model
    wrote that line back and the deviation found no change likely enough to force. The advice
    suggests no flag already given: ``candidates`` is the ``--candidates`` asked (a larger one is
    suggested after several), ``checked`` whether ``--check`` was given."""
    if result.changed or result.stop_reason != "done" or not result.region_input:
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
    example = example_instruction(line, result.input_text)
    checks = "" if checked else "; with --check CMD only one that passes is written"
    if candidates < 4:
        more = f"--candidates 4 (other lines and other changes{checks})"
    else:
        more = (f"a larger --candidates than the {candidates} given, e.g. --candidates {candidates * 2} "
                f"(more variants; the model may have no other change{checks})")
    advice = f"try {more}, or an instruction that names the problem (e.g. \"{example}\")"
    return NoFix(line, why, advice, example)
