"""``copy-as-decode serve-openai`` as a subprocess on loopback, driven by the official ``openai``
client (and raw httpx where a client would not send the request): predicted outputs give the text
of the same request without a prediction, streamed and not, on transformers and llama.cpp; the
usage counts agree with an in-process decode of the same request;
every error has OpenAI's shape and status; a client that disconnects frees the engine; 4
concurrent clients are served and the wait queue is bounded (429); the edit endpoint answers
``edit --json``'s summary. One server (the embedded model on transformers) serves the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from support import ADD_DOCUMENTED as BUGGY

from engine.api import EditRequest, Engine
from engine.decoding.tables import tables_for
from engine.openai_api.completion import ChatDecode, build_job
from engine.runtime.backends import BackendOptions, llamacpp_available
from engine.verdict import json_summary

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
KEY = "test-key-not-a-secret"
MAX_WAITING = 3

MESSAGES = [{"role": "system", "content": "You are a careful code editor. Reply with the code only."},
            {"role": "user", "content": f"Fix the bug:\n```python\n{BUGGY}```"}]
# The model loops on this one until the token limit: a decode that only a cancel ends early.
LONG = [{"role": "user", "content": "Count from 1 to 1000 in words, separated by commas."}]
PREDICTION = f"```python\n{BUGGY.replace('a - b', 'a + b')}```"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve(backend: str, log: Path, *extra: str) -> Iterator[str]:
    """``serve-openai`` on a free loopback port with the embedded model; yields its URL."""
    port = _free_port()
    env = {**os.environ, "COPY_AS_DECODE_SERVER_KEY": KEY, "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve-openai", "--port", str(port),
                                 "--backend", backend, "--threads", "1", "--max-waiting", str(MAX_WAITING),
                                 "--max-body-kb", "64", "--workspace", str(ROOT), *extra],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve-openai exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"serve-openai did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert KEY not in log.read_text(), "the API key must never be logged"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve("transformers", tmp_path_factory.mktemp("serve-openai") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def _health(base_url: str) -> dict:
    return httpx.get(base_url + "/health", timeout=5).json()


def _in_process(engine: Engine, prediction: str | None, max_tokens: int, stop: tuple[str, ...] = (),
                verify: str = "auto") -> ChatDecode:
    """The same request decoded in this process (the decoder's own counts)."""
    job = build_job(engine.loaded, MESSAGES, max_tokens, stop, 0.0, 1.0, None, prediction, verify)
    decode = ChatDecode(engine.loaded, tables_for(engine.loaded), job, lambda: False)
    decode.text = "".join(decode.deltas())
    return decode


def test_models_lists_the_served_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["default"]


def test_prediction_is_lossless_and_counts_are_the_decoders(client: openai.OpenAI, default_engine: Engine) -> None:
    plain = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40)
    predicted = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40,
                                               prediction={"type": "content", "content": PREDICTION})
    stream = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40, stream=True,
                                            stream_options={"include_usage": True},
                                            prediction={"type": "content",
                                                        "content": [{"type": "text", "text": PREDICTION}]})
    parts, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    text = plain.choices[0].message.content
    assert "a + b" in text  # the model fixes it: a real decode, not an echo of the prediction
    assert predicted.choices[0].message.content == text
    assert "".join(parts) == text and finish == predicted.choices[0].finish_reason
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
    mine = _in_process(default_engine, PREDICTION, 40)
    assert mine.text == text and 0 < mine.accepted <= mine.completion_tokens
    # Draft sizes follow each process's learned forward costs (engine.runtime.cost), so the split between
    # accepted and rejected may differ between this process and the server; the totals may not.
    for usage_ in (predicted.usage, usage):
        details = usage_.completion_tokens_details
        assert usage_.completion_tokens == mine.completion_tokens == plain.usage.completion_tokens
        assert 0 < details.accepted_prediction_tokens <= usage_.completion_tokens
        assert details.rejected_prediction_tokens >= 0
        assert usage_.prompt_tokens == plain.usage.prompt_tokens


