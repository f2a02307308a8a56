"""What a front door says of an update's chunks the merge could not place: one wording for the CLI,
the HTTP endpoint and the editor. Light on purpose (no decoder, no torch): the language server
imports it through :mod:`engine.api` when it starts."""

from __future__ import annotations

from engine.decoding.events import UnplacedChunk

PREVIEW_CHARS = 60  # how much of an unplaced chunk's first line a message quotes


def unplaced_message(chunks: list[UnplacedChunk], written: bool) -> str:
    """What a front door tells the user about the chunks it could not place."""
    where = ", ".join(f"{c.start}-{c.end} ({c.text.strip().splitlines()[0][:PREVIEW_CHARS]!r})" for c in chunks)
    outcome = "the rest was merged" if written else "nothing was written (apply with partial to merge the rest)"
    return f"could not place update lines {where} in the file: no line of theirs matches it; {outcome}"
