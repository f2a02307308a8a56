"""The one newline convention of the project.

A *line* is a maximal run of text ending in ``"\\n"`` (its terminator included, so ``"\\r\\n"``
lines keep their ``"\\r"``), plus a final run without a terminator if the text does not end in
``"\\n"``. A lone ``"\\r"`` is not a line break. So ``"".join(split_lines(t)) == t`` for every
``t``, an empty text has zero lines, and ``"a\\n"`` has one line. Copy ops emit whole lines with
their terminators, gen ops emit their body verbatim, and ops are concatenated with nothing in
between: that is what makes every program round-trip byte-exactly.
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines that keep their ``\\n`` terminators (see module docstring)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def line_offsets(text: str) -> list[int]:
    """Character offset where each line starts, plus ``len(text)`` at the end (n + 1 entries)."""
    offsets = [0]
    for line in split_lines(text):
        offsets.append(offsets[-1] + len(line))
    return offsets
