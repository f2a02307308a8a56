"""The benchmark's held-out apply cases: made by engine.training.apply.updates (every update
style) from files no training case is cut from: this repository's own sources as of a pinned
commit (engine.bench.pinned: Python: engine/; TypeScript: vscode-client/), read from git so that
a change to the code never changes the cases it is measured on, and, for a brace language more,
the C sources shipped inside installed packages with BSD licenses (MarkupSafe's speedups, NumPy's
f2py, libbacktrace in tvm-ffi); a size larger than one source file is several files of the
language joined. Never the evaluation corpora. A checkout without the pinned commit (a shallow
clone) has no Python or TypeScript cases: :func:`source_files` raises
engine.bench.pinned.PinnedSourceMissing, which says so.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterator

from engine.bench.pinned import pinned_files
from engine.training.apply.updates import STYLES, ApplyCase, SourceText
from engine.training.apply.updates import make_case as make_case_from

LANGUAGES = ("python", "typescript", "c")
SIZES = (20, 60, 250, 1000, 2000)
TYPESCRIPT_FOLDERS = ("vscode-client/src", "vscode-client/test")
C_SOURCES = (("markupsafe", "_speedups.c"), ("numpy", "f2py/src/fortranobject.c"),
             ("tvm_ffi", "3rdparty/libbacktrace/elf.c"))

__all__ = ["ApplyCase", "LANGUAGES", "SIZES", "STYLES", "held_out", "make_case", "source_files"]


def source_files(language: str) -> list[SourceText]:
    """The files a language's cases are cut from, in a fixed order."""
    if language == "python":
        return list(pinned_files("engine", ".py"))
    if language == "typescript":
        return [f for folder in TYPESCRIPT_FOLDERS for f in pinned_files(folder, ".ts") if str(f.path.parent) == folder]
    out: list[SourceText] = []
    for package, rel in C_SOURCES:
        spec = importlib.util.find_spec(package)
        for where in (spec.submodule_search_locations or []) if spec else []:
            path = Path(where) / rel
            if path.is_file():
                out.append(path)
    return out


def make_case(language: str, style: str, size: int, seed: int) -> ApplyCase | None:
    """One held-out case (engine.training.apply.updates.make_case over :func:`source_files`)."""
    return make_case_from(source_files(language), language, style, size, seed)


def held_out(per_style: int = 3, seed: int = 0) -> Iterator[ApplyCase]:
    """The benchmark's cases: ``per_style`` cases of every style, the languages and sizes taking
    turns (seeded; a case the sources cannot give is tried at the next seed)."""
    turn = 0
    for style in STYLES:
        for i in range(per_style):
            language, size = LANGUAGES[turn % len(LANGUAGES)], SIZES[turn % len(SIZES)]
            turn += 1
            for attempt in range(20):
                case = make_case(language, style, size, seed * 1000 + i * 20 + attempt)
                if case is not None:
                    yield case
                    break
