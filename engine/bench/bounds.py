"""Speedup bounds from the measured kernel curve s(N) (see docs/benchmarks.md, "How it is measured").

Costs are in units of one decode step (one one-token forward): a forward of n tokens costs
``n / s(n)`` steps. ``s`` is interpolated linearly in log2(N) between measured points, with
s(1) = 1 by definition and s held flat beyond the largest measured N.

* paper-style bound, per corpus: ``T / (T_gen + sum_k N_k / s(N_k))`` over the line-oracle span
  histogram (T gold tokens, T_gen of them generated, N_k the tokens of copy span k; the token
  convention of :mod:`engine.bench.analysis`).
* structure-aware bound: the program mode's real work for the oracle program. Every token the
  model must choose (gen text and program structure: op openers, digits, closers) is one decode
  step, every forced literal one forward of its tokens, every splice one forward of the copied
  tokens: ``T / (chosen + sum_r n_r / s(n_r) + sum_k N_k / s(N_k))``. The counts come from
  :func:`program_structure`, a model-free walk of the oracle program: the engine's own
  ``forced``-mode decoder, undrafted, on a counting cache, its walk logging each token by kind.
* fused: the engine appends a chosen token, the literals it forces and a splice in ONE forward,
  so it does fewer forwards than the structure-aware model charges; ``T / sum_f n_f / s(n_f)``
  over the engine's measured forward sizes (undrafted ``program`` arm) predicts its time from the
  kernel alone.
* drafted: drafted structure (and drafted gen text) as the engine now pays it. With drafting, a
  chosen token the drafter predicted (a copy's opener and line digits after a gen, the end-line
  guess after ``-``, the input line a gen rewrites) is no decode step of its own: it rides in the
  step's verify forward with everything it forces and splices, so the structure-aware model's
  "one step per chosen token" becomes one forward per *undrafted* choice, of
  ``1 + drafted tokens + their literals + their splices`` tokens, costed ``n / s(n)``:
  ``T / sum_f n_f / s(n_f)`` over the forwards of :func:`drafted_walk`, which runs the engine's
  own :class:`engine.decoding.program_decoder.ProgramDecoder` under the teacher (a drafted token stands
  while it equals the teacher's) on a counting cache instead of a model's, so no model runs and the
  walk cannot drift from the decoder. The benchmark checks its forward sizes against the
  ``program-drafted`` arm's measured ones on every case (``drafted_walk_matches_engine``).
  Against the structure-aware bound it saves a step per accepted draft token; against the
  fused one it saves the forwards the drafts replace, at the price of larger forwards.

Corpus values are pooled (sum of T over sum of costs), like the measured pooled speedup.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from engine.core.choices import never_cancelled
from engine.bench.analysis import tokens_per_op
from engine.core.lines import split_lines
from engine.core.tokens import encode, token_pieces
from engine.decoding.program_decoder import ProgramDecoder
from engine.language.oracle import line_oracle
from engine.language.program import CopyLines, CopyTokens
from engine.runtime.session import Session


@dataclass(frozen=True)
class KernelCurve:
    ns: tuple[int, ...]
    speedups: tuple[float, ...]
    source: str = ""

    @classmethod
    def from_points(cls, points: Sequence[dict[str, Any]], source: str = "") -> "KernelCurve":
        pts = sorted((int(p["N"]), float(p["speedup"])) for p in points if p.get("speedup"))
        if not pts:
            raise ValueError("kernel curve: no measured points")
        if pts[0][0] != 1:
            pts.insert(0, (1, 1.0))
        pts[0] = (1, 1.0)  # s(1) = 1 by definition; the measured ratio is noise around it
        return cls(tuple(n for n, _ in pts), tuple(s for _, s in pts), source)

    @classmethod
    def load(cls, path: Path | str) -> "KernelCurve":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls.from_points(data["points"], source=str(path))

    def s(self, n: float) -> float:
        if n <= 1:
            return 1.0
        if n >= self.ns[-1]:
            return self.speedups[-1]
        x = math.log2(n)
        i = bisect_right(self.ns, n) - 1  # ns[i] <= n < ns[i + 1]
        x0, x1 = math.log2(self.ns[i]), math.log2(self.ns[i + 1])
        s0, s1 = self.speedups[i], self.speedups[i + 1]
        return s0 + (s1 - s0) * (x - x0) / (x1 - x0)

    def cost(self, n: float) -> float:
        """Decode steps that one forward of ``n`` tokens costs (0 for no tokens)."""
        return n / self.s(n) if n > 0 else 0.0

    def costs(self, sizes: Sequence[int]) -> float:
        return sum(self.cost(n) for n in sizes)


def paper_cost(t_gen: int, spans: Sequence[int], curve: KernelCurve) -> float:
    return t_gen + curve.costs(spans)


def structure_cost(chosen: int, literal_runs: Sequence[int], splices: Sequence[int], curve: KernelCurve) -> float:
    return chosen + curve.costs(literal_runs) + curve.costs(splices)


def bound(tokens: float, cost: float) -> float | None:
    return tokens / cost if cost > 0 else None


@dataclass
class OracleSpans:
    """The line-oracle span histogram of one case (token convention of :mod:`engine.bench.analysis`)."""

    T: int
    T_gen: int
    spans: list[int]


def oracle_spans(tokenizer: Any, source: str, gold: str) -> OracleSpans:

    gold_ids = encode(tokenizer, gold)
    program = line_oracle(source, gold)
    src_lines = split_lines(source)
    texts = ["".join(src_lines[op.start - 1:op.end]) if isinstance(op, CopyLines) else op.text for op in program.ops]
    per_op = tokens_per_op(texts, token_pieces(tokenizer, gold_ids))
    spans = [n for op, n in zip(program.ops, per_op) if isinstance(op, CopyLines) and n > 0]
    return OracleSpans(T=len(gold_ids), T_gen=len(gold_ids) - sum(spans), spans=spans)


@dataclass
class ProgramStructure:
    """What decoding one program costs in program mode, by kind (no model involved).

    ``chosen``: tokens the model must pick (``gen_chosen`` of them inside gen bodies, the rest
    structure); ``literal_runs``: token count of each forced literal appended after the prompt
    (``prefix_literal_tokens`` ride along with the prompt's prefill and ``trailing_literal_tokens``,
    forced after the last choice, are never forwarded: neither costs anything);
    ``splices``: tokens of each copy appended to the cache; ``trailing_splice``: the tokens of a
    final copy that reached the input's end, written but never appended (the program must end
    there: ``engine.language.program.must_end_after``).
    """

    chosen: int = 0
    gen_chosen: int = 0
    literal_runs: list[int] = field(default_factory=list)
    prefix_literal_tokens: int = 0
    trailing_literal_tokens: int = 0
    splices: list[int] = field(default_factory=list)
    trailing_splice: int = 0

    @property
    def structure_chosen(self) -> int:
        return self.chosen - self.gen_chosen

    @property
    def literal_tokens(self) -> int:
        return sum(self.literal_runs) + self.prefix_literal_tokens + self.trailing_literal_tokens


def program_structure(loaded: Any, tables: Any, region: str, program: Any) -> ProgramStructure:
    """Walk ``program`` through the grammar exactly as ``forced`` mode does, without the model:
    the engine's own decoder under the teacher, undrafted, with a counting cache (see
    :func:`_forced_walk`), its walk logging what it wrote by kind. The benchmark checks the counts
    against the engine's own token counts for every case."""
    ledger: list[tuple[str, int]] = []
    decoder = _forced_walk(loaded, tables, region, program, draft=False, ledger=ledger)
    return structure_of(ledger, decoder.matcher.is_terminated(), decoder.ranges.must_end)


