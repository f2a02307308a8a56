"""A short timing of a runtime's forwards, for ``copy-as-decode doctor``: ``s(N)``, what an
N-token forward (every row's logits, as a verify needs) costs in one-token steps. Copying and
drafting pay off as far as ``N / s(N)`` exceeds 1: it bounds the speed-up of a decode whose N
tokens all come from one forward (the cost model learns the same ratios from real edits,
engine.runtime.cost). An estimate: a few forwards on a machine others may be using."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # it imports torch
    from engine.runtime.session import Session

PROBE_SIZES = (4, 8, 32)
PROBE_BUDGET_S = 2.0  # no round starts after this
PROBE_ROUNDS = 3  # rounds at most; each size keeps its fastest


@dataclass(frozen=True)
class Probe:
    """A one-token step's seconds and ``s(N)`` for each probed size."""

    step_s: float
    ratios: dict[int, float]
    seconds: float  # the probe's own time

    def speedup(self, n: int) -> float:
        """Tokens per step-time when ``n`` tokens come from one forward: ``n / s(n)``."""
        return n / self.ratios[n]


def probe(open_session: Callable[[], Session], sizes: tuple[int, ...] = PROBE_SIZES,
          budget_s: float = PROBE_BUDGET_S) -> Probe:
    """Time one-token steps and ``sizes``-token forwards on a fresh session of an in-process
    runtime (``open_session``: its ``session``; engine.runtime.protocol.Runtime.probe) (after a 32-token
    prompt and an untimed step, which pay the one-time costs), fastest of up to
    :data:`PROBE_ROUNDS` rounds within ``budget_s``."""
    began = time.perf_counter()
    step = float("inf")
    best = {n: float("inf") for n in sizes}
    session = open_session()
    try:
        session.append(list(range(10, 42)), "warmup")
        session.append([100], "warmup")
        for round_ in range(PROBE_ROUNDS):
            if round_ and time.perf_counter() - began > budget_s:
                break
            for n in (1, *sizes):
                start = time.perf_counter()
                session.append(list(range(200, 200 + n)), "warmup", all_logits=n > 1)
                seconds = time.perf_counter() - start
                if n == 1:
                    step = min(step, seconds)
                else:
                    best[n] = min(best[n], seconds)
    finally:
        session.close()
    return Probe(step, {n: best[n] / step for n in sizes}, time.perf_counter() - began)
