"""What an apply runs on when the aligner merges it alone (``mode`` auto): no model is loaded for
it, as the CLI's ``apply`` loads none (:func:`engine.api.apply_alone`), so the first apply of a
session answers at once instead of after the model's load."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from engine.api import APPLY_AUTO_MODE, EditRequest, apply_alone
from engine.core.choices import Mode, never_cancelled
from engine.decoding.events import Event


class AlignerOnly:
    """The part of :class:`engine.api.Engine` an edit session uses, for an apply without a model."""

    name = "aligner"
    concurrent = True  # no model to share: the apply does not wait for the edit slot

    def resolve_mode(self, mode: Mode) -> Mode:
        return APPLY_AUTO_MODE if mode == "auto" else mode

    def stream(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled) -> Iterator[Event]:
        return apply_alone(request, self.name, cancelled)


def aligner_alone(update: str | None, mode: Mode) -> bool:
    """Does an edit with ``update`` (None: not an apply) in the setting's ``mode`` need no model
    (:func:`engine.api.is_aligner_apply`)?"""
    return update is not None and mode in ("auto", "forced")
