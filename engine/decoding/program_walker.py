"""The walk of one program under the grammar, shared by every program decoder.

A :class:`ProgramWalker` takes the tokens a program's writer chose (the in-process model under
the mask, a vLLM server's stream, or a teacher's program) and does everything that follows from
them the same way for all: the grammar matcher accepts them, the literals the grammar then fixes
are written (tokenized on their own), a closed copy appends its input tokens (the splice), the
range rule follows the ops, and the tokens wait in ``pending`` for the next forward of the
injected ``session``. It can take back what it wrote (:meth:`save`, :meth:`restore`) and a gen
line that turned out to be an op (:meth:`close_gen_instead`).

The session is whatever holds the tokens fed so far: a backend's KV cache
(:class:`engine.runtime.session.Session`, the in-process decoder), a transcript that a server is
sent again with each request (:mod:`engine.decoding.remote_decode`), or a counter of forward
sizes (the model-free walks of :mod:`engine.bench.bounds`). Users:
:class:`engine.decoding.program_decoder.ProgramDecoder` (choice, drafting, no-op gens),
:class:`engine.decoding.remote_decode.RemoteProgramDecoder` (one request per segment) and the
bounds walks; the program text itself is kept by :class:`engine.decoding.program_writer.ProgramWriter`.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from typing import Any, NamedTuple, Protocol, Sequence

from engine.core.lines import line_offsets, split_lines
from engine.core.tokens import encode, token_pieces
from engine.decoding.program_writer import ProgramWriter, WrittenState, accept_forced_literal
from engine.decoding.tables import ModelTables, bit_is_set, unpack_allowed
from engine.language.grammar import RangeConstraint
from engine.language.program import CopyLines, CopyTokens, Gen, Op, Program


class Transcript(Protocol):
    """What the walker feeds its tokens into (see the module doc): ``length`` tokens so far."""

    length: int

    def append(self, ids: Sequence[int], kind: str, rows: Sequence[int] | None = None,
               marks: Sequence[int] = ()) -> Any: ...

    def crop(self, length: int) -> None: ...

    def close(self) -> None: ...


class Recorder(Protocol):
    """Sees every token fed, and every crop (engine.decoding.program_decoder.FeedRecorder)."""

    def fed(self, ids: Sequence[int], chosen: Sequence[bool]) -> None: ...

    def cropped(self, length: int) -> None: ...


class GrammarRefused(RuntimeError):
    """The grammar does not accept the token a writer chose (never under the in-process mask)."""

    def __init__(self, token: int, text: str):
        super().__init__(f"grammar refused token {token} ({text!r})")
        self.token = token


class RuleBroken(RuntimeError):
    """A checked walk's op breaks the range rule, or its program ends where it may not."""


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
        tok = longest_allowed_token(self.tables, self.target[self.pos:], bitmask, banned)
        if tok is None:
            raise RuntimeError(f"forced program: no allowed token continues {self.target[self.pos:self.pos + 20]!r}")
        return tok


def longest_allowed_token(tables: ModelTables, rest: bytes, bitmask, banned: set[int]) -> int | None:
    """The longest token the mask allows whose bytes start ``rest`` (how a text is drafted or forced)."""
    for length in range(min(len(rest), tables.max_token_bytes), 0, -1):
        tok = tables.bytes_to_id.get(rest[:length])
        if tok is not None and tok not in banned and bit_is_set(bitmask, tok):
            return tok
    return None


class RollbackPoint(NamedTuple):
    """What :meth:`ProgramWalker.restore` returns to: the walk just before a token, as if nothing
    after it had happened (the session is cropped to a length the caller keeps besides)."""

    grammar_steps: int  # tokens and forced strings the grammar matcher had accepted
    written: WrittenState  # the program text, ops, events, counts and lookahead
    ranges: tuple  # the range rule's state (RangeConstraint.snapshot)
    teacher_pos: int | None  # byte offset in the teacher's program (forced mode), else None
    gen_tokens: int  # tokens written in the current gen body so far
    ledger: int  # entries in the walker's ledger


