"""The session every decoder talks to: append tokens with one forward, crop, and keep time.

Every model call in the engine goes through :meth:`Session.append`, whichever backend runs it
(see :mod:`engine.runtime.backends`), so the breakdown of where time goes (prefill, one-token decode
steps, multi-token appends: splices, forced literals, speculative verification) is measured in one
place, and a :class:`ForwardLog` counts forwards the same way for every backend.

A session's first append may start from the KV state of an earlier session's prompt (see
:mod:`engine.runtime.prefix_cache`): the backend restores the longest common prefix and only the rest is
forwarded; ``prefix_reused`` in the breakdown says how many tokens were not computed again.
Every forward is also reported to the runtime's cost model (:mod:`engine.runtime.cost`), which sizes drafts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from engine.core.choices import VERIFY_RULES, never_cancelled
from engine.core.errors import Cancelled
from engine.runtime import logits as arrays
from engine.runtime.cost import CostModel
from engine.runtime.logits import Logits


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

    def __init__(self, cost: CostModel | None = None, align: int = 0) -> None:
        self.align = align  # the first append runs in chunks ending at multiples of this (0: one forward)
        self.length = 0
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.tokens: list[int] = []  # what the cache holds, in order
        self.prompt_length = 0  # tokens of the first append (what a later session may reuse)
        self.reused = 0  # tokens of the first append restored from an earlier session
        self.prefill_forwards = 0  # forwards the first append ran (its chunks; 0 when all was restored)
        # The logits after the first append's last token, when computed as a prefill that asks
        # for that row alone would (kept with the prompt's cache for the same prompt's next session)
        self.prompt_last: Logits | None = None
        self._whole = False  # this first append may restore a whole kept prompt with its last logits
        self.prefilling = False  # inside the first append's forwards (see ``exact_rows``)
        self.cuts: tuple[int, ...] = ()  # the first append's chunk cuts besides multiples of align
        self.cost = cost  # learns from every forward (None: nothing learns)
        self.closed = False
        # Polled before each chunk of the first append and, on a backend that can stop inside a
        # forward (transformers: between decoder layers), during every forward: once True the
        # forward stops and raises Cancelled, its cache as before that forward (a prefill keeps the
        # chunks it read, reusable: see _prefill)
        self.cancelled: Callable[[], bool] = never_cancelled
        # What :meth:`append` returns: torch tensors (False), or the backend's own arrays (True: numpy
        # on llama.cpp), for a caller that handles either (engine.runtime.logits; the text modes):
        # it then runs without importing torch
        self.native_logits = False

    def append(self, ids: Sequence[int], kind: str, all_logits: bool = False,
               rows: Sequence[int] | None = None, marks: Sequence[int] = ()) -> Logits:
        """Append ``ids`` in ONE forward (the session's first append: in aligned chunks, see
        :meth:`_prefill`). Returns float32 logits of the last position (shape V), of every appended
        position (N x V) with ``all_logits``, or of the appended positions ``rows`` (len(rows) x V;
        the LM head runs on those rows only where the backend allows): a torch tensor, or the
        backend's own array under ``native_logits``. ``kind`` labels the time spent.
        ``marks`` (first append only): positions where the prompt's chunks are cut too, where
        prompts that share everything before differ (a focus hint after the region, a prompt that
        ends there): a later prompt reuses the cache up to a mark instead of the aligned boundary
        before it, with the same bit-exact keys and values."""
        if not ids:
            raise ValueError("append needs at least one token")
        if self.closed:
            raise RuntimeError("this session is closed")
        start = time.perf_counter()
        ids = list(ids)
        wanted = list(range(len(ids))) if all_logits else (list(rows) if rows is not None else [len(ids) - 1])
        first = self.length == 0 and not self.prompt_length
        logits = self._prefill(ids, wanted, marks) if first else self._timed_forward(ids, wanted)
        self.tokens.extend(ids)
        self.seconds[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        logits = logits if all_logits or rows is not None else logits[-1]
        return logits if self.native_logits else arrays.as_torch(logits)

    def _prefill(self, ids: list[int], wanted: list[int], marks: Sequence[int] = ()) -> Logits:
        """The first append: restore what an earlier session's cache holds of ``ids`` (up to a
        chunk boundary), then forward the rest in chunks that end at multiples of ``align`` and at
        ``marks``. A fresh prefill runs the same chunks, so a reused prefix gives bit-identical
        keys, values and logits (a batch of another shape would round differently: llama.cpp's
        and torch's kernels are deterministic per shape, not across shapes)."""
        align = self.align
        limit = min(wanted)
        last = len(ids) - 1
        self._whole = wanted == [last]
        self.cuts = tuple(sorted({int(m) for m in marks if 0 < m < len(ids) and m % align})) if align > 0 else ()
        skip = self._begin(ids, self.boundary_at_most(limit))
        self.length = skip
        self.prompt_length, self.reused = len(ids), skip
        if skip == len(ids):  # the same prompt, kept with its last logits: nothing to forward
            return self.prompt_last[None]
        self.prefilling = True
        try:
            logits = self._prefill_rest(ids, wanted, skip)
        except Cancelled:
            # The cache holds the chunks read so far, which end at a chunk boundary of this prompt's
            # plan; ``tokens`` says so, so :meth:`close` hands them to the prefix store as a prompt
            # that a later prefill of the same text continues from with bit-identical keys and
            # values (no last logits are kept with it).
            self.tokens = list(ids[:self.length])
            raise
        finally:
            self.prefilling = False
        if last in wanted and self.exact_rows:
            self.prompt_last = arrays.copy(logits[wanted.index(last)])
        return logits

    def _prefill_rest(self, ids: list[int], wanted: list[int], skip: int) -> Logits:
        align = self.align
        bounds = [skip]
        if align > 0:
            inner = set(range((skip // align + 1) * align, len(ids), align))
            bounds += sorted(inner | {c for c in self.cuts if c > skip})
        bounds.append(len(ids))
        if len(bounds) == 2:  # one chunk: the rows as asked
            self._check_cancel()
            self.prefill_forwards += 1
            return self._timed_forward(ids[skip:], [r - skip for r in wanted])
        got: dict[int, Logits] = {}
        for lo, hi in zip(bounds, bounds[1:]):
            self._check_cancel()
            self.prefill_forwards += 1
            rows = sorted({r for r in wanted if lo <= r < hi})
            out = self._timed_forward(ids[lo:hi], [r - lo for r in rows] or [hi - lo - 1])
            got.update(zip(rows, out))
        return arrays.stack([got[r] for r in wanted])

    def _check_cancel(self) -> None:
        """Between two prompt chunks: stop when the caller cancelled (on any backend; one that
        stops inside a forward stops sooner)."""
        if self.cancelled():
            raise Cancelled("cancelled during the prompt's prefill")

    def _timed_forward(self, ids: list[int], rows: list[int]) -> Logits:
        start = time.perf_counter()
        out = self._forward(ids, rows)
        if self.cost is not None:  # at the size that ran (a backend may pad a prompt chunk: see padded)
            self.cost.observe(self.padded(len(ids)), time.perf_counter() - start)
        self.length += len(ids)
        return out

    # The most rows a forward may have while each row's logits are exactly a one-token step's
    # (None: no such bound is known). A verify that promises greedy output stays within it
    # (see :meth:`draft_room`); llama.cpp sets it (engine.runtime.backends.llamacpp.exact_rows).
    step_exact_rows: int | None = None
    # The verify rule "auto" means on this backend (see VERIFY_RULES); llama.cpp sets its own.
    default_verify: str = "exact"

    def verify_rule(self, verify: str = "auto") -> str:
        """``verify`` with "auto" resolved to this backend's rule."""
        if verify not in VERIFY_RULES:
            raise ValueError(f"unknown verify rule {verify!r}; choose one of {', '.join(VERIFY_RULES)}")
        return self.default_verify if verify == "auto" else verify

    def draft_room(self, limit: int, verify: str = "auto") -> int:
        """How many drafted tokens a verify may carry, at most ``limit``: a verify is the step's
        token plus the draft. Under "exact" it stays within ``step_exact_rows``, where its choices
        are exactly the steps'; under "argmax" any size goes (the batched forward's choices)."""
        if self.step_exact_rows is None or self.verify_rule(verify) == "argmax":
            return limit
        return min(limit, self.step_exact_rows - 1)

    def padded(self, n: int) -> int:
        """The size an n-token forward runs as: a prompt chunk's may be larger where that is cheaper
        (engine.runtime.cost.CostModel.plan_padding); any other forward's is n."""
        return self.cost.padded(n) if self.prefilling and self.cost is not None else n

    def crop(self, length: int) -> None:
        """Forget everything after the first ``length`` tokens (rejected draft tokens)."""
        if length < self.length:
            self._truncate(length)
            self.length = length
            del self.tokens[length:]

    def close(self) -> None:
        """Give back what the session holds (its KV cache goes to the runtime's prefix store, a
        llama.cpp context back to its pool); a closed session is not used again."""
        if not self.closed:
            self.closed = True
            # ``tokens`` is what the cache holds: its prompt part (maybe cropped into) is reusable.
            self._release(self.tokens[:min(self.prompt_length, self.length)])

    def breakdown(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"{k}_s": round(v, 6) for k, v in self.seconds.items()}
        out.update({f"{k}_calls": v for k, v in self.calls.items()})
        out["prefix_reused"] = self.reused
        out["prefill_forwards"] = self.prefill_forwards
        return out

    def _begin(self, ids: list[int], max_reuse: int) -> int:
        """Before the first forward: restore up to ``max_reuse`` leading tokens of ``ids`` from an
        earlier session's cache, cut to a chunk boundary (see :meth:`_reuse`); return how many
        were restored (the cache now holds exactly those)."""
        return 0

    # A backend whose logits for a row do not depend on which other rows of the forward were
    # asked for (llama.cpp; transformers computes the last row apart while ``prefilling``): only
    # then may a prefill that asked for several rows stand in for one that asks for the last alone.
    exact_rows = True

    def _reuse(self, taken: Any, max_reuse: int) -> int:
        """How many leading tokens of the taken store entry (engine.runtime.prefix_cache.Taken) this first
        append keeps: all of them when it is exactly this prompt with its last logits and the
        append asks for the last row only (those logits are then the answer), else the shared
        prefix up to ``max_reuse``, cut to the last chunk boundary both prefills' chunk plans share
        with nothing different before it (their cuts besides multiples of ``align`` may differ)."""
        if self._whole and taken.last_logits is not None and tuple(taken.cuts) == self.cuts:
            self.prompt_last = taken.last_logits
            return taken.common
        limit = min(taken.common, max_reuse)
        differ = set(self.cuts).symmetric_difference(taken.cuts)
        first_difference = min((c for c in differ if c <= limit), default=None)
        return self.boundary_at_most(limit if first_difference is None else first_difference - 1)

    def kept_logits(self, prompt: list[int]) -> Logits | None:
        """The last logits to keep with ``prompt``'s cache: only when it is the whole first append."""
        return self.prompt_last if len(prompt) == self.prompt_length else None

    def boundary_at_most(self, n: int) -> int:
        """The last chunk boundary of this session's prefill at or before ``n`` (any ``n`` when
        prefills run in one forward)."""
        if self.align <= 0:
            return n
        return max([(n // self.align) * self.align] + [c for c in self.cuts if c <= n])

    def _release(self, prompt: list[int]) -> None:
        """Hand the cache back to the runtime; its first ``len(prompt)`` entries hold ``prompt``."""

    def _forward(self, ids: list[int], rows: list[int]) -> Logits:
        """Append ``ids`` to the cache in one forward; the logits of ``rows`` (len(rows) x V, the
        backend's own kind of array: engine.runtime.logits). A backend may poll
        ``cancelled`` inside the forward and raise Cancelled, its cache then holding ``length``
        positions, as before the call."""
        raise NotImplementedError

    def _truncate(self, length: int) -> None:
        raise NotImplementedError
