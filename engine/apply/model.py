"""The model's part of an apply: per window (engine.apply.windows), a program over the window's
lines and the update's (engine.apply.prompt), decoded by the program decoder under the apply's
range rule (engine.language.apply_ranges) with the aligner's program as the draft
(engine.apply.drafts). The model verifies each drafted step in one forward and its own choice
wins where it differs, so the aligner proposes and the model decides; file lines outside the
windows are copied without being read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, cast

from engine.apply.drafts import AlignedDrafter
from engine.apply.markers import is_marker
from engine.apply.prompt import apply_messages, virtual_input
from engine.apply.windows import Outside, Part, Window
from engine.core.errors import EditError
from engine.core.tokens import encode
from engine.decoding.events import OpResolved, StopReason, TokenCounts
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_decoder import ProgramDecoder
from engine.decoding.prompt import render
from engine.decoding.request import EditRequest
from engine.decoding.tables import tables_for
from engine.language.apply_ranges import ApplyRanges
from engine.language.program import CopyLines, Op
from engine.runtime.loaded import LoadedModel

DEFAULT_CONTEXT = 8192  # the context assumed when the runtime does not say its own
PROGRAM_ROOM = 1024  # tokens of a window's context kept for the program the model writes


@dataclass
class WindowJob:
    """One window ready to decode: its part, its prompt, its virtual input."""

    window: Window
    prompt_ids: list[int]
    virtual: str
    markers: list[int]


def context_budget(loaded: LoadedModel) -> int:
    """How many prompt tokens one window may take on this model."""
    limit = loaded.runtime.context_limit() or DEFAULT_CONTEXT
    return max(0, limit - PROGRAM_ROOM)


def window_jobs(loaded: LoadedModel, request: EditRequest, parts: list[Part], file: list[str],
                update: list[str]) -> list[WindowJob]:
    """Each window's prompt: its file lines and the whole update, or, when that does not fit, the
    part of the update the window copies (with ``apply_window_lines`` lines around it); an
    :class:`EditError` (before anything is written) when even that does not fit."""
    budget = context_budget(loaded)
    jobs = []
    for part in parts:
        if not isinstance(part, Window):
            continue
        job = _window_job(loaded, request, part, file, update)
        if len(job.prompt_ids) > budget:
            start, end = part.update_span(len(update), request.apply_window_lines)
            job = _window_job(loaded, request, replace(part, update_offset=start), file, update[start:end])
        if len(job.prompt_ids) > budget:
            raise EditError(f"the apply needs the model to read {len(job.prompt_ids)} tokens at once (file lines "
                            f"{part.first}-{part.last} and the update), more than its budget of {budget}: lower "
                            "applyWindowLines, or apply a smaller update")
        jobs.append(job)
    return jobs


def _window_job(loaded: LoadedModel, request: EditRequest, window: Window, file: list[str],
                shown: list[str]) -> WindowJob:
    """``window``'s prompt showing the update lines ``shown``."""
    lines = file[window.first - 1:window.last]
    virtual = virtual_input(lines, shown)
    ids = render(loaded.tokenizer, apply_messages(request.instruction, len(lines), len(shown), virtual))
    markers = [len(lines) + j + 1 for j, line in enumerate(shown) if is_marker(line)]
    return WindowJob(window, ids, virtual, markers)


@dataclass
class Decoded:
    """What the windows' decodes added up to."""

    ops: list[Op] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tokens: TokenCounts = field(default_factory=TokenCounts)
    stop_reason: StopReason = "done"
    breakdown: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    consumed: int = 0  # file lines the merge has moved past

    def add(self, counts: TokenCounts) -> None:
        self.tokens = plus(self.tokens, counts)


def plus(a: TokenCounts, b: TokenCounts) -> TokenCounts:
    return TokenCounts(a.generated + b.generated, a.copied + b.copied, a.forced + b.forced)


def decode_parts(loaded: LoadedModel, request: EditRequest, parts: list[Part], jobs: list[WindowJob],
                 file: list[str], cancelled: Callable[[], bool], started: float,
                 done: Decoded) -> Iterator[OpResolved]:
    """The merged file's ops as they resolve: outside copies at once, each window's as its model
    decode writes them. ``done`` collects the totals; a window that stops early stops the merge. In
    process only: the drafter prices its drafts with the runtime's cost model, and the decoder
    reads each drafted step's logits (engine.apply.job refuses the model's merge on a server)."""
    tables = tables_for(loaded)
    by_window = {(job.window.first, job.window.last): job for job in jobs}
    for part in parts:
        if isinstance(part, Outside):
            yield from _emit(done, part.copy, "".join(file[part.copy.start - 1:part.copy.end]), done.tokens,
                             started)
            continue
        job = by_window[(part.first, part.last)]
        part = job.window  # as its prompt shows the update
        n_window = part.size
        n_update = len(job.virtual.splitlines(keepends=True)) - n_window
        ranges = ApplyRanges(tables.vocab_texts, n_window, n_update, job.markers)
        line_ids = [encode(loaded.tokenizer, line) for line in job.virtual.splitlines(keepends=True)]
        drafter = AlignedDrafter(part.draft(), n_window, line_ids, cost=loaded.runtime.cost)
        decoder = ProgramDecoder(loaded, tables, job.virtual, job.prompt_ids, request.max_new_tokens, cancelled,
                                 draft=request.draft, ranges=ranges, drafter=drafter)
        outcome, before = None, done.tokens
        for item in decoder.run():
            if isinstance(item, OpResolved):
                yield from _emit(done, part.from_virtual(item.op), item.text, plus(before, item.tokens), started)
            else:
                outcome = item
        assert outcome is not None
        _account(done, outcome)
        if outcome.stop_reason != "done":
            done.stop_reason = cast(StopReason, outcome.stop_reason)
            return


def _emit(done: Decoded, op: Op, text: str, tokens: TokenCounts, started: float) -> Iterator[OpResolved]:
    done.ops.append(op)
    done.texts.append(text)
    if isinstance(op, CopyLines):
        done.consumed = max(done.consumed, op.end)
    yield OpResolved(index=len(done.ops) - 1, op=op, text=text, resolved="".join(done.texts),
                     input_lines_consumed=done.consumed, tokens=tokens,
                     elapsed_s=round(time.perf_counter() - started, 6))


def _account(done: Decoded, outcome: DecodeOutcome) -> None:
    done.add(outcome.tokens)
    done.raw.append(outcome.raw_output)
    done.warnings.extend(outcome.warnings)
    for key, value in outcome.breakdown.items():
        if isinstance(value, (int, float)):
            done.breakdown[key] = round(done.breakdown.get(key, 0) + value, 6)
    done.breakdown["windows"] = done.breakdown.get("windows", 0) + 1
