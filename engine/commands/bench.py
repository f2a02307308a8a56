"""``copy-as-decode bench``: side-by-side speed benchmarks (see engine/bench/).

    copy-as-decode bench kernel [--json PATH] [--plot PATH] [--model M] [--context 1024] [--trials K]
    copy-as-decode bench edits --corpus NAME --family forced|free [--arms ar,program,...]
                               [--offset K] [--limit N] [--selector auto|none|PATH]
                               [--json PATH] [--plot PATH] [--kernel PATH]
    copy-as-decode bench localize --corpus NAME [--limit N] [--base] [--json PATH]  # where is the bug?
    copy-as-decode bench merge PART.json... --json OUT   # case ranges run apart -> one result
    copy-as-decode bench report [--results DIR] [--into NOTES.md]
    copy-as-decode bench predicted [--backend transformers|llamacpp] [--cases humanevalfix-python=10,canitedit=5]

Arms (engine/bench/arms.py): forced family ar, pld, speculative, program (undrafted),
program-drafted (default: all five); free family ar, pld, speculative, program (selector,
drafted, no focus hint), program-undrafted, program-base (selector none), program-near (selector +
a focus hint near the bug: the first changed line moved by a seeded offset in -3..+3, what an
editor's cursor sends), program-oracle (selector + the focus exactly on the first changed line: an
upper bound; "program-focus" is read as this name) (default: ar, speculative, program,
program-undrafted).

With --json, the file is rewritten after every case (``"complete": false`` until the run ends),
so an interrupted run leaves its finished cases; merge ranges with ``bench merge``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.api import EditRequest, Engine
from engine.bench.arms import ArmError, parse_arms
from engine.bench.concurrency import measure_concurrency
from engine.bench.harness import command_line, get_engine, machine_info, write_json
from engine.bench.kernel import DEFAULT_NS, kernel_table, measure_kernel, parse_ns
from engine.bench.plot import plot_edits, plot_kernel
from engine.bench.report import ReportError, edits_table, markdown_report, write_into
from engine.commands.edit import add_flash_attention_argument, add_verify_argument
from engine.core.errors import ModelLoadError
from engine.evaluation.corpora import CorpusError, load_corpus
from engine.runtime.backends import BackendOptions
from engine.runtime.threads import set_threads
from engine.settings import BACKENDS


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("bench", help="speed benchmarks: kernel curve s(N) and corpus edits",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="bench_command", required=True, metavar="BENCH")

    def model_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", default="default", help="'default' (embedded SmolLM2-135M), a hub id, a folder or a .gguf")
        p.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA when present)")
        p.add_argument("--dtype", default=None, help="float32, bfloat16, ... (default: bf16 on CUDA, fp32 on CPU)")
        p.add_argument("--threads", type=int, default=None,
                       help="torch intra-op threads, and llama.cpp's (default: the backend's choice; 1 is steadiest "
                            "on a shared CPU)")
        p.add_argument("--backend", default="transformers", choices=BACKENDS,
                       help="what runs the model (default transformers, so recorded commands keep their meaning)")
        p.add_argument("--server-url", default=None, help="the vLLM server (--backend vllm)")
        add_flash_attention_argument(p, default="auto")
        p.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
        p.add_argument("--plot", type=Path, metavar="PATH", help="write the PNG here (default: next to --json)")

    kernel = sub.add_parser("kernel", help="s(N) = N one-token forwards / one N-token forward over a cached context")
    model_options(kernel)
    kernel.add_argument("--context", type=int, default=1024, help="cached context tokens (default 1024)")
    kernel.add_argument("--trials", type=int, default=3, help="trials per N; medians are reported (default 3)")
    kernel.add_argument("--warmup", type=int, default=1, help="warm-up rounds before timing (default 1)")
    kernel.add_argument("--ns", default=None, help="comma list of N (default 1,2,4,...,512)")
    kernel.set_defaults(func=run_kernel)

    edits = sub.add_parser("edits", help="every arm on corpus cases, side by side")
    model_options(edits)
    edits.add_argument("--corpus", required=True, help="humanevalfix-<python|js|...> or canitedit")
    edits.add_argument("--family", required=True, choices=("forced", "free"),
                       help="forced: every arm decodes the gold (mechanism cost); free: the model decides")
    edits.add_argument("--arms", default=None,
                       help="comma list of arms (ar is required); forced: ar, pld, speculative, program, "
                            "program-drafted (default: all); free: ar, pld, speculative, program, program-undrafted, "
                            "program-base, program-near, program-cursor-on, program-oracle and their -keep, -guard, -hold policy "
                            "variants (default: ar,speculative,program,program-undrafted)")
    edits.add_argument("--limit", type=int, default=None, help="only N cases (after --offset)")
    edits.add_argument("--offset", type=int, default=0, help="skip the first K cases of the corpus")
    edits.add_argument("--selector", default="auto",
                       help="span selector for program mode: auto (shipped adapter), none (base model) or a folder")
    edits.add_argument("--kernel", type=Path, metavar="PATH",
                       help="kernel JSON for the bounds; forced family without it: measure the kernel first")
    edits.add_argument("--kernel-trials", type=int, default=2, help="trials when the kernel is measured here")
    edits.add_argument("--max-new-tokens", type=int, default=None,
                       help="free family: new-token limit per edit (default: 1.5 x input tokens + 64)")
    edits.add_argument("--test-timeout", type=float, default=15.0, help="seconds per test run (free family)")
    edits.add_argument("--no-tests", action="store_true", help="free family: skip pass@1")
    edits.add_argument("--no-warmup", action="store_true", help="skip the warm-up (not for real measurements)")
    add_verify_argument(edits, default="auto")
    edits.set_defaults(func=run_edits)

    backends = sub.add_parser("backends", help="backends side by side: ar tokens/s per case and s(N)")
    backends.add_argument("--model", default="default", help="a .gguf (or the embedded default) every backend can run")
    backends.add_argument("--backends", default="transformers,llamacpp", help="comma list (the first is the baseline)")
    backends.add_argument("--threads", type=int, default=None, help="threads for every backend (torch and llama.cpp)")
    backends.add_argument("--corpus", default="humanevalfix-python")
    backends.add_argument("--limit", type=int, default=20)
    backends.add_argument("--ns", default="1,2,4,8,16,32,64,128", help="kernel N values")
    backends.add_argument("--kernel-trials", type=int, default=3)
    backends.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
    backends.set_defaults(func=run_backends)

    conc = sub.add_parser("concurrency", help="a remote backend (vLLM): 1, 2, 4 edits in flight")
    conc.add_argument("--server-url", required=True, help="the vLLM server")
    conc.add_argument("--model", default="default", help="the local copy of what the server serves")
    conc.add_argument("--levels", default="1,2,4", help="edits in flight per round (comma list)")
    conc.add_argument("--rounds", type=int, default=3)
    conc.add_argument("--corpus", default="humanevalfix-python")
    conc.add_argument("--limit", type=int, default=8, help="edits per round (the first cases)")
    conc.add_argument("--mode", default="ar", help="edit mode")
    conc.add_argument("--selector", default="auto")
    conc.add_argument("--max-new-tokens", type=int, default=128)
    conc.add_argument("--json", type=Path, metavar="PATH")
    conc.set_defaults(func=run_concurrency)

    loc = sub.add_parser("localize", help="how often per-line surprise (and a near cursor) finds the line to fix")
    model_options(loc)
    loc.add_argument("--corpus", required=True, help="humanevalfix-<python|js> or canitedit")
    loc.add_argument("--limit", type=int, default=None, help="only N cases (after --offset)")
    loc.add_argument("--offset", type=int, default=0, help="skip the first K cases of the corpus")
    loc.add_argument("--selector", default="auto", help="span selector: auto (shipped adapter), none or a folder")
    loc.add_argument("--base", action="store_true", help="also score with the base model (one more forward per case)")
    loc.set_defaults(func=run_localize)

    predicted = sub.add_parser("predicted", help="OpenAI endpoint: the region as the prediction vs none, over HTTP "
                               "and in-process (engine/bench/predicted.py)")
    predicted.add_argument("--model", default="default", help="'default' (embedded SmolLM2-135M), a hub id, a folder or a .gguf")
    predicted.add_argument("--backend", default="transformers", choices=("auto", "transformers", "llamacpp"))
    predicted.add_argument("--threads", type=int, default=None, help="threads of the server and of this process")
    predicted.add_argument("--cases", default="humanevalfix-python=10,canitedit=5", help="CORPUS=N[,CORPUS=N...]: the "
                           "first N cases of each (default humanevalfix-python=10,canitedit=5)")
    predicted.add_argument("--max-new-tokens", type=int, default=None, help="default: 1.5 x input tokens + 64")
    add_verify_argument(predicted, default="auto")
    predicted.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
    predicted.set_defaults(func=run_predicted)

    merge = sub.add_parser("merge", help="merge partial 'bench edits' results (disjoint case ranges)")
    merge.add_argument("parts", nargs="+", type=Path, metavar="PART.json", help="results files to merge")
    merge.add_argument("--json", type=Path, metavar="PATH", required=True, help="write the merged results here")
    merge.add_argument("--plot", type=Path, metavar="PATH", help="write the PNG here (default: next to --json)")
    merge.set_defaults(func=run_merge)

    report = sub.add_parser("report", help="Markdown tables from results/bench_*.json")
    report.add_argument("--results", type=Path, default=Path("results"), help="folder of bench_*.json (default results)")
    report.add_argument("--into", type=Path, metavar="FILE",
                        help="replace the text between the report markers in FILE (a Markdown notes file) "
                             "instead of printing")
    report.set_defaults(func=run_report)


def _plot_path(args: argparse.Namespace) -> Path | None:
    if args.plot:
        return args.plot
    return args.json.with_suffix(".png") if args.json else None


def _load(args: argparse.Namespace, console: Any, reuse_prompts: bool = False) -> Any:

    set_threads(args.threads)
    # ``reuse_prompts`` (bench edits): prompt reuse stays on within an edit (the localizer's forward
    # stands in for the program prompt's prefill) and Engine.forget_prompts makes every measured
    # edit a first edit. Elsewhere (kernel, localize) every forward is measured from scratch.
    extra = {} if reuse_prompts else {"prefix_cache_tokens": 0}
    options = BackendOptions(threads=args.threads, server_url=args.server_url,
                             flash_attention=args.flash_attention, **extra)
    return get_engine(args.model, args.device, args.dtype, progress=lambda m: console.print(f"[dim]{m}[/dim]"),
                      selector=getattr(args, "selector", "auto"), backend=args.backend, options=options)


def run_kernel(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table


    console = Console(stderr=True)
    try:
        ns = parse_ns(args.ns)
        engine = _load(args, console)
    except (ValueError, ModelLoadError) as exc:
        print(f"copy-as-decode bench kernel: {exc}", file=sys.stderr)
        return 2
    loaded = engine.loaded
    if loaded.remote:
        print("copy-as-decode bench kernel: a remote backend returns no logits per forward; measure it in-process",
              file=sys.stderr)
        return 2
    data = kernel_record(loaded, args.context, ns, args.trials, args.warmup, console, command_line())
    table = Table(title=f"s(N), {loaded.name} on {loaded.device}, context {args.context}", title_justify="left")
    for col in ("N", "N one-token forwards (ms)", "one N-token forward (ms)", "s(N)"):
        table.add_column(col, justify="right")
    for row in kernel_table(data):
        table.add_row(*row)
    Console().print(table)
    if args.json:
        console.print(f"wrote {write_json(args.json, data)}")
    plot = _plot_path(args)
    if plot:

        console.print(f"wrote {plot_kernel([(f'{loaded.name} ({loaded.device})', data)], plot)}")
    return 0


def kernel_record(loaded: Any, context: int, ns: Any, trials: int, warmup: int, console: Any, command: str) -> dict:

    data = measure_kernel(loaded.runtime, loaded.device, context=context, ns=ns, trials=trials, warmup=warmup,
                          progress=lambda m: console.print(f"[dim]{m}[/dim]"))
    return {"model": loaded.name, "device": loaded.device, "backend": loaded.runtime.describe(), **data,
            "machine": machine_info(loaded.device, loaded.dtype), "command": command}


def run_edits(args: argparse.Namespace) -> int:
    from rich.console import Console

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
    Console().print(edits_table(data))
    if args.json:
        console.print(f"wrote {write_json(args.json, data)}")
    plot = _plot_path(args)
    if plot:

        console.print(f"wrote {plot_edits(data, plot)}")
    return 0


def run_backends(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

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
    table = Table(title=f"backends, {args.model}, {len(cases)} {args.corpus} cases (ar, teacher-forced)",
                  title_justify="left")
    for col in ("backend", "ar tokens/s", f"vs {names[0]}", "s(8)", "s(32)", "s(128)"):
        table.add_column(col, justify="right")
    for row in backends_table(data):
        table.add_row(*row)
    Console().print(table)
    if args.json:
        console.print(f"wrote {write_json(args.json, data)}")
    return 0


def run_concurrency(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table


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
    table = Table(title=f"{len(requests)} {args.mode} edits on {data['backend']}", title_justify="left")
    for col in ("in flight", "aggregate tokens/s", "vs 1", "first op s", "edit s", "same outputs"):
        table.add_column(col, justify="right")
    for row in data["summary"]:
        table.add_row(str(row["concurrent"]), f"{row['tokens_per_s']:.1f}", f"{row['vs_one']:.2f}x",
                      f"{row['first_op_s']:.2f}", f"{row['edit_s']:.2f}", "yes" if row["same_outputs"] else "NO")
    Console().print(table)
    if args.json:
        console.print(f"wrote {write_json(args.json, data)}")
    return 0


def run_localize(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from engine.bench.localize import localize_table  # lazy: loads torch
    from engine.bench.localize import run_localize as measure

    console = Console(stderr=True)
    try:
        load_corpus(args.corpus)
        engine = _load(args, console)
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench localize: {exc}", file=sys.stderr)
        return 2
    if engine.loaded.remote:
        print("copy-as-decode bench localize: a remote backend returns no logits; measure it in-process", file=sys.stderr)
        return 2

    def progress(done: int, total: int) -> None:
        if done == total or done % 20 == 0:
            console.print(f"[dim]localize {done}/{total}[/dim]")

    data = measure(engine, args.corpus, limit=args.limit, offset=args.offset, base=args.base, on_case=progress)
    data.update({"machine": machine_info(engine.loaded.device, engine.loaded.dtype), "command": command_line(),
                 "backend": engine.loaded.runtime.describe()})
    table = Table(title=f"{args.corpus}: {data['cases']} cases, gold = the first line the gold changes "
                        f"(any = any line it edits)", title_justify="left")
    for col in ("model", "ranking", "top-1", "top-3", "top-1 any", "top-3 any"):
        table.add_column(col, justify="left" if col in ("model", "ranking") else "right")
    for row in localize_table(data):
        table.add_row(*row)
    Console().print(table)
    for model, entry in data["summary"].items():
        console.print(f"{model}: {entry['seconds_mean']:.3f} s per case for {entry['prompt_tokens_mean']:.0f} prompt "
                      f"tokens ({entry['region_tokens_mean']:.0f} scored)")
    if args.json:
        console.print(f"wrote {write_json(args.json, data)}")
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
    Console().print(edits_table(data))
    console.print(f"wrote {write_json(args.json, data)} ({data['cases']} cases from {len(data['parts'])} part(s))")
    plot = _plot_path(args)
    if plot:

        console.print(f"wrote {plot_edits(data, plot)}")
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
