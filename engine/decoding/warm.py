"""Reading an edit's prompt before the edit is asked for (an editor's idle buffer).

A first AI fix on a long region spends most of its time reading the prompt: the localizer's
forward over the region (engine.decoding.localize), whose KV goes to the prefix cache and whose
per-line surprise is remembered per prompt. :func:`warm_prompt` runs exactly that forward for the
request an AI fix would make now, so the fix, when it comes, finds both and starts where a second
fix on an unchanged buffer does; a text mode's prompt is prefilled the same way. Outputs do not
change: the fix computes the same surprise and reuses bit-identical keys and values. A cancel
stops the read between two prompt chunks (engine.runtime.session); what it read stays reusable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.core.errors import Cancelled
from engine.core.lines import split_lines
from engine.decoding.localize import plan_focus, prompt_with_lines
from engine.decoding.prompt import PromptParts, render, text_messages
from engine.runtime.models import LoadedModel


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up did: ``status`` ``done`` | ``cancelled`` | ``skipped``; ``prompt_tokens``
    (the prompt it would read), ``forwarded`` (tokens it forwarded: 0 when the cache held them)
    and ``reason`` (why it was skipped)."""

    status: str
    prompt_tokens: int = 0
    forwarded: int = 0
    reason: str = ""


def request_parts(request: Any) -> PromptParts:
    """The prompt's parts for ``request`` (an engine.api.EditRequest), as engine.decoding.run builds them."""
    lines = split_lines(request.text)
    a, b = request.region_bounds()
    ctx = max(0, request.context_lines)
    focus = request.focus_line - a if request.focus_line is not None else None
    return PromptParts(instruction=request.instruction, region="".join(lines[a:b]),
                       before="".join(lines[max(0, a - ctx):a]), after="".join(lines[b:b + ctx]), first_line=a + 1,
                       language=request.language, focus_line=focus)


def warm_prompt(loaded: LoadedModel, request: Any, cancelled: Callable[[], bool], max_tokens: int) -> WarmUp:
    """Read the prompt ``request`` (mode already resolved) would read first: program mode with a
    span selector, the localizer's forward (plan_focus, as the edit calls it); a text mode, its
    prompt's prefill. Skipped on a remote backend, for a prompt over ``max_tokens`` tokens, and in
    program mode where no localizer runs (no selector, one line)."""
    if loaded.remote:
        return WarmUp("skipped", reason="a remote server keeps its own prefix cache")
    parts = request_parts(request)
    if request.mode == "program":
        if not (request.localize and loaded.selector and len(split_lines(parts.region)) >= 2):
            return WarmUp("skipped", reason="no localizer forward to read ahead")
        size = len(prompt_with_lines(loaded.tokenizer, parts)[0])
    elif request.mode in ("ar", "speculative"):
        ids = render(loaded.tokenizer, text_messages(parts), assistant_prefix=parts.fence())
        size = len(ids)
    else:
        return WarmUp("skipped", reason=f"{request.mode} mode reads no prompt ahead")
    if size > max_tokens:
        return WarmUp("skipped", size, reason=f"the prompt has {size} tokens (warmUpMaxTokens {max_tokens})")
    with loaded.runtime.meter() as log:
        try:
            if request.mode == "program":
                plan_focus(loaded, parts, localize=request.localize, noop=request.noop_deviation,
                           policy=request.focus_policy, cancelled=cancelled)
            else:
                session = loaded.session()
                session.cancelled = cancelled
                try:
                    session.append(ids, "prefill")
                finally:
                    session.close()
        except Cancelled:
            return WarmUp("cancelled", size, sum(log.sizes()))
    return WarmUp("done", size, sum(log.sizes()))