def test_stop_string_and_token_limit(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40).choices[0].message.content
    assert "return" in full
    for prediction in (None, PREDICTION):
        extra = {"prediction": {"type": "content", "content": prediction}} if prediction else {}
        stopped = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40, stop=["return"],
                                                 **extra)
        assert stopped.choices[0].message.content == full[:full.index("return")]
        assert stopped.choices[0].finish_reason == "stop"
        streamed = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40, stop="return",
                                                  stream=True, **extra)
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == \
            stopped.choices[0].message.content
    short = client.chat.completions.create(model="default", messages=MESSAGES, max_completion_tokens=5)
    assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 5
    assert full.startswith(short.choices[0].message.content)


def test_sampling_is_seeded(client: openai.OpenAI) -> None:
    runs = [client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=12, temperature=1.3,
                                           seed=seed, prediction={"type": "content", "content": PREDICTION})
            for seed in (7, 7)]
    texts = [r.choices[0].message.content for r in runs]
    assert texts[0] == texts[1]
    assert runs[0].usage.completion_tokens_details.accepted_prediction_tokens == 0  # no drafting when sampling


@pytest.mark.parametrize("body,status,code", [
    ({"model": "gpt-nope"}, 404, "model_not_found"),
    ({"n": 2, "prediction": {"type": "content", "content": "x"}}, 400, "invalid_request_error"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "prediction": {"type": "content", "content": "x"}},
     400, "invalid_request_error"),
    ({"max_tokens": 9000}, 400, "context_length_exceeded"),
    ({"messages": [{"role": "user", "content": " ".join(map(str, range(1000, 5000)))}]}, 400,
     "context_length_exceeded"),
    ({"temperature": 5}, 400, "invalid_value"),
    ({"messages": []}, 400, "invalid_value"),
])
def test_errors_have_openais_shape(client: openai.OpenAI, body: dict, status: int, code: str) -> None:
    request = {"model": "default", "messages": MESSAGES, "max_tokens": 4, **body}
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(**request)
    assert err.value.status_code == status
    assert err.value.body["code"] == code and err.value.body["message"]
    assert err.value.body["type"] in ("invalid_request_error", "not_found_error")


def test_raw_request_errors(base_url: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    bad = httpx.post(base_url + "/v1/chat/completions", content=b"{not json", headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
    big = httpx.post(base_url + "/v1/chat/completions", content=b"[" + b"1," * 40000 + b"1]", headers=headers)
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    for auth in ({}, {"Authorization": "Bearer wrong"}):
        denied = httpx.get(base_url + "/v1/models", headers=auth)
        assert denied.status_code == 401 and denied.json()["error"]["type"] == "authentication_error"
    assert KEY not in denied.text
    missing = httpx.get(base_url + "/v1/nothing", headers=headers)
    assert missing.status_code == 404 and "error" in missing.json()


def test_disconnect_mid_stream_frees_the_engine(base_url: str, client: openai.OpenAI) -> None:
    body = {"model": "default", "messages": LONG, "max_tokens": 2000, "stream": True}
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body,
                      headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        got = [line for line, _ in zip(lines, range(8)) if line.startswith("data:")]
        assert len(got) >= 3 and _health(base_url)["running"] == 1
    deadline = time.time() + 20  # the whole decode would take minutes
    while _health(base_url)["running"] and time.time() < deadline:
        time.sleep(0.1)
    assert _health(base_url)["running"] == 0, "the decode went on after the client left"
    after = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=4)
    assert after.choices[0].finish_reason == "length"


def test_four_concurrent_clients(base_url: str, client: openai.OpenAI) -> None:
    prompts = [[{"role": "user", "content": f"Write the number {k} in words."}] for k in range(4)]
    expected = [client.chat.completions.create(model="default", messages=p, max_tokens=8).choices[0].message.content
                for p in prompts]
    results: dict[int, str] = {}
    errors: list[BaseException] = []
    peak = {"waiting": 0}
    done = threading.Event()

    def ask(k: int) -> None:
        try:
            results[k] = openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
                model="default", messages=prompts[k], max_tokens=8).choices[0].message.content
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def watch() -> None:
        while not done.is_set():
            peak["waiting"] = max(peak["waiting"], _health(base_url)["waiting"])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=ask, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert not errors
    assert [results[k] for k in range(4)] == expected
    assert 1 <= peak["waiting"] <= MAX_WAITING


