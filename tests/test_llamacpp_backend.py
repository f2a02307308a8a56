"""The llama.cpp backend on the embedded model's own Q4_1 GGUF (quantized as it is): a splice
gives the logits one-by-one decoding gives, rollback is exact, programs stay in the grammar,
speculative == ar == pld (llama-cpp-python's own prompt lookup), forced oracle programs resolve
to the gold, the span selector runs as a llama.cpp LoRA, and llama.cpp's failures are clear errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from engine.api import EditRequest, Engine
from engine.backends import BackendError, BackendOptions, llamacpp_available
from engine.corpora import load_corpus
from engine.lines import split_lines
from engine.models import ModelLoadError
from engine.oracle import line_oracle
from engine.program import parse
from engine.resolve import resolve
from engine.tokens import encode

pytestmark = [pytest.mark.model]

BUGGY = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n'


@pytest.fixture(scope="module")
def llama() -> Engine:
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/install-llamacpp.sh; make test installs it)")
    return Engine.load("default", backend="llamacpp", options=BackendOptions(threads=1, context=2048))


def test_loads_the_gguf_itself(llama: Engine):
    assert llama.loaded.backend == "llamacpp" and llama.loaded.model is None
    assert "Q4_1.gguf" in llama.loaded.runtime.describe()
    assert llama.selector is not None and llama.selector_model.runtime.adapter is not None


@pytest.mark.parametrize("seed", [0, 1])
def test_splice_logits_equal_one_token_at_a_time(llama: Engine, seed: int):
    tok = llama.loaded.tokenizer
    rng = random.Random(seed)
    lines = split_lines(load_corpus("humanevalfix-python")[seed].input)
    prompt = encode(tok, "Edit this code.\n")
    fused, single = llama.loaded.session(), llama.loaded.session()
    fused.append(prompt, "prefill")
    single.append(prompt, "prefill")
    for _ in range(6):
        i = rng.randrange(len(lines))
        segment = [t for line in lines[i:i + rng.randrange(1, 4)] for t in encode(tok, line)]
        a = fused.append(segment, "splice")
        b = torch.stack([single.append([t], "step") for t in segment])[-1]
        assert float((a - b).abs().max()) <= 1e-4
    fused.close()
    single.close()


def test_rollback_is_exact(llama: Engine):
    tok = llama.loaded.tokenizer
    ids = encode(tok, BUGGY)
    session = llama.loaded.session()
    first = session.append(ids, "prefill", all_logits=True)
    session.crop(7)
    again = session.append(ids[7:], "again", all_logits=True)
    assert session.length == len(ids)
    assert torch.equal(again, first[7:])
    session.close()


def test_context_full_and_bad_file_are_clear_errors(llama: Engine, tmp_path: Path):
    session = llama.loaded.session()
    with pytest.raises(BackendError, match="context is full"):
        session.append([100] * 2049, "prefill")
    session.close()
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF not really")
    with pytest.raises(ModelLoadError, match="cannot load this GGUF"):
        Engine.load(str(bad), backend="llamacpp", selector="none")
    with pytest.raises(ModelLoadError, match="runs .gguf files only"):
        Engine.load(str(tmp_path), backend="llamacpp", selector="none")


def test_speculative_and_pld_equal_ar(llama: Engine):
    for text in (BUGGY, load_corpus("humanevalfix-python")[2].input):
        outs = {mode: llama.edit(EditRequest(text, "Fix the bug.", mode=mode, max_new_tokens=96)) for mode in
                ("ar", "speculative", "pld")}
        assert outs["speculative"].output_text == outs["ar"].output_text
        assert outs["pld"].output_text == outs["ar"].output_text
        assert outs["speculative"].breakdown.get("verify_calls", 0) >= 1


@pytest.mark.parametrize("index", [0, 5, 17])
def test_forced_oracle_programs_resolve_to_gold(llama: Engine, index: int):
    case = load_corpus("humanevalfix-python")[index]
    program = line_oracle(case.input, case.gold)
    for draft in (True, False):
        result = llama.edit(EditRequest(case.input, case.instruction, mode="forced", program=program,
                                        max_new_tokens=1 << 16, draft=draft))
        assert result.output_text == case.gold and result.program == program


def test_program_mode_stays_in_the_grammar_and_drafting_is_lossless(llama: Engine):
    for case in load_corpus("humanevalfix-python")[:3]:
        runs = [llama.edit(EditRequest(case.input, case.instruction, mode="program", max_new_tokens=120,
                                       draft=draft)) for draft in (True, False)]
        assert runs[0].raw_output == runs[1].raw_output
        if runs[0].stop_reason == "done":
            program = parse(runs[0].raw_output)
            assert resolve(program, case.input).text == runs[0].region_output


def test_selector_as_llamacpp_lora_writes_the_fix(llama: Engine):
    text = Path(__file__).resolve().parents[1].joinpath("examples", "buggy_add.py").read_text()
    result = llama.edit(EditRequest(text, "Fix the bug in add.", mode="program", focus_line=3, max_new_tokens=96,
                                    language="python"))
    assert result.stop_reason == "done"
    assert result.program.serialize().startswith('<program><copy lines="1-2"/><gen>')
    assert "return a + b" in result.output_text and "return a - b" not in result.output_text
