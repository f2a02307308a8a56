"""What runs is what the import contracts say: the product's commands load no benchmark, training
or evaluation module at run time (the CLI imports subcommands by name, which import-linter cannot
follow, so this runs them and reads ``sys.modules``)."""

from __future__ import annotations

import json
import os
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


# Run the CLI's edit with ARGV twice in one process (the first may convert the GGUF's tokenizer
# into the start-up cache, which needs transformers), then say whether torch or transformers was
# imported by the second, run in a fresh process.
HEAVY = """
import json, sys
from engine.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "xgrammar": "xgrammar" in sys.modules}))
"""


def heavy_imports(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", HEAVY, *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.model
@pytest.mark.parametrize("mode", ["ar", "speculative", "pld"])
def test_a_text_edit_on_llamacpp_imports_neither_torch_nor_transformers(tmp_path: Path, mode: str) -> None:
    """The start a headless edit pays: a text mode on llama.cpp decodes numpy logits and reads the
    saved tokenizer with ``tokenizers`` alone (engine.runtime.logits, engine.runtime.plain_tokenizer)."""
    target = tmp_path / "add.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    argv = ("edit", str(target), "-i", "Fix the bug", "--focus", "2", "--backend", "llamacpp", "--mode", mode,
            "--threads", "1", "--max-new-tokens", "24")
    heavy_imports(*argv)  # a first run saves the tokenizer's copy when none is saved yet
    answer = heavy_imports(*argv)
    assert answer["code"] in (0, 3, 4, 5, 8)  # an edit ran (its verdict aside)
    assert not answer["torch"] and not answer["transformers"] and not answer["xgrammar"], answer


@pytest.mark.model
def test_program_mode_on_llamacpp_still_imports_what_it_needs(tmp_path: Path) -> None:
    """The grammar (xgrammar, which imports torch and transformers) comes with program mode."""
    target = tmp_path / "add.py"
    target.write_text("def add(a, b):\n    c = 1\n    return a - b\n")
    answer = heavy_imports("edit", str(target), "-i", "Fix the bug", "--focus", "3", "--backend", "llamacpp",
                           "--mode", "program", "--threads", "1", "--max-new-tokens", "24")
    assert answer["code"] in (0, 3, 4, 5, 8) and answer["xgrammar"] and answer["torch"], answer
