"""The resolver: program + input -> edited text. Deterministic, no model.

``strict`` mode raises :class:`ResolveError` naming the op and the reason; ``clipped`` mode
clamps every range into the input and reports what it changed as warnings. Resolving gives any
program its meaning; whether a decoder can WRITE it is the grammar's business, and
:func:`check_ending` applies the grammar's ending rule (``engine.language.program.may_end_after``) to a
whole program (forced mode checks a given program with it before decoding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from engine.core.lines import split_lines
from engine.language.program import CopyLines, CopyTokens, Gen, Op, Program, may_end_after, must_end_after, parse

Mode = Literal["strict", "clipped"]


class ResolveError(ValueError):
    """A program that cannot be resolved against this input in strict mode."""


@dataclass
class Resolution:
    text: str
    warnings: list[str] = field(default_factory=list)


def _check_range(kind: str, index: int, op: Op, start: int, end: int, limit: int, mode: Mode,
                 warnings: list[str]) -> tuple[int, int] | None:
    """Validate ``start..end`` against ``1..limit``; in clipped mode return the clamped range."""
    label = f"op {index + 1} ({op.serialize()})"
    problem = None
    if limit == 0:
        problem = f"the input has no {kind}s to copy"
    elif start > end:
        problem = f"{kind} range {start}-{end} is reversed (input has {limit} {kind}s)"
    elif start < 1 or end > limit:
        problem = f"{kind} range {start}-{end} is outside 1-{limit}"
    if problem is None:
        return start, end
    if mode == "strict":
        raise ResolveError(f"{label}: {problem}")
    if limit == 0:
        warnings.append(f"{label}: {problem}; dropped")
        return None
    lo, hi = sorted((min(max(start, 1), limit), min(max(end, 1), limit)))
    warnings.append(f"{label}: {problem}; clipped to {lo}-{hi}")
    return lo, hi


def resolve_op(op: Op, index: int, lines: Sequence[str], token_pieces: Sequence[str] | None,
               mode: Mode = "strict", warnings: list[str] | None = None) -> str:
    """Text that one op contributes (see :mod:`engine.core.lines` for the newline convention)."""
    warnings = warnings if warnings is not None else []
    if isinstance(op, Gen):
        return op.text
    if isinstance(op, CopyLines):
        rng = _check_range("line", index, op, op.start, op.end, len(lines), mode, warnings)
        return "" if rng is None else "".join(lines[rng[0] - 1: rng[1]])
    if isinstance(op, CopyTokens):
        if token_pieces is None:
            raise ResolveError(f"op {index + 1} ({op.serialize()}): token copies need the input's tokenization")
        rng = _check_range("token", index, op, op.start, op.end, len(token_pieces), mode, warnings)
        return "" if rng is None else "".join(token_pieces[rng[0] - 1: rng[1]])
    raise ResolveError(f"op {index + 1}: unknown op type {type(op).__name__}")


def resolve(program: Program | str, source: str, mode: Mode = "strict",
            token_pieces: Sequence[str] | None = None) -> Resolution:
    """Resolve ``program`` (an AST or its text) against ``source``.

    ``token_pieces`` is the input's tokenization as text pieces that concatenate to ``source``
    (see :func:`engine.core.tokens.token_pieces`); only token copies need it.
    """
    if isinstance(program, str):
        program = parse(program)
    lines = split_lines(source)
    warnings: list[str] = []
    parts = [resolve_op(op, i, lines, token_pieces, mode, warnings) for i, op in enumerate(program.ops)]
    return Resolution("".join(parts), warnings)


def check_ending(program: Program, n_lines: int, n_tokens: int = 0) -> None:
    """Raise :class:`ResolveError` when ``program`` ends where ``</program>`` is not allowed: right
    after a copy that stopped before the input's end, or at once over a non-empty input; or goes
    on after a copy that reached the input's end, where it must end."""
    for i, op in enumerate(program.ops[:-1]):
        if must_end_after(op, n_lines, n_tokens):
            raise ResolveError(f"op {i + 2} follows op {i + 1} ({op.serialize()}), a copy that reaches the input's end, "
                               "where a program ends (to append, write the last line and what follows as a gen)")
    last = program.ops[-1] if program.ops else None
    if may_end_after(last, n_lines, n_tokens):
        return
    if last is None:
        raise ResolveError(f"an empty program would delete all {n_lines} input lines; a program cannot "
                           "delete the whole input")
    kind, limit = ("line", n_lines) if isinstance(last, CopyLines) else ("token", n_tokens)
    raise ResolveError(f"op {len(program.ops)} ({last.serialize()}) stops at {kind} {last.end} of {limit} and "
                       f"the program ends there: </program> may only follow a gen or a copy that reaches "
                       f"the last {kind} (to delete the tail, write the last kept line as a gen)")
