"""What a program-mode step costs on llama.cpp: the base model (ar), the span selector as a
runtime LoRA, and the selector merged into the weights (engine.runtime.selector.gguf_merge, Q8_0 and the
base's own Q4_1), side by side in one run, plus how far each merged model's logits are from the
runtime LoRA's (the model program mode was measured with) on a teacher-forced sequence.

    .venv/bin/python scripts/measure_selector_step.py --threads 1 --steps 40 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from engine.core.tokens import encode
from engine.evaluation.corpora import load_corpus
from engine.runtime.backends import BackendOptions
from engine.runtime.backends.llamacpp import LlamaCppModel, LlamaCppRuntime
from engine.runtime.sources import default_gguf_path, load_tokenizer
from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR
from engine.runtime.selector.gguf_lora import gguf_lora_for
from engine.runtime.selector.gguf_merge import merged_gguf_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    options = BackendOptions(threads=args.threads, context_size=2048, prefix_cache_tokens=0)
    base_path = default_gguf_path()
    base = LlamaCppModel(base_path, options)
    runtimes = {
        "ar (base Q4_1)": LlamaCppRuntime(base),
        "runtime LoRA": LlamaCppRuntime(base, gguf_lora_for(SHIPPED_ADAPTER_DIR, base_path)),
        "merged Q8_0": LlamaCppRuntime(LlamaCppModel(merged_gguf_for(SHIPPED_ADAPTER_DIR, base_path, "q8_0"), options)),
        "merged Q4_1": LlamaCppRuntime(LlamaCppModel(merged_gguf_for(SHIPPED_ADAPTER_DIR, base_path, "same"), options)),
    }
    tok = load_tokenizer("default")
    case = load_corpus("humanevalfix-python")[0]
    prompt = encode(tok, case.instruction + "\n" + case.input)[:400]
    forced = encode(tok, case.gold)[:args.steps]
    times: dict[str, list[float]] = {name: [] for name in runtimes}
    logits: dict[str, torch.Tensor] = {}
    for r in range(args.rounds):
        order = list(runtimes.items())
        order = order[r % len(order):] + order[:r % len(order)]  # rotate: no runtime always goes first
        for name, runtime in order:
            session = runtime.session()
            session.append(prompt, "prefill")
            rows = []
            start = time.perf_counter()
            for t in forced:
                rows.append(session.append([t], "step"))
            times[name].append((time.perf_counter() - start) / len(forced))
            logits[name] = torch.stack(rows)
            session.close()
    ref = logits["runtime LoRA"]
    report = {}
    base_ms = min(times["ar (base Q4_1)"]) * 1e3
    for name, ts in times.items():
        ms = min(ts) * 1e3
        diff = float((logits[name] - ref).abs().max())
        agree = float((logits[name].argmax(-1) == ref.argmax(-1)).float().mean())
        report[name] = {"step_ms": round(ms, 2), "vs_ar": round(ms / base_ms, 3),
                        "max_logit_diff_vs_lora": round(diff, 4), "argmax_agreement_vs_lora": round(agree, 3)}
        print(f"{name:16s} {ms:7.2f} ms/step  {ms / base_ms:5.2f}x ar   max |logit - LoRA| {diff:7.3f}   "
              f"argmax agrees {agree:.0%}")
    for runtime in runtimes.values():
        runtime.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"threads": args.threads, "steps": len(forced), "rounds": args.rounds,
                       "prompt_tokens": len(prompt), "runtimes": report}, fh, indent=1)


if __name__ == "__main__":
    main()
