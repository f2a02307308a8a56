"""The HTTP apply gives the CLI's verdict: a merge ``copy-as-decode apply`` refuses (here one that
breaks the file's syntax: a 422 naming the line) is refused over HTTP in the same words, and one it
writes is answered.
The aligner merges these (mode auto): the app runs on the embedded model's tokenizer alone, no
weights (its usage counts the merged file's tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.api import Engine
from engine.cli import main

FILE = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y\n"
BREAKS = "# ... existing code ...\ndef g(y):\n    return (y * 2\n"
FIXES = "# ... existing code ...\ndef g(y):\n    return y * 2\n"
NOWHERE = "# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n"


@pytest.fixture()
def http(tokenizer) -> Any:
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    loaded = SimpleNamespace(name="stub", tokenizer=tokenizer, vocab_size=len(tokenizer),
                             runtime=SimpleNamespace(concurrent=False, eos_ids=set))  # never runs: the aligner merges
    with TestClient(create_app(Engine(loaded), ServerConfig(model_id="m"))) as client:  # type: ignore[arg-type]
        yield client


def cli_apply(capsys, tmp_path: Path, update: str) -> tuple[int, dict]:
    target, given = tmp_path / "f.py", tmp_path / "u.py"
    target.write_text(FILE)
    given.write_text(update)
    code = main(["apply", str(target), "--update", str(given), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_merge_the_cli_refuses_is_refused_over_http_in_its_words(http, capsys, tmp_path: Path) -> None:
    code, summary = cli_apply(capsys, tmp_path, BREAKS)
    assert code == 5 and summary["refused"].startswith("refusing an edit that breaks the syntax")
    line = summary["syntax"]["error"]["line"]
    assert f"line {line}," in summary["refused"]
    answer = http.post("/v1/code/apply", json={"initialCode": FILE, "editSnippet": BREAKS, "path": "f.py"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "syntax_error" and error["message"] == summary["refused"]
    assert (error["line"], error["language"]) == (line, "python") and "mergedCode" not in answer.json()
    streamed = http.post("/v1/code/apply", json={"initialCode": FILE, "editSnippet": BREAKS, "path": "f.py",
                                                 "stream": True})
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "[DONE]" not in streamed.text and events[-1]["error"]["message"] == summary["refused"]
    assert events[-1]["error"]["line"] == line


def test_the_chat_convention_judges_a_nameless_file_in_the_language_it_parses_in(http, capsys,
                                                                                 tmp_path: Path) -> None:
    """A chat apply has no path: the file parsed as Python before, and the merge parses in none of
    the languages it parsed in, so it is the same 422 as the CLI's on f.py."""
    _, summary = cli_apply(capsys, tmp_path, BREAKS)
    answer = http.post("/v1/chat/completions", json={"model": "m", "messages": [
        {"role": "user", "content": f"<code>{FILE}</code>\n<update>{BREAKS}</update>"}]})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "syntax_error" and error["message"] == summary["refused"]
    assert error["line"] == summary["syntax"]["error"]["line"]


GO_FILE = "package calc\n\nfunc Mul(a, b int) int {\n\treturn a + b\n}\n"
GO_BREAKS = "func Mul(a, b int) int {\n\treturn a *\n"


def test_a_go_merge_that_breaks_the_syntax_is_a_422_naming_the_line(http) -> None:
    answer = http.post("/v1/code/apply", json={"initialCode": GO_FILE, "editSnippet": GO_BREAKS, "path": "calc/mul.go"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["language"] == "go" and f"line {error['line']}," in error["message"]
    fine = http.post("/v1/code/apply", json={"initialCode": GO_FILE, "editSnippet": GO_BREAKS.replace("*\n", "* b\n}\n"),
                                             "path": "calc/mul.go"})
    assert fine.status_code == 200 and fine.json()["mergedCode"] == GO_FILE.replace("a + b", "a * b")


def test_an_unplaced_update_is_refused_in_the_clis_words_in_both_forms(http, capsys, tmp_path: Path) -> None:
    code, summary = cli_apply(capsys, tmp_path, NOWHERE)
    assert code == 7 and "could not place update lines 2-3" in summary["refused"]
    for answer in (http.post("/v1/code/apply", json={"initialCode": FILE, "editSnippet": NOWHERE}),
                   http.post("/v1/chat/completions", json={"model": "m", "messages": [
                       {"role": "user", "content": f"<code>{FILE}</code>\n<update>{NOWHERE}</update>"}]})):
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "unplaced" and answer.json()["error"]["message"] == summary["refused"]


def test_a_merge_the_cli_writes_is_answered_over_http(http, capsys, tmp_path: Path) -> None:
    code, summary = cli_apply(capsys, tmp_path, FIXES)
    assert code == 0 and summary["refused"] is None and summary["mode"] == "aligner"
    answer = http.post("/v1/code/apply", json={"initialCode": FILE, "editSnippet": FIXES, "path": "f.py"})
    assert answer.status_code == 200 and answer.json()["mergedCode"] == FILE.replace("return y\n", "return y * 2\n")
