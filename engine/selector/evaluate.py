"""Held-out evaluation of a selector: program mode, greedy, through ``Engine.edit`` exactly as a
user runs it, with and without the focus hint (never mixed in one row)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class EvalRow:
    """One arm. ``valid``: the program closed with ``</program>`` (stop reason ``done``);
    ``token_limit``: runs that hit ``max_new_tokens``; ``loop``: runs the loop guard stopped."""

    arm: str
    cases: int
    exact: int
    valid: int
    token_limit: int
    loop: int
    generated_tokens_mean: float
    decode_s_mean: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def eval_request(case: Any, hint: bool, max_new_tokens: int) -> Any:
    """Program-mode request for a held-out case; the hint is the first input line the gold
    changes (what a user pointing at the bug gives)."""
    from engine.api import EditRequest

    return EditRequest(text=case.input, instruction=case.instruction, mode="program",
                       focus_line=case.changed_line if hint else None, language=case.language,
                       max_new_tokens=max_new_tokens)


def evaluate(engine: Any, cases: Sequence[Any], arm: str, hint: bool, max_new_tokens: int = 256,
             on_case: Callable[[int], None] | None = None) -> EvalRow:
    """Run every case once (greedy) and count exact matches against the gold."""
    exact = valid = limit = loop = 0
    generated = decode_s = 0.0
    for i, case in enumerate(cases):
        result = engine.edit(eval_request(case, hint, max_new_tokens))
        exact += result.output_text == case.gold
        valid += result.stop_reason == "done"
        limit += result.stop_reason == "max_tokens"
        loop += result.stop_reason == "loop"
        generated += result.tokens.generated
        decode_s += result.timings.get("total_s", 0.0)
        if on_case is not None:
            on_case(i + 1)
    n = max(1, len(cases))
    return EvalRow(arm, len(cases), exact, valid, limit, loop, round(generated / n, 1), round(decode_s / n, 3))
