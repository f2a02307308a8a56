"""Drafting from the input: the one component every speculative path of the engine uses.

The output of an edit is mostly input, so the next tokens are usually input tokens: the drafter
proposes them, the decoder verifies the proposal in one forward and keeps the longest prefix that
greedy decoding would have produced. The shape follows transformers' ``CandidateGenerator``:
``propose`` (get candidates) and ``feedback`` (update the strategy from how many were accepted).

* :class:`InputDrafter` drafts input tokens at an aligned position: after an occurrence of the
  output's last n-gram (6, 4, then 2 tokens; one shared token is too weak an alignment), preferring
  the occurrence nearest after the position the last draft reached, or at a position the caller
  knows (program mode: the start of the input line a gen replaces). Its size schedule doubles after
  a fully accepted draft, shrinks to what was accepted after a partial one, and backs off for a few
  steps after a draft rejected outright. The text modes use it as it is.
* :class:`ProgramDrafter` drafts the continuation of an edit program: the structure (the next copy
  tag and its line numbers, ``</gen>``, ``</program>``) as text, and gen bodies as the tokens of the
  input line the gen replaces (through an :class:`InputDrafter` over the line-aligned input tokens).

Both size every draft by what it costs (:class:`DraftPolicy`): given the runtime's cost of an
N-token forward (:class:`engine.runtime.cost.CostModel`, learned from the forwards the runtime runs) and
the acceptance seen so far in this edit, a draft is as long as maximizes the expected tokens per
unit of cost, and there is none where no draft beats a plain step (the mode then decodes like
ar). Drafting stays lossless whatever the size: the decoder keeps only what greedy decoding
would have chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Protocol, Sequence, Union

from engine.runtime.cost import CostModel, best_draft_size
from engine.runtime.prefix_cache import common_prefix

MIN_DRAFT, MAX_DRAFT, START_DRAFT = 8, 256, 32
MATCH_NGRAM = (6, 4, 2)
BACKOFF_STEPS = 4  # after a draft is rejected outright, this many steps go undrafted
CHARS_PER_TOKEN = 3  # a program-structure draft is text: its size in tokens, roughly


def find_draft(out: Sequence[int], src: Sequence[int], hint: int, size: int) -> tuple[list[int], int]:
    """Draft ``size`` tokens of ``src`` after an occurrence of the output's last n-gram, preferring
    the occurrence nearest after ``hint`` (the aligned position). Returns (draft, end in src)."""
    for n in MATCH_NGRAM:
        if len(out) < n:
            continue
        tail = list(out[-n:])
        best = -1
        for start in _occurrences(src, tail):
            if best < 0 or (start >= hint - n and (best < hint - n or start < best)):
                best = start
        if best >= 0 and best + n < len(src):
            end = min(len(src), best + n + size)
            return list(src[best + n:end]), end
    return [], hint


def _occurrences(src: Sequence[int], tail: list[int]) -> Iterator[int]:
    first, n = tail[0], len(tail)
    for i in range(len(src) - n + 1):
        if src[i] == first and list(src[i:i + n]) == tail:
            yield i


@dataclass
class DraftPolicy:
    """How long a draft should be: the size in 0..available that maximizes
    (expected accepted + 1) / s(size + 1) (:func:`engine.runtime.cost.best_draft_size`), with ``s`` from
    the runtime's cost model and a fraction ``f`` of drafted tokens accepted. ``f`` is this edit's
    (recent drafts weigh most), from a prior of PRIOR_ACCEPTED of PRIOR_PROPOSED. Without a cost
    model every draft keeps its size.

    A withheld draft still teaches: where the drafter later sees what the model wrote instead
    (``shadow``), it scores the draft as if it had been verified; elsewhere each withheld step
    fades the evidence back toward the prior, so a backend where drafting stopped paying tries a
    draft again now and then."""

    PRIOR_ACCEPTED = 4.0
    PRIOR_PROPOSED = 5.0
    DECAY = 0.7  # weight of the evidence so far at each new outcome
    FADE = 0.9  # per withheld step without evidence

    cost: CostModel | None = None
    accepted: float = 0.0
    proposed: float = 0.0
    decisions: dict[int, int] = field(default_factory=dict)  # chosen size -> times (0: withheld)

    @property
    def f(self) -> float:
        return (self.accepted + self.PRIOR_ACCEPTED) / (self.proposed + self.PRIOR_PROPOSED)

    def size(self, available: int) -> int:
        if self.cost is None or available <= 0:
            return max(0, available)
        n = best_draft_size(self.f, min(available, MAX_DRAFT), self.cost.ratio)
        self.decisions[n] = self.decisions.get(n, 0) + 1
        return n

    def observe(self, proposed: int, accepted: int) -> None:
        self.accepted = self.accepted * self.DECAY + accepted
        self.proposed = self.proposed * self.DECAY + proposed

    def fade(self) -> None:
        self.accepted *= self.FADE
        self.proposed *= self.FADE


class Drafter(Protocol):
    """What :class:`engine.decoding.greedy.DraftedDecode` asks of a source of drafts over the
    output so far (:class:`InputDrafter` is the engine's; a benchmark may bring its own)."""

    def propose(self, context: Sequence[int], limit: int) -> list[int]: ...

    def feedback(self, proposed: int, accepted: int) -> None: ...

    def step_without_draft(self) -> None: ...


class InputDrafter:
    """Proposes continuations copied from ``source`` (the input's tokens) with a size schedule,
    each draft cut to the size its cost pays for (:class:`DraftPolicy`; ``cost``: the runtime's
    :class:`engine.runtime.cost.CostModel`, None to keep the schedule's size).

    ``propose``/``propose_at`` return at most ``limit`` tokens (maybe none: no alignment, backing
    off, or no draft pays on this runtime now); ``feedback(proposed, accepted)`` follows every
    non-empty proposal; ``step_without_draft`` counts an undrafted step (it ends a back-off)."""

    def __init__(self, source: Sequence[int], backoff_steps: int = BACKOFF_STEPS, cost: CostModel | None = None):
        self.source = list(source)
        self.backoff_steps = backoff_steps
        self.size = START_DRAFT
        self.hint = 0  # where in ``source`` the output is believed to be
        self.backoff = 0
        self.last_end = 0  # end (in ``source``) of the last proposal
        self.policy = DraftPolicy(cost)
        self.shadow: tuple[list[int], int] | None = None  # a withheld draft and where it would start

    def propose(self, context: Sequence[int], limit: int) -> list[int]:
        """Draft after the occurrence of the context's last n-gram nearest after ``hint``."""
        self._settle_shadow(context)
        if self.backoff > 0 or limit <= 0:
            return []
        wanted = min(self.size, limit)
        size = self.policy.size(wanted)
        if size == 0:
            if self.shadow is None:
                draft, _ = find_draft(context, self.source, self.hint, wanted)
                if draft:
                    self.shadow = (draft, len(context))
            return []
        draft, self.last_end = find_draft(context, self.source, self.hint, size)
        return draft

    def propose_at(self, position: int, limit: int, stop_after: int | None = None) -> list[int]:
        """Draft from a known position of ``source`` (at most ``stop_after`` tokens of it)."""
        if self.backoff > 0 or limit <= 0 or not 0 <= position < len(self.source):
            return []
        size = self.policy.size(min(self.size, limit))
        if size == 0:
            self.policy.fade()
            return []
        end = min(len(self.source), position + size)
        if stop_after is not None:
            end = min(end, position + stop_after)
        self.last_end = end
        return self.source[position:end]

    def feedback(self, proposed: int, accepted: int) -> None:
        self.hint = self.last_end - (proposed - accepted)
        self.size = min(MAX_DRAFT, self.size * 2) if accepted == proposed else max(MIN_DRAFT, accepted + 1)
        self.backoff = self.backoff_steps if accepted == 0 else 0
        self.policy.observe(proposed, accepted)

    def _settle_shadow(self, context: Sequence[int]) -> None:
        """Score a withheld draft against what the model wrote since (``context`` extends the
        context it was drafted for), once the draft is refuted or fully confirmed."""
        if self.shadow is None:
            return
        draft, at = self.shadow
        if len(context) < at:  # another sequence (a new gen body): no verdict
            self.shadow = None
            self.policy.fade()
            return
        seen = list(context[at:at + len(draft)])
        agree = common_prefix(draft, seen)
        if agree < len(seen) or agree == len(draft):
            self.policy.observe(len(draft), agree)
            self.shadow = None

    def step_without_draft(self) -> None:
        if self.backoff > 0:
            self.backoff -= 1


@dataclass(frozen=True)
class DraftText:
    """Program text to draft; the decoder turns it into tokens under the grammar (forced literals
    inside it are checked against the grammar's, not drafted)."""

    text: str


@dataclass(frozen=True)
class DraftTokens:
    """Token ids to draft as they are (a gen body copied from the input's line tokens)."""

    ids: tuple[int, ...]


DraftPiece = Union[DraftText, DraftTokens]


@dataclass(frozen=True)
class ProgramState:
    """What the program drafter needs to know about the program being decoded.

    ``consumed``: input lines the program has moved past (end of the last line copy);
    ``last_op``: "copy", "gen" or "" (none yet); ``tag``: text of the op being written outside a
    gen body (from its ``<``); ``in_gen``/``gen_text``/``gen_ids``: the gen body being written
    (its escaped text and the token ids chosen for it); ``text``: the program written so far."""

    consumed: int
    last_op: str
    tag: str
    in_gen: bool
    gen_text: str
    gen_ids: tuple[int, ...]
    text: str = ""


class ProgramDrafter:
    """Drafts what an edit program most likely writes next (see the module docstring).

    Structure: after a gen, ``<copy lines="K-n"/>`` where K is the line after the input lines the
    gen replaced (one input line per gen line) and n the last input line, a guess the model
    corrects at its first differing digit; after a copy that ended at line J < n, a gen that
    rewrites line J+1; after a copy that reached line n, ``</program>``. Gen bodies: the input line
    the current gen line rewrites, from its start or re-aligned on the last tokens the model wrote,
    then ``</gen>`` and the copy that resumes after it. Gen-body tokens go through an
    :class:`InputDrafter`, so its size schedule and back-off apply here as in the text modes."""

    def __init__(self, line_ids: Sequence[Sequence[int]], cost: CostModel | None = None):
        self.n = len(line_ids)
        self.line_ids = [list(ids) for ids in line_ids]
        self.line_start: list[int] = []
        flat: list[int] = []
        for ids in self.line_ids:
            self.line_start.append(len(flat))
            flat.extend(ids)
        # No back-off here: a rejected structure draft costs one verify row, and the next op's
        # structure is as predictable as ever.
        self.inputs = InputDrafter(flat, backoff_steps=0, cost=cost)

    def _resume(self, first_line: int) -> str:
        """The copy that resumes at ``first_line`` (1-based) through the last line, and the end."""
        if first_line > self.n:
            return "</program>"
        return f'<copy lines="{first_line}-{self.n}"/></program>'

    def propose(self, state: ProgramState, limit: int) -> list[DraftPiece]:
        """The next draft, cut to the size its cost pays for (nothing when no draft pays)."""
        if limit <= 0 or self.inputs.backoff > 0:
            return []
        if self.inputs.policy.cost is None:
            return self._propose(state, limit)
        size = self.inputs.policy.size(min(limit, MAX_DRAFT))
        if size == 0:
            self.inputs.policy.fade()
            return []
        return _cut(self._propose(state, size), size)

    def _propose(self, state: ProgramState, limit: int) -> list[DraftPiece]:
        if state.in_gen:
            return self._gen_body(state, limit)
        if state.tag == "<":
            if state.consumed >= self.n:
                return [DraftText("/program>")]
            if state.last_op == "copy":  # a copy stopped early: the next line is the one to change
                return [DraftText("gen>"), DraftTokens(tuple(self.line_ids[state.consumed][:limit])),
                        DraftText("</gen>" + self._resume(state.consumed + 2))]
            return [DraftText(self._resume(state.consumed + 1)[1:])]
        if state.tag.startswith('<copy lines="') and "-" in state.tag:
            typed, last = state.tag[state.tag.index("-") + 1:], str(self.n)
            if last.startswith(typed) and typed != last:
                return [DraftText(last[len(typed):] + '"/></program>')]
        return []

    def _gen_body(self, state: ProgramState, limit: int) -> list[DraftPiece]:
        written = state.gen_text.count("\n")
        current = state.gen_text[state.gen_text.rfind("\n") + 1:]
        line = state.consumed + written  # 0-based index of the input line this gen line rewrites
        if current == "" and (written >= 1 or line >= self.n):
            return [DraftText("</gen>" + self._resume(state.consumed + written + 1))]
        if line >= self.n:
            return []
        start = self.line_start[line]
        end_of_line = start + len(self.line_ids[line])
        if current == "":
            ids = self.inputs.propose_at(start, limit, stop_after=end_of_line - start)
        else:
            self.inputs.hint = start
            ids = self.inputs.propose(state.gen_ids, limit)
            ids = ids[:max(0, end_of_line - (self.inputs.last_end - len(ids)))]
            self.inputs.last_end = min(self.inputs.last_end, end_of_line)
        if not ids:
            return []
        return [DraftTokens(tuple(ids)), DraftText("</gen>" + self._resume(line + 2))]

    def feedback(self, proposed: int, accepted: int) -> None:
        """``proposed``/``accepted``: chosen tokens of the last draft (structure included)."""
        self.inputs.feedback(proposed, accepted)

    def step_without_draft(self) -> None:
        self.inputs.step_without_draft()


def _cut(pieces: list[DraftPiece], size: int) -> list[DraftPiece]:
    """The first ``size`` tokens' worth of a draft (text counted at CHARS_PER_TOKEN a token)."""
    out: list[DraftPiece] = []
    left = size
    for piece in pieces:
        if left <= 0:
            break
        if isinstance(piece, DraftTokens):
            out.append(DraftTokens(piece.ids[:left]))
            left -= len(piece.ids)
        else:
            text = piece.text[:left * CHARS_PER_TOKEN]
            out.append(DraftText(text))
            left -= -(-len(text) // CHARS_PER_TOKEN)
    return out
