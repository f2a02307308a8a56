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


@pytest.mark.parametrize("language, before, after", [
    ("go", "package m\n\nfunc F(x int) int {\n\treturn x + 1\n}\n", "package m\n\nfunc F(x int) int {\n\treturn x +\n}\n"),
    ("rust", "fn f(x: i32) -> i32 {\n    x + 1\n}\n", "fn f(x: i32) -> i32 {\n    x + 1\n"),
    ("java", "class A {\n  int f(int x) { return x + 1; }\n}\n", "class A {\n  int f(int x) { return x + 1 }\n}\n"),
    ("typescript", "function f(x: number): number {\n  return x + 1;\n}\n",
     "function f(x: number: number {\n  return x + 1;\n}\n"),
])
def test_an_edit_that_breaks_another_languages_syntax_is_refused(language: str, before: str, after: str) -> None:
    """An edit (not only an apply) is judged by the language's tree-sitter grammar."""
    result = EditResult(mode="program", model="stub", input_text=before, output_text=after, region=None,
                        region_input=before, region_output=after, program=Program(()), raw_output="",
                        tokens=TokenCounts(1, 0, 0), prompt_tokens=1, stop_reason="done", warnings=[])
    verdict = judge(result, "Fix the bug", 100, language)
    assert (verdict.kind, verdict.exit_code) == ("syntax", EXIT_SYNTAX), verdict
    assert f"would break the {language} syntax (line " in verdict.message


# -- no fix: the reason, and advice that fits ---------------------------------------------------------

TYPO = "def count_items(xs):\n    count = 0\n    for x in xs:\n        count += 1\n    return coutn\n"


@pytest.mark.parametrize("line, text, example", [
    (3, TYPO, "line 3: the loop stops one short"),
    (5, TYPO, "line 5: it returns the wrong value; it should return ..."),
    (2, TYPO, "line 2: what is wrong and what it should do"),
    (1, "if a < b:\n", "line 1: < should be <="),
    (1, "while (i <= n) {\n", "line 1: the loop stops one short"),
    (1, "if (a >= b) {\n", "line 1: >= should be >"),
    (1, "def f(x) -> int:\n", "line 1: what is wrong and what it should do"),
    (1, "const f = (x) => x << 1;\n", "line 1: what is wrong and what it should do"),
    (9, TYPO, "line 9: what is wrong and what it should do"),
    (None, TYPO, "line N: what is wrong and what it should do"),
])
def test_the_example_instruction_names_only_what_the_line_can_have(line, text, example) -> None:
    from engine.verdict import example_instruction

    assert example_instruction(line, text) == example


def _unchanged(text: str, hint: int | None) -> EditResult:
    from engine.decoding.events import FocusLines

    return EditResult(mode="program", model="stub", input_text=text, output_text=text, region=None,
                      region_input=text, region_output=text, program=Program(()), raw_output="",
                      tokens=TokenCounts(1, 0, 0), prompt_tokens=1, stop_reason="done",
                      focus=FocusLines(hint=hint, guarded=hint))


def test_the_no_fix_advice_suggests_no_flag_already_given() -> None:
    from engine.verdict import no_fix

    plain = no_fix(_unchanged(TYPO, 5))
    assert plain is not None and "try --candidates 4" in plain.advice and "--check CMD" in plain.advice
    assert plain.example == "line 5: it returns the wrong value; it should return ..." and "loop" not in plain.message
    asked = no_fix(_unchanged(TYPO, 5), candidates=4, checked=True)
    assert asked is not None and "--candidates 4" not in asked.advice and "--check" not in asked.advice
    assert "a larger --candidates than the 4 given, e.g. --candidates 8" in asked.advice
    assert no_fix(_unchanged(TYPO, 5), candidates=2) is not None  # 2 given: 4 is another K
    assert "try --candidates 4" in no_fix(_unchanged(TYPO, 5), candidates=2).advice  # type: ignore[union-attr]


def test_an_empty_region_is_no_missing_fix() -> None:
    from engine.verdict import no_fix

    assert no_fix(_unchanged("", None)) is None
    assert no_fix(_unchanged(TYPO, None)) is not None


# -- a fix far from the line the user pointed at ---------------------------------------------------

def test_a_fix_far_from_the_focus_is_held_and_previewed() -> None:
    from engine.checks.guards import FOCUS_RADIUS

    assert FOCUS_RADIUS == 3  # the lines below: BEFORE's line 11 is "return x + 3", lines 6, 9, 12 and 15 are blank
    fixed = BEFORE.replace("x + 3", "x - 3")
    verdict = judge(_result(fixed), "Fix the bug", 100, "python", focus=17)  # 13, 14, 16, 17 hold code: 4 away
    assert (verdict.kind, verdict.exit_code, verdict.refused) == ("far", EXIT_DESTRUCTIVE, True)
    assert verdict.message == verdict.reason == "it edits lines 11-11, far from line 17 where you pointed"
    assert verdict.far is not None and verdict.far.json()["lines"] == [11, 11] and verdict.as_preview()
    assert judge(_result(fixed), "Fix the bug", 100, "python", focus=5).kind == "far"  # 5, 7, 8, 10: 4 away
    for near in (7, 8, 9, 14, 15, 16):  # at most 3 lines that hold code away (blank lines between not counted)
        assert judge(_result(fixed), "Fix the bug", 100, "python", focus=near).kind == "write", near
    assert judge(_result(fixed), "Fix the bug", 100, "python").kind == "write"  # no focus: no rule
    assert judge(_result(BEFORE), "Fix the bug", 100, "python", focus=17).kind == "write"  # unchanged
    broken = judge(_result(BEFORE.replace("x + 3", "x + (3")), "Fix the bug", 100, "python", focus=17)
    assert broken.kind == "syntax" and broken.far is not None  # the syntax break is named first


def test_a_far_fix_of_a_region_is_measured_in_document_lines() -> None:
    lines = BEFORE.splitlines(keepends=True)
    region = "".join(lines[3:18])  # document lines 4-18; lines 6, 9, 12 and 15 are blank
    fixed_region = region.replace("x + 3", "x - 3")  # document line 11
    result = EditResult(mode="program", model="stub", input_text=BEFORE,
                        output_text=BEFORE.replace(region, fixed_region), region=(4, 18), region_input=region,
                        region_output=fixed_region, program=Program(()), raw_output="", tokens=TokenCounts(1, 0, 0),
                        prompt_tokens=1, stop_reason="done")
    assert judge(result, "Fix the bug", 100, "python", focus=11).kind == "write"
    assert judge(result, "Fix the bug", 100, "python", focus=7).kind == "write"  # 9 is blank: 8, 10, 11
    far = judge(result, "Fix the bug", 100, "python", focus=5).far  # 7, 8, 10, 11
    assert far is not None and (far.first, far.last, far.focus) == (11, 11, 5)
