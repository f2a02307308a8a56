"""engine/checks/guards.py: the loop guard fires on degenerate output (the embedded model's own loop in
program mode included) and never on real code; the damage assessment flags the edits that
would destroy a region."""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import pytest

from engine.checks.guards import (
    LONG_LINE_RUN,
    LoopGuard,
    assess_edit,
    destructive_reason,
    due,
    far_from_focus,
    normalise_digits,
)
from engine.core.lines import split_lines
from engine.language.program import CopyLines, Gen

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py"
STDLIB = Path(sysconfig.get_paths()["stdlib"])


def first_fire(guard: LoopGuard, output: str) -> tuple[int, str] | None:
    """Feed ``output`` line by line (as a decoder calls the guard); (line number, message) of
    the first line the guard fires on."""
    acc = ""
    for number, line in enumerate(split_lines(output), 1):
        acc += line
        message = guard.check(acc)
        if message:
            return number, message
    return None


# --- loops -------------------------------------------------------------------------------------

# The embedded model, asked to fix eight functions that lack their colons, fixes them and then
# goes on writing f8, f9, ... until the token limit (speculative, the default mode).
LONG = "".join(f"def f{i}(x)\n    return x * {i}\n\n" for i in range(8))


def test_the_embedded_model_loop_is_caught_before_the_token_limit(default_engine) -> None:
    from engine.api import EditRequest
    from engine.decoding.events import EditFinished, OpResolved

    guard = LoopGuard(LONG)
    fired, fired_lines, total_lines, result = None, 0, 0, None
    for event in default_engine.stream(EditRequest(LONG, "Fix the syntax errors", mode="speculative",
                                                   max_new_tokens=300, language="python")):
        if isinstance(event, OpResolved):
            total_lines += 1  # text modes report one op per output line
            if fired is None:
                fired, fired_lines = guard.check(event.resolved), total_lines
        elif isinstance(event, EditFinished):
            result = event.result
    assert result is not None
    if result.stop_reason == "loop":  # the decoders call the guard themselves
        assert any("repeating itself" in w for w in result.warnings), result.warnings
        assert result.tokens.generated + result.tokens.copied < 300
        return
    if result.stop_reason != "max_tokens":
        pytest.skip(f"the embedded model no longer loops on this case ({result.stop_reason}); "
                    "the synthetic cases below still check the guard")
    assert fired and "def f" in fired and "numbers changing" in fired, fired
    assert fired_lines < total_lines - 6, f"fired at line {fired_lines} of {total_lines}: too late to save time"
    assert "def f8(x)" in "".join(result.region_output.splitlines(keepends=True)[:fired_lines])


def test_a_loop_with_counting_numbers_is_caught() -> None:
    """textwrap's loop: `cur_len += len(lines[32])`, `lines[33]`, ... (numbers differ)."""
    source = (STDLIB / "textwrap.py").read_text()
    start = source.index("    def _wrap_chunks")
    region = source[start:source.index("\n    def ", start + 10) + 1]
    lines = split_lines(region)
    prefix = "".join(lines[:30])
    loop = "".join(f"            cur_len += len(lines[{k}])\n" for k in range(32, 80))
    fired = first_fire(LoopGuard(region), prefix + loop)
    assert fired is not None
    line, message = fired
    assert line - 30 <= 10, f"fired only after {line - 30} loop lines"
    assert "numbers changing" in message and "cur_len += len(lines[" in message


def test_the_same_line_again_and_again_is_caught() -> None:
    text = EXAMPLE.read_text()
    fired = first_fire(LoopGuard(text), text + "def add(a, b):\n" * 30)
    assert fired is not None and fired[0] - 3 <= 6
    assert "def add(a, b):" in fired[1]


def test_a_repeat_within_one_line_is_caught() -> None:
    """Gens without newlines: `def add(a, b):def add(a, b):...` on one line."""
    guard = LoopGuard(EXAMPLE.read_text())
    out = "def add(a, b):\n"
    for _ in range(12):
        out += "    return a + b"
    assert guard.check(out) is not None


