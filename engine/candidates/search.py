"""Several candidate fixes for one request, each checked by the user's own command; only a passing
one is meant to be written (the front doors write it, never this module).

A round looks for K *distinct* candidates: edits that change the code, that no guard refuses
(engine.verdict.judge: an unfinished, looping, destructive or syntax-breaking edit) and whose text
no earlier decode (in any round) gave. It decodes, in this order, until it has K or its budget
(:func:`budget_for`) is spent:

1. the request as it is (the single-shot edit: the same program the front doors give without
   candidates);
2. greedy edits hinted and guarded at the localizer's next lines (``EditResult.focus.ranked``:
   the lines the first edit ranked, best first; engine/decoding/localize.py), up to half of the
   K - 1 others;
3. then, in turn, a seeded sample (``EditRequest.temperature``/``seed``) at the first edit's line
   and a greedy edit at the localizer's next unused line (once those are used: a sample at one of
   them): the program decoder has no beam search, so sampling gives the other gens at a line
   (figures in docs/benchmarks.md, "Checked candidates"; beam is not measured against it).

A decode that is not distinct is counted by kind in the round's :class:`RoundTally` (the
front doors print "3 distinct candidates; the model had no fourth (2 changed nothing, ...)"); a
refused one (engine.verdict.judge: an unfinished, looping, destructive or syntax-breaking edit, or
one far from the line the user pointed at, judged against the request's own focus, not a
variant's hint) stays listed with its reason and is never checked; a repeat is dropped. Each shares the prompt the first
one read: the program prompt up to its focus hint is the same for every candidate, so the
runtime's prefix cache (engine/runtime/prefix_cache.py) gives its KV back and a later candidate
forwards only its hint and its own program (``Candidate.forwarded``). Checks run on a worker
thread while the next candidate decodes; the first that passes ends the search. When none passes
and ``max_rounds`` allows, the first failing check's output (trimmed; the check's on the
unchanged file when no candidate was checked) joins the instruction for one more round.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.api import EditRequest, Engine
from engine.candidates.check import CheckOutcome, CheckSpec, run_check, trimmed
from engine.candidates.tally import REPEATED, UNCHANGED, RoundTally
from engine.core.choices import never_cancelled
from engine.decoding.events import EditResult
from engine.verdict import judge

SAMPLE_TEMPERATURE = 1.0  # the sampled candidates' temperature: the model's own distribution
DECODES_PER_CANDIDATE = 4  # a round's budget: decodes per distinct candidate asked (budget_for)


def budget_for(k: int) -> int:
    """The most edits a round decodes while it looks for ``k`` distinct candidates.

    Sampling never runs out of variants, so without a cap a model that keeps writing the same
    fix (or none) would decode forever. On HumanEvalFix-Python near the cursor one decode in three
    gave a new distinct candidate (115 in 347 at K = 4 on the first 40 cases; the rest repeated an
    earlier text, changed nothing or broke the syntax: results/candidates/humanevalfix-python.json),
    so ``DECODES_PER_CANDIDATE`` = 4 leaves room above that rate
    while a round whose model has no other fix costs at most 4 x K decodes, each a fraction of the
    first's time (the prefix cache gives the shared prompt back)."""
    return DECODES_PER_CANDIDATE * k


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
    lost: str | None = None  # why it is not a distinct candidate (engine.candidates.tally.OUTCOMES), None if it is

    def json(self) -> dict[str, object]:
        return {"index": self.index, "round": self.round, "how": self.how, "score": round(self.score, 4),
                "program": self.result.program.serialize(), "changed": self.result.changed,
                "stop_reason": self.result.stop_reason, "refused": self.refused, "lost": self.lost,
                "check": self.check.json() if self.check is not None else None,
                "seconds": round(self.seconds, 3), "forwarded_tokens": self.forwarded,
                "tokens": {"generated": self.result.tokens.generated, "copied": self.result.tokens.copied,
                           "forced": self.result.tokens.forced}}


@dataclass
class Search:
    """Every candidate tried, best score first (refused ones last); ``passed``: the first that
    passed the check (None: none did, or there was no check); ``stop_reason``: ``passed``,
    ``exhausted`` (none passed), ``unchecked`` (no check given) or ``cancelled``;
    ``seconds_to_pass``: from the start to the passing check's end; ``tallies``: each round's
    distinct candidates against the K asked, and what became of its other decodes;
    ``language``: the request's (the tallies' words name it)."""

    candidates: list[Candidate]
    passed: Candidate | None
    rounds: int
    stop_reason: str
    seconds: float = 0.0
    seconds_to_pass: float | None = None
    decodes: int = 0  # edits decoded, repeats included
    tallies: list[RoundTally] = field(default_factory=list)
    language: str = ""

    @property
    def distinct(self) -> int:
        """Distinct candidates found, over every round."""
        return sum(t.distinct for t in self.tallies)

    def shortfall(self) -> str:
        """What fell short of the K asked, in words ("3 distinct candidates; the model had no
        fourth in 16 decodes (2 changed nothing, ...)"; a round named when there were several), or
        "" when every round found K, or ended on a pass or a cancel."""
        return self.words([t for t in self.tallies if t.short])

    def words(self, tallies: list[RoundTally] | None = None) -> str:
        """``tallies`` (default: every round's) in words, each named by its round when there
        were several."""
        chosen = self.tallies if tallies is None else tallies
        return "; ".join((f"round {t.round}: " if len(self.tallies) > 1 else "") + t.words(self.language)
                         for t in chosen)

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
                "distinct": self.distinct, "shortfall": self.shortfall() or None,
                "rounds_tally": [t.json() for t in self.tallies],
                "candidates": [c.json() for c in self.candidates]}


