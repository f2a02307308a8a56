"""Copy statistics: hand-checked numbers on a tiny corpus, the JSON shape, and the analyze command."""

from __future__ import annotations

import json
import random

import pytest

from engine.bench.analysis import (
    LineTokenCounter,
    analyze_cases,
    analyze_cases_paper,
    batch_encode,
    paper_line_ops,
    perturb,
    perturbation_study,
    structure_text,
    tokens_per_op,
)
from engine.cli import main
from engine.evaluation.corpora import SHARED_ENV, CorpusError, EditCase, body_only, load_corpus, shared_dir
from engine.language.oracle import line_oracle
from engine.language.program import CopyLines, Gen, Program

REQUIRED_KEYS = {"tokenizer", "n", "T", "T_copy", "T_gen", "f_line", "K", "span_mean", "span_p50", "span_p95",
                 "token_cover", "lossless", "perturbation"}


class CharTokenizer:
    """One token per character (id = code point): every count below can be checked by hand."""

    def __init__(self):
        self.batches = 0

    def __call__(self, texts, add_special_tokens=False):
        self.batches += 1
        return {"input_ids": [self.encode(t) for t in texts]}

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(chr(i) for i in ids)


def _case(name, source, gold):
    return EditCase(id=name, corpus="tiny", language="text", input=source, gold=gold, instruction="edit")


TINY = [
    _case("A", "a\nb\nc\n", "a\nB\nc\n"),  # copy 1-1, gen "B\n", copy 3-3
    _case("B", "xy\n", "xy\nzz\n"),        # gen "xy\nzz\n": a copy of the last line would end the program
]


def test_tiny_corpus_hand_checked():
    assert line_oracle(TINY[0].input, TINY[0].gold) == Program((CopyLines(1, 1), Gen("B\n"), CopyLines(3, 3)))
    assert line_oracle(TINY[1].input, TINY[1].gold) == Program((Gen("xy\nzz\n"),))
    stats = analyze_cases(TINY, CharTokenizer(), "chars")
    assert REQUIRED_KEYS <= set(stats)
    assert (stats["n"], stats["T"], stats["T_copy"], stats["T_gen"]) == (2, 12, 4, 8)
    assert stats["f_line"] == pytest.approx(4 / 12)
    assert stats["f_line_case_mean"] == pytest.approx((4 / 6 + 0 / 6) / 2)
    assert (stats["T_lines"], stats["T_copy_lines"]) == (12, 4)  # char counts do not merge across lines
    assert stats["K"] == 2 and stats["span_lengths"] == [2, 2]
    assert stats["span_mean"] == pytest.approx(2.0)
    assert stats["span_p50"] == pytest.approx(2.0)
    assert stats["span_p95"] == pytest.approx(2.0)
    # A: gold "a\nB\nc\n" over "a\nb\nc\n": "a\n" (2) + "\nc\n" (3); B: "xy" (2) + "\n" (1): the copy
    # of "xy\n" reached the input's end with more after it, so its last token went to the gen
    assert stats["token_cover"] == pytest.approx({"1": 8 / 12, "2": 7 / 12, "4": 0.0, "8": 0.0, "16": 0.0, "32": 0.0})
    # '<program>' 9 + '<copy lines="1-1"/>' 19 + '<gen>' 5 + '</gen>' 6 + '</program>' 10
    assert stats["structure_tokens"] == (9 + 19 + 11 + 19 + 10) + (9 + 11 + 10)
    assert stats["program_tokens"] == stats["structure_tokens"] + 2 + 6
    assert stats["regen_tokens"] == 12
    assert stats["lossless"] == [2, 2]
    assert set(stats["perturbation"]) == {"1", "2", "5"}
    json.dumps(stats)


def test_counts_follow_the_whole_text_tokenization():
    """A token that crosses an op boundary counts once, for the op where it starts."""
    assert tokens_per_op(["a\n", "  b\n"], ["a", "\n  ", "b", "\n"]) == [2, 2]
    assert tokens_per_op(["a\n", "b\n"], ["a\nb", "\n"]) == [1, 1]
    assert tokens_per_op(["a", "b"], []) == [0, 0]
    assert tokens_per_op([], []) == []


def test_line_counter_batches_and_caches():
    tok = CharTokenizer()
    counter = LineTokenCounter(tok)
    assert counter.count(["ab\n", "c\n", "ab\n"]) == 8
    assert tok.batches == 1
    assert counter.count(["c\n", "ab\n"]) == 5
    assert tok.batches == 1  # all cached
    assert batch_encode(tok, []) == []


class ScriptedRng:
    def __init__(self, values):
        self.values = list(values)

    def randint(self, lo, hi):
        value = self.values.pop(0)
        assert lo <= value <= hi
        return value


