"""The same choice decided the same way at every door: where the aligner's rules leave a choice
and the model is the user's own, ``copy-as-decode apply``, ``POST /v1/code/apply``, the language
server's ``applyUpdate`` and an answer that names files each have the engine's model decide it
(under its lock: engine.api.Engine.plan), write the same merge and name who decided and the
alternative; asked in ``aligner`` (the rules alone), each has the rule decide and loads no model.
The user's own model is the embedded one, de-quantized into a folder and named by its path (what
a user's own model looks like), on transformers at every door."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_apply_choice import TWINS, UPDATE, run
from test_apply_choice_asked import open_session
from test_lsp_answer import Editor, attach

from engine.api import Engine
from engine.cli import main
from engine.decoding.request import EditRequest
from engine.dispatch import ModelFree
from engine.runtime.sources import cache_dir

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]

INSTRUCTION = "rename low_stock to understocked and include the limit"
READINGS = {"rename overstocked -> understocked", "rename low_stock -> understocked", "new function understocked"}
CHOICE_KEYS = ("by", "chosen", "alternatives", "note")


@pytest.fixture(scope="module")
def own_folder(default_engine: Engine) -> Path:
    """The embedded model's de-quantized folder (made by loading it on transformers)."""
    folder = cache_dir() / "SmolLM2-135M-Instruct"
    assert (folder / "config.json").is_file()
    return folder


