"""Training sequences of the apply selector, recorded through the program decoder as an apply
runs it (engine.apply.model): per window of the oracle's plan, the apply prompt, then the
oracle's program written by the teacher under the apply's range rule, with every chosen token,
forced literal and spliced copy the decoder feeds. The loss falls on the chosen tokens only
(engine.training.selector.dataset), so training and inference cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from engine.apply.markers import is_marker
from engine.apply.prompt import apply_messages, virtual_input
from engine.apply.windows import Window, plan_windows
from engine.core.choices import never_cancelled
from engine.core.lines import split_lines
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_decoder import FeedRecorder, ProgramDecoder
from engine.decoding.prompt import render
from engine.decoding.tables import tables_for
from engine.language.apply_ranges import ApplyRanges
from engine.training.apply.oracle import oracle_steps
from engine.training.apply.updates import ApplyCase
from engine.training.selector.dataset import RecordedSet, TrainExample, example_from_fed, recording_model

PROGRAM_TOKENS = 1024  # a window's program budget while recording (copies' tokens not counted)


@dataclass(frozen=True)
class Fed:
    """A recorded window: what was fed (``ids``), which of it the model chose, what it wrote."""

    ids: list[int]
    chosen: list[bool]
    output: str


def record_window(loaded: Any, window: Window, file: Sequence[str], update: Sequence[str], instruction: str) -> Fed:
    """The fed sequence of one window whose steps are the teacher's program."""
    lines = list(file[window.first - 1:window.last])
    virtual = virtual_input(lines, list(update))
    ids = render(loaded.tokenizer, apply_messages(instruction, len(lines), len(update), virtual))
    markers = [len(lines) + j + 1 for j, line in enumerate(update) if is_marker(line)]
    tables = tables_for(loaded)
    ranges = ApplyRanges(tables.vocab_texts, len(lines), len(update), markers)
    recorder = FeedRecorder()
    decoder = ProgramDecoder(loaded, tables, virtual, ids, PROGRAM_TOKENS, never_cancelled,
                             teacher_program=window.draft(), draft=False, recorder=recorder, ranges=ranges)
    outcome = next(item for item in decoder.run() if isinstance(item, DecodeOutcome))
    if outcome.stop_reason != "done":
        raise ValueError(f"recording stopped early ({outcome.stop_reason})")
    return Fed(list(recorder.ids), list(recorder.chosen), outcome.region_output)


def case_examples(loaded: Any, case: ApplyCase, margin: int, instruction: str = "") -> list[TrainExample]:
    """One example per window of the case's oracle plan (``margin``: the windows' margin, as the
    apply's ``applyWindowLines``)."""
    file, update, gold = split_lines(case.file), split_lines(case.update), split_lines(case.gold)
    oracle = oracle_steps(file, update, gold)
    examples = []
    for part in plan_windows(oracle.steps, len(file), margin):
        if not isinstance(part, Window):
            continue
        fed = record_window(loaded, part, file, update, instruction)
        expected = "".join(step.text for step in part.steps)
        if fed.output != expected:
            raise ValueError(f"{case.name}: the recorded window wrote other text than its steps")
        kind = f"{case.style}{'' if oracle.aligner_right else '/aligner-wrong'}"
        examples.append(example_from_fed(fed, kind, case.language, case.name))
    return examples


def record_cases(loaded: Any, cases: Sequence[tuple[ApplyCase, str]], margin: int, max_tokens: int,
                 on_case: Callable[[int], None] | None = None) -> RecordedSet:
    """Every case's windows (``cases``: each with its instruction), recorded on a stand-in of
    ``loaded`` (teacher-forced decoding never reads the logits); sequences over ``max_tokens`` are
    dropped, as are cases the decoder cannot record (counted with them)."""
    stand_in = recording_model(loaded)
    recorded = RecordedSet()
    for i, (case, instruction) in enumerate(cases):
        try:
            for example in case_examples(stand_in, case, margin, instruction):
                recorded.add(example, max_tokens)
        except (ValueError, RuntimeError):  # a program the apply's grammar cannot write
            recorded.too_long += 1
        if on_case is not None:
            on_case(i + 1)
    return recorded
