"""The answer read ahead (engine.read_ahead): an idle buffer's AI fix decoded before it is asked
for. The edit that follows gets the same answer with no forward of its own; an edit that arrives
while it is being decoded follows it; an edit of another request stops it within one step.
Forwards are counted, never timed."""

from __future__ import annotations

import threading

import pytest
from support import long_function

from engine.api import EditRequest, Engine
from engine.decoding.events import EditFinished, OpResolved

pytestmark = [pytest.mark.model]


def _request(instruction: str = "Fix the bug.", focus_line: int = 12) -> EditRequest:
    """Drafting off: draft sizes follow measured timings, so two decodes of one request may run
    different forwards (the same program); the tests here count forwards."""
    text = "\n".join(long_function().splitlines()[:40]) + "\n"
    return EditRequest(text, instruction, mode="program", max_new_tokens=48, focus_line=focus_line, draft=False)


def _cold(engine: Engine, request: EditRequest):
    engine.forget_prompts()
    loaded = engine.model_for(request.mode)
    with loaded.runtime.meter() as log:
        result = engine.edit(request)
    engine.forget_prompts()
    return result, sum(log.sizes())


def _after_forwards(log, n: int, then) -> threading.Thread:
    """A thread that runs ``then()`` once ``n`` forwards have run (an editor's request arriving)."""

    def watch() -> None:
        while len(log.records) < n:
            threading.Event().wait(0.005)
        then()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_the_fix_read_ahead_is_given_at_once_and_is_the_same_edit(default_engine: Engine):
    engine = default_engine
    request = _request()
    cold, _ = _cold(engine, request)
    ahead = engine.read_ahead(request)
    assert ahead.status == "done" and ahead.answered and ahead.forwarded > ahead.prompt_tokens > 0
    assert engine.read_ahead(request).status == "skipped"  # kept: nothing read twice
    loaded = engine.model_for("program")
    with loaded.runtime.meter() as log:
        events = list(engine.stream(request))
    assert log.sizes() == []  # no forward of its own
    result = events[-1].result
    assert result.output_text == cold.output_text and result.program == cold.program
    assert [e.op for e in events if isinstance(e, OpResolved)] == list(cold.program.ops)
    assert result.timings["read_ahead_s"] > result.timings["total_s"]
    other = _request(focus_line=30)  # another request: decoded as usual
    assert engine.edit(other).timings.get("read_ahead_s") is None
    engine.forget_prompts()


def test_a_fix_arriving_while_its_answer_is_decoded_follows_it(default_engine: Engine):
    """The reader's own stop (the server sets it when the fix arrives) is ignored while the fix
    follows: the answer is decoded once, and the fix gets it."""
    engine = default_engine
    request = _request()
    cold, cold_forwards = _cold(engine, request)
    loaded = engine.model_for("program")
    stop, out = threading.Event(), {}
    with loaded.runtime.meter() as log:
        reader = threading.Thread(target=lambda: out.update(ahead=engine.read_ahead(request, stop.is_set)))
        reader.start()
        while len(log.records) < 3:
            threading.Event().wait(0.005)
        events = list(engine.stream(request))  # the fix: follows the reading
        stop.set()
        reader.join()
    assert out["ahead"].answered
    assert events[-1].result.output_text == cold.output_text and events[-1].result.program == cold.program
    assert sum(log.sizes()) == cold_forwards  # decoded once
    engine.forget_prompts()


def test_an_edit_of_another_request_stops_the_reading_within_one_step(default_engine: Engine):
    engine = default_engine
    request, other = _request(), _request(instruction="Fix the width.")
    expected, _ = _cold(engine, other)
    loaded = engine.model_for("program")
    out, seen = {}, []
    with loaded.runtime.meter() as log:
        reader = threading.Thread(target=lambda: out.update(ahead=engine.read_ahead(request)))
        reader.start()
        waiter = _after_forwards(log, 2, lambda: (seen.append(sum(log.sizes())), out.update(edit=engine.edit(other))))
        reader.join()
        waiter.join()
    assert out["ahead"].status == "cancelled" and not out["ahead"].answered
    assert out["ahead"].forwarded - seen[0] <= max(log.sizes())  # at most the forward running then
    assert out["edit"].output_text == expected.output_text
    assert engine.read_ahead(request, cancelled=lambda: True).status == "cancelled"  # a keystroke: nothing kept
    assert engine.edit(request).timings.get("read_ahead_s") is None
    engine.forget_prompts()


def test_a_crlf_buffer_read_ahead_gives_its_crlf_answer(default_engine: Engine):
    engine = default_engine
    lf = _request()
    request = EditRequest(lf.text.replace("\n", "\r\n"), lf.instruction, mode="program", max_new_tokens=48,
                          focus_line=12)
    cold, _ = _cold(engine, request)
    assert engine.read_ahead(request).answered
    events = list(engine.stream(request))
    finished = events[-1]
    assert isinstance(finished, EditFinished) and finished.result.output_text == cold.output_text
    assert "\r\n" in finished.result.output_text and "read_ahead_s" in finished.result.timings
    engine.forget_prompts()


def test_a_text_modes_fix_is_read_ahead_too(default_engine: Engine):
    """Without a span selector the fix runs in speculative mode: read ahead the same way."""
    engine = default_engine
    request = EditRequest("def add(a, b):\n    return a - b\n", "Fix the bug", mode="speculative", max_new_tokens=24)
    cold, _ = _cold(engine, request)
    assert engine.read_ahead(request).answered
    loaded = engine.model_for("speculative")
    with loaded.runtime.meter() as log:
        hot = engine.edit(request)
    assert log.sizes() == [] and hot.output_text == cold.output_text and hot.raw_output == cold.raw_output
    engine.forget_prompts()
