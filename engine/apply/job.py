"""An apply as an edit's events: the update aligned with the request's region (the whole file
unless ``lines`` is given) and merged, streamed as ``EditStarted``, one ``OpResolved`` per op,
``EditFinished`` (the merged file in ``output_text``).

Who writes the merge, by the request's mode:

* ``program`` (what ``auto`` runs with a span selector): the model, per window, with the aligner's
  program as its draft (engine.apply.model); an update that is the whole new file, or one with
  chunks that cannot be placed, is answered by the aligner at once (there is nothing to decide);
* ``forced`` without a program: the aligner alone, no model;
* ``ar`` / ``speculative`` / ``pld``: the model rewrites the file with the update in its
  instruction (speculative drafts from the file: the file as the prediction).

When some of the update's chunks cannot be placed, the result lists them (``EditResult.unplaced``)
and, unless the request is ``partial``, stops as ``unplaced`` with the document unchanged; a merge
the model left unfinished stops as the edit would (``max_tokens``, ``cancelled``, ``loop``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Iterator

from engine.apply.align import Alignment, align
from engine.apply.model import Decoded, decode_parts, window_jobs
from engine.apply.plan import Step, joined, plan, program_of
from engine.apply.windows import plan_windows
from engine.core.errors import Cancelled
from engine.core.lines import split_lines, to_lf
from engine.decoding.events import (EditFinished, EditResult, EditStarted, Event, OpResolved, StopReason,
                                    TokenCounts, UnplacedChunk)
from engine.decoding.request import EditRequest
from engine.language.program import CopyLines, Program
from engine.runtime.loaded import LoadedModel

NO_TOKENS = TokenCounts()
PREVIEW_CHARS = 60  # how much of an unplaced chunk's first line a message quotes
DEFAULT_TOLERANCE = 0.0
TEXT_APPLY = ("{instruction}Apply this update to the code. Lines such as \"... existing code ...\" in it stand for "
              "the code as it is.\nUpdate:\n```\n{update}```")


def unplaced_message(chunks: list[UnplacedChunk], written: bool) -> str:
    """What a front door tells the user about the chunks it could not place."""
    where = ", ".join(f"{c.start}-{c.end} ({c.text.strip().splitlines()[0][:PREVIEW_CHARS]!r})" for c in chunks)
    outcome = "the rest was merged" if written else "nothing was written (apply with partial to merge the rest)"
    return f"could not place update lines {where} in the file: no line of theirs matches it; {outcome}"


def run_apply(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool],
              tolerance: float = DEFAULT_TOLERANCE) -> Iterator[Event]:
    """Events of the apply ``request`` (validated, ``update`` set) on ``loaded`` (see the module
    docstring); ``tolerance``: how much surer (nats) the model must be of its own step than of
    the aligner's to overrule it (0: the model's greedy program, whatever the draft)."""
    if request.mode == "forced" and request.program is None:
        return aligned(loaded.name, request, cancelled)
    if request.mode in ("ar", "speculative", "pld"):
        return rewritten(loaded, request, cancelled)
    return modeled(loaded, request, cancelled, request.apply_window_lines, tolerance)


class _Merge:
    """The parts every apply path shares: the region, the update, the alignment and its plan."""

    def __init__(self, request: EditRequest):
        assert request.update is not None
        self.request = request
        self.lines = split_lines(request.text)
        self.bounds = request.region_bounds()
        a, b = self.bounds
        self.file, self.update = self.lines[a:b], split_lines(to_lf(request.update))
        self.alignment: Alignment = align(self.file, self.update)
        self.unplaced = [UnplacedChunk(s + 1, e, "".join(self.update[s:e])) for s, e in self.alignment.unplaced]
        self.steps: list[Step] = plan(self.alignment, self.file, self.update)
        self.stop: StopReason = "unplaced" if self.unplaced and not request.partial else "done"

    def result(self, name: str, merged: str | None, program: Program, stop: StopReason, seconds: float, *,
               tokens: TokenCounts = NO_TOKENS, prompt_tokens: int = 0, raw_output: str = "",
               breakdown: dict | None = None, warnings: list[str] | None = None,
               timings: dict[str, float] | None = None) -> EditResult:
        """The result; ``merged`` None: the region as it was (nothing written)."""
        a, b = self.bounds
        region_input = "".join(self.file)
        region_output = region_input if merged is None else self.ending(merged)
        notes = list(warnings or [])
        if self.unplaced:
            notes.insert(0, unplaced_message(self.unplaced, merged is not None))
        if self.alignment.whole_file:
            notes.append("the update is the whole new file: it was taken as it is")
        return EditResult(
            mode=self.request.mode, model=name, input_text=self.request.text,
            output_text="".join(self.lines[:a]) + region_output + "".join(self.lines[b:]),
            region=(a + 1, b) if self.request.lines else None, region_input=region_input,
            region_output=region_output, program=program, raw_output=raw_output, tokens=tokens,
            prompt_tokens=prompt_tokens, stop_reason=stop,
            timings=timings or {"total_s": round(seconds, 6), "decode_s": 0.0, "prefill_s": 0.0},
            breakdown=breakdown or {}, warnings=notes, unplaced=self.unplaced)

    def ending(self, merged: str) -> str:
        """``merged`` ending in a newline exactly when the file does (an empty file: the update)."""
        model = self.file or self.update
        if not model or not merged:
            return merged
        if model[-1].endswith("\n"):
            return merged if merged.endswith("\n") else merged + "\n"
        return merged[:-1] if merged.endswith("\n") else merged


def aligned(name: str, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """Events of the apply ``request`` by the aligner alone (no model); ``name`` is the model the
    result names."""
    started = time.perf_counter()
    merge = _Merge(request)
    yield EditStarted(mode=request.mode, model=name, input_lines=len(merge.file), prompt_tokens=0)
    yield from _aligned_events(merge, name, cancelled, started)


def _aligned_events(merge: _Merge, name: str, cancelled: Callable[[], bool], started: float) -> Iterator[Event]:
    steps = merge.steps if merge.stop == "done" else []
    written: list[str] = []
    consumed = 0
    for index, step in enumerate(steps):
        if cancelled():
            raise Cancelled("cancelled while the merge was written")
        written.append(step.text)
        if isinstance(step.op, CopyLines):
            consumed = step.op.end
        yield OpResolved(index=index, op=step.op, text=step.text, resolved="".join(written),
                         input_lines_consumed=consumed, tokens=TokenCounts(),
                         elapsed_s=round(time.perf_counter() - started, 6))
    seconds = time.perf_counter() - started
    yield EditFinished(merge.result(name, "".join(written) if merge.stop == "done" else None, program_of(steps),
                                    merge.stop, seconds, breakdown={"aligner_s": round(seconds, 6)}))


def modeled(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool],
            window_lines: int, tolerance: float) -> Iterator[Event]:
    """The model's merge (engine.apply.model), window by window."""
    started = time.perf_counter()
    merge = _Merge(request)
    if merge.alignment.whole_file or merge.stop != "done" or not merge.file:
        yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(merge.file), prompt_tokens=0)
        yield from _aligned_events(merge, loaded.name, cancelled, started)
        return
    parts = plan_windows(merge.steps, len(merge.file), window_lines, whole=False)
    jobs = window_jobs(loaded, request, parts, merge.file, merge.update)
    prompt_tokens = sum(len(job.prompt_ids) for job in jobs)
    yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(merge.file), prompt_tokens=prompt_tokens)
    done = Decoded()
    yield from decode_parts(loaded, request, parts, jobs, merge.file, cancelled, started, done, tolerance)
    seconds = time.perf_counter() - started
    finished = done.stop_reason == "done"
    merged = "".join(done.texts) if finished else None
    if done.stop_reason == "max_tokens":  # unfinished: what was merged, then the file as it was
        merged = "".join(done.texts) + "".join(merge.file[done.consumed:])
    breakdown = {**done.breakdown, "window_lines": sum(job.window.size for job in jobs)}
    yield EditFinished(merge.result(
        loaded.name, merged, Program(joined(done.ops)), done.stop_reason, seconds,
        tokens=done.tokens, prompt_tokens=prompt_tokens, raw_output="".join(done.raw), breakdown=breakdown,
        warnings=done.warnings,
        timings={"total_s": round(seconds, 6),
                 "decode_s": round(sum(v for k, v in done.breakdown.items() if k.endswith("_s") and k != "prefill_s"), 6),
                 "prefill_s": done.breakdown.get("prefill_s", 0.0)}))


def rewritten(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """A text mode's apply: the model rewrites the file with the update in its instruction."""
    from engine.decoding.run import run_edit

    assert request.update is not None
    instruction = f"{request.instruction.strip()}\n" if request.instruction.strip() else ""
    edit = replace(request, update=None, instruction=TEXT_APPLY.format(instruction=instruction,
                                                                       update=to_lf(request.update)))
    return run_edit(loaded, edit, cancelled)
