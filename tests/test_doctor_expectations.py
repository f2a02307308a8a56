"""``copy-as-decode doctor``'s one sentence of what an edit will get (engine.runtime.expectations):
each backend x mode x verify rule x build says whether it drafts, and its ratio comes from a
results file in this repository, or it says "no measured figure"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.runtime.expectations import FIGURES, SERVER_NGRAM, UNBOUNDED, Situation, exact_rows, expect

ROOT = Path(__file__).resolve().parents[1]


def situation(backend: str = "llamacpp", mode: str = "speculative", rule: str = "exact", rows: str | None = "one row",
              selector: bool = False, device: str = "cpu") -> Situation:
    return Situation(backend=backend, mode=mode, rule=rule, exact_rows=rows, selector=selector, device=device)


@pytest.mark.parametrize("key, figure", list(FIGURES.items()), ids=lambda v: "-".join(v) if isinstance(v, tuple) else "")
def test_every_figure_is_the_whole_edit_ratio_in_its_results_file(key, figure):
    """No number is typed in by hand: each is the pooled whole-edit ratio of its arm in the run it cites."""
    backend, mode, rule, rows = key
    run = json.loads((ROOT / figure.source).read_text())
    assert run.get("backend", "transformers").startswith({"llamacpp": "llama.cpp"}.get(backend, backend))  # older runs: transformers
    assert run["family"] == "free" and run["corpus"] == "humanevalfix-python" and run["device"] == "cpu"
    assert run["settings"].get("verify", "exact") == rule
    if backend == "llamacpp":  # one row: the default build without flash attention; bounded: with it
        assert f"flash attention {'on' if rows == 'bounded' else 'off'}" in run["backend"]
    arm = "program-near" if mode == "program" else mode
    assert run["arms"][arm]["edit_speedup_vs_ar"] == pytest.approx(figure.ratio, abs=0.005)


def test_the_embedded_model_with_its_selector_on_llamacpp():
    said = expect(situation(mode="program", selector=True))
    assert said.sentence == "program mode with the span selector: copies spans of the input, 1.39x ar expected"
    assert said.figure is not None and said.figure.source.endswith("llamacpp_humanevalfix-python_40.json")


def test_no_selector_on_a_llamacpp_build_that_verifies_one_row_drafts_nothing():
    said = expect(situation())
    assert said.sentence.startswith("plain decoding: this llama.cpp build verifies one row exactly, so speculative "
                                    "mode drafts nothing (build with GGML_LLAMAFILE=OFF or use --verify argmax")
    assert said.sentence.endswith("1.00x ar expected")


def test_argmax_on_llamacpp_drafts_and_says_it_may_differ():
    said = expect(situation(rule="argmax"))
    assert said.sentence.startswith("speculative: drafts from the input (verify argmax")
    assert said.sentence.endswith("0.99x ar expected")


def test_no_selector_on_transformers_drafts():
    said = expect(situation(backend="transformers", rows="any"))
    assert said.sentence == "speculative: drafts from the input, 1.86x ar expected"


@pytest.mark.parametrize("kept", [
    situation(backend="transformers", rows="any", rule="argmax"),  # no argmax run on transformers
    situation(rows="any"),  # llama.cpp without llamafile: only the forced family was measured
    situation(backend="transformers", rows="any", device="cuda"),  # every figure is from a CPU
    situation(mode="pld"),
])
def test_a_combination_nobody_measured_says_so(kept: Situation):
    said = expect(kept)
    assert said.figure is None and said.sentence.endswith("no measured figure")


def test_a_vllm_server_says_which_drafting_applies():
    said = expect(situation(backend="vllm", rule="server", rows=None, device="remote"))
    assert said.figure is SERVER_NGRAM
    assert "speculative mode sends what ar sends" in said.sentence
    assert "--speculative-config '{\"method\": \"ngram\"" in said.sentence
    assert said.sentence.endswith("such a server measured 3.08x a plain one's speed, the same outputs")
    program = expect(situation(backend="vllm", mode="program", rule="server", rows=None, selector=True))
    assert program.sentence.startswith("program mode with the span selector served as a LoRA module")


def test_the_server_figure_is_the_pooled_ratio_in_its_results_file():
    """Typed in by hand nowhere either: ar's pooled plain-over-n-gram time, all outputs the same."""
    run = json.loads((ROOT / SERVER_NGRAM.source).read_text())
    assert run["engine_requests_on_ngram_server"] == {"ar": "ok", "speculative": "ok", "program": "ok"}
    assert run["summary"]["ar"]["total_plain_over_ngram"] == pytest.approx(SERVER_NGRAM.ratio, abs=0.005)
    assert run["summary"]["ar"]["identical_across_servers"] == len(run["records"])


def test_the_rows_an_exact_verify_holds_from_its_room():
    assert exact_rows(0) == "one row" and exact_rows(62) == "bounded" and exact_rows(UNBOUNDED) == "any"


def test_mode_ar_is_plain_decoding_on_every_backend():
    for backend, rows in (("llamacpp", "one row"), ("transformers", "any")):
        said = expect(situation(backend=backend, mode="ar", rows=rows))
        assert said.sentence == "plain decoding: mode ar runs one token per forward" and said.figure is None