def test_a_punctuation_run_longer_than_any_input_line_is_caught_before_the_line_ends() -> None:
    """HumanEvalFix-JS 46 in program mode: `  return results.length =====...` to the token limit
    (the line never ends, so a check per completed line never came)."""
    js = "const f = (n) => {\n  // ==================== helpers ====================\n  return n;\n}\n"
    guard = LoopGuard(js)
    line = "  return results.length "
    fired_at = None
    for k in range(400):
        line += "="
        if due(line) != due(line[:-1]) and guard.check(line):
            fired_at = k
            break
    assert fired_at is not None and fired_at < 2 * LONG_LINE_RUN
    assert "in one line" in guard.check(line)
    # a separator comment of a line's length, and punctuation across lines, are real code
    assert first_fire(guard, js + "  // " + "=" * 100 + "\n" + ")\n" * 60) is None


def test_repeated_braces_blank_lines_and_input_runs_never_fire() -> None:
    js = "function f(a) {\n  if (a) {\n    while (a) {\n      a--;\n    }\n  }\n}\n"
    guard = LoopGuard(js)
    assert first_fire(guard, js + "}\n" * 40 + "\n" * 40 + "  });\n" * 40) is None
    rows = [f"    {k}, {k + 1}, {k + 2}, {k + 3},\n" for k in range(0, 400, 4)]
    data = "TABLE = [\n" + "".join(rows[:15]) + "]\n"
    guard = LoopGuard(data)
    assert first_fire(guard, data) is None
    grown = "TABLE = [\n" + "".join(rows[:18]) + "]\n"  # three more rows: an edit, not a loop
    assert first_fire(guard, grown) is None
    fired = first_fire(guard, "TABLE = [\n" + "".join(rows))  # the output more than doubles the input's run
    assert fired is not None and 31 <= fired[0] <= 40, fired


def test_gens_that_add_nothing() -> None:
    guard = LoopGuard("a = 1\nb = 2\n")
    same = [CopyLines(1, 1), Gen("x = 3\n"), Gen("x = 3\n"), Gen("x = 3\n")]
    assert "same gen" in guard.check_ops(same)
    assert guard.check_ops(same[:3]) is None
    blank = [CopyLines(1, 2), Gen(""), Gen(" "), Gen("\n")]
    assert "whitespace" in guard.check_ops(blank)
    copies_between = [Gen("x = 3\n"), CopyLines(1, 1), Gen("x = 3\n"), CopyLines(2, 2), Gen("x = 3\n")]
    assert guard.check_ops(copies_between) is None
    assert guard.check_ops([Gen("x = 1\n"), Gen("x = 2\n"), Gen("x = 3\n")]) is None


def _corpus_cases():
    from engine.evaluation.corpora import CorpusError, load_corpus

    try:
        return [case for name in ("humanevalfix-python", "humanevalfix-js", "canitedit")
                for case in load_corpus(name)]
    except CorpusError as exc:
        pytest.skip(f"corpora not available: {exc}")


def test_no_false_positive_on_any_corpus_input_or_gold() -> None:
    cases = _corpus_cases()
    assert len(cases) == 164 + 164 + 105
    for case in cases:
        guard = LoopGuard(case.input)
        for output in (case.input, case.gold):
            assert first_fire(guard, output) is None, (case.id, first_fire(guard, output))
            assert guard.check(output) is None


def test_no_false_positive_on_standard_library_files() -> None:
    files = sorted(STDLIB.glob("*.py"))[::6] + [STDLIB / "textwrap.py", STDLIB / "locale.py"]
    assert len(files) > 20
    calls, started = 0, time.perf_counter()
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert first_fire(LoopGuard(text), text) is None, path
        calls += len(split_lines(text))
    per_call = (time.perf_counter() - started) / calls
    assert per_call < 0.005, f"{per_call * 1e3:.2f} ms per call: too slow to run after every line"


def test_normalise_digits() -> None:
    assert normalise_digits("lines[32] + 1.5e10") == "lines[0] + 0.0e0"


# --- damage ------------------------------------------------------------------------------------

