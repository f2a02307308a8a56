"""``copy-as-decode bench``: side-by-side speed benchmarks (see engine/bench/).

    copy-as-decode bench kernel [--json PATH] [--plot PATH] [--model M] [--context 1024] [--trials K]
    copy-as-decode bench edits --corpus NAME --family forced|free [--arms ar,program,...]
                               [--offset K] [--limit N] [--selector auto|none|PATH]
                               [--json PATH] [--plot PATH] [--kernel PATH]
    copy-as-decode bench edits --corpus NAME --family free --candidates 1,4,8x2 --check tests
    copy-as-decode bench localize --corpus NAME [--limit N] [--base] [--json PATH]  # where is the bug?
    copy-as-decode bench merge PART.json... --json OUT   # case ranges run apart -> one result
    copy-as-decode bench report [--results DIR] [--into NOTES.md]
    copy-as-decode bench apply [--per-style N] [--arms aligner,program,...] [--backend transformers|llamacpp]
    copy-as-decode bench predicted [--backend auto|transformers|llamacpp] [--cases humanevalfix-python=10,canitedit=5]

Arms (engine/bench/arms.py): forced family ar, pld, speculative, program (undrafted),
program-drafted (default: all five); free family ar, pld, speculative, program (selector,
drafted, no focus hint), program-undrafted, program-base (selector none), program-near (selector +
a focus hint near the bug: the first changed line moved by a seeded offset in -3..+3, what an
editor's cursor sends), program-oracle (selector + the focus exactly on the first changed line: an
upper bound; "program-focus" is read as this name) (default: ar, speculative, program,
program-undrafted).

The flags that are settings (--model, --device, --dtype, --backend, --threads, --selector,
--verify, --flash-attention, --max-new-tokens, ...) take their help, choices and defaults from the
settings schema, but where BENCH_DEFAULTS below or a subcommand says otherwise: --backend is
transformers (every recorded result ran there; the product's auto would pick llama.cpp for the
embedded model wherever it is installed).

With --json, the file is rewritten after every case (``"complete": false`` until the run ends),
so an interrupted run leaves its finished cases; merge ranges with ``bench merge``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from engine.api import EditRequest, Engine
from engine.bench.apply import ARMS as APPLY_ARMS
from engine.bench.arms import FAMILY_ARMS, ArmError, parse_arms
from engine.bench.concurrency import measure_concurrency
from engine.bench.harness import command_line, get_engine, machine_info, refuses_server, write_json
from engine.bench.kernel import DEFAULT_NS, kernel_table, measure_kernel, parse_ns
from engine.bench.output import report, table_of
from engine.bench.plot import plot_apply, plot_edits, plot_kernel
from engine.bench.report import ReportError, edits_table, markdown_report, write_into
from engine.core.choices import MODES
from engine.core.errors import ModelLoadError
from engine.evaluation.corpora import CorpusError, load_corpus
from engine.runtime.backends import BackendOptions
from engine.runtime.load import IN_PROCESS_BACKENDS
from engine.runtime.threads import set_threads
from engine.settings import SPECS

# Where a bench flag's default differs from the product's, on purpose (every other settings flag
# defaults as the settings schema says: --verify auto, --selector auto, ...); --help says so.
BENCH_DEFAULTS: dict[str, Any] = {
    # Every recorded result ran on transformers; the product's auto picks llama.cpp for the
    # embedded model wherever llama-cpp-python is installed, so a recorded command would change.
    "backend": "transformers",
    "threads": None,  # torch's and llama.cpp's own choice unless a measurement pins it (--threads 1)
    "server_url": None,  # no vLLM server unless one is named
}

# The bench's own flags (not settings), each declared once; a subcommand may give its own default.
OWN_FLAGS: dict[str, dict[str, Any]] = {
    "corpus": {"help": "humanevalfix-<python|js|...> or canitedit"},
    "limit": {"type": int, "default": None, "help": "only N cases (after --offset)"},
    "offset": {"type": int, "default": 0, "help": "skip the first K cases of the corpus"},
    "json": {"type": Path, "metavar": "PATH", "help": "write the results here"},
    "plot": {"type": Path, "metavar": "PATH", "help": "write the PNG here (default: next to --json)"},
    "kernel_trials": {"type": int, "help": "trials per N of a kernel measured here"},
    "ns": {"default": None, "help": "comma list of kernel sizes N"},
}
MODEL_FLAGS = ("model", "device", "dtype", "threads", "backend", "server_url", "flash_attention", "json", "plot")


def flags(parser: argparse.ArgumentParser, *names: str, **own: dict[str, Any]) -> None:
    """Add the named flags: a setting's from the settings schema (its help and choices, and its
    default unless :data:`BENCH_DEFAULTS` has one), the bench's from :data:`OWN_FLAGS`. ``own``:
    a flag's keywords for this subcommand (a default, ``required``; ``note``: more help)."""
    for name in names:
        spec = SPECS.get(name)
        why = ""
        if spec is not None:
            kwargs: dict[str, Any] = {"default": BENCH_DEFAULTS.get(name, spec.default), "help": spec.help}
            if kwargs["default"] not in (None, spec.default):
                why = f"The bench's default is {kwargs['default']}, not the product's {spec.default}."
            if spec.choices:
                kwargs["choices"] = spec.choices
            elif spec.kind == "integer":
                kwargs["type"] = int
        else:
            kwargs = dict(OWN_FLAGS[name])
        kwargs.update(own.get(name, {}))
        note = f"{kwargs.pop('note', '')} {why}".strip()
        default = kwargs.get("default")
        suffix = f" (default {default})" if default not in (None, False, "") and not kwargs.get("required") else ""
        kwargs["help"] = f"{kwargs['help']} {note}".strip() + suffix
        parser.add_argument("--" + name.replace("_", "-"), dest=name, **kwargs)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("bench", help="speed benchmarks: kernel curve s(N) and corpus edits",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    threads = {"note": "Also torch's intra-op threads; default: the backend's choice (1 is steadiest on a shared CPU)."}

    kernel = sub.add_parser("kernel", help="s(N) = N one-token forwards / one N-token forward over a cached context")
    flags(kernel, *MODEL_FLAGS, "ns", threads=threads, ns={"note": "(default 1,2,4,...,512)"})
    kernel.add_argument("--context", type=int, default=1024, help="cached context tokens (default 1024)")
    kernel.add_argument("--trials", type=int, default=3, help="trials per N; medians are reported (default 3)")
    kernel.add_argument("--warmup", type=int, default=1, help="warm-up rounds before timing (default 1)")
    kernel.set_defaults(func=run_kernel)

    edits = sub.add_parser("edits", help="every arm on corpus cases, side by side")
    flags(edits, *MODEL_FLAGS, "corpus", "limit", "offset", "selector", "kernel_trials", "max_new_tokens", "verify",
          threads=threads, corpus={"required": True}, kernel_trials={"default": 2},
          max_new_tokens={"default": None, "note": "Free family, per edit; default: 1.5 x input tokens + 64."})
    edits.add_argument("--family", required=True, choices=tuple(FAMILY_ARMS),
                       help="forced: every arm decodes the gold (mechanism cost); free: the model decides")
    edits.add_argument("--arms", default=None,
                       help="comma list of arms (ar is required); forced: ar, pld, speculative, program, "
                            "program-drafted (default: all); free: ar, pld, speculative, program, program-undrafted, "
                            "program-base, program-near, program-cursor-on, program-oracle and their -keep, -guard, -hold policy "
                            "variants (default: ar,speculative,program,program-undrafted)")
    edits.add_argument("--kernel", type=Path, metavar="PATH",
                       help="kernel JSON for the bounds; forced family without it: measure the kernel first")
    edits.add_argument("--test-timeout", type=float, default=15.0, help="seconds per test run (free family)")
    edits.add_argument("--no-tests", action="store_true", help="free family: skip pass@1")
    edits.add_argument("--no-warmup", action="store_true", help="skip the warm-up (not for real measurements)")
    edits.add_argument("--candidates", dest="candidate_arms", metavar="K[xR],...", help="checked candidates "
                       "instead of arms (engine.candidates): one search per arm, K candidates a round and R rounds "
                       "(default 1), near the cursor, e.g. 1,4,8x2; needs --check tests")
    edits.add_argument("--check", choices=("tests",), help="with --candidates: the corpus tests are the check")
    edits.add_argument("--candidates-focus", choices=("near", "none"), default="near", help="with --candidates: "
                       "the hint each search sends: near (the editor's cursor, 0-3 lines from the bug) or none")
    edits.set_defaults(func=run_edits)

    backends = sub.add_parser("backends", help="backends side by side: ar tokens/s per case and s(N)")
    flags(backends, "model", "threads", "corpus", "limit", "ns", "kernel_trials", "json",
          model={"note": "A .gguf (or the embedded default) every backend can run."},
          threads={"note": "For every backend (torch and llama.cpp)."}, corpus={"default": "humanevalfix-python"},
          limit={"default": 20}, ns={"default": "1,2,4,8,16,32,64,128"}, kernel_trials={"default": 3})
    backends.add_argument("--backends", default="transformers,llamacpp", help="comma list (the first is the baseline)")
    backends.set_defaults(func=run_backends)

    conc = sub.add_parser("concurrency", help="a remote backend (vLLM): 1, 2, 4 edits in flight")
    flags(conc, "server_url", "model", "corpus", "limit", "mode", "selector", "max_new_tokens", "json",
          server_url={"required": True}, model={"note": "The local copy of what the server serves."},
          corpus={"default": "humanevalfix-python"}, limit={"default": 8, "help": "edits per round (the first cases)"},
          mode={"default": "ar", "choices": MODES}, max_new_tokens={"default": 128})
    conc.add_argument("--levels", default="1,2,4", help="edits in flight per round (comma list)")
    conc.add_argument("--rounds", type=int, default=3)
    conc.set_defaults(func=run_concurrency)

    loc = sub.add_parser("localize", help="how often per-line surprise (and a near cursor) finds the line to fix")
    flags(loc, *MODEL_FLAGS, "corpus", "limit", "offset", "selector", threads=threads, corpus={"required": True})
    loc.add_argument("--base", action="store_true", help="also score with the base model (one more forward per case)")
    loc.set_defaults(func=run_localize)

    predicted = sub.add_parser("predicted", help="OpenAI endpoint: the region as the prediction vs none, over HTTP "
                               "and in-process (engine/bench/predicted.py)")
    flags(predicted, "model", "backend", "threads", "max_new_tokens", "verify", "json",
          backend={"choices": ("auto", *IN_PROCESS_BACKENDS)},  # the prediction drafts in-process; auto picks one
          threads={"note": "Of the server and of this process."},
          max_new_tokens={"default": None, "note": "Default: 1.5 x input tokens + 64."})
    predicted.add_argument("--cases", default="humanevalfix-python=10,canitedit=5", help="CORPUS=N[,CORPUS=N...]: the "
                           "first N cases of each (default humanevalfix-python=10,canitedit=5)")
    predicted.set_defaults(func=run_predicted)

    merge = sub.add_parser("merge", help="merge partial 'bench edits' results (disjoint case ranges)")
    merge.add_argument("parts", nargs="+", type=Path, metavar="PART.json", help="results files to merge")
    flags(merge, "json", "plot", json={"required": True, "help": "write the merged results here"})
    merge.set_defaults(func=run_merge)

    apply = sub.add_parser("apply", help="apply arms (aligner, program, program-undrafted, speculative, ar) on "
                           "held-out synthetic apply cases (engine/bench/apply.py)")
    flags(apply, *MODEL_FLAGS, "selector", threads=threads)
    apply.add_argument("--per-style", type=int, default=1, help="cases of each update style (default 1: 7 cases)")
    apply.add_argument("--seed", type=int, default=0, help="seed of the cases (default 0)")
    apply.add_argument("--arms", default=",".join(APPLY_ARMS), help=f"comma list of {', '.join(APPLY_ARMS)} "
                       "(default: all)")
    apply.add_argument("--text-max-lines", type=int, default=60, help="run ar and speculative only on files of at "
                       "most this many lines (default 60: they regenerate the whole file)")
    apply.add_argument("--program-max-tokens", type=int, default=256, help="new tokens a program arm may write "
                       "(chosen and forced; copied ones are free); past it the merge is unfinished (default 256)")
    apply.set_defaults(func=run_apply)

    report = sub.add_parser("report", help="Markdown tables from results/bench_*.json")
    report.add_argument("--results", type=Path, default=Path("results"), help="folder of bench_*.json (default results)")
    report.add_argument("--into", type=Path, metavar="FILE",
                        help="replace the text between the report markers in FILE (a Markdown notes file) "
                             "instead of printing")
    report.set_defaults(func=run_report)


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
                             flash_attention=args.flash_attention, **extra)
    return get_engine(args.model, args.device, args.dtype, progress=lambda m: console.print(f"[dim]{m}[/dim]"),
                      selector=getattr(args, "selector", "auto"), backend=args.backend, options=options)


