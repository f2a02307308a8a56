"""The one verdict on a finished edit (engine.verdict.judge), as the CLI, the HTTP endpoint and
the language server read it: kind, exit code, message, and whether it goes out as a preview."""

from __future__ import annotations

import pytest

from engine.decoding.events import EditResult, TokenCounts
from engine.language.program import Program
from engine.verdict import EXIT_CANCELLED, EXIT_DESTRUCTIVE, EXIT_SYNTAX, EXIT_UNFINISHED, judge

BEFORE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(6))


def _result(after: str, stop: str = "done", warnings: tuple[str, ...] = ()) -> EditResult:
    return EditResult(mode="program", model="stub", input_text=BEFORE, output_text=after, region=None,
                      region_input=BEFORE, region_output=after, program=Program(()), raw_output="",
                      tokens=TokenCounts(1, 0, 0), prompt_tokens=1, stop_reason=stop,  # type: ignore[arg-type]
                      warnings=list(warnings))


def test_a_small_fix_is_written_and_previewed_only_when_asked() -> None:
    verdict = judge(_result(BEFORE.replace("x + 3", "x - 3")), "Fix the bug", 100, "python")
    assert (verdict.kind, verdict.exit_code, verdict.message, verdict.refused) == ("write", 0, "", False)
    assert verdict.damage is not None and verdict.syntax is not None and verdict.syntax.reason() is None
    assert not verdict.as_preview() and verdict.as_preview(always=True)


def test_an_unchanged_result_is_never_previewed() -> None:
    assert not judge(_result(BEFORE), "Fix the bug", 100, "python").as_preview(always=True)


@pytest.mark.parametrize("stop, code, words", [
    ("cancelled", EXIT_CANCELLED, "the edit was cancelled"),
    ("max_tokens", EXIT_UNFINISHED, "used all 100 new tokens"),
    ("loop", EXIT_UNFINISHED, "did not finish: the output loops"),
])
def test_stopped_edits_are_refused_before_any_check(stop: str, code: int, words: str) -> None:
    verdict = judge(_result(BEFORE + "junk(\n", stop, ("the output loops",)), "Fix the bug", 100, "python")
    assert verdict.exit_code == code and words in verdict.message and verdict.stop_reason == stop
    assert verdict.refused and verdict.damage is None and not verdict.as_preview(always=True)
    assert verdict.reason == ("the output loops" if stop == "loop" else "")


def test_a_destructive_fix_is_refused_and_previewed() -> None:
    verdict = judge(_result("def f0(x):\n    return 0\n"), "Fix the bug", 100, "python")
    assert (verdict.kind, verdict.exit_code) == ("destructive", EXIT_DESTRUCTIVE)
    assert verdict.message == f"refusing a destructive edit: it {verdict.reason}" and "for a fix" in verdict.reason
    assert verdict.as_preview()


def test_an_edit_that_breaks_the_syntax_is_refused_and_previewed() -> None:
    verdict = judge(_result(BEFORE.replace("x + 3", "x + (3")), "Fix the bug", 100, "python")
    assert (verdict.kind, verdict.exit_code) == ("syntax", EXIT_SYNTAX)
    assert verdict.message == f"refusing an edit that breaks the syntax: it {verdict.reason}"
    assert verdict.as_preview()
