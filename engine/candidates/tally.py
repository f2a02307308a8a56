"""How one round of a candidate search went: the distinct candidates it found against the K
asked, and what became of every other decode (a guard's refusal, no change, a repeat), in the
words the front doors print: "3 distinct candidates; the model had no fourth (2 changed nothing,
1 broke the javascript syntax, 1 repeated another)"."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Why a decode did not become a distinct candidate (engine.verdict.Verdict.kind, plus the
# search's own two), in the order the words list them.
UNCHANGED, REPEATED = "unchanged", "repeated"
OUTCOMES = (UNCHANGED, "syntax", "destructive", "far", "unfinished", REPEATED)
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth")


def ordinal(n: int) -> str:
    """``4`` -> "fourth" (``n`` >= 1; beyond ORDINALS, "17th")."""
    if n <= len(ORDINALS):
        return ORDINALS[n - 1]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def outcome_words(kind: str, count: int, language: str = "") -> str:
    """One count in words: ``("syntax", 1, "javascript")`` -> "1 broke the javascript syntax"."""
    words = {UNCHANGED: "changed nothing", "syntax": f"broke the {language + ' ' if language else ''}syntax",
             "destructive": "would rewrite most of the region", "far": "edited far from the line pointed at",
             "unfinished": "did not finish",
             REPEATED: "repeated another" if count == 1 else "repeated others"}
    return f"{count} {words.get(kind, kind)}"


@dataclass
class RoundTally:
    """One round: ``asked`` the K distinct candidates it looks for, ``distinct`` those found (they
    change the code, no guard refused them and no earlier decode gave the same text), ``decodes``
    the edits decoded (at most ``budget``), ``lost`` what became of the others, by kind
    (OUTCOMES), and ``ended``: ``full`` (K found), ``passed`` (a check passed first),
    ``cancelled``, or ``ran out`` (the variants, or the budget, ran out before K); ``seconds``:
    the round's decode time, repeats and refused decodes included."""

    round: int
    asked: int
    budget: int
    distinct: int = 0
    decodes: int = 0
    lost: Counter[str] = field(default_factory=Counter)
    ended: str = "ran out"
    seconds: float = 0.0

    @property
    def short(self) -> bool:
        """The round looked for K and found fewer (not ended by a pass or a cancel)."""
        return self.ended == "ran out" and self.distinct < self.asked

    def words(self, language: str = "") -> str:
        """"3 distinct candidates; the model had no fourth in 16 decodes (2 changed nothing, 11
        repeated others)" ("no distinct candidate in 16 decodes (...)" when none); without a
        shortfall only the count and the losses."""
        head = f"{self.distinct} distinct candidate{'s' * (self.distinct != 1)}"
        if self.short and self.distinct == 0:
            head = f"no distinct candidate in {self.decodes} decode{'s' * (self.decodes != 1)}"
        elif self.short:
            head += f"; the model had no {ordinal(self.distinct + 1)} in {self.decodes} decodes"
        lost = ", ".join(outcome_words(kind, self.lost[kind], language) for kind in
                         [*OUTCOMES, *sorted(set(self.lost) - set(OUTCOMES))] if self.lost[kind])
        return f"{head} ({lost})" if lost else head

    def json(self) -> dict[str, object]:
        return {"round": self.round, "asked": self.asked, "distinct": self.distinct, "decodes": self.decodes,
                "budget": self.budget, "ended": self.ended, "short": self.short,
                "seconds": round(self.seconds, 3),
                "lost": {kind: self.lost[kind] for kind in [*OUTCOMES, *sorted(set(self.lost) - set(OUTCOMES))]
                         if self.lost[kind]}}
