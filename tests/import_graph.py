"""The import graph of a package, read from its source (no module is imported), for the tests
of how its modules depend on each other (tests/test_import_cycles.py, tests/test_import_layers.py).

An edge A -> B means that running A's imports loads B: every import statement counts, at module
level or inside a function (a function-level import runs on every call, so a circle through one
is still a circle), and so, in a module that imports by name (``import_module``), does a module
named in a string (a registry whose entries it imports; elsewhere such a string is prose or a
command line). Importing ``a.b.c`` loads ``a`` and ``a.b`` first, so they count too.
Imports under ``if TYPE_CHECKING:`` never run and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, package: str) -> set[str]:
    """The dotted names under ``package`` that ``source``'s imports (and strings) name."""
    top = package + "."
    names: set[str] = set()
    nodes = list(ast.walk(ast.parse(source)))
    by_name = any(isinstance(n, ast.Attribute) and n.attr == "import_module" or
                  isinstance(n, ast.alias) and n.name == "import_module" for n in nodes)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == package or node.module.startswith(top)):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name == package or alias.name.startswith(top))
        elif by_name and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith(top) and node.value.replace(".", "").replace("_", "").isalnum():
            names.add(node.value)
    return names


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` (a folder in ``root``) that importing it loads (itself left out)."""
    modules = {module_name(p, root): p for p in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        named = imported_names(path.read_text(encoding="utf-8"), package)
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        first = {".".join(t.split(".")[:i]) for t in named for i in range(1, t.count(".") + 1)}
        graph[name] = {t for t in named | (first - own) if t in modules and t != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: each strongly connected set of two or more modules, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: a deep package must not hit the recursion limit
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(sorted(members))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)
