"""Marker lines: the comments with which an update elides unchanged code.

Chat models and agents phrase them in many ways (``// ... existing code ...``, ``# ... rest of the
code unchanged ...``, ``# ...``, ``// keep existing code``, ``/* ... */``, ``<!-- ... -->``). A line is
a marker when it is a comment and nothing else, and the comment either starts or ends with an
ellipsis or is a short phrase about code left as it was. A marker line is never copied into a
merged file.
"""

from __future__ import annotations

import re
from typing import Sequence

# A whole-line comment: the opener, the body, an optional closer.
_COMMENT = re.compile(r"^\s*(?:#+|//+|/\*+|<!--|--|;+|\{/\*|\*|%|')\s*(?P<body>.*?)\s*(?:\*+/\}?|-->)?\s*$")
_ELLIPSIS = re.compile(r"^(?:\.{2,}|…|\[\.\.\.\])|(?:\.{2,}|…|\[\.\.\.\])$")
_PHRASE = re.compile(
    r"\b(?:existing (?:code|content|implementation|methods|functions|lines|imports|logic|body)|unchanged|rest of|remaining|remainder|as before|same as (?:before|above|original)|"
    r"omitted|elided|no changes?|(?:other|previous|original|prior) (?:code|methods|functions|content|lines)|"
    r"keep(?:s|ing)? (?:the )?(?:existing|rest|original|same|other|previous)|snip)\b", re.IGNORECASE)
MAX_PHRASE_WORDS = 10  # a longer comment is prose about the code, not a marker


def is_marker(line: str) -> bool:
    """Is ``line`` a marker comment standing for unchanged code (see the module docstring)?"""
    match = _COMMENT.match(line.rstrip("\r\n"))
    if match is None:
        return False
    body = match.group("body").strip()
    if not body:
        return False
    if _ELLIPSIS.search(body):
        return True
    return len(body.split()) <= MAX_PHRASE_WORDS and _PHRASE.search(body) is not None


def marker_lines(update: Sequence[str], file: Sequence[str] | None = None) -> set[int]:
    """The indices of ``update``'s marker lines. Given the ``file``, a comment that reads like a
    phrase marker but stands in the file as it is ("# keep the rest of the buffer") is the file's
    own comment, not a marker; an ellipsis marker is one wherever it stands."""
    own: set[str] | None = None
    out = set()
    for j, line in enumerate(update):
        if not is_marker(line):
            continue
        if own is None:
            own = {text.strip() for text in file} if file is not None else set()
        if line.strip() in own:
            body = _COMMENT.match(line.rstrip("\r\n"))
            if body is None or not _ELLIPSIS.search(body.group("body").strip()):
                continue
        out.add(j)
    return out
