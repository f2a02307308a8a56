"""``ScriptedEngine``: a named fake engine for the candidate search (engine.candidates.search_fixes)
on the paths that need a model to answer on cue (a duplicate, a far fix, a destructive candidate, a
check that fails). Each test module says what its results look like (``answer``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

from engine.api import EditRequest
from engine.decoding.events import EditResult


@dataclass
class ScriptedEngine:
    """A fake engine (no model): the n-th request gets the n-th scripted output (the last one after
    that), made a result by ``answer(text, output, score)`` with score -n; each request is recorded."""

    outputs: list[str]
    answer: Callable[[str, str, float], EditResult]
    asked: list[EditRequest] = field(default_factory=list)

    def model_for(self, mode: str) -> SimpleNamespace:
        """What the search reads of the model: its runtime's meter (every forward 10 tokens)."""
        meter = contextlib.nullcontext(SimpleNamespace(sizes=lambda: [10]))
        return SimpleNamespace(runtime=SimpleNamespace(meter=lambda: meter))

    def edit(self, request: EditRequest, cancelled=lambda: False) -> EditResult:
        self.asked.append(request)
        return self.answer(request.text, self.outputs[min(len(self.asked), len(self.outputs)) - 1],
                           -float(len(self.asked)))
