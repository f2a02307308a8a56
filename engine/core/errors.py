"""The errors every layer raises and the front doors catch.

This module imports nothing from the engine, so the API, the decoders, the model loader and the
backends all import it downwards (no circle between them). ``engine.api`` re-exports these names,
so older imports keep working.
"""

from __future__ import annotations


class EditError(ValueError):
    """A request the engine refuses (bad range, input too large, bad mode); the message says why."""


class ModelLoadError(RuntimeError):
    """A model that cannot be loaded; the message names the model and the reason."""


class Cancelled(Exception):
    """The caller's cancel check said stop between two of a prompt's chunks (a prefill or the
    localizer's forward): the edit ends as ``cancelled`` with the document as it was."""
