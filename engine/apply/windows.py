"""Windows: the parts of a file the model reads for an apply.

The aligner's plan says where the file changes (an update line or gen written, file lines skipped).
The model reads the file lines within ``margin`` lines of each change (windows that overlap or
touch are one) and the update; every file line outside the windows is copied without being read
(a line copy the merge writes itself, no token of it in any prompt). The apply selector is
trained on such windows (engine.training.apply), so a short file is one window and a long one
reads like a short one.

The cost: the prompt holds each window's lines and the whole update (one prefill per window),
the model writes each window's program, and the lines outside are free; so an apply costs what
its changes and their surroundings cost, not what the file's length does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.apply.plan import Step
from engine.language.program import CopyLines, CopyUpdate, Op, Program


@dataclass(frozen=True)
class Window:
    """File lines ``first..last`` (1-based, inclusive) the model reads, and the aligner's steps
    that write their part of the merged file (file coordinates)."""

    first: int
    last: int
    steps: tuple[Step, ...]
    update_offset: int = 0  # update lines before the part of it the window's prompt shows (all: 0)

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def update_span(self, n_update: int, context: int) -> tuple[int, int]:
        """The update lines (0-based ``[start, end)``) this window's steps copy, with ``context``
        lines on each side: what its prompt shows of an update too long to show whole."""
        copied = [(op.start, op.end) for op in (step.op for step in self.steps) if isinstance(op, CopyUpdate)]
        if not copied:
            return 0, 0
        return max(0, min(a for a, _ in copied) - 1 - context), min(n_update, max(b for _, b in copied) + context)

    def draft(self) -> Program:
        """The aligner's program for this window over its virtual input (the window's lines
        renumbered from 1, then the update's lines numbered on)."""
        return Program(tuple(self.to_virtual(step.op) for step in self.steps))

    def to_virtual(self, op: Op) -> Op:
        if isinstance(op, CopyLines):
            return CopyLines(op.start - self.first + 1, op.end - self.first + 1)
        if isinstance(op, CopyUpdate):
            return CopyLines(self.size + op.start - self.update_offset, self.size + op.end - self.update_offset)
        return op

    def from_virtual(self, op: Op) -> Op:
        """A window program's op in the merged file's terms (file lines, update lines)."""
        if isinstance(op, CopyLines):
            if op.start > self.size:
                return CopyUpdate(op.start - self.size + self.update_offset, op.end - self.size + self.update_offset)
            return CopyLines(op.start + self.first - 1, op.end + self.first - 1)
        return op


@dataclass(frozen=True)
class Outside:
    """File lines copied without the model reading them."""

    copy: CopyLines


Part = Window | Outside


def changes(steps: Sequence[Step], n_file: int) -> list[tuple[int, int]]:
    """File line ranges (1-based, inclusive, clipped to the file) where the plan changes it."""
    out: list[tuple[int, int]] = []
    cursor = 1  # the next file line
    for step in steps:
        op = step.op
        if isinstance(op, CopyLines):
            if op.start > cursor:
                out.append((cursor, op.start - 1))
            cursor = op.end + 1
        else:
            out.append((max(1, cursor - 1), min(n_file, cursor)))
    if cursor <= n_file:
        out.append((cursor, n_file))
    return out


def plan_windows(steps: Sequence[Step], n_file: int, margin: int) -> list[Part]:
    """The plan cut into windows and the copies between them (see the module docstring)."""
    if n_file == 0:
        return [Window(1, 0, tuple(steps))]
    spans: list[tuple[int, int]] = []
    for lo, hi in sorted(changes(steps, n_file)):
        lo, hi = max(1, lo - margin), min(n_file, hi + margin)
        if spans and lo <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], hi))
        else:
            spans.append((lo, hi))
    return _cut(steps, spans, n_file)


def _cut(steps: Sequence[Step], spans: list[tuple[int, int]], n_file: int) -> list[Part]:
    """Each step's output put in the window it falls in; file copies split at window edges."""
    def span_of(line: int) -> int | None:
        for k, (lo, hi) in enumerate(spans):
            if lo <= line <= hi:
                return k
        return None

    owned: list[list[Step]] = [[] for _ in spans]
    order: list[tuple[str, int]] = []  # ("w", window index) or ("o", index into outside)
    outside: list[CopyLines] = []

    def put(k: int | None, step: Step) -> None:
        if k is None:
            assert isinstance(step.op, CopyLines)
            if order and order[-1][0] == "o" and outside[order[-1][1]].end + 1 == step.op.start:
                outside[order[-1][1]] = CopyLines(outside[order[-1][1]].start, step.op.end)
            else:
                outside.append(step.op)
                order.append(("o", len(outside) - 1))
            return
        owned[k].append(step)
        if not order or order[-1] != ("w", k):
            order.append(("w", k))

    cursor = 1
    for step in steps:
        op = step.op
        if isinstance(op, CopyLines):
            start = op.start
            texts = step.text.splitlines(keepends=True)
            while start <= op.end:
                k = span_of(start)
                end = op.end
                if k is not None:
                    end = min(end, spans[k][1])
                else:
                    nxt = [lo for lo, _ in spans if lo > start]
                    end = min(end, nxt[0] - 1) if nxt else end
                part = "".join(texts[start - op.start:end - op.start + 1])
                put(k, Step(CopyLines(start, end), part))
                start = end + 1
            cursor = op.end + 1
        else:
            k = span_of(min(max(cursor, 1), n_file)) if n_file else 0
            if k is None:
                k = span_of(max(1, cursor - 1))
            put(k if k is not None else 0, step)
    parts: list[Part] = []
    for kind, index in order:
        if kind == "o":
            parts.append(Outside(outside[index]))
        else:
            lo, hi = spans[index]
            parts.append(Window(lo, hi, tuple(owned[index])))
    return parts
