"""The candidate search (engine.candidates.search_fixes) and what the CLI makes of it.

The paths that need a model to misbehave on cue (a duplicate, a destructive candidate, a check
that fails, a cancel mid-check) run on ``scripted``, a fake engine (tests/scripted_engine.py) that
answers each request with a scripted output; the CLI's exit-6 and passing paths and the no-fix
message run the real embedded model on the examples' bug."""

from __future__ import annotations

import json
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pytest
from scripted_engine import ScriptedEngine
from support import ADD_DOCUMENTED as BUGGY

from engine.api import EditRequest
from engine.candidates import CheckSpec, search_fixes
from engine.candidates.outcome import decide
from engine.candidates.search import budget_for
from engine.cli import main
from engine.decoding.events import EditResult, FocusLines, TokenCounts
from engine.language.program import Program
from engine.verdict import EXIT_NO_VERIFIED_FIX, no_fix

FIXED = BUGGY.replace("a - b", "a + b")
WRONG = BUGGY.replace("a - b", "a * b")
BROKEN = BUGGY.replace("a - b", "a + (b")  # breaks the syntax: a guard refuses it


def result(text: str, output: str, score: float = -1.0, ranked: tuple[int, ...] = ()) -> EditResult:
    return EditResult(mode="program", model="scripted", input_text=text, output_text=output, region=None,
                      region_input=text, region_output=output, program=Program(), raw_output="",
                      tokens=TokenCounts(), prompt_tokens=0, stop_reason="done", breakdown={"logprob": score},
                      focus=FocusLines(hint=3, guarded=3, ranked=ranked))


def scripted(outputs: list[str]) -> ScriptedEngine:
    """The search's fake engine (tests/scripted_engine.py) answering with :func:`result`s ranked (3, 2, 1)."""
    return ScriptedEngine(outputs, partial(result, ranked=(3, 2, 1)))


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py"


def buggy_file(tmp_path: Path) -> Path:
    """A copy of examples/buggy_add.py (its text is BUGGY)."""
    path = tmp_path / "add.py"
    path.write_text(EXAMPLE.read_text())
    assert path.read_text() == BUGGY
    return path


PASSES_IF_FIXED = f"{sys.executable} -c 'import sys; sys.exit(0 if \"a + b\" in open(sys.argv[1]).read() else 1)' {{file}}"


def test_duplicates_are_dropped_and_a_guard_refuses_before_any_check(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    log = tmp_path / "checked.log"
    check = CheckSpec(f"cat {{file}} >> {log}; echo --- >> {log}; exit 1")
    engine = scripted([WRONG, WRONG, BROKEN, WRONG, BUGGY, WRONG])
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add.", language="python"), k=3, check=check,
                          file_path=path)
    outputs = [c.result.output_text for c in search.candidates]
    assert sorted(outputs) == sorted([WRONG, BROKEN, BUGGY])  # each output once
    refused = {c.result.output_text: c.refused for c in search.candidates}
    assert "breaks the syntax" in str(refused[BROKEN]) and refused[BUGGY] == "it changes nothing" and refused[WRONG] is None
    assert log.read_text().count("---") == 1 and "pass" not in log.read_text()  # only WRONG was checked
    assert search.passed is None and search.stop_reason == "exhausted"
    assert path.read_text() == BUGGY


def test_the_first_passing_candidate_ends_the_search(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    engine = scripted([WRONG, FIXED, BUGGY.replace("a - b", "b + a")])
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add."), k=8, check=CheckSpec(PASSES_IF_FIXED),
                          file_path=path)
    assert search.passed is not None and search.passed.result.output_text == FIXED
    assert search.stop_reason == "passed" and search.seconds_to_pass is not None
    assert path.read_text() == BUGGY  # the search writes nothing: the front door writes what passed
    assert decide(search, checked=True).write is search.passed


def test_variants_try_the_localizers_other_lines_then_samples() -> None:
    engine = scripted([WRONG, FIXED, BROKEN, BUGGY.replace("a - b", "b - a")])
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add.", focus_line=3), k=4, check=None)
    first, *rest = engine.asked
    assert first.focus_line == 3 and first.temperature == 0
    assert [(r.focus_line, r.localize) for r in rest[:2]] == [(2, False), (1, False)]
    assert rest[2].temperature > 0 and rest[2].focus_line == 3
    scores = [c.score for c in search.candidates if c.refused is None]
    assert scores == sorted(scores, reverse=True)  # best score first
    assert search.stop_reason == "unchecked" and all(c.check is None for c in search.candidates)


def test_a_second_round_is_told_the_first_failing_check(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    engine = scripted([WRONG, FIXED])
    check = CheckSpec(f"echo 'AssertionError: add(2, 3) == -1' ; {PASSES_IF_FIXED}")
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add."), k=1, check=check, max_rounds=2,
                          file_path=path)
    assert search.rounds == 2 and search.passed is not None and search.passed.round == 2
    second = engine.asked[-1].instruction
    assert second.startswith("Fix add.") and "add(2, 3) == -1" in second


def test_a_round_without_a_checked_candidate_is_told_the_check_on_the_file(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    engine = scripted([BUGGY] * budget_for(1) + [FIXED])  # round 1: no change in its whole budget
    check = CheckSpec(f"echo 'the file as it is fails'; {PASSES_IF_FIXED}")
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add."), k=1, check=check, max_rounds=2,
                          file_path=path)
    assert search.passed is not None and "the file as it is fails" in engine.asked[-1].instruction


