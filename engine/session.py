"""A KV-cache session over one model: append tokens with one forward, crop, and keep time.

Every model call in the engine goes through :meth:`KVSession.append`, so the breakdown of where
time goes (prefill, one-token decode steps, multi-token appends: splices, forced literals,
speculative verification) is measured in one place.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Sequence

import torch

from engine.models import LoadedModel


class KVSession:
    """Model + growing cache. Positions follow the cache length, so an N-token append lands at
    the right positions whatever happened before (decode steps, splices, crops)."""

    def __init__(self, loaded: LoadedModel):
        from transformers import DynamicCache

        self.loaded = loaded
        self.model = loaded.model
        self.cache = DynamicCache(config=self.model.config)
        self.length = 0
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    @torch.inference_mode()
    def append(self, ids: Sequence[int], kind: str, all_logits: bool = False,
               rows: Sequence[int] | None = None) -> torch.Tensor:
        """Append ``ids`` in ONE forward. Returns float32 logits of the last position (shape V), of
        every appended position (N x V) with ``all_logits``, or of the appended positions ``rows``
        (len(rows) x V; the LM head runs on those rows only). ``kind`` labels the time spent."""
        if not ids:
            raise ValueError("append needs at least one token")
        start = time.perf_counter()
        input_ids = torch.tensor([list(ids)], dtype=torch.long, device=self.loaded.device)
        keep: int | torch.Tensor = 0 if all_logits else 1
        if rows is not None:
            keep = torch.tensor(list(rows), dtype=torch.long, device=self.loaded.device)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=keep)
        logits = out.logits[0].float()
        self.length += len(ids)
        self.seconds[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        return logits if all_logits or rows is not None else logits[-1]

    def crop(self, length: int) -> None:
        """Forget everything after the first ``length`` tokens (rejected draft tokens)."""
        if length < self.length:
            self.cache.crop(length - self.length)  # transformers 5.x: negative = tokens to remove
            self.length = length

    def breakdown(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"{k}_s": round(v, 6) for k, v in self.seconds.items()}
        out.update({f"{k}_calls": v for k, v in self.calls.items()})
        return out
