"""The adapter's card (CARD.md) and loss curve (loss.png), written next to the weights: where
the data came from, what was trained how, how long it took and how well it does."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from engine.runtime.selector.adapter import prompt_layout


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average (the raw per-step loss of batch-1 training is noisy)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_loss(losses: Sequence[float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    steps = list(range(1, len(losses) + 1))
    ax.plot(steps, losses, color="#bbbbbb", linewidth=0.8, label="per step")
    ax.plot(steps, smooth(losses, 20), color="#1f77b4", linewidth=1.6, label="mean of 20")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (chosen tokens)")
    ax.set_title(title, fontsize=9)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min ({seconds:.0f} s)"


def _placement(data: dict[str, Any]) -> str:
    """Where the training hints sit, when the data records it (older runs: always the changed line)."""
    placed = data.get("focus_placement")
    if not placed:
        return ""
    if not placed["near"] and not placed["away"]:
        return ": always on the first line the edit changes (`--exact-share 1.0`), as an oracle would place it"
    return (f": placed as an editor's cursor would be (engine/training/synth/cursor.py), on the first line the edit changes "
            f"in {placed['exact']}, 1-3 lines above or below it in {placed['near']}, and on a farther line the edit "
            f"does not touch in {placed['away']}; the gold never depends on the hint, so the data teaches \"look at "
            "and around line K\", never \"rewrite line K\"")


LAYOUTS = {
    "hint-after": "the focus sentence (\"The problem is at or near line K.\") follows the numbered input, so a "
                  "hintless prompt, the localizer's forward and a hint on any line share the whole input as a "
                  "prompt prefix (engine/decoding/prompt.py)",
    "hint-before": "the focus sentence precedes the numbered input (adapters trained before selector.json existed)",
}


def render_card(info: dict[str, Any], layout: str | None = None) -> str:
    """CARD.md from the run's record (``training.json``: data, recipe, timings, evaluation) and
    the adapter's prompt layout (selector.json)."""
    data, recipe, timing = info["data"], info["recipe"], info["timing"]
    out = [f"# Span selector for {info['base_model']}", "",
           "A LoRA adapter that makes the embedded model write edit programs (`<copy lines=\"I-J\"/>` and "
           "`<gen>…</gen>`) for copy-as-decode's program mode. It is used automatically with the embedded "
           "model in `mode=program` (setting `selector = \"auto\"`; `\"none\"` turns it off, a folder picks "
           "another adapter). Text modes keep the base model.", "",
           f"Made by: `{info['command']}`", "", "## Data", ""]
    sources = data.get("sources") or []
    if sources:
        out += [_table(["source", "language", "license", "functions mined", "train cases", "held-out cases"],
                       [(s["name"], s["language"], s["license"], s["functions"], s["train"], s["heldout"])
                        for s in sources]), ""]
    licenses = ", ".join(f"{k} {v}" for k, v in sorted((data.get("licenses") or {}).items()))
    out += ["All cases are synthetic edits with a mechanically correct gold, made on the machine "
            "(`engine/synth`): one injected bug (gold = the original function) or an instructed edit whose "
            "gold a program computes. The held-out split holds whole source files never trained on.", "",
            f"- training cases: {data['train_cases']} ({data['train_examples']} sequences trained on; "
            f"{data['too_long']} dropped as longer than {data['max_tokens']} tokens, {data['no_target']} with nothing to learn)",
            f"- training cases per license: {licenses or '?'}",
            f"- held-out cases: {data['heldout_cases']}",
            f"- decontamination: {data['decontaminated']} of {data.get('decontamination_checked', '?')} source functions "
            f"dropped for token 8-gram Jaccard similarity > 0.5 with an evaluation case "
            f"({data.get('decontamination_against', 'the evaluation corpora')}); "
            f"{data.get('heldout_leaks_dropped', '?')} more dropped as near-duplicates of held-out functions",
            f"- focus hint shown in {data['with_focus']} of {data['train_cases']} training cases{_placement(data)}",
            f"- tokens per sequence: mean {data['tokens_mean']:.0f}, max {data['tokens_max']}; "
            f"loss targets (model-chosen tokens) per sequence: mean {data['targets_mean']:.1f}", ""]
    kinds = data.get("kinds") or {}
    if kinds:
        out += ["Cases per edit kind:", "",
                _table(["kind", "train", "held-out"],
                       [(k, v.get("train", 0), v.get("heldout", 0)) for k, v in sorted(kinds.items())]), ""]
    languages = data.get("languages") or {}
    if languages:
        out += ["Training cases per language: " + ", ".join(f"{k} {v}" for k, v in sorted(languages.items())), ""]
    out += ["## Recipe", "",
            _table(["setting", "value"], [(k, f"`{v}`") for k, v in recipe.items()]), "",
            "Loss: next-token cross-entropy on model-chosen positions only (prompt, forced literals and "
            "spliced copy tokens are label -100). One sequence per micro-batch, AdamW, linear warm-up then "
            "cosine decay; LoRA dropout 0; the example order is a seeded function of the step.", "",
            *([f"Prompt layout: `{layout}`: {LAYOUTS.get(layout, '?')}.", ""] if layout else []),
            "## Training", "",
            f"- device: {timing['device']}, torch threads: {timing['threads']}",
            f"- recording the sequences through the program decoder: {_minutes(timing['record_s'])}",
            f"- training: {_minutes(timing['train_s'])} for {timing['steps_done']} steps "
            f"({timing['seconds_per_step']:.2f} s/step)",
            f"- loss: first 20 steps {timing['loss_first']:.3f}, last 20 steps {timing['loss_last']:.3f}",
            f"- adapter file: {info['adapter_bytes']:,} bytes ({info['adapter_dtype']})", "",
            "![loss curve](loss.png)", ""]
    evaluation = info.get("evaluation")
    out += ["## Evaluation (synthetic held-out split)", ""]
    if evaluation:
        rows = evaluation["rows"]
        out += [f"Greedy program mode through `Engine.edit` (transformers backend, fp32), {rows[0]['cases']} "
                f"held-out cases, max {evaluation['max_new_tokens']} new tokens; exact = output equals the gold "
                "byte for byte; valid = the program closed with `</program>`. Focus: none = no hint; near = a cursor "
                "near the bug (the first line the gold changes moved by a seeded offset in -3..+3, clipped: what an "
                "editor's AI fix sends, the hinted figure users get); oracle = exactly the first line the gold "
                "changes (an upper bound no user gives). As users get it: the hint goes to the localizer's best "
                "line (near the focus, if any) and a gen that writes that line back unchanged deviates, unless "
                "the model scores the deviation far below the no-op (engine/decoding/localize.py, engine/decoding/noop_gen.py; "
                f"focus policy `{evaluation.get('focus_policy', 'keep')}`). Collateral lines, wrong-line edits (only lines the gold "
                "keeps changed), syntax breaks and tail deletions as in the benchmarks (engine/evaluation/quality.py).",
                "",
                _table(["arm", "cases", "exact match", "valid programs", "token-limit runs", "loop stops",
                        "collateral lines", "wrong-line edits", "syntax breaks", "tail deletions",
                        "generated tokens (mean)", "time per edit (s)"],
                       [(r["arm"], r["cases"], f"{r['exact']} ({r['exact'] / max(1, r['cases']):.0%})",
                         f"{r['valid']} ({r['valid'] / max(1, r['cases']):.0%})", r["token_limit"], r["loop"],
                         r.get("collateral_lines", "-"), r.get("wrong_line", "-"), r.get("syntax_broken", "-"),
                         r.get("tail_deletions", "-"), r["generated_tokens_mean"], r["decode_s_mean"])
                        for r in rows]), "",
                f"Evaluated in {_minutes(evaluation['seconds'])}.", ""]
    else:
        out += ["Not evaluated yet: `copy-as-decode train-selector --eval-only` fills this table.", ""]
    notes = info.get("notes") or []
    if notes:  # what the run's figures alone do not say (kept in training.json, written by hand)
        out += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(out)


def write_card(folder: Path, info: dict[str, Any]) -> Path:

    path = Path(folder) / "CARD.md"
    path.write_text(render_card(info, prompt_layout(str(folder))), encoding="utf-8")
    return path
