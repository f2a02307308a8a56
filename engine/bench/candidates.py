"""``bench edits --candidates K,... --check tests``: checked candidates on a corpus (engine.candidates).

Per case and K (the arms, their order rotated per case), one search of up to K candidates a
round and up to ``rounds`` rounds, near the cursor (engine.evaluation.focus) and without a hint
beyond it, checked by the case's own tests through the user's check runner: the candidate file
sits in a temporary folder beside a file holding the test code, and the check command is
``python -m engine.bench.corpus_check`` on the two. Every search starts as a first edit
(Engine.forget_prompts). Recorded per arm: whether a candidate passed and in which round, the
time to it, the single-shot edit's time (the first candidate's decode: the edit users get without
candidates), each candidate's forwarded tokens, and whether the written fix fails the tests when
run again directly (a wrong fix written: 0 by construction, counted anyway)."""

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
    try:
        changed = first_changed_line(case.input, case.gold)
    except ValueError:
        changed = None
    return focus_for(setting, changed, len(split_lines(case.input)), case.id)


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
    return {"k": k, "verified": passed is not None, "round": passed.round if passed else None,
            "passed_index": passed.index if passed else None, "wrong_written": wrong,
            "seconds": round(search.seconds, 3),
            "seconds_to_pass": None if search.seconds_to_pass is None else round(search.seconds_to_pass, 3),
            "single_shot_s": round(first.seconds, 3) if first else None,
            "first_passed": bool(first and first.check and first.check.passed),
            "decodes": search.decodes, "rounds": search.rounds, "stop_reason": search.stop_reason,
            "candidates": [{"index": c.index, "round": c.round, "how": c.how, "score": round(c.score, 4),
                            "refused": c.refused, "passed": None if c.check is None else c.check.passed,
                            "seconds": round(c.seconds, 3), "forwarded": c.forwarded} for c in search.candidates]}


def warm_up(engine: Engine) -> None:
    """One edit first: a process's first forwards are several times slower (thrown away)."""
    engine.edit(EditRequest(WARMUP_INPUT, "Fix the bug in add.", mode=engine.default_mode(), max_new_tokens=48,
                            language="python"))


def run_candidates_corpus(engine: Engine, corpus: str, ks: Sequence[int], rounds: int, *, limit: int | None,
                          offset: int, focus: str, timeout: float, command: str,
                          on_partial: Callable[[dict[str, Any]], None] | None = None,
                          progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Every arm (K in ``ks``) on the corpus's cases ``offset .. offset + limit``; the record."""
    cases = load_corpus(corpus)[offset:offset + limit if limit else None]
    warm_up(engine)
    records: list[dict[str, Any]] = []

    def record(complete: bool) -> dict[str, Any]:
        return {"corpus": corpus, "ks": list(ks), "rounds": rounds, "focus": focus, "offset": offset,
                "cases": len(records), "complete": complete, "command": command, "model": engine.name,
                "backend": engine.model_for(engine.default_mode()).runtime.describe(),
                "machine": machine_info(engine.loaded.device), "summary": summarize(records, ks, rounds),
                "records": records}

    for i, case in enumerate(cases):
        order = list(ks[i % len(ks):]) + list(ks[:i % len(ks)])
        arms = {}
        for k in order:
            progress(f"{case.id}: K={k}")
            arms[str(k)] = run_arm(engine, case, k, rounds, focus, timeout)
        records.append({"id": case.id, "arms": {str(k): arms[str(k)] for k in ks}})
        if on_partial is not None:
            on_partial(record(False))
    return record(True)


def summarize(records: Sequence[dict[str, Any]], ks: Sequence[int], rounds: int) -> dict[str, Any]:
    """Per K and round: verified fixes, wrong fixes written, the median time to a verified fix
    over the single-shot edit's (the smallest K's first candidate on the same case),
    and the forwarded tokens of each candidate after the first over the first's."""
    out: dict[str, Any] = {}
    for k in ks:
        arms = [r["arms"][str(k)] for r in records]
        single = {r["id"]: r["arms"][str(min(ks))]["single_shot_s"] for r in records}
        ratios = [a["seconds_to_pass"] / single[r["id"]] for r, a in zip(records, arms)
                  if a["verified"] and single[r["id"]]]
        by_index = [sorted(a["candidates"], key=lambda c: c["index"]) for a in arms]
        extra = [c["forwarded"] / tried[0]["forwarded"] for tried in by_index if tried and tried[0]["forwarded"]
                 for c in tried[1:]]
        out[str(k)] = {"cases": len(arms),
                       "verified_by_round": [sum(1 for a in arms if a["verified"] and a["round"] <= n)
                                             for n in range(1, rounds + 1)],
                       "wrong_written": sum(1 for a in arms if a["wrong_written"]),
                       "single_shot_passed": sum(1 for a in arms if a["first_passed"]),
                       "median_time_to_fix_vs_single_shot": median(ratios),
                       "median_extra_candidate_forwarded_vs_first": median(extra),
                       "mean_decodes": round(sum(a["decodes"] for a in arms) / len(arms), 2) if arms else None}
    return out
