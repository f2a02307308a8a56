"""The vLLM backend's failure paths: server down, slow, 4xx/5xx, malformed or truncated responses,
tokens outside the vocabulary or the grammar, a model the server does not serve. Each becomes one
clear error, the document is left as it was, and the API key never shows in a message.

Driven by the FAKE server in tests/fake_completions_server.py (a real vLLM cannot be made to
misbehave on demand); the working paths run against a real vLLM in tests/test_vllm_backend.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_completions_server import FakeCompletionsServer
from support import ADD as BUGGY

from engine.api import EditRequest, Engine
from engine.core.errors import ModelLoadError
from engine.runtime.backends import BackendError, BackendOptions

KEY = "sk-test-secret-123"


@pytest.fixture()
def fake(tokenizer):
    with FakeCompletionsServer(tokenizer) as server:
        yield server


def _engine(url: str, timeout: float = 3.0, served: str | None = None, **env) -> Engine:
    return Engine.load("default", backend="vllm", selector="none",
                       options=BackendOptions(server_url=url, timeout_s=timeout, served_model=served))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_is_one_clear_message():
    with pytest.raises(ModelLoadError, match="cannot reach the server.*is it running"):
        _engine(f"http://127.0.0.1:{_free_port()}")


def test_missing_url_and_unserved_model(fake):
    with pytest.raises(ModelLoadError, match="serverUrl"):
        Engine.load("default", backend="vllm", options=BackendOptions())
    with pytest.raises(ModelLoadError, match="does not serve 'other'.*fake-model"):
        _engine(fake.url, served="other")


@pytest.mark.parametrize("fault, message", [
    ("http500", r"the server failed \(HTTP 500\): CUDA out of memory"),
    ("http400", r"rejected the request \(HTTP 400\).*does not exist"),
    ("malformed", "malformed JSON"),
    ("truncated", "truncated"),
    ("slow", "no answer within 1 s"),
    ("bad_tokens", "outside the vocabulary"),
    ("off_grammar", "left the program grammar"),
    ("early_end", r"ended the program after no op before the last input line \(2\)"),
    ("special_token", r"sent the special token 1 \('<\|im_start\|>'\).*nothing was written"),
])
@pytest.mark.parametrize("mode", ["program", "ar"])
def test_faults_raise_clear_errors_and_the_server_keeps_serving(fake, fault, message, mode, monkeypatch):
    if fault in ("off_grammar", "early_end") and mode == "ar":
        pytest.skip("text modes have no grammar")
    if fault == "truncated" and mode == "program":
        pytest.skip("the fake's valid program reply reaches a forced literal at once: the client stops reading "
                    "before the cut (the same stream reader raises it in the ar case)")
    monkeypatch.setenv("COPY_AS_DECODE_API_KEY", KEY)
    engine = _engine(fake.url, timeout=1.0)
    fake.fault = fault
    with pytest.raises(BackendError, match=message) as caught:
        engine.edit(EditRequest(BUGGY, "Fix the bug", mode=mode, max_new_tokens=8))
    assert KEY not in str(caught.value)
    assert fake.headers[-1].get("Authorization") == f"Bearer {KEY}"  # sent, never shown
    fake.fault = "ok"  # the same engine goes on working once the server does
    result = engine.edit(EditRequest(BUGGY, "Fix the bug", mode="ar", max_new_tokens=1))
    assert result.stop_reason == "max_tokens"


def test_cli_leaves_the_file_untouched_on_a_server_error(fake, tmp_path: Path):
    path = tmp_path / "buggy.py"
    path.write_text(BUGGY)
    fake.fault = "http500"
    run = subprocess.run([sys.executable, "-m", "engine.cli", "edit", str(path), "-i", "Fix the bug", "--mode", "ar",
                          "--backend", "vllm", "--server-url", fake.url, "--selector", "none", "--in-place"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "HTTP 500" in run.stderr
    assert path.read_text() == BUGGY


def test_workspace_files_cannot_set_the_server(tmp_path: Path):
    from engine.settings import parse_layer

    layer = parse_layer({"serverUrl": "http://evil.example:80", "backend": "vllm"}, "workspace file")
    assert "server_url" not in layer.values and layer.values.get("backend") == "vllm"
    assert any("serverUrl is only read from user-level settings" in w for w in layer.warnings)


def test_a_model_apply_on_a_server_is_refused_with_the_fix(fake):
    """The model's merge reads the logits of each drafted step, which a server does not return:
    ``apply --mode program`` there is an EditError naming the fix, not a crash."""
    from engine.core.errors import EditError

    engine = _engine(fake.url)
    update = "def add(a, b):\n    return a + b\n"
    with pytest.raises(EditError, match="--mode auto.*in-process backend"):
        engine.edit(EditRequest(BUGGY, "", update=update, mode="program"))
    assert engine.edit(EditRequest(BUGGY, "", update=update, mode="auto")).output_text.endswith("return a + b\n")


@pytest.mark.parametrize("mode", ["program", "ar"])
def test_a_server_running_speculative_decoding_is_sent_no_logit_bias(fake, mode):
    """vLLM refuses ``logit_bias`` on a server started with speculative decoding (measured:
    scripts/measure_vllm_ngram.py): the request is sent again without it, and so is every later
    one to that server; the special-token check on what comes back still holds."""
    engine = _engine(fake.url)
    fake.fault = "speculative"
    request = EditRequest(BUGGY, "Fix the bug", mode=mode, max_new_tokens=8)
    if mode == "program":  # the fake's program reply ends the program early: refused, after the retry
        with pytest.raises(BackendError, match="ended the program"):
            engine.edit(request)
    else:
        assert engine.edit(request).stop_reason in ("done", "max_tokens")
    assert "logit_bias" in fake.requests[0] and "logit_bias" not in fake.requests[1]
    sent = len(fake.requests)
    try:
        engine.edit(request)
    except BackendError:
        pass
    assert all("logit_bias" not in body for body in fake.requests[sent:])
    fake.fault = "special_token"  # without the bias, a special token the server writes is still refused
    with pytest.raises(BackendError, match="sent the special token"):
        engine.edit(request)
