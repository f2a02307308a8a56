"""``copy-as-decode train-selector``: train, save, evaluate and describe the span-selector adapter.

Steps: build the synthetic cases (``engine.training.synth``), record each training case's fed token
sequence through the program decoder (cached in the work folder), train LoRA (checkpoints in the
work folder; ``--resume`` continues), write the adapter + loss curve + card to ``--out``, then
evaluate program mode with the adapter on the held-out split and add the table to the card.
"""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engine.api import Engine
from engine.core.choices import DEFAULT_FOCUS_POLICY
from engine.core.errors import ModelLoadError
from engine.evaluation.focus import FOCUS_SETTINGS
from engine.runtime.load import load_model, log_progress
from engine.runtime.sources import DEFAULT_MODEL
from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR, save_adapter
from engine.training.selector.card import plot_loss, write_card
from engine.training.selector.dataset import cases_fingerprint, read_examples, record_examples, write_examples
from engine.training.selector.evaluate import evaluate
from engine.training.selector.train import CheckpointMismatch, TrainConfig, TrainResult, train_adapter

DEFAULT_WORK_DIR = Path("artifacts/train-selector")
RECIPE_DEFAULTS = {"train": 640, "heldout": 80, "data_seed": 0, "max_tokens": 1024, "focus_share": 0.5,
                   "exact_share": 0.5}


