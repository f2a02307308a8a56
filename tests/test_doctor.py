"""``copy-as-decode doctor``: one screen of what a configuration will do and why, each line naming
its setting; exit status 2 with the fix when the model or the backend is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.verdict import EXIT_BAD_REQUEST


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["doctor", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_missing_model_exits_2_and_names_the_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    code, answer = doctor(capsys, str(tmp_path), "--model", str(tmp_path / "missing.gguf"))
    assert code == EXIT_BAD_REQUEST and answer["ok"] is False
    assert "GGUF file not found" in answer["error"] and "--model" in answer["fix"]
    assert main(["doctor", str(tmp_path), "--model", str(tmp_path / "missing.gguf")]) == EXIT_BAD_REQUEST
    assert "fix: set `model` (--model)" in capsys.readouterr().err


def test_a_backend_not_installed_exits_2_and_names_the_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp fails, as where it is not installed
    code, answer = doctor(capsys, str(tmp_path), "--backend", "llamacpp")
    assert code == EXIT_BAD_REQUEST
    assert "pip install 'copy-as-decode[llamacpp]'" in answer["error"] and answer["fix"] == ""


@pytest.mark.model
def test_the_embedded_model_with_and_without_its_selector(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    pytest.importorskip("llama_cpp")
    code, answer = doctor(capsys, str(tmp_path), "--backend", "llamacpp")
    lines = answer["lines"]
    assert code == 0 and answer["ok"] is True
    assert lines["model"]["value"] == "default" and lines["model"]["why"].endswith(".Q4_1.gguf")
    assert lines["selector"]["value"] != "none" and "runs program" in lines["selector"]["why"]
    assert 1 <= int(lines["threads"]["value"]) and lines["threads"]["why"]
    assert lines["verify"]["value"] == "auto means exact here" and lines["verify"]["setting"] == "verify"
    assert lines["flash attention"]["value"] == "off (auto)"
    assert answer["estimate"]["step_ms"] > 0 and set(answer["estimate"]["s"]) == {"4", "8", "32"}
    assert all(line["setting"] for line in lines.values())
    one_row = "drafts nothing" in lines["verify"]["why"]  # llama.cpp's default x86 build, flash attention off
    assert lines["expect"]["value"].startswith("program mode with the span selector: copies spans of the input, ")
    assert lines["expect"]["setting"] == "mode" and answer["expectation"]["sentence"] == lines["expect"]["value"]
    if one_row:
        assert lines["expect"]["value"].endswith("1.39x ar expected")
        assert answer["expectation"]["figure"]["source"] == "results/free/llamacpp_humanevalfix-python_40.json"
        assert "results/free/llamacpp_humanevalfix-python_40.json" in lines["expect"]["why"]

    code, answer = doctor(capsys, str(tmp_path), "--backend", "llamacpp", "--selector", "none")
    assert code == 0 and answer["lines"]["selector"]["value"] == "none"
    assert "runs speculative" in answer["lines"]["selector"]["why"]
    said = answer["lines"]["expect"]["value"]
    if one_row:
        assert said.startswith("plain decoding: this llama.cpp build verifies one row exactly, so speculative mode "
                               "drafts nothing (build with GGML_LLAMAFILE=OFF or use --verify argmax to draft)")
    else:
        assert said.startswith("speculative: drafts from the input")

    code, answer = doctor(capsys, str(tmp_path), "--backend", "llamacpp", "--selector", "none", "--verify", "argmax")
    assert code == 0 and answer["lines"]["expect"]["value"].startswith("speculative: drafts from the input (verify argmax")

    assert main(["doctor", str(tmp_path), "--backend", "llamacpp", "--selector", "none"]) == 0
    screen = capsys.readouterr().out
    assert "[threads, --threads]" in screen and "estimate" in screen and "loaded in" in screen
    assert screen.startswith(f"expect          {said}\n")  # the sentence comes first


@pytest.mark.model
def test_no_selector_on_transformers_drafts(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    code, answer = doctor(capsys, str(tmp_path), "--backend", "transformers", "--device", "cpu", "--selector", "none")
    assert code == 0 and answer["lines"]["verify"]["value"] == "auto means exact here"
    assert answer["lines"]["expect"]["value"] == "speculative: drafts from the input, 1.86x ar expected"
    assert answer["expectation"]["figure"]["source"] == "results/free/transformers_humanevalfix-python_40.json"


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(1200)
def test_a_vllm_server_says_which_drafting_applies(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    vllm_server_url: str):
    code, answer = doctor(capsys, str(tmp_path), "--backend", "vllm", "--server-url", vllm_server_url,
                          "--mode", "speculative")
    said = answer["lines"]["expect"]["value"]
    assert code == 0 and answer["estimate"] is None
    assert answer["expectation"]["figure"]["source"] == "results/backends/vllm_ngram.json"  # an n-gram server's
    assert "speculative mode sends what ar sends" in said and "--speculative-config" in said
    code, answer = doctor(capsys, str(tmp_path), "--backend", "vllm", "--server-url", vllm_server_url)
    assert answer["lines"]["expect"]["value"].startswith("program mode with the span selector served as a LoRA module")
