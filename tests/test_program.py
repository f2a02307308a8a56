"""Property tests of the program layer: oracles, parse/serialize, escaping, strict and clipped resolve."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from engine.core.lines import line_offsets, split_lines
from engine.core.tokens import decode, encode, token_pieces
from engine.language.oracle import greedy_token_matches, line_oracle, token_oracle
from engine.language.program import (
    ESCAPE,
    RESERVED_LITERALS,
    CopyLines,
    CopyTokens,
    Gen,
    Program,
    ProgramSyntaxError,
    escape_body,
    may_end_after,
    parse,
    unescape_body,
)
from engine.language.resolve import ResolveError, check_ending, resolve

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that stress the newline convention, the escaping and the tokenizer.
TRICKY = ["\n", "\r\n", "\r", "\t", " ", "    ", "</gen>", "<gen>", "<copy", '<copy lines="1-2"/>', "<program>",
          "</program>", "<", ">", "/", ESCAPE, ESCAPE + ESCAPE, "é", "中文", "😀", "\u00a0", "a", "b", "x = 1",
          "return a + b", "def f():", "\x00"]
chunks = st.one_of(st.sampled_from(TRICKY), st.text(max_size=4))
texts = st.lists(chunks, max_size=12).map("".join)

# Texts built from a small pool of lines, so that input and gold share many lines (realistic edits).
POOL = ["def f(x):\n", "    return x\n", "\n", "\r\n", "\treturn 1\r\n", "    # é 中 😀\n", "}\n", "x = '</gen>'\n",
        "y = '<copy lines=\"1-1\"/>'\n", ESCAPE + "\n", "last line without newline", "a\n", "b\n"]
line_texts = st.lists(st.sampled_from(POOL), max_size=15).map("".join)
related_pairs = st.one_of(
    st.tuples(texts, texts),
    st.tuples(line_texts, line_texts),
    st.tuples(line_texts, texts).map(lambda p: (p[0], p[0] + p[1])),
)

ops = st.one_of(
    st.builds(CopyLines, st.integers(1, 10_000), st.integers(1, 10_000)),
    st.builds(CopyTokens, st.integers(1, 10_000), st.integers(1, 10_000)),
    st.builds(Gen, texts),
)
programs = st.lists(ops, max_size=8).map(lambda o: Program(tuple(o)))

EDGE_TEXTS = ["", "\n", "a", "a\n", "a\nb", "a\nb\n", "a\r\nb\r\n", "a\r\nb", "\tx\n\ty", "héllo\n😀 中文\n",
              "x = '</gen>'\n<copy lines=\"1-1\"/>\n", ESCAPE + "<gen>\n", "\n\n\n", "\r"]


def _bytes_equal(a: str, b: str) -> bool:
    return a.encode("utf-8", "surrogatepass") == b.encode("utf-8", "surrogatepass")


# --- newline convention ---------------------------------------------------------------------------------------

@SETTINGS
@given(texts)
def test_split_lines_tiles_the_text(text):
    lines = split_lines(text)
    assert "".join(lines) == text
    assert all(line for line in lines)
    assert all(line.endswith("\n") for line in lines[:-1])
    assert line_offsets(text)[-1] == len(text)


def test_newline_convention_examples():
    assert split_lines("") == []
    assert split_lines("a\n") == ["a\n"]
    assert split_lines("a\nb") == ["a\n", "b"]
    assert split_lines("a\r\nb\r\n") == ["a\r\n", "b\r\n"]
    assert split_lines("a\rb") == ["a\rb"]  # a lone CR is not a line break


# --- oracle programs resolve to the gold ----------------------------------------------------------------------

@SETTINGS
@given(related_pairs)
def test_line_oracle_resolves_to_gold(pair):
    source, gold = pair
    program = line_oracle(source, gold)
    assert _bytes_equal(resolve(program, source, mode="strict").text, gold)
    # and through its text form, as a model would emit it
    assert _bytes_equal(resolve(program.serialize(), source).text, gold)
    _assert_ends_properly(program, source, gold)


def _assert_ends_properly(program: Program, source: str, gold: str, n_tokens: int = 0) -> None:
    """The oracle ends where the grammar lets a program end (deleting ALL of a non-empty input is
    the one edit no decodable program says)."""
    if source and not gold:
        assert program == Program(())
    else:
        check_ending(program, len(split_lines(source)), n_tokens)


@pytest.mark.parametrize("source,gold", list(itertools.product(EDGE_TEXTS, repeat=2)))
def test_line_oracle_edge_inputs(source, gold):
    program = line_oracle(source, gold)
    assert _bytes_equal(resolve(parse(program.serialize()), source).text, gold)
    _assert_ends_properly(program, source, gold)


def test_line_oracle_copies_unchanged_lines():
    source = "a\nb\nc\n"
    gold = "a\nB\nc\n"
    assert line_oracle(source, gold) == Program((CopyLines(1, 1), Gen("B\n"), CopyLines(3, 3)))
    assert line_oracle("a\nb", "a\nb") == Program((CopyLines(1, 2),))
    # the final line differs only by its terminator: not a copy
    assert line_oracle("a\nb", "a\nb\n") == Program((CopyLines(1, 1), Gen("b\n")))
    assert line_oracle("", "") == Program(())


def test_line_oracle_writes_a_tail_deletion_out():
    """A copy that stops early may not end a program: the last kept line becomes a gen."""
    assert line_oracle("a\nb\nc\n", "a\nb\n") == Program((CopyLines(1, 1), Gen("b\n")))
    assert line_oracle("a\nb\nc\n", "a\n") == Program((Gen("a\n"),))
    assert line_oracle("a\nb\nc\nd\n", "a\nX\nc\n") == Program((CopyLines(1, 1), Gen("X\nc\n")))


def test_may_end_after_and_check_ending():
    assert may_end_after(None, 0) and not may_end_after(None, 3)
    assert may_end_after(Gen("x\n"), 3)
    assert may_end_after(CopyLines(2, 3), 3) and not may_end_after(CopyLines(1, 2), 3)
    assert may_end_after(CopyTokens(5, 9), 3, 9) and not may_end_after(CopyTokens(1, 8), 3, 9)
    check_ending(Program((CopyLines(1, 1), Gen("b\n"))), 3)
    with pytest.raises(ResolveError, match=r'op 2 \(<copy lines="3-4"/>\) stops at line 4 of 5.*last kept line as a gen'):
        check_ending(Program((Gen("x\n"), CopyLines(3, 4))), 5)
    with pytest.raises(ResolveError, match="delete all 2 input lines"):
        check_ending(Program(()), 2)
    check_ending(Program(()), 0)


def test_every_corpus_oracle_ends_properly():
    """Lossless AND decodable: on every real case the line oracle resolves to the gold and ends
    where the grammar lets a program end."""
    from engine.evaluation.corpora import load_corpora

    total = 0
    for cases in load_corpora("all").values():
        for case in cases:
            program = line_oracle(case.input, case.gold)
            assert resolve(program, case.input).text == case.gold, case.id
            _assert_ends_properly(program, case.input, case.gold)
            total += 1
    assert total > 1000


def test_greedy_token_matches_examples():
    assert greedy_token_matches([1, 2, 3, 4], [1, 2, 9, 3, 4], 1) == [(0, 0, 2), (3, 2, 2)]
    assert greedy_token_matches([1, 2, 3, 4], [1, 2, 9, 3, 4], 3) == []
    assert greedy_token_matches([5, 1, 2, 1, 2, 3], [1, 2, 3], 1) == [(0, 3, 3)]  # longest, not first


# --- parse / serialize / escaping -----------------------------------------------------------------------------

@SETTINGS
@given(programs)
def test_parse_serialize_round_trip(program):
    text = program.serialize()
    assert parse(text) == program
    assert parse(text).serialize() == text


@SETTINGS
@given(texts)
def test_escape_round_trip(text):
    body = escape_body(text)
    assert unescape_body(body) == text
    for literal in RESERVED_LITERALS:
        assert literal not in body
    # the body cannot end the gen early nor open a new op inside the program text
    assert parse("<program><gen>" + body + "</gen></program>") == Program((Gen(text),))


@pytest.mark.parametrize("text", list(RESERVED_LITERALS) + ["".join(RESERVED_LITERALS), ESCAPE, ESCAPE + "<gen>",
                                                           "<</gen>", "</gen", "<gen", ESCAPE * 3 + "copy"])
def test_escape_reserved_literals(text):
    body = escape_body(text)
    assert unescape_body(body) == text
    assert not any(literal in body for literal in RESERVED_LITERALS)


# --- strict mode rejects, clipped mode clamps -----------------------------------------------------------------

def _mutations(text: str, data) -> str:
    """A text that is certainly not a valid program, derived from the valid ``text``."""
    kind = data.draw(st.sampled_from(["truncate", "garbage", "prefix", "suffix", "zero", "raw", "number"]))
    if kind == "truncate":  # every proper prefix is invalid: "</program>" only occurs at the end
        return text[: data.draw(st.integers(0, len(text) - 1))]
    if kind == "garbage":  # non-tag text between ops
        return text[: len("<program>")] + data.draw(st.sampled_from(["x", " ", "\n", "<cop", "<gen"])) + \
            text[len("<program>"):]
    if kind == "prefix":
        return data.draw(st.sampled_from(["x", " ", "\ufeff"])) + text
    if kind == "suffix":
        return text + data.draw(st.sampled_from(["x", "\n", "</program>"]))
    if kind == "zero":
        return text.replace("</program>", '<copy lines="0-1"/></program>')
    if kind == "number":
        bad = data.draw(st.sampled_from(['"01-2"', '"1-"', '"-1-2"', '"1-2', '"a-b"', '"1 - 2"', '"1-2" ']))
        return text.replace("</program>", "<copy lines=" + bad + "/></program>")
    return text.replace("</program>", "<gen>" + data.draw(st.sampled_from(RESERVED_LITERALS[:2] + RESERVED_LITERALS[3:]))
                        + "</gen></program>")


@SETTINGS
@given(programs, st.data())
def test_strict_rejects_malformed_programs(program, data):
    bad = _mutations(program.serialize(), data)
    with pytest.raises(ProgramSyntaxError, match="offset"):
        parse(bad)
    with pytest.raises(ProgramSyntaxError):
        resolve(bad, "a\nb\n", mode="clipped")  # syntax errors are not clipped


@SETTINGS
@given(line_texts, st.integers(1, 30), st.integers(1, 30), st.integers(0, 3))
def test_strict_rejects_out_of_range(source, start, end, position):
    n = len(split_lines(source))
    assume(not (start <= end <= n))
    op = CopyLines(start, end)
    before = [Gen("x")] * min(position, 2)
    program = Program(tuple(before) + (op,))
    with pytest.raises(ResolveError) as info:
        resolve(program, source, mode="strict")
    message = str(info.value)
    assert f"op {len(before) + 1}" in message and op.serialize() in message
    if n == 0:
        assert "no lines" in message
    elif start > end:
        assert "reversed" in message
    else:
        assert f"outside 1-{n}" in message


@SETTINGS
@given(st.lists(texts, max_size=4).map("".join), st.integers(1, 40), st.integers(1, 40))
def test_strict_rejects_token_copies(source, start, end):
    pieces = list(source)  # any tiling works for the resolver
    n = len(pieces)
    program = Program((CopyTokens(start, end),))
    if 1 <= start <= end <= n:
        assert resolve(program, source, token_pieces=pieces).text == "".join(pieces[start - 1:end])
    else:
        with pytest.raises(ResolveError, match=r"op 1 \(<copy tokens="):
            resolve(program, source, token_pieces=pieces)
    with pytest.raises(ResolveError, match="tokenization"):
        resolve(program, source)  # token copies need the pieces


def test_strict_error_messages_name_the_op_and_the_fix():
    with pytest.raises(ResolveError, match=r'op 2 \(<copy lines="12-9"/>\): line range 12-9 is reversed \(input has 3 lines\)'):
        resolve('<program><gen>x</gen><copy lines="12-9"/></program>', "a\nb\nc\n")
    with pytest.raises(ResolveError, match=r"op 1 .*outside 1-3"):
        resolve('<program><copy lines="2-4"/></program>', "a\nb\nc\n")
    with pytest.raises(ResolveError, match="no lines"):
        resolve('<program><copy lines="1-1"/></program>', "")


@SETTINGS
@given(line_texts, st.lists(st.tuples(st.integers(1, 25), st.integers(1, 25)), min_size=1, max_size=5))
def test_clipped_mode_clamps_and_warns(source, ranges):
    lines = split_lines(source)
    n = len(lines)
    program = Program(tuple(CopyLines(a, b) for a, b in ranges))
    result = resolve(program, source, mode="clipped")
    expected, bad = [], 0
    for a, b in ranges:
        if not (1 <= a <= b <= n):
            bad += 1
        if n:
            lo, hi = sorted((min(max(a, 1), n), min(max(b, 1), n)))
            expected.append("".join(lines[lo - 1:hi]))
    assert result.text == "".join(expected)
    assert len(result.warnings) == bad
    for warning in result.warnings:
        assert ("clipped to" in warning) if n else ("dropped" in warning)
    if bad == 0:
        assert resolve(program, source, mode="strict").text == result.text


# --- token oracle with the real default tokenizer -------------------------------------------------------------

@pytest.fixture(scope="module")
def default_tokenizer():
    from engine.runtime.sources import load_tokenizer

    return load_tokenizer("default")


@pytest.mark.model
def test_token_oracle_resolves_to_gold(default_tokenizer):
    tok = default_tokenizer

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(related_pairs, st.sampled_from([1, 2, 4, 32]))
    @example(("}\ndef f(x):\n", "}\n"), 2)  # a final 2-token copy cut by the ending rule: gen it whole
    def check(pair, m):
        source, gold = pair
        src_ids, gold_ids = encode(tok, source), encode(tok, gold)
        # The GGUF vocabulary has no byte tokens for 0x04 0x06 0x13 0x14 0x16 0x1d 0xf1 0xf2: such
        # characters (and code points U+40000..U+BFFFF, all unassigned) vanish on encoding, so token
        # copies cannot carry them. Every other text round-trips (checked on TRICKY below).
        assume(decode(tok, src_ids) == source and decode(tok, gold_ids) == gold)
        src_pieces, gold_pieces = token_pieces(tok, src_ids), token_pieces(tok, gold_ids)
        assert "".join(src_pieces) == source and "".join(gold_pieces) == gold
        program = token_oracle(source, gold, src_ids, src_pieces, gold_ids, gold_pieces, min_span=m)
        assert _bytes_equal(resolve(program, source, token_pieces=src_pieces).text, gold)
        assert _bytes_equal(resolve(program.serialize(), source, token_pieces=src_pieces).text, gold)
        _assert_ends_properly(program, source, gold, len(src_ids))
        for op in program.ops:
            if isinstance(op, CopyTokens):
                assert op.end - op.start + 1 >= m

    check()


@pytest.mark.model
@pytest.mark.parametrize("text", TRICKY + POOL + EDGE_TEXTS + ["".join(TRICKY)])
def test_default_tokenizer_round_trips_realistic_text(default_tokenizer, text):
    ids = encode(default_tokenizer, text)
    assert decode(default_tokenizer, ids) == text
    assert "".join(token_pieces(default_tokenizer, ids)) == text
