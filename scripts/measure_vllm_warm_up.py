"""A fix on a vLLM server, cold and after a warm-up (what the language server sends while a buffer
is idle: engine.api.Engine.read_ahead, which on a server reads the prompt only).

Usage: .venv/bin/python scripts/measure_vllm_warm_up.py URL [--rounds N] [--json PATH]

Per round, two fresh buffers (the editor benchmark's 102-line function cut to its first 60 lines,
with a distinct comment on top, so no cache holds them): one fixed cold, one fixed after its
warm-up; program mode, the cursor on the bug, arms alternating first. Reported per fix: the
time, and the server's counters (/metrics) for the warm-up and for the fix: prompt tokens sent
and prefix-cache hits. Run it alone on the server (other traffic would mix into the counters)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_editor_session import buggy_function  # noqa: E402

from engine.api import EditRequest, Engine  # noqa: E402
from engine.runtime.backends import BackendOptions  # noqa: E402


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    engine = Engine.load("default", backend="vllm", options=BackendOptions(server_url=args.url))
    runtime = engine.model_for("program").runtime
    buggy, _fixed, line = buggy_function()
    base = "".join(buggy.splitlines(keepends=True)[:60])  # the bug is on line 43
    engine.edit(EditRequest("# warm the server up\n" + base, "Fix the bug", mode="program", max_new_tokens=8))
    rows = []
    for k in range(args.rounds):
        for arm in (("cold", "warmed") if k % 2 == 0 else ("warmed", "cold")):
            request = EditRequest(f"# round {k}, {arm}\n" + base, "Fix the bug", mode="program", max_new_tokens=48,
                                  focus_line=line + 2, language="python")
            c0 = runtime.prefix_cache()
            warm = engine.read_ahead(request) if arm == "warmed" else None
            c1 = runtime.prefix_cache()
            start = time.perf_counter()
            result = engine.edit(request)
            seconds = time.perf_counter() - start
            c2 = runtime.prefix_cache()
            row = {"round": k, "arm": arm, "fix_s": round(seconds, 3), "program": result.program.serialize(),
                   "warm_up": None if warm is None else {"status": warm.status, "forwarded": warm.forwarded,
                                                         "server": _delta(c0, c1)},
                   "fix_server": _delta(c1, c2)}
            rows.append(row)
            print(f"round {k} {arm:6s} fix {seconds:6.2f}s  prompt tokens sent {row['fix_server']['prompt_tokens_total']:.0f}"
                  f"  prefix hits {row['fix_server']['prefix_cache_hits_total']:.0f}", flush=True)
    cold = [r["fix_s"] for r in rows if r["arm"] == "cold"]
    warmed = [r["fix_s"] for r in rows if r["arm"] == "warmed"]
    summary = {"cold_median_s": statistics.median(cold), "warmed_median_s": statistics.median(warmed),
               "warmed_over_cold": round(statistics.median(warmed) / statistics.median(cold), 3)}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"command": "python scripts/measure_vllm_warm_up.py URL " +
                                         " ".join(sys.argv[2:]), "summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
