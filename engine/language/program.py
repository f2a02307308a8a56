"""The edit-program language: AST, parser, serializer and gen-body escaping.

Grammar (see docs/how-it-works.md)::

    program ::= "<program>" op* "</program>"
    op      ::= copy | tcopy | gen
    copy    ::= '<copy lines="' I '-' J '"/>'      # input lines I..J, 1-based, inclusive
    tcopy   ::= '<copy tokens="' A '-' B '"/>'     # input tokens A..B, 1-based, inclusive
    ucopy   ::= '<copy update="' A '-' B '"/>'     # update lines A..B (apply only), 1-based, inclusive
    gen     ::= "<gen>" BODY "</gen>"

Ending (:func:`may_end_after`): ``</program>`` may follow a gen, or a copy that reached the
input's end (line copy: its last line; token copy: its last token), or, for an empty input,
``<program>`` itself. A program cannot end by accident one token after a copy that stopped early
(which would delete the rest of the input silently); deleting the tail stays expressible: a
final gen rewrites the last kept line. Deleting ALL of a non-empty input is the one edit no
program can express. A copy that reaches the input's end also ends the program
(:func:`must_end_after`): ``</program>`` is forced there, so the decoders never splice that copy
(its logits would only choose the end) and a model cannot append to the input after copying all
of it, which in the shipped selector's evaluations only ever added text that failed its tests
(48 of 714 final copies, all failing: docs/how-it-works.md). Appending stays expressible: a final
gen rewrites the last line and what follows it. The grammar (``engine.language.grammar.RangeConstraint``),
the vLLM segment grammars and the oracles apply these rules; ``engine.language.resolve.check_ending`` names
a program that breaks them.

Escaping: a gen body may never contain a reserved literal raw. On the way in, every ``<`` that
starts a reserved literal becomes the look-alike ``ESCAPE`` (U+FE64 SMALL LESS-THAN SIGN), and a
literal ``ESCAPE`` already in the text is doubled; ``unescape_body`` reverses both, so any text
round-trips byte-exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

ESCAPE = "\ufe64"
RESERVED_LITERALS = ("<copy", "<gen>", "</gen>", "<program>", "</program>")
PROGRAM_OPEN, PROGRAM_CLOSE = "<program>", "</program>"
GEN_OPEN, GEN_CLOSE = "<gen>", "</gen>"
# What the grammar forces before a program's first op (every op starts with "<"): the program
# decoder feeds it with the prompt, so a forward over the prompt that is to stand in for that
# prefill (engine.decoding.localize) reads it too.
PROGRAM_OPENING = PROGRAM_OPEN + "<"


class ProgramSyntaxError(ValueError):
    """A program text that does not follow the grammar; the message names the offset and why."""


@dataclass(frozen=True)
class CopyLines:
    """Copy input lines ``start``..``end`` (1-based, inclusive) verbatim, terminators included."""

    start: int
    end: int

    def serialize(self) -> str:
        return f'<copy lines="{self.start}-{self.end}"/>'


@dataclass(frozen=True)
class CopyTokens:
    """Copy input tokens ``start``..``end`` (1-based, inclusive, over the input's tokenization)."""

    start: int
    end: int

    def serialize(self) -> str:
        return f'<copy tokens="{self.start}-{self.end}"/>'


@dataclass(frozen=True)
class CopyUpdate:
    """Copy lines ``start``..``end`` (1-based, inclusive) of the update an apply merges
    (engine.apply): the second source of an apply's program, next to the file's line copies."""

    start: int
    end: int

    def serialize(self) -> str:
        return f'<copy update="{self.start}-{self.end}"/>'


@dataclass(frozen=True)
class Gen:
    """Emit ``text`` (unescaped, exactly as it should appear in the output)."""

    text: str

    def serialize(self) -> str:
        return GEN_OPEN + escape_body(self.text) + GEN_CLOSE


Op = Union[CopyLines, CopyTokens, CopyUpdate, Gen]


@dataclass(frozen=True)
class Program:
    """An ordered sequence of ops; resolving it against an input gives the edited text."""

    ops: tuple[Op, ...] = ()

    def serialize(self) -> str:
        return PROGRAM_OPEN + "".join(op.serialize() for op in self.ops) + PROGRAM_CLOSE

    def __str__(self) -> str:
        return self.serialize()


def may_end_after(last: Op | None, n_lines: int, n_tokens: int = 0) -> bool:
    """May ``</program>`` follow ``last`` (None: no op yet) over an input of ``n_lines`` lines
    (and ``n_tokens`` tokens, when token copies are on)? See the module docstring."""
    if last is None:
        return n_lines == 0
    if isinstance(last, CopyLines):
        return last.end >= n_lines
    if isinstance(last, CopyTokens):
        return last.end >= n_tokens
    return True


def must_end_after(last: Op | None, n_lines: int, n_tokens: int = 0) -> bool:
    """Must ``</program>`` follow ``last``? Yes after a copy that reached the input's end (see the
    module docstring); the decoders then write it without asking the model."""
    return isinstance(last, (CopyLines, CopyTokens)) and may_end_after(last, n_lines, n_tokens)


_RESERVED_START = re.compile("|".join(re.escape(lit) for lit in RESERVED_LITERALS))


def escape_body(text: str) -> str:
    """Make ``text`` safe inside ``<gen>…</gen>``: no reserved literal survives raw."""
    doubled = text.replace(ESCAPE, ESCAPE + ESCAPE)
    return _RESERVED_START.sub(lambda m: ESCAPE + m.group(0)[1:], doubled)


def unescape_body(body: str) -> str:
    """Inverse of :func:`escape_body`: ``ESCAPE ESCAPE`` -> ``ESCAPE``, lone ``ESCAPE`` -> ``<``."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == ESCAPE:
            if i + 1 < len(body) and body[i + 1] == ESCAPE:
                out.append(ESCAPE)
                i += 2
                continue
            out.append("<")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


_COPY = re.compile(r'<copy (lines|tokens|update)="([1-9][0-9]*)-([1-9][0-9]*)"/>')


def parse(text: str) -> Program:
    """Parse a complete program. Raises :class:`ProgramSyntaxError` naming the offset and reason.

    Syntax only: whether ranges fit an input is the resolver's job.
    """
    if not text.startswith(PROGRAM_OPEN):
        raise ProgramSyntaxError(f"offset 0: a program must start with {PROGRAM_OPEN!r}, got {text[:20]!r}")
    pos = len(PROGRAM_OPEN)
    ops: list[Op] = []
    while True:
        if text.startswith(PROGRAM_CLOSE, pos):
            end = pos + len(PROGRAM_CLOSE)
            if end != len(text):
                raise ProgramSyntaxError(f"offset {end}: trailing text after {PROGRAM_CLOSE!r}: {text[end:end + 20]!r}")
            return Program(tuple(ops))
        if text.startswith(GEN_OPEN, pos):
            body_start = pos + len(GEN_OPEN)
            body_end = text.find(GEN_CLOSE, body_start)
            if body_end < 0:
                raise ProgramSyntaxError(f"offset {pos}: <gen> is never closed with {GEN_CLOSE!r}")
            body = text[body_start:body_end]
            bad = _RESERVED_START.search(body)
            if bad:
                raise ProgramSyntaxError(
                    f"offset {body_start + bad.start()}: reserved literal {bad.group(0)!r} inside a gen body (escape it)"
                )
            ops.append(Gen(unescape_body(body)))
            pos = body_end + len(GEN_CLOSE)
            continue
        match = _COPY.match(text, pos)
        if match:
            kind, a, b = match.group(1), int(match.group(2)), int(match.group(3))
            ops.append({"lines": CopyLines, "tokens": CopyTokens, "update": CopyUpdate}[kind](a, b))
            pos = match.end()
            continue
        if pos >= len(text):
            raise ProgramSyntaxError(f"offset {pos}: program ends without {PROGRAM_CLOSE!r}")
        raise ProgramSyntaxError(
            f"offset {pos}: expected <copy lines=\"I-J\"/>, <copy tokens=\"A-B\"/>, <gen> or {PROGRAM_CLOSE!r}, "
            f"got {text[pos:pos + 20]!r}"
        )


def merge_adjacent(ops: list[Op]) -> tuple[Op, ...]:
    """Normalise: join neighbouring gens and line copies that continue each other."""
    out: list[Op] = []
    for op in ops:
        prev = out[-1] if out else None
        if isinstance(op, Gen) and not op.text:
            continue
        if isinstance(op, Gen) and isinstance(prev, Gen):
            out[-1] = Gen(prev.text + op.text)
        elif isinstance(op, CopyLines) and isinstance(prev, CopyLines) and prev.end + 1 == op.start:
            out[-1] = CopyLines(prev.start, op.end)
        else:
            out.append(op)
    return tuple(out)
