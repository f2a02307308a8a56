"""What the file commands (``edit``, ``apply``) share around the engine: the flags that load a
model, the workspace settings read as the language server reads them, reading a file as UTF-8
text and writing one atomically."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.core.errors import EditError
from engine.core.staged import staged
from engine.settings import Settings, load_workspace_settings

# The settings that choose and load the model, as flags of every command that loads one.
ENGINE_FLAGS = ("model", "device", "dtype", "selector", "backend", "threads", "context_size", "batch_size",
                "gpu_layers", "flash_attention", "prefix_cache_tokens", "server_url", "served_model")


def read_text(path: Path) -> str:
    if not path.is_file():
        raise EditError(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so a failure leaves the original."""
    tmp = staged(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def workspace_settings(path: Path) -> Settings:
    """Workspace settings for ``path``, read exactly as the language server reads them (its
    ``.copy-as-decode.toml`` / ``[tool.copy-as-decode]`` files, found from the folder up); each
    problem is printed on stderr with its file and line, and the files' other keys apply."""
    settings, warnings = load_workspace_settings(path.resolve())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return settings
