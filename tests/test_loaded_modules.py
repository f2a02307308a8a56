"""What runs is what the import contracts say: the product's commands load no benchmark, training
or evaluation module at run time (the CLI imports subcommands by name, which import-linter cannot
follow, so this runs them and reads ``sys.modules``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OFF_LIMITS = ("engine.bench", "engine.training", "engine.evaluation")
# Run the CLI with ARGV, then print the engine modules it loaded.
PROBE = """
import json, sys
from engine.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("engine", "lsp_server"))}))
"""


def loaded(*argv: str) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, timeout=600)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["code"], answer["modules"]


def off_limits(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(OFF_LIMITS)]


def test_edit_loads_no_bench_training_or_evaluation_module(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("")  # answered without a model: the command's whole import path, no decode
    code, modules = loaded("edit", str(empty), "-i", "Fix the bug")
    assert code == 0 and "engine.commands.edit" in modules
    assert off_limits(modules) == []
    assert "engine.commands.bench" not in modules


@pytest.mark.parametrize("command", ["serve", "serve-openai"])
def test_the_servers_load_no_bench_training_or_evaluation_module(command: str) -> None:
    code, modules = loaded(command, "--help")
    assert code == 0 and off_limits(modules) == []


@pytest.mark.model
def test_a_real_edit_loads_no_bench_training_or_evaluation_module() -> None:
    code, modules = loaded("edit", "examples/buggy_add.py", "-i", "Fix the bug in add.", "--mode", "program",
                           "--focus", "3", "--max-new-tokens", "48", "--threads", "1")
    assert code in (0, 3, 4, 5, 8) and "engine.decoding.run" in modules
    assert off_limits(modules) == []


def test_doctor_loads_no_bench_training_or_evaluation_module(tmp_path: Path) -> None:
    code, modules = loaded("doctor", str(tmp_path), "--model", str(tmp_path / "missing.gguf"))
    assert code == 2 and "engine.commands.doctor" in modules
    assert off_limits(modules) == []


@pytest.mark.model
def test_a_real_doctor_loads_no_bench_training_or_evaluation_module(tmp_path: Path) -> None:
    code, modules = loaded("doctor", str(tmp_path))
    assert code == 0 and "engine.runtime.probe" in modules
    assert off_limits(modules) == []


def test_apply_runs_without_the_edit_commands_code(tmp_path: Path) -> None:
    """``apply`` shares the file commands' report and files (engine.commands.report, .files), not
    the edit command's internals; the aligner's merge loads no decoder either."""
    target, update = tmp_path / "f.py", tmp_path / "u.py"
    target.write_text("def f(x):\n    return x\n")
    update.write_text("def f(x):\n    return x + 1\n")
    code, modules = loaded("apply", str(target), "--update", str(update))
    assert code == 0 and "engine.commands.apply" in modules and "engine.commands.report" in modules
    assert "engine.commands.edit" not in modules and "engine.decoding.run" not in modules
    assert off_limits(modules) == []
