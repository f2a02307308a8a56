"""Copy statistics of oracle programs over a corpus, for one tokenizer (no model involved).

Counting convention
-------------------
Tokens are counted as the model would write the text: the gold is tokenized as one text with
``tokenizer(text, add_special_tokens=False)`` (never special tokens). Each gold token is
attributed to the op of the line-oracle program whose output contains the token's first
character (offsets from :func:`engine.core.tokens.token_pieces`), so ``T == T_copy + T_gen`` exactly
and a span's length is the number of gold tokens that start inside it. A BPE token that crosses
an op boundary (typically ``"\\n"`` merged with the next line's indentation) counts once, for
the op it starts in; a copy of a blank line can thus hold 0 tokens.

* ``T``: tokens of the gold (= ``regen_tokens``, what full regeneration emits).
* ``T_copy``: gold tokens inside the line oracle's copies; ``T_gen = T - T_copy``;
  ``f_line = T_copy / T`` (pooled over the corpus; ``f_line_case_mean`` averages per case).
* ``T_lines``, ``T_copy_lines``, ``f_line_lines``: the same with every line tokenized on its own
  (cached per distinct line), for reference; it over-counts by the cross-line merges.
* ``K``: number of copy spans (all cases); ``span_*``: their lengths in tokens, mean and the
  50th/95th percentiles (numpy's linear interpolation).
* ``token_cover[m]``: gold tokens covered by the token oracle's copies with minimum span ``m``,
  over all gold tokens ``T``.
* ``program_tokens``: tokens of the serialized line-oracle program (tags and escaped gen bodies);
  ``structure_tokens``: tokens of the same program with every gen body emptied (the tags alone:
  ``<program>``, copy tags, ``<gen></gen>`` pairs, ``</program>``); compare with ``regen_tokens``
  (= ``T``), the cost of regenerating the whole file.
* ``lossless``: ``[ok, total]``, cases whose line oracle and token oracles (every m) all resolve
  byte-exactly to the gold; ``lossless_line`` and ``lossless_token`` count each kind alone.
* ``perturbation[eps]``: exact-match rate of line-oracle programs whose copy endpoints were each
  shifted by an independent uniform integer in ``[-eps, eps]``, clamped to ``[1, n]``; if the
  shifted end falls before the shifted start it is raised to the start (as a decoder's range
  constraint would force). Mean over ``trials`` seeded trials (``perturbation_trials`` has each).

Paper convention (``analyze --convention paper``, :func:`analyze_cases_paper`)
----------------------------------------------------------------------------
The seed paper's Table 2 counts differently; this rule reproduces it exactly with the Qwen2.5
tokenizer (HEvalFix-Python T = 8872, T_copy = 6577, K = 295; HEvalFix-JS T = 14876,
T_copy = 11725, K = 311):

* pairs: HumanEvalFix bodies only, ``buggy_solution`` -> ``canonical_solution`` (no
  declaration, :func:`engine.evaluation.corpora.body_only`); CanItEdit ``before`` -> ``after`` as is.
* lines: ``text.split("\\n")``, terminators dropped. A text that ends in ``"\\n"`` (every
  HumanEvalFix body does) thus has a final empty line ``""`` that always matches: it extends the
  last block when the last line is unchanged (adding its ``"\\n"`` to that block's text) and is a
  block of its own otherwise (66 Python cases: that lifts Python's K from 229 to 295).
* matching: ``difflib.SequenceMatcher(None, in_lines, gold_lines)``; autojunk on or off gives the
  same numbers on both corpora (we use ``autojunk=False``, as the product does).
* ``T``: tokens of the whole gold text tokenized as one string (not the sum over ops).
* ``T_copy``: for each matching block, the tokens of ``"\\n".join(its gold lines)`` (no trailing
  ``"\\n"``), tokenized as one string, summed; a block of one empty line counts 0 tokens but still
  counts in ``K``. ``T_gen``: the same for each gap of the gold between blocks. The ``"\\n"``
  that joins two ops belongs to neither, so ``T_copy + T_gen != T`` in general.
* ``K``: matching blocks of size > 0; ``span_*``: their token counts as above.

The variants that do not reproduce it (Python, T / T_copy / K): a trailing ``"\\n"`` on each
joined block gives T_copy 6673; T as the sum over ops gives 8814; ``str.splitlines()`` (no final
empty line) gives K 229, T_copy 6521; dropping empty lines gives K 228.

Why the product counts differently: it edits whole files (the declaration is input the model
must copy), its lines keep their ``"\\n"`` so programs round-trip byte-exactly, and its tokens are
the BPE of the whole gold attributed to ops, which is what the model actually writes.
"""

from __future__ import annotations

