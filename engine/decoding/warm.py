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
from typing import Callable

from engine.decoding.run import prompt_parts
from engine.decoding.strategies import STRATEGIES
from engine.runtime.loaded import LoadedModel
from engine.decoding.request import EditRequest


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


def first_prompt(loaded: LoadedModel, request: EditRequest) -> tuple[list[int], str]:
    """(ids, "") of the prompt ``request`` (mode resolved) reads first, or ([], why nothing is
    read ahead), as the mode's strategy on this runtime says (engine.decoding.strategies): program
    mode with a span selector reads the localizer's prompt; ar and speculative, their own."""
    return STRATEGIES[request.mode].on(loaded).first_prompt(loaded, request, prompt_parts(request))


def warm_prompt(loaded: LoadedModel, request: EditRequest, cancelled: Callable[[], bool], max_tokens: int) -> WarmUp:
    """Read the prompt ``request`` (mode resolved) would read first (see :func:`first_prompt`), when
    it has at most ``max_tokens`` tokens. In process: program mode's localizer forward (plan_focus,
    as the edit calls it), a text mode's prefill. On a server (vLLM): the edit's own first prompt
    as a one-token request, which leaves it in the server's prefix cache."""
    strategy = STRATEGIES[request.mode].on(loaded)
    parts = prompt_parts(request)
    ids, reason = strategy.first_prompt(loaded, request, parts)
    size = len(ids)
    if not size:
        return WarmUp("skipped", reason=reason)
    if size > max_tokens:
        return WarmUp("skipped", size, reason=f"the prompt has {size} tokens (warmUpMaxTokens {max_tokens})")
    warmed = strategy.warm(loaded, request, parts, ids, cancelled)
    return WarmUp("cancelled" if warmed.cancelled else "done", size, warmed.forwarded)
