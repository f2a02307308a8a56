"""No module of the engine or of the language server comes back to itself through its imports,
function-level ones included (tests/import_graph.py says what counts): with a circle, which
module imports first decides whether a name exists yet, and neither side can be read alone."""

from __future__ import annotations

import pytest
from import_graph import cycles, import_graph, imported_names


@pytest.mark.parametrize("package", ["engine", "lsp_server"])
def test_no_import_cycle(package):
    found = cycles(import_graph(package))
    assert not found, "import cycles (each line: modules that import each other, directly or not):\n" + \
        "\n".join(" <-> ".join(members) for members in found)


def test_a_cycle_is_found_and_named():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "p.e": set()}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    assert cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_every_import_counts():
    source = '''
import importlib
import p.top
from p.pkg import mod
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from p.typed import T
else:
    from p.fallback import F
def f():
    from p.lazy import g
REGISTRY = {"x": "p.registered.module", "prose": "p.not a module name"}
def load(name):
    return importlib.import_module(REGISTRY[name])
'''
    assert imported_names(source, "p") == {"p.top", "p.pkg", "p.pkg.mod", "p.typed", "p.typed.T", "p.fallback",
                                           "p.fallback.F", "p.lazy", "p.lazy.g", "p.registered.module"}
    # Without import_module a module name in a string is prose or a command line (python -m p.cli).
    assert imported_names('ARGS = ["-m", "p.cli"]\n', "p") == set()


def test_a_package_that_imports_its_modules_makes_no_cycle_with_them(tmp_path):
    """``p/__init__.py`` importing ``p.a``, which imports ``p.b``: importing ``p.a`` loads ``p``
    first, but ``p.a`` runs inside that import, not before it. A module that imports ``p`` itself
    by name depends on what ``p`` defines by then: that is a cycle."""
    package = tmp_path / "p"
    package.mkdir()
    (package / "__init__.py").write_text("from p.a import A\n")
    (package / "a.py").write_text("from p.b import B\nA = B\n")
    (package / "b.py").write_text("B = 1\n")
    graph = import_graph("p", tmp_path)
    assert graph == {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": set()} and cycles(graph) == []
    (package / "b.py").write_text("from p import A\nB = 1\n")
    assert cycles(import_graph("p", tmp_path)) == [["p", "p.a", "p.b"]]
