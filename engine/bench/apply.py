"""``copy-as-decode bench apply``: every apply arm on held-out synthetic cases
(engine.bench.apply_cases), side by side.

Arms: ``aligner`` (the aligner's program, no model: what ``auto`` runs), ``program`` (the model
writes the program, the aligner's drafted), ``program-undrafted`` (the same without drafts: the
same program, more forwards), ``speculative`` (the model rewrites the file, drafting from the
rules' merge: the merge as the prediction), ``speculative-file`` (the same rewrite drafting from
the file as it is) and ``ar`` (the model rewrites the file, undrafted). Per case and arm: exact
match of the merged file with the gold, lines damaged (lines of the gold missing or wrong, by a
line diff), the wall time of the whole apply (prompt included) and the effective throughput (the
merged file's tokens / that time), against the backend's plain decoding rate (tokens per second
of an ar decode, measured in the same run). The rewrites are the model's, so their exactness is
the model's quality; a drafted rewrite is scored besides against ar's on the same case
(:func:`rewrites`): the same text (under an exact verify it must be), its drafts' acceptance,
and ar's time over its own.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from engine.api import EditError, EditRequest, Engine
from engine.apply.job import TEXT_APPLY
from engine.bench.apply_cases import ApplyCase
from engine.bench.harness import median
from engine.core.tokens import encode

ARMS = ("aligner", "program", "program-undrafted", "speculative", "speculative-file", "ar")
DEFAULT_ARMS = ARMS
TEXT_ARMS = ("speculative", "speculative-file", "ar")
DRAFTED_ARMS = ("speculative", "speculative-file")
SIZE_BUCKETS = ((0, 100, "<100"), (100, 500, "100-499"), (500, 1500, "500-1499"), (1500, 10 ** 9, ">=1500"))
PLAIN_TOKENS = 64  # tokens of the ar decode that measures the plain decoding rate
# The program arms' budget: an apply's program is copies and a few gens (the aligner's programs on
# the cases need fewer than 100 tokens); a program that runs past it is unfinished, so not exact.
PROGRAM_TOKENS = 256


def arm_request(arm: str, case: ApplyCase, gold_tokens: int, program_tokens: int = PROGRAM_TOKENS,
                verify: str = "auto") -> EditRequest:
    """The apply request an arm runs for ``case`` (``program_tokens``: the program arms' budget of
    new tokens: chosen and forced, the copies' tokens not counted; ``verify``: how the text arms'
    verifies accept a draft, engine.core.choices.Verify)."""
    base = EditRequest(case.file, "", update=case.update, language=case.language, verify=verify)
    if arm == "aligner":
        return replace(base, mode="aligner")
    if arm in ("program", "program-undrafted"):
        return replace(base, mode="program", draft=arm == "program", max_new_tokens=program_tokens)
    budget = int(gold_tokens * 1.5) + 64
    if arm == "speculative-file":  # the apply's own prompt as an edit: speculative drafts from the file
        return replace(base, mode="speculative", update=None, max_new_tokens=budget,
                       instruction=TEXT_APPLY.format(instruction="", update=case.update))
    return replace(base, mode=arm, max_new_tokens=budget)


def damaged_lines(gold: str, output: str) -> int:
    """Lines of ``gold`` that ``output`` lacks or has wrong (a line diff's changed gold lines, or
    the lines it adds where gold has none)."""
    ops = difflib.SequenceMatcher(None, gold.splitlines(), output.splitlines(), autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")


def plain_rate(engine: Engine, case: ApplyCase) -> float:
    """The backend's plain decoding rate (tokens/s): an ar decode of :data:`PLAIN_TOKENS` tokens."""
    engine.forget_prompts()
    result = engine.edit(EditRequest(case.file, "Rewrite the code.", mode="ar", max_new_tokens=PLAIN_TOKENS))
    return result.tokens.generated / max(result.timings.get("decode_s", 0.0), 1e-9)


def run_cases(engine: Engine, cases: Sequence[ApplyCase], arms: Sequence[str], text_max_lines: int,
              progress: Callable[[str], None] = lambda _: None, program_tokens: int = PROGRAM_TOKENS,
              verify: str = "auto") -> dict[str, Any]:
    """Every arm on every case (text arms only on files of at most ``text_max_lines`` lines)."""
    tokenizer = engine.loaded.tokenizer
    engine.prime()
    rate = plain_rate(engine, cases[0]) if cases else 0.0
    rows = []
    for case in cases:
        gold_tokens = len(encode(tokenizer, case.gold))
        for arm in arms:
            if arm in TEXT_ARMS and case.size > text_max_lines:
                continue
            engine.forget_prompts()
            started = time.perf_counter()
            try:
                result = engine.edit(arm_request(arm, case, gold_tokens, program_tokens, verify))
            except EditError as exc:  # refused (a window too long for the context): nothing merged
                rows.append(refused_row(case, arm, str(exc), gold_tokens))
                progress(f"{case.name:40s} {arm:18s} refused: {exc}")
                continue
            wall = time.perf_counter() - started
            row = {"case": case.name, "language": case.language, "style": case.style, "lines": case.size,
                   "arm": arm, "exact": result.output_text == case.gold,
                   "damaged_lines": damaged_lines(case.gold, result.output_text), "stop_reason": result.stop_reason,
                   "seconds": round(wall, 4), "merged_tokens": gold_tokens,
                   "throughput": round(gold_tokens / max(wall, 1e-9), 1),
                   "prompt_tokens": result.prompt_tokens, "generated": result.tokens.generated,
                   "unplaced": len(result.unplaced)}
            if arm in TEXT_ARMS:
                row.update(drafted=int(result.breakdown.get("drafted_tokens", 0)), accepted=result.tokens.copied,
                           output=result.output_text, raw=result.raw_output)
            rows.append(row)
            progress(f"{case.name:40s} {arm:18s} exact={row['exact']!s:5s} {wall:7.2f}s "
                     f"{row['throughput']:9.1f} tok/s")
    comparison = rewrites(rows)
    for row in rows:
        row.pop("output", None)
        row.pop("raw", None)
    return {"plain_rate": round(rate, 2), "rows": rows, "summary": summarize(rows, rate),
            "rewrites": comparison}


