"""LoRA training of the span selector: seeded, deterministic on the CPU, resumable.

Determinism: the LoRA init is seeded, dropout is 0, and the example order is a pure function of
(seed, step), so a run resumed from a checkpoint (adapter tensors, optimizer state, RNG state,
step and loss history) continues exactly as the uninterrupted run would (on the same device and
thread count; CUDA kernels are not bit-reproducible in general).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from engine.runtime.selector.adapter import adapter_state
from engine.training.selector.dataset import IGNORE, TrainExample, examples_fingerprint

CHECKPOINT = "checkpoint"
_TRAINABLE = "trainable.safetensors"
_OPTIMIZER = "optimizer.pt"
_STATE = "state.json"


class CheckpointMismatch(RuntimeError):
    """``--resume`` with a checkpoint made by another recipe or other data."""


@dataclass(frozen=True)
class TrainConfig:
    """The recipe. ``steps`` optimizer steps of ``grad_accum`` sequences each; the learning rate
    warms up linearly for ``warmup_steps`` and then follows a cosine down to ``min_lr_ratio * lr``."""

    steps: int = 640
    lr: float = 3e-4
    warmup_steps: int = 30
    min_lr_ratio: float = 0.1
    rank: int = 16
    alpha: int = 32
    target_modules: str = "all-linear"
    seed: int = 0
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0


@dataclass(frozen=True)
class StepInfo:
    """What a progress display needs after each optimizer step."""

    step: int  # 1-based, steps done so far
    steps: int
    loss: float
    lr: float
    step_s: float
    train_s: float  # training time so far, over every resumed run
    eta_s: float  # to the end of the recipe, at this run's mean step time


@dataclass
class TrainResult:
    peft_model: Any
    losses: list[float]
    lrs: list[float]
    train_s: float
    steps_done: int
    resumed_at: int  # step the run started from (0 unless resumed)
    seconds_per_step: float  # mean over the steps this run did (nan if none)
    finished: bool
    checkpoints: list[int] = field(default_factory=list)


def lr_at(step: int, config: TrainConfig) -> float:
    """Learning rate of 0-based optimizer step ``step``."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


class ExampleOrder:
    """Example index of the k-th sequence: a fresh seeded shuffle per pass over the data."""

    def __init__(self, n: int, seed: int):
        if n < 1:
            raise ValueError("training needs at least one example")
        self.n, self.seed = n, seed
        self._perms: dict[int, list[int]] = {}

    def __call__(self, k: int) -> int:
        epoch, i = divmod(k, self.n)
        if epoch not in self._perms:
            perm = list(range(self.n))
            random.Random(f"{self.seed}:{epoch}").shuffle(perm)
            self._perms = {epoch: perm}
        return self._perms[epoch][i]


def lora_model(model: Any, config: TrainConfig) -> Any:
    """Wrap ``model`` with fresh LoRA layers (seeded init); only they are trainable."""
    import torch
    from peft import LoraConfig, get_peft_model

    targets: Any = config.target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    lora = LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=0.0, bias="none",
                      target_modules=targets, task_type="CAUSAL_LM")
    torch.manual_seed(config.seed)
    with warnings.catch_warnings():  # peft asks transformers a deprecated question (is_gradient_checkpointing)
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*gradient_checkpointing.*")
        return get_peft_model(model, lora)


def example_loss(model: Any, example: TrainExample) -> Any:
    """Mean next-token cross-entropy over the example's chosen positions (labels != -100).

    Only the positions that predict a chosen token go through the LM head (``logits_to_keep``
    with their indices): ~30 of ~450 per sequence, which saves the full-vocabulary logits (and
    their gradient) of every prompt and copied position. Same value as transformers' shifted
    causal-LM loss with ignore index -100.
    """
    import torch

    device = next(model.parameters()).device
    targets = [i for i in range(1, len(example.labels)) if example.labels[i] != IGNORE]
    if not targets:
        raise ValueError("example has no chosen token to learn")
    ids = torch.tensor([list(example.ids)], dtype=torch.long, device=device)
    keep = torch.tensor([i - 1 for i in targets], dtype=torch.long, device=device)
    labels = torch.tensor([example.labels[i] for i in targets], dtype=torch.long, device=device)
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits[0].float()
    return torch.nn.functional.cross_entropy(logits, labels)


