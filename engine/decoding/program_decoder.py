"""Program mode (Copy-as-Decode): the model writes an edit program under the grammar; every
copy enters the KV cache through ONE forward (the splice).

One decode step = choose a token under the grammar mask, then append, in a single forward, that
token + every literal the grammar now forces + (when a copy tag just closed) the copied input
tokens + the literals forced after them. So a forced literal or a splice never costs a step of
its own: the logits in between are never needed.

Drafting (lossless, :mod:`engine.decoding.program_drafting`): after a step the decoder walks a
proposal of how the program goes on as if the model had chosen it, feeds everything in the SAME
forward and keeps the longest prefix the model would have chosen; so the program is exactly the
undrafted greedy program, only the number of forwards changes.

BPE boundaries: the input is tokenized line by line ("line-aligned"), and a copy of lines I..J
appends the concatenation of those lines' tokens. That tokenization can differ from the
canonical one where BPE would merge across a newline (e.g. ``"\\n" + "    "``), but it is the same
for every span, independent of where a span starts or ends, and it spells the exact text.
Token copies append the canonical tokens of the whole input (their indices are defined on it).
Forced literals are tokenized on their own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch

from engine.core.lines import split_lines
from engine.decoding.drafter import ProgramDrafter
from engine.decoding.events import OpResolved
from engine.decoding.noop_gen import NoOpGenGuard
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_drafting import DraftingWalk, TokenMark
from engine.decoding.tables import ModelTables
from engine.language.grammar import RangeConstraint
from engine.language.program import Gen, Program
from engine.language.resolve import check_ending, resolve
from engine.runtime.loaded import LoadedModel
from engine.runtime.session import Session


@dataclass
class FeedRecorder:
    """Mirrors exactly what the decoder feeds the model, in order, with crops applied: ``chosen[i]``
    is True where token ``i`` was chosen (by the model, or the teacher standing in for it), False
    for the prompt, forced literals and spliced copies. Training data is recorded through it, so
    training and inference feed the same sequence by construction."""

    ids: list[int] = field(default_factory=list)
    chosen: list[bool] = field(default_factory=list)

    def fed(self, ids: Sequence[int], chosen: Sequence[bool]) -> None:
        self.ids.extend(ids)
        self.chosen.extend(chosen)

    def cropped(self, length: int) -> None:
        del self.ids[length:], self.chosen[length:]


def decode_program(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                   max_new_tokens: int, cancelled: Callable[[], bool], token_copies: bool = False,
                   teacher_program: Program | None = None, temperature: float = 0.0, seed: int = 0,
                   monotonic: bool = True, logit_bias: dict[int, float] | None = None, draft: bool = True,
                   recorder: FeedRecorder | None = None, focus_line: int | None = None,
                   prompt_marks: Sequence[int] = ()) -> Iterator[OpResolved | DecodeOutcome]:
    """Yield an :class:`OpResolved` per op, then one :class:`DecodeOutcome`. ``focus_line``
    (1-based in ``region``): the line the user pointed at (engine.decoding.noop_gen). ``prompt_marks``:
    where the prompt's prefill cuts its chunks too (engine.runtime.session.Session.append)."""
    decoder = ProgramDecoder(loaded, tables, region, prompt_ids, max_new_tokens, cancelled,
                             token_copies=token_copies, teacher_program=teacher_program,
                             temperature=temperature, seed=seed, monotonic=monotonic, logit_bias=logit_bias,
                             draft=draft, recorder=recorder, focus_line=focus_line, prompt_marks=prompt_marks)
    return decoder.run()


