"""engine.runtime.logits: the greedy choice and the mask give the same answers on numpy arrays
(llama.cpp's logits) as on torch tensors (transformers'), ties and masked maxima included, so a
text-mode edit decodes the same tokens whichever kind a session hands it."""

from __future__ import annotations

import numpy as np
import torch

from engine.runtime import logits as arrays


def rows() -> np.ndarray:
    rng = np.random.default_rng(7)
    out = rng.standard_normal((5, 64)).astype(np.float32)
    out[1, [3, 40]] = 9.0  # a tie: the first wins on both
    out[2, 10] = 50.0  # the maximum, masked below
    return out


def test_argmax_agrees_on_numpy_and_torch_ties_included() -> None:
    a = rows()
    t = torch.from_numpy(a.copy())
    for i in range(len(a)):
        assert arrays.argmax(a[i]) == arrays.argmax(t[i]) == int(torch.argmax(t[i]))
    assert arrays.argmax(a[1]) == 3
    assert arrays.argmax_rows(a) == arrays.argmax_rows(t) == torch.argmax(t, dim=-1).tolist()


def test_masked_hides_the_ids_on_a_copy_of_either_kind() -> None:
    a = rows()
    t = torch.from_numpy(a.copy())
    blocked = [10, 3]
    ma, mt = arrays.masked(a, blocked), arrays.masked(t, blocked)
    assert isinstance(ma, np.ndarray) and isinstance(mt, torch.Tensor)
    assert np.array_equal(ma, mt.numpy())
    assert np.isneginf(ma[:, blocked]).all()
    assert arrays.argmax(ma[2]) != 10 and arrays.argmax(ma[1]) == 40
    assert a[2, 10] == 50.0 and float(t[2, 10]) == 50.0  # the inputs are untouched
    assert arrays.argmax(arrays.masked(a[2], blocked)) == arrays.argmax(arrays.masked(t[2], blocked))
    assert arrays.masked(a, []) is a


def test_stack_copy_and_as_torch_keep_the_kind_and_the_values() -> None:
    a = rows()
    stacked = arrays.stack([a[0], a[3]])
    assert isinstance(stacked, np.ndarray) and np.array_equal(stacked, a[[0, 3]])
    t = torch.from_numpy(a)
    assert torch.equal(arrays.stack([t[0], t[3]]), t[[0, 3]])
    kept = arrays.copy(a[0])
    a[0, 0] = 123.0
    assert kept[0] != 123.0
    wrapped = arrays.as_torch(a)
    assert isinstance(wrapped, torch.Tensor) and wrapped.dtype == torch.float32 and float(wrapped[0, 0]) == 123.0
    assert arrays.as_torch(t) is t
