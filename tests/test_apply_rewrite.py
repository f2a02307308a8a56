"""An apply the model rewrites in speculative mode drafts from the rules' merge: its text is the
model's own greedy rewrite (ar's, byte for byte), its drafts come from the merge (not the file),
and the result names the model as its writer with the drafts' acceptance."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.api import EditRequest
from engine.apply.job import merge_draft
from engine.cli import main

FILE = ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
        "def describe(w, h):\n    return f\"{w}x{h}\"\n")
UPDATE = ("# ... existing code ...\n\ndef perimeter(w, h):\n    \"\"\"The rectangle's perimeter.\"\"\"\n"
          "    return 2 * w + 2 * h\n\n# ... existing code ...\n")
MERGED = FILE.replace("    return 2 * (w + h)\n", "    \"\"\"The rectangle's perimeter.\"\"\"\n    return 2 * w + 2 * h\n")


def test_the_draft_is_the_rules_merge() -> None:
    """No model: the draft is what the rules merge (the file's final newline kept)."""
    assert merge_draft(EditRequest(FILE, "", update=UPDATE, mode="speculative", language="python")) == MERGED
    without_newline = EditRequest(FILE.rstrip("\n"), "", update=UPDATE, mode="speculative", language="python")
    assert merge_draft(without_newline) == MERGED.rstrip("\n")


def test_speculative_rewrite_is_ars_drafted_from_the_merge(default_engine) -> None:
    request = EditRequest(FILE, "", update=UPDATE, mode="ar", max_new_tokens=400, language="python")
    default_engine.forget_prompts()
    ar = default_engine.edit(request)
    default_engine.forget_prompts()
    spec = default_engine.edit(replace(request, mode="speculative"))
    assert spec.output_text == ar.output_text and spec.stop_reason == ar.stop_reason == "done"
    drafted = spec.breakdown["drafted_tokens"]
    assert drafted > 0 and 0 < spec.tokens.copied <= drafted
    assert spec.tokens.generated < ar.tokens.generated  # fewer forwards for the same text
    note = next(w for w in spec.warnings if w.startswith("the model rewrote the file"))
    assert f"{spec.tokens.copied} of {drafted} drafted tokens accepted" in note
    assert ("equals" if spec.output_text == MERGED else "differs from") in note
    assert not any("the model rewrote" in w for w in ar.warnings)


@pytest.mark.model  # the CLI loads the embedded model itself
def test_cli_speculative_apply_writes_the_models_rewrite(capsys, tmp_path: Path) -> None:
    """``apply --mode speculative``: the file written is ar's rewrite, and ``--json`` names the
    model's rewrite with its drafts (the verdict runs on it as on any apply)."""
    target, update = tmp_path / "shapes.py", tmp_path / "update.py"
    target.write_text(FILE)
    update.write_text(UPDATE)
    written = {}
    for mode in ("ar", "speculative"):
        out = tmp_path / f"{mode}.py"
        code = main(["apply", str(target), "--update", str(update), "--mode", mode, "--backend", "transformers",
                     "--max-new-tokens", "400", "--json", "--output", str(out)])
        summary = json.loads(capsys.readouterr().out)
        assert code == 0 and summary["written"] == [str(out)] and summary["syntax"] is not None
        written[mode] = (out.read_text(), summary)
    assert written["speculative"][0] == written["ar"][0]
    spec = written["speculative"][1]
    assert spec["mode"] == "speculative" and spec["breakdown"]["drafted_tokens"] > 0
    assert any(w.startswith("the model rewrote the file, drafted from the rules' merge") for w in spec["warnings"])
    assert target.read_text() == FILE
