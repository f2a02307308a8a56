"""The program being written, as both program decoders keep it: the in-process one
(:mod:`engine.decoding.program_decoder`, one forward per step) and the vLLM client loop
(:mod:`engine.decoding.remote_decode`, one request per segment).

A :class:`ProgramWriter` holds what the model wrote so far (detokenizer and scanner), the ops it
resolved and their :class:`OpResolved` events not yet handed out, the token counts, the loop
watch, and the gen-line :class:`Lookahead`; it closes a gen instead of a line that turned out to
be an op, and builds the final :class:`DecodeOutcome` with its warnings. The decoders keep what
differs between them: how tokens reach the model, the grammar matcher, and how a copy's tokens
are spliced in. So the two decoders' ops, events and outcomes are built by the same code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple, Sequence

from engine.checks.guards import ProgramLoopWatch
from engine.core.tokens import IncrementalDetokenizer, encode
from engine.decoding.events import OpResolved, TokenCounts
from engine.decoding.outcome import DecodeOutcome
from engine.language.program import GEN_CLOSE, PROGRAM_CLOSE, Op, Program
from engine.language.resolve import resolve_op
from engine.language.scanner import ProgramScanner

_OP_STARTS = ("<gen>", "<copy", "</program>", "<program>")


def starts_op(text: str) -> bool:
    """Does ``text`` (3 characters at least) begin an op literal, or is it a prefix of one?"""
    return len(text) >= 3 and any(lit.startswith(text[:len(lit)]) or text.startswith(lit) for lit in _OP_STARTS)


def accept_forced_literal(matcher: Any, scanner: ProgramScanner, must_end: bool = False) -> str:
    """The literal the grammar fixes next, cut at a copy close (a splice point), accepted by the
    matcher; "" when the next token is the model's choice. Both program decoders feed it this way.
    ``must_end`` (the range rule's: the last op was a copy that reached the input's end) fixes
    what is left of ``</program>`` too, which the context-free grammar alone would leave open."""
    literal = matcher.find_jump_forward_string()
    if not literal and must_end and not scanner.in_gen and not scanner.finished and PROGRAM_CLOSE.startswith(scanner.tag):
        literal = PROGRAM_CLOSE[len(scanner.tag):]
    if literal:
        cut = scanner.copy_close_offset(literal)
        literal = literal[:cut] if cut else literal
        if not matcher.accept_string(literal):
            raise RuntimeError(f"grammar refused its own forced literal {literal!r}")
    return literal


@dataclass(frozen=True)
class Lookahead:
    """State before a gen-body line that starts with ``<`` (or ``</``). If the model's next token
    makes it ``<gen``/``<copy``/``</program``, the model meant to start an op: the decoder rolls
    the ``<`` back (grammar, fed tokens, text) and closes the gen instead, so a model that forgets
    ``</gen>`` does not loop forever inside one gen. Real code lines starting that way are not a
    concern: the grammar forbids those literals inside a gen body anyway."""

    text: str
    position: int  # where the ``<`` token was fed: a cache length (in-process) or a segment index (remote)
    scanner: tuple
    detok: tuple


class WrittenState(NamedTuple):
    """A :class:`ProgramWriter` at one moment (:meth:`ProgramWriter.snapshot`), to return to
    when the tokens written after it are taken back (a rejected draft)."""

    scanner: tuple
    detok: tuple
    ops: int  # how many ops were resolved
    events: int  # how many events were waiting to be handed out
    resolved: str
    consumed: int
    counts: TokenCounts
    lookahead: Lookahead | None


class ProgramWriter:
    """The program one decode has written so far (per-request state of either program decoder).

    ``lines``: the region's input lines; ``pieces``: its canonical token texts when token copies
    are on (else None); ``started``: the decode's start (``time.perf_counter``), for the events'
    ``elapsed_s``. ``generated``/``forced``/``copied`` count tokens as :class:`TokenCounts` does;
    the decoders add to them as they write."""

    def __init__(self, tokenizer: Any, region: str, lines: Sequence[str], max_new_tokens: int, started: float,
                 pieces: Sequence[str] | None = None):
        self.tokenizer, self.lines, self.pieces = tokenizer, lines, pieces
        self.max_new_tokens, self.started = max_new_tokens, started
        self.detok = IncrementalDetokenizer(tokenizer)
        self.scanner = ProgramScanner()
        self.ops: list[Op] = []
        self.resolved = ""
        self.consumed = 0  # input lines the ops have reached (copies move it forward)
        self.generated = self.forced = self.copied = 0
        self.events: list[OpResolved] = []  # resolved ops not yet handed out
        self.lookahead: Lookahead | None = None
        self.loops = ProgramLoopWatch(region)

    @property
    def counts(self) -> TokenCounts:
        return TokenCounts(self.generated, self.copied, self.forced)

    # -- writing --------------------------------------------------------------------------------

    def push(self, ids: Sequence[int]) -> list[Op]:
        """Add written tokens (chosen or forced) to the program text; the ops they finished."""
        return self.scanner.feed(self.detok.push(ids))

    def text_of(self, op: Op) -> str:
        """What a finished op (the next one) writes into the output."""
        return resolve_op(op, len(self.ops), self.lines, self.pieces, "strict")

    def record(self, op: Op, text: str) -> None:
        """Append a resolved op (its splice, ``consumed`` and counts already taken into account)
        and queue its event."""
        self.ops.append(op)
        self.resolved += text
        self.events.append(OpResolved(index=len(self.ops) - 1, op=op, text=text, resolved=self.resolved,
                                      input_lines_consumed=self.consumed, tokens=self.counts,
                                      elapsed_s=time.perf_counter() - self.started))

    def flush(self) -> Iterator[OpResolved]:
        """Hand out the events queued since the last flush."""
        events, self.events = self.events, []
        yield from events

    def degenerate(self) -> bool:
        """Has the output started repeating itself (engine.checks.guards.ProgramLoopWatch)?"""
        return self.loops.degenerate(self.resolved, self.scanner, self.ops)

    # -- a gen-body line that may be an op -------------------------------------------------------

    def watch_line_start(self, text: str, position: int) -> None:
        """Before writing the token ``text`` at ``position``: remember the state when it begins a
        gen-body line with ``<`` (see :class:`Lookahead`); forget any earlier lookahead."""
        self.lookahead = None
        if self.scanner.in_gen and self.scanner.body.endswith("\n") and text in ("<", "</"):
            # (never at the start of the body: a gen is never empty, so there is nothing to close yet;
            # "</" is one token in some vocabularies)
            self.lookahead = Lookahead(text, position, self.scanner.snapshot(), self.detok.snapshot())

    def meant_op(self, text: str) -> bool:
        """Does the token ``text``, after the pending lookahead's ``<``, show an op starting?"""
        return self.lookahead is not None and starts_op(self.lookahead.text + text)

    def close_gen(self, matcher: Any) -> list[int]:
        """The line the lookahead began was an op: take its ``<`` back (one grammar step and the
        text) and accept ``</gen>`` instead. Returns ``</gen>``'s tokens (counted as forced) for
        the decoder to write; the decoder drops what it fed from ``lookahead.position`` on."""
        la = self.lookahead
        assert la is not None
        matcher.rollback(1)
        self.scanner.restore(la.scanner)
        self.detok.restore(la.detok)
        self.lookahead = None
        if not matcher.accept_string(GEN_CLOSE):
            raise RuntimeError("grammar refused </gen> after a gen body")
        ids = encode(self.tokenizer, GEN_CLOSE)
        self.forced += len(ids)
        return ids

    # -- taking back, ending ---------------------------------------------------------------------

    def snapshot(self) -> WrittenState:
        return WrittenState(scanner=self.scanner.snapshot(), detok=self.detok.snapshot(), ops=len(self.ops),
                            events=len(self.events), resolved=self.resolved, consumed=self.consumed,
                            counts=self.counts, lookahead=self.lookahead)

    def restore(self, state: WrittenState) -> None:
        """Return to ``state``: nothing written after it happened (its events included)."""
        self.scanner.restore(state.scanner)
        self.detok.restore(state.detok)
        del self.ops[state.ops:], self.events[state.events:]
        self.resolved, self.consumed = state.resolved, state.consumed
        self.generated, self.copied, self.forced = state.counts.generated, state.counts.copied, state.counts.forced
        self.lookahead = state.lookahead

    def outcome(self, stop_reason: str, breakdown: dict) -> DecodeOutcome:
        """The decode's result. Out of budget (``max_tokens``), the input lines after the last one
        the program reached are kept as they are, and a warning says so."""
        warnings: list[str] = [self.loops.warning] if self.loops.warning else []
        output = self.resolved
        if stop_reason == "max_tokens":
            output = self.resolved + "".join(self.lines[self.consumed:])
            warnings.append(f"the program hit the limit of {self.max_new_tokens} new tokens before </program>; "
                            f"the rest of the input after line {self.consumed} was kept unchanged")
        return DecodeOutcome(program=Program(tuple(self.ops)), region_output=output, raw_output=self.scanner.text,
                             tokens=self.counts, stop_reason=stop_reason, breakdown=breakdown, warnings=warnings)
