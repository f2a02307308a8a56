"""What each ``copy-as-decode bench`` subcommand runs (its flags: engine/commands/bench.py): load
the engine the flags describe, run the benchmark of engine/bench/, print its table and write its
JSON and PNG."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from engine.api import EditRequest, Engine
from engine.bench.apply import ARMS as APPLY_ARMS
from engine.bench.apply_rules import RULE_ARMS
from engine.bench.arms import ArmError, parse_arms
from engine.bench.concurrency import measure_concurrency
from engine.bench.harness import command_line, get_engine, machine_info, refuses_server, write_json
from engine.bench.kernel import DEFAULT_NS, kernel_table, measure_kernel, parse_ns
from engine.bench.output import report, table_of
from engine.bench.pinned import PINNED_COMMIT, PinnedSourceMissing
from engine.bench.plot import plot_apply, plot_edits, plot_kernel
from engine.bench.report import ReportError, edits_table, markdown_report, write_into
from engine.core.errors import ModelLoadError
from engine.evaluation.corpora import CorpusError, load_corpus
from engine.runtime.backends import BackendOptions
from engine.runtime.threads import set_threads


def _plot(args: argparse.Namespace, console: Any, draw: Callable[[Path], Path]) -> None:
    """Draw the PNG at --plot, else next to --json (neither: no PNG)."""
    path = args.plot or (args.json.with_suffix(".png") if args.json else None)
    if path:
        console.print(f"wrote {draw(path)}")


def _load(args: argparse.Namespace, console: Any, reuse_prompts: bool = False) -> Any:
    set_threads(args.threads)
    # ``reuse_prompts`` (bench edits): prompt reuse stays on within an edit (the localizer's forward
    # stands in for the program prompt's prefill) and Engine.forget_prompts makes every measured
    # edit a first edit. Elsewhere (kernel, localize) every forward is measured from scratch.
    extra = {} if reuse_prompts else {"prefix_cache_tokens": 0}
    options = BackendOptions(threads=args.threads, server_url=args.server_url,
                             flash_attention=args.flash_attention,
                             padded_steps=getattr(args, "padded_steps", False), **extra)
    return get_engine(args.model, args.device, args.dtype, progress=lambda m: console.print(f"[dim]{m}[/dim]"),
                      selector=getattr(args, "selector", "auto"), backend=args.backend, options=options)


def run_apply(args: argparse.Namespace) -> int:
    """``bench apply``: the rules' arms alone, or the model's arms; exit 2 where this checkout
    cannot read the pinned sources the cases are cut from (the message says what to do)."""
    from rich.console import Console

    console = Console(stderr=True)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    try:
        if arms and all(a in RULE_ARMS for a in arms):
            return _run_rule_arms(args, arms, console)
        return _run_model_arms(args, arms, console)
    except PinnedSourceMissing as exc:
        print(f"copy-as-decode bench apply: {exc}", file=sys.stderr)
        return 2


def _run_model_arms(args: argparse.Namespace, arms: list[str], console: Any) -> int:
    from engine.bench.apply import run_cases, table_rows
    from engine.bench.apply_cases import held_out

    unknown = [a for a in arms if a not in APPLY_ARMS]
    if args.cases != "styles":
        print("copy-as-decode bench apply: --cases shapes/both runs the rules' arms (--arms lines,structure)",
              file=sys.stderr)
        return 2
    if unknown or args.per_style < 1:
        print(f"copy-as-decode bench apply: unknown arm {unknown[0]!r}" if unknown else
              "copy-as-decode bench apply: --per-style must be >= 1", file=sys.stderr)
        return 2
    cases = list(held_out(args.per_style, args.seed))
    try:
        engine = _load(args, console, reuse_prompts=True)
    except ModelLoadError as exc:
        print(f"copy-as-decode bench apply: {exc}", file=sys.stderr)
        return 2
    data = run_cases(engine, cases, arms, args.text_max_lines, progress=lambda m: console.print(f"[dim]{m}[/dim]"),
                     program_tokens=args.program_max_tokens, verify=args.verify)
    data = {"model": engine.name, "backend": engine.loaded.runtime.describe(), "selector": engine.selector,
            "apply_selector": str(engine.apply_selector) if engine.apply_selector else None,
            "cases": len(cases), "per_style": args.per_style, "seed": args.seed, "verify": args.verify,
            "pinned_commit": PINNED_COMMIT, **data,
            "machine": machine_info(engine.loaded.device, engine.loaded.dtype), "command": command_line()}
    report(console, table_of(f"apply, {len(cases)} cases, plain decoding {data['plain_rate']} tok/s",
                             ("arm", "runs", "exact", "damaged lines", "median tok/s", "x plain"), table_rows(data)),
           data, args.json)
    for arm, scored in data["rewrites"].items():
        console.print(f"{arm} vs ar: {scored['same_as_ar']}/{scored['cases']} the same file, "
                      f"{scored['same_reply_as_ar']} the same reply ({scored['finished']} finished), acceptance "
                      f"{scored['acceptance']}, {scored['x_ar_median']}x ar's speed (median)")
    _plot(args, console, lambda path: plot_apply(data, path))
    return 0


def _run_rule_arms(args: argparse.Namespace, arms: list[str], console: Any) -> int:
    """``bench apply`` with the rules' arms alone: no model, the verdict's syntax check after each."""
    from engine.bench.apply_cases import held_out
    from engine.bench.apply_rules import rule_table, run_rule_arms
    from engine.bench.apply_shapes import SHAPE_LANGUAGES, shape_cases, sources

    if args.per_style < 1 or args.per_shape < 1:
        print("copy-as-decode bench apply: --per-style and --per-shape must be >= 1", file=sys.stderr)
        return 2
    cases = [*(held_out(args.per_style, args.seed) if args.cases in ("styles", "both") else []),
             *(shape_cases(args.per_shape, args.seed) if args.cases in ("shapes", "both") else [])]
    data = run_rule_arms(cases, arms, progress=lambda m: console.print(f"[dim]{m}[/dim]"))
    data = {"cases": len(cases), "case_set": args.cases, "per_style": args.per_style, "per_shape": args.per_shape,
            "seed": args.seed, "pinned_commit": PINNED_COMMIT,
            "sources": {lang: len(sources(lang)) for lang in SHAPE_LANGUAGES}, **data,
            "machine": machine_info("cpu", None), "command": command_line()}
    report(console, table_of(f"apply, the rules' merges, {len(cases)} cases",
                             ("arm", "group", "cases", "exact", "whitespace only", "wrong, written", "refused",
                              "p95 ms"), rule_table(data)), data, args.json)
    return 0


def run_kernel(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    try:
        ns = parse_ns(args.ns)
        engine = _load(args, console)
    except (ValueError, ModelLoadError) as exc:
        print(f"copy-as-decode bench kernel: {exc}", file=sys.stderr)
        return 2
    loaded = engine.loaded
    if refuses_server(engine, "kernel", "a remote backend returns no logits per forward; measure it in-process"):
        return 2
    data = kernel_record(loaded, args.context, ns, args.trials, args.warmup, console, command_line())
    report(console, table_of(f"s(N), {loaded.name} on {loaded.device}, context {args.context}",
                             ("N", "N one-token forwards (ms)", "one N-token forward (ms)", "s(N)"), kernel_table(data)),
           data, args.json)
    _plot(args, console, lambda path: plot_kernel([(f"{loaded.name} ({loaded.device})", data)], path))
    return 0


def kernel_record(loaded: Any, context: int, ns: Any, trials: int, warmup: int, console: Any, command: str) -> dict:
    data = measure_kernel(loaded.runtime, loaded.device, context=context, ns=ns, trials=trials, warmup=warmup,
                          progress=lambda m: console.print(f"[dim]{m}[/dim]"))
    return {"model": loaded.name, "device": loaded.device, "backend": loaded.runtime.describe(), **data,
            "machine": machine_info(loaded.device, loaded.dtype), "command": command}


def run_candidate_edits(args: argparse.Namespace) -> int:
    """``bench edits --candidates K,... --check tests`` (engine.bench.candidates)."""
    from rich.console import Console

    from engine.bench.candidates import CORPORA, parse_arms, run_candidates_corpus

    console = Console(stderr=True)
    try:
        arms = parse_arms(args.candidate_arms)
        if args.check != "tests":
            raise ValueError("--candidates needs --check tests (the corpus tests are the check)")
        if args.corpus not in CORPORA:
            raise ValueError(f"--candidates runs on {' or '.join(CORPORA)} (their tests are the check)")
        load_corpus(args.corpus)
        engine = _load(args, console, reuse_prompts=True)
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench edits: {exc}", file=sys.stderr)
        return 2
    partial = (lambda data: write_json(args.json, data)) if args.json else None
    data = run_candidates_corpus(engine, args.corpus, arms, limit=args.limit, offset=args.offset,
                                 focus=args.candidates_focus, timeout=args.test_timeout, command=command_line(), on_partial=partial,
                                 progress=lambda message: console.print(f"[dim]{message}[/dim]"))
    if args.json:
        write_json(args.json, data)
    print(json.dumps(data["summary"], indent=1))
    return 0


def run_edits(args: argparse.Namespace) -> int:
    from rich.console import Console

    if args.candidate_arms:
        return run_candidate_edits(args)

    from engine.bench.bounds import KernelCurve  # lazy: loads torch
    from engine.bench.edits import run_corpus

    console = Console(stderr=True)
    try:
        arms = parse_arms(args.arms, args.family)
    except ArmError as exc:
        print(f"copy-as-decode bench edits: --arms: {exc}", file=sys.stderr)
        return 2
    if args.offset < 0 or (args.limit is not None and args.limit < 1):
        print("copy-as-decode bench edits: --offset must be >= 0 and --limit >= 1", file=sys.stderr)
        return 2
    try:
        load_corpus(args.corpus)
        kernel = KernelCurve.load(args.kernel) if args.kernel else None
        engine = _load(args, console, reuse_prompts=True)
    except (CorpusError, ModelLoadError, OSError, ValueError, KeyError) as exc:
        print(f"copy-as-decode bench edits: {exc}", file=sys.stderr)
        return 2
    selector_arms = [a for a in arms if a.startswith("program") and a != "program-base"]
    if args.family == "free" and selector_arms and engine.selector is None:
        console.print(f"[yellow]no span-selector adapter for --selector {args.selector}: "
                      f"{', '.join(selector_arms)} run on the base model (recorded as selector null)[/yellow]")
    if kernel is None and args.family == "forced":
        console.print("no --kernel given: measuring s(N) first (same process) for the bounds")
        record = kernel_record(engine.loaded, 1024, DEFAULT_NS, args.kernel_trials, 1, console, command_line())
        kernel = KernelCurve.from_points(record["points"], source="measured in this run")
    partial = (lambda data: write_json(args.json, data)) if args.json else None
    data = run_corpus(engine, args.corpus, args.family, arms, limit=args.limit, offset=args.offset, kernel=kernel,
                      max_new_tokens=args.max_new_tokens, test_timeout=args.test_timeout,
                      run_tests_=not args.no_tests, warmup=not args.no_warmup, command=command_line(),
                      on_partial=partial, verify=args.verify)
    if args.kernel is None and kernel is not None:
        data["kernel_points"] = record["points"]
    data["backend"] = engine.loaded.runtime.describe()
    report(console, edits_table(data), data, args.json)
    _plot(args, console, lambda path: plot_edits(data, path))
    return 0


def run_backends(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.bench.backends import backends_table, compare_backends  # lazy: loads torch

    console = Console(stderr=True)
    set_threads(args.threads)
    try:
        cases = load_corpus(args.corpus)[:args.limit]
        ns = parse_ns(args.ns)
        names = [b.strip() for b in args.backends.split(",") if b.strip()]
        engines = {b: get_engine(args.model, progress=lambda m: console.print(f"[dim]{m}[/dim]"), selector="none",
                                 backend=b, options=BackendOptions(threads=args.threads)) for b in names}
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench backends: {exc}", file=sys.stderr)
        return 2
    for engine in engines.values():
        engine.prime()
    data = compare_backends(engines, cases, ns, args.kernel_trials, command_line(),
                            progress=lambda m: console.print(f"[dim]{m}[/dim]"))
    report(console, table_of(f"backends, {args.model}, {len(cases)} {args.corpus} cases (ar, teacher-forced)",
                             ("backend", "ar tokens/s", f"vs {names[0]}", "s(8)", "s(32)", "s(128)"),
                             backends_table(data)), data, args.json)
    return 0


def run_concurrency(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
        cases = load_corpus(args.corpus)[:args.limit]
        engine = Engine.load(args.model, backend="vllm", selector=args.selector,
                             options=BackendOptions(server_url=args.server_url),
                             progress=lambda m: console.print(f"[dim]{m}[/dim]"))
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench concurrency: {exc}", file=sys.stderr)
        return 2
    requests = [EditRequest(c.input, c.instruction, mode=args.mode, max_new_tokens=args.max_new_tokens,
                            language=c.language) for c in cases]
    measure_concurrency(engine, requests[:2], levels[:1], 1)  # warm-up: the server's first requests are slower
    data = measure_concurrency(engine, requests, levels, args.rounds, lambda m: console.print(f"[dim]{m}[/dim]"))
    data.update({"mode": args.mode, "corpus": args.corpus, "backend": engine.model_for(args.mode).runtime.describe(),
                 "machine": machine_info("cpu"), "command": command_line()})
    rows = [(str(row["concurrent"]), f"{row['tokens_per_s']:.1f}", f"{row['vs_one']:.2f}x", f"{row['first_op_s']:.2f}",
             f"{row['edit_s']:.2f}", "yes" if row["same_outputs"] else "NO") for row in data["summary"]]
    report(console, table_of(f"{len(requests)} {args.mode} edits on {data['backend']}",
                             ("in flight", "aggregate tokens/s", "vs 1", "first op s", "edit s", "same outputs"), rows),
           data, args.json)
    return 0


def run_localize(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.bench.localize import localize_table  # lazy: loads torch
    from engine.bench.localize import run_localize as measure

    console = Console(stderr=True)
    try:
        load_corpus(args.corpus)
        engine = _load(args, console)
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench localize: {exc}", file=sys.stderr)
        return 2
    if refuses_server(engine, "localize", "a remote backend returns no logits; measure it in-process"):
        return 2

    def progress(done: int, total: int) -> None:
        if done == total or done % 20 == 0:
            console.print(f"[dim]localize {done}/{total}[/dim]")

    data = measure(engine, args.corpus, limit=args.limit, offset=args.offset, base=args.base, on_case=progress)
    data.update({"machine": machine_info(engine.loaded.device, engine.loaded.dtype), "command": command_line(),
                 "backend": engine.loaded.runtime.describe()})
    table = table_of(f"{args.corpus}: {data['cases']} cases, gold = the first line the gold changes "
                     f"(any = any line it edits)", ("model", "ranking", "top-1", "top-3", "top-1 any", "top-3 any"),
                     localize_table(data), left=("model", "ranking"))
    notes = [f"{model}: {entry['seconds_mean']:.3f} s per case for {entry['prompt_tokens_mean']:.0f} prompt "
             f"tokens ({entry['region_tokens_mean']:.0f} scored)" for model, entry in data["summary"].items()]
    report(console, table, data, args.json, notes)
    return 0


def run_predicted(args: argparse.Namespace) -> int:
    from engine.bench.predicted import run  # lazy: loads torch

    return run(args)


def run_merge(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.bench.merge import MergeError, load_part, merge_results  # lazy: loads torch

    console = Console(stderr=True)
    try:
        data = merge_results([load_part(p) for p in args.parts])
    except MergeError as exc:
        print(f"copy-as-decode bench merge: {exc}", file=sys.stderr)
        return 2
    report(console, edits_table(data), data, args.json,
           written=f" ({data['cases']} cases from {len(data['parts'])} part(s))")
    _plot(args, console, lambda path: plot_edits(data, path))
    return 0


def run_report(args: argparse.Namespace) -> int:
    text = markdown_report(args.results)
    if args.into is None:
        print(text)
        return 0
    try:
        write_into(args.into, text)
    except ReportError as exc:
        print(f"copy-as-decode bench report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the report into {args.into}", file=sys.stderr)
    return 0