def add_parser(sub: Any) -> None:

    d = TrainConfig()
    p = sub.add_parser("train-selector", help="train the span-selector LoRA adapter for program mode",
                       description="Train the span selector, the LoRA adapter that teaches a model to write edit "
                                   "programs: build the synthetic cases (as `synth`), record each training "
                                   "case's tokens, train (with checkpoints in --work-dir; --resume continues), "
                                   "write the adapter, its loss curve and its card to --out, then evaluate "
                                   "program mode with it on the held-out cases and add the results to the card.")
    p.add_argument("--model", default="default", help="base model (default: the embedded SmolLM2-135M)")
    p.add_argument("--out", type=Path, default=None,
                   help="adapter folder (default for the embedded model: the shipped engine/runtime/selector/smollm2-135m)")
    p.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR,
                   help=f"checkpoints and the recorded sequences (default {DEFAULT_WORK_DIR}, git-ignored)")
    g = p.add_argument_group("data")
    g.add_argument("--train", type=int, default=RECIPE_DEFAULTS["train"], help="synthetic training cases")
    g.add_argument("--heldout", type=int, default=RECIPE_DEFAULTS["heldout"], help="synthetic held-out cases")
    g.add_argument("--data-seed", type=int, default=RECIPE_DEFAULTS["data_seed"])
    g.add_argument("--max-tokens", type=int, default=RECIPE_DEFAULTS["max_tokens"],
                   help="drop training sequences longer than this")
    g.add_argument("--focus-share", type=float, default=RECIPE_DEFAULTS["focus_share"],
                   help="share of training cases that show the focus hint (the editor sends one with every AI fix)")
    g.add_argument("--exact-share", type=float, default=RECIPE_DEFAULTS["exact_share"],
                   help="share of those hints on the changed line; the rest sit near it or on an untouched line, "
                        "as a cursor would (1.0: always on it, the shipped adapter's data)")
    g = p.add_argument_group("recipe")
    g.add_argument("--steps", type=int, default=d.steps)
    g.add_argument("--lr", type=float, default=d.lr)
    g.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    g.add_argument("--min-lr-ratio", type=float, default=d.min_lr_ratio)
    g.add_argument("--rank", type=int, default=d.rank)
    g.add_argument("--alpha", type=int, default=d.alpha)
    g.add_argument("--target-modules", default=d.target_modules, help="all-linear or a comma list, e.g. q_proj,v_proj")
    g.add_argument("--grad-accum", type=int, default=d.grad_accum, help="sequences per optimizer step")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm)
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--save-dtype", choices=("float16", "bfloat16", "float32"), default="float16",
                   help="dtype of the saved adapter (default float16: r=16 on every linear layer fits 10 MB)")
    g = p.add_argument_group("run")
    g.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    g.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    g.add_argument("--resume", action="store_true", help="continue from the checkpoint in --work-dir")
    g.add_argument("--checkpoint-every", type=int, default=25, metavar="K")
    g.add_argument("--stop-after", type=int, default=None, metavar="STEP",
                   help="stop (with a checkpoint) once STEP steps are done; continue later with --resume")
    g = p.add_argument_group("evaluation")
    g.add_argument("--eval-cases", type=int, default=40, help="held-out cases to evaluate (default 40)")
    g.add_argument("--eval-max-new-tokens", type=int, default=256)
    g.add_argument("--eval-base", action="store_true", help="also evaluate program mode without the adapter (slow)")
    g.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    g.add_argument("--eval-only", action="store_true", help="evaluate the adapter in --out and rewrite its card")
    p.set_defaults(func=run)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces the adapter (recipe options only)."""
    parts = ["copy-as-decode", "train-selector"]
    for name in ("model", "train", "heldout", "data_seed", "max_tokens", "focus_share", "exact_share", "steps", "lr",
                 "warmup_steps", "min_lr_ratio", "rank", "alpha", "target_modules", "grad_accum", "max_grad_norm", "seed",
                 "save_dtype", "threads"):
        value = getattr(args, name)
        if value is not None:
            parts += ["--" + name.replace("_", "-"), str(value)]
    return shlex.join(parts)


def _config(args: argparse.Namespace) -> Any:

    return TrainConfig(steps=args.steps, lr=args.lr, warmup_steps=args.warmup_steps, min_lr_ratio=args.min_lr_ratio,
                       rank=args.rank, alpha=args.alpha, target_modules=args.target_modules, seed=args.seed,
                       grad_accum=args.grad_accum, max_grad_norm=args.max_grad_norm)


def _out_dir(args: argparse.Namespace) -> Path:

    if args.out is not None:
        return args.out
    if args.model != DEFAULT_MODEL:
        raise SystemExit("copy-as-decode train-selector: --out is required for a model other than the default")
    return SHIPPED_ADAPTER_DIR


class Reporter:
    """A rich progress bar on a terminal; plain log lines (every ``every`` items) otherwise, so a
    background run's log shows progress too."""

    def __init__(self, label: str, total: int, every: int = 10):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = Console(stderr=True)
        self.label, self.total, self.every = label, total, every
        self.progress = None
        if self.console.is_terminal:
            self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                     TimeRemainingColumn(), console=self.console)
            self.task = self.progress.add_task(label, total=total, info="")
            self.progress.start()

    def update(self, done: int, info: str = "", eta_s: float | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=done, info=info)
        elif done == 1 or done % self.every == 0 or done == self.total:
            eta = f" ETA {_clock(eta_s)}" if eta_s is not None else ""
            print(f"{self.label} {done}/{self.total} {info}{eta}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def train_reported(command: str, model: Any, examples: list[Any], config: TrainConfig,
                   args: argparse.Namespace) -> TrainResult | int:
    """:func:`train_adapter` with a progress display, as ``args`` asks (``work_dir``, ``resume``,
    ``checkpoint_every``, ``stop_after``): the finished run's result, or the exit status when it
    did not finish (0: stopped at ``--stop-after``, with how to go on; 2: a checkpoint of another run)."""
    reporter = Reporter("training", config.steps, every=5)

    def on_step(info: Any) -> None:
        reporter.update(info.step, f"loss {info.loss:.3f} lr {info.lr:.1e} {info.step_s:.1f} s/step", info.eta_s)

    try:
        result = train_adapter(model, examples, config, args.work_dir, resume=args.resume,
                               checkpoint_every=args.checkpoint_every, stop_after=args.stop_after, on_step=on_step)
    except CheckpointMismatch as exc:
        print(f"copy-as-decode {command}: {exc}", file=sys.stderr)
        return 2
    finally:
        reporter.close()
    if not result.finished:
        print(f"stopped after step {result.steps_done} of {config.steps} (checkpoint in {args.work_dir}); "
              "run the same command with --resume to continue", file=sys.stderr)
        return 0
    return result


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _data_summary(dataset: Any, recorded: Any, max_tokens: int) -> dict[str, Any]:
    """What the card says about the data (sources, licenses, kinds, decontamination, sizes),
    from the cases and the statistics ``engine.training.synth.build_dataset`` reports."""
    stats = _jsonable(dict(getattr(dataset, "stats", {}) or {}))
    splits = stats.get("splits", {})
    kinds: dict[str, dict[str, int]] = {}
    for split, cases in (("train", dataset.train), ("heldout", dataset.heldout)):
        for case in cases:
            kinds.setdefault(case.kind, {"train": 0, "heldout": 0})[split] += 1
    sources = []
    for package, entry in (stats.get("sources") or {}).items():
        sources.append({"name": package, "language": entry.get("language", "?"), "license": entry.get("license", "?"),
                        "functions": entry.get("functions", entry.get("skipped", "-")),
                        "train": splits.get("train", {}).get("by_package", {}).get(package, 0),
                        "heldout": splits.get("heldout", {}).get("by_package", {}).get(package, 0)})
    decontamination = stats.get("decontamination", {})
    examples = recorded.examples
    return {
        "train_cases": len(dataset.train), "heldout_cases": len(dataset.heldout), "train_examples": len(examples),
        "too_long": recorded.too_long, "no_target": recorded.no_target, "max_tokens": max_tokens,
        "decontaminated": decontamination.get("dropped", "?"),
        "decontamination_checked": decontamination.get("functions_checked", "?"),
        "decontamination_against": decontamination.get("against", "the evaluation corpora"),
        "heldout_leaks_dropped": stats.get("pool", {}).get("train_functions_dropped_as_near_duplicates_of_heldout", "?"),
        "with_focus": sum(1 for c in dataset.train if c.focus_line is not None),
        "focus_placement": splits.get("train", {}).get("focus_placement"),
        "kinds": kinds, "languages": dict(Counter(c.language for c in dataset.train)),
        "licenses": dict(Counter(c.license for c in dataset.train)),
        "sources": sources,
        "tokens_mean": sum(len(e.ids) for e in examples) / max(1, len(examples)),
        "tokens_max": max((len(e.ids) for e in examples), default=0),
        "targets_mean": sum(e.targets for e in examples) / max(1, len(examples)),
        "stats": stats,
    }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _synth_progress(stage: str, done: int, total: int) -> None:
    if done == 0 or done == total or done % 100 == 0:
        print(f"synthetic data: {stage} {done}/{total}", file=sys.stderr, flush=True)