# A function whose "fix" by the embedded model (speculative) drops its 20-line trailing docstring:
# see tests/test_edit_cli.py and the LSP tests, which run the model on it.
DOCSTRING_TAIL = '\n\n\n"""\nPairwise sums\n\n' + "".join(f"Line {k} of the notes.\n" for k in range(17)) + '"""\n'


def test_assess_edit_counts_lines() -> None:
    before = "a\nb\nc\nd\ne\n"
    d = assess_edit(before, "a\nB\nc\ne\nf\ng\n")
    assert (d.kept, d.changed, d.deleted, d.added) == (3, 1, 1, 2)
    assert (d.input_lines, d.output_lines) == (5, 6)
    same = assess_edit("x\r\ny\r\n", "x\ny\n")  # line endings do not count as a change
    assert same.kept == 2 and same.touched == 0


def test_destructive_fix_is_flagged_with_what_it_does() -> None:
    function = "def f(values):\n    for v in values:\n        yield v - 1\n"
    before = function + DOCSTRING_TAIL
    n = len(split_lines(before))
    after = "def f(values):\n    return sum(values)\n"
    reason = destructive_reason(assess_edit(before, after), "Fix the bug")
    assert reason == f"would rewrite 1 and delete {n - 2} of {n} lines for a fix"
    assert destructive_reason(assess_edit(before, ""), "Fix: x is undefined") == f"would delete {n} of {n} lines for a fix"
    # a small fix, a short region, an asked-for rewrite or removal: not destructive
    fixed = before.replace("v - 1", "v + 1")
    assert destructive_reason(assess_edit(before, fixed), "Fix the bug") is None
    assert destructive_reason(assess_edit("a\nb\nc\n", ""), "Fix the bug") is None
    rewrite = "".join(f"line {k} rewritten\n" for k in range(n))
    assert destructive_reason(assess_edit(before, rewrite), "Rewrite the notes in French") is None
    assert destructive_reason(assess_edit(before, function), "Remove the docstring") is None
    assert "would delete" in destructive_reason(assess_edit(before, function), "Add type hints")


def test_no_gold_edit_of_the_corpora_is_destructive() -> None:
    for case in _corpus_cases():
        assert destructive_reason(assess_edit(case.input, case.gold), case.instruction) is None, case.id


def _long_file(functions: int) -> list[str]:
    lines: list[str] = []
    for k in range(functions):
        lines += [f"def f{k}(x):", f"    return x + {k}", "", "}"]
    return lines


def test_a_long_files_damage_counts_as_difflibs_do():
    """Past the plain-diff size the counts come from anchored gaps: the same as difflib's own."""
    import difflib

    from engine.checks.guards import _PLAIN_DIFF_PAIRS, line_opcodes

    before = _long_file(300)
    after = before[:]
    after[40] += "  # changed"
    del after[500:503]
    after[900:900] = ["def added():", "    pass"]
    after[1100] = "}  // closed"
    assert len(before) * len(after) > _PLAIN_DIFF_PAIRS
    damage = assess_edit("\n".join(before) + "\n", "\n".join(after) + "\n")
    assert (damage.changed, damage.deleted, damage.added) == (2, 3, 2)
    assert damage.kept == len(before) - 5
    ours = line_opcodes(before, after)
    rebuilt = [line for tag, i1, i2, j1, j2 in ours for line in (before[i1:i2] if tag == "equal" else after[j1:j2])]
    assert rebuilt == after
    plain = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    assert sum(i2 - i1 for tag, i1, i2, _, _ in ours if tag == "equal") == \
        sum(i2 - i1 for tag, i1, i2, _, _ in plain if tag == "equal")


# -- a fix far from the line the user pointed at -------------------------------------------------

SIX = "a\nb\nc\nd\ne\nf\n"


