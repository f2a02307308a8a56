"""Prefix reuse across edits (engine.runtime.prefix_cache): the same edit twice gives the same output and
the same logits within float rounding, while the second prefill forwards only what changed; the
store is bounded and a setting turns it off."""

from __future__ import annotations

import pytest
import torch
from prefix_marks import BUGGY, marked_prompts_reuse_up_to_the_mark

from engine.api import EditRequest, Engine
from engine.core.tokens import encode
from engine.decoding.prompt import PromptParts, focus_free_prefix
from engine.runtime.backends.transformers_backend import PREFILL_ALIGN
from engine.runtime.prefix_cache import PrefixStore, common_prefix

pytestmark = [pytest.mark.model]


def test_store_takes_the_longest_prefix_and_keeps_its_budget():
    released: list[str] = []
    store: PrefixStore[str] = PrefixStore(max_tokens=10, max_entries=2, release=released.append)
    store.put([1, 2, 3], "a")
    store.put([1, 2, 9, 9], "b")
    assert store.take([1, 2, 9, 5]) == ("b", 3, None, ())
    assert store.take([7]) is None
    store.put([5, 6, 7, 8, 9], "e")
    assert store.take([5, 6, 0]) is None  # 2 of 5 shared: left for a prompt that shares more
    assert store.take([5, 6, 7, 0]) == ("e", 3, None, ())
    store.put([1, 2, 9, 9], "b")
    store.put([4] * 7, "c")  # 3 entries > 2: "a" goes; 4 + 7 tokens > 10: "b" goes
    assert released == ["a", "b"] and store.tokens_held() == 7
    store.put([3, 3, 3, 3], "m", cuts=(2, 9))  # a cut past the tokens kept is dropped
    assert store.take([3, 3, 3, 3]).cuts == (2,)
    off: PrefixStore[str] = PrefixStore(max_tokens=0, release=released.append)
    off.put([1], "d")
    assert released[-1] == "d" and off.take([1]) is None
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2


def _second_prefill_reuses(engine: Engine, mode: str) -> None:
    from engine.decoding.localize import forget_surprises

    loaded = engine.model_for(mode)
    loaded.runtime.prefixes.clear()
    forget_surprises(loaded.runtime)  # an earlier test's localizer read of the same prompt
    request = EditRequest(BUGGY * 8, "Fix the bug in add.", mode=mode, max_new_tokens=48)  # > 1 chunk
    first, second = engine.edit(request), engine.edit(request)
    assert second.output_text == first.output_text and second.raw_output == first.raw_output
    # (program mode: the localizer's prompt, forwarded just before, may share a prefix with it)
    assert first.breakdown["prefix_reused"] < second.breakdown["prefix_reused"]
    # The same prompt again: all of it comes from the first edit's cache, its last logits too.
    assert second.breakdown["prefix_reused"] >= second.prompt_tokens  # (program: its forced opening too)
    if mode == "program":  # the localizer's forward (all region rows) is remembered per prompt instead
        assert first.breakdown.get("localize_s", 0) > 0 and "localize_s" not in second.breakdown


def test_a_cursor_on_code_prefills_what_the_localizer_forwarded(default_engine: Engine):
    """With the cursor on a code line the localizer reads the program prompt itself (hint and all),
    so the edit's own prefill takes all of it but the last chunk from the prefix cache; on a
    docstring line the hint may move, and the localizer reads the hintless prompt instead."""
    from engine.decoding.localize import forget_surprises

    loaded = default_engine.model_for("program")
    text = BUGGY * 8
    for focus, reused in ((3, True), (2, False), (None, False)):
        loaded.runtime.prefixes.clear()
        forget_surprises(loaded.runtime)
        result = default_engine.edit(EditRequest(text, "Fix the bug in add.", mode="program", focus_line=focus,
                                                 max_new_tokens=48))
        assert result.breakdown.get("localize_s", 0) > 0
        # (the prefill holds the prompt and the program's forced opening: an aligned reuse is less)
        assert (result.breakdown["prefix_reused"] > result.prompt_tokens) is reused, focus
        if not reused:  # the hintless prompt's forward: reused up to where the hint begins
            parts = PromptParts("Fix the bug in add.", text, focus_line=focus)
            assert result.breakdown["prefix_reused"] == focus_free_prefix(loaded.tokenizer, parts), focus