def variants(request: EditRequest, first: EditResult, k: int) -> Iterator[tuple[str, EditRequest]]:
    """The requests tried after ``first``, without end (the round's budget stops it): greedy at the
    localizer's next lines (hinted and guarded there) for up to half of the ``k`` - 1 others, then
    in turn a seeded sample at the first edit's line and a greedy edit at the next unused ranked
    line, or once those are used a sample at one of them (each seed once per line)."""
    line = first.focus.hint
    others = [n for n in first.focus.ranked if n != line]
    lead = math.ceil(max(0, k - 1) / 2)

    def greedy(n: int) -> tuple[str, EditRequest]:
        return f"greedy at line {n}", replace(request, focus_line=n, localize=False)

    def sampled(seed: int, n: int | None) -> tuple[str, EditRequest]:
        at = replace(request, focus_line=n, localize=False) if n is not None else request
        where = f" at line {n}" if n is not None else ""
        return f"sampled (seed {seed}){where}", replace(at, temperature=SAMPLE_TEMPERATURE, seed=seed)

    yield from (greedy(n) for n in others[:lead])
    rest = others[lead:]
    for seed in itertools.count(1):
        yield sampled(seed, line)
        if rest:
            yield greedy(rest.pop(0))
        elif others:
            yield sampled(seed, others[(seed - 1) % len(others)])


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
    tallies: list[RoundTally] = field(default_factory=list)
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
            if state.passed is not None and state.tallies[-1].ended == "ran out":
                state.tallies[-1].ended = "passed"  # a check passed after the round's last decode
            if state.passed is not None or cancelled() or number == max_rounds:
                break
            assert check is not None  # (without one there is one round)
            feedback = _feedback(state, request, number)
            if feedback is None:
                break  # the file as it is passes the check: its output cannot guide a round
            current = replace(request, instruction=with_feedback(request.instruction, check.command, feedback.output))
    ordered = sorted(state.candidates, key=lambda c: (c.refused is not None, -c.score, c.index))
    if cancelled() and state.passed is None:
        for tally in state.tallies:
            tally.ended = "cancelled" if tally.ended == "ran out" else tally.ended
        reason = "cancelled"
    elif check is None:
        reason = "unchecked"
    else:
        reason = "passed" if state.passed is not None else "exhausted"
    return Search(ordered, state.passed, rounds, reason, time.perf_counter() - state.started, state.seconds_to_pass,
                  state.decodes, state.tallies, request.language)


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
    """Decode the round's candidates until K are distinct or the budget is spent, handing each
    distinct one to the check thread as it is ready."""
    checks: list[Future] = []
    tally = RoundTally(number, state.k, budget_for(state.k))
    state.tallies.append(tally)
    plans: Iterator[tuple[str, EditRequest]] = iter([("as asked", request)])
    while tally.distinct < state.k and tally.decodes < tally.budget:
        if state.found.is_set():
            tally.ended = "passed"
            break
        if state.cancelled():
            tally.ended = "cancelled"
            break
        plan = next(plans, None)
        if plan is None:
            break  # (the variants never end: the budget does)
        how, variant = plan
        label = f"{'' if number == 1 else f'round {number}, '}candidate {tally.distinct + 1} of {state.k}"
        state.progress(f"{label}: decoding{'' if tally.decodes == 0 else f' (try {tally.decodes + 1} of {tally.budget})'}")
        candidate = _decode(state, variant, len(state.candidates) + 1, number, how)
        if candidate is None:
            tally.ended = "passed" if state.found.is_set() else "cancelled"
            break
        tally.decodes += 1
        tally.seconds += candidate.seconds
        if tally.decodes == 1:
            plans = itertools.chain(plans, variants(request, candidate.result, state.k))
        if candidate.result.output_text in state.seen:
            tally.lost[REPEATED] += 1
            state.progress(f"{label}: the same output as an earlier one, dropped")
            continue
        state.seen.add(candidate.result.output_text)
        state.candidates.append(candidate)
        if candidate.lost is not None:
            tally.lost[candidate.lost] += 1
            state.progress(f"{label}: refused: {candidate.refused}")
            continue
        tally.distinct += 1
        if state.check is not None:
            state.progress(f"{label}: checking")
            checks.append(checker.submit(_check, state, candidate, label))
    if tally.distinct >= state.k:
        tally.ended = "full"
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
    lost = verdict.kind if refused else None
    if refused is None and not result.changed:
        refused, lost = "it changes nothing", UNCHANGED
    return Candidate(index, number, result, float(result.breakdown.get("logprob", 0.0)), refused=refused,
                     how=how, seconds=seconds, forwarded=sum(log.sizes()), exit_code=verdict.exit_code, lost=lost)


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
