"""The line rules' replace-or-insert choice: an update line next to an anchor on one side only,
a variant of the file line beyond it (engine.apply.align.CHOICE_RATIO) but not that line, is an
edit of it or a new line beside it. The rule's reading is today's pairing; ``picks`` takes the
other; the merge ``auto`` runs (engine.apply.choice.survey) sees the choice, by the line rules
alone and inside the structure-aware merge, and a front door names who decided. The twin cases
that measure it (engine.bench.line_choices) are checked here too."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from engine.apply.align import CHOICE_RATIO, PAIR_RATIO, Choice, align
from engine.apply.choice import by_rule, decide, survey
from engine.apply.plan import plan
from engine.bench.apply_shapes import _broken
from engine.bench.line_choices import (TRUTHS, bench_instruction, bucket, line_cases, measure, model_row, model_sample,
                                       model_tally, ratio, said)
from engine.training.apply.updates import ApplyCase
from engine.cli import main

FILE = ["import os\n", "import sys\n", "\n", "def f(x):\n", "    a = compute(x, 1)\n", "    b = compute(x, 2)\n",
        "    log(a, b)\n", "    return a + b\n"]
EDGE = ["    b = compute(x, 3)\n", "    log(a, b)\n", "    return a + b\n"]  # context after the line only
REPLACED = "".join([*FILE[:5], "    b = compute(x, 3)\n", *FILE[6:]])
INSERTED = "".join([*FILE[:6], "    b = compute(x, 3)\n", *FILE[6:]])


def merged(file: list[str], update: list[str], **kwargs) -> str:
    return "".join(step.text for step in plan(align(file, update, **kwargs), file, update))


def test_a_line_next_to_one_anchor_alike_the_file_line_beyond_is_a_choice_the_rule_reads_as_an_edit() -> None:
    found: list[Choice] = []
    assert merged(FILE, EDGE, choices=found) == REPLACED
    assert found == [Choice(-1, ("replace line 6", "insert after line 6"), 0, model_decides=False)]
    assert merged(FILE, EDGE, picks={-1: 1}) == INSERTED
    assert merged(FILE, EDGE, picks={-1: 0}) == REPLACED


def test_after_the_last_anchor_and_between_a_marker_and_an_anchor_too() -> None:
    before = ["    a = compute(x, 1)\n", "    b = compute(x, 3)\n"]  # context before the line only
    found: list[Choice] = []
    assert merged(FILE, before, choices=found) == REPLACED
    assert found == [Choice(-2, ("replace line 6", "insert before line 6"), 0, model_decides=False)]
    assert merged(FILE, before, picks={-2: 1}) == "".join([*FILE[:5], "    b = compute(x, 3)\n", *FILE[5:]])
    marked = ["    # ... existing code ...\n", *EDGE]
    found = []
    assert merged(FILE, marked, choices=found) == REPLACED and [c.key for c in found] == [-2]
    assert merged(FILE, marked, picks={-2: 1}) == INSERTED


def test_below_the_pairing_ratio_the_rule_inserts_and_the_edit_is_the_other_reading() -> None:
    line = "    bz = render_all(y, 7)\n"
    alike = ratio(line, FILE[5])
    assert CHOICE_RATIO <= alike < PAIR_RATIO
    update = [line, *EDGE[1:]]
    found: list[Choice] = []
    assert merged(FILE, update, choices=found) == "".join([*FILE[:6], line, *FILE[6:]])
    assert found == [Choice(-1, ("replace line 6", "insert after line 6"), 1, model_decides=False)]
    assert merged(FILE, update, picks={-1: 0}) == "".join([*FILE[:5], line, *FILE[6:]])


def test_no_choice_where_context_stands_on_both_sides_or_the_line_is_unlike_or_the_same() -> None:
    for update in (["    a = compute(x, 1)\n", "    b = compute(x, 3)\n", "    log(a, b)\n"],  # both sides
                   ["    print('done')\n", *EDGE[1:]],  # unlike the file line beyond
                   FILE[5:]):  # the file's own line
        found: list[Choice] = []
        merged(FILE, update, choices=found)
        assert found == [], update


def test_the_merge_auto_runs_sees_the_choice_by_file_line_inside_a_definition() -> None:
    file = "".join(FILE) + "\n\ndef g(y):\n    return y\n"
    update = ["def f(x):\n", "    # ... existing code ...\n", *EDGE]
    ruled, found = survey(file.splitlines(keepends=True), update, "python")
    assert found is not None
    choice, readings = found
    assert choice.key < 0 and choice.readings == ("replace line 6", "insert after line 6") and choice.rule == 0
    texts = {c.reading: c.text for c in readings}
    assert texts["replace line 6"] == REPLACED + "\n\ndef g(y):\n    return y\n"
    assert texts["insert after line 6"] == INSERTED + "\n\ndef g(y):\n    return y\n"
    index, decision = by_rule(choice, readings)
    assert index == 0 and decision.chosen == "replace line 6" and decision.alternatives == ("insert after line 6",)


def test_the_cli_names_the_rules_reading_and_the_alternative(capsys, tmp_path: Path) -> None:
    target, update = tmp_path / "f.py", tmp_path / "u.py"
    target.write_text("".join(FILE))
    update.write_text("".join(EDGE))
    missing = str(tmp_path / "no-model-here")  # your own model: not loaded for the line rules' choice
    try:
        code = main(["apply", str(target), "--update", str(update), "--model", missing, "--json", "--in-place"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 0 and target.read_text() == REPLACED
    assert "no-model-here" not in err  # no load was tried (one that fails names the path)
    choice = json.loads(out)["breakdown"]["choice"]
    assert choice["by"] == "rule" and choice["chosen"] == "replace line 6"
    assert choice["alternatives"] == ["insert after line 6"]


def test_twin_cases_share_an_update_where_the_old_line_is_hidden_and_measure_the_rule() -> None:
    cases = list(line_cases(per_language=1, languages=("python",)))
    assert cases
    by_name = {lc.case.name: lc for lc in cases}
    for lc in cases:
        assert lc.case.gold != lc.case.file and not _broken(lc.case.gold, "python")
        if lc.truth == "insert-hidden":
            twin = by_name[lc.case.name.replace("insert-hidden", "replace")]
            assert twin.case.update == lc.case.update and twin.case.gold != lc.case.gold
    found = measure(cases, ("lines", "structure"))
    both = [r for r in found["rows"] if r["side"] == "both"]
    assert both and all(r["right"] for r in both)  # context on both sides: the rule is right on each twin
    twins = {(r["case"], r["arm"]): r for r in found["rows"]}
    hidden = [r for r in found["rows"] if r["truth"] == "insert-hidden"]
    assert hidden
    for r in hidden:  # the same update as its replace twin: the rule is right on one of the two at most
        twin = twins[(r["case"].replace("insert-hidden", "replace"), r["arm"])]
        assert not (r["right"] and twin["right"])
        if r["arm"] == "structure" and r["wrong"]:  # and where it writes the wrong one, the other reading is right
            assert r["choice"] == "line: other", r
    assert bucket(1.0) == "0.9-1.0" and bucket(0.55) == "0.5-0.6"


def test_each_twin_carries_what_a_user_would_ask_and_only_that() -> None:
    cases = list(line_cases(per_language=1, languages=("python",)))
    for lc in cases:
        old = next(ln for ln in lc.case.file.splitlines() if ln not in lc.case.gold.splitlines()) \
            if lc.truth == "replace" else None
        new = next(ln for ln in lc.case.gold.splitlines() if ln not in lc.case.file.splitlines())
        if lc.truth == "replace":
            assert lc.instruction == f"Change `{old.strip()}` to `{new.strip()}`."
        else:
            assert lc.instruction.startswith(f"Add `{new.strip()}` ") and lc.instruction.endswith("`.")
        assert lc.case.name.split("-")[1] not in lc.instruction  # no label, reading or line number in it
        assert lc.short == (f"Change that line to `{new.strip()}`." if lc.truth == "replace"
                            else f"Add the line `{new.strip()}`.")
    # the insert twins say where, as a user would: after or before the old line, as the gold has it
    assert said("insert", "  a = 1\n", "  b = 1\n", after=False) == "Add `b = 1` before `a = 1`."


def test_a_bench_case_gets_the_change_at_the_choices_lines_in_a_users_words() -> None:
    file, gold = "".join(FILE), REPLACED
    case = ApplyCase("c", "python", "x", len(FILE), file, "".join(EDGE), gold)
    assert bench_instruction(case, "replace line 6") == "Change `b = compute(x, 2)` to `b = compute(x, 3)`."
    assert bench_instruction(case, "replace lines 6-7") == bench_instruction(case, "replace line 6")
    assert bench_instruction(case, "replace line 6", short=True) == "Change that line to `b = compute(x, 3)`."
    assert bench_instruction(case, "replace line 1") == ""  # no change touches line 1
    added = ApplyCase("c", "python", "x", len(FILE), file, "", INSERTED)
    assert bench_instruction(added, "replace line 6") == "Add `b = compute(x, 3)` after `b = compute(x, 2)`."


def test_the_model_sample_is_seeded_one_sided_and_balanced_over_truths_from_the_choice_ratio() -> None:
    cases = list(line_cases(per_language=2, languages=("python", "java")))
    sample = model_sample(cases, 30, seed=1)
    assert [lc.case.name for lc in sample] == [lc.case.name for lc in model_sample(cases, 30, seed=1)]
    assert len(sample) == 30 and len({lc.case.name for lc in sample}) == 30
    assert all(lc.paired is not None and lc.paired >= CHOICE_RATIO for lc in sample)
    assert Counter(lc.truth for lc in sample) == {t: 10 for t in TRUTHS}
    per_bucket = Counter(bucket(lc.paired) for lc in sample if lc.truth == "replace")
    assert len(per_bucket) >= 3 and max(per_bucket.values()) - min(per_bucket.values()) <= 1  # round-robin


def test_a_model_row_without_a_scorer_is_the_rules_pick_beside_the_truth() -> None:
    case = ApplyCase("c", "python", "x", len(FILE), "".join(FILE), "".join(EDGE), INSERTED)
    row = model_row(None, case, said("insert", FILE[5], EDGE[0]))
    assert row is not None and row["readings"] == ["replace line 6", "insert after line 6"]
    assert row["truth"] == ["insert after line 6"] and row["rule"] == row["model"] == "replace line 6"
    assert row["by"] == "rule" and not row["rule_right"] and not row["model_right"]
    plain = ApplyCase("c", "python", "x", len(FILE), "".join(FILE), "".join(FILE[4:7]), "".join(FILE))
    assert model_row(None, plain, "") is None  # no line choice: nothing to measure
    tally = model_tally([{**row, "bucket": "0.5-0.6"}], ("bucket",))
    assert tally["all"] == {"n": 1, "model_right": 0, "rule_right": 0, "model_fell_to_rule": 1, "model_differs": 0}
    assert tally["by_bucket"]["0.5-0.6"]["n"] == 1


@pytest.mark.model
def test_the_embedded_model_decides_a_line_choice_given_the_users_instruction(default_engine) -> None:
    from engine.apply.choice import model_scorer

    score = model_scorer(default_engine.loaded)
    replace = ApplyCase("r", "python", "x", len(FILE), "".join(FILE), "".join(EDGE), REPLACED)
    row = model_row(score, replace, said("replace", FILE[5], EDGE[0]))
    assert row is not None and row["by"] == "model" and len(set(row["scores"])) == 2
    assert row["model"] in row["readings"] and row["model_right"] == (row["model"] in row["truth"])
    assert model_row(score, replace, "")["by"] == "rule"  # no instruction: every reading scores the same


def test_the_line_rules_choice_is_the_rules_even_with_a_scorer() -> None:
    """The line rules' choice is named in the result but never handed to a model: the scorer is
    not called and the rule's reading is written."""
    _, found = survey(FILE, EDGE, "python")
    assert found is not None
    choice, readings = found
    assert not choice.model_decides

    def scorer(*args):  # a fake: a model that would have picked the other reading
        raise AssertionError("the model was asked")

    index, decision = decide(scorer, choice, "Add the line.", FILE, EDGE, readings)
    assert decision.by == "rule" and decision.chosen == "replace line 6" and index == 0