def train_adapter(model: Any, examples: Sequence[TrainExample], config: TrainConfig, work_dir: Path,
                  resume: bool = False, checkpoint_every: int = 25, stop_after: int | None = None,
                  on_step: Callable[[StepInfo], None] | None = None) -> TrainResult:
    """Train LoRA layers on ``model`` (changed in place: it is wrapped by peft).

    A checkpoint is written to ``work_dir/checkpoint`` every ``checkpoint_every`` steps, at the
    end, when ``stop_after`` steps are done (a time-boxed run) and on Ctrl-C. ``resume`` continues
    from it; it must come from the same recipe and examples (else :class:`CheckpointMismatch`).
    """
    import torch

    work_dir = Path(work_dir)
    peft_model = lora_model(model, config)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    fingerprint = examples_fingerprint(examples)
    losses: list[float] = []
    lrs: list[float] = []
    train_s = 0.0
    start = 0
    if resume:
        start, losses, lrs, train_s = _load_checkpoint(work_dir / CHECKPOINT, peft_model, optimizer, config, fingerprint)
    order = ExampleOrder(len(examples), config.seed)
    end = config.steps if stop_after is None else min(config.steps, stop_after)
    run_seconds: list[float] = []
    checkpoints: list[int] = []
    step = start
    saved_at = start

    def checkpoint() -> None:
        nonlocal saved_at
        _save_checkpoint(work_dir, peft_model, optimizer, config, fingerprint, step, losses, lrs, train_s)
        saved_at = step
        checkpoints.append(step)

    peft_model.train()
    try:
        while step < end:
            t0 = time.perf_counter()
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for micro in range(config.grad_accum):
                loss = example_loss(peft_model, examples[order(step * config.grad_accum + micro)])
                (loss / config.grad_accum).backward()
                total += float(loss.detach()) / config.grad_accum
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            step += 1
            elapsed = time.perf_counter() - t0
            run_seconds.append(elapsed)
            train_s += elapsed
            losses.append(total)
            lrs.append(lr)
            if on_step is not None:
                mean = sum(run_seconds) / len(run_seconds)
                on_step(StepInfo(step, config.steps, total, lr, elapsed, train_s, mean * (config.steps - step)))
            if checkpoint_every > 0 and step % checkpoint_every == 0:
                checkpoint()
    except KeyboardInterrupt:
        if step > saved_at:
            checkpoint()
        raise
    if step > saved_at or not (work_dir / CHECKPOINT).is_dir():
        checkpoint()
    peft_model.eval()
    return TrainResult(peft_model=peft_model, losses=losses, lrs=lrs, train_s=train_s, steps_done=step,
                       resumed_at=start, seconds_per_step=sum(run_seconds) / len(run_seconds) if run_seconds else math.nan,
                       finished=step >= config.steps, checkpoints=checkpoints)


def _save_checkpoint(work_dir: Path, peft_model: Any, optimizer: Any, config: TrainConfig, fingerprint: str,
                     step: int, losses: list[float], lrs: list[float], train_s: float) -> None:
    """Write the checkpoint to a fresh folder, then swap it in (a crash never leaves half of one)."""
    import torch
    from safetensors.torch import save_file


    work_dir.mkdir(parents=True, exist_ok=True)
    ignore = work_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# training checkpoints and recordings: never committed\n*\n")
    final, tmp, old = work_dir / CHECKPOINT, work_dir / f".{CHECKPOINT}.tmp", work_dir / f".{CHECKPOINT}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(adapter_state(peft_model), str(tmp / _TRAINABLE))
    torch.save({"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}, tmp / _OPTIMIZER)
    state = {"step": step, "losses": losses, "lrs": lrs, "train_s": train_s, "config": asdict(config),
             "examples": fingerprint}
    (tmp / _STATE).write_text(json.dumps(state) + "\n", encoding="utf-8")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def read_checkpoint_state(folder: Path) -> dict[str, Any] | None:
    """The checkpoint's ``state.json`` (step, losses, config), or None when there is none."""
    path = Path(folder) / _STATE
    if not path.is_file():
        old = Path(folder).with_name(f".{CHECKPOINT}.old") / _STATE  # crash between the two renames
        if not old.is_file():
            return None
        path = old
    return json.loads(path.read_text(encoding="utf-8"))


def _load_checkpoint(folder: Path, peft_model: Any, optimizer: Any, config: TrainConfig,
                     fingerprint: str) -> tuple[int, list[float], list[float], float]:
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    state = read_checkpoint_state(folder)
    if state is None:
        raise CheckpointMismatch(f"--resume: no checkpoint in {folder}; run without --resume to start")
    if not (folder / _STATE).is_file():
        folder = folder.with_name(f".{CHECKPOINT}.old")
    if state["config"] != asdict(config):
        changed = sorted(k for k, v in asdict(config).items() if state["config"].get(k) != v)
        raise CheckpointMismatch(f"--resume: the checkpoint in {folder} was made with other settings "
                                 f"({', '.join(changed)}); use the same options or another --work-dir")
    if state["examples"] != fingerprint:
        raise CheckpointMismatch(f"--resume: the checkpoint in {folder} was trained on other examples; "
                                 "use the same data options or another --work-dir")
    device = next(peft_model.parameters()).device
    result = set_peft_model_state_dict(peft_model, load_file(str(folder / _TRAINABLE), device=str(device)))
    if getattr(result, "unexpected_keys", None):
        raise CheckpointMismatch(f"--resume: checkpoint tensors do not match the model ({result.unexpected_keys[:2]})")
    saved = torch.load(folder / _OPTIMIZER, map_location=device, weights_only=True)
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["torch_rng"])
    if saved["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda_rng"])
    return int(state["step"]), list(state["losses"]), list(state["lrs"]), float(state["train_s"])
