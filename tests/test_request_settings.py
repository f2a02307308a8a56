"""Every request-level setting (engine.decoding.request.REQUEST_SETTINGS) reaches the EditRequest
the engine receives, through each front door: the CLI (a workspace file), the language server (the
client's settings) and the HTTP edit endpoint (the server's settings)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.api import EditRequest, Engine
from engine.decoding.request import REQUEST_SETTINGS
from engine.settings import DEFAULTS, SPECS, Settings
from engine.settings.schema import camel

# A value other than the default for every request-level setting.
CHOSEN = {"mode": "ar", "max_new_tokens": 77, "context_lines": 5, "prompt_style": "few-shot", "verify": "argmax",
          "apply_window_lines": 7, "apply_max_lines": 900}
BUGGY = "def add(a, b):\n    return a - b\n"


def _sent(request: EditRequest) -> dict:
    return {name: getattr(request, name) for name in REQUEST_SETTINGS}


def test_every_request_setting_is_a_field_of_both_under_one_name() -> None:
    assert set(CHOSEN) == set(REQUEST_SETTINGS)
    request_fields = {f.name for f in dataclasses.fields(EditRequest)}
    for name, value in CHOSEN.items():
        assert name in SPECS and name in request_fields
        assert DEFAULTS.value(name) != value, f"{name}: pick a value that differs from the default"


class RecordingEngine:
    """A named fake: it records the request and answers with the text unchanged (what the engine
    decodes is not under test here, only what it is asked)."""

    name = "recording-fake"
    requests: list[EditRequest] = []

    @classmethod
    def load(cls, model, **kwargs):
        return cls()

    def resolve_mode(self, mode, one_shot_lines=None):
        return "ar" if mode == "auto" else mode

    def model_for(self, mode):
        from types import SimpleNamespace

        return SimpleNamespace(runtime=SimpleNamespace(describe=lambda: "a recording fake"))

    def stream(self, request, cancelled=None):
        from engine.decoding.events import EditFinished, EditResult, EditStarted, TokenCounts
        from engine.language.program import Gen, Program

        self.requests.append(request)
        yield EditStarted(mode=request.mode, model=self.name, input_lines=2, prompt_tokens=10)
        yield EditFinished(EditResult(
            mode=request.mode, model=self.name, input_text=request.text, output_text=request.text, region=None,
            region_input=request.text, region_output=request.text, program=Program((Gen(request.text),)),
            raw_output=request.text, tokens=TokenCounts(generated=8), prompt_tokens=10, stop_reason="done",
            timings={"total_s": 0.1, "decode_s": 0.1, "prefill_s": 0.0}))


def test_the_cli_sends_every_request_setting(capsys, tmp_path: Path, monkeypatch) -> None:
    import engine.commands.edit as edit_command
    from engine.cli import main
    from engine.verdict import EXIT_NO_FIX

    monkeypatch.setattr(edit_command, "Engine", RecordingEngine)
    (tmp_path / ".copy-as-decode.toml").write_text(
        "".join(f"{camel(name)} = {value!r}\n".replace("'", '"') for name, value in CHOSEN.items()))
    path = tmp_path / "add.py"
    path.write_text(BUGGY)
    assert main(["edit", str(path), "-i", "Fix the bug"]) == EXIT_NO_FIX  # the recording engine keeps the code
    assert _sent(RecordingEngine.requests[-1]) == CHOSEN


async def test_the_language_server_sends_every_request_setting(tmp_path: Path) -> None:
    from engine.settings import load_workspace_settings
    from lsp_server.documents import Document
    from lsp_server.request import document_request

    settings, warnings = load_workspace_settings(
        tmp_path / "doc.py", user={"copyAsDecode": {camel(name): value for name, value in CHOSEN.items()}})
    assert not warnings
    doc = Document("file:///doc.py", BUGGY, 1, "python")
    assert _sent(document_request(doc, "Fix the bug", None, settings)) == CHOSEN


@pytest.mark.model
def test_the_http_edit_endpoint_sends_every_request_setting(default_engine: Engine, monkeypatch) -> None:
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    received: list[EditRequest] = []
    stream = default_engine.stream

    def recording(request, cancelled=None, **kwargs):
        received.append(request)
        return stream(request, cancelled, **kwargs) if cancelled is not None else stream(request)

    monkeypatch.setattr(default_engine, "stream", recording)
    app = create_app(default_engine, ServerConfig(model_id="m", settings=Settings(**CHOSEN)))
    with TestClient(app) as http:
        answer = http.post("/v1/edits/copy-as-decode", json={"text": BUGGY, "instruction": "Fix the bug"})
    assert answer.status_code == 200, answer.text
    assert _sent(received[-1]) == CHOSEN


def test_the_request_and_the_setting_default_to_the_same_mode():
    """One default mode, whichever door builds the request (EditRequest's own, or the setting's)."""
    from engine.api import EditRequest
    from engine.settings import Settings

    assert EditRequest("x = 1\n", "Fix it.").mode == Settings().edit.mode == "auto"
