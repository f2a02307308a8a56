"""An apply as an edit's events: the update aligned with the request's region (the whole file
unless ``lines`` is given), planned as a program of file copies, update copies and gens, and
streamed as ``EditStarted``, one ``OpResolved`` per op, ``EditFinished``.

When some of the update's chunks cannot be placed, the result lists them (``EditResult.unplaced``)
and, unless the request is ``partial``, stops as ``unplaced`` with the document unchanged.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from engine.apply.align import align
from engine.apply.plan import Step, plan, program_of
from engine.core.errors import Cancelled
from engine.core.lines import split_lines, to_lf
from engine.decoding.events import (EditFinished, EditResult, EditStarted, Event, OpResolved, StopReason,
                                    TokenCounts, UnplacedChunk)
from engine.decoding.request import EditRequest
from engine.language.program import CopyLines
from engine.runtime.models import LoadedModel

PREVIEW_CHARS = 60  # how much of an unplaced chunk's first line a message quotes


def unplaced_message(chunks: list[UnplacedChunk], written: bool) -> str:
    """What a front door tells the user about the chunks it could not place."""
    where = ", ".join(f"{c.start}-{c.end} ({c.text.strip().splitlines()[0][:PREVIEW_CHARS]!r})" for c in chunks)
    outcome = "the rest was merged" if written else "nothing was written (apply with partial to merge the rest)"
    return f"could not place update lines {where} in the file: no line of theirs matches it; {outcome}"


def run_apply(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """Events of the apply ``request`` (validated, ``update`` set) for the engine's model ``loaded``."""
    return aligned(loaded.name, request, cancelled)


def aligned(name: str, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """Events of the apply ``request`` by the aligner alone (no model); ``name`` is the model the
    result names."""
    started = time.perf_counter()
    assert request.update is not None
    lines = split_lines(request.text)
    a, b = request.region_bounds()
    file, update = lines[a:b], split_lines(to_lf(request.update))
    yield EditStarted(mode=request.mode, model=name, input_lines=len(file), prompt_tokens=0)
    alignment = align(file, update)
    unplaced = [UnplacedChunk(s + 1, e, "".join(update[s:e])) for s, e in alignment.unplaced]
    steps = plan(alignment, file, update)
    stop: StopReason = "unplaced" if unplaced and not request.partial else "done"
    written: list[str] = []
    consumed = 0
    if stop == "done":
        for index, step in enumerate(steps):
            if cancelled():
                raise Cancelled("cancelled while the merge was written")
            written.append(step.text)
            if isinstance(step.op, CopyLines):
                consumed = step.op.end
            yield OpResolved(index=index, op=step.op, text=step.text, resolved="".join(written),
                             input_lines_consumed=consumed, tokens=TokenCounts(),
                             elapsed_s=round(time.perf_counter() - started, 6))
    yield EditFinished(_result(name, request, file, (a, b), steps if stop == "done" else [], unplaced, stop,
                               time.perf_counter() - started, alignment.whole_file))


def _result(name: str, request: EditRequest, file: list[str], bounds: tuple[int, int], steps: list[Step],
            unplaced: list[UnplacedChunk], stop: StopReason, seconds: float, whole_file: bool) -> EditResult:
    lines = split_lines(request.text)
    a, b = bounds
    region_input = "".join(file)
    region_output = "".join(step.text for step in steps) if stop == "done" else region_input
    warnings = [unplaced_message(unplaced, stop == "done")] if unplaced else []
    if whole_file:
        warnings.append("the update is the whole new file: it was taken as it is")
    return EditResult(
        mode=request.mode, model=name, input_text=request.text,
        output_text="".join(lines[:a]) + region_output + "".join(lines[b:]),
        region=(a + 1, b) if request.lines else None, region_input=region_input, region_output=region_output,
        program=program_of(steps), raw_output="", tokens=TokenCounts(), prompt_tokens=0, stop_reason=stop,
        timings={"total_s": round(seconds, 6), "decode_s": 0.0, "prefill_s": 0.0},
        breakdown={"aligner_s": round(seconds, 6)}, warnings=warnings, unplaced=unplaced)
