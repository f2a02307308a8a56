"""Apply cases made from source files: a file, an update written the ways chat models and agents
write them, and the merged file that is right (the gold). The benchmark's held-out cases
(engine.bench.apply_cases) and the apply selector's training cases (engine.training.apply.data)
are both made here, from disjoint source files.

Each case makes one kind of change to "paragraphs" of the file (runs of non-blank lines) and
writes the update in one style (:data:`STYLES`):

* ``markers``: the changed paragraph between marker comments (phrasings vary by seed);
* ``no-markers``: only the changed paragraph;
* ``new-function``: a new paragraph, shown above its neighbour (the neighbour whole);
* ``deletion``: a paragraph deleted, shown by the end of the one before and the start of the one
  after standing adjacent, between markers;
* ``several``: two or three changed paragraphs, markers between them;
* ``rename``: a name changed on every line of a paragraph that holds it, between markers;
* ``reindent``: the changed paragraph indented with tabs (the file uses spaces), or shown at the
  left margin when it is indented in the file.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Protocol, Sequence

from engine.apply.indent import IndentStyle, restyled

STYLES = ("markers", "no-markers", "new-function", "deletion", "several", "rename", "reindent")
COMMENT = {"python": "#", "typescript": "//", "c": "//"}
PHRASES = ("... existing code ...", "... rest of the code unchanged ...", "...", "keep existing code",
           "... other functions ...", "rest of the file unchanged")
KEYWORDS = {"def", "class", "return", "if", "else", "elif", "for", "while", "import", "from", "const", "let",
            "function", "static", "int", "char", "void", "struct", "self", "None", "True", "False", "this", "not",
            "and", "or", "in", "is", "async", "await", "export", "type", "interface", "new", "NULL", "sizeof"}
MIN_LINES = 40  # a file cut shorter than this (and than asked for) is not a case


@dataclass(frozen=True)
class ApplyCase:
    """One apply case."""

    name: str
    language: str
    style: str
    size: int
    file: str
    update: str
    gold: str


class SourceText(Protocol):
    """A source file a case is cut from: a :class:`pathlib.Path`, or a file read from elsewhere
    (engine.bench.pinned.PinnedFile)."""

    @property
    def name(self) -> str: ...

    def read_text(self, encoding: str = ..., errors: str = ...) -> str: ...


def file_of(files: Sequence[SourceText], language: str, size: int, rng: random.Random) -> str:
    """About ``size`` lines of ``files`` (joined from a seeded start), cut after a blank line; ""
    when they hold fewer lines."""
    if not files:
        return ""
    start = rng.randrange(len(files))
    lines: list[str] = []
    for path in [*files[start:], *files[:start]]:
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        if "\t" in text and language != "c":
            continue
        lines += text.splitlines(keepends=True) + ["\n"]
        if len(lines) >= size:
            break
    if len(lines) < min(size, MIN_LINES):  # a language with fewer lines gives what it has
        return ""
    offset = rng.randrange(0, max(1, len(lines) - size)) if len(lines) > size * 2 else 0
    cut = lines[offset:offset + size]
    while cut and cut[-1].strip():
        cut.pop()
    return "".join(cut)


def paragraphs(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) of each run of non-blank lines."""
    out, start = [], None
    for i, line in enumerate(lines + ["\n"]):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            out.append((start, i))
            start = None
    return out


def mutate(line: str, rng: random.Random) -> str | None:
    """The line with one change that keeps it code: a number changed, else a name renamed."""
    numbers = list(re.finditer(r"\b\d+\b", line))
    if numbers:
        m = rng.choice(numbers)
        return line[:m.start()] + str(int(m.group()) + 1) + line[m.end():]
    names = [m for m in re.finditer(r"\b[A-Za-z_]\w{2,}\b", line) if m.group() not in KEYWORDS]
    if not names:
        return None
    m = rng.choice(names)
    return line[:m.start()] + m.group() + "_v2" + line[m.end():]


