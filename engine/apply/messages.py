"""What a front door says of an update's chunks the merge could not place: one wording for the CLI,
the HTTP endpoint and the editor. Light on purpose (no decoder, no torch): the language server
imports it through :mod:`engine.api` when it starts."""

from __future__ import annotations

from engine.decoding.events import UnplacedChunk

PREVIEW_CHARS = 60  # how much of an unplaced chunk's first line a message quotes


# How each door asks for the placed chunks alone: the CLI's flag, the editor command's and the
# HTTP body's field.
PARTIAL = '--partial on the command line, "partial": true in the editor\'s command or over HTTP'


def unplaced_message(chunks: list[UnplacedChunk], written: bool) -> str:
    """What a front door tells the user about the chunks it could not place: each chunk, what in
    the file came nearest, and how to write the rest."""
    where = "; ".join(f"{c.start}-{c.end} ({c.text.strip().splitlines()[0][:PREVIEW_CHARS]!r}): "
                      f"{c.nearest or 'no line of theirs matches the file'}" for c in chunks)
    outcome = "the rest was merged" if written else f"nothing was written ({PARTIAL}, writes the rest)"
    return f"could not place update lines {where}; {outcome}"
