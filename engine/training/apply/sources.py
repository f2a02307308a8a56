"""The files the apply selector's training cases are cut from, disjoint from the benchmark's
held-out sources (engine.bench.apply_cases: this repository's own code and three C files):

* Python: the standard library of the running interpreter (PSF license), its tests left out;
* TypeScript/JavaScript: the client's npm dependencies (vscode-client/node_modules, MIT-style
  licenses; present after ``npm ci`` there), minified bundles left out;
* C: the C sources and headers installed with Python packages (site-packages), the benchmark's
  three files left out.

Never the evaluation corpora (../shared/data).
"""

from __future__ import annotations

import site
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HELD_OUT_C = ("markupsafe/_speedups.c", "f2py/src/fortranobject.c", "libbacktrace/elf.c")
MAX_FILE_BYTES = 200_000  # generated tables and bundles are not code anyone edits


def _small(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size <= MAX_FILE_BYTES
    except OSError:
        return False


def python_files() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in stdlib.glob("**/*.py")
                  if _small(p) and not {"test", "tests", "site-packages", "idlelib", "lib2to3"} & set(p.parts))


def typescript_files() -> list[Path]:
    modules = ROOT / "vscode-client" / "node_modules"
    return sorted(p for pattern in ("**/*.js", "**/*.ts") for p in modules.glob(pattern)
                  if _small(p) and not p.name.endswith((".min.js", ".d.ts")) and "dist" not in p.parts)


def c_files() -> list[Path]:
    roots = {Path(p) for p in site.getsitepackages()}
    found = sorted(p for root in roots for pattern in ("**/*.c", "**/*.h") for p in root.glob(pattern))
    return [p for p in found if _small(p) and not any(str(p).endswith(h) for h in HELD_OUT_C)]


def training_files(language: str) -> list[Path]:
    """The language's training files, in a fixed order."""
    return {"python": python_files, "typescript": typescript_files, "c": c_files}[language]()
