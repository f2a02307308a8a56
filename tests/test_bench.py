"""Benchmarks: smoke tests of the harness (never timed assertions), hand-checked bounds, the
teacher-forced walks of the engine's decode loop, and the pass@1 runner on real corpus cases."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.bounds import DraftedWalk, KernelCurve, bound, drafted_cost, paper_cost, structure_cost
from engine.bench.lookup import PromptLookupDrafter
from engine.decoding.drafter import InputDrafter
from engine.decoding.greedy import DraftedDecode, Teacher
from engine.runtime.session import Session

REPO = Path(__file__).resolve().parent.parent

# s(N) measured at 1, 2, 4, 8, 16 (hand-made): s = 1, 2, 3, 4, 8.
HAND_KERNEL = [{"N": 1, "speedup": 1.0}, {"N": 2, "speedup": 2.0}, {"N": 4, "speedup": 3.0},
               {"N": 8, "speedup": 4.0}, {"N": 16, "speedup": 8.0}]


def test_kernel_curve_interpolates_log_linearly() -> None:
    k = KernelCurve.from_points(HAND_KERNEL)
    assert k.s(1) == 1.0 and k.s(0.5) == 1.0
    assert k.s(4) == 3.0
    assert k.s(3) == pytest.approx(2 + (math.log2(3) - 1))  # 2.5850: between (2, 2) and (4, 3) in log2 N
    assert k.s(12) == pytest.approx(4 + 4 * (math.log2(12) - 3))  # 6.3399
    assert k.s(64) == 8.0  # flat beyond the largest N
    # s(1) is 1 by definition even when the measurement says otherwise
    assert KernelCurve.from_points([{"N": 1, "speedup": 0.9}, {"N": 2, "speedup": 1.8}]).s(1) == 1.0


def test_bounds_on_a_hand_made_histogram() -> None:
    """T = 100 gold tokens: 10 generated, copy spans of 16, 64 and 10 tokens.

    paper:  10 + 16/8 + 64/8 + 10/s(10), s(10) = 4 + 4 (log2 10 - 3) = 5.2877 -> 21.8912 steps -> 4.568x
    structure-aware: 20 chosen tokens, forced literal runs of 2, 1, 3 tokens:
            20 + (2/2 + 1/1 + 3/2.5850) + 11.8912 = 35.0517 steps -> 2.853x
    """
    k = KernelCurve.from_points(HAND_KERNEL)
    spans = [16, 64, 10]
    assert paper_cost(10, spans, k) == pytest.approx(21.8912, abs=1e-4)
    assert bound(100, paper_cost(10, spans, k)) == pytest.approx(4.5681, abs=1e-4)
    assert structure_cost(20, [2, 1, 3], spans, k) == pytest.approx(35.0517, abs=1e-4)
    assert bound(100, structure_cost(20, [2, 1, 3], spans, k)) == pytest.approx(2.8529, abs=1e-4)
    assert bound(5, 0) is None


class _RandomSession(Session):
    """A model-free session: random logits, a cache that is only a length."""

    def _forward(self, ids: list[int], rows: list[int]):
        import torch

        return torch.randn(len(rows), 16)

    def _truncate(self, length: int) -> None:
        pass


def test_prompt_lookup_drafter_is_transformers_lookup() -> None:
    drafter = PromptLookupDrafter([5, 6, 7, 8, 9], {8})
    assert drafter.propose([5, 6], 3) == [7]  # the leftmost earlier "5 6", cut before the end token
    assert PromptLookupDrafter([5, 6, 7, 8, 9], set()).propose([5, 6], 3) == [7, 8, 9, 5, 6]  # not cut to the room
    assert drafter.propose([4], 3) == []


@pytest.mark.parametrize("drafter", ["none", "lookup", "input"])
def test_teacher_forced_decode_walks_the_gold(drafter: str) -> None:
    """Under a teacher the drafted loop appends exactly prompt + gold, whatever the logits say."""
    prompt, gold = [1, 2, 3, 4, 5, 6, 7, 2, 3], [4, 5, 9, 9, 6, 7, 2, 3, 4, 5, 10]
    session = _RandomSession()
    source = {"none": None, "lookup": PromptLookupDrafter(prompt, {15}),
              "input": InputDrafter([4, 5, 6, 7, 2, 3, 4, 5, 10])}[drafter]
    decode = DraftedDecode(session, prompt, {15}, len(gold), source, teacher=Teacher(gold))
    chunks = list(decode.chunks())
    assert decode.out == gold and decode.stop_reason == "done"
    assert [t for c in chunks for t in c.tokens] == gold and session.tokens == prompt + gold
    assert decode.steps + decode.accepted == len(gold)
    assert (decode.accepted + decode.rejected > 0) == (drafter != "none")


# --- the pass@1 runner on real cases ------------------------------------------------------------

def _cases(name: str, ids: list[str]):
    from engine.evaluation.corpora import load_corpus

    by_id = {c.id: c for c in load_corpus(name)}
    return [by_id[i] for i in ids]


@pytest.mark.parametrize("corpus,ids", [
    ("humanevalfix-python", ["Python/0", "Python/1", "Python/2"]),
    ("humanevalfix-js", ["JavaScript/0", "JavaScript/1", "JavaScript/2"]),
    ("canitedit", ["1_cipher", "3_hello_world", "9_sorting"]),
])
def test_runner_passes_gold_and_fails_buggy(corpus: str, ids: list[str]) -> None:
    from engine.bench.runner import run_tests

    for case in _cases(corpus, ids):
        gold = run_tests(case)
        assert gold.passed, (case.id, gold.detail)
        buggy = run_tests(case, case.input)
        assert not buggy.passed and buggy.status == "fail", case.id


def test_runner_times_out_and_isolates(tmp_path: Path) -> None:
    from engine.bench.runner import run_tests
    from engine.evaluation.corpora import EditCase

    loop = EditCase(id="loop", corpus="t", language="python", input="", gold="", instruction="",
                    test="while True:\n    pass\n")
    outcome = run_tests(loop, "", timeout=1.5)
    assert outcome.status == "timeout" and not outcome.passed
    # -I: the working folder is a fresh temp dir and user site / PYTHON* variables are ignored
    probe = EditCase(id="probe", corpus="t", language="python", input="", gold="", instruction="",
                     test="import os, sys\nassert sys.flags.isolated\nassert os.listdir('.') == ['candidate.py'], os.listdir('.')\n")
    assert run_tests(probe, "").passed
    js = EditCase(id="js", corpus="t", language="javascript", input="", gold="", instruction="",
                  test="console.assert(1 === 2)\n")
    assert run_tests(js, "").status == "fail"  # exit code 0, but "Assertion failed" printed


# --- smoke runs with the default model ----------------------------------------------------------

@pytest.fixture()
def cached_engine(default_engine, monkeypatch):
    """The session's engine, also behind the CLI's engine cache (no second model load)."""
    from engine.bench import harness
    from engine.runtime.backends import BackendOptions

    key = ("default", None, None, "auto", "transformers", BackendOptions())
    monkeypatch.setitem(harness._ENGINES, key, default_engine)
    return default_engine


@pytest.mark.model
def test_bench_kernel_cli(cached_engine, tmp_path: Path) -> None:
    from engine.cli import main

    out = tmp_path / "kernel.json"
    assert main(["bench", "kernel", "--ns", "1,2,4", "--trials", "2", "--context", "64", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["model"] == "default" and data["device"] == "cpu" and data["context"] == 64
    assert [p["N"] for p in data["points"]] == [1, 2, 4]
    for p in data["points"]:
        assert p["ar_s"] > 0 and p["prefill_s"] > 0 and p["speedup"] == pytest.approx(p["ar_s"] / p["prefill_s"])
        assert len(p["ar_trials_s"]) == 2
    assert (tmp_path / "kernel.png").stat().st_size > 1000


def _hand_kernel_file(path: Path) -> Path:
    path.write_text(json.dumps({"model": "hand", "device": "cpu", "context": 1024, "trials": 1, "warmup": 0,
                                "points": [{**p, "ar_s": p["N"] * 0.01, "prefill_s": 0.01 * p["N"] / p["speedup"]}
                                           for p in HAND_KERNEL]}))
    return path


@pytest.mark.model
def test_bench_edits_forced_cli(cached_engine, tmp_path: Path) -> None:
    from engine.bench.report import markdown_report
    from engine.cli import main

    kernel = _hand_kernel_file(tmp_path / "bench_kernel.json")
    out = tmp_path / "bench_forced_humanevalfix-python.json"
    assert main(["bench", "edits", "--corpus", "humanevalfix-python", "--family", "forced", "--arms",
                 "ar,program,program-drafted", "--limit", "1", "--no-warmup", "--kernel", str(kernel),
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["corpus"] == "humanevalfix-python" and data["family"] == "forced" and data["cases"] == 1
    assert data["complete"] is True and data["settings"]["corpus_cases"] == 164
    assert set(data["arms"]) == {"ar", "program", "program-drafted"}
    for arm in data["arms"].values():
        assert {"total_s", "median_s", "speedup_vs_ar", "median_speedup_vs_ar", "tokens", "forwards"} <= set(arm)
        assert arm["ok"] == 1  # every arm produces the gold
    case = data["per_case"][0]
    assert case["index"] == 0
    assert data["arms"]["ar"]["forwards"] == case["gold_tokens"]  # one forward per gold token
    assert data["arms"]["ar"]["speedup_vs_ar"] == 1.0
    program, drafted = data["arms"]["program"], data["arms"]["program-drafted"]
    assert program["forwards"] < case["gold_tokens"] and program["copied"] > 0
    assert "drafted_tokens" not in program["breakdown"]  # draft=False: the old undrafted decoder
    # drafting feeds the same tokens (the teacher accepts every draft) in fewer, larger forwards, plus
    # the last choice and its literals when a draft reached </program> (undrafted, they are never fed)
    trailing = 1 + case["oracle"]["trailing_literal_tokens"]
    assert drafted["forward_tokens"] - program["forward_tokens"] in (0, trailing)
    assert drafted["forwards"] < program["forwards"]
    assert drafted["breakdown"]["drafted_tokens"] == drafted["breakdown"]["draft_accepted"] > 0
    assert drafted["breakdown"]["verify_calls"] > 0
    b = data["bounds"]
    assert b["paper"] > b["structure_aware"] > 0 and b["walk_matches_engine"] == 1
    assert b["drafted_walk_matches_engine"] == 1  # the model-free walk predicts the engine's forwards exactly
    assert b["drafted"] > b["fused"] > 0 and b["drafted_forwards"] == drafted["forwards"]
    assert b["drafted_tokens"] == drafted["breakdown"]["drafted_tokens"]
    assert b["T"] == case["gold_tokens"] == b["T_gen"] + sum(case["oracle"]["spans"])
    assert (tmp_path / "bench_forced_humanevalfix-python.png").stat().st_size > 1000
    report = markdown_report(tmp_path)
    assert "Forced family" in report and "Drafted bound" in report
    assert "| humanevalfix-python | 1 of 164 | program-drafted |" in report


def test_drafted_bound_on_hand_made_forwards() -> None:
    """Forwards of 1, 4, 8 and 1 tokens cost 1 + 4/3 + 8/4 + 1 = 5.3333 steps; T = 20 -> 3.75x."""
    k = KernelCurve.from_points(HAND_KERNEL)
    walk = DraftedWalk(forward_sizes=[1, 4, 8, 1], drafted=6, drafted_structure=2, verify_forwards=2)
    assert drafted_cost(walk, k) == pytest.approx(5.3333, abs=1e-4)
    assert bound(20, drafted_cost(walk, k)) == pytest.approx(3.75, abs=1e-4)


@pytest.mark.model
def test_drafted_walk_against_the_undrafted_walk(default_engine) -> None:
    """The model-free walk of the engine's decoder: drafting (all drafts accepted under the teacher)
    feeds exactly the undrafted tokens in fewer forwards; drafted structure is counted."""
    from engine.bench.bounds import drafted_walk, program_structure
    from engine.decoding.tables import tables_for
    from engine.language.oracle import line_oracle

    loaded = default_engine.loaded
    tables = tables_for(loaded)
    for case in _cases("humanevalfix-python", ["Python/1", "Python/2"]):
        program = line_oracle(case.input, case.gold)
        undrafted = drafted_walk(loaded, tables, case.input, program, draft=False)
        drafted = drafted_walk(loaded, tables, case.input, program)
        structure = program_structure(loaded, tables, case.input, program)
        assert undrafted.drafted == 0 and undrafted.verify_forwards == 0
        # undrafted: one forward per chosen token except the last (it and what it forces are never fed)
        assert len(undrafted.forward_sizes) == structure.chosen - 1, case.id
        # drafted: one forward per choice the drafter did not make; the same tokens, plus the last
        # choice and its trailing literals when a draft carried the program to its end
        extra = sum(drafted.forward_sizes) - sum(undrafted.forward_sizes)
        last_fed = extra == 1 + structure.trailing_literal_tokens
        assert extra == 0 or last_fed, case.id
        assert len(drafted.forward_sizes) == structure.chosen - drafted.drafted - (0 if last_fed else 1), case.id
        assert 0 < drafted.drafted_structure <= drafted.drafted < structure.chosen


@pytest.mark.model
def test_bench_edits_free(cached_engine) -> None:
    from engine.bench.edits import run_corpus
    from engine.evaluation.corpora import load_corpus
    from engine.training.synth import first_changed_line

    partials: list[dict] = []
    arms = ["ar", "program", "program-undrafted", "program-base", "program-near", "program-oracle"]
    data = run_corpus(cached_engine, "humanevalfix-python", "free", arms, offset=1, limit=1, max_new_tokens=32,
                      progress=False, warmup=False, test_timeout=10, on_partial=partials.append)
    assert data["family"] == "free" and data["cases"] == 1 and data["bounds"] is None and data["complete"]
    assert len(partials) == 1 and partials[0]["complete"] is False and partials[0]["cases"] == 1
    for name, arm in data["arms"].items():
        assert arm["total_s"] > 0 and arm["tokens"] > 0 and 0 <= arm["pass_at_1"] <= 1, name
        assert arm["forwards"] >= 1 and arm["exact"] in (0, 1) and arm["collateral_lines"] >= 0, name
        assert arm["unfinished"] == arm["stopped_at_limit"] + arm["stopped_loop"], name
    assert data["arms"]["ar"]["same_as_ar"] == 1 and data["arms"]["ar"]["valid_programs"] is None
    assert data["arms"]["program"]["valid_programs"] in (0, 1)
    assert data["arms"]["program-oracle"]["hinted"] and not data["arms"]["program"]["hinted"]
    assert [data["arms"][a]["focus"] for a in ("program", "program-near", "program-oracle")] == ["none", "near", "oracle"]
    for name, arm in data["arms"].items():
        assert arm["wrong_line"] in (0, 1) and arm["syntax_broken"] in (0, 1) and arm["tail_deletions"] in (0, 1), name
    # drafting is lossless: the undrafted decoder writes the same program
    assert data["arms"]["program-undrafted"]["identical_to_program"] == 1
    assert data["arms"]["program"]["breakdown"].get("drafted_tokens", 0) >= 0
    assert "drafted_tokens" not in data["arms"]["program-undrafted"]["breakdown"]
    case = data["per_case"][0]
    gold_case = load_corpus("humanevalfix-python")[1]
    assert case["id"] == gold_case.id and case["index"] == 1
    changed = first_changed_line(gold_case.input, gold_case.gold)
    assert case["focus"]["oracle"] == changed
    assert case["focus"]["near"] == min(max(1, changed + case["focus"]["near_offset"]), case["input_lines"])
    assert data["near_offsets"]["drawn"] == {str(case["focus"]["near_offset"]): 1}
    assert data["reference"] == {"gold_pass": 1, "cases": 1}
    assert case["arms"]["ar"]["test"] in ("pass", "fail", "timeout")
    assert set(case["arms"]["program"]["collateral"]) == {"changed", "deleted", "first", "lines"}
    assert {"wrong_line", "tail_deleted", "syntax_broken"} <= set(case["arms"]["program-near"])
    # every measured edit is a first edit (Engine.forget_prompts): the near arm runs the
    # localizer again though the program arm just ran it on the same hintless prompt, and ar
    # reuses nothing; within an edit the localizer's forward is the program prompt's prefix
    per = case["arms"]
    assert per["program"]["breakdown"]["localize_s"] > 0 and per["program-near"]["breakdown"]["localize_s"] > 0
    assert per["ar"]["breakdown"].get("prefix_reused", 0) == 0
    from engine.runtime.selector.adapter import HINT_AFTER, prompt_layout

    if prompt_layout(cached_engine.model_for("program").selector) == HINT_AFTER:  # adapters that show the hint last
        assert per["program"]["breakdown"]["prefix_reused"] > 0
    assert all(per[a]["edit_s"] >= per[a]["decode_s"] for a in arms)
    assert all(data["arms"][a]["edit_speedup_vs_ar"] > 0 for a in arms)


# --- quality measures on hand-made edits ----------------------------------------------------------

_INPUT = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"
_GOLD = "a = 1\nb = 2\nc = 30\nd = 4\ne = 5\n"  # changes line 3 only


@pytest.mark.parametrize("output,changed,deleted,first", [
    (_GOLD, 0, 0, None),                                      # the gold itself
    (_INPUT, 0, 0, None),                                     # no edit: wrong, but destroys nothing
    ("a = 1\nb = 2\nc = 31\nd = 4\ne = 5\n", 0, 0, None),     # a wrong fix on the gold's line
    ("a = 1\nb = 2\nc = 30\nd = 4\ne = 5", 0, 0, None),        # missing final newline is no damage
    ("a = 1\nb = 2\nc = 30\n", 0, 2, 4),                       # deletes d and e
    ("A = 1\nb = 2\nc = 30\nd = 4\ne = 5\n", 1, 0, 1),        # rewrites line 1 too
    ("a = 1\nb = 2\nc = 30\nx\ny\nd = 4\ne = 5\n", 0, 0, None),  # adds lines: nothing destroyed
    ("def f():\n    pass\n", 2, 2, 1),                        # a rewrite: 4 of the gold's kept lines gone
])
def test_collateral_damage_hand_made(output: str, changed: int, deleted: int, first: int | None) -> None:
    from engine.evaluation.quality import collateral_damage

    damage = collateral_damage(_INPUT, output, _GOLD)
    assert (damage.changed, damage.deleted, damage.first) == (changed, deleted, first)
    assert damage.lines == changed + deleted


def test_collateral_damage_when_the_gold_deletes() -> None:
    """Gold deletes line 2; deleting line 3 instead destroys a line the gold keeps (and line 2,
    which the gold removes anyway, is not counted when the output removes it)."""
    from engine.evaluation.quality import collateral_damage

    gold = "a\nc\nd\n"
    assert collateral_damage("a\nb\nc\nd\n", gold, gold).lines == 0
    wrong = collateral_damage("a\nb\nc\nd\n", "a\nb\nd\n", gold)
    assert (wrong.changed, wrong.deleted, wrong.first) == (0, 1, 3)


@pytest.mark.parametrize("output,wrong", [
    (_GOLD, False),                                       # the gold's line
    (_INPUT, False),                                      # no edit at all: not an edit on a wrong line
    ("a = 1\nb = 2\nc = 31\nd = 4\ne = 5\n", False),     # a wrong fix, but on the gold's line
    ("a = 1\nb = 20\nc = 3\nd = 4\ne = 5\n", True),      # the line above instead
    ("a = 1\nb = 20\nc = 30\nd = 4\ne = 5\n", False),    # the gold's line and one more: collateral, not wrong-line
    ("a = 1\nb = 2\nc = 3\n", True),                     # only deletes d and e
    ("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n", True),  # only appends after the last line
    ("a = 1\nb = 2\nx = 0\nc = 3\nd = 4\ne = 5\n", False),  # inserts right before the gold's line
])
def test_wrong_line_edit_hand_made(output: str, wrong: bool) -> None:
    from engine.evaluation.quality import wrong_line_edit

    assert wrong_line_edit(_INPUT, output, _GOLD) is wrong


def test_wrong_line_when_the_gold_inserts() -> None:
    """The gold inserts a line between 2 and 3: editing line 2 or 3 is at the right place, line 5 is not."""
    from engine.evaluation.quality import wrong_line_edit

    gold = "a\nb\nnew\nc\nd\ne\n"
    source = "a\nb\nc\nd\ne\n"
    assert not wrong_line_edit(source, "a\nB\nc\nd\ne\n", gold)
    assert not wrong_line_edit(source, "a\nb\nC\nd\ne\n", gold)
    assert wrong_line_edit(source, "a\nb\nc\nd\nE\n", gold)


@pytest.mark.parametrize("output,gold,lines", [
    (_GOLD, _GOLD, 0),
    ("a = 1\nb = 2\nc = 30\n", _GOLD, 2),                        # ended after line 3: d and e gone
    ("a = 1\nb = 2\nc = 30\nd = 4\n", _GOLD, 1),
    ("a = 1\nb = 2\nc = 30\nd = 4\ne = 5", _GOLD, 0),           # a missing final newline drops nothing
    ("a = 1\nc = 30\nd = 4\ne = 5\n", _GOLD, 0),                 # a deletion in the middle is not a tail
    ("a = 1\nb = 2\nc = 3\nd = 4\n", "a = 1\nb = 2\nc = 3\nd = 4\n", 0),  # the gold drops e too
    ("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 2\nc = 3\nd = 4\n", 1),  # d is kept by the gold, e is not
    ("a = 1\nb = 2\nc = 30\nd = 4\nE = 5\n", _GOLD, 0),          # the last line rewritten, not dropped
])
def test_tail_deletion_hand_made(output: str, gold: str, lines: int) -> None:
    from engine.evaluation.quality import tail_deletion

    assert tail_deletion(_INPUT, output, gold) == lines
    assert tail_deletion(_INPUT + "\n\n", output, gold + "\n\n") == lines  # trailing blank lines aside


def test_syntax_broken_per_language() -> None:
    from engine.evaluation.quality import syntax_broken

    source = "def f(x):\n    if x:\n        return 1\n    return 2\n"
    assert syntax_broken(source, source.replace("return 1", "return 3"), "python") is False
    assert syntax_broken(source, source.replace("    if x:\n", "    elif x:\n"), "python") is True
    assert syntax_broken("def f(:\n", "def f(:\n    pass\n", "python") is False  # did not parse before
    assert syntax_broken("function f(a) {\n  return a;\n}\n", "function f(a) {\n  return a;\n", "javascript") is True
    assert syntax_broken("x", "y (", "klingon") is None


def test_near_focus_is_seeded_clipped_and_centered() -> None:
    from collections import Counter

    from engine.evaluation.focus import NEAR_OFFSETS, focus_for, near_line, near_offset, offset_histograms

    assert near_offset("Python/3") == near_offset("Python/3")
    draws = Counter(near_offset(f"Python/{i}") for i in range(700))
    assert set(draws) == set(NEAR_OFFSETS) and min(draws.values()) > 60  # about 100 each
    assert all(1 <= near_line(1, 5, f"k{i}") <= 4 for i in range(50))  # clipped at the region's top
    assert all(near_line(5, 5, f"k{i}") >= 2 for i in range(50))
    assert focus_for("none", 4, 9, "k") is None and focus_for("oracle", 4, 9, "k") == 4
    assert focus_for("on", 4, 9, "k") == 4  # the cursor-on arms: a user who clicks the bug
    assert focus_for("near", None, 9, "k") is None
    with pytest.raises(ValueError):
        focus_for("cursor", 4, 9, "k")
    records = [{"focus": {"oracle": 1, "near": 1, "near_offset": -2}}, {"focus": {"oracle": 5, "near": 7, "near_offset": 2}}]
    assert offset_histograms(records) == {"drawn": {"-2": 1, "2": 1}, "applied": {"0": 1, "2": 1}}


def test_exact_match_and_valid_program() -> None:
    from engine.evaluation.quality import exact_match, valid_program
    from engine.language.program import CopyLines, Gen, Program

    assert exact_match("x = 1  \ny\n\n", "x = 1\ny\n") and exact_match("x\ny", "x\ny\n")
    assert not exact_match("x = 1\n", "x = 2\n") and not exact_match("  x\n", "x\n")
    region = "a\nb\nc\n"
    raw = Program((CopyLines(1, 1), Gen("B\n"), CopyLines(3, 3))).serialize()
    assert valid_program(raw, region, "a\nB\nc\n", "done")
    assert not valid_program(raw, region, "a\nB\nc\n", "max_tokens")  # unfinished
    assert not valid_program(raw, region, "a\nb\nc\n", "done")  # resolves to another text
    assert not valid_program(raw[:-3], region, "a\nB\nc\n", "done")  # does not parse
    out_of_range = Program((CopyLines(1, 4),)).serialize()
    assert not valid_program(out_of_range, region, region, "done")  # does not resolve


def test_arm_lists() -> None:
    from engine.bench.arms import DEFAULT_ARMS, ArmError, parse_arms

    assert parse_arms(None, "forced") == list(DEFAULT_ARMS["forced"])
    assert parse_arms("ar,program-near,program-oracle", "free") == ["ar", "program-near", "program-oracle"]
    assert parse_arms("ar,program-focus", "free") == ["ar", "program-oracle"]  # the old name
    assert parse_arms("program-near", "free") == ["program-near"]  # free runs may leave ar out
    for text, family in (("ar,program-oracle", "forced"), ("ar,program-focus,program-oracle", "free"), ("program", "forced"), ("ar,ar", "free"),
                         ("ar,program-drafted", "free")):
        with pytest.raises(ArmError):
            parse_arms(text, family)


# --- merging partial results ----------------------------------------------------------------------

def _record(case_id: str, index: int, ar_s: float, program_s: float, same: bool = True) -> dict:
    def arm(seconds: float, stop: str = "done") -> dict:
        return {"decode_s": seconds, "wall_s": seconds, "speedup_vs_ar": ar_s / seconds, "wall_speedup_vs_ar": 1.0,
                "forwards": 10, "forward_tokens": 12, "max_forward": 3, "output_tokens": 12,
                "tokens": {"generated": 10, "copied": 2, "forced": 0}, "breakdown": {"step_s": seconds, "step_calls": 10},
                "stop_reason": stop, "same_as_ar": same, "exact": False,
                "collateral": {"changed": 1, "deleted": 0, "first": 2, "lines": 1}, "test": "fail"}

    return {"id": case_id, "index": index, "gold_tokens": 12, "input_tokens": 12, "order": ["ar", "program"],
            "input_lines": 4, "arms": {"ar": arm(ar_s), "program": {**arm(program_s, "max_tokens"), "valid_program": False}}}


def _part(records: list[dict], offset: int, **settings) -> dict:
    from engine.bench.edits import results_record

    base = {"arms": ["ar", "program"], "limit": len(records), "offset": offset, "max_new_tokens": None,
            "max_new_tokens_rule": "r", "test_timeout_s": 15.0, "warmup": True, "selector": None, "corpus_cases": 5}
    return results_record(records, corpus="humanevalfix-python", family="free", arms=["ar", "program"], model="m",
                          device="cpu", kernel=None, settings={**base, **settings}, machine={"date": "d"},
                          command=f"run {offset}", elapsed_s=1.0)


def test_merge_partial_results(tmp_path: Path) -> None:
    from engine.bench.merge import MergeError, merge_results
    from engine.cli import main

    first = _part([_record("c0", 0, 2.0, 1.0), _record("c1", 1, 4.0, 4.0)], offset=0)
    second = _part([_record("c2", 2, 6.0, 1.0)], offset=2)
    merged = merge_results([second, first])  # order of the parts does not matter
    assert [r["id"] for r in merged["per_case"]] == ["c0", "c1", "c2"]
    assert merged["cases"] == 3 and len(merged["parts"]) == 2
    prog = merged["arms"]["program"]
    assert prog["total_s"] == 6.0 and prog["speedup_vs_ar"] == pytest.approx(12.0 / 6.0)
    assert prog["median_speedup_vs_ar"] == 2.0 and prog["stopped_at_limit"] == 3 and prog["valid_programs"] == 0
    assert prog["collateral_lines"] == 3 and prog["collateral_cases"] == 3 and prog["input_lines"] == 12
    with pytest.raises(MergeError, match="c1"):
        merge_results([first, _part([_record("c1", 1, 1.0, 1.0)], offset=1)])
    with pytest.raises(MergeError, match="selector"):
        merge_results([first, _part([_record("c3", 3, 1.0, 1.0)], offset=3, selector="/some/adapter")])
    # the CLI: files in, one file out, merging a merge again
    paths = []
    for i, part in enumerate((first, second)):
        paths.append(tmp_path / f"part{i}.json")
        paths[-1].write_text(json.dumps(part))
    out = tmp_path / "bench_free_humanevalfix-python.json"
    assert main(["bench", "merge", str(paths[0]), str(paths[1]), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["cases"] == 3 and data["arms"]["program"]["total_s"] == 6.0
    assert [p["first"] for p in data["parts"]] == ["c0", "c2"]
    assert main(["bench", "merge", str(paths[0]), str(paths[0]), "--json", str(tmp_path / "x.json")]) == 2


def test_report_into_markers(tmp_path: Path) -> None:
    from engine.bench.report import MARK_END, MARK_START
    from engine.cli import main

    first = _part([_record("c0", 0, 2.0, 1.0)], offset=0)
    (tmp_path / "bench_free_humanevalfix-python.json").write_text(json.dumps(first))
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"# Title\n\nkept above\n\n{MARK_START}\nold tables\n{MARK_END}\n\nkept below\n")
    assert main(["bench", "report", "--results", str(tmp_path), "--into", str(doc)]) == 0
    text = doc.read_text()
    assert "old tables" not in text and "kept above" in text and "kept below" in text
    assert "| humanevalfix-python | 1 of 5 | program | none | 0/1 | 0/1 | 0/1 | 1 / 0 | 1 (1) | - | - | - |" in text
    assert "free program: valid programs 100%" in text
    doc.write_text(f"{MARK_START}\n{MARK_END}\n")
    # a result file written before the near/oracle split: its program-focus arm is the oracle
    old = json.loads(json.dumps(first).replace('"program"', '"program-focus"'))
    (tmp_path / "bench_free_humanevalfix-python.json").write_text(json.dumps(old))
    assert main(["bench", "report", "--results", str(tmp_path), "--into", str(doc)]) == 0
    text = doc.read_text()
    assert "| program-oracle | oracle | 0/1 |" in text and text.count("program-focus") == 1  # in the note only
    doc.write_text("no markers\n")
    assert main(["bench", "report", "--results", str(tmp_path), "--into", str(doc)]) == 2


def test_gpu_kernel_script_runs_tiny_on_cpu(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_kernel.py"), "--tiny", "--device", "cpu",
                           "--ns", "1,2", "--trials", "1", "--warmup", "0", "--context", "16", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted(p.name for p in tmp_path.glob("*.json"))
    assert files == ["bench_kernel_gpu_qwen2.5-1.5b-instruct-tiny.json", "bench_kernel_gpu_qwen2.5-7b-instruct-tiny.json"]
    data = json.loads((tmp_path / files[0]).read_text())
    assert data["architecture"] == "Qwen2.5-1.5B-Instruct" and [p["N"] for p in data["points"]] == [1, 2]


@pytest.mark.model
def test_forced_text_prompt_is_the_engines(default_engine) -> None:
    """The forced text arms decode after exactly the prompt the engine's text modes use."""
    from engine.api import EditRequest
    from engine.bench.edits import _language, text_prompt_ids
    from engine.decoding.events import EditStarted

    case = _cases("humanevalfix-js", ["JavaScript/3"])[0]
    stream = default_engine.stream(EditRequest(case.input, case.instruction, mode="ar", max_new_tokens=1,
                                               **_language(case)))
    started = next(stream)
    stream.close()
    assert isinstance(started, EditStarted)
    assert started.prompt_tokens == len(text_prompt_ids(default_engine.loaded.tokenizer, case))


