"""Program mode (Copy-as-Decode): the model writes an edit program under the grammar; every
copy enters the KV cache through ONE forward (the splice).

One decode step = choose a token under the grammar mask, then append, in a single forward, that
token + every literal the grammar now forces + (when a copy tag just closed) the copied input
tokens + the literals forced after them. So a forced literal or a splice never costs a step of
its own: the logits in between are never needed.

BPE boundaries: the input is tokenized line by line ("line-aligned"), and a copy of lines I..J
appends the concatenation of those lines' tokens. That tokenization can differ from the
canonical one where BPE would merge across a newline (e.g. ``"\\n" + "    "``), but it is the same
for every span, independent of where a span starts or ends, and it spells the exact text.
Token copies append the canonical tokens of the whole input (their indices are defined on it).
Forced literals are tokenized on their own.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from engine.events import OpResolved, TokenCounts
from engine.grammar import RangeConstraint
from engine.lines import line_offsets, split_lines
from engine.models import LoadedModel
from engine.program import GEN_CLOSE, CopyLines, CopyTokens, Gen, Op, Program
from engine.resolve import resolve, resolve_op
from engine.scanner import ProgramScanner
from engine.session import KVSession
from engine.tables import ModelTables, bit_is_set, unpack_allowed
from engine.tokens import IncrementalDetokenizer, encode, token_pieces


class ProgramTeacher:
    """Replaces the model's choice by the next token of a given program (``forced`` mode): the
    longest grammar-allowed token whose bytes continue the program text."""

    def __init__(self, program: Program, tables: ModelTables):
        self.target = program.serialize().encode("utf-8")
        self.pos = 0
        self.tables = tables

    def advance(self, written: bytes) -> None:
        if self.target[self.pos:self.pos + len(written)] != written:
            raise RuntimeError(f"forced program diverged at byte {self.pos}: wrote {written!r}")
        self.pos += len(written)

    def choose(self, bitmask, banned: set[int]) -> int:
        rest = self.target[self.pos:]
        for length in range(min(len(rest), self.tables.max_token_bytes), 0, -1):
            tok = self.tables.bytes_to_id.get(rest[:length])
            if tok is not None and tok not in banned and bit_is_set(bitmask, tok):
                return tok
        raise RuntimeError(f"forced program: no allowed token continues {rest[:20]!r}")


@dataclass
class DecodeOutcome:
    program: Program
    region_output: str
    raw_output: str
    tokens: TokenCounts
    stop_reason: str
    breakdown: dict
    warnings: list[str]


def decode_program(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                   max_new_tokens: int, cancelled: Callable[[], bool], token_copies: bool = False,
                   teacher_program: Program | None = None, temperature: float = 0.0, seed: int = 0,
                   monotonic: bool = True, logit_bias: dict[int, float] | None = None) -> Iterator[OpResolved | DecodeOutcome]:
    """Yield an :class:`OpResolved` per op, then one :class:`DecodeOutcome`."""
    started = time.perf_counter()
    tokenizer = loaded.tokenizer
    lines = split_lines(region)
    line_ids = [encode(tokenizer, line) for line in lines]
    input_ids = encode(tokenizer, region) if token_copies else []
    pieces = token_pieces(tokenizer, input_ids) if token_copies else None
    if pieces is not None and "".join(pieces) != region:
        token_copies, input_ids, pieces = False, [], None  # tokenizer does not round-trip this text
    piece_ends = _cumulative(pieces) if pieces else []
    offsets = line_offsets(region)

    grammar_s = 0.0
    t0 = time.perf_counter()
    matcher = tables.grammar.matcher(len(lines), len(input_ids))
    bitmask = tables.grammar.new_bitmask()
    grammar_s += time.perf_counter() - t0
    ranges = RangeConstraint(tables.vocab_texts, len(lines), len(input_ids), monotonic=monotonic)
    teacher = ProgramTeacher(teacher_program, tables) if teacher_program is not None else None
    generator = torch.Generator().manual_seed(seed)
    bias = None
    if logit_bias:
        bias = torch.zeros(loaded.vocab_size)
        for tok, value in logit_bias.items():
            bias[int(tok)] = float(value)

    session = KVSession(loaded)
    detok = IncrementalDetokenizer(tokenizer)
    scanner = ProgramScanner()
    ops: list[Op] = []
    resolved = ""
    consumed = 0
    generated = forced = copied = 0

    def absorb(op_list: list[Op], pending: list[int]) -> Iterator[OpResolved]:
        """Resolve finished ops; a line/token copy appends its input tokens to ``pending``."""
        nonlocal resolved, consumed, copied
        for op in op_list:
            text = resolve_op(op, len(ops), lines, pieces, "strict")
            if isinstance(op, CopyLines):
                span = [t for ids in line_ids[op.start - 1:op.end] for t in ids]
                ranges.copied("lines", op.end)
                consumed = max(consumed, op.end)
            elif isinstance(op, CopyTokens):
                span = input_ids[op.start - 1:op.end]
                end_char = piece_ends[op.end - 1]
                consumed = max(consumed, bisect_right(offsets, end_char) - 1)
            else:
                span = []
            pending.extend(span)
            copied += len(span)
            ops.append(op)
            resolved += text
            yield OpResolved(index=len(ops) - 1, op=op, text=text, resolved=resolved,
                             input_lines_consumed=consumed,
                             tokens=TokenCounts(generated, copied, forced),
                             elapsed_s=time.perf_counter() - started)

    def write(ids: list[int], pending: list[int]) -> Iterator[OpResolved]:
        """Feed tokens the program wrote (chosen or forced) through the detokenizer and scanner."""
        pending.extend(ids)
        yield from absorb(scanner.feed(detok.push(ids)), pending)

    def take_forced(pending: list[int]) -> Iterator[OpResolved]:
        """Append every literal the grammar fixes now, stopping at a copy close (splice point)."""
        nonlocal forced, grammar_s
        while True:
            t = time.perf_counter()
            literal = matcher.find_jump_forward_string()
            if literal:
                cut = scanner.copy_close_offset(literal)
                literal = literal[:cut] if cut else literal
                if not matcher.accept_string(literal):
                    raise RuntimeError(f"grammar refused its own forced literal {literal!r}")
            grammar_s += time.perf_counter() - t
            if not literal:
                return
            if teacher is not None:
                teacher.advance(literal.encode("utf-8"))
            ids = encode(tokenizer, literal)
            forced += len(ids)
            yield from write(ids, pending)

    lookahead: _Lookahead | None = None
    pending: list[int] = []
    yield from take_forced(pending)
    logits = session.append(list(prompt_ids) + pending, "prefill")
    stop_reason = "done"
    while not matcher.is_terminated():
        if cancelled():
            stop_reason = "cancelled"
            break
        if generated + forced >= max_new_tokens:
            stop_reason = "max_tokens"
            break
        t = time.perf_counter()
        matcher.fill_next_token_bitmask(bitmask)
        banned: set[int] = set()
        if not scanner.in_gen:
            if teacher is not None:  # (the free path masks crossing tokens on the logits directly)
                banned.update(tables.copy_crossing_ids.tolist())
            if scanner.tag == "<" or scanner.tag.startswith("<copy "):
                banned.update(ranges.banned(scanner.tag, unpack_allowed(bitmask, loaded.vocab_size)))
        if teacher is not None:
            token = teacher.choose(bitmask, banned)
        else:
            token = _choose(logits if bias is None else logits + bias, bitmask, tables, scanner.in_gen, banned, temperature, generator)
            if lookahead is not None and _starts_op(lookahead.text + tables.vocab_texts[token]):
                # The line the model began with "<" is an op: it meant to end the gen first.
                matcher.rollback(1)
                session.crop(lookahead.kv_length)
                scanner.restore(lookahead.scanner)
                detok.restore(lookahead.detok)
                lookahead = None
                grammar_s += time.perf_counter() - t
                pending = []
                if not matcher.accept_string(GEN_CLOSE):
                    raise RuntimeError("grammar refused </gen> after a gen body")
                ids = encode(tokenizer, GEN_CLOSE)
                forced += len(ids)
                yield from write(ids, pending)
                yield from take_forced(pending)
                logits = session.append(pending, "fused")
                continue
        lookahead = None
        if (teacher is None and scanner.in_gen and (scanner.body == "" or scanner.body.endswith("\n"))
                and tables.vocab_texts[token] in ("<", "</")):  # "</" is one token in some vocabularies
            lookahead = _Lookahead(tables.vocab_texts[token], session.length, scanner.snapshot(), detok.snapshot())
        if not matcher.accept_token(token):
            raise RuntimeError(f"grammar refused token {token} ({tables.vocab_texts[token]!r})")
        grammar_s += time.perf_counter() - t
        if teacher is not None:
            teacher.advance(tables.vocab_bytes[token])
        generated += 1
        pending = []
        yield from write([token], pending)
        yield from take_forced(pending)
        if matcher.is_terminated():
            break
        logits = session.append(pending, "step" if len(pending) == 1 else "fused")

    breakdown = session.breakdown()
    breakdown["grammar_s"] = round(grammar_s, 6)
    breakdown["decode_steps"] = generated
    warnings: list[str] = []
    output = resolved
    if stop_reason == "max_tokens":
        output = resolved + "".join(lines[consumed:])
        warnings.append(f"the program hit the limit of {max_new_tokens} new tokens before </program>; "
                        f"the rest of the input after line {consumed} was kept unchanged")
    yield DecodeOutcome(program=Program(tuple(ops)), region_output=output, raw_output=scanner.text,
                        tokens=TokenCounts(generated, copied, forced), stop_reason=stop_reason,
                        breakdown=breakdown, warnings=warnings)


@dataclass
class _Lookahead:
    """State before a gen-body line that starts with ``<``. If the model's next token makes it
    ``<gen``/``<copy``/``</program``, the model meant to start an op: the decoder rolls the ``<``
    back (grammar, cache, text) and closes the gen instead, so a model that forgets ``</gen>``
    does not loop forever inside one gen. Real code lines starting that way are not a concern:
    the grammar forbids those literals inside a gen body anyway."""

    text: str
    kv_length: int
    scanner: object
    detok: object


_OP_STARTS = ("<gen>", "<copy", "</program>", "<program>")


def _starts_op(text: str) -> bool:
    return len(text) >= 3 and any(lit.startswith(text[:len(lit)]) or text.startswith(lit) for lit in _OP_STARTS)


def _cumulative(pieces: Sequence[str]) -> list[int]:
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return ends


def _choose(logits: torch.Tensor, bitmask, tables: ModelTables, in_gen: bool, banned: set[int],
            temperature: float, generator: torch.Generator) -> int:
    """Greedy (or sampled) choice among tokens the grammar and the constraints allow."""
    import xgrammar as xgr

    scores = logits.clone().unsqueeze(0)
    xgr.apply_token_bitmask_inplace(scores, bitmask)
    scores = scores[0]
    if not in_gen and len(tables.copy_crossing_ids):
        scores[tables.copy_crossing_ids] = float("-inf")
    if banned:
        scores[list(banned)] = float("-inf")
    if temperature <= 0:
        return int(torch.argmax(scores))
    probs = torch.softmax(scores / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def check_program(program: Program, region: str, pieces: Sequence[str] | None) -> None:
    """Raise ResolveError early if a program to force does not fit the input."""
    resolve(program, region, "strict", token_pieces=pieces)
