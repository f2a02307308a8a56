"""What in the file came nearest to an update chunk that matches nothing, in words: a definition
whose body the chunk's definition has, or the one that takes its parameters (a rename?), or the
most alike line. It tells the user why
the chunk was refused and what to fix (a name, a marker)."""

from __future__ import annotations

import difflib
from typing import Sequence

from engine.apply.definitions import GrammarUnavailable, parse_definitions
from engine.apply.markers import is_marker
from engine.apply.structure import body_likeness, same_signature

SAME_BODY = 0.9  # a body this alike is "the same body"
LIKE_BODY = 0.5  # one this alike is "a body like it"
LIKE_LINE = 0.8  # a line this alike is worth naming (a looser one is only alike in its keywords)
QUOTE_CHARS = 60


def _quote(line: str) -> str:
    return f"`{line.strip()[:QUOTE_CHARS]}`"


def nearest(file: Sequence[str], chunk: Sequence[str], language: str) -> str:
    """``"no line matches `def understocked`; `def low_stock` at line 40 has the same body: a
    rename?"``, or the most alike line, or "" when the chunk shows no code."""
    shown = [line for line in chunk if line.strip() and not is_marker(line)]
    if not shown:
        return ""
    head = f"no line matches {_quote(shown[0])}"
    renamed = _renamed(file, chunk, language)
    if renamed:
        return f"{head}; {renamed}"
    key = shown[0].strip()
    best, at = 0.0, -1
    for i, line in enumerate(file):
        text = line.strip()
        if not text:
            continue
        matcher = difflib.SequenceMatcher(None, key, text, autojunk=False)
        if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
            ratio = matcher.ratio()
            if ratio > best:
                best, at = ratio, i
    if best >= LIKE_LINE:
        return f"{head}; the nearest is line {at + 1}, {_quote(file[at])} ({best:.0%} alike)"
    return head


def _renamed(file: Sequence[str], chunk: Sequence[str], language: str) -> str:
    """A file definition whose body the chunk's first definition has, in words; "" when none."""
    indent = min((len(line) - len(line.lstrip(" \t")) for line in chunk if line.strip()), default=0)
    lines = [line[indent:] if line.strip() else line for line in chunk]
    try:
        mine = parse_definitions(lines, language, update=True)
        theirs = parse_definitions(file, language)
    except GrammarUnavailable:
        return ""
    if not mine or not theirs:
        return ""
    ours = mine[0]
    scored = sorted(((body_likeness(lines, ours, file, d), d) for top in theirs for d in top.walk()
                     if d.kind == ours.kind and d.name != ours.name), key=lambda s: -s[0])
    if not scored or scored[0][0] < LIKE_BODY:
        same = [d for _, d in scored if same_signature(lines, ours, file, d)]
        if len(same) == 1:
            return f"{_quote(file[same[0].header])} at line {same[0].header + 1} takes the same parameters: a rename?"
        return ""
    likeness, found = scored[0]
    body = "the same body" if likeness >= SAME_BODY else "a body like it"
    return f"{_quote(file[found.header])} at line {found.header + 1} has {body}: a rename?"
