"""Corpus edit benchmarks: every arm on every case, side by side, one process.

Families (the arms are defined in :mod:`engine.bench.arms`)
--------
``forced``: every arm produces the gold, so only the mechanism's cost differs.
  * ``ar``: the gold's tokens after the text prompt, one forward each (teacher-forced greedy).
  * ``pld``: prompt-lookup drafting as transformers does it (its own candidate generator:
    :mod:`engine.bench.lookup`), each draft verified in one forward with logits for every position
    and accepted while it equals the gold.
  * ``speculative``: the engine's line-aligned drafting (:class:`engine.decoding.drafter.InputDrafter`,
    with its draft-size schedule and back-off), verified against the gold the same way.
  * ``program``: Copy-as-Decode through the engine's ``forced`` mode with the line-oracle program
    (``Engine.edit(EditRequest(mode="forced", program=line_oracle(input, gold), draft=False))``);
    its output must equal the gold. ``program-drafted``: the same with ``draft=True`` (drafts
    verified in the step's forward, accepted while they equal the teacher's choice).
  The text arms run the engine's own decode loop (:class:`engine.decoding.greedy.DraftedDecode`,
  the gold as its teacher) on its :class:`engine.runtime.session.Session` and text prompt, so
  their forwards are chosen and timed by the same code as the engine's.
``free``: the model decides. Text modes and program-mode variants (selector or base model,
  drafted or not, focus hint none / near / oracle: :mod:`engine.evaluation.focus`) through
  ``Engine.edit`` with the corpus instruction. Per arm: pass@1 (the corpus tests), exact match,
  valid programs, token-limit and loop stops, collateral damage, wrong-line edits, tail deletions
  and syntax breaks (:mod:`engine.evaluation.quality`) and speed vs ``ar``. A hinted program arm
  also records which lines its edit touches and whether the focus rule (the verdict's hold of a
  fix far from the pointed line: engine.checks.guards.far_from_focus) would hold it back; the
  summary's ``focus_rule`` gives pass@1 and collateral as the front doors write them, the held
  edits counted as not written, at each radius of ``FOCUS_RULE_RADII``. ``ar`` may be left out of
  a free run that measures no speed against it (its speedups are then absent).

Measures
--------
``decode_s``: seconds of the decode phase's model forwards, the prompt's prefill excluded, plus
the grammar's time for ``program`` (the engine's ``timings["decode_s"]``). ``wall_s``: the decode
phase's wall clock (Python overhead included). Speedups vs ``ar``: pooled (sum of ``ar`` over sum
of the arm) and the median of per-case ratios. Arms run interleaved per case, their order rotating
from case to case, after a warm-up of every arm.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from engine.api import EditRequest, Engine
from engine.bench.arms import DEFAULT_ARMS, FAMILY_ARMS, Arm, check_arms
from engine.bench.bounds import (
    KernelCurve,
    bound,
    drafted_cost,
    drafted_walk,
    oracle_spans,
    paper_cost,
    program_structure,
    structure_cost,
)
from engine.bench.harness import first_difference, machine_info, median, ratio, rotate
from engine.bench.lookup import PromptLookupDrafter
from engine.bench.runner import DEFAULT_TIMEOUT_S, TestOutcome, run_tests
from engine.checks.guards import FOCUS_RADIUS, edited_lines, focus_distance
from engine.core.lines import split_lines
from engine.core.modes import traits
from engine.core.tokens import encode
from engine.decoding import prompt
from engine.decoding.drafter import Drafter, InputDrafter
from engine.decoding.greedy import DraftedDecode, Teacher
from engine.decoding.tables import tables_for
from engine.evaluation.corpora import EditCase, load_corpus
from engine.evaluation.focus import focus_for, near_offset, offset_histograms
from engine.evaluation.quality import (
    collateral_damage,
    exact_match,
    near_copy_insertions,
    syntax_broken,
    tail_deletion,
    valid_program,
    wrong_line_edit,
)
from engine.language.oracle import line_oracle
from engine.training.synth import first_changed_line

FAMILIES = tuple(FAMILY_ARMS)  # forced, free
ARMS = tuple(dict.fromkeys([*FAMILY_ARMS["forced"], *FAMILY_ARMS["free"]]))  # every arm name of either family
LIMIT_STOPS = ("max_tokens", "loop")  # unfinished edits: the token limit, or a loop the guard stopped

FOCUS_RULE_RADII = (FOCUS_RADIUS - 1, FOCUS_RADIUS, FOCUS_RADIUS + 1)  # the rule's radius, and one either side to tune it
RAW_HEAD_CHARS = 240  # free family: the start of each arm's raw reply is kept for diagnosis

WARMUP_INPUT = 'def add(a, b):\n    """Sum of a and b."""\n    return a - b\n\n\nprint(add(2, 3))\n'
WARMUP_GOLD = 'def add(a, b):\n    """Sum of a and b."""\n    return a + b\n\n\nprint(add(2, 3))\n'


@dataclass
class ArmRun:
    """One arm on one case."""

    decode_s: float
    wall_s: float
    forward_sizes: list[int]
    output_tokens: int
    tokens: dict[str, int]
    breakdown: dict[str, Any]
    stop_reason: str = "done"
    output: str | None = None
    result: Any = None  # the engine's EditResult (engine arms only; never written to JSON)
    ok: bool | None = None
    test: TestOutcome | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    edit_s: float | None = None  # the whole edit as the user waits for it (engine arms: prompt, localizer, decode)


def forced_drafter(arm: str, cost: Any, prompt_ids: Sequence[int], src_ids: Sequence[int],
                   stop_ids: frozenset[int]) -> Drafter | None:
    """What a forced text arm drafts with: nothing (``ar``), transformers' prompt lookup (``pld``)
    or the engine's drafter from the input (``speculative``)."""
    if arm == "ar":
        return None
    if arm == "pld":
        return PromptLookupDrafter(prompt_ids, stop_ids)
    if arm == "speculative":
        return InputDrafter(src_ids, cost=cost)
    raise ValueError(f"unknown forced text arm {arm!r}")


