"""Drafting inside program mode is lossless: the drafted decode writes exactly the program the
undrafted greedy decode writes (real model, real cases; a random model far from any real one),
with fewer forwards; and the fed sequence the recorder sees is the same either way."""

from __future__ import annotations

import pytest
import torch
from support import ADD_AND_SUB as BUGGY

from engine.api import EditRequest, Engine
from engine.core.tokens import encode
from engine.decoding.drafter import DraftText, DraftTokens, InputDrafter, ProgramDrafter, ProgramState
from engine.evaluation.corpora import load_corpus
from engine.language.oracle import line_oracle
from engine.language.program import CopyLines
from engine.runtime.backends.transformers_backend import TransformersRuntime
from engine.runtime.loaded import LoadedModel
from engine.training.record import record_fed_sequence


def _cases(name: str, k: int, max_chars: int = 900):
    return [c for c in load_corpus(name) if len(c.gold) <= max_chars][:k]


def _forwards(result) -> int:
    return sum(v for k, v in result.breakdown.items() if k.endswith("_calls") and not k.startswith("prefill"))


@pytest.mark.parametrize("case", _cases("humanevalfix-python", 3) + _cases("humanevalfix-js", 1), ids=lambda c: c.id)
def test_drafted_program_equals_undrafted(default_engine: Engine, case) -> None:
    runs = {}
    for draft in (False, True):
        runs[draft] = default_engine.edit(EditRequest(case.input, case.instruction, mode="program", max_new_tokens=80,
                                                      draft=draft))
    plain, drafted = runs[False], runs[True]
    assert drafted.raw_output == plain.raw_output
    assert drafted.output_text == plain.output_text
    assert drafted.stop_reason == plain.stop_reason
    assert (drafted.tokens.generated, drafted.tokens.forced, drafted.tokens.copied) == \
        (plain.tokens.generated, plain.tokens.forced, plain.tokens.copied)
    assert _forwards(drafted) <= _forwards(plain)


def test_drafting_saves_forwards_on_a_fix(default_engine: Engine) -> None:
    plain = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", max_new_tokens=96, draft=False))
    drafted = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", max_new_tokens=96))
    assert drafted.raw_output == plain.raw_output
    assert drafted.breakdown["draft_accepted"] > 0
    assert _forwards(drafted) < _forwards(plain)


@pytest.mark.parametrize("case", _cases("humanevalfix-python", 2) + _cases("canitedit", 1, 1500), ids=lambda c: c.id)
def test_forced_drafting_reaches_gold_and_records_the_same_sequence(default_engine: Engine, case) -> None:
    program = line_oracle(case.input, case.gold)
    seqs = {}
    for draft in (False, True):
        request = EditRequest(case.input, case.instruction, mode="forced", program=program, draft=draft,
                              prompt_style="selector", max_new_tokens=4096)
        seqs[draft] = record_fed_sequence(default_engine.loaded, request)
        assert seqs[draft].output == case.gold
    assert seqs[True].ids == seqs[False].ids
    assert seqs[True].chosen == seqs[False].chosen


def test_recorded_sequence_marks_only_chosen_tokens(default_engine: Engine) -> None:
    """Spliced copies and forced literals are never loss targets; the program's own end is, after a
    gen, and is forced after a copy that reached the last line (engine.language.program.must_end_after)."""
    tok = default_engine.loaded.tokenizer
    gold = BUGGY.replace("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub")
    seq = record_fed_sequence(default_engine.loaded, EditRequest(BUGGY, "Fix the bug in add.", mode="forced",
                                                                 program=line_oracle(BUGGY, gold)))
    assert seq.output == gold
    chosen_text = tok.decode([t for t, c in zip(seq.ids, seq.chosen) if c])
    assert "return a + b" in chosen_text.replace("  ", " ") or "a + b" in chosen_text
    assert '"""Return the sum' not in chosen_text  # spliced from line 2, never chosen
    assert 'lines="' not in chosen_text  # forced literal
    assert line_oracle(BUGGY, gold).ops[-1] == CopyLines(4, 7)
    assert not any(seq.chosen[-3:]), tok.decode(seq.ids[-3:])  # the copy's close and </program>: forced
    assert len(seq.ids) == len(seq.chosen)
    # After a final gen the end ("/" after the forced "<") is a target: the model must learn to stop.
    tail = record_fed_sequence(default_engine.loaded, EditRequest("a\nb\n", "Fix it.", mode="forced",
                                                                  program=line_oracle("a\nb\n", "a\nc\n")))
    assert tail.output == "a\nc\n" and any(tail.chosen[-3:]), tok.decode(tail.ids[-3:])


