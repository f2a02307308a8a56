"""An apply as an edit's events: the update aligned with the request's region (the whole file
unless ``lines`` is given) and merged, streamed as ``EditStarted``, one ``OpResolved`` per op,
``EditFinished`` (the merged file in ``output_text``).

Who writes the merge, by the request's mode (engine.core.modes; the engine's plan picks the writer):

* ``aligner`` (what ``auto`` runs): the aligner alone, no model (:func:`aligned`);
* ``program``: the model, per window, with the aligner's program as its draft (engine.apply.model);
  an update that is the whole new file, or one with chunks that cannot be placed, is answered by
  the aligner at once (there is nothing to decide). The model's merge reads the logits of each
  drafted step, so on a server (vLLM) it is refused with the fix (:data:`APPLY_WRITERS`);
* ``ar`` / ``speculative`` / ``pld``: the model rewrites the file with the update in its
  instruction, in process or on a server as the edit would. In process, speculative drafts from
  the rules' merge (the merge as the prediction of the rewrite, verified by the model): the output
  is the model's greedy rewrite, at copy speed where the model agrees with the merge; on a server,
  the server drafts as it is set up to.

When some of the update's chunks cannot be placed, the result lists them (``EditResult.unplaced``)
and, unless the request is ``partial``, stops as ``unplaced`` with the document unchanged; a merge
the model left unfinished stops as the edit would (``max_tokens``, ``cancelled``, ``loop``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import lru_cache
from typing import Callable, Iterator, NamedTuple, Sequence

from engine.apply.align import Alignment
from engine.apply.choice import Decision, Scorer, candidates, decide, model_scorer, survey
from engine.apply.model import Decoded, decode_parts, window_jobs
from engine.apply.plan import Step, joined, plan, program_of
from engine.apply.messages import unplaced_message
from engine.apply.nearest import nearest
from engine.apply.structure import merged_alignment
from engine.apply.windows import plan_windows
from engine.core.errors import Cancelled, EditError
from engine.core.lines import split_lines, to_lf
from engine.core.modes import APPLY_AUTO_MODE, modes_where, traits
from engine.decoding.events import (EditFinished, EditResult, EditStarted, Event, OpResolved, StopReason,
                                    TokenCounts, UnplacedChunk)
from engine.decoding.request import EditRequest
from engine.decoding.results import decode_timings, edit_result, undecoded_timings
from engine.language.program import CopyLines, Program
from engine.runtime.loaded import LoadedModel
from engine.runtime.protocol import is_local

TEXT_APPLY = ("{instruction}Apply this update to the code. Lines such as \"... existing code ...\" in it stand for "
              "the code as it is.\nUpdate:\n```\n{update}```")


class AlignedUpdate:
    """What every writer of an apply starts from: the region, the update, their alignment and its
    plan, and whether the merge may be written (``stop``: ``unplaced`` when chunks of the update
    found no place and the request is not ``partial``)."""

    def __init__(self, request: EditRequest,
                 merge: Callable[[Sequence[str], Sequence[str], str], Alignment] = merged_alignment,
                 score: Scorer | None = None):
        """``merge``: what aligns the update with the file (the structure-aware merge; the
        benchmark passes the line rules alone to compare). Where the structure-aware merge leaves
        a choice (engine.apply.choice), ``score`` (a model's) picks the reading, else the rule."""
        assert request.update is not None
        self.request = request
        lines = split_lines(request.text)
        a, b = request.region_bounds()
        self.file, self.update = lines[a:b], split_lines(to_lf(request.update))
        self.decision: Decision | None = None
        chosen = None
        if merge is merged_alignment:
            self.alignment, chosen = survey(self.file, self.update, request.language)
        else:
            self.alignment = merge(self.file, self.update, request.language)
        if chosen is not None:
            choice, found = chosen
            index, self.decision = decide(score, choice, request.instruction, self.file, self.update, found)
            if index is not None:
                self.alignment = found[index].alignment
        self.unplaced = [UnplacedChunk(s + 1, e, "".join(self.update[s:e]),
                                       nearest(self.file, self.update[s:e], request.language))
                         for s, e in self.alignment.unplaced]
        self.steps: list[Step] = plan(self.alignment, self.file, self.update)
        self.stop: StopReason = "unplaced" if self.unplaced and not request.partial else "done"

    def result(self, name: str, merged: str | None, program: Program, stop: StopReason,
               timings: dict[str, float], *, tokens: TokenCounts | None = None, prompt_tokens: int = 0,
               raw_output: str = "", breakdown: dict | None = None, warnings: list[str] | None = None) -> EditResult:
        """The result (engine.decoding.results.edit_result); ``merged`` None: the region as it was
        (nothing written)."""
        notes = list(warnings or [])
        if self.unplaced:
            notes.insert(0, unplaced_message(self.unplaced, merged is not None))
        if self.alignment.whole_file:
            notes.append("the update is the whole new file: it was taken as it is")
        notes.extend(self.alignment.notes)
        if self.decision is not None:
            notes.append(self.decision.note())
            breakdown = {**(breakdown or {}), "choice": self.decision.json()}
        return edit_result(self.request, name, None if merged is None else self.ending(merged), stop, timings,
                           program=program, raw_output=raw_output, tokens=tokens, prompt_tokens=prompt_tokens,
                           breakdown=breakdown, warnings=notes, unplaced=self.unplaced)

    def ending(self, merged: str) -> str:
        """``merged`` ending in a newline exactly when the file does (an empty file: the update)."""
        model = self.file or self.update
        if not model or not merged:
            return merged
        if model[-1].endswith("\n"):
            return merged if merged.endswith("\n") else merged + "\n"
        return merged[:-1] if merged.endswith("\n") else merged


def _scorer(loaded: LoadedModel | None, cancelled: Callable[[], bool]) -> Scorer | None:
    """What decides a choice on ``loaded`` (engine.apply.choice): its scorer in process (stopped by
    ``cancelled`` within one forward); None (the rule) without a model or on a server (no
    sessions to score on)."""
    return model_scorer(loaded, cancelled=cancelled) if loaded is not None and is_local(loaded.runtime) else None


def has_choice(request: EditRequest) -> bool:
    """Whether the merge of the apply ``request`` leaves a choice a model may decide
    (engine.apply.choice; the line rules' is the rule's alone: Choice.model_decides): a front
    door loads a model for ``auto`` only then. Asked of the same request by the door and again by
    the engine's plan: the answer is kept for the last few."""
    assert request.update is not None
    a, b = request.region_bounds()
    return _has_choice(to_lf(request.text), to_lf(request.update), request.language, a, b)


@lru_cache(maxsize=4)
def _has_choice(text: str, update: str, language: str, a: int, b: int) -> bool:
    found = candidates(split_lines(text)[a:b], split_lines(update), language)
    return found is not None and found[0].model_decides


def aligned(name: str, request: EditRequest, cancelled: Callable[[], bool],
            chooser: LoadedModel | None = None) -> Iterator[Event]:
    """Events of the apply ``request`` by the aligner (no model writes it); ``name`` is the model
    the result names; ``chooser``: the model that decides where the rules leave a choice."""
    started = time.perf_counter()
    merge = AlignedUpdate(request, score=_scorer(chooser, cancelled))
    yield EditStarted(mode=request.mode, model=name, input_lines=len(merge.file), prompt_tokens=0)
    yield from _aligned_events(merge, name, cancelled, started)


def _aligned_events(merge: AlignedUpdate, name: str, cancelled: Callable[[], bool], started: float) -> Iterator[Event]:
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
                                    merge.stop, undecoded_timings(seconds), breakdown={"aligner_s": round(seconds, 6)}))


