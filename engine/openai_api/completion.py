"""One chat completion: the messages through the model's chat template, then the decode.

In-process backends (transformers, llama.cpp) decode with :class:`engine.decoding.greedy.DraftedDecode`,
the loop the text modes use: with a prediction and greedy decoding, an
:class:`engine.decoding.drafter.InputDrafter` over the prediction's tokens proposes drafts and each draft
is verified in one forward, so the text is exactly what the same request without the prediction
returns under ``verify="exact"``; under "argmax" (the server's ``--verify``) a verify accepts the
batched forward's argmax, as other serving engines do, and a near-tie may come out otherwise.
``accepted``/``rejected`` count the prediction tokens the decode kept / verified and threw away. With ``temperature > 0`` the decode samples (seeded) without drafts: the prediction
is not used and both counts are 0.

On the vLLM backend the rendered prompt goes to the server as one streamed completion (the
server decodes; it has no per-request drafting, so the prediction is not used there either).

Stop strings, the token limit and the loop guard are applied here, the same way for every backend;
text is released only when it cannot be the start of a stop string. A request without
``max_tokens`` gets the server's ``chatMaxTokens`` (at most what the context leaves). The loop
guard (:class:`engine.checks.guards.LoopGuard`, the edit decoders' own) ends an output that keeps
repeating a unit the messages do not have: ``finish_reason`` "length" (the run was cut short, as
OpenAI's clients know it) with ``stop_reason`` "loop" and the guard's message in ``stop_detail``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from engine.checks.guards import LoopGuard
from engine.core.errors import Cancelled
from engine.core.tokens import IncrementalDetokenizer, encode
from engine.decoding.drafter import InputDrafter
from engine.decoding.greedy import DraftedDecode, argmax
from engine.decoding.prompt import render
from engine.decoding.tables import ModelTables
from engine.openai_api.errors import ApiError
from engine.runtime.loaded import LoadedModel
from engine.settings import DEFAULTS


@dataclass(frozen=True)
class ChatJob:
    """A validated chat completion, ready to decode (``prediction``: the predicted text or None)."""

    prompt_ids: list[int]
    max_tokens: int
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    prediction: str | None = None
    verify: str = "auto"  # how the prediction's drafts are verified (engine.core.choices.Verify)
    guard_input: str = ""  # what the loop guard compares the output with: the messages and the prediction


def chat_messages(messages: list[Any]) -> list[dict[str, str]]:
    """Messages as the chat template takes them (``developer`` is OpenAI's newer name for ``system``)."""
    from engine.openai_api.schemas import content_text

    return [{"role": "system" if m.role == "developer" else m.role, "content": content_text(m.content)}
            for m in messages]


def build_job(loaded: LoadedModel, messages: list[dict[str, str]], max_tokens: int | None, stop: tuple[str, ...],
              temperature: float, top_p: float, seed: int | None, prediction: str | None,
              verify: str = "auto", default_max_tokens: int = DEFAULTS.http.chat_max_tokens) -> ChatJob:
    """Render the prompt and check it against the context (400 ``context_length_exceeded``); no
    ``max_tokens``: ``default_max_tokens``, cut to what the context leaves."""
    prompt_ids = render(loaded.tokenizer, messages)
    limit = loaded.runtime.context_limit()
    if limit is not None:
        wanted = len(prompt_ids) + (max_tokens or 1)
        if wanted > limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                                f"{wanted} tokens ({len(prompt_ids)} in the messages, {max_tokens or 1} in the "
                                "completion). Please reduce the length of the messages or completion.",
                           "context_length_exceeded", "messages")
    if max_tokens is None:
        max_tokens = default_max_tokens if limit is None else min(default_max_tokens, limit - len(prompt_ids))
    guard_input = "\n".join([*(m["content"] for m in messages), prediction or ""])
    return ChatJob(prompt_ids, max_tokens, stop, temperature, top_p, seed if seed is not None else 0, prediction,
                   verify, guard_input)


