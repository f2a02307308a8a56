"""The program decoder's drafting (lossless): walk a proposal as if the model chose it, verify
it in one forward, roll back what the model would not have chosen.

After a step, the :class:`engine.decoding.drafter.ProgramDrafter` proposes how the program goes on
(the next copy tag and its line numbers, the input line a gen rewrites, the gen's end).
:meth:`DraftingWalk.draft` walks the proposal under the grammar (forced literals and splices
included) and :meth:`DraftingWalk.verify` feeds everything in ONE forward, keeping the longest
prefix whose every drafted token is the one the model would have chosen there (greedy, under the
same mask); the first rejected position's own choice comes free from that forward. Everything
after it is rolled back: grammar matcher, cache, scanner, detokenizer, ops, events. So the program
is exactly the undrafted greedy program; only the number of forwards changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from engine.decoding.drafter import DraftText, ProgramDrafter, ProgramState
from engine.decoding.program_walker import ProgramWalker, RollbackPoint, longest_allowed_token
from engine.decoding.tables import bit_is_set
from engine.language.program import Gen


@dataclass
class TokenMark:
    """Decoder state just before a drafted token: what verification checks, and where to roll back
    to when it rejects the token (also a step's own token on a verbatim gen body: where the no-op
    gen guard may deviate, engine.decoding.noop_gen)."""

    token: int
    row: int  # which row of the verify forward's logits must choose ``token``
    kv_length: int  # cache length before the token
    bitmask: Any
    banned: set[int]
    in_gen: bool
    state: RollbackPoint
    track: "tuple | None" = None  # (gen, rest, line start) while a gen body spells the input (engine.decoding.noop_gen)
    index: int = 0  # the token's place among the chosen ones (ProgramDecoder.logprobs)


class DraftingWalk(ProgramWalker):
    """A program walk that drafts. The program decoder
    (:class:`engine.decoding.program_decoder.ProgramDecoder`) sets what drafting reads (the
    drafter, the counters) and gives the model's choice and the
    no-op-gen bookkeeping (engine.decoding.noop_gen), which a drafted token goes through as a
    chosen one does."""

    drafter: ProgramDrafter | None
    drafted: int
    draft_accepted: int
    draft_s: float
    logprobs: dict[int, float]
    choice_logprob: float

    def choose(self, logits: torch.Tensor, banned: set[int], bitmask: Any = None, in_gen: bool | None = None) -> int:
        raise NotImplementedError

    def noop_track(self) -> tuple | None:
        raise NotImplementedError

    def note_alternatives(self, mark: TokenMark, logits: torch.Tensor, bitmask: Any) -> None:
        raise NotImplementedError

    def finished_noop_gen(self, n_ops: int) -> bool:
        raise NotImplementedError

    def program_state(self) -> ProgramState:
        ops, scanner = self.writer.ops, self.writer.scanner
        last = ops[-1] if ops else None
        return ProgramState(consumed=self.writer.consumed,
                            last_op="" if last is None else ("gen" if isinstance(last, Gen) else "copy"),
                            tag=scanner.tag, in_gen=scanner.in_gen, gen_text=scanner.body, gen_ids=tuple(self.gen_ids),
                            text=scanner.text)

    def rollback(self, mark: TokenMark) -> None:
        """Return to the state just before ``mark``'s token: nothing after it happened."""
        self.restore(mark.state, mark.kv_length)

    def draft(self) -> list[TokenMark]:
        """Walk the drafter's proposal as if the model chose it, stopping where the grammar, the
        range rule, the budget or (under a teacher) the teacher disagrees. Returns a mark per
        drafted token; the tokens (with their forced literals and splices) are now pending."""
        if self.drafter is None:
            return []
        t, grammar_before = time.perf_counter(), self.grammar_s
        limit = self.max_new_tokens - self.writer.generated - self.writer.forced
        pieces = self.drafter.propose(self.program_state(), limit)
        marks: list[TokenMark] = []
        for piece in pieces:
            if not self._draft_piece(piece, marks):
                break
        if not marks:
            self.drafter.step_without_draft()
        # take_forced timed its literals as grammar time already: count the rest as drafting.
        self.draft_s += time.perf_counter() - t - (self.grammar_s - grammar_before)
        return marks

    def _draft_piece(self, piece, marks: list[TokenMark]) -> bool:
        """Draft one piece; False when drafting must stop here."""
        is_text = isinstance(piece, DraftText)
        text = piece.text.encode("utf-8") if is_text else b""
        ids = [] if is_text else list(piece.ids)
        while text or ids:
            if self.matcher.is_terminated() or self.writer.generated + self.writer.forced >= self.max_new_tokens:
                return False
            banned = self.mask()
            if is_text:
                token = longest_allowed_token(self.tables, text, self.bitmask, banned)
            else:
                token = ids.pop(0)
                if token in banned or not bit_is_set(self.bitmask, token):
                    token = None
            if token is None or (not self.writer.scanner.in_gen and token in self.crossing):
                return False
            if self.writer.meant_op(self.tables.vocab_texts[token]):
                return False
            if self.teacher is not None and self.teacher.choose(self.bitmask, banned) != token:
                return False
            marks.append(TokenMark(token=token, row=len(self.pending) - 1, kv_length=self.position,
                               bitmask=self.bitmask.clone(), banned=banned, in_gen=self.writer.scanner.in_gen,
                               state=self.save(), track=self.noop_track(), index=self.writer.generated))
            before, copies, n_ops = len(self.writer.scanner.text), self.writer.copied, len(self.writer.ops)
            self.take_choice(token)
            if self.finished_noop_gen(n_ops):
                self._undraft(marks.pop())  # the step decides where the gen deviates
                return False
            if self.writer.copied > copies:
                # This token closes a copy: its splice would ride in the verify forward and be
                # wasted if an earlier drafted token is rejected. Leave it to the next step (the
                # verify forward still gives the model's choice here), which feeds the splice
                # together with the next draft.
                self._undraft(marks.pop())
                return False
            written = self.writer.scanner.text[before:].encode("utf-8")
            if is_text:
                if not text.startswith(written):
                    return False  # the grammar forced something the draft did not expect
                text = text[len(written):]
            elif written != self.tables.vocab_bytes[token]:
                return False  # a literal was forced after it: the body draft is over
        return True

    def _undraft(self, mark: TokenMark) -> None:
        """Take back a drafted token that was written but not fed."""
        self.rollback(mark)
        del self.pending[mark.row + 1:], self.pending_chosen[mark.row + 1:]

    def verify(self, marks: list[TokenMark]) -> tuple[torch.Tensor, int | None]:
        """One forward over the step and its draft; keep the drafted tokens the model would have
        chosen. Returns the logits after the kept part and, when a drafted token was rejected, the
        model's own choice there (from the same forward)."""
        rows = [m.row for m in marks] + [len(self.pending) - 1]
        out = self.feed("verify", rows=rows)
        self.drafted += len(marks)
        t = time.perf_counter()
        for i, mark in enumerate(marks):
            if self.teacher is not None:
                break  # the teacher's drafts stopped at its first disagreement: all of them stand
            choice = self.choose(out[i], mark.banned, bitmask=mark.bitmask, in_gen=mark.in_gen)
            self.logprobs[mark.index] = self.choice_logprob  # the drafted token's, or the choice taken instead
            if choice == mark.token and mark.track is not None:
                self.note_alternatives(mark, out[i], mark.bitmask)
            if choice != mark.token:
                self.rollback(mark)
                self.draft_accepted += i
                self.drafter.feedback(len(marks), i)
                self.draft_s += time.perf_counter() - t
                return out[i], choice
        self.draft_accepted += len(marks)
        self.drafter.feedback(len(marks), len(marks))
        self.draft_s += time.perf_counter() - t
        return out[-1], None