def same_rewrite(arm: dict[str, Any], ar: dict[str, Any]) -> bool:
    """Did the drafted arm write what ar wrote? Its raw reply equals ar's, or, where a decode was
    cut short (a loop stopped, the token limit), one reply is the start of the other: a decode
    stopped as a loop is checked every few chunks, and a drafted chunk is longer than a step's."""
    if arm["stop_reason"] == ar["stop_reason"] == "done":
        return arm["raw"] == ar["raw"]
    return arm["raw"].startswith(ar["raw"]) or ar["raw"].startswith(arm["raw"])


def rewrites(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each drafted rewrite arm against ar on the cases both ran: how many merged files equal ar's
    and how many replies are ar's (:func:`same_rewrite`; all, under an exact verify), the drafts'
    acceptance (accepted / drafted tokens), decode steps (one forward each) against ar's, and ar's
    wall time over the arm's (median and total)."""
    ar = {r["case"]: r for r in rows if r["arm"] == "ar" and r["stop_reason"] != "refused"}
    out: dict[str, Any] = {}
    for arm in DRAFTED_ARMS:
        pairs = [(r, ar[r["case"]]) for r in rows if r["arm"] == arm and r["case"] in ar
                 and r["stop_reason"] != "refused"]
        if not pairs:
            continue
        drafted = sum(r["drafted"] for r, _ in pairs)
        ratios = [a["seconds"] / max(r["seconds"], 1e-9) for r, a in pairs]
        out[arm] = {"cases": len(pairs), "same_as_ar": sum(r["output"] == a["output"] for r, a in pairs),
                    "same_reply_as_ar": sum(same_rewrite(r, a) for r, a in pairs),
                    "finished": sum(r["stop_reason"] == "done" for r, _ in pairs),
                    "exact_vs_gold": sum(r["exact"] for r, _ in pairs), "drafted_tokens": drafted,
                    "accepted_tokens": sum(r["accepted"] for r, _ in pairs),
                    "acceptance": round(sum(r["accepted"] for r, _ in pairs) / drafted, 3) if drafted else None,
                    "steps": sum(r["generated"] for r, _ in pairs), "ar_steps": sum(a["generated"] for _, a in pairs),
                    "x_ar_median": round(median(ratios) or 0.0, 2),
                    "x_ar_total": round(sum(a["seconds"] for _, a in pairs)
                                        / max(sum(r["seconds"] for r, _ in pairs), 1e-9), 2),
                    "different_cases": [r["case"] for r, a in pairs
                                        if r["output"] != a["output"] or not same_rewrite(r, a)]}
    return out


def refused_row(case: ApplyCase, arm: str, reason: str, gold_tokens: int) -> dict[str, Any]:
    """The row of an apply the engine refused: not exact, the file left as it was."""
    return {"case": case.name, "language": case.language, "style": case.style, "lines": case.size, "arm": arm,
            "exact": False, "damaged_lines": damaged_lines(case.gold, case.file), "stop_reason": "refused",
            "reason": reason, "seconds": 0.0, "merged_tokens": gold_tokens, "throughput": 0.0, "prompt_tokens": 0,
            "generated": 0, "unplaced": 0}


def _bucket(lines: int) -> str:
    return next(label for low, high, label in SIZE_BUCKETS if low <= lines < high)


def summarize(rows: list[dict[str, Any]], rate: float) -> dict[str, Any]:
    """Per arm: exact-match rate, damaged lines, median throughput and its ratio to the plain
    rate, overall and by style, size bucket and language."""
    out: dict[str, Any] = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]
        out[arm] = {"cases": len(mine), **_scores(mine, rate)}
        for key, label in (("style", "by_style"), ("language", "by_language")):
            out[arm][label] = {v: _scores([r for r in mine if r[key] == v], rate)
                               for v in dict.fromkeys(r[key] for r in mine)}
        out[arm]["by_size"] = {b: _scores([r for r in mine if _bucket(r["lines"]) == b], rate)
                               for _, _, b in SIZE_BUCKETS if any(_bucket(r["lines"]) == b for r in mine)}
    return out


def _scores(rows: list[dict[str, Any]], rate: float) -> dict[str, Any]:
    throughput = median([r["throughput"] for r in rows])
    return {"n": len(rows), "exact": sum(r["exact"] for r in rows), "exact_rate": round(sum(r["exact"] for r in rows)
                                                                                        / max(1, len(rows)), 3),
            "damaged_lines": sum(r["damaged_lines"] for r in rows),
            "median_throughput": round(throughput, 1) if throughput is not None else None,
            "x_plain": round(throughput / rate, 1) if throughput and rate else None}


def table_rows(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """Rows of the terminal table: arm, cases, exact, damaged lines, median tokens/s, x plain."""
    return [(arm, str(s["cases"]), f"{s['exact']}/{s['n']}", str(s["damaged_lines"]),
             f"{s['median_throughput']}", f"{s['x_plain']}") for arm, s in data["summary"].items()]
