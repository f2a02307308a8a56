"""What each program-mode request makes a vLLM server recompute (its prefix cache covers the rest).

Usage: .venv/bin/python scripts/measure_vllm_prefix_cache.py URL [--limit N] [--json PATH]

For each of the first N HumanEvalFix-Python cases, one program edit (the span selector when the
server serves it as the LoRA module "selector"), reading the server's /metrics before and after
every request: for each request after the first, the prompt tokens the server recomputed beyond
the ones the client appended (the copied lines and forced literals): the cost of caching whole
KV blocks only. Run it alone on the server (other traffic would mix into the counters)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.api import EditRequest, Engine  # noqa: E402
from engine.evaluation.corpora import load_corpus  # noqa: E402
from engine.runtime.backends import BackendOptions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    engine = Engine.load("default", backend="vllm", options=BackendOptions(server_url=args.url))
    runtime = engine.model_for("program").runtime
    per_request: list[dict] = []
    original = runtime.stream_completion

    def metered(prompt_ids, max_tokens, cancelled, **extra):
        """One request, with the server's counters read before and after it."""
        before = runtime.prefix_cache()
        generated = 0
        try:
            for ids, finish in original(prompt_ids, max_tokens, cancelled, **extra):
                generated += len(ids)
                yield ids, finish
        finally:  # the decoder stops reading at a forced literal: count the request all the same
            time.sleep(0.2)  # let the server finish the aborted request before reading its counters
            after = runtime.prefix_cache()
            per_request.append({"prompt": len(prompt_ids), "generated": generated,
                                "sent": after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"],
                                "hits": after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"]})

    runtime.stream_completion = metered
    rows = []
    for case in load_corpus("humanevalfix-python")[:args.limit]:
        per_request.clear()
        result = engine.edit(EditRequest(case.input, case.instruction, mode="program", max_new_tokens=200,
                                         language=case.language))
        # For a later request the server has already seen the previous prompt and what it generated
        # for it; what is new is what the client appended (copied lines, forced literals). Anything
        # else it recomputes is the price of caching whole blocks only.
        extra = []
        for prev, cur in zip(per_request, per_request[1:]):
            appended = cur["prompt"] - (prev["prompt"] + prev["generated"])
            extra.append(cur["sent"] - cur["hits"] - max(0, appended))
        rows.append({"case": case.id, "requests": len(per_request), "prompt_tokens": result.prompt_tokens,
                     "copied": result.tokens.copied, "stop": result.stop_reason, "per_request": per_request[:],
                     "extra_recomputed": extra})
        print(f"{case.id}: {len(per_request)} requests, extra tokens recomputed per later request: {extra}",
              flush=True)
    extras = [x for r in rows for x in r["extra_recomputed"]]
    summary = {"cases": len(rows), "requests": sum(r["requests"] for r in rows),
               "later_requests": len(extras), "extra_recomputed_mean": sum(extras) / max(1, len(extras)),
               "extra_recomputed_max": max(extras, default=0), "block_size": 32,
               "selector": runtime.request_model}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows, "command":
                                         "python scripts/measure_vllm_prefix_cache.py " + " ".join(sys.argv[1:])},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
