"""What a llama.cpp forward of N tokens costs, and whether its rows equal one-token steps, by N:
the base GGUF (ar) and the merged selector GGUF (program mode), after ``--context-tokens`` of
context (200), every row's logits asked for (a verify). Each size: the median of ``--rounds``
timings, and the largest difference between the forward's rows and the same tokens stepped one
at a time.

It shows the facts the engine acts on (docs/backends.md, "Flash attention and exact verifies"). With
flash attention on, on this CPU: a forward of 64 rows or more costs about half as much a token as
a shorter one (so a short prompt chunk runs padded: engine.runtime.cost.CostModel.plan_padding) and
rounds differently from steps (so a speculative verify stays within 63 rows:
engine.runtime.backends.llamacpp.exact_rows). With it off (the CPU's default): a step and every forward
below 64 rows are cheaper, and from 2-4 rows on no forward's rows equal the steps where llama.cpp
was built with llamafile's sgemm (its default on x86); built without it, every row equals the
steps at every size.

    .venv/bin/python scripts/measure_forward_sizes.py --threads 1 --flash-attention on --json results/backends/forward_sizes_llamacpp.json
    .venv/bin/python scripts/measure_forward_sizes.py --threads 1 --flash-attention off --context-tokens 900 --json results/backends/forward_sizes_llamacpp_flash_off_900.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from engine.commands.bench import flags
from engine.core.tokens import encode
from engine.evaluation.corpora import load_corpus
from engine.runtime.backends import BackendOptions
from engine.runtime.backends.llamacpp import LlamaCppModel, LlamaCppRuntime
from engine.runtime.cost import CostModel
from engine.runtime.sources import default_gguf_path, load_tokenizer
from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR
from engine.runtime.selector.gguf_merge import merged_gguf_for

SIZES = (1, 8, 16, 24, 32, 40, 48, 56, 60, 62, 63, 64, 65, 72, 96, 127, 128, 192, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    flags(ap, "flash_attention")
    ap.add_argument("--context-tokens", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    options = BackendOptions(threads=args.threads, context_size=2048, prefix_cache_tokens=0,
                             flash_attention=args.flash_attention)
    base_path = default_gguf_path()
    runtimes = {
        "base (ar)": LlamaCppRuntime(LlamaCppModel(base_path, options)),
        "merged selector (program)": LlamaCppRuntime(LlamaCppModel(merged_gguf_for(SHIPPED_ADAPTER_DIR, base_path),
                                                                   options)),
    }
    tok = load_tokenizer("default")
    text = "\n".join(case.input for case in load_corpus("humanevalfix-python")[:80])
    ids = encode(tok, text)
    n = args.context_tokens
    context, tokens = ids[:n], ids[n:n + max(sizes)]
    report: dict = {"command": "scripts/measure_forward_sizes.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None and k != "json"), "models": {}}
    for name, runtime in runtimes.items():
        runtime.cost = CostModel.fixed({})  # no padding: each size as it is
        steps = runtime.session()
        steps.append(context, "prefill")
        stepped = torch.stack([steps.append([t], "step") for t in tokens])
        steps.close()
        rows = {}
        for n in sizes:
            seconds, diff = [], 0.0
            for _ in range(args.rounds):
                session = runtime.session()
                session.append(context, "prefill")
                start = time.perf_counter()
                out = session.append(tokens[:n], "verify", all_logits=True)
                seconds.append(time.perf_counter() - start)
                diff = float((out - stepped[:n]).abs().max())
                session.close()
            ms = 1e3 * statistics.median(seconds)
            rows[n] = {"ms": round(ms, 1), "ms_per_token": round(ms / n, 2), "max_logit_diff_vs_steps": diff}
            print(f"{name:28s} {n:4d} tokens {ms:8.1f} ms  {ms / n:6.2f} ms/token  rows vs steps: {diff:.3g}",
                  flush=True)
        report["models"][name] = rows
        runtime.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
