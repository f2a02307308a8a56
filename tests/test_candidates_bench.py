"""``bench edits --candidates``: its arms, its summary, and the corpus tests as a check command."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.bench.candidates import parse_arms, summarize
from engine.bench.corpus_check import main as corpus_check


def test_arms_name_candidates_and_rounds() -> None:
    assert parse_arms("1,4,8x2") == [(1, 1), (4, 1), (8, 2)]
    for bad in ("0", "4x0", "a"):
        with pytest.raises(ValueError):
            parse_arms(bad)


def _run(verified: bool, round_: int | None, to_pass: float | None, single: float, forwarded: list[int]) -> dict:
    return {"verified": verified, "round": round_, "seconds_to_pass": to_pass, "single_shot_s": single,
            "wrong_written": False, "first_passed": verified and round_ == 1 and len(forwarded) == 1,
            "decodes": len(forwarded), "candidates": [{"index": i + 1, "forwarded": f} for i, f in enumerate(forwarded)]}


def test_summary_counts_rounds_time_ratios_and_forwarded_tokens() -> None:
    records = [{"id": "a", "arms": {"8x2": _run(True, 2, 6.0, 2.0, [400, 100, 200])}},
               {"id": "b", "arms": {"8x2": _run(True, 1, 2.0, 2.0, [300])}},
               {"id": "c", "arms": {"8x2": _run(False, None, None, 1.0, [100, 50])}}]
    summary = summarize(records, [(8, 2)])["8x2"]
    assert summary["verified_by_round"] == [1, 2] and summary["wrong_written"] == 0
    assert summary["median_time_to_fix_vs_single_shot"] == 2.0  # 3.0 and 1.0
    assert summary["median_extra_candidate_forwarded_vs_first"] == 0.5  # 0.25, 0.5, 0.5


@pytest.mark.parametrize(("candidate", "status"), [("def f():\n    return 1\n", 0), ("def f():\n    return 2\n", 1)])
def test_the_corpus_tests_as_a_check_command(tmp_path: Path, candidate: str, status: int) -> None:
    test = tmp_path / "corpus_test.py"
    test.write_text("assert f() == 1\n")
    path = tmp_path / "case.py"
    path.write_text(candidate)
    assert corpus_check(["python", str(test), str(path)]) == status
