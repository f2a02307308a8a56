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
    copy-as-decode bench apply --arms lines,structure --cases both [--per-shape N]
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

This module declares the flags; what each subcommand runs is engine/commands/bench_runs.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.bench.apply import ARMS as APPLY_ARMS
from engine.bench.apply_rules import RULE_ARMS
from engine.bench.arms import FAMILY_ARMS
from engine.commands.bench_runs import (
    run_apply,
    run_backends,
    run_concurrency,
    run_edits,
    run_kernel,
    run_localize,
    run_merge,
    run_predicted,
    run_report,
)
from engine.core.choices import MODES
from engine.runtime.load import IN_PROCESS_BACKENDS
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
MODEL_FLAGS = ("model", "device", "dtype", "threads", "backend", "server_url", "flash_attention", "padded_steps",
               "json", "plot")


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
            elif spec.kind == "boolean":
                kwargs["action"] = "store_true"
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
                       help="comma list of arms (ar is required in forced, optional in free); forced: ar, pld, speculative, program, "
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

    apply = sub.add_parser("apply", help="apply arms (the rules' merges: lines, structure; the model's: aligner, "
                           "program, program-undrafted, speculative, ar) on held-out synthetic apply cases "
                           "(engine/bench/apply.py, engine/bench/apply_rules.py)")
    flags(apply, *MODEL_FLAGS, "selector", "verify", threads=threads)
    apply.add_argument("--per-style", type=int, default=1, help="cases of each update style (default 1: 7 cases)")
    apply.add_argument("--seed", type=int, default=0, help="seed of the cases (default 0)")
    apply.add_argument("--arms", default=",".join(APPLY_ARMS), help=f"comma list of {', '.join(APPLY_ARMS)}, or "
                       f"of the rules' arms {', '.join(RULE_ARMS)} (no model is loaded; not mixed with the others) "
                       "(default: the model's arms)")
    apply.add_argument("--cases", choices=("styles", "shapes", "both"), default="styles", help="the update styles "
                       "(engine/bench/apply_cases.py), the definition shapes in six languages "
                       "(engine/bench/apply_shapes.py; rules' arms only), or both (default styles)")
    apply.add_argument("--per-shape", type=int, default=10, help="cases of each shape in each language "
                       "(--cases shapes; default 10)")
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
