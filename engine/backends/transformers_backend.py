"""The transformers backend: the model runs in-process as a torch module (any device/dtype)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Sequence

import torch

from engine.session import Forward, ForwardLog, Session


class TransformersSession(Session):
    """A transformers ``DynamicCache``; the LM head runs on the requested rows only."""

    def __init__(self, model: Any, device: str):
        from transformers import DynamicCache

        super().__init__()
        self.model, self.device = model, device
        self.cache = DynamicCache(config=model.config)

    @torch.inference_mode()
    def _forward(self, ids: list[int], rows: list[int]) -> torch.Tensor:
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        keep: int | torch.Tensor
        if rows == list(range(len(ids))):
            keep = 0
        elif rows == [len(ids) - 1]:
            keep = 1
        else:
            keep = torch.tensor(rows, dtype=torch.long, device=self.device)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=keep)
        return out.logits[0].float()

    def _truncate(self, length: int) -> None:
        self.cache.crop(length - self.length)  # transformers 5.x: negative = tokens to remove


class TransformersRuntime:
    """A causal LM module plus where it runs."""

    backend = "transformers"

    def __init__(self, model: Any, device: str):
        self.model, self.device = model, device

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def describe(self) -> str:
        return f"transformers on {self.device}"

    def eos_ids(self) -> set[int]:
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(gen_eos, int):
            return {gen_eos}
        return {int(i) for i in gen_eos} if gen_eos else set()

    def session(self) -> TransformersSession:
        return TransformersSession(self.model, self.device)

    @contextlib.contextmanager
    def meter(self) -> Iterator[ForwardLog]:
        """Hooks on the top-level module see every forward, whoever makes it (a session or
        ``generate``). On CUDA the post-hook synchronises, so the time is the forward's."""
        log = ForwardLog()
        state = {"tokens": 0, "start": 0.0}

        def pre(module: Any, args: Any, kwargs: dict) -> None:
            ids = kwargs.get("input_ids")
            if ids is None and args:
                ids = args[0]
            if ids is None:
                ids = kwargs.get("inputs_embeds")
            state["tokens"] = int(ids.shape[1]) if ids is not None else 0
            state["start"] = time.perf_counter()

        def post(module: Any, args: Any, kwargs: dict, output: Any) -> None:
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
            log.records.append(Forward(state["tokens"], time.perf_counter() - state["start"]))

        handles = [self.model.register_forward_pre_hook(pre, with_kwargs=True),
                   self.model.register_forward_hook(post, with_kwargs=True)]
        try:
            yield log
        finally:
            for handle in handles:
                handle.remove()

    @torch.inference_mode()
    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None) -> list[int]:
        """Greedy generation with transformers' own prompt-lookup drafting (``pld`` mode's peer)."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        n_prompt = len(prompt_ids)

        class Finished(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
                return torch.tensor([finished(input_ids[0, n_prompt:].tolist())], device=input_ids.device)

        ids = torch.tensor([list(prompt_ids)], device=self.device)
        result = self.model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens,
            prompt_lookup_num_tokens=10, eos_token_id=sorted(stop_ids), pad_token_id=pad_id,
            stopping_criteria=StoppingCriteriaList([Finished()]),
        )
        return result[0, n_prompt:].tolist()
