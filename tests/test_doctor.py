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

    code, answer = doctor(capsys, str(tmp_path), "--backend", "llamacpp", "--selector", "none")
    assert code == 0 and answer["lines"]["selector"]["value"] == "none"
    assert "runs speculative" in answer["lines"]["selector"]["why"]

    assert main(["doctor", str(tmp_path), "--backend", "llamacpp", "--selector", "none"]) == 0
    screen = capsys.readouterr().out
    assert "[threads, --threads]" in screen and "estimate" in screen and "loaded in" in screen
