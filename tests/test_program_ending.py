"""A program cannot end by accident: ``</program>`` only after a gen, after a copy
that reached the last line, or at once for an empty input. Checked on the real grammar with the
real vocabularies (SmolLM2's and Qwen2.5's), including tokens that merge ``<`` with ``/``, and on
the vLLM segment grammars. And a copy that reached the last line ends the program: the
decoders force ``</program>`` there, so that copy is never spliced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.decoding.remote_decode import segment_ebnf
from engine.decoding.tables import unpack_allowed
from engine.language.grammar import GrammarCompilerCache, RangeConstraint
from engine.language.program import CopyLines, Gen
from engine.language.scanner import ProgramScanner

QWEN = Path(__file__).resolve().parents[1].parent / "shared" / "tokenizers" / "qwen2.5"
N = 5


def _tokenizer(name: str):
    if name == "smollm2":
        from engine.runtime.sources import load_tokenizer

        return load_tokenizer("default")
    if not QWEN.is_dir():
        pytest.skip(f"no Qwen2.5 tokenizer at {QWEN}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN))


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5"])
def vocab(request):
    tok = _tokenizer(request.param)
    grammar = GrammarCompilerCache(tok, len(tok))
    texts = [bytes(b).decode("utf-8", errors="replace") for b in grammar.info.decoded_vocab]
    return grammar, texts


def _choosable(grammar: GrammarCompilerCache, texts: list[str], program: str, n: int = N) -> list[str]:
    """Texts of the tokens the in-process decoder may choose after ``program`` (grammar mask, range
    rule, no token that straddles a copy close), walking the ops through the range rule as the
    decoder does."""
    matcher = grammar.matcher(n)
    assert matcher.accept_string(program), program
    ranges = RangeConstraint(texts, n, 0)
    scanner = ProgramScanner()
    for op in scanner.feed(program):
        ranges.op_finished(op)
    bitmask = grammar.new_bitmask()
    matcher.fill_next_token_bitmask(bitmask)
    allowed = unpack_allowed(bitmask, len(texts))
    banned = set(ranges.banned(scanner.tag, allowed)) if scanner.tag in ("", "<") else set()
    return [texts[t] for t in allowed.tolist() if t not in banned and not ("/>" in texts[t] and not texts[t].endswith("/>"))]


def _ends(tag: str, choosable: list[str]) -> list[str]:
    """The choosable tokens that (after ``tag``) begin ``</program>``."""
    return [t for t in choosable if (tag + t).startswith("</")]


@pytest.mark.model
@pytest.mark.parametrize("program, may_end", [
    ("<program><", False),  # at once over a non-empty input
    ('<program><copy lines="1-3"/><', False),  # a copy that stopped early
    ('<program><gen>x\n</gen><copy lines="2-4"/><', False),
    ('<program><copy lines="1-5"/><', True),  # a copy that reached the last line (it must end there)
    ('<program><copy lines="1-2"/><gen>y\n</gen><', True),  # after a gen (a deliberate tail deletion)
])
def test_end_only_where_allowed(vocab, program: str, may_end: bool) -> None:
    grammar, texts = vocab
    ends = _ends("<", _choosable(grammar, texts, program))
    assert bool(ends) == may_end, ends[:10]


@pytest.mark.model
def test_merged_tokens_are_masked_like_what_they_spell(vocab) -> None:
    """Tokens such as ``</`` or ``</program>`` exist; read from an empty tag (before the ``<`` the
    grammar forces) they are masked too, while ``<copy``/``<gen>`` spellings stay allowed."""
    _, texts = vocab
    merged = [i for i, t in enumerate(texts) if t.startswith("</")]
    assert merged, "expected the vocabulary to merge '<' and '/'"
    candidates = np.array(merged + [i for i, t in enumerate(texts) if t in ("<", "<gen", "<copy")], dtype=np.int64)
    ranges = RangeConstraint(texts, N, 0)
    ranges.op_finished(CopyLines(1, 3))
    banned = set(ranges.banned("", candidates))
    assert set(merged) <= banned
    assert not banned & {i for i, t in enumerate(texts) if t in ("<", "<gen", "<copy")}
    ranges.op_finished(Gen("x\n"))
    assert not set(ranges.banned("", candidates)) & set(merged)


def test_range_rule_state_rolls_back() -> None:
    texts = ["/", "/program>", "gen>", "copy"]
    ranges = RangeConstraint(texts, N, 0)
    everything = np.arange(len(texts))
    assert ranges.banned("<", everything) == [0, 1]
    saved = ranges.snapshot()
    ranges.op_finished(CopyLines(1, N))
    assert ranges.banned("<", everything) == [2, 3]  # a copy that reached the end: only the end
    ranges.restore(saved)
    assert ranges.banned("<", everything) == [0, 1]
    assert RangeConstraint(texts, 0, 0).banned("<", everything) == [3]  # empty input: end at once


@pytest.mark.model
def test_segment_grammars_follow_the_same_rule(vocab) -> None:
    grammar, _ = vocab
    compiler = grammar.compiler

    def accepts(ebnf: str, text: str) -> bool:
        return grammar.xgr.GrammarMatcher(compiler.compile_grammar(ebnf)).accept_string(text)

    early = segment_ebnf(N, 4, after_gen=False, may_end=False)
    assert not accepts(early, "/program>")
    assert accepts(early, 'copy lines="4-5"/>')
    assert accepts(early, "gen>x\n</gen></program>")  # a gen, then the end: a deliberate deletion
    assert accepts(segment_ebnf(N, 6, after_gen=False, may_end=True), "/program>")
    with pytest.raises(ValueError, match="no program continues"):  # the client never gets there
        segment_ebnf(N, 1, after_gen=False, may_end=False, tag="</")


def test_a_copy_to_the_end_forces_the_end() -> None:
    from engine.language.program import CopyTokens, must_end_after

    assert must_end_after(CopyLines(2, N), N) and must_end_after(CopyLines(N, N), N)
    assert not must_end_after(CopyLines(1, N - 1), N) and not must_end_after(Gen("x\n"), N)
    assert not must_end_after(None, N) and not must_end_after(None, 0)
    assert must_end_after(CopyTokens(3, 9), N, 9) and not must_end_after(CopyTokens(3, 8), N, 9)
    ranges = RangeConstraint(["/", "gen>", "copy"], N, 0, monotonic=False)
    ranges.op_finished(CopyLines(1, N))
    assert ranges.must_end and ranges.banned_ops() == "gc"  # not even a copy of earlier lines
    ranges.op_finished(Gen("x\n"))  # (a state no decoder reaches: the rule is per last op)
    assert not ranges.must_end


@pytest.mark.model
def test_the_forced_end_after_a_copy_to_the_end(vocab) -> None:
    """``accept_forced_literal`` writes what is left of ``</program>`` where the range rule says
    the program must end, whether or not the grammar forced the ``<`` already, and nothing else
    anywhere else."""
    from engine.decoding.program_writer import accept_forced_literal

    grammar, _ = vocab
    for program in ('<program><copy lines="2-5"/>', '<program><copy lines="2-5"/><'):
        matcher, scanner = grammar.matcher(N), ProgramScanner()
        assert matcher.accept_string(program)
        scanner.feed(program)
        written = ""
        while literal := accept_forced_literal(matcher, scanner, must_end=True):
            scanner.feed(literal)
            written += literal
        assert program + written == '<program><copy lines="2-5"/></program>'
        assert matcher.is_terminated() and scanner.finished
    matcher, scanner = grammar.matcher(N), ProgramScanner()
    assert matcher.accept_string('<program><copy lines="2-4"/><')
    scanner.feed('<program><copy lines="2-4"/><')
    assert accept_forced_literal(matcher, scanner, must_end=False) == ""  # the model's choice