def test_full_queue_answers_429(base_url: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    body = {"model": "default", "messages": LONG, "max_tokens": 2000, "stream": True}
    waiting: list[int] = []
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body, headers=headers, timeout=120) as hold:
        lines = hold.iter_lines()  # kept: a dropped iterator closes the stream (a disconnect)
        next(lines)
        deadline = time.time() + 30
        while _health(base_url)["running"] != 1 and time.time() < deadline:
            time.sleep(0.05)
        assert _health(base_url)["running"] == 1  # the long decode holds the model

        def wait_in_line() -> None:
            r = httpx.post(base_url + "/v1/chat/completions", headers=headers, timeout=300,
                           json={"model": "default", "messages": MESSAGES, "max_tokens": 2})
            waiting.append(r.status_code)

        threads = [threading.Thread(target=wait_in_line) for _ in range(MAX_WAITING)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while _health(base_url)["waiting"] < MAX_WAITING and time.time() < deadline:
            time.sleep(0.05)
        assert _health(base_url)["waiting"] == MAX_WAITING
        with pytest.raises(openai.RateLimitError) as err:
            openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
                model="default", messages=MESSAGES, max_tokens=2)
        assert err.value.body["code"] == "queue_full"
    for t in threads:
        t.join()
    assert waiting == [200] * MAX_WAITING


def test_edit_endpoint_answers_the_clis_json(base_url: str, default_engine: Engine) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    body = {"text": BUGGY, "instruction": "Fix the bug in add.", "mode": "speculative", "max_new_tokens": 60,
            "path": "add.py"}
    answer = httpx.post(base_url + "/v1/edits/copy-as-decode", json=body, headers=headers, timeout=300).json()
    request = EditRequest(BUGGY, "Fix the bug in add.", mode="speculative", max_new_tokens=60, language="python")
    local = default_engine.edit(request)
    expected = json_summary(local, {}, None, "", [])
    assert set(answer) == set(expected) | {"output_text"}
    assert answer["output_text"] == local.output_text
    assert (answer["program"], answer["tokens"], answer["stop_reason"]) == \
        (expected["program"], expected["tokens"], expected["stop_reason"])
    # the request's language reaches the syntax verdict, as the CLI's does
    assert answer["syntax"]["language"] == "python" and answer["syntax"]["parsed_before"] is True
    events = []
    with httpx.stream("POST", base_url + "/v1/edits/copy-as-decode", json={**body, "stream": True}, headers=headers,
                      timeout=300) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    assert events[0]["event"] == "started" and events[-1]["event"] == "finished"
    ops = [e for e in events if e["event"] == "op"]
    assert "".join(e["text"] for e in ops) == events[-1]["result"]["output_text"] == local.output_text
    bad = httpx.post(base_url + "/v1/edits/copy-as-decode", json={**body, "lines": [5, 9]}, headers=headers)
    assert bad.status_code == 400 and "line range" in bad.json()["error"]["message"]


def test_edit_endpoint_answers_an_empty_region_at_once(base_url: str) -> None:
    from engine.decoding.results import EMPTY_REGION

    answer = httpx.post(base_url + "/v1/edits/copy-as-decode", json={"text": "", "instruction": "Fix the bug"},
                        headers={"Authorization": f"Bearer {KEY}"}, timeout=300).json()
    assert answer["program"] == "<program></program>" and answer["output_text"] == ""
    assert answer["tokens"]["total"] == 0 and answer["prompt_tokens"] == 0 and EMPTY_REGION in answer["warnings"]