class ProgramDecoder(DraftingWalk):
    """One program-mode decode (per-request state; the model and tables are shared).

    The steps a reader looks for: :meth:`mask` (what the grammar and the range rule allow now),
    :meth:`choose` (greedy or sampled under the mask), :meth:`take_choice` (accept the token and
    write it), :meth:`take_forced` (the literals the grammar fixes), :meth:`splice` (a finished copy
    appends its input tokens), :meth:`feed` (the one forward of a step), :meth:`draft`,
    :meth:`verify` and :meth:`rollback`. The walk itself (taking, forcing, splicing, feeding,
    taking back) is the :class:`engine.decoding.program_walker.ProgramWalker` every program
    decoder shares, drafting its :class:`engine.decoding.program_drafting.DraftingWalk`; this
    class adds the model's choice and no-op gens."""

    def __init__(self, loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                 max_new_tokens: int, cancelled: Callable[[], bool], *, token_copies: bool = False,
                 teacher_program: Program | None = None, temperature: float = 0.0, seed: int = 0,
                 monotonic: bool = True, logit_bias: dict[int, float] | None = None, draft: bool = True,
                 recorder: FeedRecorder | None = None, focus_line: int | None = None,
                 prompt_marks: Sequence[int] = (), session: Session | None = None,
                 ledger: list[tuple[str, int]] | None = None, ranges: RangeConstraint | None = None,
                 drafter: ProgramDrafter | None = None):
        """``session``: where the forwards go (default: a fresh session of ``loaded``; the model-free
        walks of engine.bench.bounds pass one that only counts); ``ledger``: see ProgramWalker;
        ``ranges``: the range rule, when not the edit's (an apply's); ``drafter``: what drafts, when
        not the edit's own (an apply drafts the aligner's program: engine.apply.drafts)."""
        started = time.perf_counter()
        self.loaded = loaded
        if session is None:
            session = loaded.session()
            session.cancelled = cancelled  # the prompt's prefill stops between chunks (Cancelled)
        super().__init__(loaded.tokenizer, tables, region, max_new_tokens, session, vocab_size=loaded.vocab_size,
                         token_copies=token_copies, teacher_program=teacher_program, monotonic=monotonic,
                         recorder=recorder, ledger=ledger, started=started, ranges=ranges)
        self.prompt_ids, self.prompt_marks = list(prompt_ids), list(prompt_marks)
        self.cancelled = cancelled
        self.temperature = temperature
        self.draft_s = 0.0
        self.generator = torch.Generator().manual_seed(seed)
        self.bias = None
        if logit_bias:
            self.bias = torch.zeros(loaded.vocab_size)
            for tok, value in logit_bias.items():
                self.bias[int(tok)] = float(value)
        # Drafting is lossless for greedy choices only.
        self.drafter = ((drafter or ProgramDrafter(self.line_ids, cost=loaded.runtime.cost))
                        if draft and temperature <= 0 else None)
        self.drafted = self.draft_accepted = 0
        # A gen that only writes the focus line back is a no-op (engine.decoding.noop_gen); greedy decoding
        # deviates from it. A teacher's program is given, and sampling draws its own way.
        self.noop = (NoOpGenGuard(self.lines, tables.vocab_texts, focus_line)
                     if focus_line is not None and teacher_program is None and temperature <= 0 else None)
        self.noop_deviations = 0
        self.noop_gap_max = 0.0
        # The program's score: the log-probability (under the grammar's mask) of each chosen token,
        # by its place among them; a rollback leaves stale places past the end, overwritten or unread.
        self.logprobs: dict[int, float] = {}
        self.choice_logprob = 0.0  # the last choose()'s

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> Iterator[OpResolved | DecodeOutcome]:
        try:
            yield from self._run()
        finally:
            self.session.close()

    def _run(self) -> Iterator[OpResolved | DecodeOutcome]:
        self.take_forced()
        self.pending[:0] = self.prompt_ids
        self.pending_chosen[:0] = [False] * len(self.prompt_ids)
        logits = self.feed("prefill", marks=self.prompt_marks)
        yield from self.flush()
        known: int | None = None  # the model's next choice, when a verify forward already made it
        stop_reason = "done"
        while not self.matcher.is_terminated():
            if self.cancelled():
                stop_reason = "cancelled"
                break
            if self.writer.generated + self.writer.forced >= self.max_new_tokens:
                stop_reason = "max_tokens"
                break
            # The span below holds take_forced's own timed part: set the total, do not add twice.
            t, grammar_before = time.perf_counter(), self.grammar_s
            banned: set[int] | None = None
            if known is None:
                banned = self.mask()
                token = self.choose(logits, banned)
                self.logprobs[self.writer.generated] = self.choice_logprob
            else:
                token, known = known, None
            n_ops = len(self.writer.ops)
            if self.writer.meant_op(self.tables.vocab_texts[token]):
                self.close_gen_instead()
                self.deviate_from_noop_gen(n_ops)
                self.grammar_s = grammar_before + time.perf_counter() - t
                yield from self.flush()
                logits = self.feed("fused")
                continue
            self.note_deviation(logits, token, banned)
            self.take_choice(token)
            self.deviate_from_noop_gen(n_ops)
            self.grammar_s = grammar_before + time.perf_counter() - t
            # What the model chose is final: hand its ops out before the forward that splices
            # them (a long copy's splice is seconds on a CPU; the editor need not wait for it).
            yield from self.flush()
            if self.matcher.is_terminated():
                break
            marks = self.draft()
            if marks:
                logits, known = self.verify(marks)
            else:
                logits = self.feed("step" if len(self.pending) == 1 else "fused")
            yield from self.flush()
            if self.degenerate():
                stop_reason = "loop"
                break
        if self.recorder is not None and self.pending:  # the last tokens are written, never fed
            self.recorder.fed(self.pending, self.pending_chosen)
        yield from self.flush()
        yield self.outcome(stop_reason)

    def degenerate(self) -> bool:
        """Has the output started repeating itself (engine.checks.guards.ProgramLoopWatch)?"""
        return self.writer.degenerate()

    def flush(self) -> Iterator[OpResolved]:
        return self.writer.flush()

    def outcome(self, stop_reason: str) -> DecodeOutcome:
        breakdown = self.session.breakdown()
        breakdown["grammar_s"] = round(self.grammar_s, 6)
        if self.drafter is not None:
            breakdown["draft_s"] = round(self.draft_s, 6)
            breakdown["drafted_tokens"] = self.drafted
            breakdown["draft_accepted"] = self.draft_accepted
        breakdown["decode_steps"] = self.writer.generated
        if self.teacher is None:
            breakdown["logprob"] = round(sum(self.logprobs.get(i, 0.0) for i in range(self.writer.generated)), 4)
        if self.noop_deviations:
            breakdown["noop_gen_deviations"] = self.noop_deviations
            breakdown["noop_gen_gap_max"] = round(self.noop_gap_max, 3)
        if self.noop is not None and self.noop.refused:
            breakdown["noop_gen_refused"] = len(self.noop.refused)
            breakdown["noop_gen_refused_gap_min"] = round(min(self.noop.refused), 3)
        return self.writer.outcome(stop_reason, breakdown)

    # -- one step -------------------------------------------------------------------------------

    def choose(self, logits: torch.Tensor, banned: set[int], bitmask: Any = None, in_gen: bool | None = None) -> int:
        """The model's (or the teacher's) choice under the mask filled last (or the one given);
        the model's log-probability of it (under the mask) goes to ``choice_logprob``."""
        bitmask = self.bitmask if bitmask is None else bitmask
        in_gen = self.writer.scanner.in_gen if in_gen is None else in_gen
        if self.teacher is not None:
            return self.teacher.choose(bitmask, banned)
        scores = masked_scores(logits if self.bias is None else logits + self.bias, bitmask, self.tables, in_gen, banned)
        token = _pick(scores, self.temperature, self.generator)
        self.choice_logprob = float(scores[token] - torch.logsumexp(scores, dim=-1))
        return token

    # -- no-op gens (engine.decoding.noop_gen) -------------------------------------------------------------

    def noop_track(self) -> tuple | None:
        """(gen, rest of the input, at a line start) while the gen body spells the input verbatim."""
        if self.noop is None or not self.writer.scanner.in_gen:
            return None
        body = self.writer.scanner.body
        rest = self.noop.rest(self.writer.consumed, body)
        if rest is None:
            return None
        return (len(self.writer.ops), self.writer.consumed), rest, body == "" or body.endswith("\n")

    def note_deviation(self, logits: torch.Tensor, token: int, banned: set[int] | None) -> None:
        """Before writing ``token`` on a verbatim gen body: note where the model could leave it.
        ``banned``: the step's mask as :meth:`mask` filled it (None when a verify forward chose
        the token: the bitmask then belongs to a later drafted position, so it is filled again)."""
        track = self.noop_track()
        if track is None:
            return
        if banned is None:
            banned = self.mask()
        mark = TokenMark(token=token, row=-1, kv_length=self.position, bitmask=None, banned=banned, in_gen=True,
                     state=self.save(), track=track)
        self.note_alternatives(mark, logits, self.bitmask)

    def note_alternatives(self, mark: TokenMark, logits: torch.Tensor, bitmask: Any) -> None:
        """Show the no-op gen guard the masked scores at ``mark``'s token (on a verbatim gen body)."""
        assert self.noop is not None and mark.track is not None
        scores = logits if self.bias is None else logits + self.bias
        gen, rest, line_start = mark.track
        self.noop.note(gen, mark, masked_scores(scores, bitmask, self.tables, True, mark.banned), mark.token, rest,
                       line_start)

    def finished_noop_gen(self, n_ops: int) -> bool:
        """Did the ops since ``n_ops`` finish a gen that only writes the next input lines back?"""
        if self.noop is None or len(self.writer.ops) <= n_ops or not isinstance(self.writer.ops[-1], Gen):
            return False
        return self.noop.is_noop(self.writer.consumed, self.writer.ops[-1].text)

    def deviate_from_noop_gen(self, n_ops: int) -> None:
        """If this step finished a no-op gen, write it again from its least sure token on, with the
        best alternative there (nothing of the rolled-back part was handed out yet)."""
        if not self.finished_noop_gen(n_ops):
            return
        assert self.noop is not None
        deviation = self.noop.best((len(self.writer.ops) - 1, self.writer.consumed))
        if deviation is None:
            return
        self.rollback(deviation.mark)
        self.pending, self.pending_chosen = [], []
        self.noop_deviations += 1
        self.noop_gap_max = max(self.noop_gap_max, deviation.gap)
        # The alternative's log-probability: the choice's there, less the gap (one softmax).
        index = self.writer.generated
        self.logprobs[index] = self.logprobs.get(index, 0.0) - deviation.gap
        self.take_choice(deviation.token)

def masked_scores(logits: torch.Tensor, bitmask, tables: ModelTables, in_gen: bool, banned: set[int]) -> torch.Tensor:
    """A copy of ``logits`` with -inf on every token the grammar and the constraints forbid."""
    import xgrammar as xgr

    scores = logits.clone().unsqueeze(0)
    xgr.apply_token_bitmask_inplace(scores, bitmask)
    scores = scores[0]
    if not in_gen and len(tables.copy_crossing_ids):
        scores[tables.copy_crossing_ids] = float("-inf")
    if banned:
        scores[list(banned)] = float("-inf")
    return scores


def _pick(scores: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """Greedy (or sampled) choice among the tokens ``scores`` (masked_scores) allows."""
    if temperature <= 0:
        return int(torch.argmax(scores))
    probs = torch.softmax(scores / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def check_program(program: Program, region: str, pieces: Sequence[str] | None) -> None:
    """Raise ResolveError early if a program to force does not fit the input, or ends where the
    grammar does not let a program end."""
    resolve(program, region, "strict", token_pieces=pieces)
    check_ending(program, len(split_lines(region)), len(pieces) if pieces else 0)
