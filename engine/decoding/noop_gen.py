"""No-op gens at the focus: a ``<gen>`` that only writes out, verbatim, the input lines it stands
in front of, one of them the line the user pointed at.

No edit needs a no-op gen (the program could copy those lines), yet a small selector writes one
when it finds the line to fix but not the fix: on the first 30 synthetic held-out cases, with the
focus hint, 19 of the 21 misses of the first shipped selector were a gen that wrote the focused
line back unchanged, so the "fix" changed nothing. The rule costs no expressiveness: every output
a program with such a gen spells, a program with a copy there spells too.

Greedy decoding keeps the rule by deviating where the model was least sure. While a gen's body
is still a verbatim prefix of the input that follows, the decoder notes, at every token it
writes, the best alternative the grammar allows that leaves the input text, and how far it scored
below the model's choice. When the gen closes as a no-op over the focus line, the decoder rolls
back to the noted token with the smallest gap and writes that alternative instead: the most
probable single deviation from the no-op (an approximation of the most probable gen under the
rule), from logits the decoder had anyway, with no extra forward. A gen that deviated can no
longer be a no-op, so a gen deviates at most once.

Only at the focus: there the user said the problem is, so a gen that changes nothing has failed
them. Elsewhere a no-op gen is harmless (it keeps the code) and a forced change is mostly damage:
applied everywhere, the rule turned 20 of the 23 unhinted no-op gens on those cases into a change
where the gold changes nothing, for one more exact match (3 of 30 instead of 2); with the hint
it gave 13 exact matches of 30 instead of 9.

Which focus: an editor's cursor is near the bug, not always on it. The decoder gets the line to
guard from :func:`engine.decoding.localize.plan_focus`: under ``guard`` (and under the default
``hold`` where it moves the cursor) the localizer's best line, near the cursor or anywhere without
one, where the hint goes too.

How far: a forced change on a line the model finds right is collateral damage, so a
deviation that scores more than ``MAX_GAP`` below the model's choice is refused and the no-op
stands (the line is kept). On all 164 HumanEvalFix-Python cases the cap alone kept every pass and
exact match of every arm and cut the near arm's collateral lines from 48 to 36 and its wrong-line
edits from 39 to 29; with the cap, guarding the localizer's line gave 20 passes with a near cursor
(17 under keep) and 15 with none (9) (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from engine.language.program import escape_body

ALTERNATIVES = 32  # best-scoring allowed tokens searched for one that leaves the input text
# The most a deviation may score below the model's choice (nats: a log-probability ratio). A gen
# that could only leave the input through a much less likely token is a model that finds the
# line right: forcing a change there is damage, so the no-op stands (the line is kept). Set from
# whole-corpus runs without a cap (HumanEvalFix-Python): every deviation that gave a passing fix
# scored at most 1.3 below the choice, while the failing ones spread to 4.5 (docs/benchmarks.md).
MAX_GAP = 1.5


@dataclass(frozen=True)
class Deviation:
    """At the token written from ``mark``: ``token`` is the best alternative that leaves the
    input text, ``gap`` its logit distance below the model's choice (a log-probability ratio)."""

    mark: Any
    token: int
    gap: float


class NoOpGenGuard:
    """Per decode: the input after each copy point (escaped as a gen body spells it) and the
    deviations noted in the gen being written. ``focus_line``: 1-based line of the region the
    user pointed at."""

    def __init__(self, lines: Sequence[str], vocab_texts: Sequence[str], focus_line: int,
                 max_gap: float = MAX_GAP):
        self.lines = list(lines)
        self.max_gap = max_gap
        self.refused: list[float] = []  # gaps of deviations refused for scoring below max_gap
        self.texts = vocab_texts
        self.focus_line = focus_line
        self._escaped: dict[int, str] = {}
        self.deviations: list[Deviation] = []
        self._gen: tuple[int, int] | None = None  # (ops so far, lines consumed): which gen they belong to

    def _following(self, consumed: int) -> str:
        """The input after line ``consumed``, escaped as a gen body would spell it."""
        if consumed not in self._escaped:
            self._escaped[consumed] = "".join(escape_body(line) for line in self.lines[consumed:])
        return self._escaped[consumed]

    def rest(self, consumed: int, body: str) -> str | None:
        """What remains of the following input while ``body`` still spells it verbatim, else None
        (also None once the gen starts after the focus line: it cannot be a no-op over it)."""
        if consumed >= self.focus_line:
            return None
        following = self._following(consumed)
        return following[len(body):] if following.startswith(body) else None

    def is_noop(self, consumed: int, gen_text: str) -> bool:
        """Does a finished gen writing ``gen_text`` write exactly the next input lines, whole, the
        focus line among them?"""
        if not gen_text or consumed >= self.focus_line:
            return False
        length = 0
        for number, line in enumerate(self.lines[consumed:], start=consumed + 1):
            if not gen_text.startswith(line, length):
                return False
            length += len(line)
            if length == len(gen_text):
                return number >= self.focus_line
        return False

    def note(self, gen: tuple[int, int], mark: Any, scores: torch.Tensor, chosen: int, rest: str,
             line_start: bool) -> None:
        """Note the best alternative to ``chosen`` (``scores``: logits under the step's mask) that
        leaves the input text; at a line start it must not begin an op (``<``) either."""
        if gen != self._gen:
            self._gen, self.deviations = gen, []
        top = torch.topk(scores, min(ALTERNATIVES, scores.numel()))
        for value, token in zip(top.values.tolist(), top.indices.tolist()):
            if value == float("-inf"):
                return
            text = self.texts[token]
            if token == chosen or not text or rest.startswith(text) or (line_start and text.startswith("<")):
                continue
            self.deviations.append(Deviation(mark, token, float(scores[chosen]) - value))
            return

    def best(self, gen: tuple[int, int]) -> Deviation | None:
        """The deviation to take for the no-op gen ``gen``: the noted one with the smallest gap,
        unless even that scored more than ``max_gap`` below the choice (then None: the no-op
        stands, noted in ``refused``)."""
        if gen != self._gen or not self.deviations:
            return None
        choice = min(self.deviations, key=lambda d: d.gap)
        self.deviations = []
        if choice.gap > self.max_gap:
            self.refused.append(choice.gap)
            return None
        return choice