def test_a_cancel_during_a_check_ends_the_search_within_half_a_second(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    cancel = threading.Event()
    checking = threading.Event()

    def progress(message: str) -> None:
        if message.endswith("checking"):
            checking.set()

    threading.Thread(target=lambda: checking.wait(10) and (time.sleep(0.3), cancel.set())).start()
    started = time.monotonic()
    search = search_fixes(scripted([WRONG]), EditRequest(BUGGY, "Fix add."), k=1,
                          check=CheckSpec("sleep 30"), file_path=path, cancelled=cancel.is_set, progress=progress)
    cancelled_at = time.monotonic()
    assert search.stop_reason == "cancelled" and search.passed is None
    assert cancelled_at - started < 0.3 + 0.5 + 1.0  # (the thread's own start and the sleep included)
    assert search.candidates[0].check is not None and search.candidates[0].check.cancelled
    assert path.read_text() == BUGGY


def test_the_no_fix_message_names_the_line_why_and_what_to_try() -> None:
    unchanged = result(BUGGY, BUGGY)
    unchanged.breakdown["noop_gen_refused_gap_min"] = 2.7
    found = no_fix(unchanged)
    assert found is not None and found.line == 3
    assert "no fix found" in found.message and "line 3" in found.message and "wrote the line back" in found.message
    assert "--candidates" in found.message and "instruction" in found.message
    assert no_fix(result(BUGGY, FIXED)) is None


# -- the CLI with the real model ---------------------------------------------------------------------


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["edit", *argv, "--backend", "transformers"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.model
def test_cli_writes_nothing_and_exits_6_when_no_candidate_passes(capsys, tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    code, out, err = run(capsys, str(path), "-i", "Fix the bug in add.", "--focus", "3", "--in-place",
                         "--check", "echo 'the tests fail'; exit 1", "--candidates", "2", "--json")
    assert code == EXIT_NO_VERIFIED_FIX
    assert path.read_text() == BUGGY
    summary = json.loads(out)
    assert summary["written"] == [] and summary["exit_code"] == EXIT_NO_VERIFIED_FIX
    listed = summary["search"]["candidates"]
    assert listed and all({"program", "check", "seconds", "forwarded_tokens"} <= set(c) for c in listed)
    assert any(c["check"] and "the tests fail" in c["check"]["output"] for c in listed)


@pytest.mark.model
def test_cli_writes_the_candidate_that_passes(capsys, tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    check = f"{sys.executable} -c 'import sys; sys.path.insert(0, sys.argv[1].rpartition(\"/\")[0]); import add; " \
            "sys.exit(add.add(2, 3) != 5)' {file}"
    code, out, err = run(capsys, str(path), "-i", "Fix the bug in add.", "--focus", "3", "--in-place",
                         "--check", check, "--candidates", "4")
    assert code == 0, err
    assert path.read_text() == FIXED
    assert "passed" in out


def test_a_search_that_changed_nothing_without_a_check_is_no_fix() -> None:
    """Every candidate kept the code: EXIT_NO_FIX (not a written fix), the advice after K = 4."""
    from engine.verdict import EXIT_NO_FIX

    search = search_fixes(scripted([BUGGY, BUGGY]), EditRequest(BUGGY, "Fix add.", focus_line=3), k=4,
                          check=None)
    assert search.candidates and not any(c.result.changed for c in search.candidates)
    decision = decide(search, checked=False, k=4)
    assert decision.exit_code == EXIT_NO_FIX and decision.no_fix is not None
    assert "--candidates 4" not in decision.message and "--candidates 8" in decision.message


@pytest.mark.model
def test_cli_checks_k_distinct_candidates_or_says_the_model_had_no_more(capsys, tmp_path: Path) -> None:
    """A check that fails every candidate keeps the search going: K = 3 distinct candidates are
    checked, or the CLI says which one the model did not have and what its other decodes did."""
    path = buggy_file(tmp_path)
    code, out, err = run(capsys, str(path), "-i", "Fix the bug in add.", "--focus", "3", "--in-place",
                         "--check", "exit 1", "--candidates", "3")
    assert code == EXIT_NO_VERIFIED_FIX and path.read_text() == BUGGY
    checked = " ".join(out.split()).count("failed (exit 1)")
    said = " ".join(err.split())  # (rich wraps long lines)
    assert "no candidate passed the check; nothing was written" in said
    if checked == 3:
        assert "3 distinct candidates" in said and "the model had no" not in said
    else:
        assert f"{checked} distinct candidate" in said and "in 12 decodes (" in said
        assert f"the model had no {('', 'second', 'third')[checked]}" in said
    assert "--candidates 3 " not in said + " "  # the advice never repeats the K given


@pytest.mark.model
def test_cli_json_lists_each_rounds_tally(capsys, tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    code, out, err = run(capsys, str(path), "-i", "Fix the bug in add.", "--focus", "3", "--candidates", "2",
                         "--json")
    summary = json.loads(out)["search"]
    (tally,) = summary["rounds_tally"]
    distinct = [c for c in summary["candidates"] if c["changed"] and not c["refused"]]
    assert tally["distinct"] == summary["distinct"] == len(distinct) == len({c["program"] for c in distinct})
    assert tally["decodes"] == summary["decodes"] == len(summary["candidates"]) + tally["lost"].get("repeated", 0)
    assert sum(tally["lost"].values()) + tally["distinct"] == tally["decodes"] <= tally["budget"] == 8
    assert (summary["shortfall"] is None) == (tally["distinct"] == 2)
    assert code == 0 and distinct