def structure_of(ledger: Sequence[tuple[str, int]], terminated: bool, must_end: bool) -> ProgramStructure:
    """A :class:`ProgramStructure` from a walk's ledger (engine.decoding.program_walker.ProgramWalker):
    literals forced before the first choice ride with the prefill; once the program ended, what
    the last choice forced and (when the program had to end there) the copy it closed are written
    but never forwarded."""
    out = ProgramStructure()
    runs_before = None  # literal runs before the last choice
    for kind, n in ledger:
        if kind == "chosen":
            out.chosen += 1
            out.gen_chosen += n
            runs_before = len(out.literal_runs)
        elif kind == "forced" and runs_before is None:
            out.prefix_literal_tokens += n
        elif kind == "forced":
            out.literal_runs.append(n)
        else:
            out.splices.append(n)
    if terminated and runs_before is not None:
        out.trailing_literal_tokens = sum(out.literal_runs[runs_before:])
        del out.literal_runs[runs_before:]
        if must_end:
            out.trailing_splice = out.splices.pop()
    return out


@dataclass
class DraftedWalk:
    """The forwards drafted program decoding makes for a program under the teacher (no model):
    ``forward_sizes`` after the prefill, in order; ``drafted`` tokens proposed and verified (all
    accepted under the teacher), ``drafted_structure`` of them outside gen bodies; ``verify_forwards``
    of the forwards carried a draft."""

    forward_sizes: list[int] = field(default_factory=list)
    drafted: int = 0
    drafted_structure: int = 0
    verify_forwards: int = 0


