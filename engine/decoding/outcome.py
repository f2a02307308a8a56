"""What a decoder hands back at the end of an edit (every decoder, in-process or remote, program
or text mode, ends its event stream with one): a bottom module, so decoders and the edit runner
share the type without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from engine.decoding.events import TokenCounts
from engine.language.program import Program


@dataclass
class DecodeOutcome:
    """``region_output``: the edited region (the unedited rest of the input appended when the
    budget ran out); ``raw_output``: the text the model wrote; ``breakdown``: timings (``*_s``)
    and counters of the decoder; ``warnings``: for the user (loops, budget)."""

    program: Program
    region_output: str
    raw_output: str
    tokens: TokenCounts
    stop_reason: str
    breakdown: dict
    warnings: list[str]
