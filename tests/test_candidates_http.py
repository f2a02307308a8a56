"""The HTTP edit endpoint and candidates: ``candidates`` answers up to K unchecked candidates; a
check command is never accepted over HTTP (a 400 that says why)."""

from __future__ import annotations

import pytest
from support import ADD_DOCUMENTED as BUGGY

from engine.openai_api.errors import ApiError
from engine.openai_api.schemas import CHECK_FIELDS, EditBody

BODY = {"text": BUGGY, "instruction": "Fix the bug in add.", "focus": 3, "language": "python"}


@pytest.mark.parametrize("name", CHECK_FIELDS)
def test_a_body_that_names_a_check_is_refused(name: str) -> None:
    with pytest.raises(ApiError) as refused:
        EditBody.model_validate({**BODY, name: "pytest -q {file}"})
    assert refused.value.status == 400 and refused.value.param == name
    assert "never runs a check command" in refused.value.message


def test_candidates_are_bounded() -> None:
    assert EditBody.model_validate({**BODY, "candidates": 4}).candidates == 4
    for bad in (0, 17):
        with pytest.raises(ValueError):
            EditBody.model_validate({**BODY, "candidates": bad})


@pytest.fixture(scope="module")
def http(default_engine):
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    with TestClient(create_app(default_engine, ServerConfig("copy-as-decode"))) as client:
        yield client


@pytest.mark.model
def test_the_endpoint_refuses_a_check_with_a_clear_400(http) -> None:
    answer = http.post("/v1/edits/copy-as-decode", json={**BODY, "check": "rm -rf ~"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "check_not_allowed" and error["param"] == "check"


@pytest.mark.model
def test_the_endpoint_answers_unchecked_candidates(http) -> None:
    answer = http.post("/v1/edits/copy-as-decode", json={**BODY, "candidates": 3})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    listed = data["candidates"]
    distinct = [c for c in listed if c["refused"] is None]
    assert 1 <= len(distinct) == data["search"]["distinct"] <= 3
    assert (len(distinct) < 3) == (data["search"]["shortfall"] is not None)  # fewer than asked: it says so
    assert len({c["output_text"] for c in listed}) == len(listed)  # no duplicates
    assert all(c["check"] is None for c in listed)
    usable = [c for c in listed if c["refused"] is None]
    assert [c["score"] for c in usable] == sorted((c["score"] for c in usable), reverse=True)
    assert data["output_text"] == listed[0]["output_text"]
    streamed = http.post("/v1/edits/copy-as-decode", json={**BODY, "candidates": 3, "stream": True})
    assert streamed.status_code == 400
