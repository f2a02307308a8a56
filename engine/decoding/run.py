"""One edit from request to events: split out the region, build the prompt, run the mode's
decoder, and wrap its outcome into an :class:`EditResult`. The only place that knows all modes."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Iterator

from engine.core.errors import EditError
from engine.core.lines import split_lines
from engine.core.tokens import encode, token_pieces
from engine.decoding.events import EditFinished, EditResult, EditStarted, Event, OpResolved
from engine.decoding.localize import plan_focus
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_decoder import FeedRecorder, check_program, decode_program
from engine.decoding.prompt import (
    PromptParts,
    focus_free_prefix,
    program_messages,
    render,
    selector_messages,
    text_messages,
)
from engine.decoding.remote_decode import RemoteProgramDecoder, decode_text_remote
from engine.decoding.tables import tables_for
from engine.decoding.text_decoder import decode_text
from engine.language.program import CopyTokens
from engine.runtime.models import LoadedModel
from engine.runtime.selector.adapter import prompt_layout


def run_edit(loaded: LoadedModel, request, cancelled: Callable[[], bool],
             recorder: FeedRecorder | None = None) -> Iterator[Event]:
    """Events of one edit (``request`` is an :class:`engine.api.EditRequest`, already validated).
    ``recorder`` (program and forced modes) sees every token fed to the model (training data)."""
    started = time.perf_counter()
    lines = split_lines(request.text)
    a, b = request.region_bounds()
    ctx = max(0, request.context_lines)
    region = "".join(lines[a:b])
    focus = request.focus_line - a if request.focus_line is not None else None
    parts = PromptParts(instruction=request.instruction, region=region,
                        before="".join(lines[max(0, a - ctx):a]), after="".join(lines[b:b + ctx]), first_line=a + 1,
                        language=request.language, focus_line=focus)
    tables = tables_for(loaded)
    if request.mode in ("program", "forced") and not loaded.remote and not request.token_copies:
        tables.grammar.prefetch(len(split_lines(region)))  # compiles while the forwards below run
    plan = None
    if request.mode == "program":  # where the problem is: the user's focus, or the localizer's (engine/decoding/localize.py)
        plan = plan_focus(loaded, parts, localize=request.localize, noop=request.noop_deviation,
                          policy=request.focus_policy, cancelled=cancelled)
        parts = replace(parts, focus_line=plan.hint)
    if loaded.remote and (request.mode == "forced" or request.token_copies):
        raise EditError(f"{loaded.runtime.describe()} runs program, speculative, ar and pld edits; forced mode "
                        "and token copies need an in-process backend (transformers or llamacpp)")
    token_copies = request.token_copies
    if request.mode == "forced":
        token_copies = token_copies or any(isinstance(op, CopyTokens) for op in request.program.ops)
        pieces = token_pieces(loaded.tokenizer, encode(loaded.tokenizer, region)) if token_copies else None
        check_program(request.program, region, pieces)
    if request.mode in ("program", "forced"):
        style = request.program_prompt
        if style == "auto":
            style = "selector" if loaded.selector else "few-shot"
        marks: list[int] = []
        if style == "selector":
            layout = prompt_layout(loaded.selector)
            messages = selector_messages(parts, layout)
            # where the localizer's forward, or a later edit's prompt, goes on differently (forced
            # mode, a benchmark, keeps one prefill forward: bench edits counts the forwards after it)
            if request.mode == "program" and not loaded.remote:
                marks.append(focus_free_prefix(loaded.tokenizer, parts, layout))
        else:
            messages = program_messages(parts)
        prompt_ids = render(loaded.tokenizer, messages)
    else:
        prompt_ids = render(loaded.tokenizer, text_messages(parts), assistant_prefix=parts.fence())
    yield EditStarted(mode=request.mode, model=loaded.name, input_lines=len(split_lines(region)),
                      prompt_tokens=len(prompt_ids))
    if loaded.remote:
        sampling = {"temperature": request.temperature, "seed": request.seed} if request.temperature > 0 else {}
        if request.mode == "program":
            decoder = RemoteProgramDecoder(loaded, tables, region, prompt_ids, request.max_new_tokens, cancelled,
                                           monotonic=request.monotonic, sampling=sampling).run()
        else:
            decoder = decode_text_remote(loaded, tables, region, prompt_ids, request.max_new_tokens, cancelled,
                                         sampling=sampling)
    elif request.mode in ("program", "forced"):
        decoder = decode_program(loaded, tables, region, prompt_ids, request.max_new_tokens, cancelled,
                                 token_copies=token_copies,
                                 teacher_program=request.program if request.mode == "forced" else None,
                                 temperature=request.temperature, seed=request.seed,
                                 logit_bias=request.logit_bias, draft=request.draft, recorder=recorder,
                                 monotonic=request.monotonic and request.mode != "forced",
                                 focus_line=plan.noop_line if plan is not None else None, prompt_marks=marks)
    else:
        decoder = decode_text(loaded, tables, region, prompt_ids, request.max_new_tokens, cancelled, request.mode,
                              request.verify)
    outcome: DecodeOutcome | None = None
    for item in decoder:
        if isinstance(item, OpResolved):
            yield item
        else:
            outcome = item
    assert outcome is not None
    before, after = "".join(lines[:a]), "".join(lines[b:])
    # A cancelled edit, or one stopped as a degenerate loop, leaves the document as it was.
    restored = outcome.stop_reason in ("cancelled", "loop")
    output = request.text if restored else before + outcome.region_output + after
    total = time.perf_counter() - started
    if plan is not None and plan.seconds:  # the localizer's forward is part of the edit's cost
        outcome.breakdown["localize_s"] = round(plan.seconds, 6)
    result = EditResult(
        mode=request.mode, model=loaded.name, input_text=request.text, output_text=output,
        region=(a + 1, b) if request.lines else None, region_input=region,
        region_output=region if restored else outcome.region_output,
        program=outcome.program, raw_output=outcome.raw_output, tokens=outcome.tokens,
        prompt_tokens=len(prompt_ids), stop_reason=outcome.stop_reason,
        timings={"total_s": round(total, 6),
                 "decode_s": round(sum(v for k, v in outcome.breakdown.items() if k.endswith("_s") and k != "prefill_s"), 6),
                 "prefill_s": outcome.breakdown.get("prefill_s", 0.0)},
        breakdown=outcome.breakdown, warnings=outcome.warnings,
    )
    yield EditFinished(result)
