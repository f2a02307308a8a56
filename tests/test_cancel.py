"""A cancel ends an edit wherever it is: before the first model step, between the chunks of the
prompt's forward (the localizer's read of a long region, a prefill), between decode steps, and on
transformers between two layers of any forward. Forwards are counted, never timed: after a cancel
at most the chunk already running completes. A prefill stopped halfway leaves what it read in the
prefix cache, reusable bit for bit; a forward stopped between layers leaves the cache as before it."""

from __future__ import annotations

import threading

import pytest
import torch
from support import long_function

from engine.api import EditRequest, Engine
from engine.core.errors import Cancelled
from engine.core.tokens import encode
from engine.decoding.localize import forget_surprises
from engine.runtime.backends.transformers_backend import PREFILL_ALIGN

pytestmark = [pytest.mark.model]


def _cancel_once_forwarding(log, stop: threading.Event, seen: list[int], after: int) -> threading.Thread:
    """A thread that cancels (like an editor's cancel arriving) once ``after`` forwards have run,
    and notes how many had run when it did."""

    def watch() -> None:
        while len(log.records) < after and not stop.is_set():
            threading.Event().wait(0.005)
        stop.set()
        seen.append(len(log.records))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("mode", ["program", "speculative"])  # the localizer's read; a text mode's prefill
def test_a_cancel_during_the_prompt_pass_ends_the_edit_within_one_chunk(default_engine: Engine, mode: str):
    engine = default_engine
    engine.forget_prompts()
    text = long_function()
    loaded = engine.model_for(mode)
    stop, seen = threading.Event(), []
    request = EditRequest(text, "Fix the bug.", mode=mode, max_new_tokens=256)
    with loaded.runtime.meter() as log:
        watcher = _cancel_once_forwarding(log, stop, seen, after=1)
        result = engine.edit(request, cancelled=stop.is_set)
        watcher.join()
        ran = len(log.records)
    assert result.stop_reason == "cancelled"
    assert result.output_text == text and result.region_output == text and not result.changed
    assert ran - seen[0] <= 1  # the chunk running when the cancel came, no more
    # it came inside the prompt pass (the localizer's read: the region alone is over 3 chunks)
    assert seen[0] < 3 and len(encode(loaded.tokenizer, text)) > 3 * PREFILL_ALIGN


def test_a_cancel_before_the_edit_starts_runs_no_forward(default_engine: Engine):
    loaded = default_engine.model_for("program")
    with loaded.runtime.meter() as log:
        result = default_engine.edit(EditRequest("a = 1\nb = 2\n", "Fix the bug."), cancelled=lambda: True)
    assert result.stop_reason == "cancelled" and result.output_text == "a = 1\nb = 2\n"
    assert log.records == []


def test_a_prefill_stopped_halfway_leaves_a_reusable_prefix(default_engine: Engine):
    """What a cancelled prefill read goes to the prefix cache at a chunk boundary; the same prompt's
    next prefill continues from it and its logits equal a fresh prefill's."""
    loaded = default_engine.loaded
    runtime = loaded.runtime
    runtime.prefixes.clear()
    forget_surprises(runtime)
    ids = list(range(2000, 2000 + 3 * PREFILL_ALIGN + 40))
    session = loaded.session()
    session.cancelled = lambda: session.length >= 2 * PREFILL_ALIGN  # after two chunks
    with pytest.raises(Cancelled):
        session.append(ids, "prefill")
    session.close()
    assert runtime.prefixes.tokens_held() == 2 * PREFILL_ALIGN
    again = loaded.session()
    continued = again.append(ids, "prefill")
    again.close()
    assert again.reused == 2 * PREFILL_ALIGN
    runtime.prefixes.clear()
    fresh = loaded.session()
    expected = fresh.append(ids, "prefill")
    fresh.close()
    assert fresh.reused == 0
    assert torch.equal(continued, expected)


def _cancel_at_call(n: int):
    """A cancel flag that turns True at its ``n``-th poll (a forward polls it before each layer)."""
    polls = [0]

    def cancelled() -> bool:
        polls[0] += 1
        return polls[0] >= n

    return cancelled


