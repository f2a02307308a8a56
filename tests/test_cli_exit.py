"""A one-edit command run as its own process ends as soon as its output is flushed
(engine.cli.exit_now): the exit status, the whole output and the written file are all there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_refused_edit_keeps_its_status_and_message(tmp_path: Path) -> None:
    run = cli("edit", str(tmp_path / "missing.py"), "-i", "Fix the bug.")
    assert run.returncode == 2
    assert "no such file" in " ".join(run.stderr.split())


def test_main_called_in_process_returns(tmp_path: Path, capsys) -> None:
    """Tests and embedding code call main(argv): it returns the status instead of ending the process."""
    from engine.cli import main

    assert main(["edit", str(tmp_path / "missing.py"), "-i", "Fix the bug."]) == 2


@pytest.mark.model
def test_an_edit_process_writes_its_file_and_its_whole_json(tmp_path: Path) -> None:
    path = tmp_path / "buggy_add.py"
    path.write_text((ROOT / "examples" / "buggy_add.py").read_text())
    run = cli("edit", str(path), "-i", "Fix the bug in add.", "--focus", "3", "--json", "--in-place")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["changed"] and result["written"]
    assert "return a + b" in path.read_text()
