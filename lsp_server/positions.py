"""LSP positions <-> Python string offsets, in the negotiated position encoding.

An LSP ``Position`` is (line, character): ``line`` counts LSP line breaks (``\\r\\n``, ``\\n`` or
a lone ``\\r``, as the specification says; no other character breaks a line) and ``character``
counts code units of the negotiated encoding within that line: UTF-16 code units by default
(an emoji outside the BMP is 2), UTF-8 bytes, or UTF-32 code points (= Python ``str`` indices).
A Python ``str`` offset counts code points, so every conversion goes through the line's text.

Out-of-range positions are clamped the way the specification asks: a character past the end of
a line means the end of that line (before its terminator), a line past the last one means the
end of the document, and a UTF-16 position inside a surrogate pair rounds down to the code point.
"""

from __future__ import annotations

import bisect
import re
from typing import Literal, Sequence

from lsprotocol import types

Encoding = Literal["utf-8", "utf-16", "utf-32"]
SUPPORTED: tuple[Encoding, ...] = ("utf-16", "utf-8", "utf-32")
DEFAULT: Encoding = "utf-16"

_LINE_BREAK = re.compile(r"\r\n|\n|\r")


def negotiate(capabilities: types.ClientCapabilities | None) -> Encoding:
    """The client's first supported choice from ``general.positionEncodings``; UTF-16 otherwise
    (the only encoding every client must support). The choice is pygls' own, the one it
    advertises in the server capabilities, so both sides agree."""
    from pygls.capabilities import ServerCapabilitiesBuilder

    if capabilities is None:
        return DEFAULT
    chosen = ServerCapabilitiesBuilder.choose_position_encoding(capabilities)
    value = getattr(chosen, "value", chosen)
    return value if value in SUPPORTED else DEFAULT  # type: ignore[return-value]


def units(text: str, encoding: Encoding) -> int:
    """Length of ``text`` in code units of ``encoding``."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _code_points_for_units(line: str, count: int, encoding: Encoding) -> int:
    """How many leading code points of ``line`` fit in ``count`` code units (rounding down)."""
    if encoding == "utf-32":
        return min(count, len(line))
    used = 0
    for index, ch in enumerate(line):
        cp = ord(ch)
        if encoding == "utf-16":
            width = 2 if cp > 0xFFFF else 1
        else:
            width = 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
        if used + width > count:
            return index
        used += width
    return len(line)


class LineIndex:
    """Line starts of one text under LSP line-break rules; converts positions both ways."""

    def __init__(self, text: str):
        self.text = text
        starts = [0]
        content_ends = []
        for match in _LINE_BREAK.finditer(text):
            content_ends.append(match.start())
            starts.append(match.end())
        content_ends.append(len(text))
        self._starts: Sequence[int] = starts
        self._content_ends: Sequence[int] = content_ends

    def line_text(self, line: int) -> str:
        """Line ``line`` without its terminator."""
        return self.text[self._starts[line]:self._content_ends[line]]

    def offset_at(self, position: types.Position, encoding: Encoding = DEFAULT) -> int:
        """String offset of an LSP position (clamped as the module docstring says)."""
        if position.line < 0:
            return 0
        if position.line >= len(self._starts):
            return len(self.text)
        start = self._starts[position.line]
        line = self.line_text(position.line)
        return start + _code_points_for_units(line, max(position.character, 0), encoding)

    def position_at(self, offset: int, encoding: Encoding = DEFAULT) -> types.Position:
        """LSP position of a string offset. An offset between ``\\r`` and ``\\n`` of one CRLF is
        not a valid position; it maps to the end of that line's content."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._starts, offset) - 1
        start = self._starts[line]
        column_end = min(offset, self._content_ends[line])
        return types.Position(line=line, character=units(self.text[start:column_end], encoding))

    def range_at(self, start: int, end: int, encoding: Encoding = DEFAULT) -> types.Range:
        return types.Range(start=self.position_at(start, encoding), end=self.position_at(end, encoding))

    def offsets_of(self, rng: types.Range, encoding: Encoding = DEFAULT) -> tuple[int, int]:
        """(start, end) string offsets of an LSP range, ordered."""
        a, b = self.offset_at(rng.start, encoding), self.offset_at(rng.end, encoding)
        return (a, b) if a <= b else (b, a)


def apply_change(text: str, rng: types.Range | None, new_text: str, encoding: Encoding = DEFAULT) -> str:
    """``text`` after one ``didChange`` content change (a full replacement when ``rng`` is None)."""
    if rng is None:
        return new_text
    start, end = LineIndex(text).offsets_of(rng, encoding)
    return text[:start] + new_text + text[end:]
