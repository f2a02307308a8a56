"""Reading an edit's prompt before the edit is asked for (an editor's idle buffer).

A first AI fix on a long region spends most of its time reading the prompt: the localizer's
forward over the region (engine.decoding.localize), whose KV goes to the prefix cache and whose
per-line surprise is remembered per prompt. :func:`warm_prompt` runs exactly that forward for the
request an AI fix would make now, so the fix, when it comes, finds both and starts where a second
fix on an unchanged buffer does; a text mode's prompt is prefilled the same way. Outputs do not
change: the fix computes the same surprise and reuses bit-identical keys and values. A cancel
stops the read between two prompt chunks (engine.runtime.session); what it read stays reusable.
On a server (vLLM) the edit's first prompt goes ahead as a one-token request, which leaves it in
the server's prefix cache. Decoding the whole answer ahead is engine.read_ahead's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.core.errors import Cancelled
from engine.core.lines import split_lines
from engine.decoding.localize import plan_focus, prompt_with_lines
from engine.decoding.prompt import render, text_messages
from engine.decoding.run import prepared, prompt_parts
from engine.runtime.models import LoadedModel


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up did: ``status`` ``done`` | ``cancelled`` | ``skipped``; ``prompt_tokens``
    (the prompt it would read), ``forwarded`` (tokens it forwarded: 0 when the cache held them),
    ``reason`` (why it was skipped) and ``answered`` (the edit itself was decoded and is kept:
    engine.read_ahead)."""

    status: str
    prompt_tokens: int = 0
    forwarded: int = 0
    reason: str = ""
    answered: bool = False


def first_prompt(loaded: LoadedModel, request: Any) -> tuple[list[int], str]:
    """(ids, "") of the prompt ``request`` (mode resolved) reads first, or ([], why nothing is
    read ahead): program mode with a span selector reads the localizer's prompt; a text mode, its
    own; program mode where no localizer runs (no selector, one line) reads nothing ahead."""
    parts = prompt_parts(request)
    if request.mode == "program":
        if not (request.localize and loaded.selector and len(split_lines(parts.region)) >= 2):
            return [], "no localizer forward to read ahead"
        return prompt_with_lines(loaded.tokenizer, parts)[0], ""
    if request.mode in ("ar", "speculative"):
        return render(loaded.tokenizer, text_messages(parts), assistant_prefix=parts.fence()), ""
    return [], f"{request.mode} mode reads no prompt ahead"


def warm_prompt(loaded: LoadedModel, request: Any, cancelled: Callable[[], bool], max_tokens: int) -> WarmUp:
    """Read the prompt ``request`` (mode resolved) would read first (see :func:`first_prompt`), when
    it has at most ``max_tokens`` tokens. In process: program mode's localizer forward (plan_focus,
    as the edit calls it), a text mode's prefill. On a server (vLLM): the edit's own first prompt
    as a one-token request, which leaves it in the server's prefix cache (program mode plans its
    focus first: the localizer's request, whose surprise is kept here as in process)."""
    ids, reason = first_prompt(loaded, request)
    size = len(ids)
    if not size:
        return WarmUp("skipped", reason=reason)
    if size > max_tokens:
        return WarmUp("skipped", size, reason=f"the prompt has {size} tokens (warmUpMaxTokens {max_tokens})")
    if loaded.remote:
        return _warm_on_server(loaded, request, cancelled, size)
    with loaded.runtime.meter() as log:
        try:
            if request.mode == "program":
                plan_focus(loaded, prompt_parts(request), localize=request.localize, noop=request.noop_deviation,
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


def _warm_on_server(loaded: LoadedModel, request: Any, cancelled: Callable[[], bool], size: int) -> WarmUp:
    """The edit's first prompt sent ahead as a one-token completion (``forwarded``: its tokens)."""
    try:
        if cancelled():
            raise Cancelled("cancelled before the warm-up's requests")
        job, _ = prepared(loaded, request, cancelled)
        for _ids, finish in loaded.runtime.stream_completion(list(job.prompt_ids), 1, cancelled):
            if finish is not None:
                break
    except Cancelled:
        return WarmUp("cancelled", size)
    return WarmUp("cancelled" if cancelled() else "done", size, len(job.prompt_ids))
