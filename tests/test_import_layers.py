"""The engine's imports point one way. The layer contracts themselves are import-linter's
(``[tool.importlinter]`` in pyproject.toml, run by ``make lint`` and by the test below); these tests
add what it does not check: the bottom modules reach no layer above (function-level imports
included; tests/test_import_cycles.py checks that no module comes back to itself), and the light
modules the language server imports at start-up load no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import ROOT, import_graph, imported_names, reachable

BOTTOM = ("engine.core.errors", "engine.core.lines", "engine.decoding.outcome", "engine.core.languages")


@pytest.mark.parametrize("bottom", BOTTOM)
def test_bottom_modules_import_no_layer_above(bottom):
    above = {"engine.api", "engine.decoding.run", "engine.runtime.load", "engine.runtime.loaded",
             "engine.runtime.backends"}
    assert not (reachable(import_graph("engine"), bottom) & above)


@pytest.mark.parametrize("first, then", [
    ("engine.runtime.backends", "engine.api"),
    ("engine.checks.syntax", "engine.api"),
    ("engine.runtime.load", "engine.runtime.backends"),
])
def test_light_modules_import_in_any_order_without_torch(first, then):
    """The language server imports these when it starts, long before a model loads."""
    code = f"import sys, {first}, {then}; assert 'torch' not in sys.modules, 'torch was imported'"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_reexports_keep_old_imports_working():
    from engine.api import EditError, language_for
    from engine.core.errors import EditError as BottomEditError
    from engine.decoding.program_decoder import DecodeOutcome
    from engine.runtime.backends import BackendError

    assert EditError is BottomEditError
    assert issubclass(BackendError, EditError)
    assert DecodeOutcome.__module__ == "engine.decoding.outcome"
    assert language_for("a/b.PY") == "python" and language_for("Makefile") == ""


def test_layer_contracts_hold():
    """import-linter's contracts (pyproject.toml): the layers, the product free of bench and
    training, the engine free of the language server."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:]


# What the language server may import: the engine's API and the parts it names (pyproject.toml's
# contract "the language server uses the engine's API ..."); every other part is forbidden there.
SERVER_MAY_IMPORT = {"engine.api", "engine.dispatch", "engine.candidates", "engine.doctor_report", "engine.settings",
                     "engine.verdict", "engine.core", "engine.workspace_apply"}


def test_every_part_of_the_engine_is_allowed_or_forbidden_to_the_language_server():
    """A new package of the engine must be placed on one side of the server's contract."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (server,) = [c for c in contracts if c.get("source_modules") == ["lsp_server"]]
    forbidden = set(server["forbidden_modules"])
    parts = {f"engine.{p.stem}" for p in (ROOT / "engine").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert parts - SERVER_MAY_IMPORT - forbidden == set()
    assert SERVER_MAY_IMPORT & forbidden == set()
    imported = {name for path in (ROOT / "lsp_server").rglob("*.py")
                for name in imported_names(path.read_text(encoding="utf-8"), "engine")}
    reached = {".".join(name.split(".")[:2]) for name in imported if not name.startswith("engine.decoding.events")}
    assert reached & forbidden == set()
