"""``copy-as-decode synth``: build the span selector's synthetic edit cases (see engine/training/synth/)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from engine.evaluation.corpora import CorpusError


def default_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "copy-as-decode" / "synth"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "synth", help="build the synthetic edit cases the span selector is trained on",
        description="Build the synthetic edit cases the span selector is trained on: take functions from "
                    "licensed code (the Python standard library, pinned npm packages), put a bug or an "
                    "instructed edit into each, drop any case too close to the evaluation corpora, and write "
                    "train.jsonl, heldout.jsonl and stats.json to --out. The same seed gives the same files.",
    )
    parser.add_argument("--n-train", type=int, default=1500, help="training cases (default 1500)")
    parser.add_argument("--n-heldout", type=int, default=150, help="held-out cases (default 150)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0); same seed -> same JSONL bytes")
    parser.add_argument("--languages", default="python,javascript",
                        help="comma-separated: python, javascript (default both; javascript needs node and npm)")
    parser.add_argument("--js-share", type=float, default=0.35, help="share of JavaScript cases (default 0.35)")
    parser.add_argument("--out", type=Path, default=default_folder(),
                        help=f"output folder (default {default_folder()})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from engine.training.synth import SynthError, build_dataset  # lazy: keeps --help fast
    from engine.training.synth.js_source import JsSourceError

    console = Console(stderr=True)
    languages = tuple(part.strip() for part in args.languages.split(",") if part.strip())
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)
        try:
            dataset = build_dataset(args.n_train, args.n_heldout, seed=args.seed, languages=languages,
                                    js_share=args.js_share, progress=progress)
        except (SynthError, JsSourceError, CorpusError) as exc:
            print(f"copy-as-decode synth: {exc}", file=sys.stderr)
            return 2
    paths = dataset.write(args.out.expanduser())
    stats = dataset.stats
    for split in ("train", "heldout"):
        s = stats["splits"][split]
        console.print(f"{split}: {s['cases']} cases  {s['by_language']}  positions {s['position_histogram']['counts']}")
    console.print(f"decontamination: dropped {stats['decontamination']['dropped']} of "
                  f"{stats['decontamination']['functions_checked']} functions")
    console.print(f"wrote {', '.join(str(p) for p in paths.values())}  ({time.perf_counter() - started:.1f} s)")
    return 0
