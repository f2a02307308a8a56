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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence, Union

MIN_DRAFT, MAX_DRAFT, START_DRAFT = 8, 256, 32
MATCH_NGRAM = (6, 4, 2)
BACKOFF_STEPS = 4  # after a draft is rejected outright, this many steps go undrafted


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


class InputDrafter:
    """Proposes continuations copied from ``source`` (the input's tokens) with a size schedule.

    ``propose``/``propose_at`` return at most ``limit`` tokens (maybe none: no alignment, or
    backing off); ``feedback(proposed, accepted)`` follows every non-empty proposal;
    ``step_without_draft`` counts an undrafted step (it ends a back-off)."""

    def __init__(self, source: Sequence[int], backoff_steps: int = BACKOFF_STEPS):
        self.source = list(source)
        self.backoff_steps = backoff_steps
        self.size = START_DRAFT
        self.hint = 0  # where in ``source`` the output is believed to be
        self.backoff = 0
        self.last_end = 0  # end (in ``source``) of the last proposal

    def propose(self, context: Sequence[int], limit: int) -> list[int]:
        """Draft after the occurrence of the context's last n-gram nearest after ``hint``."""
        if self.backoff > 0 or limit <= 0:
            return []
        draft, self.last_end = find_draft(context, self.source, self.hint, min(self.size, limit))
        return draft

    def propose_at(self, position: int, limit: int, stop_after: int | None = None) -> list[int]:
        """Draft from a known position of ``source`` (at most ``stop_after`` tokens of it)."""
        if self.backoff > 0 or limit <= 0 or not 0 <= position < len(self.source):
            return []
        end = min(len(self.source), position + min(self.size, limit))
        if stop_after is not None:
            end = min(end, position + stop_after)
        self.last_end = end
        return self.source[position:end]

    def feedback(self, proposed: int, accepted: int) -> None:
        self.hint = self.last_end - (proposed - accepted)
        self.size = min(MAX_DRAFT, self.size * 2) if accepted == proposed else max(MIN_DRAFT, accepted + 1)
        self.backoff = self.backoff_steps if accepted == 0 else 0

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
    (its escaped text and the token ids chosen for it)."""

    consumed: int
    last_op: str
    tag: str
    in_gen: bool
    gen_text: str
    gen_ids: tuple[int, ...]


class ProgramDrafter:
    """Drafts what an edit program most likely writes next (see the module docstring).

    Structure: after a gen, ``<copy lines="K-n"/>`` where K is the line after the input lines the
    gen replaced (one input line per gen line) and n the last input line, a guess the model
    corrects at its first differing digit; after a copy that ended at line J < n, a gen that
    rewrites line J+1; after a copy that reached line n, ``</program>``. Gen bodies: the input line
    the current gen line rewrites, from its start or re-aligned on the last tokens the model wrote,
    then ``</gen>`` and the copy that resumes after it. Gen-body tokens go through an
    :class:`InputDrafter`, so its size schedule and back-off apply here as in the text modes."""

    def __init__(self, line_ids: Sequence[Sequence[int]]):
        self.n = len(line_ids)
        self.line_ids = [list(ids) for ids in line_ids]
        self.line_start: list[int] = []
        flat: list[int] = []
        for ids in self.line_ids:
            self.line_start.append(len(flat))
            flat.extend(ids)
        # No back-off here: a rejected structure draft costs one verify row, and the next op's
        # structure is as predictable as ever.
        self.inputs = InputDrafter(flat, backoff_steps=0)

    def _resume(self, first_line: int) -> str:
        """The copy that resumes at ``first_line`` (1-based) through the last line, and the end."""
        if first_line > self.n:
            return "</program>"
        return f'<copy lines="{first_line}-{self.n}"/></program>'

    def propose(self, state: ProgramState, limit: int) -> list[DraftPiece]:
        if limit <= 0 or self.inputs.backoff > 0:
            return []
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
