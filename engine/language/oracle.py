"""Oracle programs: the best program for an (input, gold) pair, built without a model.

* line level: ``difflib.SequenceMatcher(None, in_lines, gold_lines, autojunk=False)``; every
  matching block becomes a line copy, every gap in the gold a gen.
* token level: greedy left-to-right longest match of gold tokens against input tokens, keeping
  matches of at least ``min_span`` tokens as token copies; the rest is gen.

Both resolve to the gold byte-exactly by construction (and the tests check it), and both end
where the grammar lets a program end (``engine.language.program.may_end_after``): a final copy that stops
before the input's end gives its last line (token) to a final gen, so the tail deletion is
written out instead of falling off after ``</program>``; and a copy that reaches the input's end
with something after it (an append) gives its last unit to the gen that follows, since such a
copy ends a program (``engine.language.program.must_end_after``). The one exception is a gold that deletes
ALL of a non-empty input: the empty program says it, and no decodable program does.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Sequence

from engine.core.lines import split_lines
from engine.language.program import (
    CopyLines,
    CopyTokens,
    Gen,
    Op,
    Program,
    may_end_after,
    merge_adjacent,
    must_end_after,
)


def line_oracle(source: str, gold: str) -> Program:
    """Line-copy oracle program turning ``source`` into ``gold``."""
    src, dst = split_lines(source), split_lines(gold)
    matcher = difflib.SequenceMatcher(None, src, dst, autojunk=False)
    ops: list[Op] = []
    cursor = 0  # next gold line not yet emitted
    for block in matcher.get_matching_blocks():
        if block.b > cursor:
            ops.append(Gen("".join(dst[cursor:block.b])))
        if block.size:
            ops.append(CopyLines(block.a + 1, block.a + block.size))
        cursor = block.b + block.size
    if cursor < len(dst):
        ops.append(Gen("".join(dst[cursor:])))
    return Program(merge_adjacent(_end_properly(ops, src, len(src), 0)))


def _end_properly(ops: list[Op], units: Sequence[str], n_lines: int, n_tokens: int, min_span: int = 1) -> list[Op]:
    """Make the program end where the grammar lets it: a copy that reaches the input's end with
    ops after it, and a final copy that stops before the end, each hand their last unit (line or
    token, whose texts are ``units``) to a gen, or all of their units when what would stay copied
    is shorter than ``min_span`` (neighbouring gens are joined later by ``merge_adjacent``)."""
    out: list[Op] = []
    for i, op in enumerate(ops):
        final = i == len(ops) - 1
        if isinstance(op, (CopyLines, CopyTokens)) and (
                (final and not may_end_after(op, n_lines, n_tokens))
                or (not final and must_end_after(op, n_lines, n_tokens))):
            out += _last_unit_to_gen(op, units, min_span)
        else:
            out.append(op)
    return out


def _last_unit_to_gen(copy: CopyLines | CopyTokens, units: Sequence[str], min_span: int) -> list[Op]:
    if copy.end - copy.start >= max(1, min_span):
        return [type(copy)(copy.start, copy.end - 1), Gen(units[copy.end - 1])]
    return [Gen("".join(units[copy.start - 1:copy.end]))]


def greedy_token_matches(src_ids: Sequence[int], gold_ids: Sequence[int], min_span: int) -> list[tuple[int, int, int]]:
    """Greedy left-to-right longest matches ``(gold_pos, src_pos, length)`` with length >= min_span.

    At each gold position take the longest run that also occurs in the input (ties: earliest
    input position); if it is shorter than ``min_span``, emit that token as gen and move on.
    """
    positions: dict[int, list[int]] = defaultdict(list)
    for i, tok in enumerate(src_ids):
        positions[tok].append(i)
    matches: list[tuple[int, int, int]] = []
    g = 0
    n_src, n_gold = len(src_ids), len(gold_ids)
    while g < n_gold:
        best_len, best_src = 0, -1
        for s in positions.get(gold_ids[g], ()):
            length = 1
            while s + length < n_src and g + length < n_gold and src_ids[s + length] == gold_ids[g + length]:
                length += 1
            if length > best_len:
                best_len, best_src = length, s
        if best_len >= max(1, min_span):
            matches.append((g, best_src, best_len))
            g += best_len
        else:
            g += 1
    return matches


def token_oracle(source: str, gold: str, src_ids: Sequence[int], src_pieces: Sequence[str],
                 gold_ids: Sequence[int], gold_pieces: Sequence[str], min_span: int = 1) -> Program:
    """Token-copy oracle program. Pieces are from :func:`engine.core.tokens.token_pieces`.

    A match is kept as a copy only if its input pieces spell the same text as the gold pieces
    (they can differ when a byte-level token holds part of a character at a span edge).
    """
    ops: list[Op] = []
    cursor = 0  # gold token index not yet emitted
    for g, s, length in greedy_token_matches(src_ids, gold_ids, min_span):
        copied = "".join(src_pieces[s:s + length])
        if copied != "".join(gold_pieces[g:g + length]):
            continue
        if g > cursor:
            ops.append(Gen("".join(gold_pieces[cursor:g])))
        ops.append(CopyTokens(s + 1, s + length))
        cursor = g + length
    if cursor < len(gold_ids):
        ops.append(Gen("".join(gold_pieces[cursor:])))
    return Program(merge_adjacent(_end_properly(ops, src_pieces, len(split_lines(source)), len(src_ids), min_span)))