def test_perturb_clamps_and_keeps_order():
    program = Program((Gen("x"), CopyLines(2, 3)))
    assert perturb(program, 5, 2, ScriptedRng([-2, 2])) == Program((Gen("x"), CopyLines(1, 5)))
    assert perturb(program, 5, 2, ScriptedRng([2, -2])) == Program((Gen("x"), CopyLines(4, 4)))  # J raised to I
    assert perturb(program, 3, 5, ScriptedRng([5, 5])) == Program((Gen("x"), CopyLines(3, 3)))
    assert perturb(program, 5, 5, ScriptedRng([-5, -5])) == Program((Gen("x"), CopyLines(1, 1)))


def test_perturb_random_properties():
    rng = random.Random(1)
    for _ in range(500):
        n = rng.randint(1, 20)
        a = rng.randint(1, n)
        b = rng.randint(a, n)
        eps = rng.choice([1, 2, 5])
        (op,) = perturb(Program((CopyLines(a, b),)), n, eps, rng).ops
        assert 1 <= op.start <= op.end <= n
        assert abs(op.start - a) <= eps


def test_perturbation_study():
    one_line = [_case("one", "a\n", "a\n")] * 3  # any shift clamps back to 1-1
    programs = [line_oracle(c.input, c.gold) for c in one_line]
    assert perturbation_study(one_line, programs) == {1: [1.0] * 5, 2: [1.0] * 5, 5: [1.0] * 5}
    two = [_case("two", "a\nb\n", "a\nb\n")] * 200
    rates = perturbation_study(two, [line_oracle(c.input, c.gold) for c in two], epsilons=(1,), trials=2, seed=3)[1]
    # exact iff the start shift is <= 0 and the end shift >= 0: (2/3)^2
    assert all(abs(rate - 4 / 9) < 0.12 for rate in rates)
    assert rates == perturbation_study(two, [line_oracle(c.input, c.gold) for c in two], (1,), 2, 3)[1]  # seeded


def test_structure_text():
    program = Program((CopyLines(1, 2), Gen("<gen>body")))
    assert structure_text(program) == '<program><copy lines="1-2"/><gen></gen></program>'


@pytest.fixture(scope="module")
def default_tokenizer():
    from engine.runtime.sources import load_tokenizer

    return load_tokenizer("default")


@pytest.mark.model
def test_batch_encode_matches_encode(default_tokenizer):
    from engine.core.tokens import encode

    texts = ["def f():\n    return 1\n", "", "héllo 😀\r\n\t", "<|im_start|>x"]
    assert batch_encode(default_tokenizer, texts) == [encode(default_tokenizer, t) for t in texts]


@pytest.mark.model
def test_real_tokenizer_counts_add_up(default_tokenizer):
    from engine.core.tokens import encode
    from engine.evaluation.corpora import load_corpus

    cases = load_corpus("humanevalfix-python")[:8]
    stats = analyze_cases(cases, default_tokenizer, "default")
    assert stats["T"] == sum(len(encode(default_tokenizer, c.gold)) for c in cases)
    assert stats["T_copy"] + stats["T_gen"] == stats["T"]
    assert stats["T_copy"] == sum(stats["span_lengths"])
    assert 0.5 < stats["f_line"] < 1.0
    assert stats["lossless"] == [8, 8]
    assert stats["token_cover"]["1"] >= stats["token_cover"]["32"]


