"""The one event type stream an edit produces, consumed by the CLI, the LSP server and benchmarks.

An edit yields ``EditStarted``, then one ``OpResolved`` per finished op (in order), then
``EditFinished``. ``OpResolved.resolved`` is the region's new text so far: concatenating every
``OpResolved.text`` gives ``EditFinished.result.region_output`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from engine.language.program import Op, Program

StopReason = Literal["done", "max_tokens", "cancelled", "loop", "unplaced"]


@dataclass(frozen=True)
class TokenCounts:
    """Where the output's tokens came from. ``generated``: one decode step each (the model chose
    them); ``copied``: entered the cache through a splice / accepted draft; ``forced``: literals
    the grammar fixed, appended without a choice."""

    generated: int = 0
    copied: int = 0
    forced: int = 0

    @property
    def total(self) -> int:
        return self.generated + self.copied + self.forced


@dataclass(frozen=True)
class EditStarted:
    mode: str
    model: str
    input_lines: int
    prompt_tokens: int


@dataclass(frozen=True)
class OpResolved:
    """One op of the program has resolved.

    ``input_lines_consumed``: how many leading input lines the output so far has moved past (the
    end of the last line copy). An editor can show ``resolved + input_lines[consumed:]`` as the
    live document: it starts as the input and ends as the output.
    """

    index: int
    op: Op
    text: str
    resolved: str
    input_lines_consumed: int
    tokens: TokenCounts
    elapsed_s: float


@dataclass(frozen=True)
class UnplacedChunk:
    """A chunk of an apply's update that could not be placed in the file: its update lines
    ``start``..``end`` (1-based, inclusive), their text, and what in the file came nearest."""

    start: int
    end: int
    text: str
    nearest: str = ""  # what in the file came nearest (engine.apply.nearest), "" when nothing did

    def summary(self) -> dict:
        return {"lines": [self.start, self.end], "text": self.text, **({"nearest": self.nearest} if self.nearest else {})}


@dataclass(frozen=True)
class FocusLines:
    """Where a program edit looked, in document lines (see :class:`EditResult`)."""

    hint: int | None = None
    guarded: int | None = None
    ranked: tuple[int, ...] = ()


@dataclass
class EditResult:
    """Outcome of one edit. ``output_text`` is the whole document; ``region_output`` replaces the
    edited region (lines ``region[0]..region[1]``, 1-based inclusive, or the whole text).
    ``unplaced`` (an apply): the update's chunks that could not be placed; unless the request
    was ``partial`` the result then stops as ``unplaced`` with the document unchanged.
    ``focus``: where a program edit looked (document lines, 1-based): ``hint`` the line the prompt
    named, ``guarded`` the line whose no-op gen deviates (engine.decoding.noop_gen), ``ranked``
    the localizer's candidate lines best first; empty when none was chosen."""

    mode: str
    model: str
    input_text: str
    output_text: str
    region: tuple[int, int] | None
    region_input: str
    region_output: str
    program: Program
    raw_output: str
    tokens: TokenCounts
    prompt_tokens: int
    stop_reason: StopReason
    timings: dict[str, float] = field(default_factory=dict)
    breakdown: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unplaced: list[UnplacedChunk] = field(default_factory=list)
    focus: FocusLines = field(default_factory=FocusLines)

    @property
    def changed(self) -> bool:
        return self.output_text != self.input_text

    def summary(self) -> dict:
        """JSON-ready summary (the CLI's ``--json`` and the benchmarks use it)."""
        return {
            "mode": self.mode,
            "model": self.model,
            "region": list(self.region) if self.region else None,
            "program": self.program.serialize(),
            "ops": [op.serialize() for op in self.program.ops],
            "tokens": {"generated": self.tokens.generated, "copied": self.tokens.copied,
                       "forced": self.tokens.forced, "total": self.tokens.total},
            "prompt_tokens": self.prompt_tokens,
            "stop_reason": self.stop_reason,
            "changed": self.changed,
            "timings": self.timings,
            "breakdown": self.breakdown,
            "warnings": self.warnings,
            "unplaced": [chunk.summary() for chunk in self.unplaced],
            "focus": {"hint": self.focus.hint, "guarded": self.focus.guarded, "ranked": list(self.focus.ranked)},
        }


@dataclass(frozen=True)
class EditFinished:
    result: EditResult


Event = Union[EditStarted, OpResolved, EditFinished]
