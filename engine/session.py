"""The session every decoder talks to: append tokens with one forward, crop, and keep time.

Every model call in the engine goes through :meth:`Session.append`, whichever backend runs it
(see :mod:`engine.backends`), so the breakdown of where time goes (prefill, one-token decode
steps, multi-token appends: splices, forced literals, speculative verification) is measured in one
place, and a :class:`ForwardLog` counts forwards the same way for every backend.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch


@dataclass
class Forward:
    tokens: int
    seconds: float


@dataclass
class ForwardLog:
    """Every forward a runtime ran while the log was open (see ``Runtime.meter``)."""

    records: list[Forward] = field(default_factory=list)

    def sizes(self, skip: int = 0) -> list[int]:
        return [f.tokens for f in self.records[skip:]]

    def seconds(self, skip: int = 0) -> float:
        return sum(f.seconds for f in self.records[skip:])


class Session:
    """A growing KV cache over one model. Positions follow the cache length, so an N-token append
    lands at the right positions whatever happened before (decode steps, splices, crops).

    Backends implement :meth:`_forward` (append ids, return the logits asked for) and
    :meth:`_truncate` (drop cache entries past a length); this class keeps length and time."""

    def __init__(self) -> None:
        self.length = 0
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def append(self, ids: Sequence[int], kind: str, all_logits: bool = False,
               rows: Sequence[int] | None = None) -> torch.Tensor:
        """Append ``ids`` in ONE forward. Returns float32 logits of the last position (shape V), of
        every appended position (N x V) with ``all_logits``, or of the appended positions ``rows``
        (len(rows) x V; the LM head runs on those rows only where the backend allows).
        ``kind`` labels the time spent."""
        if not ids:
            raise ValueError("append needs at least one token")
        start = time.perf_counter()
        wanted = list(range(len(ids))) if all_logits else (list(rows) if rows is not None else [len(ids) - 1])
        logits = self._forward(list(ids), wanted)
        self.length += len(ids)
        self.seconds[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        return logits if all_logits or rows is not None else logits[-1]

    def crop(self, length: int) -> None:
        """Forget everything after the first ``length`` tokens (rejected draft tokens)."""
        if length < self.length:
            self._truncate(length)
            self.length = length

    def close(self) -> None:
        """Give back what the session holds (a llama.cpp context); a closed session is not used again."""

    def breakdown(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"{k}_s": round(v, 6) for k, v in self.seconds.items()}
        out.update({f"{k}_calls": v for k, v in self.calls.items()})
        return out

    def _forward(self, ids: list[int], rows: list[int]) -> torch.Tensor:
        raise NotImplementedError

    def _truncate(self, length: int) -> None:
        raise NotImplementedError
