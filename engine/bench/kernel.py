"""The kernel speedup s(N): how much cheaper one N-token forward is than N one-token forwards.

    s(N) = time(N one-token forwards) / time(one N-token forward)

both appended to the same cached context (``context`` tokens, 1024 by default), the cache cropped
back to the context after every trial. A trial measures, for every N, both arms back to back (their
order alternating between trials); the reported times are the medians over trials, after warm-up.
One-token forwards synchronise after every step (real decoding needs each token before the next).
Logits are kept for the last position only, as a splice does.

Depends on torch and transformers only for the transformers backend (``scripts/gpu_kernel.py`` runs it
on a bare GPU box).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

DEFAULT_NS: tuple[int, ...] = tuple(2 ** i for i in range(10))  # 1, 2, 4, ..., 512
DEFAULT_CONTEXT = 1024


def parse_ns(spec: str | None) -> tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4); ``None`` -> the default powers of two up to 512."""
    if not spec:
        return DEFAULT_NS
    try:
        ns = tuple(sorted({int(x) for x in spec.split(",") if x.strip()}))
    except ValueError:
        raise ValueError(f"--ns {spec!r}: expected a comma list of positive integers, e.g. 1,2,4,8") from None
    if not ns or ns[0] < 1:
        raise ValueError(f"--ns {spec!r}: every N must be at least 1")
    return ns


def measure_kernel(runtime: Any, device: str, context: int = DEFAULT_CONTEXT, ns: Sequence[int] = DEFAULT_NS,
                   trials: int = 3, warmup: int = 1, seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure s(N) for every N in ``ns`` on a backend ``runtime`` (anything with ``session()`` and
    ``vocab_size``: see :mod:`engine.runtime.backends`), through the same session the decoders use.
    Returns ``{"context", "trials", "warmup", "points": [...]}`` with, per N, the median times
    (``ar_s``, ``prefill_s``), ``speedup`` = ar_s / prefill_s and the raw per-trial times."""
    import random

    rng = random.Random(seed)
    vocab = int(runtime.vocab_size)
    session = runtime.session()
    sync = _synchroniser(device)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(n)]

    t0 = time.perf_counter()
    session.append(tokens(context), "context")
    sync()
    if progress:
        progress(f"context of {context} tokens cached in {time.perf_counter() - t0:.2f} s")

    def ar(ids: list[int]) -> float:
        sync()
        start = time.perf_counter()
        for tok in ids:
            session.append([tok], "ar")
            sync()
        elapsed = time.perf_counter() - start
        session.crop(context)
        return elapsed

    def prefill(ids: list[int]) -> float:
        sync()
        start = time.perf_counter()
        session.append(ids, "prefill")
        sync()
        elapsed = time.perf_counter() - start
        session.crop(context)
        return elapsed

    try:
        for _ in range(max(0, warmup)):
            for n in ns:
                ids = tokens(n)
                prefill(ids)
                ar(ids[:min(n, 4)])
        ar_times: dict[int, list[float]] = {n: [] for n in ns}
        pf_times: dict[int, list[float]] = {n: [] for n in ns}
        for trial in range(trials):
            for k, n in enumerate(ns):
                ids = tokens(n)
                if (trial + k) % 2:
                    ar_times[n].append(ar(ids))
                    pf_times[n].append(prefill(ids))
                else:
                    pf_times[n].append(prefill(ids))
                    ar_times[n].append(ar(ids))
            if progress:
                done = ", ".join(f"{n}:{ar_times[n][-1] / pf_times[n][-1]:.1f}" for n in ns)
                progress(f"trial {trial + 1}/{trials}: s(N) {done}")
    finally:
        session.close()
    points = []
    for n in ns:
        ar_s, pf_s = statistics.median(ar_times[n]), statistics.median(pf_times[n])
        points.append({"N": n, "ar_s": ar_s, "prefill_s": pf_s, "speedup": ar_s / pf_s if pf_s else None,
                       "ar_per_token_s": ar_s / n, "ar_trials_s": ar_times[n], "prefill_trials_s": pf_times[n]})
    return {"context": context, "trials": trials, "warmup": warmup, "seed": seed, "points": points}


def _synchroniser(device: str) -> Callable[[], None]:
    """Waits for queued GPU work (a one-token step needs its token before the next)."""
    if str(device).startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def kernel_table(data: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Rows (N, ar ms, prefill ms, s(N)) for printing."""
    return [(str(p["N"]), f"{p['ar_s'] * 1e3:.1f}", f"{p['prefill_s'] * 1e3:.1f}", f"{p['speedup']:.2f}")
            for p in data["points"]]