def test_a_forward_stopped_between_layers_leaves_the_cache_as_before(default_engine: Engine):
    """A cancel inside a prefill's second chunk keeps the first chunk, reusable; one inside a step's
    forward leaves the cache at its length before that forward: either way what follows gives the
    logits an uncancelled session gives, bit for bit, and the layers' hooks are gone."""
    loaded = default_engine.loaded
    runtime = loaded.runtime
    layers = list(runtime.model.get_decoder().layers)
    ids = list(range(3000, 3000 + PREFILL_ALIGN + 60))
    step = list(range(4000, 4040))
    runtime.prefixes.clear()
    fresh = loaded.session()
    fresh.append(ids, "prefill")
    expected = fresh.append(step, "fused", all_logits=True)
    fresh.close()

    runtime.prefixes.clear()
    session = loaded.session()
    # polls: the first chunk's check and its layers, the second chunk's check, then 10 layers in
    session.cancelled = _cancel_at_call(len(layers) + 2 + 10)
    with pytest.raises(Cancelled, match="during a forward"):
        session.append(ids, "prefill")
    assert session.length == PREFILL_ALIGN and not any(layer._forward_pre_hooks for layer in layers)
    session.close()
    assert runtime.prefixes.tokens_held() == PREFILL_ALIGN

    session = loaded.session()
    session.append(ids, "prefill")
    assert session.reused == PREFILL_ALIGN
    session.cancelled = _cancel_at_call(10)
    with pytest.raises(Cancelled, match="during a forward"):
        session.append(step, "fused", all_logits=True)
    assert session.length == len(ids) and len(session.tokens) == len(ids)
    assert {layer.get_seq_length() for layer in session.cache.layers} == {len(ids)}
    session.cancelled = lambda: False
    again = session.append(step, "fused", all_logits=True)
    session.close()
    runtime.prefixes.clear()
    assert torch.equal(again, expected)


def test_a_warm_up_reads_what_the_fix_would_and_changes_nothing(default_engine: Engine):
    """The prompt read ahead (an editor's idle buffer) is the localizer's forward of the fix that
    follows: the fix forwards exactly that many prompt tokens fewer and writes the same program.
    Drafting off, so both fixes run the same forwards apart from the prompt's."""
    engine = default_engine
    text = "\n".join(long_function().splitlines()[:40]) + "\n"
    request = EditRequest(text, "Fix the bug.", mode="program", max_new_tokens=48, focus_line=12, draft=False)
    loaded = engine.model_for("program")
    engine.forget_prompts()
    with loaded.runtime.meter() as cold_log:
        cold = engine.edit(request)
    engine.forget_prompts()
    assert engine.warm_prompt(request, cancelled=lambda: True).status == "cancelled"
    warm = engine.warm_prompt(request)
    assert warm.status == "done" and warm.forwarded >= warm.prompt_tokens > PREFILL_ALIGN
    assert engine.warm_prompt(request).forwarded == 0  # the cache holds it: nothing read again
    with loaded.runtime.meter() as log:
        hot = engine.edit(request)
    assert hot.output_text == cold.output_text and hot.program == cold.program
    assert sum(log.sizes()) == sum(cold_log.sizes()) - warm.forwarded
    assert "localize_s" in cold.breakdown and "localize_s" not in hot.breakdown


def test_a_keystroke_stops_a_warm_up_within_one_chunk_and_its_read_stays_usable(default_engine: Engine):
    engine = default_engine
    engine.forget_prompts()
    text = long_function()
    request = EditRequest(text, "Fix the bug", mode="program", max_new_tokens=8, focus_line=40, draft=False)
    loaded = engine.model_for("program")
    stop, seen = threading.Event(), []
    with loaded.runtime.meter() as log:
        watcher = _cancel_once_forwarding(log, stop, seen, after=2)
        warm = engine.warm_prompt(request, stop.is_set)
        watcher.join()
        ran = len(log.records)
    assert warm.status == "cancelled" and ran - seen[0] <= 1
    assert 0 < warm.forwarded < warm.prompt_tokens
    assert loaded.runtime.prefixes.tokens_held() >= 2 * PREFILL_ALIGN  # what it read, kept at a chunk boundary
    again = engine.warm_prompt(request)  # the next idle moment continues from there
    assert again.status == "done" and again.forwarded < again.prompt_tokens - PREFILL_ALIGN  # not read twice


def test_an_edit_waiting_for_the_engine_is_cancelled_without_waiting(default_engine: Engine):
    """Another edit holds the engine (its decode runs on): a cancel ends the waiting edit before
    that one ends, and it touches the model not at all."""
    engine = default_engine
    engine.forget_prompts()
    long = EditRequest(long_function(), "Fix the bug", mode="program", max_new_tokens=200, focus_line=40, draft=False)
    loaded = engine.model_for("program")
    first, stop = {}, threading.Event()
    with loaded.runtime.meter() as log:
        runner = threading.Thread(target=lambda: first.update(result=engine.edit(long, cancelled=stop.is_set)))
        runner.start()
        while not log.records:
            threading.Event().wait(0.005)
        waiting = engine.edit(EditRequest("def f(x):\n    return x - 1\n", "Fix the bug", mode="ar", max_new_tokens=8),
                              cancelled=lambda: True)
        still_running = runner.is_alive()
        stop.set()
        runner.join()
    assert waiting.stop_reason == "cancelled" and waiting.output_text == waiting.input_text
    assert still_running  # it did not wait for the other edit to end
    assert waiting.prompt_tokens == 0
    engine.forget_prompts()
