"""A check both backends' tests run (tests/test_prefix_cache.py, tests/test_llamacpp_backend.py):
a prefill cut at a mark (engine.runtime.session.Session.append) lets the next prompt reuse up to it."""

from __future__ import annotations

from typing import Any

import torch
from support import ADD_AND_SUB as BUGGY

from engine.core.tokens import encode
from engine.runtime.prefix_cache import common_prefix


def marked_prompts_reuse_up_to_the_mark(loaded: Any, align: int, copies: int = 12) -> None:
    """Two prompts that differ only after a common part not ending at a chunk boundary: each
    prefill cut at the end of that part (``marks``) reuses the other's up to there, with exactly
    the logits of a fresh prefill; without the mark on both it stops at the aligned boundary.
    ``copies``: how many copies of BUGGY the common part holds (where its chunks end)."""
    runtime, tok = loaded.runtime, loaded.tokenizer
    shared = encode(tok, "Rewrite this code.\n" + BUGGY * copies)
    mark = len(shared)
    assert mark % align and mark > align
    first = shared + encode(tok, "Nothing else.")
    second = shared + encode(tok, "The problem is at or near line 3.")
    assert common_prefix(first, second) == mark
    runtime.prefixes.clear()
    fresh = loaded.session()
    expected = fresh.append(second, "prefill", marks=[mark])
    fresh.crop(0)
    fresh.close()
    for first_marks, second_marks, reused in (([mark], [mark], mark), ([], [mark], mark // align * align),
                                              ([mark], [], mark // align * align)):
        runtime.prefixes.clear()
        reader = loaded.session()
        reader.append(first, "prefill", marks=first_marks)
        reader.close()
        again = loaded.session()
        got = again.append(second, "prefill", marks=second_marks)
        again.close()
        assert again.reused == reused, (first_marks, second_marks)
        if second_marks:
            assert torch.equal(got, expected)
    runtime.prefixes.clear()
