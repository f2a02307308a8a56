"""A wheel built from this repository carries what an installed engine reads at run time: both
shipped selector adapters, whole. An editable install reads them from the checkout, so only a
built wheel shows a file the package data leaves out."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SELECTORS = ROOT / "engine" / "runtime" / "selector"


def _shipped_adapter_files() -> set[str]:
    """Every file of every adapter folder under engine/runtime/selector, as wheel paths."""
    return {path.relative_to(ROOT).as_posix() for folder in SELECTORS.iterdir() if folder.is_dir()
            and (folder / "adapter_config.json").exists() for path in folder.iterdir() if path.is_file()}


@pytest.mark.slow
def test_a_built_wheel_holds_both_selector_adapters(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("engine", "lsp_server"):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("copy_as_decode-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _shipped_adapter_files()
    assert {p.split("/")[3] for p in expected} >= {"smollm2-135m", "smollm2-135m-apply"}
    assert expected - names == set()