def changed(block: list[str], rng: random.Random) -> list[str] | None:
    """``block`` with one of its lines (not the first) mutated; None when no line can be."""
    order = list(range(1, len(block))) or [0]
    rng.shuffle(order)
    for i in order:
        new = mutate(block[i], rng)
        if new is not None and new != block[i] and "#" not in block[i] and "//" not in block[i]:
            return block[:i] + [new] + block[i + 1:]
    return None


def marker(language: str, rng: random.Random, indent: str = "") -> str:
    return f"{indent}{COMMENT[language]} {rng.choice(PHRASES)}\n"


def make_case(files: Sequence[SourceText], language: str, style: str, size: int, seed: int) -> ApplyCase | None:
    """One case cut from ``files``, or None when they cannot give it (too few lines, no paragraph
    to change)."""
    rng = random.Random(f"{language}-{style}-{size}-{seed}")
    text = file_of(files, language, size, rng)
    if not text:
        return None
    lines = text.splitlines(keepends=True)
    paras = [p for p in paragraphs(lines) if p[1] - p[0] >= 2 and not any("\t" in ln for ln in lines[p[0]:p[1]])]
    if len(paras) < 3:
        return None
    made = _styled(style, language, lines, paras, rng)
    if made is None:
        return None
    update, gold = made
    return ApplyCase(f"{language}-{style}-{size}-{seed}", language, style, len(lines), text, update, gold)


def _styled(style: str, language: str, lines: list[str], paras: list[tuple[int, int]],
            rng: random.Random) -> tuple[str, str] | None:
    k = rng.randrange(1, len(paras) - 1)
    a, b = paras[k]
    block = lines[a:b]
    if style in ("markers", "no-markers", "reindent"):
        new = changed(block, rng)
        if new is None:
            return None
        gold = lines[:a] + new + lines[b:]
        shown = new
        if style == "reindent":
            indent = min(len(ln) - len(ln.lstrip(" ")) for ln in new if ln.strip())
            style_ = IndentStyle.of(lines)
            width = style_.width if style_ is not None else 4
            shown = ([ln[indent:] if ln.strip() else ln for ln in new] if indent else
                     [restyled(ln, IndentStyle(False, width), IndentStyle(True, width)) for ln in new])
            if shown == new:
                return None
        if style == "no-markers":
            return "".join(shown), "".join(gold)
        return marker(language, rng) + "".join(shown) + marker(language, rng), "".join(gold)
    if style == "new-function":
        donor = paras[rng.randrange(len(paras))]
        new = [re.sub(r"\b([A-Za-z_]\w{2,})\b", lambda m: m.group() if m.group() in KEYWORDS else m.group() + "_added", ln)
               for ln in lines[donor[0]:donor[1]]]
        gold = lines[:a] + new + ["\n"] + lines[a:]
        return "".join(new) + "\n" + "".join(block), "".join(gold)
    if style == "deletion":
        before, after = paras[k - 1], paras[k + 1]
        gold = lines[:a] + lines[after[0]:]
        shown = lines[max(before[0], before[1] - 2):a] + lines[after[0]:min(after[1], after[0] + 2)]
        return marker(language, rng) + "".join(shown) + marker(language, rng), "".join(gold)
    if style == "several":
        picks = sorted(rng.sample(range(1, len(paras) - 1), min(3, len(paras) - 2)))
        gold, update, last = [], [marker(language, rng)], 0
        for p in picks:
            pa, pb = paras[p]
            new = changed(lines[pa:pb], rng)
            if new is None:
                return None
            gold += lines[last:pa] + new
            update += new + [marker(language, rng)]
            last = pb
        gold += lines[last:]
        return "".join(update), "".join(gold)
    if style == "rename":
        names = [m.group() for ln in block for m in re.finditer(r"\b[A-Za-z_]\w{3,}\b", ln) if m.group() not in KEYWORDS]
        if not names:
            return None
        name = rng.choice(names)
        new = [re.sub(rf"\b{re.escape(name)}\b", name + "Renamed", ln) for ln in block]
        gold = lines[:a] + new + lines[b:]
        return marker(language, rng) + "".join(new) + marker(language, rng), "".join(gold)
    raise ValueError(f"unknown style {style!r}")
