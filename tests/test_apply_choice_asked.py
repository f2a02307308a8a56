"""Who may decide a choice the merge's rules leave follows the mode the user asked for: in ``auto``
a user's own model does (loaded for it), in an explicit ``aligner`` the fixed rule does and no
model is loaded, at every door (the CLI, an answer naming files, the language server). The user's
own model here is a path where no model is: trying to load it shows (the CLI warns "the rule
decides", the language server sends a ``loading`` status), so not trying is seen. The doors with
a real own model are in tests/test_apply_choice_doors.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_apply_choice import FILE, UPDATE, run

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
