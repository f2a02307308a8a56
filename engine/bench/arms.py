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
  ``program-near``: ``program`` with the focus hint on a cursor near the bug (the first input
  line the gold changes moved by a seeded offset in -3..+3: :mod:`engine.evaluation.focus`): what a
  user's AI fix sends, the hinted headline;
  ``program-cursor-on``: ``program`` with the cursor exactly on the first line the gold changes,
  as a user who clicks the bug (focus ``on``); users' AI fixes mix it with ``near``;
  ``program-oracle``: ``program`` with the focus exactly on the first line the gold changes, the
  upper bound it was first measured as (called ``program-focus`` before; old result files are read with the
  new name). ``program`` itself has no hint (focus ``none``). Whole-file edits, so input lines are
  document lines. Hinted arms are reported as rows of their own, never pooled with unhinted ones.
  Program arms run as users get them: with the localizer (engine/decoding/localize.py: the hint goes to
  the least natural code line, near the cursor if there is one) and the no-op deviation guarding
  that line (``focus_policy="guard"``). To measure those, ``-unlocalized`` arms run without the
  localizer (``EditRequest.localize=False``: the hint is exactly the focus sent, or none),
  ``-nonoop`` arms without the no-op deviation (``noop_deviation=False``), ``-keep`` arms with
  the ``keep`` policy (a cursor on code stays, guarded only where the localizer
  agrees; no focus: unguarded) and ``-moved`` arms with the first policy (``focus_policy="move"``).
  ``-guard`` arms name the ``guard`` policy explicitly (for runs that compare it with ``keep`` and ``hold``),
  ``-hold`` arms run ``guard`` that leaves a cursor close to the best line where it is (the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.choices import DEFAULT_FOCUS_POLICY
from engine.core.modes import traits


@dataclass(frozen=True)
class Arm:
    name: str
    mode: str  # the engine mode (forced text arms: the teacher-forced arm's name)
    draft: bool = True
    base: bool = False  # run on the base model even when the engine has a selector
    focus: str = "none"  # none | near | on | oracle (engine.evaluation.focus)
    localize: bool = True  # EditRequest.localize (engine/decoding/localize.py)
    noop: bool = True  # EditRequest.noop_deviation (engine/decoding/noop_gen.py)
    policy: str = DEFAULT_FOCUS_POLICY  # EditRequest.focus_policy (engine/decoding/localize.py)

    @property
    def hinted(self) -> bool:
        return self.focus != "none"

    @property
    def is_program(self) -> bool:
        return not traits(self.mode).writes_text


FORCED_ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("ar", "ar"), Arm("pld", "pld"), Arm("speculative", "speculative"),
    Arm("program", "forced", draft=False), Arm("program-drafted", "forced", draft=True),
)}
FREE_ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("ar", "ar"), Arm("pld", "pld"), Arm("speculative", "speculative"),
    Arm("program", "program"), Arm("program-undrafted", "program", draft=False),
    Arm("program-base", "program", base=True), Arm("program-near", "program", focus="near"),
    Arm("program-oracle", "program", focus="oracle"),
    Arm("program-unlocalized", "program", localize=False),
    Arm("program-near-unlocalized", "program", focus="near", localize=False),
    Arm("program-near-nonoop", "program", focus="near", noop=False),
    Arm("program-near-unlocalized-nonoop", "program", focus="near", localize=False, noop=False),
    Arm("program-oracle-unlocalized", "program", focus="oracle", localize=False),
    Arm("program-near-moved", "program", focus="near", policy="move"),
    Arm("program-oracle-moved", "program", focus="oracle", policy="move"),
    Arm("program-keep", "program", policy="keep"),
    Arm("program-near-keep", "program", focus="near", policy="keep"),
    Arm("program-oracle-keep", "program", focus="oracle", policy="keep"),
    Arm("program-guard", "program", policy="guard"),
    Arm("program-near-guard", "program", focus="near", policy="guard"),
    Arm("program-oracle-guard", "program", focus="oracle", policy="guard"),
    Arm("program-cursor-on", "program", focus="on"),
    Arm("program-cursor-on-keep", "program", focus="on", policy="keep"),
    Arm("program-cursor-on-guard", "program", focus="on", policy="guard"),
    Arm("program-cursor-on-hold", "program", focus="on", policy="hold"),
    Arm("program-near-hold", "program", focus="near", policy="hold"),
    Arm("program-hold", "program", policy="hold"),
)}
LEGACY_NAMES = {"program-focus": "program-oracle"}  # results written before the near/oracle split
FAMILY_ARMS = {"forced": FORCED_ARMS, "free": FREE_ARMS}
DEFAULT_ARMS = {"forced": ("ar", "pld", "speculative", "program", "program-drafted"),
                "free": ("ar", "speculative", "program", "program-undrafted")}


def upgrade_names(data: dict[str, Any]) -> dict[str, Any]:
    """A results record with old arm names renamed in place (summary, settings, per-case runs),
    so reports and merges of old files read ``program-focus`` as the ``program-oracle`` it was."""
    def rename(mapping: dict[str, Any]) -> dict[str, Any]:
        return {LEGACY_NAMES.get(k, k): v for k, v in mapping.items()}

    if isinstance(data.get("arms"), dict):
        for old in set(data["arms"]) & set(LEGACY_NAMES):
            if isinstance(data["arms"][old], dict):
                data["arms"][old].update(focus=FREE_ARMS[LEGACY_NAMES[old]].focus, hinted=True)
        data["arms"] = rename(data["arms"])
    settings = data.get("settings") or {}
    if isinstance(settings.get("arms"), list):
        settings["arms"] = [LEGACY_NAMES.get(a, a) for a in settings["arms"]]
    for rec in data.get("per_case") or []:
        if isinstance(rec.get("arms"), dict):
            rec["arms"] = rename(rec["arms"])
        if "order" in rec:
            rec["order"] = [LEGACY_NAMES.get(a, a) for a in rec["order"]]
        if "focus_line" in rec and "focus" not in rec:
            rec["focus"] = {"oracle": rec["focus_line"]}
    return data


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
    names = [LEGACY_NAMES.get(a, a) for a in names]
    bad = [a for a in names if a not in known]
    if bad:
        raise ArmError(f"unknown {family}-family arm(s) {', '.join(bad)}; choose from {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ArmError(f"arm list {','.join(names)} names an arm twice")
    if "ar" not in names and family == "forced":
        raise ArmError("the forced arms must include ar: every speedup is measured against it")
    return names
