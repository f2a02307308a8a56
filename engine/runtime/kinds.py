"""What every runtime of one kind does alike (engine.runtime.protocol): the in-process backends
(transformers, llama.cpp) share :class:`InProcessRuntime`, servers :class:`ServerRuntime`."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from engine.core.choices import Verify
from engine.core.errors import Cancelled
from engine.runtime.prefix_cache import PrefixStore
from engine.runtime.probe import Probe, probe
from engine.runtime.session import ForwardLog, Session


class InProcessRuntime:
    """Shares this machine's device, so edits queue for it; keeps recent prompts' KV (``prefixes``)."""

    gives_logits = True
    concurrent = False
    read_ahead_answers = True
    prefixes: PrefixStore[Any]

    def session(self) -> Session:
        raise NotImplementedError

    @property
    def keeps_prompts(self) -> bool:
        return self.prefixes.enabled

    def forget_prompts(self) -> None:
        self.prefixes.clear()

    def prime(self) -> None:
        """A few small forwards of each kind a decoder runs (a prompt, steps, an all-rows append)."""
        session = self.session()
        session.append(list(range(10, 42)), "warmup")
        for token in range(3):
            session.append([100 + token], "warmup")
        session.append(list(range(200, 216)), "warmup", all_logits=True)
        session.close()

    def verify_room(self, verify: Verify, most: int) -> tuple[str, int] | None:
        """Asked of a session (which takes no context until its first append)."""
        session = self.session()
        try:
            return session.verify_rule(verify), session.draft_room(most, verify)
        finally:
            session.close()

    def probe(self) -> Probe | None:
        return probe(self.session)

    def prompt_nll(self, ids: list[int], positions: Sequence[int], marks: Sequence[int],
                   cancelled: Callable[[], bool]) -> tuple[dict[int, float], int]:
        """One prefill of ``ids`` with the LM head on the rows before ``positions`` and on the last
        row: kept with the prompt's cache, the same prompt's own prefill then forwards nothing.
        ``cancelled`` is polled between its chunks; the chunks read stay in the prompt cache."""
        session = self.session()
        session.cancelled = cancelled
        try:
            logits = session.append(ids, "prefill", rows=[p - 1 for p in positions] + [len(ids) - 1],
                                    marks=list(marks))[:-1]
            forwards = session.prefill_forwards
        finally:
            session.close()
        import torch

        logp = torch.log_softmax(logits.float(), dim=-1)
        targets = torch.tensor([ids[p] for p in positions])
        values = -logp[torch.arange(len(positions)), targets]
        return dict(zip(positions, values.tolist())), forwards


class ServerRuntime:
    """A shared server: it batches concurrent requests, warms itself up and keeps its own prompt
    cache; its forwards run out of sight. Subclasses give ``prompt_logprobs``."""

    gives_logits = False
    concurrent = True
    read_ahead_answers = False
    keeps_prompts = True  # the server's own prompt cache: a warm-up's request spares the edit one

    def prompt_logprobs(self, prompt_ids: list[int]) -> list[float | None]:
        raise NotImplementedError

    def forget_prompts(self) -> None:
        pass  # the server's prompt cache is the server's (benchmarks measure it as it is)

    def prime(self) -> None:
        pass  # a server warms itself up

    def verify_room(self, verify: Verify, most: int) -> tuple[str, int] | None:
        return None  # the server checks the drafts

    def probe(self) -> Probe | None:
        return None

    def close(self) -> None:
        pass  # nothing held here: the server keeps the model

    @contextlib.contextmanager
    def meter(self) -> Iterator[ForwardLog]:
        yield ForwardLog()  # forwards run on the server: the benchmarks time requests instead

    def prompt_nll(self, ids: list[int], positions: Sequence[int], marks: Sequence[int],
                   cancelled: Callable[[], bool]) -> tuple[dict[int, float], int]:
        """One request for the prompt tokens' log-probabilities (``marks``: an in-process concern)."""
        if cancelled():
            raise Cancelled("cancelled before the prompt log-probabilities' request")
        logprobs = self.prompt_logprobs(ids)
        nll = {}
        for p in positions:
            value = logprobs[p]
            assert value is not None  # only the first token has none, and it is never scored
            nll[p] = -float(value)
        return nll, 1
