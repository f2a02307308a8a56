"""The language server's settings command with ``"doctor": true`` answers ``copy-as-decode
doctor``'s report for the document's effective settings (engine.doctor_report), through a real
``python -m lsp_server`` process driven by pytest-lsp as VS Code would drive it: the failure and
its fix for a model that is missing, the facts and their summary for the embedded model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from engine.cli import main

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

SETTINGS_COMMAND = "copyAsDecode.server.settings"
SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / "missing").mkdir()
    (root / "missing" / ".copy-as-decode.toml").write_text(f'model = "{root / "missing.gguf"}"\n')
    (root / "embedded").mkdir()
    (root / "embedded" / ".copy-as-decode.toml").write_text('backend = "llamacpp"\nthreads = 1\n')
    return root


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, workspace: Path):
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        """VS Code accepts the server's registration for configuration changes."""

    @lsp_client.feature("copyAsDecode/status")
    def status(params) -> None:
        """The status bar item; not what this test looks at."""

    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.as_uri(),
        initialization_options={"copyAsDecode": {"allowedModels": ["default", "hub:*", f"{workspace}/*"]}},
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
    ))
    yield
    await lsp_client.shutdown_session()


def open_document(client: LanguageClient, path: Path) -> str:
    path.write_text("x = 1\n")
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=path.as_uri(), language_id="python", version=1, text="x = 1\n")))
    return path.as_uri()


async def settings_of(client: LanguageClient, uri: str, **more: object) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=SETTINGS_COMMAND, arguments=[{"uri": uri, **more}]))


async def test_a_missing_model_answers_the_commands_failure(client: LanguageClient, workspace: Path, capsys):
    uri = open_document(client, workspace / "missing" / "a.py")
    assert "doctor" not in await settings_of(client, uri)  # only when asked for
    report = (await settings_of(client, uri, doctor=True))["doctor"]
    # (the command reads the user's allowedModels from no editor: the model comes as a flag)
    assert main(["doctor", str(workspace), "--model", str(workspace / "missing.gguf"), "--json"]) == 2
    assert report == json.loads(capsys.readouterr().out)  # the same failure and fix as the command's
    assert report["ok"] is False and "--model" in report["fix"]


@pytest.mark.model
async def test_the_embedded_model_answers_the_commands_report(client: LanguageClient, workspace: Path, capsys):
    pytest.importorskip("llama_cpp")
    uri = open_document(client, workspace / "embedded" / "a.py")
    report = (await settings_of(client, uri, doctor=True))["doctor"]
    assert main(["doctor", str(workspace / "embedded"), "--json"]) == 0
    command = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and set(report["lines"]) == set(command["lines"])
    for name in ("model", "backend", "device", "threads", "selector", "verify", "prompt cache"):
        assert report["lines"][name] == command["lines"][name], name
    assert report["summary"].startswith("program mode; default; llamacpp on cpu; 1 thread(s)")
    assert report["summary"] == command["summary"].replace(command["lines"]["estimate"]["value"],
                                                           report["lines"]["estimate"]["value"])
    assert "[threads, --threads]" in report["screen"]
