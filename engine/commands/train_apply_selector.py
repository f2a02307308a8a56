"""``copy-as-decode train-apply-selector``: train the apply selector, the LoRA adapter that
teaches the model to merge an update into a file (an apply's program, engine.apply).

Steps, as ``train-selector``'s: build the synthetic apply cases (engine.training.apply.data, from
sources disjoint from the benchmark's), record each case's windows through the program decoder
(cached in the work folder), train LoRA (checkpoints; ``--resume`` continues), then write the
adapter, its loss curve, ``training.json`` and its card to ``--out``. Its held-out evaluation is
``copy-as-decode bench apply``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engine.commands.train_selector import Reporter, train_reported
from engine.core.errors import ModelLoadError
from engine.runtime.load import load_model, log_progress
from engine.runtime.sources import DEFAULT_MODEL
from engine.runtime.selector.adapter import SHIPPED_APPLY_ADAPTER_DIR, save_adapter
from engine.training.apply.card import write_apply_card
from engine.training.selector.card import plot_loss
from engine.training.selector.dataset import read_examples, write_examples
from engine.training.selector.train import TrainConfig

DEFAULT_WORK_DIR = Path("artifacts/train-apply-selector")
RECIPE = ("model", "train", "data_seed", "margin", "max_tokens", "steps", "lr", "warmup_steps", "min_lr_ratio", "rank",
          "alpha", "target_modules", "seed", "save_dtype", "threads")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("train-apply-selector", help="train the apply selector LoRA adapter (merging updates)",
                       description="Train the apply selector: build synthetic apply cases, record each case's "
                                   "windows, train LoRA (checkpoints in --work-dir; --resume continues), and write "
                                   "the adapter, its loss curve and its card to --out. Evaluate it with "
                                   "`copy-as-decode bench apply`.")
    p.add_argument("--model", default="default", help="base model (default: the embedded SmolLM2-135M)")
    p.add_argument("--out", type=Path, default=None,
                   help="adapter folder (default for the embedded model: the shipped "
                        "engine/runtime/selector/smollm2-135m-apply)")
    p.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR)
    g = p.add_argument_group("data")
    g.add_argument("--train", type=int, default=400, help="synthetic training cases")
    g.add_argument("--data-seed", type=int, default=0)
    g.add_argument("--margin", type=int, default=20, help="the windows' margin, as the applyWindowLines setting")
    g.add_argument("--max-tokens", type=int, default=2048, help="drop training sequences longer than this")
    g = p.add_argument_group("recipe")
    g.add_argument("--steps", type=int, default=400)
    g.add_argument("--lr", type=float, default=5e-4)
    g.add_argument("--warmup-steps", type=int, default=20)
    g.add_argument("--min-lr-ratio", type=float, default=0.1)
    g.add_argument("--rank", type=int, default=8)
    g.add_argument("--alpha", type=int, default=16)
    g.add_argument("--target-modules", default="all-linear")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--save-dtype", choices=("float16", "bfloat16", "float32"), default="float16")
    g = p.add_argument_group("run")
    g.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    g.add_argument("--resume", action="store_true", help="continue from the checkpoint in --work-dir")
    g.add_argument("--checkpoint-every", type=int, default=25, metavar="K")
    g.add_argument("--stop-after", type=int, default=None, metavar="STEP")
    p.set_defaults(func=run)


def command_line(args: argparse.Namespace) -> str:
    parts = ["copy-as-decode", "train-apply-selector"]
    for name in RECIPE:
        value = getattr(args, name)
        if value is not None:
            parts += ["--" + name.replace("_", "-"), str(value)]
    return shlex.join(parts)


def _progress(label: str) -> Any:
    def report(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            print(f"{label} {done}/{total}", file=sys.stderr, flush=True)
    return report


def run(args: argparse.Namespace) -> int:
    import torch

    from engine.training.apply.data import training_cases  # lazy: keeps --help fast
    from engine.training.apply.record import record_cases

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.out is None and args.model not in ("default", DEFAULT_MODEL):
        print("copy-as-decode train-apply-selector: --out is required for a model other than the default",
              file=sys.stderr)
        return 2
    out = args.out or SHIPPED_APPLY_ADAPTER_DIR
    try:
        loaded = load_model(args.model, progress=log_progress)
    except ModelLoadError as exc:
        print(f"copy-as-decode train-apply-selector: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    cases = training_cases(args.train, args.data_seed, progress=_progress("synthetic apply cases"))
    meta = {"model": args.model, "train": args.train, "data_seed": args.data_seed, "margin": args.margin,
            "max_tokens": args.max_tokens, "names": [case.name for case, _ in cases], "version": 1}
    path = args.work_dir / "examples.jsonl"
    recorded = read_examples(path, meta)
    if recorded is None:
        reporter = Reporter("recording", len(cases), every=50)
        try:
            recorded = record_cases(loaded, cases, args.margin, args.max_tokens, on_case=reporter.update)
        finally:
            reporter.close()
        write_examples(path, recorded, meta)
    data_s = time.perf_counter() - t0
    config = TrainConfig(steps=args.steps, lr=args.lr, warmup_steps=args.warmup_steps, min_lr_ratio=args.min_lr_ratio,
                         rank=args.rank, alpha=args.alpha, target_modules=args.target_modules, seed=args.seed)
    result = train_reported("train-apply-selector", loaded.model, recorded.examples, config, args)
    if isinstance(result, int):
        return result
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[args.save_dtype]
    size = save_adapter(result.peft_model, out, args.model, dtype=dtype, job="apply")
    plot_loss(result.losses, out / "loss.png", f"apply selector, {args.model}: LoRA r={config.rank}, {config.steps} steps")
    examples = recorded.examples
    info = {
        "base_model": "SmolLM2-135M-Instruct (embedded)" if args.model == "default" else args.model,
        "command": command_line(args),
        "recipe": dict(vars(config)) | {"save_dtype": args.save_dtype, "max_tokens": args.max_tokens,
                                         "margin": args.margin},
        "data": {"cases": len(cases), "examples": len(examples), "dropped": recorded.too_long,
                 "styles": dict(Counter(case.style for case, _ in cases)),
                 "languages": dict(Counter(case.language for case, _ in cases)),
                 "aligner_wrong": sum(1 for e in examples if e.kind.endswith("/aligner-wrong")),
                 "with_instruction": sum(1 for _, instruction in cases if instruction),
                 "tokens_mean": sum(len(e.ids) for e in examples) / max(1, len(examples)),
                 "tokens_max": max((len(e.ids) for e in examples), default=0),
                 "targets_mean": sum(e.targets for e in examples) / max(1, len(examples))},
        "timing": {"threads": torch.get_num_threads(), "data_s": round(data_s, 1), "train_s": round(result.train_s, 1),
                   "seconds_per_step": result.train_s / max(1, result.steps_done)},
        "losses": [round(x, 5) for x in result.losses],
        "adapter_bytes": size,
    }
    (out / "training.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    write_apply_card(out, info)
    print(f"wrote the apply selector ({size:,} bytes), loss.png and CARD.md to {out}", file=sys.stderr)
    return 0
