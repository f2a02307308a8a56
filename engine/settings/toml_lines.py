"""The line of each key of a TOML table, for ``file:line:`` messages.

tomllib gives values, not lines, and no parser at hand reports them: tomlkit keeps the layout
(whitespace, comments, order) but not positions, so a key's line would mean re-rendering the
document the way its private renderer does. This scanner reads just enough TOML to find them:
table headers, ``key =`` lines, and values that go on over several lines (multi-line strings,
arrays, inline tables), whose lines are neither keys nor headers. tomllib has already accepted the
text, so the scanner never has to reject anything; a key it cannot place (a dotted key such as
``tool.copy-as-decode.mode = ...``) only leaves its message without a line.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def _dotted(header: str) -> tuple[str, ...]:
    parts = re.findall(r"""\s*("[^"]*"|'[^']*'|[^.]+)\s*(?:\.|$)""", header)
    return tuple(p.strip().strip("\"'") for p in parts)


def _still_open(text: str, quotes: str | None, depth: int) -> tuple[str | None, int]:
    """After ``text`` (a value, or a line of one): the multi-line string still open (its quotes,
    else None) and how many brackets and braces are still open."""
    i = 0
    while i < len(text):
        if quotes:
            end = text.find(quotes, i)
            if end < 0:
                return quotes, depth
            i, quotes = end + 3, None
            continue
        if text.startswith(('"""', "'''"), i):
            quotes, i = text[i:i + 3], i + 3
            continue
        string = _STRING.match(text, i)
        if string:
            i = string.end()
            continue
        char = text[i]
        if char == "#":
            break
        depth += (char in "[{") - (char in "]}")
        i += 1
    return quotes, depth


def key_lines(text: str, table: tuple[str, ...] = ()) -> dict[str, int]:
    """The 1-based line of each key of ``table`` (``()``: the top level) in a TOML text that
    tomllib accepted; a key of an array of tables (``[[...]]``) is no key of ``table``."""
    current: tuple[str, ...] | None = ()
    out: dict[str, int] = {}
    quotes: str | None = None  # a multi-line string's quotes while one is open
    depth = 0  # brackets and braces of a value still open
    for number, line in enumerate(text.splitlines(), 1):
        if quotes or depth:
            quotes, depth = _still_open(line, quotes, depth)
            continue
        key = _KEY.match(line)
        if key:
            if current == table:
                out.setdefault(next(group for group in key.groups() if group is not None), number)
            quotes, depth = _still_open(line[key.end():], None, 0)
            continue
        header = _HEADER.match(line)
        if header:
            current = _dotted(header.group(2)) if header.group(1) == "[" else None
    return out
