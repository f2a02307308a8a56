"""The engine's imports point one way. The layer contracts themselves are import-linter's
(``[tool.importlinter]`` in pyproject.toml, run by ``make lint`` and by the test below); these tests
add what it does not check: no circle within a layer (a circle made the import order matter), and
the light modules the language server imports at start-up load no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOTTOM = ("engine.core.errors", "engine.core.lines", "engine.decoding.outcome", "engine.core.languages")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The one circle that stays: the loader picks a backend module, and the backend builds the
# loader's LoadedModel. engine.runtime.models imports the backend modules inside functions (they load torch).
LAZY_EDGES = ("engine.runtime.models", "engine.runtime.backends.")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the engine modules its imports load, function-local ones included (they run on
    every edit, so a circle through them is still a circle), except the lazy edges above. A
    package's ``__init__`` counts: importing ``engine.runtime.backends.vllm`` runs ``engine.runtime.backends`` first."""
    modules = {_module_name(p): p for p in (ROOT / "engine").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("engine"):
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.startswith("engine"))
        loaded = {".".join(t.split(".")[:i]) for t in targets for i in range(2, t.count(".") + 2)}
        graph[name] = {t for t in loaded if t in modules and t != name
                       and not (name == LAZY_EDGES[0] and t.startswith(LAZY_EDGES[1]))}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


PRODUCT = ("core", "language", "checks", "runtime", "decoding")


def test_product_modules_import_without_a_circle():
    """Every module of the product's layers (a circle may pass through other packages)."""
    graph = _import_graph()
    core = {_module_name(p) for layer in PRODUCT for p in (ROOT / "engine" / layer).rglob("*.py")}
    core |= {_module_name(p) for p in (ROOT / "engine").glob("*.py")}
    circles = sorted(name for name in core if name in _reachable(graph, name))
    assert not circles, f"module-level imports come back to these modules: {circles}"


@pytest.mark.parametrize("bottom", BOTTOM)
def test_bottom_modules_import_no_layer_above(bottom):
    above = {"engine.api", "engine.decoding.run", "engine.runtime.models", "engine.runtime.backends"}
    assert not (_reachable(_import_graph(), bottom) & above)


@pytest.mark.parametrize("first, then", [
    ("engine.runtime.backends", "engine.api"),
    ("engine.checks.syntax", "engine.api"),
    ("engine.runtime.models", "engine.runtime.backends"),
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
