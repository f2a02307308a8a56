"""Settings problems through the real language server (a `python -m lsp_server` process driven by
pytest-lsp as VS Code would drive it). No edit runs, so no model loads.

A workspace file with a typo'd key, a wrong type and a value out of range: each problem reaches
the user once as window/showMessage, naming the file and line, and stays in the settings
command's ``"warnings"``; the file's valid keys apply. A change to the file shows what is still
wrong once more; a file that is not TOML is reported with its line and its last good version
stays in force. A typo in the editor's own settings is reported the same way. The check command
runs code: a workspace file, a pyproject.toml or a folder's pulled settings cannot set it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from support import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

SETTINGS_COMMAND = "copyAsDecode.server.settings"
BAD_FILE = 'mdoe = "program"\ncontext_lines = 7\nmax_new_tokens = "many"\n\nthreads = 9999\n'
EDITOR_SETTINGS = {"copyAsDecode": {"maxNewTokenz": 64, "applyMode": "final", "checkCommand": "sh pulled.sh {file}"}}

SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / ".copy-as-decode.toml").write_text(BAD_FILE)
    return root


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, workspace: Path):
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        """VS Code accepts the server's registration for configuration changes."""

    @lsp_client.feature("copyAsDecode/status")
    def status(params) -> None:
        """The status bar item; not what this test looks at."""

    lsp_client.set_configuration(EDITOR_SETTINGS)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
    ))
    yield
    await lsp_client.shutdown_session()


def shown(client: LanguageClient, text: str) -> int:
    """How many window/showMessage notifications carried ``text``."""
    return sum(text in m.message for m in client.messages)


async def settings_of(client: LanguageClient, uri: str) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=SETTINGS_COMMAND, arguments=[{"uri": uri}]))


def open_document(client: LanguageClient, workspace: Path, name: str) -> str:
    path = workspace / name
    path.write_text("x = 1\n")
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text="x = 1\n")))
    return uri


async def test_file_problems_are_shown_once_with_their_lines(client: LanguageClient, workspace: Path):
    config = workspace / ".copy-as-decode.toml"
    problems = [f"{config}:1: unknown setting 'mdoe' ignored; did you mean 'mode'?",
                f"{config}:3: max_new_tokens must be an integer, got 'many'; ignored",
                f"{config}:5: threads must be between 0 and 512, got 9999; ignored"]
    uri = open_document(client, workspace, "a.py")

    async def all_shown() -> bool:
        return all(shown(client, p) for p in problems)

    await wait_until(all_shown, "the file's problems", client)
    reply = await settings_of(client, uri)
    assert all(p in reply["warnings"] for p in problems)
    assert reply["settings"]["contextLines"] == 7  # the file's valid key applies
    assert (reply["settings"]["maxNewTokens"], reply["settings"]["threads"]) == (1024, 0)  # bad keys: defaults
    open_document(client, workspace, "b.py")  # another document under the same file
    await settings_of(client, uri)  # a round trip: the server has handled didOpen
    assert [shown(client, p) for p in problems] == [1, 1, 1]

    config.write_text('mdoe = "ar"\ncontext_lines = 9\n')  # one problem fixed... one left

    async def reloaded() -> bool:
        return (await settings_of(client, uri))["settings"]["contextLines"] == 9

    await wait_until(reloaded, "the changed file", client)
    await wait_until(lambda: _async(shown(client, problems[0]) == 2), "the remaining problem again", client)
    reply = await settings_of(client, uri)
    assert [w for w in reply["warnings"] if w.startswith(str(config))] == [problems[0]]
    assert [shown(client, p) for p in problems] == [2, 1, 1]

    config.write_text('context_lines = 11\nmode = "ar\n')  # not TOML: the last good version stays
    await wait_until(lambda: _async(shown(client, f"{config}:2: invalid TOML") == 1), "the TOML error", client)
    reply = await settings_of(client, uri)
    assert reply["settings"]["contextLines"] == 9
    assert any(w.startswith(f"{config}:2: invalid TOML") and "last good configuration stays in force" in w
               for w in reply["warnings"])


async def test_editor_settings_problems_are_reported_the_same_way(client: LanguageClient, workspace: Path):
    message = "unknown setting 'maxNewTokenz' ignored; did you mean 'maxNewTokens'?"
    await wait_until(lambda: _async(shown(client, message) >= 1), "the editor settings' typo", client)
    uri = open_document(client, workspace, "c.py")
    reply = await settings_of(client, uri)
    assert reply["settings"]["applyMode"] == "final"  # the editor's valid key applies
    assert any(w.endswith(message) for w in reply["warnings"])


async def test_only_user_settings_set_the_check_command(client: LanguageClient, workspace: Path):
    """A check command from ``.copy-as-decode.toml``, ``pyproject.toml`` or the pulled (folder)
    settings is ignored with a warning naming its source; the other check settings apply."""
    folder = workspace / "checks"
    folder.mkdir()
    (folder / ".copy-as-decode.toml").write_text('check_command = "sh evil.sh {file}"\ncandidates = 2\n')
    (folder / "pyproject.toml").write_text('[tool.copy-as-decode]\ncheck_command = "sh evil.sh"\nmax_rounds = 2\n')
    uri = open_document(client, workspace, "checks/d.py")
    reply = await settings_of(client, uri)
    assert reply["settings"]["checkCommand"] == ""
    assert (reply["settings"]["candidates"], reply["settings"]["maxRounds"]) == (2, 2)
    ignored = "check_command is only read from user-level settings"
    assert any(w.startswith(f"{folder / '.copy-as-decode.toml'}:1: {ignored}") for w in reply["warnings"])
    assert any(w.startswith(f"{folder / 'pyproject.toml'}:2: {ignored}") for w in reply["warnings"])
    assert any("checkCommand is only read from user-level settings" in w for w in reply["warnings"])


async def _async(value: bool) -> bool:
    return value
