"""What a free-family edit did, besides its speed: exact match, a valid program, collateral damage.

Collateral damage counts the input lines an edit destroys that the gold
keeps. Lines are compared without their terminators (``"\\r\\n"``/``"\\n"``), so a missing final
newline is not damage. Two line diffs are taken with :class:`difflib.SequenceMatcher`
(``autojunk=False``, the same alignment as :func:`engine.checks.guards.assess_edit`):

* ``input -> gold``: the gold's *touched* input lines are those outside its ``equal`` blocks
  (lines the gold replaces or deletes);
* ``input -> output``: in each non-``equal`` block of ``m`` input lines replaced by ``n`` output
  lines, the first ``min(m, n)`` input lines are *changed* and the other ``max(0, m - n)``
  *deleted* (a ``delete`` block deletes all its lines; an ``insert`` block touches none).

Collateral = the output's changed or deleted input lines that the gold does not touch. Lines the
edit adds are never collateral (they destroy nothing), and a wrong fix on a line the gold also
changes is a wrong fix, not collateral. An output equal to the input has none; so does the gold.

Three more counts per output, from the same two diffs:

* a *wrong-line edit* changes something, and only where the gold keeps everything: its edit
  sites (the input lines it changes or deletes, and for a pure insertion the two lines around
  the insertion point) share no line with the gold's sites. The model found a line to fix, the
  wrong one (``wrong_line_edit``);
* a *tail deletion* drops the region's last lines that the gold keeps (trailing blank input
  lines aside): a program that ended before the last line (``tail_deletion``, the number of
  such lines);
* a *syntax break* (:mod:`engine.checks.syntax`): the input parsed and the output does not.

And the *near-copy insertions* (:func:`near_copy_insertions`): inserted blocks that put a variant
of an input line right before or after it while keeping it (``return a + b`` above
``return a - b``), a fix written beside the bug (``near_copy_insertions``).
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from typing import Any

from engine.core.lines import split_lines


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r\n") for line in split_lines(text)]


def touched_lines(input_text: str, other: str) -> tuple[set[int], set[int]]:
    """0-based input lines that ``other`` (changed, deleted) does not keep, by the rule above."""
    a, b = _lines(input_text), _lines(other)
    changed: set[int] = set()
    deleted: set[int] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal" or tag == "insert":
            continue
        kept_as_changed = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        changed.update(range(i1, i1 + kept_as_changed))
        deleted.update(range(i1 + kept_as_changed, i2))
    return changed, deleted


@dataclass(frozen=True)
class Collateral:
    """Input lines an output changes (``changed``) or deletes (``deleted``) that the gold keeps;
    ``lines`` = their sum; ``first`` = the first such line (1-based) or None."""

    changed: int
    deleted: int
    first: int | None

    @property
    def lines(self) -> int:
        return self.changed + self.deleted

    def json(self) -> dict[str, Any]:
        return {**asdict(self), "lines": self.lines}


def collateral_damage(input_text: str, output: str, gold: str) -> Collateral:
    """Collateral damage of ``output`` against ``gold`` (module docstring)."""
    gold_changed, gold_deleted = touched_lines(input_text, gold)
    gold_touched = gold_changed | gold_deleted
    changed, deleted = touched_lines(input_text, output)
    bad_changed, bad_deleted = changed - gold_touched, deleted - gold_touched
    bad = bad_changed | bad_deleted
    return Collateral(len(bad_changed), len(bad_deleted), min(bad) + 1 if bad else None)


def exact_match(output: str, gold: str) -> bool:
    """``output`` equals ``gold`` line by line, ignoring trailing whitespace on each line and blank
    lines at the end (differences no test or reader sees; a model's reply often drops the final
    newline)."""
    def norm(text: str) -> list[str]:
        lines = [line.rstrip() for line in split_lines(text)]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return norm(output) == norm(gold)


def valid_program(raw_output: str, region_input: str, region_output: str, stop_reason: str) -> bool:
    """A program-mode reply is valid when it finished (``</program>``, not a limit, loop or
    cancel), parses as a program and resolves strictly against the input to the output the engine
    returned."""
    from engine.language.program import ProgramSyntaxError, parse
    from engine.language.resolve import ResolveError, resolve

    if stop_reason != "done":
        return False
    try:
        return resolve(parse(raw_output), region_input, "strict").text == region_output
    except (ProgramSyntaxError, ResolveError):
        return False


def edit_sites(input_text: str, other: str) -> set[int]:
    """0-based input lines where ``other`` edits the input: lines it changes or deletes, and for
    an insertion that replaces nothing the lines on either side of the insertion point."""
    a, b = _lines(input_text), _lines(other)
    sites: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            sites.update(i for i in (i1 - 1, i1) if 0 <= i < len(a))
        else:
            sites.update(range(i1, i2))
    return sites


def wrong_line_edit(input_text: str, output: str, gold: str) -> bool:
    """True when ``output`` edits the input and every line it edits is one the gold keeps."""
    sites = edit_sites(input_text, output)
    return bool(sites) and not sites & edit_sites(input_text, gold)


def tail_deletion(input_text: str, output: str, gold: str) -> int:
    """How many lines the gold keeps in the run of deleted lines that ends the input (trailing
    blank lines aside); 0 when the output keeps the last line."""
    lines = _lines(input_text)
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    _changed, deleted = touched_lines(input_text, output)
    gold_changed, gold_deleted = touched_lines(input_text, gold)
    count = 0
    while last >= 0 and last in deleted:  # the run of deleted lines that ends the input
        count += last not in gold_changed and last not in gold_deleted
        last -= 1
    return count


def syntax_broken(input_text: str, output: str, language: str) -> bool | None:
    """True when the input parses as ``language`` and the output does not (:mod:`engine.checks.syntax`);
    None when there is no parser for the language."""
    from engine.checks import syntax

    if not syntax.supported(language):
        return None
    return syntax.breaks_syntax(input_text, output, language)


def near_copy_insertions(input_text: str, output: str) -> int:
    """How many of the output's pure insertions (``insert`` blocks of the input -> output diff)
    put a variant of an input line (:func:`engine.core.lines.near_copy`) right before or right
    after that line while keeping it: a fix written next to the bug instead of over it."""
    from engine.core.lines import near_copy

    a, b = _lines(input_text), _lines(output)
    count = 0
    for tag, i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "insert":
            continue
        before = i1 < len(a) and near_copy(b[j2 - 1], a[i1])
        after = i1 > 0 and near_copy(b[j1], a[i1 - 1])
        count += before or after
    return count
