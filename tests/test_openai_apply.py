"""Apply over HTTP (docs/apply-clients.md): ``serve-openai`` answers a chat completion holding
``<code>``/``<update>`` (sent by the official ``openai`` client as Continue's and Morph's templates
write it, streamed and not) and ``POST /v1/code/apply`` (Relace's shape) with the merged file the
engine gives for the same request, which is what ``copy-as-decode apply`` writes; a client that
goes away stops the merge within 0.5 s. The refusals (an empty or binary update, one that matches
nothing, over the limits) and ``partial`` go through FastAPI's TestClient on the same app.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from test_openai_server import KEY, _serve

from engine.core.tokens import encode
from engine.api import EditRequest, Engine
from engine.settings import Settings

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]

FILE = ('def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\n'
        'def sub(a, b):\n    return a - b\n')
UPDATE = "def add(a, b):\n    # ... existing code ...\n    return a + b\n# ... rest of the code unchanged ...\n"
NOWHERE = "# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n"
# One of two changes placed: sub's body is changed; zzz, between two elisions, anchors on nothing.
HALF = NOWHERE + "def sub(a, b):\n    return b - a\n"
CONTINUE_TEMPLATE = "<code>{code}</code>\n<update>{update}</update>"
MORPH_TEMPLATE = "<instruction>{instruction}</instruction>\n<code>{code}</code>\n<update>{update}</update>"
# Enough functions that a merge takes long enough to be cut short.
BIG = "".join(f"def f{i}(x):\n    y = x * {i}\n    return y + {i}\n\n\n" for i in range(900))
BIG_UPDATE = "".join(f"# ... existing code ...\ndef f{i}(x):\n    y = x * {i} - 1\n" for i in range(0, 900, 4)) + \
    "# ... existing code ...\n"


def merged(engine: Engine, code: str, update: str, instruction: str = "", partial: bool = False,
           settings: Settings | None = None) -> str:
    """The engine's merge of the same request (the server's settings: the defaults unless given;
    ``auto`` is resolved by the engine, as for the CLI)."""
    request = EditRequest.from_settings(settings or Settings(), code, instruction, update=update, partial=partial)
    result = engine.edit(request)
    assert result.stop_reason == "done", result.warnings
    return result.output_text


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve("transformers", tmp_path_factory.mktemp("serve-apply") / "server.log", "--max-body-kb", "1024") as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def _health(base_url: str) -> dict:
    return httpx.get(base_url + "/health", timeout=5).json()


def test_chat_apply_answers_the_engines_merge(client: openai.OpenAI, default_engine: Engine) -> None:
    want = merged(default_engine, FILE, UPDATE)
    assert want == FILE.replace("return a - b\n\n", "return a + b\n\n", 1)
    model = client.models.list().data[0].id
    content = CONTINUE_TEMPLATE.format(code=FILE, update=UPDATE)
    plain = client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}])
    assert plain.choices[0].message.content == want and plain.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop" and chunks[-1].usage is not None
    # Morph's template, with an instruction and the tags on their own lines, after a system message
    morph = MORPH_TEMPLATE.format(instruction="Fix add", code=f"\n{FILE}\n", update=f"\n{UPDATE}\n")
    answer = client.chat.completions.create(model=model, messages=[
        {"role": "system", "content": "You merge code."}, {"role": "user", "content": morph}])
    assert answer.choices[0].message.content == merged(default_engine, FILE, UPDATE, "Fix add") == want


def test_code_apply_answers_the_engines_merge(base_url: str, default_engine: Engine) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    want = merged(default_engine, FILE, UPDATE)
    answer = httpx.post(base_url + "/v1/code/apply", headers=headers, timeout=300,
                        json={"initialCode": FILE, "editSnippet": UPDATE, "model": "relace-apply-3"}).json()
    # Relace's shape, and the choice the line rules met: `return a + b` after a marker, beside the
    # file's `return a - b`, an edit of it or a new line; the rule's reading (an edit) is written
    assert answer["mergedCode"] == want and set(answer) == {"mergedCode", "usage", "choice"}
    assert answer["choice"]["by"] == "rule" and answer["choice"]["chosen"] == "replace line 3"
    assert set(answer["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    # the merged file's tokens, though the aligner (auto) wrote it without the model
    assert answer["usage"]["completion_tokens"] == len(encode(default_engine.loaded.tokenizer, want)) > 0
    events = []
    with httpx.stream("POST", base_url + "/v1/code/apply", headers=headers, timeout=300,
                      json={"initial_code": FILE, "edit_snippet": UPDATE, "stream": True}) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert "".join(e.get("mergedCode", "") for e in events) == want and "usage" in events[-1]


def test_the_http_answer_is_the_clis(base_url: str, client: openai.OpenAI, tmp_path: Path) -> None:
    """``copy-as-decode apply FILE --update UPDATE --output OUT`` writes what both HTTP forms answer."""
    from engine.cli import main

    (tmp_path / "add.py").write_text(FILE)
    (tmp_path / "update.txt").write_text(UPDATE)
    out = tmp_path / "merged.py"
    assert main(["apply", str(tmp_path / "add.py"), "--update", str(tmp_path / "update.txt"), "--output", str(out),
                 "--json"]) == 0
    chat = client.chat.completions.create(model="default", messages=[
        {"role": "user", "content": CONTINUE_TEMPLATE.format(code=FILE, update=UPDATE)}])
    code = httpx.post(base_url + "/v1/code/apply", headers={"Authorization": f"Bearer {KEY}"}, timeout=300,
                      json={"initialCode": FILE, "editSnippet": UPDATE, "path": "add.py"}).json()
    assert chat.choices[0].message.content == code["mergedCode"] == out.read_text()


def _leave_mid_merge(base_url: str, content: str) -> tuple[int, float]:
    """Stream an apply, leave once its first merged text arrives; (decodes running just before the
    client left, seconds from its leaving until none runs). Both are read before the stream is let
    go: a merge that stops within milliseconds has stopped by the time the client looks again."""
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": content}]}
    running, left = 0, time.monotonic()
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                      timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if '"content":"' in line and '"content":""' not in line:  # the merge is under way
                running, left = _health(base_url)["running"], time.monotonic()
                break
    while _health(base_url)["running"] and time.monotonic() - left < 10:
        time.sleep(0.01)
    return running, time.monotonic() - left


def test_a_client_that_goes_away_stops_the_merge(base_url: str, client: openai.OpenAI, default_engine: Engine) -> None:
    """The aligner's merge (``auto``) of a 4,500-line file: a client that leaves mid-stream stops
    it within 0.5 s, and the server answers the next request."""
    content = CONTINUE_TEMPLATE.format(code=BIG, update=BIG_UPDATE)
    started = time.monotonic()
    whole = client.chat.completions.create(model="default", messages=[{"role": "user", "content": content}])
    print(f"a {BIG.count(chr(10))}-line merge over HTTP (auto): {time.monotonic() - started:.2f} s")
    assert whole.choices[0].message.content == merged(default_engine, BIG, BIG_UPDATE)
    running, stopped = _leave_mid_merge(base_url, content)
    print(f"auto: running when the client left: {running}; none {stopped:.3f} s later")
    assert stopped <= 0.5, f"the merge went on {stopped:.2f} s after the client left"
    after = client.chat.completions.create(model="default", messages=[
        {"role": "user", "content": CONTINUE_TEMPLATE.format(code=FILE, update=UPDATE)}])
    assert after.choices[0].finish_reason == "stop"


def test_a_client_that_goes_away_stops_the_models_merge(tmp_path: Path, default_engine: Engine) -> None:
    """The model's merge (``program``, from the workspace's settings; 1-3 s to its first op and
    4-9 s in all on this CPU): a client that leaves mid-stream stops it within 0.5 s (a forward
    stops between two layers), and the next request is answered with the engine's merge, as if
    nothing had been cut short."""
    want = merged(default_engine, FILE, UPDATE, settings=Settings(mode="program"))
    (tmp_path / ".copy-as-decode.toml").write_text('mode = "program"\n')
    with _serve("transformers", tmp_path / "server.log", "--workspace", str(tmp_path)) as url:
        running, stopped = _leave_mid_merge(url, CONTINUE_TEMPLATE.format(code=FILE, update=UPDATE))
        print(f"program: running when the client left: {running}; none {stopped:.3f} s later")
        if not running:
            pytest.skip("the model's merge ended before the client left: nothing to cancel")
        after = httpx.post(url + "/v1/code/apply", headers={"Authorization": f"Bearer {KEY}"}, timeout=300,
                           json={"initialCode": FILE, "editSnippet": UPDATE})
        assert stopped <= 0.5, f"the model's merge went on {stopped:.2f} s after the client left"
        assert after.status_code == 200 and after.json()["mergedCode"] == want


# --- refusals and partial: the app in this process --------------------------------------------

@contextlib.contextmanager
def _app(engine: Engine) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    app = create_app(engine, ServerConfig(model_id="m"))
    with TestClient(app) as http:
        yield http
        deadline = time.time() + 10
        while app.state.queue.running and time.time() < deadline:
            time.sleep(0.01)


def _chat(http: Any, code: str, update: str, **extra: Any) -> Any:
    return http.post("/v1/chat/completions", json={"model": "m", **extra, "messages": [
        {"role": "user", "content": CONTINUE_TEMPLATE.format(code=code, update=update)}]})


@pytest.mark.parametrize("update,words", [
    ("  \n", "the update is empty"),
    ("def add(a, b):\n    return a\x00 + b\n", "binary"),
    ("x = 1\n" * 6000, "update too large"),
])
def test_bad_updates_are_refused_before_anything_runs(default_engine: Engine, update: str, words: str) -> None:
    with _app(default_engine) as http:
        for answer in (_chat(http, FILE, update), http.post("/v1/code/apply", json={
                "initialCode": FILE, "editSnippet": update})):
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["code"] == "invalid_apply" and words in error["message"]
            assert "mergedCode" not in answer.json() and "choices" not in answer.json()


def test_an_update_that_matches_nothing_is_refused_with_its_lines(default_engine: Engine) -> None:
    with _app(default_engine) as http:
        for answer in (_chat(http, FILE, NOWHERE), http.post("/v1/code/apply", json={
                "initialCode": FILE, "editSnippet": NOWHERE})):
            assert answer.status_code == 400
            body = answer.json()
            assert body["error"]["code"] == "unplaced" and "2-3" in body["error"]["message"]
            assert [{k: c[k] for k in ("lines", "text")} for c in body["unplaced"]] == [
                {"lines": [2, 3], "text": "def zzz():\n    totally_new()\n"}]
            assert body["unplaced"][0]["nearest"].startswith("no line matches `def zzz():`")
        streamed = _chat(http, FILE, NOWHERE, stream=True)
        events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
        assert "[DONE]" not in streamed.text and events[-1]["error"]["code"] == "unplaced"
        assert not any(e.get("choices") and e["choices"][0]["delta"].get("content") for e in events)


def test_partial_answers_what_was_placed_and_lists_the_rest(default_engine: Engine) -> None:
    want = merged(default_engine, FILE, HALF, partial=True)
    assert want == FILE[:FILE.index("def sub")] + "def sub(a, b):\n    return b - a\n"
    with _app(default_engine) as http:
        assert _chat(http, FILE, HALF).status_code == 400
        chat = _chat(http, FILE, HALF, partial=True).json()
        assert chat["choices"][0]["message"]["content"] == want
        assert [c["lines"] for c in chat["copy_as_decode"]["unplaced"]] == [[2, 3]]
        code = http.post("/v1/code/apply", json={"initialCode": FILE, "editSnippet": HALF, "partial": True}).json()
        assert code["mergedCode"] == want and [c["lines"] for c in code["unplaced"]] == [[2, 3]]


def test_crlf_file_is_merged_in_crlf(default_engine: Engine) -> None:
    crlf = FILE.replace("\n", "\r\n")
    with _app(default_engine) as http:
        answer = http.post("/v1/code/apply", json={"initialCode": crlf, "editSnippet": UPDATE}).json()
    assert answer["mergedCode"] == merged(default_engine, FILE, UPDATE).replace("\n", "\r\n")

