"""`copy-as-decode edit`: exit codes and messages for bad input, and one real edit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

BUGGY = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["edit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_missing_file(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.py"), "-i", "Fix it")
    assert code == 2 and "no such file" in err


def test_undecodable_file(capsys, tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    code, _, err = run(capsys, str(path), "-i", "Fix it")
    assert code == 2 and "not UTF-8" in err


def test_file_over_the_size_limit(capsys, tmp_path: Path) -> None:
    path = tmp_path / "huge.py"
    path.write_text("x = 1\n" * 6000)
    code, _, err = run(capsys, str(path), "-i", "Fix it")
    assert code == 2 and "too large" in err


@pytest.mark.parametrize("spec", ["5-2", "1-99", "a-b"])
def test_bad_line_range(capsys, tmp_path: Path, spec: str) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--lines", spec)
    assert code == 2 and "line" in err.lower()


def test_model_that_fails_to_load(capsys, tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--model", str(tmp_path / "missing.gguf"))
    assert code == 2 and "missing.gguf" in err and "not found" in err


def test_real_edit_writes_output_and_json(capsys, tmp_path: Path, default_engine) -> None:
    from engine.api import EditRequest

    path = tmp_path / "add.py"
    path.write_text(BUGGY)
    out = tmp_path / "fixed.py"
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug in add.", "--mode", "ar", "--max-new-tokens", "48",
                          "--output", str(out), "--json")
    assert code == 0
    summary = json.loads(stdout)
    expected = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="ar", max_new_tokens=48,
                                               language="python"))
    assert out.read_text() == expected.output_text
    assert summary["mode"] == "ar" and summary["tokens"]["generated"] == expected.tokens.generated
    assert path.read_text() == BUGGY  # --output never touches the input file


def test_in_place_keeps_original_on_error(capsys, tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, _ = run(capsys, str(path), "-i", "Fix it", "--in-place", "--model", str(tmp_path / "x.gguf"))
    assert code == 2 and path.read_text() == BUGGY
