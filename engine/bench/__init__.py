"""Benchmarks: one harness, one results format, one plot helper.

* :mod:`engine.bench.kernel`: the kernel speedup s(N) = (N one-token forwards) / (one N-token
  forward) over a cached context (torch + transformers only, so the GPU script reuses it).
* :mod:`engine.bench.edits`: corpus benchmarks, ``forced`` family (every arm produces the gold;
  isolates the mechanism) and ``free`` family (the model decides; pass@1 by running tests).
* :mod:`engine.bench.arms`: each family's arms (engine mode, drafting, selector or base model,
  focus hint). :mod:`engine.evaluation.focus`: where the hint points (none, near: a cursor by the bug,
  oracle: on it).
* :mod:`engine.bench.bounds`: s(N) interpolation, the paper-style, structure-aware, fused and
  drafted bounds.
* :mod:`engine.evaluation.quality`: exact match, valid programs, collateral damage, wrong-line edits,
  tail deletions and syntax breaks of free edits.
* :mod:`engine.bench.merge`: partial results (case ranges) merged into one record.
* :mod:`engine.bench.runner`: runs a corpus case's tests on a candidate, isolated, with a timeout.
* :mod:`engine.bench.local_vllm`: a local vLLM server on loopback (the tests' and the scripts').
* :mod:`engine.bench.harness`: what every benchmark shares (machine description, forward meter,
  JSON writing, engine cache). :mod:`engine.bench.plot`: every PNG. :mod:`engine.bench.report`:
  Markdown tables from result files.

Timing rule: every number that is compared is a ratio measured side by side in one process,
arms interleaved per case (rotating their order), after a warm-up; never an absolute time
compared across runs, and never a timed assertion in a test.
"""