def teacher_forced(loaded: Any, arm: str, prompt_ids: Sequence[int], gold_ids: Sequence[int],
                   src_ids: Sequence[int], stop_ids: frozenset[int], verify: str = "auto") -> ArmRun:
    """A text arm decoding the gold through the engine's own loop (:class:`DraftedDecode` with the
    gold as its :class:`Teacher`): ``ar`` one token per forward; ``pld`` prompt lookup's drafts
    (:class:`engine.bench.lookup.PromptLookupDrafter`), ``speculative`` the engine's
    :class:`InputDrafter` and its schedule, each draft verified in one forward, kept while it equals
    the gold and the rest cropped from the cache. ``verify`` bounds the drafts as the engine's
    (engine.runtime.session.Session.draft_room)."""
    gold = list(gold_ids)
    drafter = forced_drafter(arm, loaded.runtime.cost, prompt_ids, src_ids, stop_ids)
    session = loaded.session()
    decode = DraftedDecode(session, prompt_ids, stop_ids, len(gold), drafter, verify=verify, teacher=Teacher(gold))
    with loaded.runtime.meter() as meter:
        start = time.perf_counter()
        for _ in decode.chunks():
            pass
        wall = time.perf_counter() - start - session.seconds["prefill"]
    session.close()
    breakdown = session.breakdown()
    if drafter is not None:
        breakdown.update({"drafted_tokens": decode.accepted + decode.rejected, "draft_accepted": decode.accepted})
    return ArmRun(decode_s=sum(v for k, v in session.seconds.items() if k != "prefill"), wall_s=wall,
                  forward_sizes=meter.sizes(session.prefill_forwards), output_tokens=len(gold),
                  tokens={"generated": decode.steps, "copied": decode.accepted, "forced": 0},
                  breakdown=breakdown, ok=decode.out == gold)


def engine_arm(engine: Any, request: Any) -> tuple[ArmRun, Any]:
    """One ``Engine.edit`` call, metered. Returns the run and the :class:`EditResult`."""
    loaded = engine.model_for(request.mode)  # program mode may run on the selector's merged copy
    engine.forget_prompts()  # every measured edit is a first edit
    with loaded.runtime.meter() as meter:
        result = engine.edit(request)
    breakdown = dict(result.breakdown)
    decode = result.timings["decode_s"]
    wall = result.timings["total_s"] - result.timings.get("prefill_s", 0.0)
    # The forwards before the decode phase: the localizer's and the prompt's prefill chunks.
    before = breakdown.get("localize_forwards", 0) + breakdown.get("prefill_forwards", 1)
    tokens = {"generated": result.tokens.generated, "copied": result.tokens.copied, "forced": result.tokens.forced}
    run = ArmRun(decode_s=decode, wall_s=wall, forward_sizes=meter.sizes(before),
                 output_tokens=len(encode(loaded.tokenizer, result.region_output)), tokens=tokens,
                 breakdown=breakdown, stop_reason=result.stop_reason, output=result.output_text, result=result,
                 extra={"raw_output_head": result.raw_output[:RAW_HEAD_CHARS],
                        # compares outputs across runs (a run-to-run noise measurement) without storing them
                        "output_sha256": hashlib.sha256(result.output_text.encode("utf-8")).hexdigest()[:16]},
                 edit_s=result.timings["total_s"])
    return run, result


def _language(case: Any) -> dict[str, str]:
    """``language=`` for the request (the corpus language tags the prompt's code fences), when the
    engine's EditRequest has that field."""
    return {"language": case.language} if "language" in EditRequest.__dataclass_fields__ else {}