class _CountingSession(Session):
    """Stands in for a backend's session in :func:`drafted_walk`: records each forward's size and
    keeps the cache length (crops included); runs nothing. Under the teacher the decoder never
    reads logits, so zeros of the right shape are enough."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def _forward(self, ids: list[int], rows: list[int]) -> Any:
        import torch

        self.sizes.append(len(ids))
        return torch.zeros((len(rows), 1))

    def _truncate(self, length: int) -> None:
        pass


def drafted_walk(loaded: Any, tables: Any, region: str, program: Any, draft: bool = True) -> DraftedWalk:
    """Run the engine's program decoder in ``forced`` mode on ``program`` with a counting cache
    (see :class:`_CountingSession`): the exact forward sizes drafted (or, with ``draft=False``,
    undrafted) decoding makes, without the model."""
    out = DraftedWalk()
    session = _CountingSession()
    _forced_walk(loaded, tables, region, program, draft=draft, session=session, drafts=out)
    out.forward_sizes = session.sizes[1:]  # the first forward is the prefill (prompt + leading literals)
    return out


def _forced_walk(loaded: Any, tables: Any, region: str, program: Any, draft: bool,
                 session: _CountingSession | None = None, ledger: list[tuple[str, int]] | None = None,
                 drafts: DraftedWalk | None = None) -> Any:
    """The engine's :class:`engine.decoding.program_decoder.ProgramDecoder` run to its end on
    ``program`` under the teacher, on ``session`` (a counting one by default): no model runs.
    ``drafts`` counts what each verify forward carried."""
    class Walk(ProgramDecoder):
        def verify(self, marks: list) -> Any:  # count what was drafted, then the engine's own verify
            if drafts is not None:
                drafts.drafted += len(marks)
                drafts.drafted_structure += sum(not m.in_gen for m in marks)
                drafts.verify_forwards += 1
            return super().verify(marks)

    token_copies = any(isinstance(op, CopyTokens) for op in program.ops)
    decoder = Walk(loaded, tables, region, [0], 1 << 16, never_cancelled, token_copies=token_copies,
                   teacher_program=program, monotonic=False, draft=draft,
                   session=session if session is not None else _CountingSession(), ledger=ledger)
    for _ in decoder.run():
        pass
    return decoder


def drafted_cost(walk: DraftedWalk, curve: KernelCurve) -> float:
    return curve.costs(walk.forward_sizes)
