"""A gen that rewrote the next input line replaces it: the copy after it may not start at that line
(engine.language.grammar.RangeConstraint), on the in-process masks and on the vLLM segment path alike.
Without the rule ``<copy lines="1-1"/><gen>    return a + b\\n</gen><copy lines="2-2"/>`` is a
valid program that keeps the bug under its fix."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest
from support import StubServerRuntime

from engine.core.lines import near_copy, split_lines
from engine.evaluation.quality import near_copy_insertions
from engine.language.grammar import RangeConstraint
from engine.language.program import CopyLines, Gen

ADD = "def add(a, b):\n    return a - b\n"
TEXTS = ["1", "2", "3", '"', "-"]


def test_near_copy_needs_the_same_indentation_a_word_and_alike_text() -> None:
    assert near_copy("    return a + b\n", "    return a - b\n")
    assert near_copy("    return x\n", "    return x\r\n")  # line endings are not text
    assert not near_copy("return a + b\n", "    return a - b\n")  # another block
    assert not near_copy("    }\n", "    }\n")  # a closing brace repeats legitimately
    assert not near_copy("    y = compute(a)\n", "    return a - b\n")


def test_a_copy_may_not_restart_at_the_line_a_gen_rewrote() -> None:
    lines = split_lines("x = 1\ny = 2\nprint(x + y)\n")
    ranges = RangeConstraint(TEXTS, 3, 0, lines=lines)
    ranges.op_finished(CopyLines(1, 1))
    ranges.op_finished(Gen("y = 3\n"))
    assert ranges.next_line == 3
    banned = ranges.banned('<copy lines="', np.arange(len(TEXTS)))
    assert 0 in banned and 1 in banned and 2 not in banned  # lines 1 and 2 no more: 3 is left


def test_a_gen_that_writes_something_else_leaves_the_next_line_to_copy() -> None:
    lines = split_lines("x = 1\ny = 2\nprint(x + y)\n")
    for gen in ("z = compute(x)\n", "y = 3"):  # another line; a gen that ends mid-line continues it
        ranges = RangeConstraint(TEXTS, 3, 0, lines=lines)
        ranges.op_finished(CopyLines(1, 1))
        ranges.op_finished(Gen(gen))
        assert ranges.next_line == 2


def test_no_copy_left_after_rewriting_the_last_line_means_the_end() -> None:
    ranges = RangeConstraint(["/program>", "gen>", "copy"], 2, 0, lines=split_lines(ADD))
    ranges.op_finished(CopyLines(1, 1))
    ranges.op_finished(Gen("    return a + b\n"))
    assert ranges.banned_ops() == "gc"  # neither a copy of line 2 nor a second gen: the end
    ranges_without = RangeConstraint(["/program>", "gen>", "copy"], 2, 0)
    ranges_without.op_finished(CopyLines(1, 1))
    ranges_without.op_finished(Gen("    return a + b\n"))
    assert ranges_without.banned_ops() == "g"  # the rule needs the input's lines


def test_the_counter_finds_an_insertion_either_side_of_the_kept_line() -> None:
    assert near_copy_insertions(ADD, "def add(a, b):\n    return a + b\n    return a - b\n") == 1
    assert near_copy_insertions(ADD, "def add(a, b):\n    return a - b\n    return a + b\n") == 1
    assert near_copy_insertions(ADD, "def add(a, b):\n    return a + b\n") == 0  # a replacement
    assert near_copy_insertions(ADD, "def add(a, b):\n    c = a + b\n    return a - b\n") == 0


class _SegmentStub(StubServerRuntime):
    """STUB server runtime (no HTTP) that writes ``script`` (the program after ``<program>``) from
    wherever the client stands, obeying the segment grammar only as far as ending the program when
    the grammar allows no copy (a server whose grammar allowed the copy wrote it). The real server
    is exercised in tests/test_vllm_backend.py."""

    def __init__(self, tokenizer: Any, script: str):
        super().__init__(tokenizer)
        self.script, self.grammars = "<program>" + script, []
        self.decoder: Any = None

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]:
        grammar = extra["structured_outputs"]["grammar"]
        self.grammars.append(grammar)
        written = self.decoder.writer.scanner.text
        rest = self.script[len(written):] if "copy ::=" in grammar else "/program>"
        yield self.tokenizer.encode(rest, add_special_tokens=False), None
        yield [], "stop"


@pytest.mark.model
def test_the_segment_path_ends_the_segment_where_the_rule_moves() -> None:
    """A server whose segment grammar still allowed ``<copy lines="2-`` (written before the gen)
    sends the insertion; the client stops at ``</gen>`` and asks again under the moved rule."""
    from engine.decoding.remote_decode import RemoteProgramDecoder
    from engine.decoding.tables import tables_for
    from engine.runtime.loaded import LoadedModel
    from engine.runtime.sources import load_tokenizer

    tokenizer = load_tokenizer("default")
    runtime = _SegmentStub(tokenizer, '<copy lines="1-1"/><gen>    return a + b\n</gen><copy lines="2-2"/></program>')
    loaded = LoadedModel(name="default", model=None, tokenizer=tokenizer, device="remote", dtype="remote",
                         runtime=runtime)
    decoder = RemoteProgramDecoder(loaded, tables_for(loaded), ADD, [1, 2, 3], 100, lambda: False)
    runtime.decoder = decoder
    outcome = list(decoder.run())[-1]
    assert outcome.region_output == "def add(a, b):\n    return a + b\n"
    assert "copy ::=" not in runtime.grammars[-1]  # the last segment could only end the program


@pytest.mark.model
def test_the_two_line_add_is_fixed_by_replacement(default_engine) -> None:
    """The issue's first case: with the cursor on the bug the model wrote the fix above the bug
    and copied the bug after it; the rule leaves it the end of the program instead."""
    from engine.api import EditRequest

    result = default_engine.edit(EditRequest(ADD, "Fix the bug in add.", mode="program", focus_line=2,
                                             language="python"))
    assert near_copy_insertions(ADD, result.output_text) == 0
    assert 'copy lines="2-2"' not in result.raw_output
