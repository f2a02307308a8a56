"""The apply benchmark's cases and scoring (no model): every style gives cases from this
repository's sources at the pinned commit, each case's gold differs from its file, and the scores add up."""

from __future__ import annotations

import subprocess

import pytest

from engine.bench.apply import arm_request, damaged_lines, rewrites, summarize
from engine.bench import pinned
from engine.bench.apply_cases import LANGUAGES, STYLES, held_out, make_case, source_files
from engine.bench.pinned import PINNED_COMMIT, ROOT, PinnedFile
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


def test_rewrites_score_each_drafted_arm_against_ar() -> None:
    def row(case, arm, output, seconds, drafted=0, accepted=0, exact=False, raw=None, stop="done"):
        return {"case": case, "arm": arm, "output": output, "seconds": seconds, "drafted": drafted,
                "accepted": accepted, "generated": 10 if arm == "ar" else 4, "exact": exact, "stop_reason": stop,
                "raw": output if raw is None else raw}

    rows = [row("c1", "ar", "x", 4.0), row("c1", "speculative", "x", 1.0, 40, 30, exact=True),
            row("c2", "ar", "y", 6.0), row("c2", "speculative", "z", 2.0, 10, 0),
            row("c2", "speculative-file", "y", 3.0, 0, 0),
            row("c3", "ar", "f", 1.0, raw="abab", stop="loop"),
            row("c3", "speculative-file", "f", 1.0, raw="ababab", stop="loop"),
            row("c3", "speculative", "f", 1.0, raw="abba", stop="loop")]
    scored = rewrites(rows)
    spec = scored["speculative"]
    assert (spec["cases"], spec["same_as_ar"], spec["same_reply_as_ar"], spec["finished"]) == (3, 2, 1, 2)
    assert spec["exact_vs_gold"] == 1 and spec["different_cases"] == ["c2", "c3"]
    assert scored["speculative-file"]["same_reply_as_ar"] == 2  # a loop cut later: ar's reply and more
    rows = rows[:5]
    scored = rewrites(rows)
    spec = scored["speculative"]
    assert spec["acceptance"] == 0.6 and spec["x_ar_median"] == 3.5 and spec["x_ar_total"] == 3.33
    assert (spec["steps"], spec["ar_steps"]) == (8, 20)
    assert scored["speculative-file"]["acceptance"] is None and scored["speculative-file"]["same_as_ar"] == 1


def test_the_file_drafted_arm_is_the_applys_own_prompt() -> None:
    """``speculative-file`` runs the apply's rewrite as an edit, so it drafts from the file; its
    request differs from ``speculative``'s only in carrying the update in its instruction."""
    case = next(held_out(per_style=1))
    merged, from_file = arm_request("speculative", case, 100), arm_request("speculative-file", case, 100)
    assert merged.is_apply and not from_file.is_apply and merged.mode == from_file.mode == "speculative"
    assert case.update in from_file.instruction and from_file.max_new_tokens == merged.max_new_tokens


def test_python_and_typescript_cases_are_cut_from_the_pinned_commit() -> None:
    """The cases do not follow the working tree: each file is its text at the pinned commit."""
    files = source_files("python")
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{PINNED_COMMIT}:{files[0].path}"],
                           capture_output=True, text=True, check=True).stdout
    assert isinstance(files[0], PinnedFile) and files[0].read_text() == shown
    assert all(str(f.path).startswith("engine/") for f in files)
    assert [str(f.path.parent) for f in source_files("typescript")][:1] == ["vscode-client/src"]


@pytest.mark.parametrize("arms", ["lines,structure", "ar"])  # the rules' arms; a model arm (before any model loads)
def test_bench_apply_says_when_the_pinned_commit_is_missing(monkeypatch, capsys, arms: str) -> None:
    monkeypatch.setattr(pinned, "PINNED_COMMIT", "0" * 40)
    pinned.pinned_files.cache_clear()
    try:
        code = main(["bench", "apply", "--arms", arms, "--per-style", "1", "--cases", "styles"])
    finally:
        pinned.pinned_files.cache_clear()
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "cut from commit 000000000000" in err and "git fetch --unshallow" in err