def test_a_kept_prompt_gives_a_fresh_prefills_last_logits(default_engine: Engine):
    """A prompt read with other rows asked for too (the localizer's forward) is kept with its last
    logits; the same prompt's prefill then forwards nothing and gets exactly the logits a fresh
    prefill computes (the LM head runs on the last row apart, engine.runtime.backends.transformers_backend)."""
    for loaded in (default_engine.loaded, default_engine.model_for("program")):
        runtime = loaded.runtime
        ids = encode(loaded.tokenizer, "Rewrite this code.\n" + BUGGY * 12)  # more than one chunk
        runtime.prefixes.clear()
        fresh = loaded.session()
        expected = fresh.append(ids, "prefill")
        fresh.crop(0)
        fresh.close()
        runtime.prefixes.clear()
        reader = loaded.session()
        rows = [5, 40, len(ids) - 30, len(ids) - 2, len(ids) - 1]
        read = reader.append(ids, "prefill", rows=rows)
        reader.close()
        assert torch.equal(read[-1], expected)
        again = loaded.session()
        got = again.append(ids, "prefill")
        assert again.reused == len(ids) and torch.equal(got, expected)
        again.append(encode(loaded.tokenizer, "def"), "step")  # the restored cache decodes on
        again.close()
        runtime.prefixes.clear()


@pytest.mark.parametrize("mode", ["ar", "speculative", "program"])
def test_same_edit_twice_reuses_the_prompt(default_engine: Engine, mode: str):
    _second_prefill_reuses(default_engine, mode)


def test_reused_prefix_gives_the_same_logits(default_engine: Engine):
    """Prefills run in aligned chunks, so a prompt that reuses another's prefix gets exactly the
    logits a fresh prefill gives (not just close ones)."""
    loaded = default_engine.loaded
    runtime = loaded.runtime
    runtime.prefixes.clear()
    tok = loaded.tokenizer
    long_code = BUGGY * 12  # ~400 tokens: more than one chunk
    prompt = encode(tok, "Rewrite this code.\n" + long_code)
    other = encode(tok, "Rewrite this code.\n" + long_code + "def minus(a, b):\n    return a - b\n")
    fresh = loaded.session()
    expected = fresh.append(other, "prefill")
    fresh.crop(0)  # nothing of it is kept: the store must hold `prompt` only
    fresh.close()
    runtime.prefixes.clear()
    first = loaded.session()
    first.append(prompt, "prefill")
    first.append(encode(tok, "def"), "step")  # decode past the prompt: only the prompt is kept
    first.close()
    assert runtime.prefixes.tokens_held() == len(prompt)
    again = loaded.session()
    got = again.append(other, "prefill")
    common = common_prefix(prompt, other)
    assert common > PREFILL_ALIGN and again.reused == common // PREFILL_ALIGN * PREFILL_ALIGN
    assert torch.equal(got, expected)
    again.close()


def test_a_mark_lets_the_next_prompt_reuse_up_to_it(default_engine: Engine):
    marked_prompts_reuse_up_to_the_mark(default_engine.loaded, PREFILL_ALIGN)


def test_setting_turns_reuse_off(default_engine: Engine):
    runtime = default_engine.loaded.runtime
    budget = runtime.prefixes.max_tokens
    try:
        runtime.prefixes.max_tokens = 0
        runtime.prefixes.clear()
        ids = encode(default_engine.loaded.tokenizer, BUGGY)
        for _ in range(2):
            session = default_engine.loaded.session()
            session.append(ids, "prefill")
            assert session.reused == 0
            session.close()
        assert runtime.prefixes.tokens_held() == 0
        program_runtime = default_engine.model_for("program").runtime
        program_budget, program_runtime.prefixes.max_tokens = program_runtime.prefixes.max_tokens, 0
        try:
            request = EditRequest(BUGGY * 2, "Fix the bug in add.", mode="program", max_new_tokens=32)  # > FEW_LINES
            assert all(default_engine.edit(request).breakdown.get("localize_s", 0) > 0 for _ in range(2))
        finally:
            program_runtime.prefixes.max_tokens = program_budget
    finally:
        runtime.prefixes.max_tokens = budget


def test_a_crop_into_the_prompt_keeps_only_what_stays(default_engine: Engine):
    loaded = default_engine.loaded
    loaded.runtime.prefixes.clear()
    ids = encode(loaded.tokenizer, BUGGY)
    session = loaded.session()
    session.append(ids, "prefill")
    session.crop(7)
    session.close()
    assert loaded.runtime.prefixes.tokens_held() == 7
    again = loaded.session()
    out = again.append(ids, "prefill", all_logits=True)  # every row wanted: nothing can be skipped
    assert again.reused == 0 and out.shape[0] == len(ids)
    again.close()
    assert torch.isfinite(out).all()