@pytest.mark.model
def test_pld_mode_times_its_prefill_apart(default_engine) -> None:
    """pld's generate() reads the prompt in its first forward (with the first draft it verifies):
    that forward is the edit's prefill_s, the others its decode_s (as the other modes time theirs)."""
    from engine.api import EditRequest

    loaded = default_engine.model_for("pld")
    default_engine.forget_prompts()
    with loaded.runtime.meter() as meter:
        result = default_engine.edit(EditRequest("def add(a, b):\n    return a - b\n", "Fix the bug", mode="pld",
                                                 max_new_tokens=24))
    breakdown, forwards = result.breakdown, meter.records
    assert breakdown["prefill_forwards"] == breakdown["prefill_calls"] == 1
    assert breakdown["verify_calls"] == len(forwards) - 1 and forwards[0].tokens >= result.prompt_tokens
    # (this meter's hooks run around the engine's own: the times differ by the hooks' overhead)
    assert result.timings["prefill_s"] == pytest.approx(forwards[0].seconds, abs=1e-3)
    assert result.timings["decode_s"] == pytest.approx(meter.seconds(1), abs=1e-3)


def test_bench_setting_flags_are_the_schemas() -> None:
    """Every bench flag that is a setting reads the schema's help and choices (--mode: every edit
    mode, the measurement ones too); its default is the schema's but where the bench declares its
    own (--backend transformers, said in --help)."""
    import argparse

    from engine.cli import build_parser
    from engine.commands.bench import BENCH_DEFAULTS
    from engine.core.choices import MODES
    from engine.settings import SPECS

    bench = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    commands = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, parser in commands.items():
        for action in parser._actions:
            spec = SPECS.get(action.dest)
            if spec is None or not action.option_strings:
                continue
            assert action.option_strings == [spec.flag] and action.help.startswith(spec.help), (name, action.dest)
            allowed = MODES if action.dest == "mode" else spec.choices
            assert set(action.choices or ()) <= set(allowed or ()), (name, action.dest)
    backend = next(a for a in commands["edits"]._actions if a.dest == "backend")
    assert backend.default == BENCH_DEFAULTS["backend"] == "transformers" and "not the product's auto" in backend.help
    # a boolean setting is a switch: given, it is on; not given, the schema's default (off)
    padded = commands["edits"].parse_args(["--corpus", "c", "--family", "free", "--padded-steps"])
    assert padded.padded_steps is True
    assert commands["edits"].parse_args(["--corpus", "c", "--family", "free"]).padded_steps is False
