"""What each program-mode request makes a vLLM server recompute (its prefix cache covers the rest).

Usage: .venv/bin/python scripts/measure_vllm_prefix_cache.py URL [--limit N] [--json PATH]

For each of the first N HumanEvalFix-Python cases, one program edit (the span selector when the
server serves it as the LoRA module "selector"), reading the server's /metrics before and after:
prompt tokens sent, of them read from the prefix cache, and so recomputed. Run it alone on the
server (other traffic would mix into the counters)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.api import EditRequest, Engine  # noqa: E402
from engine.backends import BackendOptions  # noqa: E402
from engine.corpora import load_corpus  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    engine = Engine.load("default", backend="vllm", options=BackendOptions(server_url=args.url))
    runtime = engine.model_for("program").runtime
    rows = []
    for case in load_corpus("humanevalfix-python")[:args.limit]:
        before = runtime.prefix_cache()
        result = engine.edit(EditRequest(case.input, case.instruction, mode="program", max_new_tokens=200,
                                         language=case.language))
        after = runtime.prefix_cache()
        sent = after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"]
        hits = after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"]
        requests = result.breakdown["requests"]
        rows.append({"case": case.id, "requests": requests, "prompt_tokens": result.prompt_tokens,
                     "copied": result.tokens.copied, "sent": sent, "cache_hits": hits, "recomputed": sent - hits,
                     "recomputed_after_first": sent - hits - result.prompt_tokens,
                     "stop": result.stop_reason})
        r = rows[-1]
        print(f"{case.id}: {requests} requests, {int(sent)} prompt tokens sent, {int(hits)} from the cache, "
              f"{int(r['recomputed_after_first'])} recomputed after the first request "
              f"({r['recomputed_after_first'] / max(1, requests - 1):.1f} per later request)", flush=True)
    later = sum(r["requests"] - 1 for r in rows)
    summary = {"cases": len(rows), "requests": sum(r["requests"] for r in rows),
               "recomputed_per_later_request": sum(r["recomputed_after_first"] for r in rows) / max(1, later),
               "cache_hit_rate": sum(r["cache_hits"] for r in rows) / max(1, sum(r["sent"] for r in rows)),
               "selector": runtime.request_model}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows, "command":
                                         "python scripts/measure_vllm_prefix_cache.py " + " ".join(sys.argv[1:])},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
