"""The apply benchmark's cases and scoring (no model): every style gives cases from this
repository's sources, each case's gold differs from its file, and the scores add up."""

from __future__ import annotations

from engine.bench.apply import damaged_lines, summarize
from engine.bench.apply_cases import LANGUAGES, STYLES, held_out, make_case
from engine.cli import main


def test_every_style_gives_cases() -> None:
    cases = list(held_out(per_style=1))
    assert [c.style for c in cases] == list(STYLES)
    for case in cases:
        assert case.gold != case.file and case.update.strip() and case.language in LANGUAGES


def test_cases_are_seeded() -> None:
    assert make_case("python", "markers", 60, 1) == make_case("python", "markers", 60, 1)


def test_damaged_lines() -> None:
    assert damaged_lines("a\nb\nc\n", "a\nb\nc\n") == 0
    assert damaged_lines("a\nb\nc\n", "a\nx\nc\n") == 1
    assert damaged_lines("a\nb\nc\n", "a\nc\n") == 1


def test_summary_by_style_size_and_language() -> None:
    rows = [{"case": "c1", "arm": "aligner", "style": "markers", "language": "python", "lines": 20, "exact": True,
             "damaged_lines": 0, "throughput": 100.0},
            {"case": "c2", "arm": "aligner", "style": "deletion", "language": "c", "lines": 2000, "exact": False,
             "damaged_lines": 3, "throughput": 300.0}]
    summary = summarize(rows, rate=10.0)["aligner"]
    assert summary["exact"] == 1 and summary["damaged_lines"] == 3 and summary["x_plain"] == 20.0
    assert set(summary["by_style"]) == {"markers", "deletion"} and set(summary["by_size"]) == {"<100", ">=1500"}


def test_bench_apply_refuses_an_unknown_arm(capsys) -> None:
    assert main(["bench", "apply", "--arms", "nope"]) == 2
    assert "unknown arm" in capsys.readouterr().err
