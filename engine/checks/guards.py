"""Guard rails shared by every mode: stop a degenerate loop early, and recognise an edit that
would destroy most of its region.

``LoopGuard`` is built once per edit from the region's input and asked after every decoded line
(or op, or every ``LONG_LINE_RUN`` characters of a line still being written: see ``due``) whether
the output is degenerating. It looks only at the tail of the output, so a call costs a few slice
comparisons: the output ends in a unit repeated back to back (compared exactly, and again with
every digit run normalised to ``0`` so ``lines[32]``, ``lines[33]``, ... count as one unit) more
often than any run of that unit in the input. Units without a letter or digit (``}``, blank
lines, ``)``) count only within one line longer than ``LONG_LINE_RUN`` and than every input line
(``x ==========...`` to the token limit): real code repeats those across lines, and in separator
comments of a line's length. ``check_ops`` adds the program-mode case of gens that add nothing
(the same gen again and again, whitespace-only gens).

``assess_edit`` counts what an edit does to the region's lines (difflib on lines) and
``destructive_reason`` says when that is too much to apply without the user's confirmation.
``far_from_focus`` says when a fix lies entirely away from the line the user pointed at.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from engine.core.lines import common_ends, split_lines
from engine.language.program import Gen, Op, unescape_body

MAX_PERIOD = 400          # longest repeated unit (characters) looked for
WINDOW = 4096             # characters of the output tail examined per call
MIN_RUN_CHARS = 48        # a run shorter than this is never a loop (e.g. "a, a, a, ")
EXACT_REPEATS = 4         # exact units back to back, beyond what the input has
NORMALISED_REPEATS = 8    # units equal only up to their numbers (lines[32], lines[33], ...)
SAME_GEN_REPEATS = 3      # program mode: identical gens in a row
BLANK_GEN_REPEATS = 3     # program mode: whitespace-only gens in a row
DESTRUCTIVE_MIN_LINES = 4
# Lines (blank ones not counted) either side of the pointed line a fix may touch unconfirmed: the
# localizer's window (engine.decoding.localize.CURSOR_WINDOW, in plain lines), so a fix at any line
# the engine itself may pick for a cursor is never held. 2 held 2 passing fixes of 164 near-cursor
# HumanEvalFix-Python cases and no wrong one (results/focus/).
FOCUS_RADIUS = 3
LONG_LINE_RUN = 120       # a run of punctuation within one line longer than this (and every input line) loops
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[^\W_]")  # a letter or digit in any script
_NOT_WORD = re.compile(r"[\W_]+")


def normalise_digits(text: str) -> str:
    """Every run of digits becomes ``0``: units that differ only by a counter compare equal."""
    return _DIGITS.sub("0", text)


def skeleton(text: str) -> str:
    """Letters and (normalised) digits only: what "the input has this run" compares, so a run the
    input holds in a slightly different form (an edit that adds a colon to every line) counts."""
    return _NOT_WORD.sub("", normalise_digits(text))


def _tail_runs(text: str, min_repeats: int) -> Iterator[tuple[int, int]]:
    """(period, run length in characters) of every unit, shortest first, that ``text`` ends with
    at least ``min_repeats`` times back to back (the run may start mid-unit)."""
    n = len(text)
    last = text[-1:]
    for p in range(1, min(MAX_PERIOD, n // 2) + 1):
        if text[n - 1 - p] != last:  # cheap pre-check before slicing
            continue
        unit = text[n - p:]
        if not text.endswith(unit, 0, n - p):
            continue
        reps = 2
        while n - (reps + 1) * p >= 0 and text[n - (reps + 1) * p:n - reps * p] == unit:
            reps += 1
        if reps < min_repeats:
            continue
        start = n - reps * p
        while start > 0 and text[start - 1] == text[start - 1 + p]:
            start -= 1
        yield p, n - start


def _shown(unit: str, limit: int = 60) -> str:
    """A unit for a message: its lines joined with ⏎, cut to ``limit`` characters."""
    text = " ⏎ ".join(part.strip() for part in unit.strip("\n").split("\n"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


class LoopGuard:
    """Tells a decoder when its output has become a degenerate loop (module docstring)."""

    def __init__(self, region_input: str):
        self._input_skeleton = skeleton(region_input)
        self._longest_line = max((len(line.rstrip("\r\n")) for line in split_lines(region_input)), default=0)
        self._looked_at = (0, 0)  # ``due`` of the output check_when_due last looked at

    def check_when_due(self, output_so_far: str) -> str | None:
        """:meth:`check`, once a line completed or grew long since the last look (``due``); a
        text decoder calls it after every token."""
        now = due(output_so_far)
        if now == self._looked_at:
            return None
        self._looked_at = now
        return self.check(output_so_far)

    def _input_run(self, run: str) -> int:
        """How much of ``run`` (the output's repeating tail, as a skeleton) the input also holds
        as one contiguous run: the length of the longest suffix of ``run`` found in the input."""
        haystack = self._input_skeleton
        low, high = 0, len(run)
        while low < high:  # a suffix that occurs implies every shorter one does: binary search
            mid = (low + high + 1) // 2
            if run[len(run) - mid:] in haystack:
                low = mid
            else:
                high = mid - 1
        return low

    def check(self, output_so_far: str) -> str | None:
        """A message when the output so far ends in a degenerate loop, else None: its tail repeats a
        unit at least ``EXACT_REPEATS`` times (``NORMALISED_REPEATS`` when equal only up to
        numbers) more than the input's longest run of it, and at least as many times again."""
        tail = output_so_far[-WINDOW:]
        for normalised, need in ((False, EXACT_REPEATS), (True, NORMALISED_REPEATS)):
            text = normalise_digits(tail) if normalised else tail
            for period, length in _tail_runs(text, need):
                unit = text[len(text) - period:]
                if length < MIN_RUN_CHARS:
                    continue
                if not _WORD.search(unit):
                    if "\n" in text[len(text) - length:] or length <= max(LONG_LINE_RUN, self._longest_line):
                        continue
                    return (f"the output is repeating itself: {_shown(unit)!r} {length // period} times in one "
                            "line, longer than any line of the input (a degenerate loop); stopped early")
                run, unit_size = skeleton(text[len(text) - length:]), len(skeleton(unit))
                in_input = self._input_run(run)
                if (len(run) - in_input) // unit_size < max(need, in_input // unit_size):
                    continue  # the input itself has (about) this run: the output may just copy it
                how = "with only its numbers changing " if normalised else ""
                shown = "\n".join(tail.split("\n")[-1 - unit.count("\n"):]) if normalised else unit
                return (f"the output is repeating itself: {_shown(shown)!r} "
                        f"{length // period} times in a row {how}(a degenerate loop the input does not "
                        "have); stopped early")
        return None

    def check_ops(self, ops: Sequence[Op]) -> str | None:
        """Program mode: a message when the last gens add nothing (the same gen text
        ``SAME_GEN_REPEATS`` times in a row, or ``BLANK_GEN_REPEATS`` whitespace-only gens in a
        row, with no copy between them), else None."""
        gens: list[str] = []
        for op in reversed(ops):
            if not isinstance(op, Gen):
                break
            gens.append(op.text)
            if len(gens) >= max(SAME_GEN_REPEATS, BLANK_GEN_REPEATS):
                break
        if len(gens) >= BLANK_GEN_REPEATS and all(not g.strip() for g in gens[:BLANK_GEN_REPEATS]):
            return (f"the program wrote {BLANK_GEN_REPEATS} gens in a row that add only whitespace "
                    "(a degenerate loop); stopped early")
        if len(gens) >= SAME_GEN_REPEATS and len(set(gens[:SAME_GEN_REPEATS])) == 1:
            return (f"the program wrote the same gen {_shown(gens[0])!r} {SAME_GEN_REPEATS} times in a row "
                    "(a degenerate loop); stopped early")
        return None


@dataclass(frozen=True)
class EditDamage:
    """What an edit does to the lines of its region (line terminators ignored): ``kept``
    unchanged, ``changed`` replaced by other lines, ``deleted`` removed with nothing in their
    place, ``added`` new lines beyond the replacements."""

    input_lines: int
    output_lines: int
    kept: int
    changed: int
    deleted: int
    added: int

    @property
    def touched(self) -> int:
        """Input lines the edit does not keep."""
        return self.changed + self.deleted

    def describe(self) -> str:
        """e.g. "would delete 27 of 29 lines" or "would rewrite 10 and delete 8 of 29 lines"."""
        parts = []
        if self.changed:
            parts.append(f"rewrite {self.changed}")
        if self.deleted:
            parts.append(f"delete {self.deleted}")
        if not parts:
            return f"would keep all {self.input_lines} lines and add {self.added}"
        text = f"would {' and '.join(parts)} of {self.input_lines} lines"
        return text + (f" (and add {self.added})" if self.added else "")

    def json(self) -> dict[str, int]:
        return {"inputLines": self.input_lines, "outputLines": self.output_lines, "kept": self.kept,
                "changed": self.changed, "deleted": self.deleted, "added": self.added}


# Above this many line pairs, difflib's matcher (quadratic on the blank lines and lone braces a
# long file repeats) is replaced by anchoring on lines unique to both sides (patience diff).
_PLAIN_DIFF_PAIRS = 250_000


def line_opcodes(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes from line lists ``a`` to ``b``. Small inputs get difflib's own;
    large ones (a whole file's merge) are cut at their common ends and at the lines that occur
    once in each side, in the same order, and difflib runs on the gaps between those anchors:
    4,500 lines take milliseconds instead of most of a minute."""
    if len(a) * len(b) <= _PLAIN_DIFF_PAIRS:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    head, tail = common_ends(a, b)
    ops: list[tuple[str, int, int, int, int]] = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    i, j = head, head
    for ai, bj in _unique_anchors(a, b, head, len(a) - tail, len(b) - tail) + [(len(a) - tail, len(b) - tail)]:
        gap = difflib.SequenceMatcher(None, a[i:ai], b[j:bj], autojunk=False).get_opcodes()
        ops += [(tag, i + i1, i + i2, j + j1, j + j2) for tag, i1, i2, j1, j2 in gap]
        i, j = ai, bj
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return _joined(ops)


def _unique_anchors(a: Sequence[str], b: Sequence[str], start: int, a_end: int, b_end: int) -> list[tuple[int, int]]:
    """Positions (in a, in b) of lines that occur exactly once in a[start:a_end] and once in
    b[start:b_end], kept where they appear in the same order on both sides."""
    def once(lines: Sequence[str], lo: int, hi: int) -> dict[str, int]:
        seen: dict[str, int] = {}
        for k in range(lo, hi):
            seen[lines[k]] = -1 if lines[k] in seen else k
        return {line: k for line, k in seen.items() if k >= 0}
    in_a, in_b = once(a, start, a_end), once(b, start, b_end)
    shared = [line for line in in_a if line in in_b]  # in a's order (dicts keep insertion order)
    b_order = sorted(shared, key=in_b.__getitem__)
    matcher = difflib.SequenceMatcher(None, shared, b_order, autojunk=False)
    return [(in_a[shared[k]], in_b[shared[k]]) for block in matcher.get_matching_blocks()
            for k in range(block.a, block.a + block.size)]


def _joined(ops: list[tuple[str, int, int, int, int]]) -> list[tuple[str, int, int, int, int]]:
    """Adjacent opcodes of the same tag merged, empty ones dropped."""
    out: list[tuple[str, int, int, int, int]] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if out and out[-1][0] == op[0]:
            tag, i1, _, j1, _ = out[-1]
            out[-1] = (tag, i1, op[2], j1, op[4])
        else:
            out.append(op)
    return out


def assess_edit(region_input: str, region_output: str) -> EditDamage:
    """Count kept/changed/deleted/added lines of an edit (difflib opcodes over lines)."""
    a = [line.rstrip("\r\n") for line in split_lines(region_input)]
    b = [line.rstrip("\r\n") for line in split_lines(region_output)]
    kept = changed = deleted = added = 0
    for tag, i1, i2, j1, j2 in line_opcodes(a, b):
        old, new = i2 - i1, j2 - j1
        if tag == "equal":
            kept += old
        elif tag == "delete":
            deleted += old
        elif tag == "insert":
            added += new
        else:
            changed += min(old, new)
            deleted += max(0, old - new)
            added += max(0, new - old)
    return EditDamage(len(a), len(b), kept, changed, deleted, added)


_FIX_WORDS = re.compile(r"\b(fix\w*|bugs?|buggy|errors?|wrong|broken|incorrect|typos?|crash\w*|fail\w*)\b",
                        re.IGNORECASE)
_SHRINK_WORDS = re.compile(r"\b(delete|remove|drop|strip|shorten|simplify|condense|compress|trim|prune)\b",
                           re.IGNORECASE)


def is_fix(instruction: str) -> bool:
    """Does the instruction ask for a fix (the "AI fix" action, "Fix: <diagnostic>", "bug")?"""
    return bool(_FIX_WORDS.search(instruction))


def destructive_reason(damage: EditDamage, instruction: str) -> str | None:
    """Why the edit must not be applied without the user's confirmation, or None.

    In a region of at least ``DESTRUCTIVE_MIN_LINES`` lines: a fix that deletes or rewrites more
    than half of the lines, or any other edit that deletes more than half of them (net of
    replacements) unless the instruction asks to remove or shorten something. A fix is a small
    change; a model that rewrites the whole function for one has usually lost the code."""
    if damage.input_lines < DESTRUCTIVE_MIN_LINES:
        return None
    half = damage.input_lines / 2
    if is_fix(instruction) and damage.touched > half:
        return f"{damage.describe()} for a fix"
    if damage.deleted > half and not _SHRINK_WORDS.search(instruction):
        return damage.describe()
    return None


def edited_lines(region_input: str, region_output: str, first_line: int = 1) -> list[int]:
    """The input lines an edit touches, sorted, in the numbering where the region starts at
    ``first_line``: every line it replaces or deletes, and for a pure insertion between lines
    ``a`` and ``a + 1`` both of those lines (only line 1 for one before the first line, only the
    last line for one after it): an added line sits against its neighbours, so a fix that adds a
    guard above the pointed line counts as at that line. Line terminators are ignored, so an
    edit that only changes line endings touches nothing; an empty region has no lines to touch."""
    a = [line.rstrip("\r\n") for line in split_lines(region_input)]
    b = [line.rstrip("\r\n") for line in split_lines(region_output)]
    touched: set[int] = set()
    for tag, i1, i2, _, _ in line_opcodes(a, b):
        if tag == "equal":
            continue
        if tag == "insert":
            touched.update(n for n in (i1, i1 + 1) if 1 <= n <= len(a))
        else:
            touched.update(range(i1 + 1, i2 + 1))
    return sorted(n + first_line - 1 for n in touched)


@dataclass(frozen=True)
class FarEdit:
    """A fix whose every touched line (:func:`edited_lines`) is more than ``radius`` lines from
    ``focus``, the line the user pointed at (document numbering, 1-based): ``first``..``last`` is
    the span it touches."""

    first: int
    last: int
    focus: int
    radius: int = FOCUS_RADIUS

    def describe(self) -> str:
        """e.g. "it edits lines 4-4, far from line 10 where you pointed"."""
        return f"it edits lines {self.first}-{self.last}, far from line {self.focus} where you pointed"

    def json(self) -> dict[str, Any]:
        return {"lines": [self.first, self.last], "focus": self.focus, "radius": self.radius}


def focus_distance(lines: Sequence[int], focus: int, region_input: str = "", first_line: int = 1) -> int | None:
    """How far the nearest of ``lines`` is from ``focus`` (document numbering; 0: one is the
    pointed line; None: no lines), in lines that hold something: the blank lines between them (of
    ``region_input``, the region starting at document line ``first_line``) are not counted, so a
    cursor in the gap above a function points at the function's first lines. A line outside the
    region counts as one that holds something."""
    text = [line.strip() for line in split_lines(region_input)]

    def blank(n: int) -> bool:
        k = n - first_line
        return 0 <= k < len(text) and not text[k]

    def steps(n: int) -> int:
        low, high = sorted((focus, n))
        between = range(low + 1, high + 1) if n > focus else range(low, high)  # n's side: n counted, focus not
        return sum(not blank(k) for k in between) if n != focus else 0

    return min((steps(n) for n in lines), default=None)


def far_from_focus(region_input: str, region_output: str, focus: int | None, first_line: int = 1,
                   radius: int = FOCUS_RADIUS) -> FarEdit | None:
    """The edit, when a ``focus`` line was given and every line it touches lies more than
    ``radius`` lines from it (:func:`focus_distance`: blank lines between them not counted), a fix
    the user did not point at, held for confirmation, never written silently; None without a
    focus, for an unchanged region, or when a touched line is within ``radius`` of the focus.
    ``first_line``: the region's first document line."""
    if focus is None:
        return None
    lines = edited_lines(region_input, region_output, first_line)
    distance = focus_distance(lines, focus, region_input, first_line)
    if distance is None or distance <= radius:
        return None
    return FarEdit(lines[0], lines[-1], focus, radius)


def due(text: str) -> tuple[int, int]:
    """When the loop guard looks again: after every completed line, and every ``LONG_LINE_RUN``
    characters of a line that goes on (a call per token would cost too much)."""
    newlines = text.count("\n")
    return newlines, (len(text) - text.rfind("\n") - 1) // LONG_LINE_RUN


class ProgramLoopWatch:
    """The loop guard over a program being decoded (both program decoders use it): checked
    whenever an output line or an op completes, over the resolved ops and the gen being written."""

    def __init__(self, region: str):
        self.guard = LoopGuard(region)
        self.seen = (0, 0, 0)  # (output lines, long-line steps, ops) the guard has looked at
        self.warning: str | None = None

    def degenerate(self, resolved: str, scanner: Any, ops: list) -> bool:
        text = resolved + (unescape_body(scanner.body) if scanner.in_gen else "")
        seen = (*due(text), len(ops))
        if seen == self.seen:
            return False
        self.seen = seen
        self.warning = self.guard.check(text) or self.guard.check_ops(ops)
        return self.warning is not None