def _record(args: argparse.Namespace, loaded: Any, dataset: Any) -> tuple[Any, float]:

    meta = {"model": args.model, "cases": cases_fingerprint(dataset.train), "max_tokens": args.max_tokens, "version": 1}
    path = args.work_dir / "examples.jsonl"
    cached = read_examples(path, meta)
    if cached is not None:
        print(f"using the recorded sequences in {path}", file=sys.stderr)
        return cached, 0.0
    t0 = time.perf_counter()
    reporter = Reporter("recording", len(dataset.train), every=50)
    try:
        recorded = record_examples(loaded, dataset.train, args.max_tokens, on_case=reporter.update)
    finally:
        reporter.close()
    write_examples(path, recorded, meta)
    return recorded, time.perf_counter() - t0


def _train(args: argparse.Namespace, out: Path) -> int:
    import torch

    from engine.training.synth import build_dataset  # lazy: keeps --help fast

    loaded = load_model(args.model, device=args.device, progress=log_progress)
    t0 = time.perf_counter()
    dataset = build_dataset(args.train, args.heldout, seed=args.data_seed, progress=_synth_progress,
                            focus_share=args.focus_share, exact_share=args.exact_share)
    print(f"synthetic data: {len(dataset.train)} training and {len(dataset.heldout)} held-out cases "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    recorded, record_s = _record(args, loaded, dataset)
    config = _config(args)
    result = train_reported("train-selector", loaded.model, recorded.examples, config, args)
    if isinstance(result, int):
        return result
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[args.save_dtype]
    size = save_adapter(result.peft_model, out, args.model, dtype=dtype)
    plot_loss(result.losses, out / "loss.png", f"span selector, {args.model}: LoRA r={config.rank}, {config.steps} steps")
    previous = _read_info(out)
    info = {
        "base_model": "SmolLM2-135M-Instruct (embedded)" if args.model == "default" else args.model,
        "command": command_line(args),
        "recipe": {k: v for k, v in vars(config).items()} | {"save_dtype": args.save_dtype, "max_tokens": args.max_tokens,
                                                             "train_cases": args.train, "data_seed": args.data_seed,
                                                             "focus_share": args.focus_share,
                                                             "exact_share": args.exact_share},
        "data": _data_summary(dataset, recorded, args.max_tokens),
        "timing": {"device": loaded.device, "threads": torch.get_num_threads(),
                   "record_s": round(record_s or (previous or {}).get("timing", {}).get("record_s", 0.0), 1),
                   "train_s": round(result.train_s, 1), "steps_done": result.steps_done,
                   "seconds_per_step": result.train_s / max(1, result.steps_done),
                   "loss_first": sum(result.losses[:20]) / max(1, len(result.losses[:20])),
                   "loss_last": sum(result.losses[-20:]) / max(1, len(result.losses[-20:]))},
        "losses": [round(x, 5) for x in result.losses],
        "adapter_bytes": size, "adapter_dtype": args.save_dtype,
    }
    _write_info(out, info)
    write_card(out, info)
    print(f"wrote the adapter ({size:,} bytes), loss.png and CARD.md to {out}", file=sys.stderr)
    del result, loaded
    gc.collect()
    return 0


def _read_info(out: Path) -> dict[str, Any] | None:
    path = out / "training.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _write_info(out: Path, info: dict[str, Any]) -> None:
    (out / "training.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")


def _evaluate(args: argparse.Namespace, out: Path) -> int:
    from engine.training.synth import build_dataset  # lazy: keeps --help fast

    info = _read_info(out)
    if info is None:
        print(f"copy-as-decode train-selector: no training.json in {out}; train first", file=sys.stderr)
        return 2
    # transformers (fp32): the numerics the adapter was trained in, and the benchmarks' backend
    engine = Engine.load(args.model, device=args.device, progress=log_progress, selector=str(out),
                         backend="transformers")
    cases = build_dataset(args.train, args.heldout, seed=args.data_seed).heldout[: max(0, args.eval_cases)]
    arms = [(f"program (selector), focus {focus}", engine, focus) for focus in FOCUS_SETTINGS]
    if args.eval_base:
        base = Engine(engine.loaded)
        arms += [(f"program (base, few-shot), focus {focus}", base, focus) for focus in FOCUS_SETTINGS]
    t0 = time.perf_counter()
    rows = []
    for arm, eng, focus in arms:
        reporter = Reporter(arm, len(cases), every=10)
        try:
            row = evaluate(eng, cases, arm, focus, args.eval_max_new_tokens, on_case=reporter.update)
        finally:
            reporter.close()
        print(f"{arm}: exact {row.exact}/{row.cases}, valid {row.valid}, token-limit {row.token_limit}",
              file=sys.stderr)
        rows.append(row.as_dict())
    info["evaluation"] = {"rows": rows, "max_new_tokens": args.eval_max_new_tokens,
                          "seconds": round(time.perf_counter() - t0, 1), "focus_policy": DEFAULT_FOCUS_POLICY}
    _write_info(out, info)
    write_card(out, info)
    print(f"wrote the evaluation table to {out / 'CARD.md'}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    from engine.training.synth import SynthError  # lazy: keeps --help fast

    for name in ("focus_share", "exact_share"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            print(f"copy-as-decode train-selector: --{name.replace('_', '-')} must be between 0 and 1, "
                  f"not {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    out = _out_dir(args)
    try:
        if not args.eval_only:
            code = _train(args, out)
            if code or args.no_eval or not (out / "training.json").is_file():
                return code
            if args.stop_after is not None and args.stop_after < args.steps:
                return 0
        return _evaluate(args, out)
    except (ModelLoadError, SynthError) as exc:
        print(f"copy-as-decode train-selector: {exc}", file=sys.stderr)
        return 2
