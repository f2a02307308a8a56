"""Which models and selector adapters a settings source may name.

A model (or a ``selector`` adapter folder, which is weights too) named by a source other than the
user's own settings (workspace files, pulled or pushed settings, which may come from a workspace's
``.vscode/settings.json``) must match the user's ``allowedModels`` patterns: ``"default"`` (the
embedded model), ``"hub:<glob>"`` (Hugging Face hub ids, e.g. ``"hub:Qwen/*"``) or a path glob
for local folders / GGUF files (``"~/models/*"``). The default allows the embedded model and any
hub id (weights are loaded as safetensors; remote code is never run unless the user allows it).
:func:`engine.settings.sources.merge_layers` applies the rule.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Iterable

from engine.core.choices import SELECTOR_CHOICES


def model_kind(model: str) -> str:
    """'default', 'path' (local folder / GGUF file) or 'hub' (a hub id), as engine.runtime.sources reads it."""
    if model in ("default", ""):
        return "default"
    path = Path(model).expanduser()
    if model.startswith((".", "/", "~")) or path.suffix == ".gguf" or path.exists():
        return "path"
    return "hub"


def model_allowed(model: str, patterns: Iterable[str], base: Path | None = None) -> bool:
    """Does ``model`` match one of the user's ``allowedModels`` patterns (this module's docstring)?"""
    kind = model_kind(model)
    for pattern in patterns:
        if pattern == "default" and kind == "default":
            return True
        if pattern.startswith("hub:") and kind == "hub" and fnmatch.fnmatchcase(model, pattern[4:]):
            return True
        if kind == "path" and not pattern.startswith("hub:") and pattern != "default":
            path = Path(model).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            resolved = str(path.resolve())
            if fnmatch.fnmatchcase(resolved, str(Path(pattern).expanduser())):
                return True
    return False


def selector_allowed(selector: str, patterns: Iterable[str]) -> bool:
    """``auto``/``none`` always; an adapter folder only under a path pattern of ``allowedModels``
    (the same rule as a model folder: an adapter is weights a workspace must not slip in)."""
    if selector in SELECTOR_CHOICES:
        return True
    return model_allowed(selector if selector.startswith((".", "/", "~")) else f"./{selector}",
                         [p for p in patterns if p != "default" and not p.startswith("hub:")])
