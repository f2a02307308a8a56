"""Correctness of the decoding engine on the CPU: splice equivalence, constraint soundness,
lossless speculative decoding, forced oracle programs, streaming and cancel."""

from __future__ import annotations

import random

import pytest
import torch
from support import ADD_AND_SUB as BUGGY

from engine.api import EditError, EditRequest, Engine
from engine.core.lines import split_lines
from engine.core.tokens import encode, token_pieces
from engine.decoding.events import EditFinished, OpResolved
from engine.decoding.tables import tables_for
from engine.evaluation.corpora import load_corpus
from engine.language.grammar import program_ebnf
from engine.language.oracle import line_oracle, token_oracle
from engine.language.program import CopyLines, may_end_after, parse
from engine.language.resolve import resolve
from engine.runtime.backends.transformers_backend import TransformersRuntime
from engine.runtime.loaded import LoadedModel

# Appending N tokens in one forward vs one at a time differs only by float reassociation; on CPU
# fp32 the measured gap is ~2e-5 (ENVIRONMENT.md), so 1e-4 is tight without being flaky.
LOGIT_TOLERANCE = 1e-4


@pytest.mark.parametrize("seed", [0, 1])
def test_splice_logits_equal_one_token_at_a_time(default_engine: Engine, seed: int) -> None:
    """A mix of gen steps (1 token), splices (a run of input-line tokens) and forced literals
    (a short multi-token run) gives the same next-token logits as feeding every token alone."""
    tok = default_engine.loaded.tokenizer
    rng = random.Random(seed)
    lines = split_lines(load_corpus("humanevalfix-python")[seed].input)
    prompt = encode(tok, "Edit this code.\n")
    segments: list[list[int]] = []
    for _ in range(6):
        kind = rng.choice(["gen", "splice", "forced"])
        if kind == "gen":
            segments.append([rng.randrange(200, 40000)])
        elif kind == "splice":
            i = rng.randrange(len(lines))
            j = min(len(lines), i + rng.randrange(1, 4))
            segments.append([t for line in lines[i:j] for t in encode(tok, line)])
        else:
            segments.append(encode(tok, rng.choice(['</gen>', ' lines="', '"/>', "<gen>"])))
    fused, single = default_engine.loaded.session(), default_engine.loaded.session()
    fused.append(prompt, "prefill")
    single.append(prompt, "prefill")
    for segment in segments:
        a = fused.append(segment, "fused")
        for t in segment:
            b = single.append([t], "step")
        assert fused.length == single.length
        gap = float((a - b).abs().max())
        assert gap < LOGIT_TOLERANCE, f"logits differ by {gap} after a {len(segment)}-token append"
        assert int(a.argmax()) == int(b.argmax())


