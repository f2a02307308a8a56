"""A chat completion names its verify rule in the ``copy_as_decode`` extension field
(docs/openai-endpoint.md); without one it gets the server's ``--verify``."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from engine.core.choices import VERIFY_RULES
from engine.openai_api.schemas import EXTENSION, ChatCompletionRequest

BODY = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("rule", VERIFY_RULES)
def test_a_request_names_its_verify_rule(rule: str) -> None:
    req = ChatCompletionRequest.model_validate({**BODY, EXTENSION: {"verify": rule}})
    assert req.verify_rule("argmax") == req.verify_rule("exact") == rule


def test_without_one_the_servers_rule_holds() -> None:
    for body in (BODY, {**BODY, EXTENSION: {}}):
        req = ChatCompletionRequest.model_validate(body)
        assert req.verify_rule("argmax") == "argmax" and req.verify_rule("auto") == "auto"


@pytest.mark.parametrize("extension", [{"verify": "fast"}, {"verify": 1}, {"verfy": "exact"}, "argmax"])
def test_what_is_not_a_rule_is_refused(extension: object) -> None:
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate({**BODY, EXTENSION: extension})


@pytest.mark.model
def test_the_named_rule_reaches_the_decode(default_engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP: the request's rule (else the server's) goes to the decode, the usage block counts
    the prediction's tokens, and a rule that is not one is a 400 naming the field."""
    from fastapi.testclient import TestClient

    import engine.openai_api.app as app_module
    from engine.settings import Settings

    seen: list[str] = []
    build_job = app_module.build_job

    def recording(*args, **kwargs):
        job = build_job(*args, **kwargs)
        seen.append(job.verify)
        return job

    monkeypatch.setattr(app_module, "build_job", recording)
    app = app_module.create_app(default_engine, app_module.ServerConfig(model_id="m", settings=Settings(verify="argmax")))
    body = {**BODY, "model": "m", "max_tokens": 8, "prediction": {"type": "content", "content": "hello there"}}
    with TestClient(app) as http:
        named = http.post("/v1/chat/completions", json={**body, EXTENSION: {"verify": "exact"}})
        plain = http.post("/v1/chat/completions", json=body)
        bad = http.post("/v1/chat/completions", json={**body, EXTENSION: {"verify": "fast"}})
        deadline = time.time() + 10  # the last decode's worker hands its slot back before the loop closes
        while app.state.queue.running and time.time() < deadline:
            time.sleep(0.01)
    assert seen == ["exact", "argmax"]
    details = named.json()["usage"]["completion_tokens_details"]
    assert {"accepted_prediction_tokens", "rejected_prediction_tokens"} <= set(details)
    assert plain.status_code == 200
    assert bad.status_code == 400 and bad.json()["error"]["param"] == f"{EXTENSION}.verify"
