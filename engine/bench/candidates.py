"""``bench edits --candidates K,... --check tests``: checked candidates on a corpus (engine.candidates).

Per case and arm (``K`` or ``KxR``: up to K candidates a round, R rounds, default 1; the arms'
order rotated per case), one search, near the cursor (engine.evaluation.focus; or with no hint at
all: ``--candidates-focus none``), checked by the case's own tests through the user's check runner: the candidate file
sits in a temporary folder beside a file holding the test code, and the check command is
``python -m engine.bench.corpus_check`` on the two. Every search starts as a first edit
(Engine.forget_prompts). Recorded per arm: whether a candidate passed and in which round, the
time to it, the single-shot edit's time (the first candidate's decode: the edit users get without
candidates), each candidate's forwarded tokens, each round's tally (distinct candidates against
the K asked, what became of the other decodes, the round's decode time: engine.candidates.tally),
and whether the written fix fails the tests when run again directly (a wrong fix written: 0 by
construction, counted anyway)."""

from __future__ import annotations

import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.api import EditRequest, Engine
from engine.bench.edits import WARMUP_INPUT
from engine.bench.harness import machine_info, median
from engine.bench.runner import run_tests
from engine.candidates import CheckSpec, search_fixes
from engine.core.lines import split_lines
from engine.core.tokens import encode
from engine.evaluation.corpora import EditCase, load_corpus, repo_root
from engine.evaluation.focus import focus_for
from engine.training.synth import first_changed_line

SUFFIX = {"python": ".py", "javascript": ".js"}
CORPORA = ("humanevalfix-python", "humanevalfix-js")  # the corpora whose tests the check runner runs


def check_for(case: EditCase, folder: Path, timeout: float) -> tuple[CheckSpec, Path]:
    """The case's input as a file in ``folder``, its test code beside it, and the check command."""
    suffix = SUFFIX[case.language]
    path, test = folder / f"case{suffix}", folder / f"corpus_test{suffix}"
    path.write_text(case.input, encoding="utf-8")
    test.write_text(case.test, encoding="utf-8")
    command = (f"{shlex.quote(sys.executable)} -m engine.bench.corpus_check {case.language} "
               f"{shlex.quote(str(test))} {{file}} --timeout {timeout:g}")
    return CheckSpec(command, timeout + 10, cwd=repo_root()), path


def near_focus(case: EditCase, setting: str) -> int | None:
    """The focus a search sends for ``case`` (engine.evaluation.focus: ``near`` is the editor's cursor)."""
    try:
        changed = first_changed_line(case.input, case.gold)
    except ValueError:
        changed = None
    return focus_for(setting, changed, len(split_lines(case.input)), case.id)


def parse_arms(spec: str) -> list[tuple[int, int]]:
    """``1,4,8x2`` -> [(1, 1), (4, 1), (8, 2)]: (candidates a round, rounds) per arm."""
    arms = []
    for item in spec.split(","):
        k, _, rounds = item.strip().partition("x")
        arms.append((int(k), int(rounds or 1)))
    if not arms or min(min(arm) for arm in arms) < 1:
        raise ValueError(f"--candidates {spec!r}: each K and R must be at least 1")
    return arms


def label(arm: tuple[int, int]) -> str:
    return f"{arm[0]}" if arm[1] == 1 else f"{arm[0]}x{arm[1]}"


def run_arm(engine: Engine, case: EditCase, k: int, rounds: int, focus: str, timeout: float) -> dict[str, Any]:
    """One search on ``case`` with up to ``k`` candidates a round, as a record."""
    engine.forget_prompts()
    cap = min(4096, int(1.5 * len(encode(engine.loaded.tokenizer, case.input))) + 64)
    request = EditRequest(case.input, case.instruction, mode=engine.default_mode(), max_new_tokens=cap,
                          focus_line=near_focus(case, focus), language=case.language)
    with tempfile.TemporaryDirectory(prefix="cad-candidates-") as folder:
        check, path = check_for(case, Path(folder), timeout)
        search = search_fixes(engine, request, k=k, check=check, max_rounds=rounds, file_path=path)
    first = min(search.candidates, key=lambda c: c.index) if search.candidates else None
    passed = search.passed
    wrong = passed is not None and not run_tests(case, passed.result.output_text, timeout).passed
    return {"k": k, "max_rounds": rounds, "verified": passed is not None, "round": passed.round if passed else None,
            "passed_index": passed.index if passed else None, "wrong_written": wrong,
            "seconds": round(search.seconds, 3),
            "seconds_to_pass": None if search.seconds_to_pass is None else round(search.seconds_to_pass, 3),
            "single_shot_s": round(first.seconds, 3) if first else None,
            "first_passed": bool(first and first.check and first.check.passed),
            "decodes": search.decodes, "rounds": search.rounds, "stop_reason": search.stop_reason,
            "distinct": search.distinct, "tallies": [t.json() for t in search.tallies],
            "candidates": [{"index": c.index, "round": c.round, "how": c.how, "score": round(c.score, 4),
                            "refused": c.refused, "passed": None if c.check is None else c.check.passed,
                            "seconds": round(c.seconds, 3), "forwarded": c.forwarded} for c in search.candidates]}


def warm_up(engine: Engine) -> None:
    """One edit first: a process's first forwards are several times slower (thrown away)."""
    engine.edit(EditRequest(WARMUP_INPUT, "Fix the bug in add.", mode=engine.default_mode(), max_new_tokens=48,
                            language="python"))


