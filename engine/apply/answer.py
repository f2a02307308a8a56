"""A chat answer that names files, split into one update per file.

Chat tools print a change to several files in three shapes, all accepted here:

* a fenced block headed by its path: ```` ```python path/to/x.py ````, ```` ```x.py ````,
  ```` ```python:x.py ```` or ```` ```python title="x.py" ````;
* a path line just before a fence (blank lines between are allowed): `` `path/to/x.py` ``,
  ``**x.py**``, ``File: x.py``, ``# x.py`` (any heading level; a trailing colon is fine);
* a unified diff (``--- a/x`` / ``+++ b/x`` then ``@@`` hunks), bare or in a fence, one or
  several files per diff (engine.apply.patch applies its hunks).

A fenced block names no file unless one of the first two shapes gives its path; such blocks are
kept as ``unnamed`` (a single-file apply can still use one). Nothing here touches the file system:
the paths are the answer's words, checked against a root by the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from engine.apply.patch import Hunk, parse_hunks

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_INFO_PATH = re.compile(r"^(?:path|file|filename|filepath|title)=[\"']?(?P<path>[^\"']+)[\"']?$", re.IGNORECASE)
_LINE_LEAD = re.compile(r"^(?:#{1,6}\s+|[-*+]\s+|(?:file(?:name|path)?|path)\s*:\s*)", re.IGNORECASE)
_DECORATION = "`*_\"' "
_PATH = re.compile(r"^(?:[\w.\-~@+]+/)*[\w.\-@+]*\.[A-Za-z0-9_+\-]+$|^(?:[\w.\-~@+]+/)+[\w.\-@+]+$|^/.+$"
                   r"|^[A-Za-z]:[\\/].+$")  # the last two: absolute paths (named, then refused by the caller)
# Names that look like a path to _PATH but are a fence's language, e.g. ```c++ or ```objective-c.
_NOT_PATHS = {"c++", "objective-c", "f#", "c#"}
_DIFF_OLD = re.compile(r"^--- (?P<path>\S.*?)(?:\t.*)?$")
_DIFF_NEW = re.compile(r"^\+\+\+ (?P<path>\S.*?)(?:\t.*)?$")
_DIFF_LANGUAGES = {"diff", "patch", "udiff"}
NULL_PATH = "/dev/null"
PROSE_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc")

BlockKind = Literal["update", "diff"]


@dataclass(frozen=True)
class FileBlock:
    """One file's part of an answer. ``kind`` ``update``: ``text`` is the changed code as the
    apply merges it (engine.apply.job); ``diff``: ``hunks`` are applied exactly (``text`` is the
    diff's own text). ``path`` is as the answer wrote it (``a/``/``b/`` prefixes dropped);
    ``line`` is the 1-based answer line the block starts on. ``created``/``deleted``: a diff from
    or to ``/dev/null``."""

    path: str
    kind: BlockKind
    text: str
    line: int
    hunks: tuple[Hunk, ...] = ()
    created: bool = False
    deleted: bool = False


@dataclass
class Answer:
    """The answer's blocks that name a file (``blocks``, in answer order) and the fenced blocks
    that name none (``unnamed``: their text)."""

    blocks: list[FileBlock] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)

    def duplicates(self) -> dict[str, list[FileBlock]]:
        """The paths named by more than one block (normalised: ``./x`` is ``x``), with their blocks."""
        by_path: dict[str, list[FileBlock]] = {}
        for block in self.blocks:
            by_path.setdefault(normalised(block.path), []).append(block)
        return {path: blocks for path, blocks in by_path.items() if len(blocks) > 1}


def normalised(path: str) -> str:
    """``path`` without leading ``./`` and with single slashes (for comparing an answer's paths)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return ("/" if path.startswith("/") else "") + "/".join(parts)


def split_answer(answer: str) -> Answer:
    """The blocks of ``answer`` (see the module docstring)."""
    lines = answer.replace("\r\n", "\n").split("\n")
    result = Answer()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            end = _closing(lines, i, fence.group("fence"))
            body = lines[i + 1:end]
            text = "".join(line + "\n" for line in body)
            info = fence.group("info").strip()
            language = info.split()[0].split(":")[0].lower() if info else ""
            if language in _DIFF_LANGUAGES or (body and _starts_diff(body, 0)):
                result.blocks.extend(_diff_blocks(body, i + 2))
            else:
                path = _info_path(info) or _path_above(lines, i)
                if path is None:
                    result.unnamed.append(text)
                else:
                    result.blocks.append(FileBlock(path, "update", text, i + 1))
            i = end + 1
            continue
        if _starts_diff(lines, i):
            end = i
            while end < len(lines) and not _FENCE.match(lines[end]) and _in_diff(lines[end]):
                end += 1
            result.blocks.extend(_diff_blocks(lines[i:end], i + 1))
            i = end
            continue
        i += 1
    return result


def _closing(lines: list[str], start: int, fence: str) -> int:
    """The index of the line closing the fence opened at ``start`` (the end of the answer when none)."""
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped and stripped[0] == fence[0] and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            return j
    return len(lines)


def _looks_like_path(word: str) -> bool:
    return word.lower() not in _NOT_PATHS and _PATH.match(word) is not None and not word.endswith(".")


def _info_path(info: str) -> str | None:
    """The path in a fence's info string: a word that is a path, ``lang:path``, or ``path=...``."""
    for word in info.split():
        named = _INFO_PATH.match(word)
        if named:
            return named.group("path")
        if ":" in word and not word.startswith(("/", "http")):
            word = word.split(":", 1)[1]
        word = word.strip("\"'")
        if word and _looks_like_path(word):
            return word
    return None


def _path_above(lines: list[str], fence_at: int) -> str | None:
    """The path on the last non-blank line above the fence, when that line is only a path."""
    j = fence_at - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or _FENCE.match(lines[j]):
        return None
    path = lines[j].strip()
    while True:  # "### File: `x.py`:", "- **x.py**", ...: the decorations around the path, in any order
        lead = _LINE_LEAD.match(path)
        stripped = (path[lead.end():] if lead else path).strip().rstrip(":").strip(_DECORATION).rstrip(":")
        if stripped == path:
            break
        path = stripped
    return path if path and " " not in path and _looks_like_path(path) else None


def _starts_diff(lines: list[str], i: int) -> bool:
    """A unified diff's file header at ``i``: ``--- old`` then ``+++ new`` (a ``diff --git``
    line may come first)."""
    if i < len(lines) and lines[i].startswith("diff --git "):
        i += 1
        while i < len(lines) and not lines[i].startswith(("--- ", "diff --git ")):
            i += 1
    return (i + 1 < len(lines) and _DIFF_OLD.match(lines[i]) is not None
            and _DIFF_NEW.match(lines[i + 1]) is not None)


def _in_diff(line: str) -> bool:
    """Can ``line`` belong to a bare (unfenced) diff?"""
    return line == "" or line[0] in " +-@\\" or line.startswith(("diff ", "index ", "new file", "deleted file",
                                                                  "similarity", "rename ", "old mode", "new mode"))


def _strip_prefix(path: str) -> str:
    path = path.strip().strip('"')
    if path != NULL_PATH and path[:2] in ("a/", "b/"):
        return path[2:]
    return path


def _diff_blocks(lines: list[str], first_line: int) -> list[FileBlock]:
    """One block per file header of the diff in ``lines`` (``first_line``: the answer line of ``lines[0]``)."""
    starts = [i for i in range(len(lines) - 1) if _DIFF_OLD.match(lines[i]) and _DIFF_NEW.match(lines[i + 1])]
    blocks = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        while end > start + 2 and lines[end - 1].startswith(("diff --git ", "index ", "new file", "deleted file")):
            end -= 1
        old = _strip_prefix(_DIFF_OLD.match(lines[start]).group("path"))  # type: ignore[union-attr]
        new = _strip_prefix(_DIFF_NEW.match(lines[start + 1]).group("path"))  # type: ignore[union-attr]
        body = lines[start + 2:end]
        text = "".join(line + "\n" for line in lines[start:end])
        path = old if new == NULL_PATH else new
        blocks.append(FileBlock(path, "diff", text, first_line + start, parse_hunks(body, first_line + start + 2),
                                created=old == NULL_PATH, deleted=new == NULL_PATH))
    return blocks


def update_for_file(update: str, name: str) -> str:
    """The update meant for the one file ``name`` when ``update`` is a chat answer rather than the
    code alone: the text of its one block, when that block is headed by ``name`` (the same path
    or file name), or, for an answer that names no file, when the whole update is one fence.
    ``update`` itself otherwise, and always for a prose file (Markdown, reStructuredText, text),
    whose own text holds fences. :class:`ValueError` for an answer that names other files or
    several, which a one-file apply cannot take."""
    if name.lower().endswith(PROSE_SUFFIXES):
        return update
    parsed = split_answer(update)
    if not parsed.blocks:
        stripped = update.strip().replace("\r\n", "\n")
        lines = stripped.split("\n")
        whole_fence = (len(parsed.unnamed) == 1 and len(lines) >= 2 and _FENCE.match(lines[0]) is not None
                       and _closing(lines, 0, _FENCE.match(lines[0]).group("fence")) == len(lines) - 1)  # type: ignore[union-attr]
        return parsed.unnamed[0] if whole_fence else update
    paths = [block.path for block in parsed.blocks]
    wanted = normalised(name)
    mine = [b for b in parsed.blocks if b.kind == "update" and (normalised(b.path) == wanted or
                                                                  wanted.endswith("/" + normalised(b.path)) or
                                                                  normalised(b.path).rsplit("/", 1)[-1] == wanted.rsplit("/", 1)[-1])]
    if len(parsed.blocks) == 1 and len(mine) == 1:
        return mine[0].text
    raise ValueError(f"the update is an answer that names {len(paths)} file block(s) ({', '.join(paths)}): leave "
                     "FILE out to merge each into its file (copy-as-decode apply --update ANSWER --root DIR)")