def test_says_serving_only_once_it_serves(tmp_path: Path) -> None:
    """The "serving ... at URL" line comes after uvicorn's start-up: the URL answers at that moment."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve-openai", "--port", str(port), "--backend",
                             "transformers", "--threads", "1", "--selector", "none", "--workspace", str(ROOT)],
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "COPY_AS_DECODE_SERVER_KEY": KEY, "OMP_NUM_THREADS": "1"})
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("serving"):
                assert f"at http://127.0.0.1:{port}/v1" in line
                assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
                break
        else:
            pytest.fail("serve-openai ended without serving:\n" + "".join(lines[-20:]))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_llamacpp_backend_prediction_is_lossless(tmp_path: Path) -> None:
    """The same guarantees on llama.cpp (the GGUF as it is) under ``--verify exact``: identical text
    with and without the prediction, streamed or not, and the usage counts of an in-process decode
    of the request."""
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/install-llamacpp.sh; make test installs it)")
    llama = Engine.load("default", backend="llamacpp", selector="none", options=BackendOptions(threads=1))
    with _serve("llamacpp", tmp_path / "server.log", "--verify", "exact") as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=300)
        plain = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40)
        predicted = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40,
                                                   prediction={"type": "content", "content": PREDICTION})
        streamed = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=40, stream=True,
                                                  prediction={"type": "content", "content": PREDICTION})
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert predicted.choices[0].message.content == plain.choices[0].message.content == text
    mine = _in_process(llama, PREDICTION, 40, verify="exact")
    details = predicted.usage.completion_tokens_details
    assert mine.text == text
    assert predicted.usage.completion_tokens == mine.completion_tokens == plain.usage.completion_tokens
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
    # llama.cpp's verify forwards are dear on a CPU: the cost-aware drafter may withhold drafts,
    # so only the bounds are fixed here
    assert 0 <= details.accepted_prediction_tokens <= predicted.usage.completion_tokens


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_vllm_backend_passes_requests_through(tmp_path: Path, client: openai.OpenAI, vllm_server_url: str) -> None:
    """On the vLLM backend the server decodes: the text is what the transformers server returns for
    the same greedy request (the same fp32 weights), 4 concurrent requests run at once (no queue),
    and a prediction is accepted but not drafted from (both counts 0)."""
    expected = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=24)
    with _serve("vllm", tmp_path / "server.log", "--server-url", vllm_server_url) as url:
        assert _health(url)["concurrent"] is True
        remote = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=600)
        got = remote.chat.completions.create(model="default", messages=MESSAGES, max_tokens=24,
                                             prediction={"type": "content", "content": PREDICTION})
        assert got.choices[0].message.content == expected.choices[0].message.content
        assert got.usage.completion_tokens_details.accepted_prediction_tokens == 0
        streamed = remote.chat.completions.create(model="default", messages=MESSAGES, max_tokens=24, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == \
            expected.choices[0].message.content
        texts: list[str] = []
        threads = [threading.Thread(target=lambda: texts.append(remote.chat.completions.create(
            model="default", messages=MESSAGES, max_tokens=24).choices[0].message.content)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert texts == [expected.choices[0].message.content] * 4


def test_an_edit_body_names_its_verify_rule_else_the_servers(default_engine: Engine) -> None:
    """``POST /v1/edits/copy-as-decode``: the body's ``verify`` over the server's ``--verify``; a
    value that is not a rule is refused with the body."""
    from pydantic import ValidationError

    from engine.openai_api.edits import body_request
    from engine.openai_api.schemas import EditBody
    from engine.settings import Settings

    body = EditBody(text=BUGGY, instruction="Fix the bug.", mode="speculative")
    assert body_request(default_engine, body, Settings(verify="argmax")).verify == "argmax"
    assert body_request(default_engine, body, Settings()).verify == "auto"
    named = EditBody(text=BUGGY, instruction="Fix the bug.", mode="speculative", verify="exact")
    assert body_request(default_engine, named, Settings(verify="argmax")).verify == "exact"
    with pytest.raises(ValidationError):
        EditBody(text=BUGGY, instruction="Fix the bug.", verify="fast")