@pytest.fixture(scope="module")
def by_cli(own_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """``copy-as-decode apply --json --in-place`` of the case: its ``breakdown.choice`` and the file written."""
    root = tmp_path_factory.mktemp("cli")
    target, update = root / "inv.py", root / "u.py"
    target.write_text(TWINS)
    update.write_text(UPDATE)
    code, out = _cli(str(target), "--update", str(update), "--json", "--in-place", "-i", INSTRUCTION,
                     "--model", str(own_folder), "--backend", "transformers")
    assert code == 0, out
    return json.loads(out)["breakdown"]["choice"], target.read_text()


def _cli(*argv: str) -> tuple[int, str]:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            code = main(["apply", *argv])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, buffer.getvalue()


def _brief(choice: dict) -> dict:
    return {k: choice[k] for k in CHOICE_KEYS}


@pytest.fixture(scope="module")
def by_rule() -> tuple[dict, str]:
    """The rules' merge of the case (no model): its ``choice`` and the merged file."""
    result = ModelFree().edit(EditRequest(text=TWINS, instruction=INSTRUCTION, update=UPDATE, language="python",
                                          mode="aligner"))
    assert result.breakdown["choice"]["by"] == "rule"
    return result.breakdown["choice"], result.output_text


def test_the_cli_has_the_users_own_model_decide_and_names_the_alternatives(by_cli) -> None:
    choice, written = by_cli
    assert choice["by"] == "model" and {choice["chosen"], *choice["alternatives"]} == READINGS
    assert choice["note"].startswith("the model chose: ") and len(choice["scores"]) == 3
    assert written != TWINS


def test_the_cli_asked_aligner_has_the_rule_decide_and_loads_no_model(own_folder: Path, by_cli, by_rule, capsys,
                                                                      tmp_path: Path) -> None:
    choice, written = by_rule
    assert choice["chosen"] != by_cli[0]["chosen"]  # the model's pick differs from the rule's: the case tells them apart
    target, update = tmp_path / "inv.py", tmp_path / "u.py"
    target.write_text(TWINS)
    update.write_text(UPDATE)
    code, out, err = run(capsys, str(target), "--update", str(update), "--json", "--in-place", "-i", INSTRUCTION,
                         "--model", str(own_folder), "--backend", "transformers", "--mode", "aligner")
    assert code == 0, err
    assert json.loads(out)["breakdown"]["choice"] == choice and target.read_text() == written
    assert "loading" not in err  # in auto the same command prints the model's loading
    target.write_text(TWINS)
    answer = tmp_path / "answer.md"
    answer.write_text(f"`inv.py`\n```python\n{UPDATE}```\n")
    code, out, err = run(capsys, "--update", str(answer), "--root", str(tmp_path), "--json", "-i", INSTRUCTION,
                         "--model", str(own_folder), "--backend", "transformers", "--mode", "aligner")
    assert code == 0 and "loading" not in err, err
    assert json.loads(out)["files"][0]["choice"] == choice and target.read_text() == written


def test_http_asked_aligner_has_the_rule_decide_on_an_own_models_server(by_rule, default_engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    choice, written = by_rule
    own = replace(default_engine, chooses=True)
    body = {"initialCode": TWINS, "editSnippet": UPDATE, "instruction": INSTRUCTION, "path": "inv.py",
            "mode": "aligner"}
    with TestClient(create_app(own, ServerConfig(model_id="m"))) as http:
        with own.loaded.runtime.meter() as log:
            answer = http.post("/v1/code/apply", json=body)
        bad = http.post("/v1/code/apply", json={**body, "mode": "pld"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choice"] == choice and answer.json()["mergedCode"] == written
    assert json.loads(answer.headers["x-copy-as-decode-choice"])["by"] == "rule"
    assert log.sizes() == []  # the server's model ran no forward for it
    assert bad.status_code == 400 and "mode" in bad.text


def test_http_decides_as_the_cli_and_says_so_in_a_field_and_a_header(by_cli, default_engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from engine.openai_api.app import ServerConfig, create_app

    choice, written = by_cli
    own = replace(default_engine, chooses=True)  # the same model the CLI loaded from its folder
    body = {"initialCode": TWINS, "editSnippet": UPDATE, "instruction": INSTRUCTION, "path": "inv.py"}
    with TestClient(create_app(own, ServerConfig(model_id="m"))) as http:
        answer = http.post("/v1/code/apply", json=body)
        streamed = http.post("/v1/code/apply", json={**body, "stream": True})
        embedded = TestClient(create_app(default_engine, ServerConfig(model_id="m"))).post("/v1/code/apply", json=body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["mergedCode"] == written and _brief(got["choice"]) == _brief(choice)
    assert got["choice"]["scores"] == pytest.approx(choice["scores"], abs=0.05)
    assert json.loads(answer.headers["x-copy-as-decode-choice"]) == {k: choice[k] for k in CHOICE_KEYS[:3]}
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(e.get("mergedCode", "") for e in events) == written
    assert _brief(events[-1]["choice"]) == _brief(choice)
    # The embedded model's own server never has it decide: the rule does, and says so.
    assert embedded.json()["choice"]["by"] == "rule"


def test_an_answer_naming_files_has_each_files_choice(own_folder: Path, by_cli, tmp_path: Path) -> None:
    choice, written = by_cli
    (tmp_path / "inv.py").write_text(TWINS)
    (tmp_path / "plain.py").write_text("def f():\n    return 1\n")
    answer = tmp_path / "answer.md"
    answer.write_text(f"`inv.py`\n```python\n{UPDATE}```\n\n`plain.py`\n```python\ndef f():\n    return 2\n```\n")
    code, out = _cli("--update", str(answer), "--root", str(tmp_path), "--json", "-i", INSTRUCTION,
                     "--model", str(own_folder), "--backend", "transformers")
    assert code == 0, out
    files = {f["path"]: f for f in json.loads(out)["files"]}
    assert _brief(files["inv.py"]["choice"]) == _brief(choice) and files["plain.py"]["choice"] is None
    assert (tmp_path / "inv.py").read_text() == written


SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
)


@pytest_lsp.fixture(config=SERVER)
async def lsp(lsp_client: LanguageClient, tmp_path: Path, own_folder: Path):
    """The language server over ``tmp_path``, the user's settings naming their own model."""
    attach(lsp_client)  # its editor, recording the status bar's states, stands at lsp_client.editor
    user = {"model": str(own_folder), "backend": "transformers", "allowedModels": ["default", str(own_folder)]}
    await open_session(lsp_client, tmp_path, user)
    yield
    await lsp_client.shutdown_session()


async def test_the_language_server_decides_as_the_cli_and_answers_the_choice(lsp: LanguageClient, by_cli, by_rule,
                                                                             tmp_path: Path) -> None:
    choice, written = by_cli
    editor: Editor = lsp.editor  # type: ignore[attr-defined]
    # Asked in aligner first: the rule decides and no model is loaded for it.
    asked = (tmp_path / "asked.py").as_uri()
    (tmp_path / "asked.py").write_text(TWINS)
    editor.open(asked, TWINS, "python")
    outcome = await asyncio.wait_for(lsp.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyUpdate",
        arguments=[{"uri": asked, "update": UPDATE, "instruction": INSTRUCTION, "mode": "aligner"}])), 300)
    assert outcome["status"] == "done", outcome
    assert outcome["choice"] == by_rule[0] and editor.docs[asked][0] == by_rule[1]
    assert "loading" not in editor.status  # type: ignore[attr-defined]
    uri = (tmp_path / "inv.py").as_uri()
    (tmp_path / "inv.py").write_text(TWINS)
    editor.open(uri, TWINS, "python")
    outcome = await asyncio.wait_for(lsp.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyUpdate",
        arguments=[{"uri": uri, "update": UPDATE, "instruction": INSTRUCTION}])), 300)
    assert outcome["status"] == "done", outcome
    assert _brief(outcome["choice"]) == _brief(choice) and choice["note"] in outcome["message"]
    assert editor.docs[uri][0] == written
    assert "loading" in editor.status  # type: ignore[attr-defined]  # in auto the model was loaded for it