def run_apply(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.bench.apply import run_cases, table_rows
    from engine.bench.apply_cases import held_out

    console = Console(stderr=True)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in APPLY_ARMS]
    if unknown or args.per_style < 1:
        print(f"copy-as-decode bench apply: unknown arm {unknown[0]!r}" if unknown else
              "copy-as-decode bench apply: --per-style must be >= 1", file=sys.stderr)
        return 2
    try:
        engine = _load(args, console, reuse_prompts=True)
    except ModelLoadError as exc:
        print(f"copy-as-decode bench apply: {exc}", file=sys.stderr)
        return 2
    cases = list(held_out(args.per_style, args.seed))
    data = run_cases(engine, cases, arms, args.text_max_lines, progress=lambda m: console.print(f"[dim]{m}[/dim]"),
                     program_tokens=args.program_max_tokens)
    data = {"model": engine.name, "backend": engine.loaded.runtime.describe(), "selector": engine.selector,
            "apply_selector": str(engine.apply_selector) if engine.apply_selector else None,
            "cases": len(cases), "per_style": args.per_style, "seed": args.seed, **data,
            "machine": machine_info(engine.loaded.device, engine.loaded.dtype), "command": command_line()}
    report(console, table_of(f"apply, {len(cases)} cases, plain decoding {data['plain_rate']} tok/s",
                             ("arm", "runs", "exact", "damaged lines", "median tok/s", "x plain"), table_rows(data)),
           data, args.json)
    _plot(args, console, lambda path: plot_apply(data, path))
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