@pytest.mark.model
def test_analyze_command_writes_json(tmp_path, capsys):
    out = tmp_path / "res" / "analysis.json"
    assert main(["analyze", "--corpus", "humanevalfix-python", "--tokenizer", "default", "--limit", "6",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "humanevalfix-python" in printed and "f_line" in printed and "elapsed" in printed
    data = json.loads(out.read_text())
    assert list(data) == ["humanevalfix-python"]
    stats = data["humanevalfix-python"]
    assert REQUIRED_KEYS <= set(stats)
    assert stats["n"] == 6 and stats["tokenizer"] == "default"
    assert set(stats["token_cover"]) == {"1", "2", "4", "8", "16", "32"}
    assert set(stats["perturbation"]) == {"1", "2", "5"}
    assert stats["lossless"] == [6, 6]


def test_analyze_command_qwen_and_folder(tmp_path, capsys):
    folder = shared_dir() / "tokenizers" / "qwen2.5"
    if not folder.is_dir():
        pytest.skip("no Qwen2.5 tokenizer in the shared folder")
    out = tmp_path / "q.json"
    assert main(["analyze", "--corpus", "canitedit", "--tokenizer", "qwen2.5", "--limit", "3", "--json", str(out)]) == 0
    by_name = json.loads(out.read_text())["canitedit"]
    assert by_name["n"] == 3 and by_name["tokenizer"] == "qwen2.5"
    assert main(["analyze", "--corpus", "canitedit", "--tokenizer", str(folder), "--limit", "3", "--json", str(out)]) == 0
    by_path = json.loads(out.read_text())["canitedit"]
    assert by_path["T"] == by_name["T"] and by_path["f_line"] == by_name["f_line"]


def test_analyze_command_clear_errors(tmp_path, monkeypatch, capsys):
    assert main(["analyze", "--corpus", "canitedit", "--tokenizer", str(tmp_path / "nope")]) == 2
    assert "not 'default', 'qwen2.5' or an existing" in capsys.readouterr().err
    (tmp_path / "data" / "canitedit").mkdir(parents=True)
    (tmp_path / "data" / "canitedit" / "canitedit_test.jsonl").write_text("", encoding="utf-8")
    monkeypatch.setenv(SHARED_ENV, str(tmp_path))
    assert main(["analyze", "--corpus", "canitedit", "--tokenizer", "qwen2.5"]) == 2
    assert "tokenizers/qwen2.5" in capsys.readouterr().err
    monkeypatch.setenv(SHARED_ENV, str(tmp_path / "missing"))
    assert main(["analyze", "--corpus", "canitedit"]) == 2
    assert "shared folder not found" in capsys.readouterr().err
    assert main(["analyze", "--corpus", "nonsense"]) == 2


# --- paper convention (the seed paper's Table 2) ---------------------------------------------------

PAPER_TABLE_2 = {"humanevalfix-python": (8872, 6577, 295), "humanevalfix-js": (14876, 11725, 311)}


def test_paper_line_ops_split_on_newline():
    # "a\nb\nc\n".split("\n") ends in "": it joins the last block when the last line is unchanged ...
    assert paper_line_ops("a\nb\nc\n", "a\nB\nc\n") == [(True, "a"), (False, "B"), (True, "c\n")]
    # ... and is a block of its own (0 tokens, still a span) when the last line changed
    assert paper_line_ops("xy\n", "xy\nzz\n") == [(True, "xy"), (False, "zz"), (True, "")]
    assert paper_line_ops("a", "b") == [(False, "b")]


def test_paper_counts_hand_checked():
    tok = CharTokenizer()
    stats = analyze_cases_paper(TINY, tok, "chars")
    assert stats["convention"] == "paper"
    # T: whole golds (6 + 6); copies "a", "c\n", "xy", ""; gens "B", "zz"
    assert (stats["n"], stats["T"], stats["T_copy"], stats["T_gen"], stats["K"]) == (2, 12, 5, 3, 4)
    assert stats["span_lengths"] == [1, 2, 2, 0]
    assert stats["f_line"] == pytest.approx(5 / 12)
    assert stats["f_line_case_mean"] == pytest.approx((3 / 6 + 2 / 6) / 2)
    assert tok.batches == 1
    json.dumps(stats)


def test_body_only_drops_the_declaration():
    rows = {json.loads(line)["task_id"]: json.loads(line)
            for line in (shared_dir() / "data" / "humanevalpack" / "humanevalpack_python.jsonl").open()}
    case = load_corpus("humanevalfix-python")[3]
    body = body_only(case)
    assert (body.input, body.gold) == (rows[case.id]["buggy_solution"], rows[case.id]["canonical_solution"])
    assert (body.id, body.instruction, body.test) == (case.id, case.instruction, case.test)
    canitedit = load_corpus("canitedit")[0]
    assert body_only(canitedit) is canitedit
    # a hand-built case whose gold lacks the declaration cannot be cut (fake: loaders never build one)
    odd = EditCase(id="odd", corpus="x", language="python", input="def f():\n  pass\n", gold="pass\n",
                   instruction="", test_fields={"declaration": "def f():\n"})
    with pytest.raises(CorpusError, match="declaration"):
        body_only(odd)


def test_paper_convention_reproduces_table_2(tmp_path, capsys):
    """The seed paper's Table 2 (Qwen2.5 tokenizer), exactly; CanItEdit is reported, not asserted."""
    if not (shared_dir() / "tokenizers" / "qwen2.5").is_dir():
        pytest.skip("no Qwen2.5 tokenizer in the shared folder")
    data = {}
    for corpus in (*PAPER_TABLE_2, "canitedit"):
        out = tmp_path / f"{corpus}.json"
        assert main(["analyze", "--corpus", corpus, "--tokenizer", "qwen2.5", "--convention", "paper",
                     "--json", str(out)]) == 0
        data[corpus] = json.loads(out.read_text())[corpus]
    assert "paper convention" in capsys.readouterr().out
    for corpus, expected in PAPER_TABLE_2.items():
        stats = data[corpus]
        assert (stats["T"], stats["T_copy"], stats["K"]) == expected, corpus
        assert stats["n"] == 164 and stats["convention"] == "paper"
        assert stats["command"].endswith(f"--corpus {corpus} --tokenizer qwen2.5 --convention paper --json {tmp_path / (corpus + '.json')}")
    canitedit = data["canitedit"]
    assert canitedit["n"] == 105 and canitedit["T"] > 0
    with capsys.disabled():
        print(f"\ncanitedit, paper convention (qwen2.5): T={canitedit['T']} T_copy={canitedit['T_copy']} "
              f"K={canitedit['K']} f_line={canitedit['f_line']:.3f}")
