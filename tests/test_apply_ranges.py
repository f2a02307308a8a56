"""The apply program's range rule (engine.language.apply_ranges), with no model: each source moves
forward on its own, no copy crosses from the file into the update or takes a marker line, and the
program ends only when it may."""

from __future__ import annotations

import numpy as np

from engine.language.apply_ranges import ApplyRanges
from engine.language.program import CopyLines, Gen

VOCAB = [str(i) for i in range(10)] + [f"{i}-" for i in range(10)] + [f'{i}"' for i in range(10)] + ["<", "/", "g", "c"]
ALL = np.arange(len(VOCAB))


def allowed(ranges: ApplyRanges, tag: str) -> set[str]:
    banned = set(ranges.banned(tag, ALL))
    return {VOCAB[t] for t in ALL.tolist() if t not in banned}


def test_starts_skip_markers_and_each_source_moves_on_its_own() -> None:
    ranges = ApplyRanges(VOCAB, n_file=5, n_update=4, markers=[6, 8])  # update lines 1 and 3 are markers
    assert ranges.starts() == [(1, 5), (7, 7), (9, 9)]
    assert "6-" not in allowed(ranges, '<copy lines="') and "7-" in allowed(ranges, '<copy lines="')
    ranges.op_finished(CopyLines(1, 3))
    assert ranges.starts() == [(4, 5), (7, 7), (9, 9)]
    ranges.op_finished(CopyLines(7, 7))
    assert ranges.starts() == [(4, 5), (9, 9)]


def test_a_copy_never_crosses_into_the_update_nor_over_a_marker() -> None:
    ranges = ApplyRanges(VOCAB, n_file=5, n_update=4, markers=[8])
    assert allowed(ranges, '<copy lines="4-') & {'5"', '6"'} == {'5"'}
    assert '7"' in allowed(ranges, '<copy lines="6-') and '9"' not in allowed(ranges, '<copy lines="6-')


def test_ending() -> None:
    ranges = ApplyRanges(VOCAB, n_file=3, n_update=2)
    assert not ranges.may_end
    ranges.op_finished(CopyLines(1, 2))
    assert "/" in ranges.banned_ops()  # a file line is left and nothing ended the program
    ranges.op_finished(CopyLines(3, 3))
    assert ranges.may_end and not ranges.must_end  # the update's lines may still follow
    ranges.op_finished(CopyLines(4, 5))
    assert ranges.must_end and ranges.banned_ops() == "gc"
    state = ranges.snapshot()
    ranges.restore(state)
    assert ranges.next_update == 6


def test_a_gen_may_end_it() -> None:
    ranges = ApplyRanges(VOCAB, n_file=3, n_update=2)
    ranges.op_finished(Gen("x\n"))
    assert ranges.may_end and "g" in ranges.banned_ops()
