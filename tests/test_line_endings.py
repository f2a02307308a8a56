"""A CRLF buffer is edited as its LF twin and given back in CRLF: the same program whatever the
line endings (engine.core.lines, engine.api). Before, the CRLF prompt was a different input and
could get a different program (Python/1 of the first 40 HumanEvalFix cases, at 12 new tokens)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.api import EditRequest, Engine
from engine.decoding.line_endings import as_lf, in_crlf
from engine.core.lines import split_lines, to_crlf, to_lf, uses_crlf
from engine.decoding.events import EditFinished, OpResolved
from engine.language.program import CopyLines, Gen, Program

ROOT = Path(__file__).resolve().parents[1]
CRLF_ADD = to_crlf((ROOT / "examples" / "buggy_add.py").read_text())  # 3 lines: def, docstring, return a - b


@pytest.mark.parametrize("text", ["a\r\nb\r\n", "a\r\n\r\nb", "x = '\r'\r\ny\r\n", "a\r\r\nb\r\n"])
def test_crlf_round_trips_through_its_lf_twin(text: str):
    assert uses_crlf(text)
    assert to_crlf(to_lf(text)) == text
    assert len(split_lines(to_lf(text))) == len(split_lines(text))  # the same line numbers


@pytest.mark.parametrize("text", ["a\nb\r\n", "a\nb\n", "no line break", ""])
def test_lf_and_mixed_buffers_are_edited_as_they_are(text: str):
    assert not uses_crlf(text)


def test_events_come_back_in_crlf():
    original = "def f():\r\n    return 1\r\n"
    request = as_lf(EditRequest(original, "x", mode="forced",
                                program=Program((CopyLines(1, 1), Gen("    return 2\r\n")))))
    assert request.text == "def f():\n    return 1\n"
    assert request.program.ops[1] == Gen("    return 2\n")
    op = OpResolved(index=1, op=Gen("    return 2\n"), text="    return 2\n", resolved="def f():\n    return 2\n",
                    input_lines_consumed=1, tokens=None, elapsed_s=0.0)  # type: ignore[arg-type]
    back = in_crlf(op, original)
    assert (back.op, back.text, back.resolved) == (Gen("    return 2\r\n"), "    return 2\r\n",
                                                   "def f():\r\n    return 2\r\n")


@pytest.mark.model
def test_the_crlf_add_is_fixed_by_replacement(default_engine: Engine):
    result = default_engine.edit(EditRequest(CRLF_ADD, "Fix the bug", language="python", max_new_tokens=48))
    assert result.program.serialize() == '<program><copy lines="1-2"/><gen>    return a + b\r\n</gen></program>'
    assert result.output_text == CRLF_ADD.replace("a - b", "a + b")
    assert uses_crlf(result.output_text) and result.input_text == CRLF_ADD


@pytest.mark.model
@pytest.mark.slow
def test_forty_humanevalfix_cases_get_the_same_program_in_crlf(default_engine: Engine):
    """Program mode, the shipped defaults (localizer and selector included), a modest token budget:
    the prompt and the first ops are where line endings used to change the program."""
    from engine.evaluation.corpora import load_corpus

    different = []
    for case in load_corpus("humanevalfix-python")[:40]:
        lf = to_lf(case.input)
        runs = [default_engine.edit(EditRequest(text, case.instruction, language="python", max_new_tokens=12))
                for text in (lf, to_crlf(lf))]
        if (to_crlf(runs[0].program.serialize()) != runs[1].program.serialize()
                or to_crlf(runs[0].output_text) != runs[1].output_text or runs[0].tokens != runs[1].tokens):
            different.append(case.id)
    assert not different


@pytest.mark.model
def test_a_streamed_crlf_edit_shows_crlf_at_every_step(default_engine: Engine):
    events = list(default_engine.stream(EditRequest(CRLF_ADD, "Fix the bug", language="python", max_new_tokens=48)))
    for event in events:
        if isinstance(event, OpResolved):
            assert "\n" not in event.resolved.replace("\r\n", "")
    assert isinstance(events[-1], EditFinished)
    assert "".join(e.text for e in events if isinstance(e, OpResolved)) == events[-1].result.region_output
