"""What a process builds once per model and the next process can read instead: the files of the
start-up cache under ``$XDG_CACHE_HOME/copy-as-decode/startup/`` (``~/.cache`` without it).

A headless edit is a process of its own, so without this every run rebuilt the same things: the
GGUF's tokenizer (converted by transformers), xgrammar's tokenizer tables, each compiled program
grammar and the measured thread count. Each entry is one file named by a digest of its key; the
key names everything the content depends on (the model's bytes or tokenizer, the library
versions, :data:`FORMAT`), never a workspace's content alone. A file is written to a temporary
name and renamed into place, so a reader sees a whole file or none; it starts with a header that
holds the full key and the body's SHA-256, and a file that does not match (partial, corrupt,
another key's) is ignored and removed, so the caller rebuilds. ``COPY_AS_DECODE_NO_CACHE=1``
turns the cache off (every run builds afresh).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from engine.core.environment import NO_CACHE
from engine.runtime.sources import cache_dir

# Bumped when what an entry holds changes shape: older entries then stop matching their keys.
FORMAT = "1"
OFF_VARIABLE = NO_CACHE


def startup_dir() -> Path:
    return cache_dir() / "startup"


def enabled() -> bool:
    return os.environ.get(OFF_VARIABLE, "") not in ("1", "true", "yes")


def digest(*parts: str) -> str:
    """A short stable name for a key made of ``parts``."""
    return hashlib.sha256("\0".join((FORMAT, *parts)).encode("utf-8")).hexdigest()[:32]


def file_stamp(path: Path) -> str:
    """What identifies a file's version without reading it: its resolved path, size and mtime."""
    stat = path.stat()
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


class DiskCache:
    """One kind of entry (``kind``: a folder under :func:`startup_dir`), at most ``keep`` files of
    it: writing one removes the least recently used beyond that."""

    def __init__(self, kind: str, keep: int = 64, root: Path | None = None):
        self.folder = (root or startup_dir()) / kind
        self.keep = keep

    def path_for(self, key: str) -> Path:
        return self.folder / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}.entry"

    def read(self, key: str) -> bytes | None:
        """The body stored under ``key``, or None (absent, unreadable, corrupt: a bad file is removed)."""
        if not enabled():
            return None
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        head, sep, body = raw.partition(b"\n")
        try:
            header = json.loads(head) if sep else None
        except ValueError:
            header = None
        if (not isinstance(header, dict) or header.get("key") != key or header.get("format") != FORMAT
                or header.get("sha256") != hashlib.sha256(body).hexdigest()):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):  # a read-only cache still serves it
            os.utime(path)
        return body

    def write(self, key: str, body: bytes) -> Path | None:
        """Store ``body`` under ``key`` atomically; None where the cache cannot be written (the
        caller has what it built, so a full disk or a read-only home only costs the next run)."""
        if not enabled():
            return None
        header = json.dumps({"format": FORMAT, "key": key, "sha256": hashlib.sha256(body).hexdigest()})
        path = self.path_for(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".entry")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(header.encode("utf-8") + b"\n" + body)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        except OSError:
            return None
        self.prune()
        return path

    def read_text(self, key: str) -> str | None:
        body = self.read(key)
        if body is None:
            return None
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            self.forget(key)
            return None

    def write_text(self, key: str, text: str) -> Path | None:
        return self.write(key, text.encode("utf-8"))

    def forget(self, key: str) -> None:
        """Remove ``key``'s entry (its content did not load: the caller rebuilds it)."""
        with contextlib.suppress(OSError):
            self.path_for(key).unlink()

    def prune(self) -> None:
        try:
            entries = sorted(self.folder.glob("*.entry"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for old in entries[self.keep:]:
            with contextlib.suppress(OSError):
                old.unlink()
