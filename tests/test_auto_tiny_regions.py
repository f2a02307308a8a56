"""The CLI's ``auto`` on a tiny region: ar where a program has at most one line to copy, program
mode from three lines on (engine.core.modes.TINY_REGION_LINES), through the real CLI and model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

pytestmark = [pytest.mark.model]


def edit_json(capsys, path: Path, *flags: str) -> dict:
    code = main(["edit", str(path), "-i", "Fix the bug.", "--backend", "transformers", "--json", *flags])
    out = capsys.readouterr().out
    assert code in (0, 8), out
    return json.loads(out)


@pytest.mark.parametrize("text, name, mode", [
    ("def inc(x): return x - 1\n", "inc.py", "ar"),
    ("def add(a, b):\n    return a - b\n", "add.py", "ar"),
    ("def add(a, b):\n    \"\"\"Return the sum.\"\"\"\n    return a - b\n", "add3.py", "program"),
])
def test_auto_picks_by_the_region_size(capsys, tmp_path: Path, text: str, name: str, mode: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert edit_json(capsys, path, "--max-new-tokens", "48")["mode"] == mode


def test_a_mode_asked_for_is_kept_on_a_tiny_region(capsys, tmp_path: Path) -> None:
    path = tmp_path / "inc.py"
    path.write_text("def inc(x): return x - 1\n")
    assert edit_json(capsys, path, "--mode", "program", "--max-new-tokens", "48")["mode"] == "program"


def test_a_tiny_selection_of_a_larger_file_runs_ar(capsys, tmp_path: Path) -> None:
    path = tmp_path / "three.py"
    path.write_text("def add(a, b):\n    \"\"\"Return the sum.\"\"\"\n    return a - b\n")
    assert edit_json(capsys, path, "--lines", "3-3", "--max-new-tokens", "48")["mode"] == "ar"
