"""The check runner (engine.candidates.check): ``{file}`` is a temporary copy in a mirror of the
file's folder, exit 0 passes, a timeout or a cancel kills the whole process group, secrets are
scrubbed from the environment, and the user's file and folder are never touched."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from engine.candidates.check import CheckSpec, run_check, scrubbed_env, trimmed

PY = sys.executable


def project(tmp_path: Path) -> Path:
    """A folder with a module that imports its sibling: the user's file is main.py."""
    (tmp_path / "helper.py").write_text("VALUE = 5\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "numbers.txt").write_text("1 2 3\n")
    main = tmp_path / "main.py"
    main.write_text("from helper import VALUE\nassert VALUE == 4\n")
    return main


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_file_is_a_temporary_copy_beside_linked_siblings(tmp_path: Path) -> None:
    main = project(tmp_path)
    before = snapshot(tmp_path)
    candidate = ("from helper import VALUE\nimport pathlib, sys\n"
                 "assert pathlib.Path(sys.argv[0]).parent.joinpath('data', 'numbers.txt').read_text() == '1 2 3\\n'\n"
                 "print('file', sys.argv[0])\nassert VALUE == 5\n")
    outcome = run_check(CheckSpec(f"{PY} {{file}}"), main, candidate)
    assert outcome.passed and outcome.exit_code == 0, outcome.output
    checked = outcome.output.split("file ", 1)[1].strip()
    assert checked != str(main) and Path(checked).name == "main.py"
    assert not Path(checked).parent.exists()  # the mirror is gone (links only: their targets stay)
    assert snapshot(tmp_path) == before  # the user's file and folder as they were


def test_a_failing_check_fails_with_its_output(tmp_path: Path) -> None:
    main = project(tmp_path)
    outcome = run_check(CheckSpec(f"{PY} {{file}}"), main, main.read_text())
    assert not outcome.passed and outcome.exit_code == 1
    assert "AssertionError" in outcome.output


def test_a_path_with_spaces_is_quoted(tmp_path: Path) -> None:
    folder = tmp_path / "my project"
    folder.mkdir()
    main = project(folder)
    assert run_check(CheckSpec(f"{PY} {{file}}"), main, "print('ok')\n").passed


def test_runs_in_the_given_folder(tmp_path: Path) -> None:
    main = project(tmp_path)
    workspace = tmp_path / "data"
    outcome = run_check(CheckSpec(f"{PY} -c 'import os; print(os.getcwd())'", cwd=workspace), main, "")
    assert outcome.output.strip() == str(workspace)
    default = run_check(CheckSpec(f"{PY} -c 'import os; print(os.getcwd())'"), main, "")
    assert default.output.strip() == str(tmp_path)


def test_secrets_are_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = project(tmp_path)
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SECRET", "DB_PASSWORD", "api_key_lower", "SERVED_BY"):
        monkeypatch.setenv(name, "hidden")
    monkeypatch.setenv("HARMLESS", "shown")
    outcome = run_check(CheckSpec("env", secret_env=("SERVED_BY",)), main, "")
    assert "HARMLESS=shown" in outcome.output
    assert "hidden" not in outcome.output
    assert scrubbed_env({"PATH": "/bin", "X_KEYS": "1"}) == {"PATH": "/bin"}


def _gone(pid: int) -> bool:
    """The process has ended (gone, or a zombie waiting for its new parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    main = project(tmp_path)
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    outcome = run_check(CheckSpec(f"sleep 30 & echo $! > {pid_file}; sleep 30", timeout_s=0.5), main, "")
    assert time.monotonic() - started < 5
    assert outcome.timed_out and not outcome.passed and "limit" in outcome.output
    assert _wait_gone(int(pid_file.read_text()))  # the shell's child went with it


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_a_cancel_kills_the_check_within_half_a_second(tmp_path: Path) -> None:
    main = project(tmp_path)
    pid_file = tmp_path / "child.pid"
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    outcome = run_check(CheckSpec(f"sleep 30 & echo $! > {pid_file}; wait"), main, "", cancel.is_set)
    assert outcome.cancelled and not outcome.passed
    assert outcome.seconds < 0.3 + 0.5
    assert _wait_gone(int(pid_file.read_text()))


def test_trimmed_keeps_the_tail() -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    assert trimmed(output, lines=3) == "line 97\nline 98\nline 99"
    assert len(trimmed("x" * 5000)) == 1500

