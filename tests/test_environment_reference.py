"""Every environment variable the project reads is declared once (engine/core/environment.py)
and so documented in docs/configuration.md, whose committed text tests/test_settings_schema.py
compares with the generated one."""

from __future__ import annotations

import re
from pathlib import Path

from engine.core.environment import VARIABLES

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"COPY_AS_DECODE_[A-Z0-9_]*[A-Z0-9]")


def names_read() -> dict[str, Path]:
    """Each ``COPY_AS_DECODE_`` name in the engine, the language server, the scripts and the
    Makefile, besides the declarations themselves, with one file that holds it."""
    declarations = ROOT / "engine" / "core" / "environment.py"
    files = [ROOT / "Makefile", *(p for folder in ("engine", "lsp_server", "scripts") for p in (ROOT / folder).rglob("*")
                                  if p.suffix in (".py", ".sh") and p != declarations)]
    return {name: path for path in files for name in NAME.findall(path.read_text(encoding="utf-8"))}


def test_every_variable_read_is_declared() -> None:
    undeclared = {name: str(path.relative_to(ROOT)) for name, path in names_read().items() if name not in VARIABLES}
    assert not undeclared, f"declare these in engine/core/environment.py: {undeclared}"


def test_every_declared_variable_is_read_and_documented() -> None:
    read = names_read()
    reference = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert [name for name in VARIABLES if name not in read] == []
    assert [name for name in VARIABLES if f"| `{name}` |" not in reference] == []