@pytest.fixture(scope="module")
def tiny_random_engine(default_engine: Engine) -> Engine:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=default_engine.loaded.vocab_size, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192)
    model = LlamaForCausalLM(config).eval()
    return Engine(LoadedModel("tiny-random", model, default_engine.loaded.tokenizer, "cpu", torch.float32,
                              TransformersRuntime(model, "cpu")))


@pytest.mark.parametrize("n_lines", [1, 7, 120])
def test_drafting_is_lossless_on_a_random_model(tiny_random_engine: Engine, n_lines: int) -> None:
    """Greedy with a logit bias towards structure: the random model writes odd programs (copies,
    gens, digits everywhere); drafted and undrafted decodes must agree token for token."""
    tok = tiny_random_engine.loaded.tokenizer
    text = "".join(f"line {i} = {i * 7 % 13}\n" for i in range(1, n_lines + 1))
    drafted = 0
    for seed in range(4):
        bias_ids = [i for s in ["<", "</", "gen", "copy", '"', "-", "/>", ">", "program", "line", " ="]
                    + list("0123456789") for i in encode(tok, s)]
        bias = {i: 6.0 + (seed * 7 + i) % 5 for i in bias_ids}
        runs = [tiny_random_engine.edit(EditRequest(text, "Rewrite.", mode="program", max_new_tokens=60,
                                                    logit_bias=bias, draft=d)) for d in (False, True)]
        assert runs[1].raw_output == runs[0].raw_output
        assert runs[1].output_text == runs[0].output_text
        drafted += runs[1].breakdown["drafted_tokens"]
    # One line leaves little to draft: its copy ends the program (engine.language.program.must_end_after).
    assert drafted > 0 or n_lines == 1, "the drafter should have proposed something to verify"


def test_input_drafter_schedule() -> None:
    drafter = InputDrafter(list(range(100)))
    assert drafter.propose([3, 4], 10) == list(range(5, 15))
    drafter.feedback(10, 10)
    assert drafter.size == 64
    assert drafter.propose([14, 15], 500)[:2] == [16, 17]
    drafter.feedback(64, 0)
    assert drafter.backoff > 0 and drafter.propose([14, 15], 5) == []


def test_program_drafter_structure() -> None:
    lines = [[1, 2], [3, 4], [5, 6], [7, 8]]
    drafter = ProgramDrafter(lines)
    start = drafter.propose(ProgramState(0, "", "<", False, "", ()), 50)
    assert start == [DraftText('copy lines="1-4"/></program>')]
    after_copy = drafter.propose(ProgramState(2, "copy", "<", False, "", ()), 50)
    assert after_copy[1] == DraftTokens((5, 6)) and after_copy[2] == DraftText('</gen><copy lines="4-4"/></program>')
    end = drafter.propose(ProgramState(4, "copy", "<", False, "", ()), 50)
    assert end == [DraftText("/program>")]
    closing = drafter.propose(ProgramState(2, "copy", "", True, "x = 1\n", (9,)), 50)
    assert closing == [DraftText('</gen><copy lines="4-4"/></program>')]
    digits = drafter.propose(ProgramState(0, "", '<copy lines="2-', False, "", ()), 50)
    assert digits == [DraftText('4"/></program>')]
