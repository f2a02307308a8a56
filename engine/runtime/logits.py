"""Logits as a backend hands them: numpy arrays from llama.cpp, torch tensors from transformers.

The text modes' decode (engine.decoding.greedy) needs only argmax and a mask, which these helpers
do on either kind, so a llama.cpp edit in a text mode runs without importing torch (about two
seconds of a headless edit's start). Callers that need torch (program mode's grammar masks,
sampling, scoring) get tensors: :func:`as_torch` wraps a numpy array without a copy. Both kinds
agree where it matters: argmax returns the first of equal maxima on each.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

Logits = Any  # a numpy array or a torch tensor (float32): one row (V) or rows (N x V)


def is_numpy(logits: Logits) -> bool:
    return isinstance(logits, np.ndarray)


def as_torch(logits: Logits) -> Any:
    """``logits`` as a torch tensor (a numpy array wrapped, sharing its memory; a tensor as it is).
    Imports torch only for a numpy array."""
    if not is_numpy(logits):
        return logits
    import torch

    return torch.from_numpy(logits)


def stack(rows: Sequence[Logits]) -> Logits:
    """Rows (each V) stacked into N x V, of the rows' own kind."""
    if rows and is_numpy(rows[0]):
        return np.stack(rows)
    import torch

    return torch.stack(list(rows))


def copy(logits: Logits) -> Logits:
    """A copy that outlives the buffer ``logits`` may share."""
    return logits.copy() if is_numpy(logits) else logits.clone()


def argmax(logits: Logits) -> int:
    """The greedy choice from one row."""
    if is_numpy(logits):
        return int(np.argmax(logits))
    import torch

    return int(torch.argmax(logits))


def argmax_rows(logits: Logits) -> list[int]:
    """The greedy choice from each row of an N x V array."""
    if is_numpy(logits):
        return np.argmax(logits, axis=-1).tolist()
    import torch

    return torch.argmax(logits, dim=-1).tolist()


def masked(logits: Logits, ids: Sequence[int]) -> Logits:
    """A copy of ``logits`` (a row or rows) with the columns ``ids`` at -inf (``logits`` itself when
    ``ids`` is empty)."""
    if not len(ids):
        return logits
    if is_numpy(logits):
        out = logits.copy()
        out[..., np.asarray(ids, dtype=np.int64)] = -np.inf
        return out
    import torch

    index = torch.as_tensor(list(ids), dtype=torch.long, device=logits.device)
    return logits.index_fill(-1, index, float("-inf"))
