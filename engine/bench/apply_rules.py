"""The merges no model writes, side by side on the same cases: ``lines`` (the line rules alone,
:func:`engine.apply.align.align`) and ``structure`` (the structure-aware merge, what ``auto``
runs: :func:`engine.apply.structure.merged_alignment`). Each merge then meets the verdict's
syntax check (a merge that breaks a file that parsed is refused, as every front door does).

Per case and arm: ``exact``; ``whitespace`` (differs from the gold in blank lines or trailing
blanks only); ``wrong`` (written, and wrong beyond whitespace); ``refused`` (chunks unplaced, or
the syntax check refused it); the merge's time. Summaries by shape (style), size and language.
The cases (engine.bench.apply_cases, engine.bench.apply_shapes) are cut from sources that do not
change with the code measured: this repository's own at a pinned commit (engine.bench.pinned),
installed packages and toolchains.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from engine.apply.align import Alignment, align
from engine.apply.job import AlignedUpdate
from engine.apply.structure import merged_alignment
from engine.bench.apply import SIZE_BUCKETS, damaged_lines
from engine.bench.harness import median
from engine.checks.syntax import check_edit
from engine.decoding.request import EditRequest
from engine.training.apply.updates import ApplyCase

RULE_ARMS: dict[str, Callable[[Sequence[str], Sequence[str], str], Alignment]] = {
    "lines": lambda file, update, language: align(file, update),
    "structure": merged_alignment,
}


def merge_text(arm: str, case: ApplyCase) -> tuple[str | None, int, list[str]]:
    """The arm's merged file (None: refused for unplaced chunks), the count of unplaced chunks,
    and the merge's notes."""
    request = EditRequest(case.file, "", update=case.update, language=case.language)
    merge = AlignedUpdate(request, RULE_ARMS[arm])
    if merge.stop != "done":
        return None, len(merge.unplaced), merge.alignment.notes
    return merge.ending("".join(step.text for step in merge.steps)), 0, merge.alignment.notes


def whitespace_only(gold: str, output: str) -> bool:
    """``output`` differs from ``gold`` in blank lines and trailing blanks alone."""
    def shape(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    return output != gold and shape(output) == shape(gold)


def rule_row(arm: str, case: ApplyCase) -> dict[str, Any]:
    started = time.perf_counter()
    output, unplaced, notes = merge_text(arm, case)
    seconds = time.perf_counter() - started
    refused = output is None
    syntax = None if refused else check_edit(case.file, output, case.language)
    if syntax is not None and syntax.breaks:
        refused = True
    exact = not refused and output == case.gold
    ws = not refused and not exact and output is not None and whitespace_only(case.gold, output)
    return {"case": case.name, "language": case.language, "style": case.style, "lines": case.size, "arm": arm,
            "exact": exact, "whitespace": ws, "wrong": not refused and not exact and not ws, "refused": refused,
            "unplaced": unplaced, "syntax_refused": bool(syntax is not None and syntax.breaks),
            "damaged_lines": damaged_lines(case.gold, output if output is not None else case.file),
            "seconds": round(seconds, 6), "notes": notes}


def run_rule_arms(cases: Sequence[ApplyCase], arms: Sequence[str],
                  progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every rule arm on every case: rows and summaries."""
    rows = []
    for case in cases:
        for arm in arms:
            row = rule_row(arm, case)
            rows.append(row)
            verdict = next(k for k in ("exact", "whitespace", "wrong", "refused") if row[k])
            progress(f"{case.name[:60]:60s} {arm:10s} {verdict:10s} {row['seconds'] * 1000:8.1f} ms")
    return {"rows": rows, "summary": summarize_rules(rows), "timing_2000_lines": timed_merges(cases, arms)}


TIMED_LINES = (1500, 2500)  # the files the merge's time target is about (a 2,000-line file)
TIMED_REPEATS = 5


def timed_merges(cases: Sequence[ApplyCase], arms: Sequence[str], repeats: int = TIMED_REPEATS) -> dict[str, Any]:
    """Each arm's merge time on the cases of about 2,000 lines (:data:`TIMED_LINES`), ``repeats``
    times each, the arms interleaved so that a loaded machine slows both alike: median and p95
    (ms) and the structure-aware merge's ratio to the line rules'."""
    timed = [c for c in cases if TIMED_LINES[0] <= c.size <= TIMED_LINES[1]]
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for _ in range(repeats):
        for case in timed:
            for arm in arms:
                started = time.perf_counter()
                merge_text(arm, case)
                times[arm].append(time.perf_counter() - started)
    out: dict[str, Any] = {"cases": len(timed), "repeats": repeats, "lines": list(TIMED_LINES)}
    for arm, seconds in times.items():
        seconds.sort()
        if seconds:
            out[arm] = {"median_ms": round(1000 * (median(seconds) or 0.0), 2),
                        "p95_ms": round(1000 * seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 2)}
    if "lines" in out and "structure" in out:
        out["structure_over_lines_median"] = round(out["structure"]["median_ms"] / max(out["lines"]["median_ms"], 1e-9), 2)
    return out


def _bucket(lines: int) -> str:
    return next(label for low, high, label in SIZE_BUCKETS if low <= lines < high)


def rule_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = max(1, len(rows))
    times = sorted(r["seconds"] for r in rows)
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))] if times else None
    return {"n": len(rows), **{k: sum(r[k] for r in rows) for k in ("exact", "whitespace", "wrong", "refused")},
            "exact_rate": round(sum(r["exact"] for r in rows) / n, 3),
            "wrong_rate": round(sum(r["wrong"] for r in rows) / n, 3),
            "median_ms": round(1000 * (median(times) or 0.0), 2), "p95_ms": round(1000 * (p95 or 0.0), 2)}


def summarize_rules(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: the scores overall and by style (shape), size bucket and language."""
    out: dict[str, Any] = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]
        out[arm] = {"cases": len(mine), **rule_scores(mine)}
        for key, label in (("style", "by_style"), ("language", "by_language")):
            out[arm][label] = {v: rule_scores([r for r in mine if r[key] == v])
                               for v in dict.fromkeys(r[key] for r in mine)}
        out[arm]["by_size"] = {b: rule_scores([r for r in mine if _bucket(r["lines"]) == b])
                               for _, _, b in SIZE_BUCKETS if any(_bucket(r["lines"]) == b for r in mine)}
    return out


def rule_table(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """Rows of the terminal table: arm, group, cases, exact, whitespace-only, wrong, refused, p95 ms."""
    rows = []
    for arm, s in data["summary"].items():
        rows.append((arm, "all", str(s["n"]), f"{s['exact']} ({s['exact_rate']:.1%})", str(s["whitespace"]),
                     str(s["wrong"]), str(s["refused"]), f"{s['p95_ms']}"))
        for label in ("by_style", "by_language", "by_size"):
            for group, g in s[label].items():
                rows.append((arm, group, str(g["n"]), f"{g['exact']} ({g['exact_rate']:.1%})", str(g["whitespace"]),
                             str(g["wrong"]), str(g["refused"]), f"{g['p95_ms']}"))
    return rows