class Sampler:
    """Seeded sampling at ``temperature`` with nucleus ``top_p`` (the choice for temperature > 0)."""

    def __init__(self, temperature: float, top_p: float, seed: int):
        self.temperature, self.top_p = temperature, top_p
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, logits: torch.Tensor) -> int:
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < self.top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        return int(torch.multinomial(probs, 1, generator=self.generator))


class ChatDecode:
    """Decode one :class:`ChatJob`. Iterate :meth:`deltas` for the text; afterwards
    ``finish_reason`` ("stop", "length" or "cancelled"), ``completion_tokens``, ``accepted``,
    ``rejected`` and ``seconds`` (prefill + decode) describe the run; ``stop_reason`` is "loop"
    (and ``stop_detail`` the loop guard's message) when the guard ended it, else None."""

    def __init__(self, loaded: LoadedModel, tables: ModelTables, job: ChatJob, cancelled: Callable[[], bool]):
        self.loaded, self.tables, self.job, self.cancelled = loaded, tables, job, cancelled
        self.finish_reason = "stop"
        self.completion_tokens = self.accepted = self.rejected = 0
        self.seconds = 0.0
        self.text = ""
        self.stop_reason: str | None = None
        self.stop_detail = ""
        self._decode: DraftedDecode | None = None

    def deltas(self) -> Iterator[str]:
        """Text deltas, in order; their concatenation is the completion's text."""
        start = time.perf_counter()
        stops = self.job.stop
        hold = max((len(s) for s in stops), default=1) - 1
        detok = IncrementalDetokenizer(self.loaded.tokenizer)
        guard = LoopGuard(self.job.guard_input)
        sent = 0
        source = self._local_tokens() if self.loaded.runtime.gives_logits else self._remote_tokens()
        try:
            for tokens in source:
                self.completion_tokens += len(tokens)
                detok.push(tokens)
                text = detok.text
                cut = min((i for i in (text.find(s, max(0, sent - hold)) for s in stops) if i >= 0), default=-1)
                if cut >= 0:
                    self.text = text[:cut]
                    if cut > sent:
                        yield text[sent:cut]
                    self.finish_reason = "stop"
                    return
                loop = guard.check_when_due(text)
                if loop is not None:
                    self.finish_reason, self.stop_reason, self.stop_detail = "length", "loop", loop
                    break
                safe = len(text) - hold
                if safe > sent:
                    yield text[sent:safe]
                    sent = safe
            self.text = detok.text
            if len(self.text) > sent:
                yield self.text[sent:]
        finally:
            source.close()
            self.seconds = time.perf_counter() - start
            if self._decode is not None:
                self.accepted, self.rejected = self._decode.accepted, self._decode.rejected

    def _local_tokens(self) -> Iterator[list[int]]:
        job = self.job
        greedy = job.temperature <= 0
        pick = argmax if greedy else Sampler(job.temperature, job.top_p, job.seed)
        session = self.loaded.session()
        session.cancelled = self.cancelled  # a client that goes away stops the prefill between chunks
        try:
            drafter = (InputDrafter(encode(self.loaded.tokenizer, job.prediction), cost=session.cost)
                       if job.prediction and greedy else None)
            self._decode = DraftedDecode(session, job.prompt_ids, self.tables.stop_ids, job.max_tokens, drafter,
                                         pick, self.cancelled, verify=job.verify)
            for chunk in self._decode.chunks():
                yield chunk.tokens
            self.finish_reason = {"max_tokens": "length", "cancelled": "cancelled"}.get(
                self._decode.stop_reason or "done", "stop")
        except Cancelled:
            self.finish_reason = "cancelled"
        finally:
            session.close()

    def _remote_tokens(self) -> Iterator[list[int]]:
        job = self.job
        sampling: dict[str, Any] = {}
        if job.temperature > 0:
            sampling = {"temperature": job.temperature, "top_p": job.top_p, "seed": job.seed}
        for ids, finish in self.loaded.runtime.stream_completion(job.prompt_ids, job.max_tokens, self.cancelled,
                                                                  **sampling):
            kept = [t for t in ids if t not in self.tables.stop_ids]
            if kept:
                yield kept
            if finish:
                self.finish_reason = "length" if finish == "length" else "stop"
        if self.cancelled():
            self.finish_reason = "cancelled"
