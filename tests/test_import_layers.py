"""The core imports in one direction: errors and shared types at the bottom, then models and
backends, then the decoders, then the API. A circle between them made the import order matter
(``import engine.backends`` first used to pull in ``engine.api`` half-initialized)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOTTOM = ("engine.errors", "engine.outcome", "engine.languages")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The one circle that stays: the loader picks a backend module, and the backend builds the
# loader's LoadedModel. engine.models imports the backend modules inside functions (they load torch).
LAZY_EDGES = ("engine.models", "engine.backends.")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the engine modules its imports load, function-local ones included (they run on
    every edit, so a circle through them is still a circle), except the lazy edges above. A
    package's ``__init__`` counts: importing ``engine.backends.vllm`` runs ``engine.backends`` first."""
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


def test_core_modules_import_without_a_circle():
    """The core: engine/*.py and engine/backends/*.py (a circle may pass through other packages)."""
    graph = _import_graph()
    core = {_module_name(p) for p in [*(ROOT / "engine").glob("*.py"), *(ROOT / "engine" / "backends").glob("*.py")]}
    circles = sorted(name for name in core if name in _reachable(graph, name))
    assert not circles, f"module-level imports come back to these modules: {circles}"


@pytest.mark.parametrize("bottom", BOTTOM)
def test_bottom_modules_import_no_layer_above(bottom):
    above = {"engine.api", "engine.decode", "engine.models", "engine.backends"}
    assert not (_reachable(_import_graph(), bottom) & above)


@pytest.mark.parametrize("first, then", [
    ("engine.backends", "engine.api"),
    ("engine.syntax", "engine.api"),
    ("engine.models", "engine.backends"),
])
def test_light_modules_import_in_any_order_without_torch(first, then):
    """The language server imports these when it starts, long before a model loads."""
    code = f"import sys, {first}, {then}; assert 'torch' not in sys.modules, 'torch was imported'"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_reexports_keep_old_imports_working():
    from engine.api import EditError, language_for
    from engine.backends import BackendError
    from engine.errors import EditError as BottomEditError
    from engine.errors import ModelLoadError as BottomModelLoadError
    from engine.models import ModelLoadError
    from engine.program_decoder import DecodeOutcome

    assert EditError is BottomEditError and ModelLoadError is BottomModelLoadError
    assert issubclass(BackendError, EditError)
    assert DecodeOutcome.__module__ == "engine.outcome"
    assert language_for("a/b.PY") == "python" and language_for("Makefile") == ""
