"""A file's new text staged beside it, ready to rename over it: what an atomic write of one file
(engine.commands.files) and of every file of an answer or none (engine.workspace_apply) share."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def staged(target: Path, text: str) -> str:
    """``text`` in a temporary file beside ``target`` (its mode copied, when it exists): the path
    to ``os.replace`` over it. Nothing is left behind when staging fails."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp
