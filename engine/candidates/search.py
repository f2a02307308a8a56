"""Several candidate fixes for one request, each checked by the user's own command; only a passing
one is meant to be written (the front doors write it, never this module).

The candidates of a round are, in the order they are decoded:

1. the request as it is (the single-shot edit: the same program the front doors give without
   candidates);
2. greedy edits hinted and guarded at the localizer's next lines (``EditResult.focus.ranked``:
   the lines the first edit ranked, best first; engine/decoding/localize.py);
3. seeded samples (``EditRequest.temperature``/``seed``) at the first edit's line: the program
   decoder has no beam search, so sampling gives the other gens at a line (figures in
   docs/benchmarks.md, "Checked candidates"; beam is not measured against it).

Each shares the prompt the first one read: the program prompt up to its focus hint is the same
for every candidate, so the runtime's prefix cache (engine/runtime/prefix_cache.py) gives its KV
back and a later candidate forwards only its hint and its own program (``Candidate.forwarded``).
An output already seen (in any round) is dropped, an unchanged one is not checked, and a guard's refusal
(engine.verdict.judge: an unfinished, looping, destructive or syntax-breaking edit, or one far from
the line the user pointed at, judged against the request's own focus, not a variant's hint) removes
a candidate before any check. Checks run on a worker thread while the next candidate decodes; the
first that passes ends the search. When none passes and ``max_rounds`` allows, the first failing
check's output (trimmed; the check's on the unchanged file when no candidate was checked) joins
the instruction for one more round.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.api import EditRequest, Engine
from engine.candidates.check import CheckOutcome, CheckSpec, run_check, trimmed
from engine.core.choices import never_cancelled
from engine.decoding.events import EditResult
from engine.verdict import judge

SAMPLE_TEMPERATURE = 1.0  # the sampled candidates' temperature: the model's own distribution
ATTEMPTS = 1.5  # decodes a round may spend per candidate it keeps (a duplicate is dropped and another tried)


@dataclass
class Candidate:
    """One candidate: its edit, the model's score (the log-probability of the program's chosen
    tokens, engine.decoding.program_decoder; 0 in a text mode), the check's outcome (None: not
    checked) or a guard's reason to refuse it (``exit_code``: the CLI's status for that refusal,
    engine.verdict). ``how``: which variant it is; ``seconds`` and ``forwarded``: its decode's
    time and the tokens it forwarded through the model."""

    index: int
    round: int
    result: EditResult
    score: float
    check: CheckOutcome | None = None
    refused: str | None = None
    how: str = ""
    seconds: float = 0.0
    forwarded: int = 0
    exit_code: int = 0

    def json(self) -> dict[str, object]:
        return {"index": self.index, "round": self.round, "how": self.how, "score": round(self.score, 4),
                "program": self.result.program.serialize(), "changed": self.result.changed,
                "stop_reason": self.result.stop_reason, "refused": self.refused,
                "check": self.check.json() if self.check is not None else None,
                "seconds": round(self.seconds, 3), "forwarded_tokens": self.forwarded,
                "tokens": {"generated": self.result.tokens.generated, "copied": self.result.tokens.copied,
                           "forced": self.result.tokens.forced}}


@dataclass
class Search:
    """Every candidate tried, best score first (refused ones last); ``passed``: the first that
    passed the check (None: none did, or there was no check); ``stop_reason``: ``passed``,
    ``exhausted`` (none passed), ``unchecked`` (no check given) or ``cancelled``;
    ``seconds_to_pass``: from the start to the passing check's end."""

    candidates: list[Candidate]
    passed: Candidate | None
    rounds: int
    stop_reason: str
    seconds: float = 0.0
    seconds_to_pass: float | None = None
    decodes: int = 0  # edits decoded, duplicates included

    @property
    def best(self) -> Candidate | None:
        """What to show when none passed: the best-scored candidate a guard let through and that
        changes something, else the best-scored of all."""
        usable = [c for c in self.candidates if c.refused is None and c.result.changed]
        return (usable or self.candidates or [None])[0]

    def json(self) -> dict[str, object]:
        return {"stop_reason": self.stop_reason, "rounds": self.rounds, "seconds": round(self.seconds, 3),
                "seconds_to_pass": None if self.seconds_to_pass is None else round(self.seconds_to_pass, 3),
                "passed": self.passed.index if self.passed is not None else None, "decodes": self.decodes,
                "candidates": [c.json() for c in self.candidates]}


def variants(request: EditRequest, first: EditResult, k: int) -> list[tuple[str, EditRequest]]:
    """The requests tried after ``first`` for candidates 2..k: up to half of them greedy at the
    localizer's next lines (hinted and guarded there), then seeded samples at the first edit's
    line, enough to stand in for duplicates (ATTEMPTS tries a candidate)."""
    extra = max(0, k - 1)
    line = first.focus.hint
    others = [n for n in first.focus.ranked if n != line]
    hinted = others[:math.ceil(extra / 2)]
    out = [(f"greedy at line {n}", replace(request, focus_line=n, localize=False)) for n in hinted]
    at = replace(request, focus_line=line, localize=False) if line is not None else request
    for seed in range(1, math.ceil(ATTEMPTS * k) - len(hinted)):
        where = f" at line {line}" if line is not None else ""
        out.append((f"sampled (seed {seed}){where}",
                    replace(at, temperature=SAMPLE_TEMPERATURE, seed=seed)))
    return out


@dataclass
class _Round:
    """One search's shared state across rounds (the check thread reads ``found``)."""

    engine: Engine
    check: CheckSpec | None
    file_path: Path | None
    k: int
    cancelled: Callable[[], bool]
    progress: Callable[[str], None]
    focus: int | None = None  # the line the user pointed at (the request's; a variant moves only its hint)
    started: float = field(default_factory=time.perf_counter)
    seen: set[str] = field(default_factory=set)
    decodes: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    found: threading.Event = field(default_factory=threading.Event)
    passed: Candidate | None = None
    seconds_to_pass: float | None = None

    def stopped(self) -> bool:
        return self.cancelled() or self.found.is_set()


def search_fixes(engine: Engine, request: EditRequest, *, k: int, check: CheckSpec | None, max_rounds: int = 1,
                 file_path: Path | None = None, cancelled: Callable[[], bool] = never_cancelled,
                 progress: Callable[[str], None] = lambda message: None) -> Search:
    """Up to ``k`` candidates a round for ``request``, checked by ``check`` on ``file_path`` (a
    check needs the path: its temporary copy mirrors that file's folder). Without a check: the
    distinct candidates of one round, unchecked, best score first. ``cancelled`` is polled before
    each candidate, between decode steps and while a check runs (its process group is then
    killed); ``progress`` gets messages such as "candidate 3 of 8: checking" (also from the check
    thread)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if check is not None and file_path is None:
        raise ValueError("a check needs the path of the file it checks")
    state = _Round(engine, check, file_path, k, cancelled, progress, request.focus_line)
    rounds = 0
    current = request
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="candidate-check") as checker:
        for number in range(1, (max_rounds if check is not None else 1) + 1):
            rounds = number
            checks = _one_round(state, current, number, checker)
            for future in checks:
                future.result()
            if state.passed is not None or cancelled() or number == max_rounds:
                break
            assert check is not None  # (without one there is one round)
            feedback = _feedback(state, request, number)
            if feedback is None:
                break  # the file as it is passes the check: its output cannot guide a round
            current = replace(request, instruction=with_feedback(request.instruction, check.command, feedback.output))
    ordered = sorted(state.candidates, key=lambda c: (c.refused is not None, -c.score, c.index))
    if cancelled() and state.passed is None:
        reason = "cancelled"
    elif check is None:
        reason = "unchecked"
    else:
        reason = "passed" if state.passed is not None else "exhausted"
    return Search(ordered, state.passed, rounds, reason, time.perf_counter() - state.started, state.seconds_to_pass,
                  state.decodes)


def _feedback(state: _Round, request: EditRequest, number: int) -> CheckOutcome | None:
    """The failing check output the next round is told: the round's first failing candidate's,
    else (every candidate refused, unchanged or a duplicate) the check's on the file as it is;
    None when that passes."""
    failing = next((c.check for c in state.candidates if c.round == number and c.check is not None
                    and not c.check.passed), None)
    if failing is not None:
        return failing
    assert state.check is not None and state.file_path is not None
    state.progress(f"round {number}: checking the file as it is, for the next round")
    outcome = run_check(state.check, state.file_path, request.text, state.cancelled)
    return None if outcome.passed or outcome.cancelled else outcome


def with_feedback(instruction: str, command: str, output: str) -> str:
    """The next round's instruction: the user's, then the failing check's output, trimmed."""
    return f"{instruction}\nA previous attempt failed the check `{command}`:\n{trimmed(output)}"


def _one_round(state: _Round, request: EditRequest, number: int, checker: ThreadPoolExecutor) -> list[Future]:
    """Decode the round's candidates, handing each to the check thread as it is ready."""
    checks: list[Future] = []
    plans: list[tuple[str, EditRequest]] = [("as asked", request)]
    tried = kept = 0
    while tried < len(plans) and kept < state.k and not state.stopped():
        how, variant = plans[tried]
        tried += 1
        label = f"{'' if number == 1 else f'round {number}, '}candidate {kept + 1} of {state.k}"
        state.progress(f"{label}: decoding")
        candidate = _decode(state, variant, len(state.candidates) + 1, number, how)
        if candidate is None:
            break  # cancelled, or a check passed meanwhile
        if tried == 1:
            plans += variants(request, candidate.result, state.k)
        if candidate.result.output_text in state.seen:
            state.progress(f"{label}: the same output as an earlier one, dropped")
            continue
        kept += 1
        state.seen.add(candidate.result.output_text)
        state.candidates.append(candidate)
        if candidate.refused is not None:
            state.progress(f"{label}: refused: {candidate.refused}")
        elif state.check is not None:
            state.progress(f"{label}: checking")
            checks.append(checker.submit(_check, state, candidate, label))
    return checks


def _decode(state: _Round, request: EditRequest, index: int, number: int, how: str) -> Candidate | None:
    runtime = state.engine.model_for(request.mode).runtime
    started = time.perf_counter()
    with runtime.meter() as log:
        result = state.engine.edit(request, cancelled=state.stopped)
    state.decodes += 1
    seconds = time.perf_counter() - started
    if result.stop_reason == "cancelled":
        return None
    verdict = judge(result, request.instruction, request.max_new_tokens, request.language, state.focus)
    refused = verdict.message or None
    if refused is None and not result.changed:
        refused = "it changes nothing"
    return Candidate(index, number, result, float(result.breakdown.get("logprob", 0.0)), refused=refused,
                     how=how, seconds=seconds, forwarded=sum(log.sizes()), exit_code=verdict.exit_code)


def _check(state: _Round, candidate: Candidate, label: str) -> None:
    """The check thread's job: skipped once an earlier candidate passed."""
    assert state.check is not None and state.file_path is not None
    if state.stopped():
        return
    outcome = run_check(state.check, state.file_path, candidate.result.output_text, state.cancelled)
    candidate.check = outcome
    if outcome.passed and state.passed is None:
        state.passed = candidate
        state.seconds_to_pass = time.perf_counter() - state.started
        state.found.set()
    state.progress(f"{label}: {'passed' if outcome.passed else 'cancelled' if outcome.cancelled else 'failed'}")
