"""Token pieces: a tokenization of a text as string pieces that concatenate back to the text.

Token copies (``<copy tokens="a-b"/>``) emit ``"".join(pieces[a-1:b])``. Byte-level BPE tokens can
split a multi-byte character; such a token's piece is empty and the character is carried by the
token that completes it, so pieces always tile the text exactly.
"""

from __future__ import annotations

from typing import Any, Sequence

_WINDOW = 6  # tokens of left context used to decode one token's piece


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` as the model would write it (no special tokens)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Text piece of each token such that ``"".join(pieces) == decode(ids)``.

    Decodes incrementally with a short window of left context (as streaming detokenizers do), so
    it is linear in ``len(ids)`` and exact for byte-level BPE where single tokens may hold half
    a character.
    """
    pieces: list[str] = []
    emitted = ""  # decode of ids[anchor:k]
    anchor = 0
    for k in range(len(ids)):
        if k - anchor > _WINDOW and "\ufffd" not in emitted:
            anchor = k - _WINDOW
            emitted = decode(tokenizer, ids[anchor:k])
        full = decode(tokenizer, ids[anchor:k + 1])
        if full.endswith("\ufffd") and k + 1 < len(ids):
            pieces.append("")  # incomplete character: carried by a later token
            continue
        if full.startswith(emitted):
            piece = full[len(emitted):]
        else:  # a merge changed earlier text (rare): fall back to the exact prefix difference
            before = decode(tokenizer, ids[:k])
            piece = decode(tokenizer, ids[:k + 1])[len(before):]
        emitted = full
        pieces.append(piece)
    # Pieces of skipped (incomplete) tokens are folded into the completing token; the join is exact
    # unless a tokenizer decodes non-locally, which we check once here.
    joined = "".join(pieces)
    whole = decode(tokenizer, ids)
    if joined != whole:
        return _pieces_by_prefix(tokenizer, ids)
    return pieces


def _pieces_by_prefix(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Quadratic but always exact fallback: each piece is a difference of prefix decodes."""
    pieces, before = [], ""
    for k in range(len(ids)):
        now = decode(tokenizer, ids[:k + 1])
        if now.endswith("\ufffd") and k + 1 < len(ids):
            pieces.append("")
            continue
        pieces.append(now[len(before):] if now.startswith(before) else now)
        before = now
    return pieces


class IncrementalDetokenizer:
    """Text of a growing token sequence, released only when complete (no half characters)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""
        self._prefix_offset = 0  # ids[_prefix_offset:_read_offset] give context for the next decode
        self._read_offset = 0

    def snapshot(self) -> tuple:
        return (len(self.ids), self.text, self._prefix_offset, self._read_offset)

    def restore(self, state: tuple) -> None:
        n, self.text, self._prefix_offset, self._read_offset = state
        del self.ids[n:]

    def push(self, ids: Sequence[int]) -> str:
        """Add tokens; return the newly completed text (may be empty)."""
        self.ids.extend(ids)
        prefix = decode(self.tokenizer, self.ids[self._prefix_offset:self._read_offset])
        full = decode(self.tokenizer, self.ids[self._prefix_offset:])
        if full.endswith("\ufffd") or not full.startswith(prefix):
            return ""
        new = full[len(prefix):]
        self.text += new
        # keep a few tokens of left context so the next decode sees the same neighbours
        self._prefix_offset = max(0, len(self.ids) - _WINDOW)
        self._read_offset = len(self.ids)
        return new