def run_candidates_corpus(engine: Engine, corpus: str, arms: Sequence[tuple[int, int]], *, limit: int | None,
                          offset: int, focus: str, timeout: float, command: str,
                          on_partial: Callable[[dict[str, Any]], None] | None = None,
                          progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Every arm on the corpus's cases ``offset .. offset + limit``; the record."""
    cases = load_corpus(corpus)[offset:offset + limit if limit else None]
    warm_up(engine)
    records: list[dict[str, Any]] = []
    labels = [label(arm) for arm in arms]

    def record(complete: bool) -> dict[str, Any]:
        return {"corpus": corpus, "arms": labels, "focus": focus, "offset": offset,
                "cases": len(records), "complete": complete, "command": command, "model": engine.name,
                "backend": engine.model_for(engine.default_mode()).runtime.describe(),
                "machine": machine_info(engine.loaded.device), "summary": summarize(records, arms),
                "records": records}

    for i, case in enumerate(cases):
        runs = {}
        for arm in list(arms[i % len(arms):]) + list(arms[:i % len(arms)]):
            progress(f"{case.id}: K={label(arm)}")
            runs[label(arm)] = run_arm(engine, case, arm[0], arm[1], focus, timeout)
        records.append({"id": case.id, "arms": {name: runs[name] for name in labels}})
        if on_partial is not None:
            on_partial(record(False))
    return record(True)


def extra_candidate_cost(run: dict[str, Any]) -> float | None:
    """The first round's decode time per distinct candidate after the first (every decode it
    spent on them, repeats and refused ones included), over the first decode's time; None with
    fewer than 2 distinct candidates."""
    tally = run["tallies"][0] if run.get("tallies") else None
    if tally is None or tally["distinct"] < 2 or not run["single_shot_s"]:
        return None
    return (tally["seconds"] - run["single_shot_s"]) / (tally["distinct"] - 1) / run["single_shot_s"]


def extra_decode_cost(run: dict[str, Any]) -> float | None:
    """The first round's time per decode after the first (a repeat or refused one included), over
    the first decode's time: what one more variant costs, whatever it gives; None with one decode."""
    tally = run["tallies"][0] if run.get("tallies") else None
    if tally is None or tally["decodes"] < 2 or not run["single_shot_s"]:
        return None
    return (tally["seconds"] - run["single_shot_s"]) / (tally["decodes"] - 1) / run["single_shot_s"]


def reach(runs: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """How often the first round found the K distinct candidates asked: ``reached_k``;
    ``reached_k_or_passed`` also counts a round a passing check ended before it needed more; and
    what became of the other decodes (summed, and over the rounds that fell short)."""
    firsts = [r["tallies"][0] for r in runs if r.get("tallies")]
    lost: dict[str, int] = {}
    short_lost: dict[str, int] = {}
    for tally in firsts:
        for kind, n in tally["lost"].items():
            lost[kind] = lost.get(kind, 0) + n
            if tally["short"]:
                short_lost[kind] = short_lost.get(kind, 0) + n
    decodes = sum(t["decodes"] for t in firsts)
    distinct = sum(t["distinct"] for t in firsts)
    return {"reached_k": sum(1 for t in firsts if t["distinct"] >= k),
            "reached_k_or_passed": sum(1 for t in firsts if t["distinct"] >= k or t["ended"] == "passed"),
            "short": sum(1 for t in firsts if t["short"]),
            "distinct_found": distinct, "decodes": decodes,
            "decodes_per_distinct": round(decodes / distinct, 2) if distinct else None,
            "lost": lost, "lost_in_short_rounds": short_lost}


def summarize(records: Sequence[dict[str, Any]], arms: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Per arm and round: verified fixes, wrong fixes written, the median time to a verified fix
    over the single-shot edit's (the search's own first candidate, the edit users get without
    candidates, timed in the same run: a shared machine's load moves both alike), the forwarded
    tokens of each candidate after the first over the first's, the decode time per extra distinct
    candidate and per extra decode over the first's (:func:`extra_candidate_cost`,
    :func:`extra_decode_cost`), and how often K were found
    (:func:`reach`)."""
    out: dict[str, Any] = {}
    for arm in arms:
        runs = [r["arms"][label(arm)] for r in records]
        ratios = [a["seconds_to_pass"] / a["single_shot_s"] for a in runs if a["verified"] and a["single_shot_s"]]
        by_index = [sorted(a["candidates"], key=lambda c: c["index"]) for a in runs]
        extra = [c["forwarded"] / tried[0]["forwarded"] for tried in by_index if tried and tried[0]["forwarded"]
                 for c in tried[1:]]
        out[label(arm)] = {"cases": len(runs),
                           "verified_by_round": [sum(1 for a in runs if a["verified"] and a["round"] <= n)
                                                 for n in range(1, arm[1] + 1)],
                           "wrong_written": sum(1 for a in runs if a["wrong_written"]),
                           "single_shot_passed": sum(1 for a in runs if a["first_passed"]),
                           "median_time_to_fix_vs_single_shot": median(ratios),
                           "median_extra_candidate_forwarded_vs_first": median(extra),
                           "mean_decodes": round(sum(a["decodes"] for a in runs) / len(runs), 2) if runs else None,
                           "median_extra_candidate_time_vs_first": median(
                               [c for c in map(extra_candidate_cost, runs) if c is not None]),
                           "median_extra_decode_time_vs_first": median(
                               [c for c in map(extra_decode_cost, runs) if c is not None]),
                           **reach(runs, arm[0])}
    return out