def modeled(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """The model's merge (engine.apply.model), window by window, in process."""
    started = time.perf_counter()
    merge = AlignedUpdate(request, score=_scorer(loaded, cancelled))
    if merge.alignment.whole_file or merge.stop != "done" or not merge.file:
        yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(merge.file), prompt_tokens=0)
        yield from _aligned_events(merge, loaded.name, cancelled, started)
        return
    parts = plan_windows(merge.steps, len(merge.file), request.apply_window_lines)
    jobs = window_jobs(loaded, request, parts, merge.file, merge.update)
    prompt_tokens = sum(len(job.prompt_ids) for job in jobs)
    yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(merge.file), prompt_tokens=prompt_tokens)
    done = Decoded()
    yield from decode_parts(loaded, request, parts, jobs, merge.file, cancelled, started, done)
    seconds = time.perf_counter() - started
    finished = done.stop_reason == "done"
    merged = "".join(done.texts) if finished else None
    if done.stop_reason == "max_tokens":  # unfinished: what was merged, then the file as it was
        merged = "".join(done.texts) + "".join(merge.file[done.consumed:])
    breakdown = {**done.breakdown, "window_lines": sum(job.window.size for job in jobs)}
    yield EditFinished(merge.result(
        loaded.name, merged, Program(joined(done.ops)), done.stop_reason, decode_timings(seconds, done.breakdown),
        tokens=done.tokens, prompt_tokens=prompt_tokens, raw_output="".join(done.raw), breakdown=breakdown,
        warnings=done.warnings))


