"""Who may decide a choice the merge's rules leave follows the mode the user asked for: in ``auto``
a user's own model does (loaded for it), in an explicit ``aligner`` the fixed rule does and no
model is loaded, at every door (the CLI, an answer naming files, the language server). The user's
own model here is a path where no model is: trying to load it shows (the CLI warns "the rule
decides", the language server sends a ``loading`` status), so not trying is seen. The doors with
a real own model are in tests/test_apply_choice_doors.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_apply_choice import FILE, UPDATE, run
from test_lsp_answer import attach

from engine.decoding.request import EditRequest
from engine.dispatch import ModelFree, resolved

pytestmark = pytest.mark.timeout(120)

RULE = {"by": "rule", "chosen": "rename low_stock -> understocked", "alternatives": ["new function understocked"],
        "scores": [], "note": "the rule chose: rename low_stock -> understocked (the alternative: new function "
                              "understocked)"}


def test_resolving_an_apply_keeps_the_mode_asked_and_only_auto_lets_a_model_decide() -> None:
    auto = resolved(EditRequest(text=FILE, instruction="", update=UPDATE, language="python"), selector=True)
    explicit = resolved(EditRequest(text=FILE, instruction="", update=UPDATE, language="python", mode="aligner"),
                        selector=True)
    assert (auto.mode, auto.asked) == ("aligner", "auto") and (explicit.mode, explicit.asked) == ("aligner", "aligner")
    assert resolved(auto, selector=True) == auto  # resolving again asks the same
    assert ModelFree.needs_choice(auto) and not ModelFree.needs_choice(explicit)
    assert ModelFree.loads_for_choice("/my/model.gguf", auto)
    assert not ModelFree.loads_for_choice("/my/model.gguf", explicit)
    edit = resolved(EditRequest(text=FILE, instruction="Fix it."), selector=True)
    assert edit.mode == "program" and edit.asked_mode is None  # the same request at a door and in the engine


def test_the_cli_in_aligner_mode_has_the_rule_decide_without_loading_the_model(capsys, tmp_path: Path) -> None:
    target, update = tmp_path / "inv.py", tmp_path / "u.py"
    target.write_text(FILE)
    update.write_text(UPDATE)
    missing = str(tmp_path / "no-model-here")
    code, out, err = run(capsys, str(target), "--update", str(update), "--model", missing, "--mode", "aligner",
                         "--json", "--in-place", "-i", "rename low_stock")
    assert code == 0 and "the rule decides" not in err and "no such" not in err and "loading" not in err, err
    answer = json.loads(out)
    assert answer["breakdown"]["choice"] == RULE and answer["mode"] == "aligner"
    assert "def low_stock" not in target.read_text()


def test_an_answer_naming_files_in_aligner_mode_has_the_rule_decide_without_loading(capsys, tmp_path: Path) -> None:
    (tmp_path / "inv.py").write_text(FILE)
    answer = tmp_path / "answer.md"
    answer.write_text(f"`inv.py`\n```python\n{UPDATE}```\n")
    missing = str(tmp_path / "no-model-here")
    code, out, err = run(capsys, "--update", str(answer), "--root", str(tmp_path), "--model", missing,
                         "--mode", "aligner", "--json", "-i", "rename low_stock")
    assert code == 0 and "the rule decides" not in err and "loading" not in err, err
    assert json.loads(out)["files"][0]["choice"] == RULE
    assert "def low_stock" not in (tmp_path / "inv.py").read_text()


SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
)


@pytest_lsp.fixture(config=SERVER)
async def lsp(lsp_client: LanguageClient, tmp_path: Path):
    """The language server over ``tmp_path``; the user's own model is a path where no model is."""
    attach(lsp_client)  # its editor, recording the status bar's states, stands at lsp_client.editor
    missing = str(tmp_path / "no-model-here")
    lsp_client.set_configuration({"copyAsDecode": {"model": missing}})
    await open_session(lsp_client, tmp_path, {"model": missing, "allowedModels": ["default", missing]})
    yield
    await lsp_client.shutdown_session()


async def open_session(lsp_client: LanguageClient, tmp_path: Path, user: dict) -> None:
    """Initialize the language server as VS Code does over the workspace ``tmp_path`` (warm-up off),
    with ``user``'s settings as its initialization options."""
    (tmp_path / ".copy-as-decode.toml").write_text('warm_up = "off"\n')
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri(),
        initialization_options={"copyAsDecode": user},
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")]))


async def _apply(client: LanguageClient, tmp_path: Path, folder: str, mode: str | None, update: str) -> dict:
    """``applyUpdate`` of ``update`` onto ``folder``/inv.py (open), asking ``mode`` (None: the setting's)."""
    (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / folder / "inv.py").write_text(FILE)
    uri = (tmp_path / folder / "inv.py").as_uri()
    client.editor.open(uri, FILE, "python")  # type: ignore[attr-defined]
    return await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyUpdate",
        arguments=[{"uri": uri, "update": update, "instruction": "rename low_stock", "mode": mode}])), 60)


@pytest.mark.asyncio
async def test_the_language_server_in_aligner_mode_has_the_rule_decide_without_loading(lsp: LanguageClient,
                                                                                       tmp_path: Path) -> None:
    editor = lsp.editor  # type: ignore[attr-defined]
    outcome = await _apply(lsp, tmp_path, "asked", "aligner", UPDATE)
    assert outcome["status"] == "done", outcome
    assert outcome["choice"] == RULE and "loading" not in editor.status
    assert "def low_stock" not in editor.docs[(tmp_path / "asked" / "inv.py").as_uri()][0]
    (tmp_path / "answer").mkdir()
    (tmp_path / "answer" / "plain.py").write_text("def f():\n    return 1\n")
    answer = f"`answer/inv.py`\n```python\n{UPDATE}```\n\n`answer/plain.py`\n```python\ndef f():\n    return 2\n```\n"
    named = await _apply(lsp, tmp_path, "answer", "aligner", answer)
    assert named["status"] == "done", named
    files = {entry["path"]: entry for entry in named["summary"]["files"]}
    assert files["answer/inv.py"]["choice"] == RULE and files["answer/plain.py"]["choice"] is None
    assert "loading" not in editor.status
    # The same apply in ``auto`` tries to load the user's own model for its choice: the probe sees it.
    await _apply(lsp, tmp_path, "auto", None, UPDATE)
    assert "loading" in editor.status
    refused = await _apply(lsp, tmp_path, "bad", "rules", UPDATE)
    assert refused["status"] == "error" and "'mode' must be one of" in refused["message"]
