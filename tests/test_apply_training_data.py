"""The apply selector's training data: cut from sources the benchmark never uses, every style and
language present, and an oracle program that writes the gold (the aligner's own where it is right)."""

from __future__ import annotations

from engine.apply.align import align
from engine.apply.markers import is_marker
from engine.apply.plan import plan
from engine.bench.apply_cases import LANGUAGES, source_files
from engine.bench.pinned import ROOT, PinnedFile
from engine.core.lines import split_lines
from engine.language.program import CopyUpdate
from engine.training.apply.data import training_cases
from engine.training.apply.oracle import oracle_steps
from engine.training.apply.sources import training_files
from engine.training.apply.updates import STYLES, make_case


def test_training_files_never_include_a_held_out_source() -> None:
    for language in LANGUAGES:
        held_out = {(ROOT / f.path).resolve() if isinstance(f, PinnedFile) else f.resolve()
                    for f in source_files(language)}
        assert held_out, language
        assert not held_out & {path.resolve() for path in training_files(language)}, language


def test_training_cases_are_seeded_and_cover_every_style() -> None:
    cases = training_cases(len(LANGUAGES) * len(STYLES), seed=3)
    assert [c.name for c, _ in cases] == [c.name for c, _ in training_cases(len(LANGUAGES) * len(STYLES), seed=3)]
    assert {c.style for c, _ in cases} == set(STYLES)
    assert all(c.gold != c.file for c, _ in cases)


def _written(steps) -> str:
    return "".join(step.text for step in steps)


def test_the_oracle_writes_the_gold_and_is_the_aligners_plan_where_that_is_right() -> None:
    files = training_files("python")
    seen = {True: 0, False: 0}
    for style in STYLES:
        for seed in range(4):
            case = make_case(files, "python", style, 60, seed)
            if case is None:
                continue
            file, update, gold = split_lines(case.file), split_lines(case.update), split_lines(case.gold)
            oracle = oracle_steps(file, update, gold)
            assert _written(oracle.steps) == case.gold, case.name
            for step in oracle.steps:
                if isinstance(step.op, CopyUpdate):
                    assert not any(is_marker(line) for line in update[step.op.start - 1:step.op.end])
            if oracle.aligner_right:
                assert oracle.steps == plan(align(file, update), file, update)
            seen[oracle.aligner_right] += 1
    assert seen[True] > 0


def test_the_oracle_keeps_a_recurring_line_where_it_stood() -> None:
    """A deletion whose tail recurs earlier in the file: the gold's tail is the file's tail, so the
    window's program can end at the file's end (a copy that ends early cannot end a program)."""
    file = ["a\n", "x\n", "\n", "b\n", "c\n", "\n", "x\n", "\n"]
    gold = ["a\n", "x\n", "\n", "x\n", "\n"]
    update = ["# ...\n", "a\n", "x\n", "\n", "x\n", "# ...\n"]
    oracle = oracle_steps(file, update, gold)
    assert _written(oracle.steps) == "".join(gold)
    assert oracle.steps[-1].op.end == len(file)
