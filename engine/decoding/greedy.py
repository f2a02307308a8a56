"""Decoding with verified drafts: the one loop the text modes and the OpenAI endpoint share.

Each step either appends the model's next token (one forward) or, when the drafter proposes a
continuation, appends the next token plus the draft in ONE forward and keeps the longest draft
prefix the model itself would have chosen, plus the model's own token after it. With greedy
choice the output is exactly plain greedy decoding's (lossless); only the number of forwards
changes (under ``verify="exact"``; under "argmax" a verify accepts what the batched forward's
argmax chooses, which can break a near-tie the other way: engine.core.choices.Verify).
Drafting is greedy-only: a sampled decode runs without drafts (verifying a draft under
sampling needs rejection sampling, which this loop does not do).

The loop knows nothing about prompts, fences or stop strings: it yields the tokens each step
added (:class:`Chunk`) and the caller stops iterating when its own condition is met.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from engine.decoding.drafter import Drafter
from engine.runtime import logits as arrays
from engine.runtime.logits import Logits
from engine.runtime.session import Session

END = -1  # a teacher's choice past its last token: the decode stops there (no vocabulary id is negative)


def argmax(logits: Logits) -> int:
    """Greedy choice (from a numpy row or a torch one: engine.runtime.logits)."""
    return arrays.argmax(logits)


def never() -> bool:
    return False


@dataclass(frozen=True)
class Chunk:
    """What one step added to the output: ``tokens`` (a stop token is never included),
    ``drafted`` draft tokens verified in the step (0 for a plain step), ``accepted`` of them kept,
    and ``stopped``: the step reached a stop id (the last chunk)."""

    tokens: list[int]
    drafted: int = 0
    accepted: int = 0
    stopped: bool = False


class Teacher:
    """Teacher forcing: the decode's choices are ``tokens`` whatever the logits say, then
    :data:`END` (the benchmarks decode the gold through this loop: the same forwards, drafts,
    verifies and crops as a real decode, with the gold in place of the model's choices)."""

    def __init__(self, tokens: Sequence[int]):
        self.tokens = list(tokens)

    def choices(self, first: int, count: int) -> list[int]:
        """The choices for output positions ``first`` .. ``first + count - 1``."""
        return [self.tokens[i] if i < len(self.tokens) else END for i in range(first, first + count)]


class DraftedDecode:
    """One decode over ``session`` after ``prompt_ids``, at most ``max_new_tokens`` new tokens.

    ``drafter``: the source of drafts (None: one token per forward); ``pick``: the choice from a
    row of logits (greedy by default; any other choice needs ``drafter=None``); ``cancelled`` is
    polled before every step; ``blocked``: token ids never chosen (their logits are masked before
    every choice and every draft check: the tokenizer's special tokens in an edit's text); ``verify``:
    how a verify accepts a draft (engine.core.choices.Verify); ``teacher``: choices that
    replace the model's (:class:`Teacher`; its end stops the decode as "done"). After iteration:
    ``out`` (the output ids), ``stop_reason`` ("done": a stop id; "max_tokens"; "cancelled"; None
    while running or when the caller stopped early), ``steps`` (model-chosen tokens: one per step), ``accepted``/``rejected`` (draft tokens
    kept / verified and thrown away)."""

    def __init__(self, session: Session, prompt_ids: Sequence[int], stop_ids: frozenset[int] | set[int],
                 max_new_tokens: int, drafter: Drafter | None = None,
                 pick: Callable[[Logits], int] = argmax, cancelled: Callable[[], bool] = never, *,
                 blocked: Sequence[int] = (), verify: str = "auto", teacher: Teacher | None = None):
        if drafter is not None and pick is not argmax:
            raise ValueError("drafts are verified greedily: a sampled decode takes no drafter")
        if teacher is not None:
            stop_ids = {*stop_ids, END}
        self.teacher = teacher
        self.verify = session.verify_rule(verify)
        self.session, self.prompt_ids, self.stop_ids = session, list(prompt_ids), stop_ids
        self.max_new_tokens, self.drafter, self.pick, self.cancelled = max_new_tokens, drafter, pick, cancelled
        self.blocked = sorted(set(blocked))
        self.out: list[int] = []
        self.stop_reason: str | None = None
        self.steps = self.accepted = self.rejected = 0

    def mask(self, logits: Logits) -> Logits:
        """``logits`` (a row or rows) with the blocked ids at -inf (a copy; as is without any)."""
        return arrays.masked(logits, self.blocked)

    def choose(self, logits: Logits, first: int) -> list[int]:
        """The choices for output positions from ``first`` on: one per row of ``logits`` (a row
        alone: one choice, by ``pick``), the teacher's when there is one."""
        if self.teacher is not None:
            return self.teacher.choices(first, 1 if logits.ndim == 1 else len(logits))
        if logits.ndim == 1:
            return [self.pick(self.mask(logits))]
        return arrays.argmax_rows(self.mask(logits))

    def chunks(self) -> Iterator[Chunk]:
        """Run the decode, yielding each step's :class:`Chunk` (stop iterating to end it early)."""
        session, drafter = self.session, self.drafter
        next_token = self.choose(session.append(self.prompt_ids, "prefill"), 0)[0]
        while True:
            if self.cancelled():
                self.stop_reason = "cancelled"
                return
            if next_token in self.stop_ids:
                self.stop_reason = "done"
                return
            if len(self.out) >= self.max_new_tokens:
                self.stop_reason = "max_tokens"
                return
            room = session.draft_room(self.max_new_tokens - len(self.out) - 1, self.verify)
            draft = drafter.propose(self.out + [next_token], room) if drafter else []
            if drafter and not draft:
                drafter.step_without_draft()
            if draft:
                base = session.length
                preds = self.choose(session.append([next_token] + draft, "verify", all_logits=True), len(self.out) + 1)
                kept = 0
                while kept < len(draft) and preds[kept] == draft[kept]:
                    kept += 1
                session.crop(base + 1 + kept)
                new = [next_token] + draft[:kept]
                next_token = preds[kept]
                drafter.feedback(len(draft), kept)
            else:
                new, kept = [next_token], 0
                next_token = self.choose(session.append([next_token], "step"), len(self.out) + 1)[0]
            self.steps += 1
            self.accepted += kept
            self.rejected += len(draft) - kept
            stop_at = next((i for i, t in enumerate(new) if t in self.stop_ids), None)
            if stop_at is not None:
                new = new[:stop_at]
                self.stop_reason = "done"
            self.out.extend(new)
            yield Chunk(new, len(draft), kept, stop_at is not None)
            if stop_at is not None:
                return
