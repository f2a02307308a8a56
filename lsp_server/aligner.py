"""What an apply runs on when the aligner merges it alone (``mode`` auto): no model is loaded for
it, as the CLI's ``apply`` loads none (:class:`engine.dispatch.ModelFree`), so the first apply of a
session answers at once instead of after the model's load."""

from __future__ import annotations

from engine.dispatch import ModelFree
from engine.core.modes import needs_model
from engine.core.choices import Mode


class AlignerOnly(ModelFree):
    """The part of :class:`engine.api.Engine` an edit session uses, for an apply without a model."""

    def __init__(self) -> None:
        super().__init__("aligner")


def aligner_alone(update: str | None, mode: Mode) -> bool:
    """Does an edit with ``update`` (None: not an apply) in the setting's ``mode`` need no model
    (engine.core.modes.needs_model)?"""
    return update is not None and not needs_model(mode, apply=True)