def rewritten(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """A text mode's apply: the model rewrites the file with the update in its instruction. In
    speculative mode in process, its drafts come from the rules' merge (:func:`merge_draft`): the
    output is still the model's greedy rewrite, byte for byte, and it runs at copy speed wherever the
    model agrees with the merge; the result says so, with the drafts' acceptance."""
    from engine.decoding.run import run_edit

    assert request.update is not None
    instruction = f"{request.instruction.strip()}\n" if request.instruction.strip() else ""
    edit = replace(request, update=None, instruction=TEXT_APPLY.format(instruction=instruction,
                                                                       update=to_lf(request.update)))
    if not (traits(request.mode).drafts_from_input and is_local(loaded.runtime)):
        return run_edit(loaded, edit, cancelled)
    draft = merge_draft(request)
    return _noted(run_edit(loaded, edit, cancelled, draft_source=draft), draft)


def merge_draft(request: EditRequest) -> str:
    """The rules' merge of ``request``'s update into its region, as the draft of the model's rewrite:
    every chunk the rules could place (one they could not is the model's to write)."""
    merge = AlignedUpdate(request)
    return merge.ending("".join(step.text for step in merge.steps))


def _noted(events: Iterator[Event], draft: str) -> Iterator[Event]:
    """``events`` with the result naming who wrote it: the model's rewrite, drafted from the merge."""
    for event in events:
        if isinstance(event, EditFinished) and event.result.stop_reason == "done":
            result = event.result
            drafted, accepted = int(result.breakdown.get("drafted_tokens", 0)), result.tokens.copied
            same = "equals" if result.region_output == draft else "differs from"
            note = (f"the model rewrote the file, drafted from the rules' merge ({accepted} of {drafted} drafted "
                    f"tokens accepted); its rewrite {same} the merge")
            event = EditFinished(replace(result, warnings=[*result.warnings, note]))
        yield event


def refused_on_a_server(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    """The model's merge on a server: refused before anything is written, with the fix."""
    raise EditError(f"{loaded.runtime.describe()} cannot write an apply's program: the model's merge reads the "
                    "logits of each drafted step, which a server does not return; use --mode "
                    f"auto (the {APPLY_AUTO_MODE}'s merge, no model) or a text mode, or an in-process backend "
                    "(transformers or llamacpp)")


ApplyWriter = Callable[[LoadedModel, EditRequest, Callable[[], bool]], Iterator[Event]]


class ApplyForms(NamedTuple):
    """How a mode's model writes an apply in process and on a server."""

    in_process: ApplyWriter
    on_server: ApplyWriter

    def on(self, loaded: LoadedModel) -> ApplyWriter:
        return self.in_process if is_local(loaded.runtime) else self.on_server


# The modes whose model writes an apply (the aligner's merge needs none: :func:`aligned`).
APPLY_WRITERS: dict[str, ApplyForms] = {
    **{mode: ApplyForms(modeled, refused_on_a_server) for mode in modes_where(needs_model=True, writes_text=False,
                                                                              given_program=False)},
    **{mode: ApplyForms(rewritten, rewritten) for mode in modes_where(writes_text=True)},
}


def apply_writer(mode: str, loaded: LoadedModel) -> ApplyWriter:
    """The writer of an apply in ``mode`` (one a model writes) on ``loaded``'s kind of runtime."""
    return APPLY_WRITERS[mode].on(loaded)

