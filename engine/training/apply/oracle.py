"""The program that writes a case's gold merge: what the apply selector is taught to write.

Where the aligner's merge is the gold, its plan is the oracle, so the program the model learns is
the draft it verifies at inference (every drafted step accepted). Where the aligner is wrong, the
oracle is built from the gold itself: lines the gold keeps from the file (a line diff of the two)
are file copies, the gold's other lines are copies of the update where it holds them verbatim (in
order, never a marker line) and gens where it does not (a re-indented line).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from engine.apply.align import align
from engine.apply.markers import is_marker
from engine.apply.plan import Step, extended, plan
from engine.core.lines import common_ends
from engine.language.program import CopyLines, CopyUpdate, Gen, Op


@dataclass(frozen=True)
class Oracle:
    """The gold's steps, and whether the aligner's own plan writes it."""

    steps: list[Step]
    aligner_right: bool


def oracle_steps(file: Sequence[str], update: Sequence[str], gold: Sequence[str]) -> Oracle:
    """The steps writing ``gold`` from ``file`` and ``update`` (lines of each, with their ends)."""
    alignment = align(file, update)
    steps = plan(alignment, file, update)
    if not alignment.unplaced and "".join(step.text for step in steps) == "".join(gold):
        return Oracle(steps, True)
    return Oracle(_from_gold(file, update, gold), False)


def _kept(file: Sequence[str], gold: Sequence[str]) -> dict[int, int]:
    """Gold line -> the file line it keeps: the common head and tail first, then a line diff of
    the middle (so a line that recurs in the file is kept where it stood, not where it recurs)."""
    head, tail = common_ends(file, gold)
    kept = {i: i for i in range(head)}
    kept.update({len(gold) - 1 - k: len(file) - 1 - k for k in range(tail)})
    middle = difflib.SequenceMatcher(None, list(file[head:len(file) - tail]), list(gold[head:len(gold) - tail]),
                                     autojunk=False)
    for block in middle.get_matching_blocks():
        for k in range(block.size):
            kept[head + block.b + k] = head + block.a + k
    return kept


def _from_gold(file: Sequence[str], update: Sequence[str], gold: Sequence[str]) -> list[Step]:
    kept = _kept(file, gold)
    steps: list[Step] = []
    cursor = 0  # the next update line a copy may start at
    for g, line in enumerate(gold):
        op: Op
        if g in kept:
            op = CopyLines(kept[g] + 1, kept[g] + 1)
        else:
            found = next((j for j in range(cursor, len(update)) if update[j] == line and not is_marker(line)), None)
            if found is None:
                op = Gen(line)
            else:
                op = CopyUpdate(found + 1, found + 1)
                cursor = found + 1
        both = extended(steps[-1].op, op) if steps else None
        if both is not None:
            steps[-1] = Step(both, steps[-1].text + line)
        else:
            steps.append(Step(op, line))
    return steps