class ProgramWalker:
    """One program's walk (per-request state; the tables are shared).

    ``session``: where the tokens go (module doc); ``token_copies``: the grammar allows
    ``<copy tokens=.../>`` too; ``teacher_program``: the program to write instead of choosing
    (``forced`` mode); ``checked``: the writer is not trusted (a server's output, not masked
    here), so every op is checked against the range rule (:class:`RuleBroken`); ``ledger``: when
    a list, what was written is logged into it by kind, ``("chosen", in_gen)``,
    ``("forced", tokens)`` per literal and ``("copied", tokens)`` per copy (taken back on restore).
    """

    def __init__(self, tokenizer: Any, tables: ModelTables, region: str, max_new_tokens: int, session: Transcript,
                 *, vocab_size: int, token_copies: bool = False, teacher_program: Program | None = None,
                 monotonic: bool = True, recorder: Recorder | None = None, checked: bool = False,
                 ledger: list[tuple[str, int]] | None = None, started: float | None = None,
                 ranges: RangeConstraint | None = None):
        self.started = time.perf_counter() if started is None else started
        self.tables, self.tokenizer, self.vocab_size = tables, tokenizer, vocab_size
        self.max_new_tokens = max_new_tokens
        self.lines = split_lines(region)
        self.line_ids = [encode(tokenizer, line) for line in self.lines]
        self.input_ids = encode(tokenizer, region) if token_copies else []
        self.pieces = token_pieces(tokenizer, self.input_ids) if token_copies else None
        if self.pieces is not None and "".join(self.pieces) != region:
            self.input_ids, self.pieces = [], None  # tokenizer does not round-trip this text
        self.piece_ends = _cumulative(self.pieces) if self.pieces else []
        self.offsets = line_offsets(region)

        t0 = time.perf_counter()
        self.matcher = tables.grammar.matcher(len(self.lines), len(self.input_ids))
        self.bitmask = tables.grammar.new_bitmask()
        self.grammar_s = time.perf_counter() - t0
        # A teacher's program is given as it is; a free decode may not keep a line it just rewrote.
        # ``ranges``: another range rule for this input (an apply's two sources: engine.language.apply_ranges).
        self.ranges = ranges if ranges is not None else RangeConstraint(
            tables.vocab_texts, len(self.lines), len(self.input_ids), monotonic=monotonic,
            lines=self.lines if teacher_program is None else None)
        self.teacher = ProgramTeacher(teacher_program, tables) if teacher_program is not None else None
        self.crossing = set(tables.copy_crossing_ids.tolist())
        self.checked, self.ledger = checked, ledger

        self.session, self.recorder = session, recorder
        self.writer = ProgramWriter(tokenizer, region, self.lines, max_new_tokens, self.started, self.pieces)
        self.steps = 0  # grammar steps accepted (tokens and forced strings), for rollback
        self.gen_ids: list[int] = []  # tokens written inside the current gen body
        self.pending: list[int] = []  # tokens for the next forward
        self.pending_chosen: list[bool] = []

    # -- masking --------------------------------------------------------------------------------

    def mask(self) -> set[int]:
        """Fill the grammar's bitmask for the next token; return the ids the range rule bans on top
        (and, under a teacher, the tokens that would straddle a splice point)."""
        self.matcher.fill_next_token_bitmask(self.bitmask)
        self.bitmask &= self.tables.content_bitmask  # no special token inside a program
        banned: set[int] = set()
        if not self.writer.scanner.in_gen:
            if self.teacher is not None:  # (the free path masks crossing tokens on the logits directly)
                banned.update(self.crossing)
            tag = self.writer.scanner.tag
            if tag in ("", "<") or tag.startswith("<copy "):
                banned.update(self.ranges.banned(tag, unpack_allowed(self.bitmask, self.vocab_size)))
        return banned

    # -- writing --------------------------------------------------------------------------------

    def take_choice(self, token: int) -> int:
        """Accept a chosen token under the grammar, write it, and take what the grammar forces next.
        Returns how many forced literals followed it."""
        text = self.tables.vocab_texts[token]
        self.writer.lookahead = None
        if self.teacher is None:  # (a teacher's program is given: no line of it is a forgotten </gen>)
            self.writer.watch_line_start(text, self.position)
        if self.matcher.is_terminated() or not self.matcher.accept_token(token):
            raise GrammarRefused(token, text)
        self.steps += 1
        if self.teacher is not None:
            self.teacher.advance(self.tables.vocab_bytes[token])
        if self.ledger is not None:
            self.ledger.append(("chosen", int(self.writer.scanner.in_gen)))
        self.writer.generated += 1
        self.write([token], chosen=True)
        return self.take_forced()

    def take_forced(self) -> int:
        """Append every literal the grammar fixes now, stopping at a copy close (splice point).
        Returns how many literals it wrote."""
        taken = 0
        while True:
            t = time.perf_counter()
            literal = accept_forced_literal(self.matcher, self.writer.scanner, self.ranges.must_end)
            if literal:
                self.steps += 1
            self.grammar_s += time.perf_counter() - t
            if not literal:
                return taken
            taken += 1
            if self.teacher is not None:
                self.teacher.advance(literal.encode("utf-8"))
            ids = encode(self.tokenizer, literal)
            if self.ledger is not None:
                self.ledger.append(("forced", len(ids)))
            self.writer.forced += len(ids)
            self.write(ids, chosen=False)

    def write(self, ids: list[int], chosen: bool) -> None:
        """Feed tokens the program wrote (chosen or forced) through the detokenizer and scanner."""
        was_in_gen = self.writer.scanner.in_gen
        self.pending.extend(ids)
        self.pending_chosen.extend([chosen] * len(ids))
        finished = self.writer.push(ids)
        if self.writer.scanner.in_gen and not was_in_gen:
            self.gen_ids = []
        elif was_in_gen:
            self.gen_ids.extend(ids)
        self.splice(finished)
        if self.checked and self.writer.scanner.finished and not self.ranges.may_end:
            last = self.writer.ops[-1] if self.writer.ops else "no op"
            raise RuleBroken(f"ended the program after {last} before the last input line ({len(self.lines)}), "
                             "against the grammar")

    def splice(self, finished: list[Op]) -> None:
        """Resolve finished ops; a line/token copy appends its input tokens to the next forward."""
        for op in finished:
            text = self.writer.text_of(op)
            if self.checked:
                self.check(op)
            if isinstance(op, CopyLines):
                span = [t for ids in self.line_ids[op.start - 1:op.end] for t in ids]
                self.writer.consumed = max(self.writer.consumed, op.end)
            elif isinstance(op, CopyTokens):
                span = self.input_ids[op.start - 1:op.end]
                end_char = self.piece_ends[op.end - 1]
                self.writer.consumed = max(self.writer.consumed, bisect_right(self.offsets, end_char) - 1)
            else:
                span = []
            if self.ledger is not None and not isinstance(op, Gen):
                self.ledger.append(("copied", len(span)))
            self.ranges.op_finished(op)
            self.pending.extend(span)
            self.pending_chosen.extend([False] * len(span))
            self.writer.copied += len(span)
            self.writer.record(op, text)

    def check(self, op: Op) -> None:
        """An op the mask did not guard (``checked``): within the range rule?"""
        ranges = self.ranges
        if isinstance(op, CopyLines):
            if op.start < ranges.next_line or op.end < op.start or op.end > len(self.lines):
                raise RuleBroken(f"wrote {op} against the range rule")
        elif isinstance(op, Gen) and ranges.after_gen:
            raise RuleBroken("wrote a gen right after a gen")

    def close_gen_instead(self) -> None:
        """The gen-body line the writer began with ``<`` turned out to be an op: take the ``<``
        back (grammar, fed tokens, text) and close the gen first."""
        la = self.writer.lookahead
        assert la is not None
        self.truncate(la.position)
        ids = self.writer.close_gen(self.matcher)  # one grammar step back, one on: self.steps stays
        self.write(ids, chosen=False)
        self.take_forced()

    # -- feeding --------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Session position the next written token will take."""
        return self.session.length + len(self.pending)

    def feed(self, kind: str, rows: Sequence[int] | None = None, marks: Sequence[int] = ()) -> Any:
        """Everything pending into the session (one forward on a model's); what it returns."""
        ids, chosen = self.pending, self.pending_chosen
        self.pending, self.pending_chosen = [], []
        out = self.session.append(ids, kind, rows=rows, marks=marks)
        if self.recorder is not None:
            self.recorder.fed(ids, chosen)
        return out

    def crop(self, length: int) -> None:
        self.session.crop(length)
        if self.recorder is not None:
            self.recorder.cropped(length)

    def truncate(self, position: int) -> None:
        """Drop every token fed or pending from ``position`` on."""
        fed = self.session.length
        if position <= fed:
            self.crop(position)
            self.pending, self.pending_chosen = [], []
        else:
            del self.pending[position - fed:], self.pending_chosen[position - fed:]

    # -- taking back ----------------------------------------------------------------------------

    def save(self) -> RollbackPoint:
        return RollbackPoint(grammar_steps=self.steps, written=self.writer.snapshot(), ranges=self.ranges.snapshot(),
                             teacher_pos=None if self.teacher is None else self.teacher.pos,
                             gen_tokens=len(self.gen_ids), ledger=0 if self.ledger is None else len(self.ledger))

    def restore(self, point: RollbackPoint, length: int) -> None:
        """Return to ``point``, the session cropped to ``length``: nothing after it happened."""
        self.matcher.rollback(self.steps - point.grammar_steps)
        self.steps = point.grammar_steps
        self.writer.restore(point.written)
        del self.gen_ids[point.gen_tokens:]
        self.ranges.restore(point.ranges)
        if self.teacher is not None:
            self.teacher.pos = point.teacher_pos
        if self.ledger is not None:
            del self.ledger[point.ledger:]
        self.crop(length)


def _cumulative(pieces: Sequence[str]) -> list[int]:
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return ends
