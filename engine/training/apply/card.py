"""The apply selector's card (CARD.md), written next to its weights from ``training.json``: what
it is for, where its data came from, the recipe, what training cost, and where it is evaluated."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_apply_card(out: Path, info: dict[str, Any]) -> None:
    data, recipe, timing = info["data"], info["recipe"], info["timing"]
    rows = "\n".join(f"| {style} | {count} |" for style, count in sorted(data["styles"].items()))
    languages = ", ".join(f"{language} {count}" for language, count in sorted(data["languages"].items()))
    losses = info["losses"]
    first, last = losses[:20], losses[-20:]
    text = f"""# Apply selector for {info['base_model']}

A LoRA adapter that teaches the model to merge an update (code written elsewhere, with
`... existing code ...` markers or without) into a file by writing an apply program: copies of
the file's lines and of the update's, gens for what neither holds (engine/apply). The aligner's
program is the draft the model verifies; where the adapted model writes otherwise, its choice
stands. The span selector next to it (`../smollm2-135m`) is the edit job's.

## Data

Synthetic apply cases (engine/training/apply): files cut from the Python standard library, the
VS Code client's npm dependencies (JavaScript/TypeScript) and the C sources and headers installed
with Python packages; never this repository's code, the three C files the benchmark cuts its
held-out cases from, or the evaluation corpora (../shared/data). Each case makes one kind of
change and writes the update in one style; the gold is the file with the change made.

- {data['cases']} cases ({languages}); {data['with_instruction']} with an instruction.
- {data['examples']} training sequences (one per window of {recipe['margin']} lines' margin around each
  change; {data['dropped']} dropped as longer than {recipe['max_tokens']} tokens or not recordable), mean
  {data['tokens_mean']:.0f} tokens (max {data['tokens_max']}), {data['targets_mean']:.1f} of them chosen
  by the model (the loss falls on those only).
- {data['aligner_wrong']} sequences come from cases the rule-based aligner merges wrongly: there the
  oracle program is built from the gold, not from the aligner.

| style | cases |
|---|---|
{rows}

## Recipe

`{info['command']}`

LoRA rank {recipe['rank']}, alpha {recipe['alpha']}, on {recipe['target_modules']}, {recipe['steps']} steps of one
sequence, learning rate {recipe['lr']} (warm-up {recipe['warmup_steps']} steps, cosine to
{recipe['min_lr_ratio']}x), saved in {recipe['save_dtype']}: {info['adapter_bytes']:,} bytes.

Loss (chosen tokens): {sum(first) / max(1, len(first)):.3f} over the first 20 steps, {sum(last) / max(1, len(last)):.3f}
over the last 20 (loss.png).

## Cost

{timing['train_s'] / 60:.1f} min of training ({timing['seconds_per_step']:.2f} s a step) on {timing['threads']} CPU
threads, after {timing['data_s']:.0f} s building and recording the data.

## Evaluation

On held-out cases no training case is cut from: `copy-as-decode bench apply` (docs/benchmarks.md#apply,
results/apply/).
"""
    (out / "CARD.md").write_text(text, encoding="utf-8")
