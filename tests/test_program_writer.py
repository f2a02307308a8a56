"""The program writer both program decoders share (engine.decoding.program_writer), without a model: a
character tokenizer stands in (one token per character), a stub for the grammar matcher."""

from __future__ import annotations

from engine.decoding.events import TokenCounts
from engine.decoding.program_writer import ProgramWriter, starts_op
from engine.language.program import CopyLines, Gen

REGION = "a = 1\nb = 2\nc = 3\n"
LINES = REGION.splitlines(keepends=True)


class CharTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        return "".join(chr(i) for i in ids)


class StubMatcher:
    """Records what the writer asks of the grammar."""

    def __init__(self):
        self.calls: list[tuple] = []

    def rollback(self, n: int) -> None:
        self.calls.append(("rollback", n))

    def accept_string(self, text: str) -> bool:
        self.calls.append(("accept", text))
        return True


def _writer(max_new_tokens: int = 100) -> ProgramWriter:
    return ProgramWriter(CharTokenizer(), REGION, LINES, max_new_tokens, started=0.0)


def _write(writer: ProgramWriter, text: str) -> None:
    """Write ``text`` as forced tokens and resolve what it finishes (no splice: nothing is fed)."""
    ids = [ord(ch) for ch in text]
    writer.forced += len(ids)
    for op in writer.push(ids):
        if isinstance(op, CopyLines):
            writer.consumed = max(writer.consumed, op.end)
        writer.record(op, writer.text_of(op))


def test_ops_resolve_into_events_handed_out_once():
    writer = _writer()
    _write(writer, '<program><copy lines="1-1"/>')
    _write(writer, '<gen>B = 2\n</gen>')
    events = list(writer.flush())
    assert [e.op for e in events] == [CopyLines(1, 1), Gen("B = 2\n")]
    assert [e.index for e in events] == [0, 1]
    assert events[-1].resolved == "a = 1\nB = 2\n" and events[-1].input_lines_consumed == 1
    assert events[0].tokens == TokenCounts(0, 0, len('<program><copy lines="1-1"/>'))
    assert list(writer.flush()) == []


def test_outcome_done_and_out_of_budget():
    writer = _writer(max_new_tokens=40)
    _write(writer, '<program><copy lines="1-1"/><gen>B = 2\n</gen>')
    done = writer.outcome("done", {"decode_steps": 0})
    assert done.region_output == "a = 1\nB = 2\n" and done.warnings == [] and done.breakdown == {"decode_steps": 0}
    assert done.program.ops == (CopyLines(1, 1), Gen("B = 2\n"))
    assert done.raw_output == '<program><copy lines="1-1"/><gen>B = 2\n</gen>'
    out = writer.outcome("max_tokens", {})
    assert out.region_output == "a = 1\nB = 2\nb = 2\nc = 3\n"  # the lines after the last one reached stay
    assert out.warnings == ["the program hit the limit of 40 new tokens before </program>; the rest of the "
                            "input after line 1 was kept unchanged"]


def test_snapshot_and_restore_take_back_everything_written_after():
    writer = _writer()
    _write(writer, '<program><copy lines="1-1"/>')
    state = writer.snapshot()
    _write(writer, '<gen>x\n</gen><copy lines="3-3"/>')
    writer.watch_line_start("<", 7)
    writer.restore(state)
    assert writer.snapshot() == state
    assert writer.ops == [CopyLines(1, 1)] and writer.resolved == "a = 1\n" and writer.consumed == 1
    assert writer.scanner.text == writer.detok.text == '<program><copy lines="1-1"/>'
    assert writer.lookahead is None and len(list(writer.flush())) == 1


def test_a_gen_line_that_starts_an_op_closes_the_gen_instead():
    writer = _writer()
    _write(writer, "<program><gen>B = 2\n")
    before = writer.scanner.snapshot()
    writer.watch_line_start("<", 21)
    assert writer.lookahead is not None and writer.lookahead.position == 21
    _write(writer, "<")
    assert not writer.meant_op("b")  # "<b": a line of text after all
    assert writer.meant_op("copy")
    forced = writer.forced
    matcher = StubMatcher()
    ids = writer.close_gen(matcher)
    assert matcher.calls == [("rollback", 1), ("accept", "</gen>")]
    assert ids == [ord(ch) for ch in "</gen>"] and writer.forced == forced + len(ids)
    assert writer.scanner.snapshot() == before and writer.lookahead is None


def test_lookahead_only_at_a_gen_line_start():
    writer = _writer()
    _write(writer, "<program><gen>B")
    writer.watch_line_start("<", 3)
    assert writer.lookahead is None  # mid-line
    _write(writer, " = 2\n")
    writer.watch_line_start("x", 3)
    assert writer.lookahead is None  # not a "<"
    writer.watch_line_start("</", 3)
    assert writer.lookahead is not None


def test_starts_op():
    assert starts_op("<gen>") and starts_op("<co") and starts_op("</program>") and starts_op("</p")
    assert not starts_op("<g") and not starts_op("<b>") and not starts_op("</div>")
