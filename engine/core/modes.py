"""What each mode is, in one table: whoever dispatches on a mode (the engine's plan, the decoding
strategies, the apply's writers, the CLI's report) reads its :class:`ModeTraits` here instead of
comparing its name, so a mode is added or changed in one place.

``auto`` is not in the table: it stands for a concrete mode, which :func:`concrete` picks.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.choices import MODES, Mode

AUTO: Mode = "auto"
# What ``auto`` runs for an apply: the aligner's program without the model. Measured on 28
# held-out cases (docs/benchmarks.md#apply): the aligner merges 27, the model's program with the
# apply selector 1 (its line numbers are often off by a line); ``program`` runs the model with the
# aligner's program as its draft.
APPLY_AUTO_MODE: Mode = "aligner"


@dataclass(frozen=True)
class ModeTraits:
    """What a concrete mode is and needs."""

    needs_model: bool = True  # a model writes the result (False: the aligner's rules; no model is loaded)
    needs_logits: bool = False  # it reads each step's logits, which a server does not return: in process only
    uses_selector: bool = False  # it decodes on the span selector's copy of the model (an apply: the apply selector's)
    writes_text: bool = False  # the model writes the region's text; else a program of copies and gens
    given_program: bool = False  # it decodes the request's program instead of choosing one (measuring)
    apply_only: bool = False  # only an apply (a request with an update) runs it
    drafts_from_input: bool = False  # a text mode whose decode drafts from the input (verified in one forward)
    backend_generates: bool = False  # a text mode run by the backend's own generation (it reads nothing ahead)

    @property
    def text_drafted(self) -> bool:
        """A text mode that drafts (from the input, or the backend's prompt lookup): not plain ar."""
        return self.writes_text and (self.drafts_from_input or self.backend_generates)


TRAITS: dict[str, ModeTraits] = {
    "program": ModeTraits(uses_selector=True),
    "speculative": ModeTraits(writes_text=True, drafts_from_input=True),
    "ar": ModeTraits(writes_text=True),
    "pld": ModeTraits(writes_text=True, backend_generates=True),
    "forced": ModeTraits(needs_logits=True, uses_selector=True, given_program=True),
    "aligner": ModeTraits(needs_model=False, apply_only=True),
}
assert set(TRAITS) == set(MODES) - {AUTO}, "every concrete mode has its traits"


def traits(mode: str) -> ModeTraits:
    """The traits of a concrete ``mode`` (``auto`` resolved first: :func:`concrete`)."""
    if mode == AUTO:
        raise ValueError("auto stands for a concrete mode: resolve it first (engine.core.modes.concrete)")
    return TRAITS[mode]


def modes_where(**wanted: bool) -> tuple[str, ...]:
    """The concrete modes, in :data:`MODES`' order, whose traits have the ``wanted`` values."""
    return tuple(m for m in MODES if m != AUTO and all(getattr(TRAITS[m], k) == v for k, v in wanted.items()))


# A one-edit process (the CLI's ``edit``) runs a region of at most this many lines in ar under
# ``auto``, even with a span selector: there a program has at most one line to copy, and its fixed
# costs (a prompt 16 tokens longer, its tags' forwards, the first forwards of new shapes in a fresh
# process) outweigh it. Measured one-shot on llama.cpp, 5 alternated runs each
# (results/startup/tiny_regions_program_vs_ar.json): a 2-line Python fix took 1.06x ar's edit time
# in program mode (the same output); on one line the program copied the line and fixed nothing
# where ar fixed it (`def inc(x): return x - 1`), or both fixed nothing (a one-line JavaScript
# `isEven`). A warm process (the language server) has paid those costs and keeps program mode:
# 1.07x and 2.51x ar there (results/localize/small_edits.json).
TINY_REGION_LINES = 2


def concrete(mode: Mode, *, apply: bool, selector: bool, one_shot_lines: int | None = None) -> Mode:
    """``mode`` made concrete: ``auto`` runs :data:`APPLY_AUTO_MODE` for an apply, else program mode
    when the model has a span selector (``selector``), else speculative. Measured
    (docs/benchmarks.md, free family): with the shipped selector, program mode beats speculative on
    pass@1, exact match, collateral damage and time on HumanEvalFix-Python/JS and CanItEdit;
    without one, program mode is slower than ar and rarely finishes a working edit, and speculative
    is lossless with any model. ``one_shot_lines``: the region's line count when the process makes
    this one edit (the CLI): a region of at most :data:`TINY_REGION_LINES` lines then runs ar."""
    if mode != AUTO:
        return mode
    if apply:
        return APPLY_AUTO_MODE
    if not selector:
        return "speculative"
    if one_shot_lines is not None and one_shot_lines <= TINY_REGION_LINES:
        return "ar"
    return "program"


def needs_model(mode: Mode, apply: bool) -> bool:
    """Does a request in ``mode`` (``apply``: one with an update) need a model loaded? Only the
    aligner's merge does not, and only an apply runs it; the selector does not change that."""
    return traits(concrete(mode, apply=apply, selector=False)).needs_model
