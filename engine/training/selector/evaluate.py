"""Held-out evaluation of a selector: program mode, greedy, through ``Engine.edit`` exactly as a
user runs it, once per focus setting (never mixed in one row): ``none`` (no hint), ``near`` (a
cursor near the bug: the first changed line moved by a seeded offset in -3..+3, clipped; what an
editor's AI fix sends) and ``oracle`` (exactly the first changed line: an upper bound)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from engine.api import EditRequest
from engine.core.lines import split_lines
from engine.evaluation.focus import FOCUS_SETTINGS, focus_for
from engine.evaluation.quality import collateral_damage, syntax_broken, tail_deletion, wrong_line_edit


@dataclass(frozen=True)
class EvalRow:
    """One arm. ``valid``: the program closed with ``</program>`` (stop reason ``done``);
    ``token_limit``: runs that hit ``max_new_tokens``; ``loop``: runs the loop guard stopped;
    ``collateral_lines``, ``wrong_line``, ``syntax_broken``, ``tail_deletions``: as in the
    benchmarks (:mod:`engine.evaluation.quality`)."""

    arm: str
    cases: int
    exact: int
    valid: int
    token_limit: int
    loop: int
    generated_tokens_mean: float
    decode_s_mean: float
    focus: str = "none"
    collateral_lines: int = 0
    wrong_line: int = 0
    syntax_broken: int = 0
    tail_deletions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def case_key(case: Any) -> str:
    """A held-out case's stable key (seeds its near cursor): its source and its input's hash."""
    return f"{case.source}:{hashlib.sha1(case.input.encode('utf-8')).hexdigest()[:12]}"


def eval_focus(case: Any, focus: str) -> int | None:
    """The focus line the ``focus`` setting sends for a held-out case (:mod:`engine.evaluation.focus`)."""
    return focus_for(focus, case.changed_line, len(split_lines(case.input)), case_key(case))


def eval_request(case: Any, focus: str, max_new_tokens: int, policy: str | None = None) -> Any:
    """Program-mode request for a held-out case with the focus setting ``focus`` (``policy``:
    ``EditRequest.focus_policy``, None for its default: what users get)."""
    request = EditRequest(text=case.input, instruction=case.instruction, mode="program",
                          focus_line=eval_focus(case, focus), language=case.language, max_new_tokens=max_new_tokens)
    return request if policy is None else replace(request, focus_policy=policy)


def evaluate(engine: Any, cases: Sequence[Any], arm: str, focus: str, max_new_tokens: int = 256,
             on_case: Callable[[int], None] | None = None, policy: str | None = None) -> EvalRow:
    """Run every case once (greedy) and count exact matches against the gold and the damage."""
    if focus not in FOCUS_SETTINGS:
        raise ValueError(f"unknown focus setting {focus!r}; choose from {', '.join(FOCUS_SETTINGS)}")
    exact = valid = limit = loop = collateral = wrong = broken = tails = 0
    generated = decode_s = 0.0
    for i, case in enumerate(cases):
        result = engine.edit(eval_request(case, focus, max_new_tokens, policy))
        out = result.output_text
        exact += out == case.gold
        valid += result.stop_reason == "done"
        limit += result.stop_reason == "max_tokens"
        loop += result.stop_reason == "loop"
        collateral += collateral_damage(case.input, out, case.gold).lines
        wrong += wrong_line_edit(case.input, out, case.gold)
        broken += bool(syntax_broken(case.input, out, case.language))
        tails += tail_deletion(case.input, out, case.gold) > 0
        generated += result.tokens.generated
        decode_s += result.timings.get("total_s", 0.0)
        if on_case is not None:
            on_case(i + 1)
    n = max(1, len(cases))
    return EvalRow(arm, len(cases), exact, valid, limit, loop, round(generated / n, 1), round(decode_s / n, 3),
                   focus, collateral, wrong, broken, tails)