def text_prompt_ids(tokenizer: Any, case: Any) -> list[int]:
    """The text modes' prompt for a whole-file edit of ``case``, built as engine/decoding/run.py builds it."""
    parts = prompt.PromptParts(instruction=case.instruction, region=case.input, **_language(case))
    fence = parts.fence() if hasattr(parts, "fence") else prompt.TEXT_FENCE_OPEN
    return prompt.render(tokenizer, prompt.text_messages(parts), assistant_prefix=fence)


def text_reply_differs(arm: str, run: ArmRun, ar: ArmRun) -> bool:
    """A drafted text arm whose reply is not ar's (under ``verify="argmax"`` a near-tie may flip)."""
    return (arm in ("speculative", "pld") and run.result is not None and ar.result is not None
            and run.result.raw_output != ar.result.raw_output)


class EditBench:
    """Runs one family's arms over cases and turns the runs into the results record."""

    def __init__(self, engine: Any, family: str, arms: Sequence[str] | None = None, kernel: KernelCurve | None = None,
                 max_new_tokens: int | None = None, test_timeout: float = DEFAULT_TIMEOUT_S,
                 run_tests_: bool = True, verify: str = "auto"):

        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; choose forced or free")
        self.arms = check_arms(list(arms) if arms else list(DEFAULT_ARMS[family]), family)
        self.specs: dict[str, Arm] = {a: FAMILY_ARMS[family][a] for a in self.arms}
        self.engine = engine
        # program-base: the same loaded model without the selector (no second load)
        self.base_engine = engine if engine.selector_model is None else Engine(engine.loaded)
        self.loaded = engine.loaded
        self.tables = tables_for(self.loaded)
        self.family = family
        self.kernel = kernel
        self.max_new_tokens = max_new_tokens
        self.test_timeout = test_timeout
        self.run_tests = run_tests_
        self.verify = verify  # speculative's verify rule (engine.core.choices.Verify)

    # -- one case -------------------------------------------------------------------------
    def cap(self, case: Any) -> int:
        """New-token limit of a free-family case: ``--max-new-tokens`` or 1.5 x input tokens + 64."""
        if self.max_new_tokens:
            return self.max_new_tokens
        return min(4096, int(1.5 * len(encode(self.loaded.tokenizer, case.input))) + 64)

    @staticmethod
    def changed_line(case: Any) -> int | None:
        """The first input line the gold changes (None if it changes nothing): the oracle focus."""
        try:
            return first_changed_line(case.input, case.gold)
        except ValueError:
            return None

    def focus_line(self, case: Any, setting: str) -> int | None:
        """The focus an arm with ``setting`` (none, near, on, oracle) sends for ``case``."""
        return focus_for(setting, self.changed_line(case), len(split_lines(case.input)), case.id)

    def run_arm(self, case: Any, arm: str) -> ArmRun:

        spec = self.specs[arm]
        tok = self.loaded.tokenizer
        if self.family == "forced":
            if spec.is_program:
                program = line_oracle(case.input, case.gold)
                run, result = engine_arm(self.engine, EditRequest(case.input, case.instruction, mode="forced",
                                                                  program=program, max_new_tokens=1 << 16,
                                                                  draft=spec.draft, **_language(case)))
                run.ok = result.output_text == case.gold
                run.output = None
                return run
            prompt = text_prompt_ids(tok, case)
            return teacher_forced(self.loaded, spec.mode, prompt, encode(tok, case.gold), encode(tok, case.input),
                                  self.tables.stop_ids, self.verify)
        engine = self.base_engine if spec.base else self.engine
        request = EditRequest(case.input, case.instruction, mode=spec.mode, max_new_tokens=self.cap(case),
                              draft=spec.draft, focus_line=self.focus_line(case, spec.focus),
                              localize=spec.localize, noop_deviation=spec.noop, focus_policy=spec.policy,
                              verify=self.verify, **_language(case))
        run, _ = engine_arm(engine, request)
        return run

    def warm_up(self) -> None:
        """Every arm once on a small edit (the first forwards and ``generate`` call of a process
        are several times slower), results thrown away."""
        case = EditCase(id="warmup", corpus="warmup", language="python", input=WARMUP_INPUT, gold=WARMUP_GOLD,
                        instruction="Fix the bug in add.")
        saved, self.max_new_tokens = self.max_new_tokens, 48
        try:
            for arm in self.arms:
                self.run_arm(case, arm)
        finally:
            self.max_new_tokens = saved

    def oracle_record(self, case: Any, runs: dict[str, ArmRun]) -> dict[str, Any]:
        """The case's bound inputs: oracle spans, the program's structure (walk), the drafted walk,
        their costs, and (forced family) whether the walks match the engine's own counts."""
        program = line_oracle(case.input, case.gold)
        spans = oracle_spans(self.loaded.tokenizer, case.input, case.gold)
        walk = program_structure(self.loaded, self.tables, case.input, program)
        drafted = drafted_walk(self.loaded, self.tables, case.input, program)
        rec: dict[str, Any] = {
            "T": spans.T, "T_gen": spans.T_gen, "spans": spans.spans,
            "chosen": walk.chosen, "gen_chosen": walk.gen_chosen, "structure_chosen": walk.structure_chosen,
            "literal_runs": walk.literal_runs, "literal_tokens": walk.literal_tokens, "splices": walk.splices,
            "trailing_literal_tokens": walk.trailing_literal_tokens, "trailing_splice": walk.trailing_splice,
            "drafted": drafted.drafted, "drafted_structure": drafted.drafted_structure,
            "drafted_forwards": len(drafted.forward_sizes), "drafted_verify_forwards": drafted.verify_forwards,
        }
        forced = self.family == "forced"
        program_run, drafted_run = runs.get("program"), runs.get("program-drafted")
        if program_run is not None and forced:
            t = program_run.tokens
            rec["walk_matches_engine"] = (walk.chosen == t["generated"] and walk.literal_tokens == t["forced"]
                                          and sum(walk.splices) + walk.trailing_splice == t["copied"])
        if drafted_run is not None and forced:
            rec["drafted_walk_matches_engine"] = drafted.forward_sizes == drafted_run.forward_sizes
        if self.kernel is not None:
            k = self.kernel
            rec["paper_cost"] = paper_cost(spans.T_gen, spans.spans, k)
            rec["structure_cost"] = structure_cost(walk.chosen, walk.literal_runs, walk.splices, k)
            rec["drafted_cost"] = drafted_cost(drafted, k)
            if program_run is not None and forced:
                rec["fused_cost"] = k.costs(program_run.forward_sizes)
        return rec

    def quality(self, case: Any, arm: str, run: ArmRun, runs: dict[str, ArmRun]) -> dict[str, Any]:
        """Free family: exact match, collateral damage, valid program, identity with ``program``."""
        result = run.result
        output = run.output or ""
        out: dict[str, Any] = {"exact": exact_match(output, case.gold),
                               "collateral": collateral_damage(case.input, output, case.gold).json(),
                               "wrong_line": wrong_line_edit(case.input, output, case.gold),
                               "tail_deleted": tail_deletion(case.input, output, case.gold),
                               "near_copy_insertions": near_copy_insertions(case.input, output)}
        broken = syntax_broken(case.input, output, case.language)
        if broken is not None:
            out["syntax_broken"] = broken
        focus = self.focus_line(case, self.specs[arm].focus)
        if self.specs[arm].is_program and focus is not None and result is not None:
            out["focus_rule"] = focus_rule_record(result, focus)
        if self.specs[arm].is_program and result is not None:
            out["valid_program"] = valid_program(result.raw_output, result.region_input, result.region_output,
                                                  result.stop_reason)
        if arm == "program-undrafted" and "program" in runs:
            other = runs["program"].result
            out["identical_to_program"] = (result is not None and other is not None
                                           and result.output_text == other.output_text
                                           and result.raw_output == other.raw_output)
        return out

    def run_case(self, case: Any, order: Sequence[str], on_arm: Callable[[str], None] | None = None,
                 index: int | None = None) -> dict[str, Any]:

        runs: dict[str, ArmRun] = {}
        for arm in order:
            if on_arm:
                on_arm(arm)
            runs[arm] = self.run_arm(case, arm)
        ar = runs.get("ar")
        record: dict[str, Any] = {"id": case.id, "gold_tokens": len(encode(self.loaded.tokenizer, case.gold)),
                                  "input_tokens": len(encode(self.loaded.tokenizer, case.input)), "order": list(order),
                                  "arms": {}}
        if index is not None:
            record["index"] = index
        if self.family == "free":
            record["max_new_tokens"] = self.cap(case)
            record["input_lines"] = len(split_lines(case.input))
            if any(self.specs[a].hinted for a in self.arms):
                record["focus"] = {"oracle": self.focus_line(case, "oracle"), "near": self.focus_line(case, "near"),
                                   "near_offset": near_offset(case.id)}
        for arm in self.arms:
            run = runs[arm]
            entry: dict[str, Any] = {
                "decode_s": run.decode_s, "wall_s": run.wall_s,
                "speedup_vs_ar": ratio(ar.decode_s, run.decode_s) if ar else None,
                "wall_speedup_vs_ar": ratio(ar.wall_s, run.wall_s) if ar else None,
                **({"edit_s": run.edit_s} if run.edit_s is not None else {}),
                "forwards": len(run.forward_sizes), "forward_tokens": sum(run.forward_sizes),
                "max_forward": max(run.forward_sizes, default=0),
                "output_tokens": run.output_tokens, "tokens": run.tokens, "breakdown": run.breakdown,
                "stop_reason": run.stop_reason,
            }
            if self.kernel is not None:
                entry["kernel_cost"] = self.kernel.costs(run.forward_sizes)
            if self.family == "forced":
                entry["ok"] = run.ok
            else:
                entry["same_as_ar"] = run.output == ar.output if ar else None
                if ar and text_reply_differs(arm, run, ar):
                    entry["first_difference"] = self.first_difference(case, ar, run)
                entry.update(self.quality(case, arm, run, runs))
                entry.update(run.extra)
                if self.run_tests:
                    outcome = run_tests(case, run.output, timeout=self.test_timeout)
                    entry["test"] = outcome.status
                    if not outcome.passed:
                        entry["test_detail"] = outcome.detail[-300:]
            record["arms"][arm] = entry
        if self.family == "free" and self.run_tests:
            record["gold_test"] = run_tests(case, None, timeout=self.test_timeout).status
        if self.kernel is not None or self.family == "forced":
            record["oracle"] = self.oracle_record(case, runs)
        return record

    def first_difference(self, case: Any, ar: ArmRun, run: ArmRun) -> dict[str, Any] | None:
        """Where a text arm's reply first leaves ar's, with the logit gap there
        (engine.bench.harness.first_difference); the replies' tokens are their text encoded again,
        so ``step_argmax`` says whether that position is ar's own choice."""
        tok = self.loaded.tokenizer
        return first_difference(self.loaded, text_prompt_ids(tok, case), encode(tok, ar.result.raw_output),
                                encode(tok, run.result.raw_output))

    # -- the corpus ---------------------------------------------------------------------------
    def run(self, cases: Sequence[Any], progress: bool = True, warmup: bool = True, first_index: int = 0,
            on_record: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
        """Records of ``cases`` (``first_index``: the corpus position of the first one, for the
        arm-order rotation and the record's ``index``). ``on_record`` sees the records so far after
        every case (the CLI writes partial results with it)."""
        if warmup:
            self.warm_up()
        records: list[dict[str, Any]] = []

        def one(i: int, case: Any, on_arm: Callable[[str], None] | None = None) -> None:
            index = first_index + i
            records.append(self.run_case(case, rotate(self.arms, index), on_arm, index=index))
            if on_record is not None:
                on_record(records)

        if not progress:
            for i, case in enumerate(cases):
                one(i, case)
            return records
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task(f"{self.family}", total=len(cases) * len(self.arms))

            for i, case in enumerate(cases):
                def on_arm(arm: str, case_id: str = case.id) -> None:
                    bar.update(task, description=f"{self.family} {case_id} [{arm}]")

                first = len(records) * len(self.arms)
                one(i, case, on_arm)
                bar.update(task, completed=first + len(self.arms))
        return records


def _count(entries: Sequence[dict[str, Any]], key: str) -> int | None:
    """How many entries have a true ``key`` (None when no entry has the key: not measured)."""
    values = [e[key] for e in entries if key in e]
    return sum(bool(v) for v in values) if values else None


def summarize(records: Sequence[dict[str, Any]], arms: Sequence[str], family: str,
              kernel: KernelCurve | str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(per-arm summary, bounds) of a list of case records (``kernel``: the curve, or just its
    source name when re-summarising stored records, whose costs are already computed)."""
    out: dict[str, Any] = {}
    with_ar = bool(records) and all("ar" in r["arms"] for r in records)
    ar_total = sum(r["arms"]["ar"]["decode_s"] for r in records) if with_ar else None
    ar_wall = sum(r["arms"]["ar"]["wall_s"] for r in records) if with_ar else None
    ar_cost = sum(r["arms"]["ar"].get("kernel_cost", 0.0) for r in records) if with_ar else None
    specs = FAMILY_ARMS[family]
    for arm in arms:
        entries = [r["arms"][arm] for r in records]
        total = sum(e["decode_s"] for e in entries)
        wall = sum(e["wall_s"] for e in entries)
        s: dict[str, Any] = {
            "total_s": total,
            "median_s": median([e["decode_s"] for e in entries]),
            "speedup_vs_ar": ratio(ar_total, total),
            "median_speedup_vs_ar": median([e["speedup_vs_ar"] for e in entries]),
            "wall_total_s": wall,
            "wall_speedup_vs_ar": ratio(ar_wall, wall),
            "tokens": sum(e["output_tokens"] for e in entries),
            "forwards": sum(e["forwards"] for e in entries),
            "forward_tokens": sum(e["forward_tokens"] for e in entries),
            "generated": sum(e["tokens"]["generated"] for e in entries),
            "copied": sum(e["tokens"]["copied"] for e in entries),
            "forced": sum(e["tokens"]["forced"] for e in entries),
            "breakdown": _sum_breakdowns([e["breakdown"] for e in entries]),
            "python_overhead_s": wall - total,
        }
        if all("edit_s" in e for e in entries):
            edit = sum(e["edit_s"] for e in entries)
            s["edit_total_s"] = edit
            if with_ar and all("edit_s" in r["arms"]["ar"] for r in records):
                s["edit_speedup_vs_ar"] = ratio(sum(r["arms"]["ar"]["edit_s"] for r in records), edit)
        if arm in specs:
            spec = specs[arm]
            s["hinted"] = spec.hinted
            s["focus"] = spec.focus
            s["localize"], s["noop_deviation"] = spec.localize, spec.noop
            if spec.is_program:
                s["focus_policy"] = spec.policy
            s["drafting"] = spec.draft if spec.is_program else traits(spec.mode).text_drafted
        if kernel is not None and with_ar and entries and all("kernel_cost" in e for e in entries):
            s["predicted_speedup_vs_ar"] = ratio(ar_cost, sum(e["kernel_cost"] for e in entries))
        if family == "forced":
            s["ok"] = sum(bool(e["ok"]) for e in entries)
        else:
            s["same_as_ar"] = sum(bool(e["same_as_ar"]) for e in entries) if with_ar else None
            gaps = [e["first_difference"]["gap"] for e in entries if e.get("first_difference")]
            if gaps:
                s["first_difference_gaps"] = [round(g, 4) for g in gaps]
            s["stopped_at_limit"] = sum(e["stop_reason"] == "max_tokens" for e in entries)
            s["stopped_loop"] = sum(e["stop_reason"] == "loop" for e in entries)
            s["unfinished"] = sum(e["stop_reason"] in LIMIT_STOPS for e in entries)
            s["exact"] = _count(entries, "exact")
            s["valid_programs"] = _count(entries, "valid_program")
            s["identical_to_program"] = _count(entries, "identical_to_program")
            s["wrong_line"] = _count(entries, "wrong_line")
            s["syntax_broken"] = _count(entries, "syntax_broken")
            if entries and all("near_copy_insertions" in e for e in entries):
                s["near_copy_insertions"] = sum(e["near_copy_insertions"] > 0 for e in entries)
            tails = [e["tail_deleted"] for e in entries if "tail_deleted" in e]
            if tails:
                s["tail_deletions"] = sum(t > 0 for t in tails)
                s["tail_deleted_lines"] = sum(tails)
            damage = [e["collateral"] for e in entries if "collateral" in e]
            if damage:
                s["collateral_lines"] = sum(d["lines"] for d in damage)
                s["collateral_deleted"] = sum(d["deleted"] for d in damage)
                s["collateral_changed"] = sum(d["changed"] for d in damage)
                s["collateral_cases"] = sum(d["lines"] > 0 for d in damage)
            if entries and "test" in entries[0]:
                s["pass"] = sum(e["test"] == "pass" for e in entries)
                s["pass_at_1"] = s["pass"] / len(entries) if entries else None
            if any("focus_rule" in e for e in entries):
                s["focus_rule"] = focus_rule_summary(entries)
        out[arm] = s
    if family == "free" and records and "input_lines" in records[0]:
        for s in out.values():
            s["input_lines"] = sum(r.get("input_lines", 0) for r in records)
    return out, _bounds(records, kernel, out)


def focus_rule_record(result: Any, focus: int) -> dict[str, Any]:
    """One hinted edit under the focus rule: the document lines it touches, the nearest one's
    distance from ``focus`` as the rule counts it (blank lines between not counted) and in plain
    lines (``lines_apart``; both None: it changed nothing), and whether the rule, at its radius,
    holds it back (engine.checks.guards.far_from_focus)."""
    first = result.region[0] if result.region else 1
    lines = edited_lines(result.region_input, result.region_output, first)
    distance = focus_distance(lines, focus, result.region_input, first)
    apart = min((abs(n - focus) for n in lines), default=None)
    return {"focus": focus, "touched": lines, "distance": distance, "lines_apart": apart,
            "held": distance is not None and distance > FOCUS_RADIUS}


def focus_rule_summary(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """pass@1 and collateral before the focus rule (every finished edit written) and after it (a
    held edit is not written: its pass is lost, its collateral is 0), at each radius of
    ``FOCUS_RULE_RADII`` as the rule counts lines, and at the rule's radius in plain lines
    (``"<radius>-plain"``: blank lines counted), with how many held edits pass their tests."""
    def rule(e: dict[str, Any], key: str) -> int:
        return (e.get("focus_rule") or {}).get(key) or 0

    def after(held_if: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        held = [e for e in entries if held_if(e)]
        kept = [e for e in entries if not held_if(e)]
        return {"held": len(held),
                "held_passing": sum(e.get("test") == "pass" for e in held),
                "pass": sum(e.get("test") == "pass" for e in kept),
                "collateral_lines": sum(e["collateral"]["lines"] for e in kept if "collateral" in e),
                "collateral_cases": sum(e["collateral"]["lines"] > 0 for e in kept if "collateral" in e),
                "held_collateral_lines": sum(e["collateral"]["lines"] for e in held if "collateral" in e)}

    before = {"pass": sum(e.get("test") == "pass" for e in entries),
              "collateral_lines": sum(e["collateral"]["lines"] for e in entries if "collateral" in e),
              "collateral_cases": sum(e["collateral"]["lines"] > 0 for e in entries if "collateral" in e)}
    variants: dict[str, Any] = {str(r): after(lambda e, r=r: rule(e, "distance") > r) for r in FOCUS_RULE_RADII}
    variants[f"{FOCUS_RADIUS}-plain"] = after(lambda e: rule(e, "lines_apart") > FOCUS_RADIUS)
    distances = Counter((e.get("focus_rule") or {}).get("distance") for e in entries)
    return {"before": before, "after": variants,
            "distances": {str(k): distances[k] for k in sorted(distances, key=lambda d: (d is None, d or 0))}}


def _sum_breakdowns(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            if isinstance(value, (int, float)):
                total[key] = total.get(key, 0) + value
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in sorted(total.items())}


def _bounds(records: Sequence[dict[str, Any]], kernel: KernelCurve | str | None,
            arms: dict[str, Any]) -> dict[str, Any] | None:
    oracles = [r["oracle"] for r in records if "oracle" in r]
    if kernel is None or not oracles or not all("paper_cost" in o for o in oracles):
        return None
    t_all = sum(o["T"] for o in oracles)
    out: dict[str, Any] = {
        "paper": bound(t_all, sum(o["paper_cost"] for o in oracles)),
        "structure_aware": bound(t_all, sum(o["structure_cost"] for o in oracles)),
        "paper_median": median([bound(o["T"], o["paper_cost"]) for o in oracles]),
        "structure_aware_median": median([bound(o["T"], o["structure_cost"]) for o in oracles]),
        "kernel": kernel if isinstance(kernel, str) else kernel.source,
        "T": t_all, "T_gen": sum(o["T_gen"] for o in oracles), "K": sum(len(o["spans"]) for o in oracles),
        "chosen": sum(o["chosen"] for o in oracles),
        "structure_chosen": sum(o["structure_chosen"] for o in oracles),
        "literal_runs": sum(len(o["literal_runs"]) for o in oracles),
        "literal_tokens": sum(o["literal_tokens"] for o in oracles),
        "splice_tokens": sum(sum(o["splices"]) for o in oracles),
    }
    if all("drafted_cost" in o for o in oracles):
        out["drafted"] = bound(t_all, sum(o["drafted_cost"] for o in oracles))
        out["drafted_median"] = median([bound(o["T"], o["drafted_cost"]) for o in oracles])
        out["drafted_tokens"] = sum(o["drafted"] for o in oracles)
        out["drafted_structure"] = sum(o["drafted_structure"] for o in oracles)
        out["drafted_forwards"] = sum(o["drafted_forwards"] for o in oracles)
    if all("fused_cost" in o for o in oracles):
        out["fused"] = bound(t_all, sum(o["fused_cost"] for o in oracles))
    for key in ("walk_matches_engine", "drafted_walk_matches_engine"):
        if all(key in o for o in oracles):
            out[key] = sum(o[key] for o in oracles)
    for arm, suffix in (("program", ""), ("program-drafted", "_drafted")):
        measured = arms.get(arm, {}).get("speedup_vs_ar")
        for name in ("structure_aware", "paper", "drafted"):
            if measured and out.get(name):
                out[f"program{suffix}_vs_{name}"] = measured / out[name]
    return out


def run_corpus(engine: Any, corpus: str, family: str, arms: Sequence[str] | None = None, limit: int | None = None,
               offset: int = 0, kernel: KernelCurve | None = None, max_new_tokens: int | None = None,
               test_timeout: float = DEFAULT_TIMEOUT_S, run_tests_: bool = True, progress: bool = True,
               warmup: bool = True, command: str = "",
               on_partial: Callable[[dict[str, Any]], None] | None = None, verify: str = "auto") -> dict[str, Any]:
    """The results record of one corpus and family (the JSON a ``bench edits`` run writes).
    ``on_partial`` gets the record of the cases done so far (``complete: false``) after each case."""
    all_cases = load_corpus(corpus)
    cases = all_cases[offset:]
    if limit is not None:
        cases = cases[:max(0, limit)]
    bench = EditBench(engine, family, arms, kernel=kernel, max_new_tokens=max_new_tokens,
                      test_timeout=test_timeout, run_tests_=run_tests_, verify=verify)
    started = time.perf_counter()
    settings = {"arms": bench.arms, "limit": limit, "offset": offset, "max_new_tokens": max_new_tokens,
                "max_new_tokens_rule": None if max_new_tokens else "min(4096, 1.5 x input tokens + 64)",
                "test_timeout_s": test_timeout, "warmup": warmup, "selector": engine.selector,
                "corpus_cases": len(all_cases), "verify": verify, "runtime": engine.loaded.runtime.describe()}
    machine = machine_info(engine.loaded.device, engine.loaded.dtype)

    def record_of(records: list[dict[str, Any]], complete: bool) -> dict[str, Any]:
        return results_record(records, corpus=corpus, family=family, arms=bench.arms, model=engine.name,
                              device=engine.loaded.device, kernel=kernel, settings=settings, machine=machine,
                              command=command, elapsed_s=round(time.perf_counter() - started, 1), complete=complete)

    partial = None if on_partial is None else (lambda records: on_partial(record_of(records, complete=False)))
    records = bench.run(cases, progress=progress, warmup=warmup, first_index=offset, on_record=partial)
    return record_of(records, complete=True)


DEFINITIONS = {
    "decode_s": "decode-phase model forwards (+ grammar for program), prompt prefill excluded",
    "wall_s": "decode-phase wall clock, Python overhead included",
    "speedup_vs_ar": "pooled: sum of ar decode_s / sum of the arm's",
    "median_speedup_vs_ar": "median over cases of ar decode_s / arm decode_s",
    "edit_s": "free family: the whole edit as the user waits for it (prompt prefill, localizer, decode; "
              "the engine's timings total_s), every edit a first edit",
    "edit_speedup_vs_ar": "pooled: sum of ar edit_s / sum of the arm's",
    "predicted_speedup_vs_ar": "from the kernel curve and each arm's forward sizes (n / s(n) per forward)",
    "exact": "output == gold line by line, trailing whitespace and trailing blank lines ignored",
    "valid_program": "program arms: finished with </program>, parses, resolves strictly to the output",
    "unfinished": "stopped at the token limit (max_tokens) or by the loop guard (loop)",
    "collateral": "input lines the output changes or deletes that the gold keeps (engine/evaluation/quality.py)",
    "identical_to_program": "program-undrafted: output and program text identical to program's (drafting is lossless)",
    "focus": "the arm's hint: none; near = first changed line + a seeded offset in -3..+3, clipped "
             "(engine/evaluation/focus.py); on (cursor-on) and oracle = the first changed line",
    "wrong_line": "the output edits the input, and only lines the gold keeps (engine/evaluation/quality.py)",
    "tail_deletions": "cases whose output drops the input's last lines that the gold keeps (a program that ended early)",
    "syntax_broken": "the input parses and the output does not (engine/checks/syntax.py; python and javascript)",
    "focus_rule": "hinted program arms: the edit's touched lines (a pure insertion touches both neighbours) and "
                  "the nearest one's distance from the focus, blank lines between not counted (lines_apart: "
                  "counted); held: farther than the rule's radius (engine/checks/guards.py far_from_focus), a "
                  "fix the front doors hold back; 'after' counts held edits as not written (their passes lost, "
                  "their collateral 0), per radius ('-plain': in lines_apart)",
    "near_copy_insertions": "cases whose output inserts a variant of an input line right before or after it and "
                            "keeps the line (a fix beside the bug; engine/evaluation/quality.py)",
}


def results_record(records: Sequence[dict[str, Any]], *, corpus: str, family: str, arms: Sequence[str], model: str,
                   device: str, kernel: KernelCurve | str | None, settings: dict[str, Any],
                   machine: dict[str, Any], command: str, elapsed_s: float, complete: bool = True,
                   parts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON of a run (or of merged runs): summary, bounds, settings, provenance, per-case records."""
    summary, bounds = summarize(records, arms, family, kernel)
    data: dict[str, Any] = {
        "corpus": corpus, "family": family, "cases": len(records), "model": model,
        "device": device, "arms": summary, "bounds": bounds, "settings": settings,
        "machine": machine, "command": command, "elapsed_s": elapsed_s, "complete": complete,
        "definitions": DEFINITIONS,
    }
    if parts is not None:
        data["parts"] = parts
    if any("near_offset" in (r.get("focus") or {}) for r in records):
        data["near_offsets"] = offset_histograms(records)
    if family == "free" and records and all("gold_test" in r for r in records):
        data["reference"] = {"gold_pass": sum(r["gold_test"] == "pass" for r in records), "cases": len(records)}
    data["per_case"] = list(records)
    return data
