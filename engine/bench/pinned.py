"""This repository's own sources as they stood at one pinned commit, read from git: the apply
benchmark's cases cut from them stay the same whatever the working tree's code becomes (cut from
the working tree, every change to the code changed the cases it is measured on).

A clone without that commit (a shallow one: ``git fetch --unshallow`` gives it) or a tree that is
no git checkout has no pinned sources: :func:`pinned_files` raises :class:`PinnedSourceMissing`,
whose message says so and what to do.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
PINNED_COMMIT = "c88bf1ac9aa1cbca92c69de576819388f3402975"  # on main; the cases' sources as of it


class PinnedSourceMissing(RuntimeError):
    """The pinned commit cannot be read from this checkout."""


@dataclass(frozen=True)
class PinnedFile:
    """One file of the pinned commit: its repository path and its text (``read_text`` as a
    :class:`pathlib.Path`'s, so the case builders take either)."""

    path: PurePosixPath
    text: str

    @property
    def name(self) -> str:
        return self.path.name

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.text


def _git(*args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], input=stdin, capture_output=True, check=False)
    except OSError as exc:
        raise PinnedSourceMissing(f"the apply benchmark's pinned sources need git ({exc})") from None
    if done.returncode != 0:
        raise PinnedSourceMissing(
            f"the apply benchmark's cases are cut from commit {PINNED_COMMIT[:12]} of this repository, which "
            f"{ROOT} cannot read (git: {done.stderr.decode(errors='replace').strip()}); in a shallow clone run "
            "`git fetch --unshallow`") from None
    return done.stdout


@lru_cache(maxsize=None)
def pinned_files(folder: str, suffix: str) -> tuple[PinnedFile, ...]:
    """The files under ``folder`` (a repository path) whose names end with ``suffix``, as of
    :data:`PINNED_COMMIT`, in path order (as ``sorted(Path.rglob)`` orders a tree)."""
    listing = _git("ls-tree", "-r", "--name-only", "-z", PINNED_COMMIT, "--", folder)
    names = sorted((PurePosixPath(n) for n in listing.decode().split("\0") if n.endswith(suffix)),
                   key=lambda p: p.parts)
    if not names:
        return ()
    batch = _git("cat-file", "--batch", stdin="".join(f"{PINNED_COMMIT}:{n}\n" for n in names).encode())
    out, at = [], 0
    for name in names:
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        body = batch[header_end + 1:header_end + 1 + size]
        out.append(PinnedFile(name, body.decode("utf-8", errors="replace")))
        at = header_end + 1 + size + 1
    return tuple(out)
