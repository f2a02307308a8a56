"""What a forward costs on this runtime, and how long a draft should be for it.

Speculative decoding pays for a draft with a longer forward: verifying N drafted tokens after the
step's own token is one (N+1)-token forward, ``s(N+1)`` times the cost of a plain one-token step.
On transformers (memory-bound on a CPU) ``s(8)`` is about 2; on llama.cpp, whose batched forward
is compute-bound on a small CPU, about 4.7 (``bench kernel``), so a rejected draft costs nearly
what an accepted one saves. :class:`CostModel` learns ``s(N)`` from the forwards the runtime
already runs (every :meth:`engine.session.Session.append` reports its size and seconds), per
runtime (model, backend, thread count, adapter), and keeps it on disk so the next process starts
from it. :func:`best_draft_size` then picks the draft size that maximizes the expected tokens per
unit of cost given the fraction of drafted tokens accepted so far, or 0 when no draft beats a
plain step.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Callable

from engine.models import cache_dir

# Forwards are grouped by size into buckets (powers of two); each keeps an average (size, seconds).
_BUCKETS = 13  # 1 .. 4096
_EMA = 0.2  # weight of a new observation once a bucket has a few
_WARM = 5  # observations a bucket averages plainly before it moves to the moving average
_SAVE_EVERY_S = 30.0
# Before anything is measured (a first draft before the first plain step): a cheap-verify guess,
# the engine's behaviour before costs were known; measurements replace it within a few forwards.
_PRIOR_MARGINAL = 0.1
_BETTER = 1e-3  # a longer draft must beat a shorter one by this much (not by float noise)


def _bucket(tokens: int) -> int:
    return min(_BUCKETS - 1, max(0, round(math.log2(max(1, tokens)))))


class CostModel:
    """``ratio(n)`` = seconds of an n-token forward / seconds of a one-token forward, learned online.

    Thread-safe; ``path`` (optional) is where the table is loaded from and saved to. A ``frozen``
    model (:meth:`fixed`) ignores what it observes: a table measured once (``bench kernel``) gives
    reproducible draft sizes."""

    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.monotonic,
                 frozen: bool = False):
        self.path = path
        self.frozen = frozen
        self._clock = clock
        self._lock = threading.Lock()
        self._n = [0] * _BUCKETS
        self._tokens = [0.0] * _BUCKETS
        self._seconds = [0.0] * _BUCKETS
        self._saved_at = clock()
        self._dirty = False
        if path is not None:
            self._load(path)

    def observe(self, tokens: int, seconds: float) -> None:
        """One forward of ``tokens`` tokens took ``seconds``."""
        if tokens <= 0 or seconds <= 0 or self.frozen:
            return
        b = _bucket(tokens)
        with self._lock:
            n = self._n[b]
            w = 1.0 / (n + 1) if n < _WARM else _EMA
            self._tokens[b] += w * (tokens - self._tokens[b])
            self._seconds[b] += w * (seconds - self._seconds[b])
            self._n[b] = n + 1
            self._dirty = True
        if self.path is not None and self._clock() - self._saved_at > _SAVE_EVERY_S:
            self.save()

    @classmethod
    def fixed(cls, ratios: dict[int, float]) -> "CostModel":
        """A frozen model with s(n) = ``ratios[n]`` at the given sizes (s(1) = 1)."""
        model = cls(frozen=True)
        for n, ratio in {1: 1.0, **ratios}.items():
            b = _bucket(n)
            model._n[b], model._tokens[b], model._seconds[b] = _WARM, float(n), float(ratio)
        return model

    def points(self) -> list[tuple[float, float]]:
        """The measured (mean size, mean seconds) per bucket, smallest first."""
        with self._lock:
            return [(self._tokens[b], self._seconds[b]) for b in range(_BUCKETS) if self._n[b]]

    def step_seconds(self) -> float | None:
        with self._lock:
            return self._seconds[0] if self._n[0] else None

    def ratio(self, n: int) -> float:
        """s(n): an n-token forward's cost in one-token steps (interpolated between measured sizes;
        the prior's guess until a one-token step has been measured)."""
        if n <= 1:
            return 1.0
        step = self.step_seconds()
        if step is None:
            return 1.0 + _PRIOR_MARGINAL * (n - 1)
        pts = self.points()
        if len(pts) == 1:
            return 1.0 + _PRIOR_MARGINAL * (n - 1)
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if n <= x1:
                return max(1.0, (y0 + (y1 - y0) * (n - x0) / max(1e-9, x1 - x0)) / step)
        (x0, y0), (x1, y1) = pts[-2], pts[-1]  # beyond the largest measured size: extend its slope
        return max(1.0, (y1 + (y1 - y0) * (n - x1) / max(1e-9, x1 - x0)) / step)

    def table(self, sizes: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128)) -> dict[str, float]:
        """s(N) at a few sizes, for reports."""
        return {str(n): round(self.ratio(n), 3) for n in sizes}

    # -- persistence ------------------------------------------------------------------------------

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        with self._lock:
            data = {"buckets": [[self._n[b], self._tokens[b], self._seconds[b]] for b in range(_BUCKETS)]}
            self._dirty = False
            self._saved_at = self._clock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache only costs the next process its warm start

    def _load(self, path: Path) -> None:
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))["buckets"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if len(rows) != _BUCKETS:
            return
        for b, (n, tokens, seconds) in enumerate(rows):
            if n and tokens > 0 and seconds > 0:
                # A loaded bucket counts as warm but gives way to this process's own measurements.
                self._n[b], self._tokens[b], self._seconds[b] = min(int(n), _WARM), float(tokens), float(seconds)


def cost_path(*identity: object) -> Path:
    """Where the cost table of a runtime with this identity lives (user cache, never the repo)."""
    digest = hashlib.sha256("\0".join(str(part) for part in identity).encode("utf-8")).hexdigest()[:16]
    return cache_dir() / "cost" / f"{digest}.json"


def expected_accepted(f: float, n: int) -> float:
    """Expected accepted tokens of an n-token draft when a fraction ``f`` of drafted tokens is
    accepted. Linear in n: drafts copied from the input are mostly all-or-nothing (aligned, they
    run to the next edit; misaligned, they fail at once), so the fraction does not fall with the
    position in the draft the way a per-token geometric model would have it."""
    return f * n


def best_draft_size(f: float, available: int, ratio: Callable[[int], float]) -> int:
    """The draft size in 0..available that maximizes (expected accepted + 1) / s(size + 1): tokens
    per unit of cost. 0 (a plain step, 1 token for s(1) = 1) when no draft does better."""
    best_n, best = 0, 1.0
    sizes = list(range(1, min(available, 16) + 1))
    while sizes and sizes[-1] < available:  # then a geometric grid (the value is smooth there)
        sizes.append(min(available, sizes[-1] + max(1, sizes[-1] // 8)))
    for n in sizes:
        value = (expected_accepted(f, n) + 1.0) / ratio(n + 1)
        if value > best * (1.0 + _BETTER):
            best_n, best = n, value
    return best_n
