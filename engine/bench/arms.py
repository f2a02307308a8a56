"""The arms of each benchmark family: which engine mode, drafting on or off, which model, which hint.

Forced family (every arm decodes the gold, so only the mechanism's cost differs):
  ``ar``, ``pld``, ``speculative``: the text arms, teacher-forced on the gold;
  ``program``: Copy-as-Decode, ``forced`` mode with the line-oracle program, undrafted
  (``draft=False``: the decoder as it was before drafting, every chosen token one step);
  ``program-drafted``: the same with ``draft=True``: the engine drafts the program's continuation
  and verifies it in the step's forward; under the teacher a drafted token is accepted while it
  equals the teacher's, and the verify forward is timed and counted as it is.
Free family (the model decides):
  ``ar``, ``pld``, ``speculative``: the text modes (base model, no hint);
  ``program``: program mode with the span selector (``Engine.load(selector=...)``), drafted;
  ``program-undrafted``: the same with ``draft=False``; drafting is lossless, so its output must
  equal ``program``'s (recorded per case as ``identical_to_program``);
  ``program-base``: program mode on the base model (selector ``none``), drafted;
  ``program-focus``: ``program`` with the focus hint, ``focus_line`` = the first input line the
  gold changes (what a user pointing at the bug gives; whole-file edits, so input lines are
  document lines). Hinted arms are reported as rows of their own, never pooled with unhinted ones.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arm:
    name: str
    mode: str  # the engine mode (forced text arms: the teacher-forced arm's name)
    draft: bool = True
    base: bool = False  # run on the base model even when the engine has a selector
    focus: bool = False  # request.focus_line = the first input line the gold changes

    @property
    def is_program(self) -> bool:
        return self.mode in ("program", "forced")


FORCED_ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("ar", "ar"), Arm("pld", "pld"), Arm("speculative", "speculative"),
    Arm("program", "forced", draft=False), Arm("program-drafted", "forced", draft=True),
)}
FREE_ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("ar", "ar"), Arm("pld", "pld"), Arm("speculative", "speculative"),
    Arm("program", "program"), Arm("program-undrafted", "program", draft=False),
    Arm("program-base", "program", base=True), Arm("program-focus", "program", focus=True),
)}
FAMILY_ARMS = {"forced": FORCED_ARMS, "free": FREE_ARMS}
DEFAULT_ARMS = {"forced": ("ar", "pld", "speculative", "program", "program-drafted"),
                "free": ("ar", "speculative", "program", "program-undrafted")}


class ArmError(ValueError):
    """An arm list the benchmark cannot run; the message lists the choices."""


def parse_arms(text: str | None, family: str) -> list[str]:
    """``"ar,program,..."`` -> validated arm names (default: the family's default arms)."""
    if family not in FAMILY_ARMS:
        raise ArmError(f"unknown family {family!r}; choose forced or free")
    names = list(DEFAULT_ARMS[family]) if not text else [a.strip() for a in text.split(",") if a.strip()]
    return check_arms(names, family)


def check_arms(names: list[str], family: str) -> list[str]:
    if family not in FAMILY_ARMS:
        raise ArmError(f"unknown family {family!r}; choose forced or free")
    known = FAMILY_ARMS[family]
    bad = [a for a in names if a not in known]
    if bad:
        raise ArmError(f"unknown {family}-family arm(s) {', '.join(bad)}; choose from {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ArmError(f"arm list {','.join(names)} names an arm twice")
    if "ar" not in names:
        raise ArmError("the arms must include ar: every speedup is measured against it")
    return names
