"""What each mode is and needs is one table (engine.core.modes): every concrete mode has its
traits, ``auto`` resolves the same way at every door, and outside the table no code compares a
mode's name."""

import re
from pathlib import Path

import pytest

from engine.core.choices import MODES
from engine.core.modes import APPLY_AUTO_MODE, TRAITS, concrete, modes_where, needs_model, traits

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("engine", "lsp_server")
LEFT_OUT = ("engine/core/modes.py", "engine/core/choices.py")
NAMES = "|".join(m for m in MODES)
FORBIDDEN = re.compile(
    rf"""\bmode\)?\s*(?:[!=]=|(?:not\s+)?in)\s*[\(\[{{]?\s*["'](?:{NAMES})["']"""   # mode == "forced", mode in ("ar", ...
    rf"""|["'](?:{NAMES})["']\s*[!=]=\s*[\w.]*mode\b"""                           # "ar" == result.mode
)


def offending_lines() -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in LEFT_OUT:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if FORBIDDEN.search(line):
                    found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_no_code_outside_the_table_compares_a_modes_name() -> None:
    assert offending_lines() == []


def test_the_grep_finds_what_it_looks_for() -> None:
    for line in ('if request.mode in ("program", "forced"):', 'mode == "auto"', "if mode != 'ar':",
                 'spec.mode not in ["pld"]', '"ar" == result.mode'):
        assert FORBIDDEN.search(line), line
    for line in ('if traits(mode).writes_text:', 'settings.editor.apply_mode != "stream"', 'arm == "aligner"',
                 'mode={"default": "ar"}', "if mode != AUTO:"):
        assert not FORBIDDEN.search(line), line


def test_every_concrete_mode_has_traits_and_auto_has_none() -> None:
    assert set(TRAITS) == set(MODES) - {"auto"}
    with pytest.raises(ValueError, match="resolve it first"):
        traits("auto")
    assert modes_where(writes_text=True) == ("speculative", "ar", "pld")
    assert modes_where(needs_model=False) == (APPLY_AUTO_MODE,) == ("aligner",)


def test_auto_is_resolved_one_way() -> None:
    assert concrete("auto", apply=True, selector=True) == concrete("auto", apply=True, selector=False) == "aligner"
    assert concrete("auto", apply=False, selector=True) == "program"
    assert concrete("auto", apply=False, selector=False) == "speculative"
    assert concrete("ar", apply=True, selector=True) == "ar"
    assert not needs_model("auto", apply=True) and needs_model("auto", apply=False) and needs_model("program", True)


def test_auto_runs_ar_on_a_tiny_region_in_a_one_edit_process() -> None:
    """A one-edit process (the CLI) runs a region of at most TINY_REGION_LINES lines in ar: a
    program has at most one line to copy there. A warm process passes no line count."""
    from engine.core.modes import TINY_REGION_LINES

    assert TINY_REGION_LINES == 2
    assert concrete("auto", apply=False, selector=True, one_shot_lines=1) == "ar"
    assert concrete("auto", apply=False, selector=True, one_shot_lines=2) == "ar"
    assert concrete("auto", apply=False, selector=True, one_shot_lines=3) == "program"  # the README's first edit
    assert concrete("auto", apply=False, selector=False, one_shot_lines=1) == "speculative"  # no selector: as before
    assert concrete("auto", apply=True, selector=True, one_shot_lines=1) == "aligner"
    assert concrete("program", apply=False, selector=True, one_shot_lines=1) == "program"  # asked for: kept
