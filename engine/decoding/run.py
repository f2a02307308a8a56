"""One edit from request to events: split out the region, look the mode's strategy up
(:data:`engine.decoding.strategies.STRATEGIES`), let it prepare, build the prompt and run its
decoder, and wrap the outcome into an :class:`EditResult` (engine.decoding.results)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from engine.core.lines import split_lines
from engine.decoding.events import EditFinished, EditStarted, Event, FocusLines, OpResolved
from engine.decoding.localize import FocusPlan
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.prompt import PromptParts
from engine.decoding.request import EditRequest
from engine.decoding.results import decode_timings, edit_result
from engine.decoding.strategies import STRATEGIES, DecodeJob
from engine.runtime.loaded import LoadedModel

if TYPE_CHECKING:  # imported by program mode's strategy when it runs (it imports torch)
    from engine.decoding.program_decoder import FeedRecorder


def prompt_parts(request: EditRequest) -> PromptParts:
    """The prompt's parts for ``request``: its region, the read-only context on each side, and the
    focus in region lines."""
    lines = split_lines(request.text)
    a, b = request.region_bounds()
    ctx = max(0, request.context_lines)
    focus = request.focus_line - a if request.focus_line is not None else None
    return PromptParts(instruction=request.instruction, region="".join(lines[a:b]),
                       before="".join(lines[max(0, a - ctx):a]), after="".join(lines[b:b + ctx]), first_line=a + 1,
                       language=request.language, focus_line=focus)


def prepared(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool],
             recorder: FeedRecorder | None = None, draft_source: str | None = None) -> tuple[DecodeJob, Any]:
    """An edit's job up to its prompt (planned: the localizer has run; ``job.prompt_ids`` set) and
    the strategy that decodes it: what :func:`run_edit` does before the first decode step."""
    parts = prompt_parts(request)
    job = DecodeJob.start(loaded, request, parts, cancelled, recorder)
    job.draft_source = draft_source
    strategy = STRATEGIES[request.mode].on(loaded)
    strategy.prepare(job)
    strategy.prompt(job)
    return job, strategy


def focus_lines(plan: FocusPlan | None, start: int) -> FocusLines:
    """``plan``'s lines in document numbering (``start``: the region's first line, 0-based)."""
    if plan is None:
        return FocusLines()
    def doc(line: int | None) -> int | None:
        return None if line is None else line + start
    return FocusLines(doc(plan.hint), doc(plan.noop_line), tuple(line + start for line in plan.ranked))


def run_edit(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool],
             recorder: FeedRecorder | None = None, draft_source: str | None = None) -> Iterator[Event]:
    """Events of one edit (``request`` is an :class:`engine.api.EditRequest`, already validated).
    ``recorder`` (program and forced modes) sees every token fed to the model (training data);
    ``draft_source`` (speculative mode in process): the text its drafts come from instead of the
    region (an apply's rewrite drafts from the rules' merge)."""
    started = time.perf_counter()
    a, _ = request.region_bounds()
    job, strategy = prepared(loaded, request, cancelled, recorder, draft_source)
    region = job.region
    prompt_ids = job.prompt_ids
    yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(split_lines(region)),
                      prompt_tokens=len(prompt_ids))
    outcome: DecodeOutcome | None = None
    for item in strategy.decode(job):
        if isinstance(item, OpResolved):
            yield item
        else:
            outcome = item
    assert outcome is not None
    # A cancelled edit, or one stopped as a degenerate loop, leaves the document as it was.
    restored = outcome.stop_reason in ("cancelled", "loop")
    total = time.perf_counter() - started
    plan = job.focus
    if plan is not None and plan.seconds:  # the localizer's forward is part of the edit's cost
        outcome.breakdown["localize_s"] = round(plan.seconds, 6)
        outcome.breakdown["localize_forwards"] = plan.forwards
    yield EditFinished(edit_result(
        request, loaded.name, None if restored else outcome.region_output, outcome.stop_reason,
        decode_timings(total, outcome.breakdown), program=outcome.program, raw_output=outcome.raw_output,
        tokens=outcome.tokens, prompt_tokens=len(prompt_ids), breakdown=outcome.breakdown,
        warnings=outcome.warnings, focus=focus_lines(plan, a)))
