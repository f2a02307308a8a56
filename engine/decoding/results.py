"""The one builder of :class:`EditResult`: every writer (a decode, the aligner's merge, the
model's merge, an empty region, a cancel) gives the region's new text and its figures, and
:func:`edit_result` puts the document, the region and the request's mode around them, so a
result's fields mean the same whoever wrote it."""

from __future__ import annotations

from typing import Mapping

from engine.core.lines import split_lines
from engine.decoding.events import EditResult, FocusLines, StopReason, TokenCounts, UnplacedChunk
from engine.decoding.request import EditRequest
from engine.language.program import Program

EMPTY_REGION = "the region is empty: nothing to edit (the model was not run)"


def decode_timings(seconds: float, breakdown: Mapping[str, float]) -> dict[str, float]:
    """An edit's timings from its phases: ``decode_s`` is every phase's seconds in ``breakdown``
    (a ``*_s`` key) but the prompt's prefill, which is ``prefill_s``; ``total_s`` the whole edit."""
    return {"total_s": round(seconds, 6),
            "decode_s": round(sum(v for k, v in breakdown.items() if k.endswith("_s") and k != "prefill_s"), 6),
            "prefill_s": breakdown.get("prefill_s", 0.0)}


def undecoded_timings(seconds: float) -> dict[str, float]:
    """The timings of an edit no model decoded (the aligner's merge, an empty region)."""
    return {"total_s": round(seconds, 6), "decode_s": 0.0, "prefill_s": 0.0}


def edit_result(request: EditRequest, model: str, region_output: str | None, stop_reason: StopReason,
                timings: dict[str, float], *, program: Program | None = None, raw_output: str = "",
                tokens: TokenCounts | None = None, prompt_tokens: int = 0, breakdown: dict | None = None,
                warnings: list[str] | None = None, unplaced: list[UnplacedChunk] | None = None,
                focus: FocusLines | None = None) -> EditResult:
    """The result of ``request`` (validated, its mode concrete) written by ``model``:
    ``region_output`` replaces the request's region (None: the document as it was, nothing written)."""
    lines = split_lines(request.text)
    a, b = request.region_bounds()
    region_input = "".join(lines[a:b])
    output = request.text if region_output is None else "".join(lines[:a]) + region_output + "".join(lines[b:])
    return EditResult(
        mode=request.mode, model=model, input_text=request.text, output_text=output,
        region=(a + 1, b) if request.lines else None, region_input=region_input,
        region_output=region_input if region_output is None else region_output,
        program=program if program is not None else Program(), raw_output=raw_output,
        tokens=tokens if tokens is not None else TokenCounts(), prompt_tokens=prompt_tokens,
        stop_reason=stop_reason, timings=timings, breakdown=breakdown if breakdown is not None else {},
        warnings=warnings if warnings is not None else [], unplaced=unplaced if unplaced is not None else [],
        focus=focus if focus is not None else FocusLines())


def empty_result(request: EditRequest, model: str) -> EditResult:
    """The answer to a request whose region is empty (:meth:`EditRequest.is_empty`): the document
    unchanged, an empty program, no tokens. Front doors give it without loading a model."""
    return edit_result(request, model, None, "done", undecoded_timings(0.0), warnings=[EMPTY_REGION])


def cancelled_result(request: EditRequest, model: str, prompt_tokens: int, seconds: float) -> EditResult:
    """The result of an edit cancelled before its decode wrote anything: the input, unchanged."""
    return edit_result(request, model, None, "cancelled", {"total_s": round(seconds, 6)},
                       prompt_tokens=prompt_tokens)
