"""Cost-aware drafting, before and after, side by side in one run (one backend, rotated arm order).

Every drafted arm runs twice per case: with the runtime's learned cost model (the engine's
behaviour now) and without one (``runtime.cost = None``: the drafter's size schedule alone, the
engine's behaviour before cost-aware drafting). Forced family: the text arms decode the gold
through the bench's ``teacher_forced`` (the engine's decode loop, the gold as teacher), the
program arms run forced mode on the line oracle (``engine_arm``), exactly as ``copy-as-decode
bench edits --family forced`` does. Free family: the model decides (``Engine.edit``). Decode
seconds exclude the prompt's prefill; ratios
are against ar (and the program arms against program-undrafted). The learned s(N) and the draft
sizes the policy chose are printed at the end.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_cost_policy.py --backend llamacpp --threads 1 \\
        --family forced --limit 10 --json results/backends/cost_policy_forced_llamacpp.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from engine.api import EditRequest, Engine
from engine.bench.edits import engine_arm, teacher_forced, text_prompt_ids
from engine.core.tokens import encode
from engine.decoding.tables import tables_for
from engine.evaluation.corpora import load_corpus
from engine.language.oracle import line_oracle
from engine.runtime.backends import BackendOptions

FORCED = ("ar", "speculative", "speculative-uncosted", "program-undrafted", "program-drafted",
          "program-drafted-uncosted")
FREE = ("ar", "speculative", "speculative-uncosted", "program-undrafted", "program", "program-uncosted")


def run_arm(engine: Engine, family: str, case: Any, arm: str) -> dict[str, Any]:
    mode = arm.split("-")[0]
    loaded = engine.model_for("program" if mode == "program" else "ar")
    learned = loaded.runtime.cost
    if arm.endswith("-uncosted"):
        loaded.runtime.cost = None
    try:
        if family == "forced" and mode != "program":
            tok = loaded.tokenizer
            run = teacher_forced(loaded, mode, text_prompt_ids(tok, case), encode(tok, case.gold),
                                 encode(tok, case.input), tables_for(loaded).stop_ids)
            output = None
        else:
            draft = "undrafted" not in arm
            if family == "forced":
                request = EditRequest(case.input, case.instruction, mode="forced",
                                      program=line_oracle(case.input, case.gold), max_new_tokens=1 << 16, draft=draft)
            else:
                cap = int(1.5 * len(encode(loaded.tokenizer, case.input))) + 64
                request = EditRequest(case.input, case.instruction, mode=mode, max_new_tokens=cap, draft=draft)
            run, result = engine_arm(engine, request)
            output = result.raw_output
    finally:
        loaded.runtime.cost = learned
    b = run.breakdown
    return {"decode_s": run.decode_s, "drafted": b.get("drafted_tokens", 0), "accepted": b.get("draft_accepted", 0),
            "verify_calls": b.get("verify_calls", 0), "output": output}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="llamacpp", choices=("transformers", "llamacpp"))
    ap.add_argument("--threads", type=int, default=1, help="0: the backend's default")
    ap.add_argument("--family", default="forced", choices=("forced", "free"))
    ap.add_argument("--corpus", default="humanevalfix-python")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.backend == "transformers" and args.threads:
        import torch

        torch.set_num_threads(args.threads)
    engine = Engine.load("default", backend=args.backend, options=BackendOptions(threads=args.threads or 0))
    engine.prime()
    arms = FORCED if args.family == "forced" else FREE
    cases = load_corpus(args.corpus)[:args.limit]
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    mismatches: list[str] = []
    for index, case in enumerate(cases):
        order = arms[index % len(arms):] + arms[:index % len(arms)]
        outputs = {}
        for arm in order:
            got = run_arm(engine, args.family, case, arm)
            outputs[arm] = got.pop("output")
            for key, value in got.items():
                totals[arm][key] += value
        for a, b in (("speculative", "speculative-uncosted"), ("program", "program-uncosted"),
                     ("program", "program-undrafted")):
            if a in outputs and outputs[a] is not None and outputs[a] != outputs.get(b):
                mismatches.append(f"{case.id}: {a} != {b}")
        print(f"case {index + 1}/{len(cases)} {case.id}", flush=True)
    ar = totals["ar"]["decode_s"]
    undrafted = totals["program-undrafted"]["decode_s"]
    report: dict[str, Any] = {"backend": args.backend, "threads": args.threads, "family": args.family,
                              "corpus": args.corpus, "cases": len(cases), "arms": {}, "mismatches": mismatches}
    print(f"\n{args.backend}, {args.threads} thread(s), {args.family} family, {args.corpus}, {len(cases)} cases")
    print(f"{'arm':26s} {'decode s':>9s} {'vs ar':>7s} {'vs undrafted':>13s} {'drafted':>8s} {'accepted':>9s}")
    for arm in arms:
        t = totals[arm]
        row = {"decode_s": round(t["decode_s"], 3), "vs_ar": round(ar / t["decode_s"], 3),
               "vs_program_undrafted": round(undrafted / t["decode_s"], 3) if arm.startswith("program") else None,
               "drafted": int(t["drafted"]), "accepted": int(t["accepted"]), "verify_calls": int(t["verify_calls"])}
        report["arms"][arm] = row
        vs_u = f"{row['vs_program_undrafted']:.2f}x" if row["vs_program_undrafted"] else ""
        print(f"{arm:26s} {t['decode_s']:9.2f} {row['vs_ar']:6.2f}x {vs_u:>13s} {row['drafted']:8d} "
              f"{row['accepted']:9d}")
    for name, mode in (("text model", "ar"), ("program model", "program")):
        cost = engine.model_for(mode).runtime.cost
        report[f"s(N) {name}"] = cost.table()
        print(f"s(N), {name}: {cost.table()}  (one-token step {1e3 * (cost.step_seconds() or 0):.1f} ms)")
    print("outputs: identical" if not mismatches else f"outputs differ: {mismatches}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