@pytest.fixture(scope="module")
def tiny_random_engine(default_engine: Engine) -> Engine:
    """A randomly initialised 2-layer llama with the default tokenizer: sampling it at
    temperature 1 exercises the grammar far from anything a trained model would write."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=default_engine.loaded.vocab_size, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192)
    model = LlamaForCausalLM(config).eval()
    return Engine(LoadedModel("tiny-random", model, default_engine.loaded.tokenizer, "cpu", torch.float32,
                              TransformersRuntime(model, "cpu")))


def _structure_bias(engine: Engine) -> dict[int, float]:
    """Push a random model towards tags and digits so programs contain copies, not only gens."""
    tok = engine.loaded.tokenizer
    ids = {i for s in ["<", "</", "gen", "copy", '"', "-", '"/>', "/>", ">", "program"] + list("0123456789")
           for i in encode(tok, s)}
    return {i: 9.0 for i in ids}


@pytest.mark.parametrize("n_lines", [1, 7, 1000])
def test_sampled_programs_always_parse_and_resolve(tiny_random_engine: Engine, n_lines: int) -> None:
    text = "".join(f"line {i} = {i * 7 % 13}\n" for i in range(1, n_lines + 1))
    bias = _structure_bias(tiny_random_engine)
    saw_copy = False
    tables = tables_for(tiny_random_engine.loaded)
    for seed in range(3 if n_lines > 100 else 10):
        result = tiny_random_engine.edit(EditRequest(text, "Rewrite.", mode="program", temperature=1.0, seed=seed,
                                                     max_new_tokens=48, logit_bias=bias))
        program = result.program
        assert parse(program.serialize()) == program
        resolved = resolve(program, text, "strict").text  # raises on any out-of-range op
        if result.stop_reason == "done":
            assert resolved == result.region_output
        previous_end = 0
        for op in program.ops:
            if isinstance(op, CopyLines):
                saw_copy = True
                assert 1 <= op.start <= op.end <= n_lines
                assert op.start > previous_end, "line copies must move forward"
                previous_end = op.end
        checker = tables.grammar.matcher(n_lines)
        assert checker.accept_string(result.raw_output), f"not a grammar prefix: {result.raw_output!r}"
        if result.stop_reason == "done":
            assert resolve(parse(result.raw_output), text, "strict").text == result.region_output
    assert saw_copy, "the bias should make at least one sampled program copy"


@pytest.mark.parametrize("monotonic", [True, False])
def test_a_program_pushed_to_end_cannot_end_early(tiny_random_engine: Engine, monotonic: bool) -> None:
    """A random model pushed hard towards ``</program>`` (every token that starts with ``/`` or
    ``</`` gets +30) still cannot end after a copy that stopped early or before its first op: it
    ends after a gen or after a copy of the last line."""
    text = "".join(f"line {i} = {i * 7 % 13}\n" for i in range(1, 8))
    texts = tables_for(tiny_random_engine.loaded).vocab_texts
    bias = {i: 30.0 for i, t in enumerate(texts) if t.startswith(("/", "</"))}
    bias.update({i: 6.0 for s in ['"', "-", '"/>', "copy"] + list("0123456789")
                 for i in encode(tiny_random_engine.loaded.tokenizer, s)})
    finished = 0
    for seed in range(8):
        result = tiny_random_engine.edit(EditRequest(text, "Rewrite.", mode="program", temperature=1.0, seed=seed,
                                                     max_new_tokens=64, logit_bias=bias, monotonic=monotonic))
        if result.stop_reason != "done":
            continue
        finished += 1
        ops = result.program.ops
        assert ops and may_end_after(ops[-1], 7), result.raw_output
        assert result.raw_output.count("</program>") == 1
    assert finished >= 4, "the bias should make most sampled programs end"


def test_forced_program_that_ends_early_is_refused(default_engine: Engine) -> None:
    from engine.language.resolve import ResolveError

    with pytest.raises(ResolveError, match=r"stops at line 1 of 2.*last kept line as a gen"):
        default_engine.edit(EditRequest("a\nb\n", "x", mode="forced", program=parse('<program><copy lines="1-1"/></program>')))
    tail_deleted = default_engine.edit(EditRequest("a\nb\n", "x", mode="forced",
                                                   program=parse("<program><gen>a\n</gen></program>")))
    assert tail_deleted.output_text == "a\n"


def test_grammar_rejects_out_of_range_and_leading_zeros(default_engine: Engine) -> None:
    tables = tables_for(default_engine.loaded)
    for bad in ['<program><copy lines="8-', '<program><copy lines="0', '<program><copy lines="01',
                '<program><gen>x<gen>', '<program><gen>x</program>']:
        assert not tables.grammar.matcher(7).accept_string(bad), bad
    assert tables.grammar.matcher(7).accept_string('<program><copy lines="7-7"/><gen>a</gen></program>')
    assert "tnum" not in program_ebnf(7) and "tnum" in program_ebnf(7, 30)


def test_every_program_opens_with_the_forced_opening(default_engine: Engine) -> None:
    """The decoder feeds PROGRAM_OPENING with the prompt (the localizer reads it too, so that its
    forward can stand in for the prefill): it is what the grammar forces first, at every size."""
    from engine.decoding.program_writer import accept_forced_literal
    from engine.language.program import PROGRAM_OPENING
    from engine.language.scanner import ProgramScanner

    grammar = tables_for(default_engine.loaded).grammar
    for n in (0, 1, 7, 120):
        assert accept_forced_literal(grammar.matcher(n), ProgramScanner()) == PROGRAM_OPENING


def test_prefetched_grammar_is_the_one_the_matcher_uses(default_engine: Engine) -> None:
    """A grammar compiled in the background (the edit's start, engine.decoding.run) is the request's
    grammar: same limits, and a matcher asked for while the compile runs waits for it."""
    grammar = tables_for(default_engine.loaded).grammar
    for n in (7, 3, 7, 12):
        grammar.prefetch(n)
    for n in (12, 3):
        assert not grammar.matcher(n).accept_string(f'<program><copy lines="{n + 1}-')
        assert grammar.matcher(n).accept_string(f'<program><copy lines="{n}-{n}"/><gen>a</gen></program>')


def _short_cases(name: str, k: int, max_chars: int = 1200):
    cases = [c for c in load_corpus(name) if len(c.gold) <= max_chars]
    return cases[:k]


def test_speculative_equals_ar(default_engine: Engine) -> None:
    """Lossless: same bytes as greedy AR on real corpus cases, with drafts accepted overall."""
    copied = 0
    for case in _short_cases("humanevalfix-python", 3) + _short_cases("canitedit", 1, 700):
        ar = default_engine.edit(EditRequest(case.input, case.instruction, mode="ar", max_new_tokens=120))
        spec = default_engine.edit(EditRequest(case.input, case.instruction, mode="speculative", max_new_tokens=120))
        assert spec.raw_output == ar.raw_output, case.id
        assert spec.output_text == ar.output_text, case.id
        copied += spec.tokens.copied
    assert copied > 0, "drafts from the input should be accepted"


FORCED_CASES = (_short_cases("humanevalfix-python", 6) + _short_cases("humanevalfix-js", 3)
                + _short_cases("canitedit", 2, 1500))


@pytest.mark.parametrize("case", FORCED_CASES, ids=lambda c: c.id)
def test_forced_oracle_program_resolves_to_gold(default_engine: Engine, case) -> None:
    program = line_oracle(case.input, case.gold)
    result = default_engine.edit(EditRequest(case.input, case.instruction, mode="forced", program=program))
    assert result.output_text == case.gold
    assert result.program == program
    assert result.tokens.copied > 0


def test_forced_token_oracle_program(default_engine: Engine) -> None:
    tok = default_engine.loaded.tokenizer
    case = load_corpus("humanevalfix-python")[2]
    si, gi = encode(tok, case.input), encode(tok, case.gold)
    program = token_oracle(case.input, case.gold, si, token_pieces(tok, si), gi, token_pieces(tok, gi), 4)
    result = default_engine.edit(EditRequest(case.input, case.instruction, mode="forced", program=program))
    assert result.output_text == case.gold


@pytest.mark.parametrize("mode", ["program", "speculative", "ar"])
def test_events_concatenate_to_the_result(default_engine: Engine, mode: str) -> None:
    events = list(default_engine.stream(EditRequest(BUGGY, "Fix the bug in add.", mode=mode, max_new_tokens=120)))
    ops = [e for e in events if isinstance(e, OpResolved)]
    result = events[-1].result
    assert isinstance(events[-1], EditFinished)
    if result.stop_reason == "done":
        assert "".join(e.text for e in ops) == result.region_output
    for a, b in zip(ops, ops[1:]):
        assert b.resolved.startswith(a.resolved) and b.index == a.index + 1


def test_a_copy_to_the_end_ends_the_program_unspliced(default_engine: Engine) -> None:
    """A copy that reaches the last line ends the program: ``</program>`` is forced after it and
    its lines never enter the cache (no forward would use them), whether the model wrote the
    program or a teacher forced it; a gold that appends after the last line is written with the
    last line in the final gen (engine.language.oracle)."""
    from engine.language.oracle import line_oracle

    runtime = default_engine.loaded.runtime
    tok = default_engine.loaded.tokenizer
    lines = split_lines(BUGGY)
    program = parse(f'<program><copy lines="1-2"/><gen>    return a + b\n</gen><copy lines="4-{len(lines)}"/></program>')
    tail = len(encode(tok, "".join(lines[3:])))
    runtime.prefixes.clear()  # the whole prompt is fed, so every written token is counted once
    with runtime.meter() as log:
        forced = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="forced", program=program,
                                                 draft=False))
    assert forced.raw_output == program.serialize() and forced.program == program
    assert forced.output_text == BUGGY.replace("a - b", "a + b", 1)
    written = forced.prompt_tokens + forced.tokens.generated + forced.tokens.copied + forced.tokens.forced
    # without the rule only the copy's close and </program> (a few tokens) would go unfed
    assert sum(log.sizes()) <= written - tail, "the final copy's lines were fed"
    free = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", max_new_tokens=160))
    ops = free.program.ops
    assert ops and not any(isinstance(op, CopyLines) and op.end == len(lines) for op in ops[:-1])
    appended = line_oracle("a\nb\n", "a\nb\nc\n")
    assert appended.serialize() == '<program><copy lines="1-1"/><gen>b\nc\n</gen></program>'
    result = default_engine.edit(EditRequest("a\nb\n", "x", mode="forced", program=appended))
    assert result.output_text == "a\nb\nc\n"


def test_a_copy_is_handed_out_before_its_splice(default_engine: Engine) -> None:
    """A copy the model chose is final: its op event reaches the editor before the forward that
    splices its lines into the cache (seconds for a long copy on a CPU), not after it."""
    from engine.decoding.program_decoder import FeedRecorder
    from engine.decoding.run import run_edit

    log: list[tuple[str, object]] = []

    class LoggingRecorder(FeedRecorder):
        def fed(self, ids, chosen) -> None:
            super().fed(ids, chosen)
            log.append(("fed", len(self.ids)))

    program = parse('<program><copy lines="1-2"/><gen>    return a + b\n</gen><copy lines="4-7"/></program>')
    request = EditRequest(BUGGY, "Fix the bug in add.", mode="forced", program=program)
    for event in run_edit(default_engine.loaded, request, lambda: False, recorder=LoggingRecorder()):
        if isinstance(event, OpResolved):
            log.append(("op", event.op))
    first_copy = next(k for k, (kind, what) in enumerate(log) if kind == "op" and what == CopyLines(1, 2))
    fed_before = [n for kind, n in log[:first_copy] if kind == "fed"]
    fed_after = [n for kind, n in log[first_copy:] if kind == "fed"]
    assert fed_after, "the copy's splice was fed before its event was handed out"
    tok = default_engine.loaded.tokenizer
    span = len(encode(tok, "".join(split_lines(BUGGY)[:2])))
    assert fed_after[0] - (fed_before[-1] if fed_before else 0) >= span - 1  # the splice comes after


@pytest.mark.parametrize("mode,draft", [("program", False), ("program", True), ("speculative", True), ("ar", True)])
def test_cancel_stops_within_one_step(default_engine: Engine, mode: str, draft: bool) -> None:
    """Cancel is polled before every forward: once it is set, no forward follows. (A drafted
    step can accept several tokens in its one forward, so only undrafted steps are one token.)"""
    state = {"cancel": False, "steps_at_cancel": None, "polls_after": 0}

    def on_event(event) -> None:
        if isinstance(event, OpResolved) and not state["cancel"]:
            state["cancel"], state["steps_at_cancel"] = True, event.tokens.generated

    def cancelled() -> bool:
        if state["cancel"]:
            state["polls_after"] += 1
        return state["cancel"]

    text = "".join(f"x{i} = {i}\n" for i in range(40))
    result = default_engine.edit(EditRequest(text, "Add 1 to every number.", mode=mode, max_new_tokens=400, draft=draft),
                                 on_event=on_event, cancelled=cancelled)
    assert result.stop_reason == "cancelled"
    assert result.output_text == text
    assert state["polls_after"] == 1, "the decoder must stop at the first poll after the cancel"
    if not draft:
        assert result.tokens.generated - state["steps_at_cancel"] <= 1


def test_forced_program_out_of_range_is_refused(default_engine: Engine) -> None:
    from engine.language.resolve import ResolveError

    with pytest.raises(ResolveError, match="outside"):
        default_engine.edit(EditRequest("a\nb\n", "x", mode="forced", program=parse('<program><copy lines="1-3"/></program>')))


def test_request_validation() -> None:
    with pytest.raises(EditError, match="invalid"):
        EditRequest("a\nb\n", "x", lines=(2, 1)).validate()
    with pytest.raises(EditError, match="too large"):
        EditRequest("x\n" * 6000, "x").validate()
    with pytest.raises(EditError, match="unknown mode"):
        EditRequest("a\n", "x", mode="magic").validate()
    with pytest.raises(EditError, match="unknown focus policy"):
        EditRequest("a\n", "x", focus_policy="nearest").validate()  # type: ignore[arg-type]
