"""Indentation: an update re-indented to its file's style.

An update may indent with tabs where the file uses spaces (or the reverse), and a snippet may be
shown shallower or deeper than where it belongs (a method written at column 0). The update's lines
are re-indented to the file's unit and shifted by the offset most of its lines that also stand in
the file share, so its lines compare with the file's and are merged in the file's style.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

DEFAULT_WIDTH = 4


def leading(line: str) -> str:
    """The line's indentation (its leading blanks)."""
    return line[:len(line) - len(line.lstrip(" \t"))]


def _is_blank(line: str) -> bool:
    return not line.strip()


@dataclass(frozen=True)
class IndentStyle:
    """How a text indents: with tabs, or with ``width`` spaces a level."""

    tabs: bool
    width: int

    @classmethod
    def of(cls, lines: Sequence[str]) -> IndentStyle | None:
        """The style most indented lines of ``lines`` use; None when no line is indented."""
        indents = []
        for line in lines:
            rest = line.lstrip(" \t")
            if rest.strip() and len(rest) < len(line):
                indents.append(line[:len(line) - len(rest)])
        if not indents:
            return None
        tabbed = sum(1 for ind in indents if ind.startswith("\t"))
        if tabbed * 2 > len(indents):
            return cls(True, DEFAULT_WIDTH)
        widths = sorted({len(ind) for ind in indents if not ind.startswith("\t")})
        steps = Counter(b - a for a, b in zip([0, *widths], widths) if b > a)
        return cls(False, steps.most_common(1)[0][0] if steps else DEFAULT_WIDTH)

    def levels(self, indent: str) -> int:
        """Indentation ``indent`` in levels of this style (a tab is one level)."""
        return indent.count("\t") + indent.count(" ") // self.width

    def render(self, levels: int) -> str:
        return "\t" * levels if self.tabs else " " * (self.width * levels)


def restyled(line: str, source: IndentStyle, target: IndentStyle) -> str:
    """``line`` re-indented from ``source``'s unit to ``target``'s (levels kept)."""
    indent = leading(line)
    if not indent or _is_blank(line):
        return line
    return target.render(source.levels(indent)) + line[len(indent):]


def shifted(line: str, columns: int) -> str:
    """``line`` with ``columns`` blanks added to (or, negative, taken from) its indentation; a tab
    counts as one column, and an indentation never goes below none."""
    if columns == 0 or _is_blank(line):
        return line
    indent = leading(line)
    if columns > 0:
        unit = "\t" if indent.startswith("\t") else " "
        return unit * columns + line
    return indent[min(-columns, len(indent)):] + line[len(indent):]


def to_file_style(update: Sequence[str], file: Sequence[str]) -> list[str]:
    """The update's lines in the file's indentation unit: tabs to spaces or spaces to tabs, when
    the two differ in kind (a difference of width alone is left, a snippet's few levels cannot tell
    it). An update whose every indentation the file's own lines already use is in the file's style
    as it is: a file that mixes tabs and spaces (GNU C: levels of two spaces, a tab for eight; a
    comment's continuation lines aligned with spaces) has lines a re-indented update line would no
    longer be a variant of."""
    source, target = IndentStyle.of(update), IndentStyle.of(file)
    if source is None or target is None or source.tabs == target.tabs:
        return list(update)
    used = {leading(line) for line in file if not _is_blank(line)}
    if all(leading(line) in used for line in update if not _is_blank(line)):
        return list(update)
    return [restyled(line, source, target) for line in update]


def common_offset(pairs: Sequence[tuple[str, str]]) -> int:
    """The indentation offset (file columns minus update columns) most non-blank (update, file)
    line pairs share; 0 when no offset has a majority."""
    offsets = Counter(len(leading(f)) - len(leading(u)) for u, f in pairs if not _is_blank(u))
    if not offsets:
        return 0
    offset, count = offsets.most_common(1)[0]
    return offset if count * 2 > sum(offsets.values()) else 0
