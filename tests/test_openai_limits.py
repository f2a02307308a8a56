"""The chat endpoint's limits: a request without ``max_tokens`` gets ``chatMaxTokens``, and the loop
guard ends a degenerate completion with ``finish_reason`` "length", the
``x-copy-as-decode-stop-reason`` header and the ``copy_as_decode`` field (docs/openai-endpoint.md).

The fast tests run the server token path (vLLM's) on a scripted stream and need only the
tokenizer; the model tests send real requests through the HTTP app to the embedded model."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from support import ADD_DOCUMENTED as BUGGY

from engine.core.tokens import encode
from engine.openai_api.app import STOP_HEADER
from engine.openai_api.completion import ChatDecode, build_job
from engine.openai_api.schemas import EXTENSION, completion_json, stop_extension
from engine.settings import DEFAULTS, Settings

# Greedy, the embedded model answers this one with "* `assert`" again and again.
LOOPING = [{"role": "user", "content": "List all the Python keywords."}]
FIX = [{"role": "system", "content": "You are a careful code editor. Reply with the code only."},
       {"role": "user", "content": f"Fix the bug:\n```python\n{BUGGY}```"}]
REPEATED = "The docstring is:\n\n"


class ScriptedServer:
    """A server runtime (the vLLM path) that streams the given tokens one at a time."""

    gives_logits = False  # a server: it streams tokens (engine.runtime.protocol)

    def __init__(self, tokens: list[int], limit: int | None = 4096):
        self.tokens, self.limit, self.streamed = tokens, limit, 0

    def context_limit(self) -> int | None:
        return self.limit

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Any,
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]:
        out = self.tokens[:max_tokens]
        for i, token in enumerate(out):
            self.streamed += 1
            yield [token], ("length" if len(out) == max_tokens else "stop") if i == len(out) - 1 else None


def _served(tokenizer: Any, text: str, limit: int | None = 4096) -> SimpleNamespace:
    return SimpleNamespace(tokenizer=tokenizer, runtime=ScriptedServer(encode(tokenizer, text), limit))


def _decode(loaded: SimpleNamespace, max_tokens: int | None, prediction: str | None = None) -> ChatDecode:
    chat = build_job(loaded, LOOPING, max_tokens, (), 0.0, 1.0, None, prediction)
    decode = ChatDecode(loaded, SimpleNamespace(stop_ids=set()), chat, lambda: False)
    decode.text = "".join(decode.deltas())
    return decode


def test_no_max_tokens_gets_chat_max_tokens_within_the_context(tokenizer) -> None:
    loaded = _served(tokenizer, "")
    assert build_job(loaded, LOOPING, None, (), 0.0, 1.0, None, None).max_tokens == DEFAULTS.http.chat_max_tokens
    assert build_job(loaded, LOOPING, None, (), 0.0, 1.0, None, None, default_max_tokens=7).max_tokens == 7
    assert build_job(loaded, LOOPING, 3000, (), 0.0, 1.0, None, None).max_tokens == 3000
    prompt = len(build_job(loaded, LOOPING, 1, (), 0.0, 1.0, None, None).prompt_ids)
    cut = build_job(loaded, LOOPING, None, (), 0.0, 1.0, None, None, default_max_tokens=5000)
    assert cut.max_tokens == 4096 - prompt
    unlimited = _served(tokenizer, "", limit=None)
    assert build_job(unlimited, LOOPING, None, (), 0.0, 1.0, None, None).max_tokens == DEFAULTS.http.chat_max_tokens


def test_the_server_path_stops_a_loop(tokenizer) -> None:
    loaded = _served(tokenizer, REPEATED * 200)
    decode = _decode(loaded, 2000)
    assert (decode.finish_reason, decode.stop_reason) == ("length", "loop")
    assert "repeating itself" in decode.stop_detail and "The docstring is:" in decode.stop_detail
    assert loaded.runtime.streamed == decode.completion_tokens < 60  # the stream was left, not drained
    assert decode.text.startswith(REPEATED * 4)


def test_a_repetition_the_messages_have_is_no_loop(tokenizer) -> None:
    """Output that repeats what the request holds (here: the prediction) is copied, not a loop."""
    decode = _decode(_served(tokenizer, REPEATED * 12), None, prediction=REPEATED * 12)
    assert decode.text == REPEATED * 12
    assert (decode.finish_reason, decode.stop_reason) == ("stop", None)


def test_the_extension_field_only_when_the_engine_stopped() -> None:
    usage = {"prompt_tokens": 1}
    assert EXTENSION not in completion_json("c", "m", "x", "stop", usage, stop_extension(None, ""))
    looped = completion_json("c", "m", "x", "length", usage, stop_extension("loop", "why"))
    assert looped[EXTENSION] == {"stop_reason": "loop", "detail": "why"}


@contextlib.contextmanager
def _client(engine: Any, **settings: Any) -> Iterator[Any]:
    """A TestClient on the app; it closes once the last decode's worker thread handed its slot
    back (closing its event loop before would leave that thread nowhere to report)."""
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    app = create_app(engine, ServerConfig(model_id="m", settings=Settings(**settings)))
    with TestClient(app) as http:
        yield http
        deadline = time.time() + 10
        while app.state.queue.running and time.time() < deadline:
            time.sleep(0.01)


def _events(response: Any) -> list[dict]:
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.model
@pytest.mark.parametrize("prediction", [None, "Here are the Python keywords:\n\n* `print`\n* `assert`\n"])
def test_a_degenerate_completion_ends_early(default_engine, prediction: str | None) -> None:
    body: dict[str, Any] = {"model": "m", "messages": LOOPING}
    if prediction:
        body["prediction"] = {"type": "content", "content": prediction}
    with _client(default_engine) as http:
        started = time.perf_counter()
        answer = http.post("/v1/chat/completions", json=body)
        seconds = time.perf_counter() - started
        streamed = http.post("/v1/chat/completions", json={**body, "stream": True})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert seconds < 30 and data["usage"]["completion_tokens"] < 200
    assert data["choices"][0]["finish_reason"] == "length"
    assert answer.headers[STOP_HEADER] == "loop"
    assert data[EXTENSION]["stop_reason"] == "loop" and "repeating itself" in data[EXTENSION]["detail"]
    events = _events(streamed)
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == data["choices"][0]["message"][
        "content"]
    assert events[-1]["choices"][0]["finish_reason"] == "length" and events[-1][EXTENSION] == data[EXTENSION]
    assert all(EXTENSION not in e for e in events[:-1])


@pytest.mark.model
def test_a_normal_completion_is_unchanged(default_engine) -> None:
    with _client(default_engine) as http:
        answer = http.post("/v1/chat/completions", json={"model": "m", "messages": FIX, "max_tokens": 40})
        streamed = http.post("/v1/chat/completions", json={"model": "m", "messages": FIX, "max_tokens": 40, "stream": True})
    data = answer.json()
    assert "a + b" in data["choices"][0]["message"]["content"]
    assert EXTENSION not in data and STOP_HEADER not in answer.headers
    assert all(EXTENSION not in e for e in _events(streamed))


@pytest.mark.model
def test_the_default_max_tokens_applies(default_engine) -> None:
    with _client(default_engine, chat_max_tokens=6) as http:
        answer = http.post("/v1/chat/completions", json={"model": "m", "messages": FIX})
        given = http.post("/v1/chat/completions", json={"model": "m", "messages": FIX, "max_tokens": 9})
    assert answer.json()["usage"]["completion_tokens"] == 6
    assert answer.json()["choices"][0]["finish_reason"] == "length" and EXTENSION not in answer.json()
    assert given.json()["usage"]["completion_tokens"] == 9
