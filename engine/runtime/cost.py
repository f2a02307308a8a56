"""What a forward costs on this runtime, and how long a draft should be for it.

Speculative decoding pays for a draft with a longer forward: verifying N drafted tokens after the
step's own token is one (N+1)-token forward, ``s(N+1)`` times the cost of a plain one-token step.
On transformers (memory-bound on a CPU) ``s(8)`` is about 2; on llama.cpp, whose batched forward
is compute-bound on a small CPU, about 4.7 (``bench kernel``), so a rejected draft costs nearly
what an accepted one saves. :class:`CostModel` learns ``s(N)`` from the forwards the runtime
already runs (every :meth:`engine.runtime.session.Session.append` reports its size and seconds), per
runtime (model, backend, thread count, adapter), and keeps it on disk so the next process starts
from it. :func:`best_draft_size` then picks the draft size that maximizes the expected tokens per
unit of cost given the fraction of drafted tokens accepted so far, or 0 when no draft beats a
plain step.

A forward's cost need not grow with its size: on llama.cpp on an x86 CPU a 63-token forward costs
twice a 64-token one (docs/backends.md). The table therefore keeps sizes apart
finely enough to see such steps (one bin per size up to 16, then 8-token bins), and
:meth:`CostModel.plan_padding` decides once, from what was measured, which prompt chunks a backend
should run as a larger, cheaper forward (llama.cpp pads them with tokens it then drops). Only
prompt chunks: there a forward of 64 rows or more rounds differently from one-token steps, and a
verify must keep the rounding of the steps it stands for, so speculative stays equal to ar.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Callable

from engine.runtime.sources import cache_dir

# Forwards are grouped by size into bins: one per size up to 16, 8-token bins up to 512, then
# 64-token bins up to 4096; each keeps an average (size, seconds).
_BINS = 16 + (512 - 16) // 8 + (4096 - 512) // 64
_EMA = 0.2  # weight of a new observation once a bin has a few
_WARM = 5  # observations a bin averages plainly before it moves to the moving average
_SAVE_EVERY_S = 30.0
# Before anything is measured (a first draft before the first plain step): a cheap-verify guess,
# the engine's behaviour before costs were known; measurements replace it within a few forwards.
_PRIOR_MARGINAL = 0.1
_BETTER = 1e-3  # a longer draft must beat a shorter one by this much (not by float noise)
_PAD_GAIN = 0.8  # pad only when the larger forward costs at most this fraction (well above noise)
_PAD_SEEN = 3  # observations both sizes' bins need before padding is trusted
_PAD_MIN = 16  # smaller forwards are never padded: their cost is mostly per call, the rest noise


def _bin(tokens: int) -> int:
    n = max(1, tokens)
    if n <= 16:
        return n - 1
    if n < 512:
        return 16 + (n - 16) // 8
    return min(_BINS - 1, 78 + (n - 512) // 64)


def _bin_start(b: int) -> int:
    """The smallest size of bin ``b``."""
    if b < 16:
        return b + 1
    if b < 78:
        return max(17, 16 + 8 * (b - 16))  # bin 16 is 17..23, then 24..31, ...
    return 512 + 64 * (b - 78)


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
        self._n = [0] * _BINS
        self._tokens = [0.0] * _BINS
        self._seconds = [0.0] * _BINS
        self._saved_at = clock()
        self._dirty = False
        self._pad: dict[int, int] = {}  # size -> the larger size it runs as (see plan_padding)
        if path is not None:
            self._load(path)

    def observe(self, tokens: int, seconds: float) -> None:
        """One forward of ``tokens`` tokens took ``seconds`` (``tokens``: the size that ran, padding
        included, so a padded size's own cost stays what it was measured at)."""
        if tokens <= 0 or seconds <= 0 or self.frozen:
            return
        b = _bin(tokens)
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
            b = _bin(n)
            model._n[b], model._tokens[b], model._seconds[b] = _WARM, float(n), float(ratio)
        return model

    def points(self) -> list[tuple[float, float]]:
        """The measured (mean size, mean seconds) per bin, smallest first."""
        with self._lock:
            return [(self._tokens[b], self._seconds[b]) for b in range(_BINS) if self._n[b]]

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

    def plan_padding(self, limit: int) -> None:
        """Decide, from the table as it stands, which prompt-chunk sizes up to ``limit`` run as a
        larger one: the cheapest measured bin's first size in (n, 2n] when it costs at most ``_PAD_GAIN``
        of n's own bin. Decided once (a runtime calls it when it starts), so a prompt's chunks run
        at the same sizes for the runtime's whole life and a reused prefix stays bit-identical."""
        with self._lock:
            seen = {b: self._seconds[b] for b in range(_BINS) if self._n[b] >= _PAD_SEEN}
        plan: dict[int, int] = {}
        for n in range(_PAD_MIN, limit + 1):
            own = seen.get(_bin(n))
            if own is None:
                continue
            best, cost = n, own * _PAD_GAIN
            for b, seconds in seen.items():
                m = _bin_start(b)
                if n < m <= min(2 * n, limit) and seconds < cost:
                    best, cost = m, seconds
            if best != n:
                plan[n] = best
        self._pad = plan

    def padded(self, n: int) -> int:
        """The size an n-token prompt chunk runs as (see :meth:`plan_padding`)."""
        return self._pad.get(n, n)

    def table(self, sizes: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128)) -> dict[str, float]:
        """s(N) at a few sizes, for reports."""
        return {str(n): round(self.ratio(n), 3) for n in sizes}

    # -- persistence ------------------------------------------------------------------------------

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        with self._lock:
            data = {"bins": [[self._n[b], self._tokens[b], self._seconds[b]] for b in range(_BINS)]}
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
            rows = json.loads(path.read_text(encoding="utf-8"))["bins"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if len(rows) != _BINS:
            return
        for b, (n, tokens, seconds) in enumerate(rows):
            if n and tokens > 0 and seconds > 0:
                # A loaded bin counts as warm but gives way to this process's own measurements.
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
