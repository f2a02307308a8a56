"""A unified diff's hunks, applied to a file exactly.

A hunk's old side (its context and removed lines) must appear in the file as it is written,
ignoring only trailing whitespace and line endings. Chat models get the ``@@ -a,b`` numbers wrong
more often than the lines, so a hunk is placed where its old side occurs: anywhere when it occurs
once, else at the occurrence nearest its stated line when that is within :data:`FUZZ_LINES` of it
and nearer than any other. A hunk that occurs nowhere, or ambiguously, is not placed (the caller
names it and writes nothing). Hunks apply in order and never overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.lines import split_lines

FUZZ_LINES = 20  # how far from its stated line an occurrence that is not the only one may be
_HEADER = re.compile(r"^@@+ (?:-(?P<old>\d+)(?:,(?P<old_n>\d+))? \+(?P<new>\d+)(?:,(?P<new_n>\d+))? )?@@+")


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: ``old``/``new`` are its two sides' lines (no line endings); ``old_start``
    the old side's stated first line (1-based; None when the header gives none); ``line`` the
    answer line of its header; ``no_newline``: the new side ends without a final newline."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    old_start: int | None
    line: int
    no_newline: bool = False

    def describe(self) -> str:
        first = next((line for line in self.old + self.new if line.strip()), "")
        where = f"@@ -{self.old_start}" if self.old_start is not None else "@@"
        return f"hunk {where} at answer line {self.line} ({first.strip()[:60]!r})"


def parse_hunks(body: list[str], first_line: int) -> tuple[Hunk, ...]:
    """The hunks of one file's diff body (the lines after ``+++``; ``first_line``: the answer
    line of ``body[0]``). Lines before the first ``@@`` are ignored. A blank line inside a hunk
    is a blank context line (chat answers drop its leading space)."""
    hunks: list[Hunk] = []
    header: re.Match | None = None
    start = 0
    for i, line in enumerate([*body, None]):
        match = _HEADER.match(line) if line is not None else None
        if line is None or match:
            if header is not None:
                hunks.append(_hunk(header, body[start:i], first_line + start - 1))
            header, start = match, i + 1
    return tuple(hunks)


def _hunk(header: re.Match, lines: list[str], line: int) -> Hunk:
    old_n = header.group("old_n")
    stated = int(old_n) if old_n is not None else (1 if header.group("old") else None)
    while lines and lines[-1] == "" and (stated is None or _count_old(lines) > stated):
        lines = lines[:-1]  # the blank line that ends a fenced diff, not a context line
    old: list[str] = []
    new: list[str] = []
    no_newline = False
    previous = " "
    for text in lines:
        if text.startswith("\\"):
            no_newline = no_newline or previous in " +"
            continue
        mark, content = (text[0], text[1:]) if text else (" ", "")
        if mark not in " +-":
            mark, content = " ", text
        if mark in " -":
            old.append(content)
        if mark in " +":
            new.append(content)
        previous = mark
    old_start = int(header.group("old")) if header.group("old") else None
    return Hunk(tuple(old), tuple(new), old_start, line, no_newline)


def _count_old(lines: list[str]) -> int:
    return sum(1 for text in lines if not text or text[0] in " -")


@dataclass(frozen=True)
class Patched:
    """The file after the hunks that were placed (``text``), and those that were not (``unplaced``)."""

    text: str
    unplaced: tuple[Hunk, ...]


def apply_hunks(text: str, hunks: tuple[Hunk, ...]) -> Patched:
    """``text`` with every hunk that can be placed applied (see the module docstring); new lines
    take the file's line ending (``\\r\\n`` when its first line ends so)."""
    lines = split_lines(text)
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    keys = [line.rstrip("\r\n").rstrip() for line in lines]
    out: list[str] = []
    cursor = 0
    unplaced: list[Hunk] = []
    for hunk in hunks:
        at = _place(keys, hunk, cursor)
        if at is None:
            unplaced.append(hunk)
            continue
        out.extend(lines[cursor:at])
        new = [line + eol for line in hunk.new]
        end = at + len(hunk.old)
        if new and (hunk.no_newline or (end == len(lines) and lines and not lines[-1].endswith("\n"))):
            new[-1] = new[-1][:-len(eol)]
        out.extend(new)
        cursor = end
    out.extend(lines[cursor:])
    return Patched("".join(out), tuple(unplaced))


def _place(keys: list[str], hunk: Hunk, cursor: int) -> int | None:
    """Where ``hunk``'s old side starts in the file (at or after ``cursor``), or None."""
    old = [line.rstrip() for line in hunk.old]
    if not old:  # a pure insertion: after its stated line
        if hunk.old_start is None:
            return cursor if not keys else None
        at = min(hunk.old_start, len(keys))
        return at if at >= cursor else None
    found = [i for i in range(cursor, len(keys) - len(old) + 1) if keys[i:i + len(old)] == old]
    if len(found) == 1:
        return found[0]
    if not found or hunk.old_start is None:
        return None
    stated = hunk.old_start - 1
    found.sort(key=lambda i: abs(i - stated))
    nearest = found[0]
    if abs(nearest - stated) > FUZZ_LINES or abs(found[1] - stated) == abs(nearest - stated):
        return None
    return nearest