import difflib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from engine.core.errors import ModelLoadError
from engine.core.lines import split_lines
from engine.core.tokens import token_pieces
from engine.evaluation.corpora import EditCase, shared_dir
from engine.language.oracle import line_oracle, token_oracle
from engine.language.program import (
    GEN_CLOSE,
    GEN_OPEN,
    PROGRAM_CLOSE,
    PROGRAM_OPEN,
    CopyLines,
    CopyTokens,
    Gen,
    Program,
)
from engine.language.resolve import resolve
from engine.runtime.sources import load_tokenizer

PRODUCT, PAPER = "product", "paper"
CONVENTIONS = (PRODUCT, PAPER)
MIN_SPANS = (1, 2, 4, 8, 16, 32)
EPSILONS = (1, 2, 5)
TRIALS = 5


def batch_encode(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text (no special tokens), in one batched call."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


class LineTokenCounter:
    """Per-line token counts, cached; unseen lines are tokenized together in one batch."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._counts: dict[str, int] = {}

    def prime(self, lines: Iterable[str]) -> None:
        new = list(dict.fromkeys(line for line in lines if line not in self._counts))
        for line, ids in zip(new, batch_encode(self.tokenizer, new)):
            self._counts[line] = len(ids)

    def count(self, lines: Iterable[str]) -> int:
        lines = list(lines)
        self.prime(lines)
        return sum(self._counts[line] for line in lines)


def load_analysis_tokenizer(spec: str) -> tuple[Any, str]:
    """``(tokenizer, description)`` for ``default``, ``qwen2.5`` or a Hugging Face folder path.

    Raises :class:`engine.core.errors.ModelLoadError` (or :class:`engine.evaluation.corpora.CorpusError` when the
    shared folder itself is missing) with a message that says what to fix.
    """
    if spec == "default":
        return load_tokenizer("default"), "default (SmolLM2-135M-Instruct, embedded GGUF)"
    if spec == "qwen2.5":
        folder = shared_dir() / "tokenizers" / "qwen2.5"
        if not (folder / "tokenizer.json").is_file() and not (folder / "vocab.json").is_file():
            raise ModelLoadError(
                f"tokenizer 'qwen2.5': {folder} does not exist or holds no tokenizer files "
                "(vocab.json/merges.txt or tokenizer.json); set COPY_AS_DECODE_SHARED to the shared "
                "folder that has tokenizers/qwen2.5, or pass --tokenizer <hf folder>"
            )
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(str(folder)), f"qwen2.5 ({folder})"
        except Exception as exc:  # noqa: BLE001 - one clear message
            raise ModelLoadError(f"tokenizer 'qwen2.5': cannot load {folder}: {exc}") from exc
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ModelLoadError(f"tokenizer {spec!r}: not 'default', 'qwen2.5' or an existing Hugging Face folder")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path)), str(path)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"tokenizer {spec!r}: cannot load it from {path}: {exc}") from exc


def perturb(program: Program, n_lines: int, eps: int, rng: random.Random) -> Program:
    """Shift each line-copy endpoint by ``rng.randint(-eps, eps)``, clamp to ``[1, n_lines]``, keep I <= J."""
    ops = []
    for op in program.ops:
        if isinstance(op, CopyLines):
            start = min(max(op.start + rng.randint(-eps, eps), 1), n_lines)
            end = min(max(op.end + rng.randint(-eps, eps), 1), n_lines)
            op = CopyLines(start, max(start, end))
        ops.append(op)
    return Program(tuple(ops))


def structure_text(program: Program) -> str:
    """The program with every gen body emptied: what the model writes besides gen text."""
    parts = [GEN_OPEN + GEN_CLOSE if isinstance(op, Gen) else op.serialize() for op in program.ops]
    return PROGRAM_OPEN + "".join(parts) + PROGRAM_CLOSE


@dataclass
class CaseStats:
    """Statistics of one case (token counts per the module's convention)."""

    id: str
    T: int
    T_copy: int
    spans: list[int]
    covered: dict[int, int]
    lossless_line: bool
    lossless_token: bool
    T_lines: int = 0
    T_copy_lines: int = 0
    program_tokens: int = 0
    structure_tokens: int = 0
    line_program: Program = field(default_factory=Program, repr=False)

    @property
    def T_gen(self) -> int:
        return self.T - self.T_copy


def copy_span_stats(t_copy: int, t_all: int, case_fractions: Sequence[float], spans: Sequence[int],
                    n_cases: int) -> dict[str, Any]:
    """The copy ceiling and span statistics both conventions report, from their own counts:
    f_line (pooled and per-case mean), K, and the span-length histogram's mean/p50/p95."""
    return {
        "f_line": t_copy / t_all if t_all else 0.0,
        "f_line_case_mean": sum(case_fractions) / len(case_fractions) if case_fractions else 0.0,
        "K": len(spans),
        "K_mean": len(spans) / n_cases if n_cases else 0.0,
        "span_mean": sum(spans) / len(spans) if spans else None,
        "span_p50": _percentile(spans, 50),
        "span_p95": _percentile(spans, 95),
        "span_lengths": list(spans),
    }


def _percentile(values: Sequence[int], q: float) -> float | None:
    if not values:
        return None
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def tokens_per_op(op_texts: Sequence[str], pieces: Sequence[str]) -> list[int]:
    """Number of tokens (given as text pieces tiling the concatenated ``op_texts``) starting in each op.

    A token belongs to the op whose text holds its first character; a token that starts at the
    very end (only possible if the pieces do not tile the text) goes to the last op.
    """
    counts = [0] * len(op_texts)
    if not op_texts:
        return counts
    ends, total = [], 0
    for text in op_texts:
        total += len(text)
        ends.append(total)
    op, offset = 0, 0
    for piece in pieces:
        while op < len(ends) - 1 and offset >= ends[op]:
            op += 1
        counts[op] += 1
        offset += len(piece)
    return counts


def case_stats(case: EditCase, counter: LineTokenCounter, src_ids: Sequence[int], gold_ids: Sequence[int],
               min_spans: Sequence[int] = MIN_SPANS) -> CaseStats:
    """Everything but the program-length counts (batched per corpus by :func:`analyze_cases`)."""
    tokenizer = counter.tokenizer
    src_lines, gold_lines = split_lines(case.input), split_lines(case.gold)
    program = line_oracle(case.input, case.gold)
    op_texts = ["".join(src_lines[op.start - 1: op.end]) if isinstance(op, CopyLines) else op.text
                for op in program.ops]
    lossless_line = "".join(op_texts) == case.gold and resolve(program, case.input).text == case.gold

    src_pieces, gold_pieces = token_pieces(tokenizer, src_ids), token_pieces(tokenizer, gold_ids)
    per_op = tokens_per_op(op_texts, gold_pieces)
    spans = [n for op, n in zip(program.ops, per_op) if isinstance(op, CopyLines)]
    copy_lines = sum(counter.count(split_lines(text)) for op, text in zip(program.ops, op_texts)
                     if isinstance(op, CopyLines))

    covered: dict[int, int] = {}
    lossless_token = True
    for m in min_spans:
        tprog = token_oracle(case.input, case.gold, src_ids, src_pieces, gold_ids, gold_pieces, min_span=m)
        covered[m] = sum(op.end - op.start + 1 for op in tprog.ops if isinstance(op, CopyTokens))
        if resolve(tprog, case.input, token_pieces=src_pieces).text != case.gold:
            lossless_token = False
    return CaseStats(id=case.id, T=len(gold_ids), T_copy=sum(spans), spans=spans, covered=covered,
                     lossless_line=lossless_line, lossless_token=lossless_token,
                     T_lines=counter.count(gold_lines), T_copy_lines=copy_lines, line_program=program)


def perturbation_study(cases: Sequence[EditCase], programs: Sequence[Program], epsilons: Sequence[int] = EPSILONS,
                       trials: int = TRIALS, seed: int = 0) -> dict[int, list[float]]:
    """``{eps: [exact-match rate of each trial]}``; trial ``t`` at ``eps`` uses its own seeded RNG."""
    out: dict[int, list[float]] = {}
    for eps in epsilons:
        rates = []
        for trial in range(trials):
            rng = random.Random(seed * 1_000_003 + eps * 1_000 + trial)
            ok = 0
            for case, program in zip(cases, programs):
                n_lines = len(split_lines(case.input))
                shifted = perturb(program, n_lines, eps, rng) if n_lines else program
                ok += resolve(shifted, case.input, mode="strict").text == case.gold
            rates.append(ok / len(cases) if cases else 0.0)
        out[eps] = rates
    return out


def analyze_cases(cases: Sequence[EditCase], tokenizer: Any, tokenizer_name: str = "",
                  counter: LineTokenCounter | None = None, min_spans: Sequence[int] = MIN_SPANS,
                  epsilons: Sequence[int] = EPSILONS, trials: int = TRIALS, seed: int = 0) -> dict[str, Any]:
    """Corpus-level statistics (the JSON record of one corpus; see the module docstring)."""
    counter = counter or LineTokenCounter(tokenizer)
    counter.prime(line for case in cases for text in (case.input, case.gold) for line in split_lines(text))
    src_all = batch_encode(tokenizer, [case.input for case in cases])
    gold_all = batch_encode(tokenizer, [case.gold for case in cases])
    stats = [case_stats(case, counter, src, gold, min_spans) for case, src, gold in zip(cases, src_all, gold_all)]
    programs = [s.line_program for s in stats]
    for s, full, tags in zip(stats, batch_encode(tokenizer, [p.serialize() for p in programs]),
                             batch_encode(tokenizer, [structure_text(p) for p in programs])):
        s.program_tokens, s.structure_tokens = len(full), len(tags)

    spans = [n for s in stats for n in s.spans]
    t_all, t_copy = sum(s.T for s in stats), sum(s.T_copy for s in stats)
    t_lines, t_copy_lines = sum(s.T_lines for s in stats), sum(s.T_copy_lines for s in stats)
    perturbation = perturbation_study(cases, programs, epsilons, trials, seed)
    n_line = sum(s.lossless_line for s in stats)
    n_token = sum(s.lossless_token for s in stats)
    n_both = sum(s.lossless_line and s.lossless_token for s in stats)
    program_tokens = sum(s.program_tokens for s in stats)
    with_tokens = [s for s in stats if s.T]
    return {
        "tokenizer": tokenizer_name,
        "n": len(cases),
        "T": t_all,
        "T_copy": t_copy,
        "T_gen": t_all - t_copy,
        **copy_span_stats(t_copy, t_all, [s.T_copy / s.T for s in with_tokens], spans, len(cases)),
        "T_lines": t_lines,
        "T_copy_lines": t_copy_lines,
        "f_line_lines": t_copy_lines / t_lines if t_lines else 0.0,
        "token_cover": {str(m): (sum(s.covered[m] for s in stats) / t_all if t_all else 0.0) for m in min_spans},
        "program_tokens": program_tokens,
        "structure_tokens": sum(s.structure_tokens for s in stats),
        "regen_tokens": t_all,
        "program_vs_regen": program_tokens / t_all if t_all else None,
        "lossless": [n_both, len(cases)],
        "lossless_line": [n_line, len(cases)],
        "lossless_token": [n_token, len(cases)],
        "perturbation": {str(eps): sum(rates) / len(rates) for eps, rates in perturbation.items()},
        "perturbation_trials": {str(eps): rates for eps, rates in perturbation.items()},
        "perturbation_config": {"trials": trials, "seed": seed},
    }


def paper_line_ops(source: str, gold: str) -> list[tuple[bool, str]]:
    """``(is_copy, text)`` per op under the paper convention: gold lines split on ``"\\n"``, joined with ``"\\n"``.

    Matching blocks (size > 0) are copies, the gold gaps between them gens, in gold order.
    """
    src, dst = source.split("\n"), gold.split("\n")
    matcher = difflib.SequenceMatcher(None, src, dst, autojunk=False)
    ops: list[tuple[bool, str]] = []
    cursor = 0
    for block in matcher.get_matching_blocks():
        if block.b > cursor:
            ops.append((False, "\n".join(dst[cursor:block.b])))
        if block.size:
            ops.append((True, "\n".join(dst[block.b:block.b + block.size])))
        cursor = block.b + block.size
    if cursor < len(dst):
        ops.append((False, "\n".join(dst[cursor:])))
    return ops


def analyze_cases_paper(cases: Sequence[EditCase], tokenizer: Any, tokenizer_name: str = "") -> dict[str, Any]:
    """Corpus statistics under the seed paper's convention (module docstring, "Paper convention").

    Pass the cases as the paper pairs them (:func:`engine.evaluation.corpora.body_only` for HumanEvalFix).
    Only the paper's own statistics are computed; the oracle, cover and perturbation studies are
    the product convention's.
    """
    per_case = [paper_line_ops(case.input, case.gold) for case in cases]
    texts = list(dict.fromkeys([case.gold for case in cases] + [t for ops in per_case for _, t in ops]))
    counts = {text: len(ids) for text, ids in zip(texts, batch_encode(tokenizer, texts))}
    spans: list[int] = []
    t_all = t_copy = t_gen = 0
    fractions = []
    for case, ops in zip(cases, per_case):
        case_t = counts[case.gold]
        case_spans = [counts[text] for is_copy, text in ops if is_copy]
        spans += case_spans
        t_all += case_t
        t_copy += sum(case_spans)
        t_gen += sum(counts[text] for is_copy, text in ops if not is_copy)
        if case_t:
            fractions.append(sum(case_spans) / case_t)
    return {
        "convention": PAPER,
        "tokenizer": tokenizer_name,
        "n": len(cases),
        "T": t_all,
        "T_copy": t_copy,
        "T_gen": t_gen,
        **copy_span_stats(t_copy, t_all, fractions, spans, len(cases)),
    }
