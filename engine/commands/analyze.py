"""``copy-as-decode analyze``: copy statistics of oracle programs per corpus (see engine/bench/analysis.py)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from engine.core.errors import ModelLoadError
from engine.evaluation.corpora import CorpusError, body_only, load_corpora


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "analyze", help="how much of each evaluation corpus's fixes a program could copy (no model)",
        description="For each evaluation corpus, the oracle programs of its gold fixes (each copies the "
                    "lines the fix keeps and writes the rest), measured with a tokenizer, no model loaded: the "
                    "share of output tokens a copy could take (copy ceiling), copy span lengths, token-level copy "
                    "cover, whether every oracle reproduces its fix exactly (lossless), and how often a program with "
                    "shifted line numbers still does (perturbation). One table per corpus, optionally JSON. "
                    "The corpora are read from the folder COPY_AS_DECODE_SHARED names.",
    )
    parser.add_argument("--corpus", default="all",
                        help="humanevalfix-<python|js|cpp|go|java|rust>, canitedit or all (default: all)")
    parser.add_argument("--tokenizer", default="default",
                        help="default (the embedded SmolLM2), qwen2.5 (from the shared folder) or a Hugging Face folder")
    parser.add_argument("--convention", choices=("product", "paper"), default="product",
                        help="product (default: whole files, lines keep their newline, BPE of the whole gold) or "
                             "paper (the seed paper's Table 2: HumanEvalFix bodies only, lines split on newline, "
                             "each copy block tokenized as its lines joined with newline)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the statistics as JSON here")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N cases of each corpus")
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbation study (default 0)")
    parser.set_defaults(func=run)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run, recorded in each JSON record."""
    parts = ["copy-as-decode", "analyze", "--corpus", args.corpus, "--tokenizer", args.tokenizer]
    if args.convention != "product":
        parts += ["--convention", args.convention]
    if args.limit is not None:
        parts += ["--limit", str(args.limit)]
    if args.seed != 0 and args.convention == "product":
        parts += ["--seed", str(args.seed)]
    if args.json:
        parts += ["--json", str(args.json)]
    return shlex.join(parts)


def render_paper_table(corpus: str, stats: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"{corpus}  (paper convention, tokenizer: {stats['tokenizer']})", title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    rows = [
        ("cases", str(stats["n"])),
        ("T  gold tokens (whole gold)", _fmt(stats["T"])),
        ("T_copy  tokens of copied blocks", _fmt(stats["T_copy"])),
        ("T_gen  tokens of gen gaps", _fmt(stats["T_gen"])),
        ("f_line = T_copy / T", _fmt(stats["f_line"])),
        ("f_line, mean over cases", _fmt(stats["f_line_case_mean"])),
        ("K  copy spans (per case)", f"{stats['K']} ({stats['K_mean']:.2f})"),
        ("span tokens mean / p50 / p95",
         f"{_fmt(stats['span_mean'], 1)} / {_fmt(stats['span_p50'], 1)} / {_fmt(stats['span_p95'], 1)}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def render_table(corpus: str, stats: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"{corpus}  (tokenizer: {stats['tokenizer']})", title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    n = stats["n"]
    rows = [
        ("cases", str(n)),
        ("T  gold tokens", _fmt(stats["T"])),
        ("T_copy  gold tokens in line copies", _fmt(stats["T_copy"])),
        ("T_gen  gold tokens in gens", _fmt(stats["T_gen"])),
        ("f_line = T_copy / T", _fmt(stats["f_line"])),
        ("f_line, mean over cases", _fmt(stats["f_line_case_mean"])),
        ("f_line, lines tokenized one by one", f"{_fmt(stats['f_line_lines'])} (T={stats['T_lines']})"),
        ("K  copy spans (per case)", f"{stats['K']} ({stats['K_mean']:.2f})"),
        ("span tokens mean / p50 / p95",
         f"{_fmt(stats['span_mean'], 1)} / {_fmt(stats['span_p50'], 1)} / {_fmt(stats['span_p95'], 1)}"),
    ]
    rows += [(f"token cover, min span m={m}", _fmt(v)) for m, v in stats["token_cover"].items()]
    rows += [
        ("program tokens (line oracle, serialized)", _fmt(stats["program_tokens"])),
        ("  of which structure (tags only)", _fmt(stats["structure_tokens"])),
        ("full regeneration tokens", _fmt(stats["regen_tokens"])),
        ("program / regeneration", _fmt(stats["program_vs_regen"])),
        ("lossless (line & token oracles)", "{}/{}".format(*stats["lossless"])),
        ("  line oracle", "{}/{}".format(*stats["lossless_line"])),
        ("  token oracles (every m)", "{}/{}".format(*stats["lossless_token"])),
    ]
    trials = stats["perturbation_config"]["trials"]
    rows += [(f"perturbation exact match, eps={eps} ({trials} trials)", _fmt(v))
             for eps, v in stats["perturbation"].items()]
    for name, value in rows:
        table.add_row(name, value)
    return table


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.bench.analysis import (  # lazy: keeps --help fast
        PAPER,
        LineTokenCounter,
        analyze_cases,
        analyze_cases_paper,
        load_analysis_tokenizer,
    )

    console = Console()
    started = time.perf_counter()
    try:
        corpora = load_corpora(args.corpus)
        tokenizer, description = load_analysis_tokenizer(args.tokenizer)
    except (CorpusError, ModelLoadError) as exc:
        print(f"copy-as-decode analyze: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        corpora = {name: cases[: max(args.limit, 0)] for name, cases in corpora.items()}
    if args.convention == PAPER:
        corpora = {name: [body_only(case) for case in cases] for name, cases in corpora.items()}
    console.print(f"tokenizer: {description}  (loaded in {time.perf_counter() - started:.1f} s)")

    counter = LineTokenCounter(tokenizer)
    results: dict[str, dict[str, Any]] = {}
    for name, cases in corpora.items():
        t0 = time.perf_counter()
        if args.convention == PAPER:
            stats = analyze_cases_paper(cases, tokenizer, args.tokenizer)
        else:
            stats = analyze_cases(cases, tokenizer, args.tokenizer, counter=counter, seed=args.seed)
        stats["tokenizer_source"] = description
        stats["command"] = command_line(args)
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        results[name] = stats
        console.print(render_paper_table(name, stats) if args.convention == PAPER else render_table(name, stats))

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        console.print(f"wrote {args.json}")
    console.print(f"elapsed: {time.perf_counter() - started:.1f} s "
                  f"({sum(len(c) for c in corpora.values())} cases, {len(corpora)} corpora)")
    return 0
