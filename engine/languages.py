"""The fence language of a file, from its name (the CLI, the language server and the syntax
check all ask the same question)."""

from __future__ import annotations

from pathlib import PurePath

from engine.prompt import LANGUAGE_BY_SUFFIX


def language_for(path: str) -> str:
    """Fence language for a file name (empty when unknown)."""
    return LANGUAGE_BY_SUFFIX.get(PurePath(path).suffix.lower(), "")