def test_the_lines_an_edit_touches() -> None:
    from engine.checks.guards import edited_lines

    assert edited_lines(SIX, SIX.replace("d", "D")) == [4]
    assert edited_lines(SIX, SIX.replace("b\nc\n", "")) == [2, 3]  # deleted lines are touched
    assert edited_lines(SIX, SIX.replace("c\n", "c\nnew\n")) == [3, 4]  # an insertion: both neighbours
    assert edited_lines(SIX, "new\n" + SIX) == [1]  # before the first line: only it
    assert edited_lines(SIX, SIX + "new\n") == [6]  # after the last line: only it
    assert edited_lines(SIX, SIX.replace("\n", "\r\n")) == []  # line endings are no change
    assert edited_lines(SIX, SIX.replace("e", "E"), first_line=10) == [14]  # document numbering
    assert edited_lines("", "new\n") == []  # an empty region has no line to touch


def test_a_fix_far_from_the_focus_is_found_and_said_where() -> None:
    from engine.checks.guards import FOCUS_RADIUS, far_from_focus

    text = "".join(f"line {k}\n" for k in range(1, 21))
    fix_at_4 = text.replace("line 4\n", "LINE 4\n")
    far = far_from_focus(text, fix_at_4, 4 + FOCUS_RADIUS + 1)
    assert far is not None and (far.first, far.last, far.focus) == (4, 4, 4 + FOCUS_RADIUS + 1)
    assert far.describe() == f"it edits lines 4-4, far from line {4 + FOCUS_RADIUS + 1} where you pointed"
    assert far.json() == {"lines": [4, 4], "focus": 4 + FOCUS_RADIUS + 1, "radius": FOCUS_RADIUS}
    assert far_from_focus(text, fix_at_4, 4 + FOCUS_RADIUS) is None  # at the edge of the radius: near
    assert far_from_focus(text, fix_at_4, 4 - FOCUS_RADIUS) is None
    assert far_from_focus(text, fix_at_4, None) is None  # no focus: no rule
    assert far_from_focus(text, text, 15) is None  # nothing changed
    both = fix_at_4.replace("line 15\n", "LINE 15\n")  # one change near the focus is enough
    assert far_from_focus(text, both, 15) is None
    spread = far_from_focus(text, both, 10)
    assert spread is not None and (spread.first, spread.last) == (4, 15)
    # an insertion just above the pointed line touches it: a guard added before the bug
    guard_above = text.replace("line 9\n", "line 9\nif x is None: return\n")
    assert far_from_focus(text, guard_above, 10 + FOCUS_RADIUS) is None
    assert far_from_focus(text, guard_above, 11 + FOCUS_RADIUS) is not None
    region = far_from_focus(text, fix_at_4, 30, first_line=21)  # a region starting at document line 21
    assert region is not None and (region.first, region.last) == (24, 24) and far_from_focus(
        text, fix_at_4, 24 + FOCUS_RADIUS, first_line=21) is None


def test_blank_lines_between_the_focus_and_the_fix_are_not_counted() -> None:
    """A cursor in the gap above a function points at it: HumanEvalFix-Python/29's near cursor (line 2, blank)
    and its fix (line 5) are 2 lines that hold code apart."""
    from engine.checks.guards import focus_distance

    text = "from typing import List\n\n\ndef f(s, p):\n    return [x for x in s if x.endswith(p)]\n"
    fixed = text.replace("endswith", "startswith")
    assert focus_distance([5], 2, text) == 2 and far_from_focus(text, fixed, 2) is None
    assert focus_distance([5], 1, text) == 2  # lines 2 and 3 are blank: 4, 5
    longer = text.replace("def f", "import os\nimport re\ndef f")  # two more lines that hold code between
    assert far_from_focus(longer, longer.replace("endswith", "startswith"), 2) is not None
    assert focus_distance([4], 7, "a\nb\nc\nd\ne\nf\ng\n") == 3  # every line holds code: plain lines
    assert focus_distance([], 3, text) is None


def test_the_radius_covers_the_localizers_window() -> None:
    """A fix at any line the localizer may move a cursor's hint to is never held: its window is
    counted in plain lines, the rule's radius in lines that hold code (never more)."""
    from engine.checks.guards import FOCUS_RADIUS
    from engine.decoding.localize import CURSOR_WINDOW

    assert FOCUS_RADIUS >= CURSOR_WINDOW
