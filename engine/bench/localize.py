"""How well does a signal find the line to fix? The localizer's benchmark (``bench localize``).

Per corpus case: the region's per-line surprise (:mod:`engine.decoding.localize`) under the program-mode
model (the selector; ``base`` too when asked), the first line the gold changes, every line it
edits, and the near cursor the ``program-near`` arm sends (:mod:`engine.evaluation.focus`). Each
case's per-line scores are stored, so every ranking below is recomputed from the JSON without a
model. A ranking *hits* at k when the first changed line is among its first k lines (``any``:
when any line the gold edits is).

Rankings: ``cursor`` (lines by distance from the near cursor: what the hint alone gives),
``<statistic>`` (surprise alone, no cursor: what a request without a focus can use) and
``<statistic> x cursor/<scale>`` (surprise times the cursor prior ``1 / (1 + d / scale)``);
``code ...``: the same over code lines only (comments and docstrings left out:
:func:`engine.decoding.localize.prose_lines`); ``last`` and ``longest``: the last code line and the line
with the most tokens, baselines any signal must beat.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.core.lines import split_lines
from engine.decoding.localize import (
    STATISTICS,
    LineSurprise,
    line_surprise,
    prose_lines,
    rank_lines,
)
from engine.decoding.prompt import PromptParts
from engine.evaluation.corpora import load_corpus
from engine.evaluation.focus import focus_for
from engine.evaluation.quality import edit_sites
from engine.training.synth import first_changed_line

SCALES = (1.0, 2.0, 4.0)


def case_record(engines: dict[str, Any], case: Any) -> dict[str, Any]:
    """One case: the gold's lines, the near cursor and each model's per-line surprise."""
    n = len(split_lines(case.input))
    try:
        changed = first_changed_line(case.input, case.gold)
    except ValueError:
        changed = None
    parts = PromptParts(instruction=case.instruction, region=case.input, language=case.language)
    rec: dict[str, Any] = {"id": case.id, "lines": n, "changed": changed,
                           "sites": sorted(i + 1 for i in edit_sites(case.input, case.gold)),
                           "near": focus_for("near", changed, n, case.id), "models": {}}
    for name, loaded in engines.items():
        s = line_surprise(loaded, parts)
        rec["models"][name] = {"seconds": round(s.seconds, 4), "prompt_tokens": s.prompt_tokens,
                               "region_tokens": s.region_tokens,
                               "scores": [[x.tokens, round(x.mean, 4), round(x.max, 4), round(x.total, 4)]
                                          for x in s.lines]}
    return rec


def _surprise(scores: Sequence[Sequence[float]]) -> list[LineSurprise]:
    return [LineSurprise(i, int(t), mean, mx, total) for i, (t, mean, mx, total) in enumerate(scores, start=1)]


def rankings(rec: dict[str, Any], region: str, model: str, language: str = "") -> dict[str, list[int]]:
    """Every ranking of one case under one model's scores (module docstring)."""
    lines = _surprise(rec["models"][model]["scores"])
    cursor = rec["near"]
    prose = prose_lines(region, language)
    candidates = [s.line for s in lines if s.tokens and split_lines(region)[s.line - 1].strip()]
    code = [line for line in candidates if line not in prose]
    out = {"cursor": sorted(candidates, key=lambda line: (abs(line - cursor), line)) if cursor else [],
           "last": sorted(code, reverse=True),
           "longest": sorted(code, key=lambda line: (-lines[line - 1].tokens, line))}
    for prefix, exclude in (("", frozenset()), ("code ", prose)):
        for statistic in STATISTICS:
            out[prefix + statistic] = rank_lines(lines, region, statistic, exclude=exclude)
            if cursor is None:
                continue
            for scale in SCALES:
                out[f"{prefix}{statistic} x cursor/{scale:g}"] = rank_lines(
                    lines, region, statistic, cursor=cursor, scale=scale, exclude=exclude)
    return out


def summarize(records: Sequence[dict[str, Any]], regions: dict[str, str], language: str = "") -> dict[str, Any]:
    """Per model and ranking: cases, top-1 / top-3 hits of the first changed line and of any gold line."""
    out: dict[str, Any] = {}
    models = sorted({m for r in records for m in r["models"]})
    for model in models:
        table: dict[str, dict[str, int]] = {}
        for rec in records:
            if rec["changed"] is None or model not in rec["models"]:
                continue
            for name, ranked in rankings(rec, regions[rec["id"]], model, language).items():
                row = table.setdefault(name, {"cases": 0, "top1": 0, "top3": 0, "top1_any": 0, "top3_any": 0})
                row["cases"] += 1
                row["top1"] += rec["changed"] in ranked[:1]
                row["top3"] += rec["changed"] in ranked[:3]
                row["top1_any"] += bool(set(ranked[:1]) & set(rec["sites"]))
                row["top3_any"] += bool(set(ranked[:3]) & set(rec["sites"]))
        timed = [r["models"][model] for r in records if model in r["models"]]
        out[model] = {"rankings": table,
                      "seconds_mean": sum(t["seconds"] for t in timed) / max(1, len(timed)),
                      "prompt_tokens_mean": sum(t["prompt_tokens"] for t in timed) / max(1, len(timed)),
                      "region_tokens_mean": sum(t["region_tokens"] for t in timed) / max(1, len(timed))}
    return out


def run_localize(engine: Any, corpus: str, limit: int | None = None, offset: int = 0, base: bool = False,
                 on_case: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The localizer's results record for ``corpus`` (the JSON ``bench localize`` writes)."""
    cases = load_corpus(corpus)[offset:]
    if limit is not None:
        cases = cases[:limit]
    engines = {"selector": engine.model_for("program")}
    if base and engine.selector_model is not None:
        engines["base"] = engine.loaded
    started = time.perf_counter()
    records = []
    for i, case in enumerate(cases):
        records.append(case_record(engines, case))
        if on_case is not None:
            on_case(i + 1, len(cases))
    regions = {c.id: c.input for c in cases}
    language = cases[0].language if cases else ""
    return {"corpus": corpus, "cases": len(records), "offset": offset, "limit": limit,
            "models": {k: v.name + (f" + {v.selector}" if v.selector else "") for k, v in engines.items()},
            "summary": summarize(records, regions, language), "elapsed_s": round(time.perf_counter() - started, 1),
            "per_case": records}


def localize_table(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """Rows (model, ranking, top-1, top-3, top-1 any, top-3 any) of a results record."""
    rows = []
    for model, entry in data["summary"].items():
        for name, row in entry["rankings"].items():
            n = row["cases"]
            rows.append((model, name, f"{row['top1']}/{n}", f"{row['top3']}/{n}", f"{row['top1_any']}/{n}",
                         f"{row['top3_any']}/{n}"))
    return rows
