"""Python functions from the running interpreter's standard library (PSF-2.0).

Every module-level function and method (methods dedented) of every ``.py`` file under
``sysconfig.get_paths()["stdlib"]``, test suites, ``site-packages`` and demo folders excluded,
in sorted path order. Decorators are not part of a function's text: it starts at its ``def`` line.
"""

from __future__ import annotations

import ast
import platform
import sysconfig
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

from engine.training.synth.functions import SourceFunction, size_ok

LICENSE = "PSF-2.0"
_SKIP_PARTS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "turtledemo",
               "lib2to3", "pydoc_data", "ensurepip", "config-3"}


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def package_name() -> str:
    return f"python-stdlib-{platform.python_version()}"


def stdlib_files(root: Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files worth mining, sorted by their path relative to ``root``."""
    root = root or stdlib_dir()
    files = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if not any(part in _SKIP_PARTS or part.startswith("config-") for part in parts[:-1]):
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _defs(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods of (nested) classes, with their qualified names."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop(0)
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
            elif isinstance(child, ast.ClassDef):
                stack.append((prefix + child.name + ".", child))


def function_source(lines: list[str], node: ast.AST) -> str:
    """``ast.get_source_segment(padded=True)`` of ``node``, dedented, on just its lines (O(function), not O(file))."""
    chunk = "".join(lines[node.lineno - 1: node.end_lineno])
    local = SimpleNamespace(lineno=1, end_lineno=node.end_lineno - node.lineno + 1, col_offset=node.col_offset,
                            end_col_offset=node.end_col_offset)
    segment = ast.get_source_segment(chunk, local, padded=True) or ""
    return textwrap.dedent(segment).rstrip("\n") + "\n"


def functions_in_file(path: Path, file_id: str, package: str) -> list[SourceFunction]:
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    out = []
    for name, node in _defs(tree):
        n_lines = node.end_lineno - node.lineno + 1
        if not 4 <= n_lines <= 40:
            continue
        code = function_source(lines, node)
        if "\t" in code or not size_ok(code):
            continue
        try:
            ast.parse(code)
        except SyntaxError:
            continue
        out.append(SourceFunction(code=code, language="python", name=name, file=file_id, package=package,
                                  license=LICENSE))
    return out


def python_functions(root: Path | None = None) -> list[SourceFunction]:
    """Every standard-library function that passes the size filter, in a deterministic order."""
    root = root or stdlib_dir()
    package = package_name()
    out: list[SourceFunction] = []
    for path in stdlib_files(root):
        out.extend(functions_in_file(path, f"{package}/{path.relative_to(root).as_posix()}", package))
    return out
