"""One edit request: what every front door (CLI, language server, HTTP) gives the engine and
every decoder reads. It lives below the API so decoding can type it, and its choice fields use
the aliases of :mod:`engine.core.choices` that the settings schema uses too.

The request-level settings (:data:`REQUEST_SETTINGS`) are settings whose flat name
(:attr:`engine.settings.Spec.name`) is a field of :class:`EditRequest`, of the same type;
:meth:`EditRequest.from_settings` copies them, so a front door cannot forget one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.choices import (
    DEFAULT_FOCUS_POLICY,
    FOCUS_POLICIES,
    MODES,
    VERIFY_RULES,
    FocusPolicy,
    Mode,
    PromptStyle,
    Verify,
)
from engine.core.errors import EditError
from engine.core.lines import split_lines
from engine.core.modes import AUTO, concrete, traits
from engine.language.program import Program
from engine.settings import DEFAULTS, Settings

MAX_INPUT_CHARS = 200_000
MAX_INPUT_LINES = 5_000
MAX_UPDATE_CHARS = MAX_INPUT_CHARS  # an apply's update: at most as large as an input
MAX_UPDATE_LINES = MAX_INPUT_LINES
# The settings every edit request carries (a setting's flat name is the EditRequest field).
REQUEST_SETTINGS: tuple[str, ...] = ("mode", "max_new_tokens", "context_lines", "prompt_style", "verify",
                                     "apply_window_lines", "apply_max_lines")


@dataclass
class EditRequest:
    """One edit.

    ``mode`` (default: the setting's, ``auto``): ``auto`` runs the engine's best mode for its model
    (:func:`engine.core.modes.concrete`); what each mode is and needs: engine.core.modes.
    ``text`` is the whole document; ``lines`` (1-based, inclusive) limits the edit to a region,
    the rest is shown to the model as read-only context (``context_lines`` on each side).
    ``program`` is only for ``mode="forced"``: the program to decode instead of the model's choice.
    ``language`` tags the code fences of the prompt (e.g. "python"); see ``language_for``.
    ``monotonic`` (program mode): each line copy must start after the previous one ended.
    ``token_copies`` (program mode): also allow ``<copy tokens="a-b"/>``.
    ``focus_line`` (1-based, document coordinates): where the user pointed (cursor line or
    diagnostic); the prompt says "The problem is at or near line K" when it lies in the region.
    ``prompt_style`` (program mode): ``auto`` uses the short selector prompt when the program-mode
    model carries a trained selector adapter, the few-shot prompt otherwise; ``few-shot``/``selector`` force one.
    ``draft`` (program and forced modes): draft the program's continuation from the input and
    verify it in the step's forward (lossless: the same program, fewer forwards).
    ``temperature`` > 0 samples (seeded by ``seed``) instead of greedy; ``logit_bias`` adds to the
    logits of the given token ids before the grammar mask (program mode).
    ``localize`` (program mode, with a span selector): without a focus, point the hint at the
    region line the model finds least natural; with one, at the likeliest line near it
    (engine/decoding/localize.py). ``noop_deviation`` (program mode): a gen that writes the user's focus line
    back unchanged deviates (engine/decoding/noop_gen.py). Both on by default; off to measure without them.
    ``focus_policy`` (with ``localize``; engine.decoding.localize.plan_focus): ``hold`` (the default) is
    ``guard`` except that a focus on code about as likely as the best line near it stays as under
    ``keep``; ``guard`` puts the hint on the localizer's likeliest line (near the focus, if any) and
    the no-op deviation guards it there; ``keep`` keeps a focus on a code line and guards it only
    where the localizer agrees; ``move`` moves it to the likeliest line unguarded. The benchmarks'
    ``-keep`` and ``-moved`` arms measure the others.
    ``verify`` (speculative mode): how a verify forward accepts a draft (engine.core.choices.Verify).
    ``update`` (set: the request is an apply, engine.apply): a change written elsewhere (a chat
    model's answer, with ``... existing code ...`` marker comments or without) to merge into the
    region; ``instruction`` may then be empty. ``partial`` (an apply): write what could be placed
    when some of the update's chunks could not (they are listed in ``EditResult.unplaced``);
    without it such an apply writes nothing. An apply in ``aligner`` mode (what ``auto`` runs for
    one) is the aligner's program, resolved without the model (engine.apply.job). Where its rules
    leave a choice, only an apply asked in ``auto`` lets a user's own model decide; one asked in
    ``aligner`` is the fixed rule's (engine.dispatch.ModelFree.needs_choice). ``asked_mode``: an
    apply's mode as asked, kept when ``mode`` is made concrete (engine.dispatch.resolved); None:
    ``mode`` is as asked (:attr:`asked`).
    ``apply_window_lines``: file lines the model reads on each side of a change
    (engine.apply.windows); ``apply_max_lines``: the longest file
    (or region) an apply may merge into.
    """

    text: str
    instruction: str
    lines: tuple[int, int] | None = None
    mode: Mode = DEFAULTS.edit.mode
    max_new_tokens: int = DEFAULTS.edit.max_new_tokens
    context_lines: int = DEFAULTS.edit.context_lines
    language: str = ""
    token_copies: bool = False
    monotonic: bool = True
    temperature: float = 0.0
    seed: int = 0
    logit_bias: dict[int, float] | None = None
    program: Program | None = None
    focus_line: int | None = None
    prompt_style: PromptStyle = DEFAULTS.edit.prompt_style
    draft: bool = True
    localize: bool = True
    noop_deviation: bool = True
    focus_policy: FocusPolicy = DEFAULT_FOCUS_POLICY
    verify: Verify = DEFAULTS.edit.verify
    update: str | None = None
    partial: bool = False
    apply_window_lines: int = DEFAULTS.apply.window_lines
    apply_max_lines: int = DEFAULTS.apply.max_lines
    asked_mode: Mode | None = None

    @classmethod
    def from_settings(cls, settings: Settings, text: str, instruction: str, **given: Any) -> EditRequest:
        """The validated request for ``text`` under ``settings``: every request-level setting
        (:data:`REQUEST_SETTINGS`) from ``settings``, unless ``given`` names it with a value;
        ``given``'s other fields as they are (a None there means "not given": the field's default).
        Raises :class:`EditError` saying why the engine would refuse it."""
        chosen = {name: settings.value(name) for name in REQUEST_SETTINGS}
        chosen.update({name: value for name, value in given.items() if value is not None})
        request = cls(text=text, instruction=instruction, **chosen)
        request.validate()
        return request

    def region_bounds(self) -> tuple[int, int]:
        """0-based [start, end) line indices of the edited region; validates ``lines``."""
        n = len(split_lines(self.text))
        if self.lines is None:
            return 0, n
        a, b = self.lines
        if a < 1 or b < a or b > max(n, 1):
            raise EditError(f"line range {a}-{b} is invalid: the document has {n} lines "
                            "(1-based, inclusive, start <= end)")
        return a - 1, min(b, n)

    def is_empty(self) -> bool:
        """True when the region to edit has no text at all (an empty file or selection): there is
        nothing to edit, so the edit answers at once without running the model."""
        a, b = self.region_bounds()
        return not any(split_lines(self.text)[a:b])

    def validate(self) -> None:
        if self.mode not in MODES:
            raise EditError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        a, b = self.region_bounds()
        region = split_lines(self.text)[a:b]
        chars = sum(len(line) for line in region)
        if chars > MAX_INPUT_CHARS or len(region) > MAX_INPUT_LINES:
            what = "the selected region" if self.lines else "the input"
            raise EditError(f"input too large: {what} has {chars} characters / {len(region)} lines "
                            f"(limit {MAX_INPUT_CHARS} characters, {MAX_INPUT_LINES} lines); select a smaller region")
        if self.max_new_tokens < 1:
            raise EditError("max_new_tokens must be at least 1")
        if self.focus_policy not in FOCUS_POLICIES:
            raise EditError(f"unknown focus policy {self.focus_policy!r}; choose one of {', '.join(FOCUS_POLICIES)}")
        if self.mode != AUTO:
            self._validate_mode()
        if self.verify not in VERIFY_RULES:
            raise EditError(f"unknown verify rule {self.verify!r}; choose one of {', '.join(VERIFY_RULES)}")
        if self.update is not None:
            self._validate_update(self.update)
            if len(region) > self.apply_max_lines:
                raise EditError(f"file too large to apply an update to: {len(region)} lines (applyMaxLines is "
                                f"{self.apply_max_lines}); nothing was written")
            if self.apply_window_lines < 1:
                raise EditError("apply_window_lines must be at least 1")

    def _validate_mode(self) -> None:
        mode = traits(self.mode)
        if mode.apply_only and not self.is_apply:
            raise EditError(f"mode {self.mode!r} merges an update: give one (an apply), or choose another mode")
        if mode.given_program and self.is_apply:
            raise EditError(f"mode {self.mode!r} decodes a given edit program; an apply's program is the "
                            f"aligner's (mode {concrete(AUTO, apply=True, selector=False)!r}) or the model's "
                            "(mode 'program')")
        if mode.given_program and self.program is None:
            raise EditError(f"mode {self.mode!r} needs a program to decode")

    @property
    def asked(self) -> Mode:
        """The mode the user asked for, before the engine made it concrete: ``auto`` and an explicit
        ``aligner`` both run the aligner's merge, and only ``auto`` lets a model decide its choices."""
        return self.asked_mode or self.mode

    @property
    def is_apply(self) -> bool:
        """Whether this request merges an update (engine.apply) rather than edits from an instruction."""
        return self.update is not None

    @staticmethod
    def _validate_update(update: str) -> None:
        if not update.strip():
            raise EditError("the update is empty: there is nothing to apply")
        if "\x00" in update:
            raise EditError("the update is binary (it holds NUL bytes): only text can be applied")
        lines = split_lines(update)
        if len(update) > MAX_UPDATE_CHARS or len(lines) > MAX_UPDATE_LINES:
            raise EditError(f"update too large: {len(update)} characters / {len(lines)} lines "
                            f"(limit {MAX_UPDATE_CHARS} characters, {MAX_UPDATE_LINES} lines)")

