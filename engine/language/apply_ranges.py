"""The range rule of an apply's program: two sources behind one line numbering.

An apply's program reads one virtual input: the file's lines ``1..n_file`` followed by the
update's lines ``n_file+1..n_file+n_update`` (engine.apply). Its copies are ordinary line copies
over that input, and :class:`ApplyRanges` adds what the two sources need on top of
:class:`engine.language.grammar.RangeConstraint`:

* ranges move forward in each source on their own (a copy of the file starts after the last file
  line copied, a copy of the update after the last update line copied);
* a copy never crosses from the file into the update, and never includes a marker line (an
  update's ``... existing code ...`` comment stands for code, it is not code);
* the program may end after a gen, or after a copy that reached the end of its source; it must
  end once both sources are used up (nothing is left to copy).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from engine.language.grammar import OPEN_I, OPEN_J, RangeConstraint, banned_digits
from engine.language.program import CopyLines


class ApplyRanges(RangeConstraint):
    """The per-step range mask of an apply's program (see the module docstring). ``markers``:
    virtual line numbers (1-based) of the update's marker lines."""

    def __init__(self, vocab_texts: Sequence[str], n_file: int, n_update: int, markers: Sequence[int] = ()):
        super().__init__(vocab_texts, n_file + n_update, 0, monotonic=True, lines=None)
        self.n_file, self.n_update = n_file, n_update
        self.markers = sorted(set(markers))
        self.next_update = n_file + 1  # smallest start allowed for the next update copy

    # -- state ------------------------------------------------------------------------------------

    def copied(self, kind: str, end: int) -> None:
        if end <= self.n_file:
            self.next_line = max(self.next_line, end + 1)
            source_done = end >= self.n_file
        else:
            self.next_update = max(self.next_update, end + 1)
            source_done = end >= self.n_file + self.n_update
        self.after_gen = False
        self.may_end = source_done or self.exhausted()
        self.must_end = self.exhausted()

    def exhausted(self) -> bool:
        """No line is left to copy in either source."""
        return not self.starts()

    def starts(self) -> list[tuple[int, int]]:
        """The intervals a copy may start in now: the file's lines from the next one on, the
        update's likewise, without marker lines."""
        spans = [(self.next_line, self.n_file), (self.next_update, self.n_file + self.n_update)]
        out: list[tuple[int, int]] = []
        for low, high in spans:
            for marker in [m for m in self.markers if low <= m <= high]:
                if low < marker:
                    out.append((low, marker - 1))
                low = marker + 1
            if low <= high:
                out.append((low, high))
        return out

    def last_end(self, start: int) -> int:
        """The furthest line a copy that starts at ``start`` may reach: its source's end, or the
        line before the next marker."""
        end = self.n_file if start <= self.n_file else self.n_file + self.n_update
        after = [m for m in self.markers if m > start]
        return min(end, after[0] - 1) if after else end

    def gen_closed(self, text: str = "") -> None:
        self.after_gen = True
        self.may_end, self.must_end = True, False

    def snapshot(self) -> tuple:
        return (*super().snapshot(), self.next_update)

    def restore(self, state: tuple) -> None:
        super().restore(state[:4])
        self.next_update = state[4]

    # -- masks ------------------------------------------------------------------------------------

    def banned_ops(self) -> str:
        if self.must_end:
            return "gc"
        return ("g" if self.after_gen else "") + ("c" if self.exhausted() else "") + ("" if self.may_end else "/")

    def banned(self, tag_text: str, candidates: np.ndarray) -> list[int]:
        if tag_text in ("", "<"):
            return super().banned(tag_text, candidates)
        match = OPEN_J.search(tag_text)
        if match:
            start = int(match.group(2))
            intervals, prefix, closer = [(start, self.last_end(start))], match.group(3), '"'
        else:
            match = OPEN_I.search(tag_text)
            if not match or match.group(1) != "lines":
                return []
            intervals, prefix, closer = self.starts(), match.group(2), "-"
        return banned_digits(self.vocab_texts, candidates, prefix, closer, intervals)

    def allows(self, op: CopyLines) -> bool:
        """Would the rule let ``op`` be written now (a checked walk, a draft)?"""
        return any(low <= op.start <= high for low, high in self.starts()) and op.start <= op.end <= self.last_end(
            op.start)
