"""The selector's held-out evaluation (train-selector --eval-only's cases and counters) once per
focus policy (engine.decoding.localize.plan_focus), so two policies compare on the same cases and decoder.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/eval_focus_policies.py keep,guard none,near,oracle OUT.json
"""

from __future__ import annotations

import json
import sys
import time

import torch

from engine.api import Engine
from engine.training.selector.evaluate import evaluate
from engine.training.synth import build_dataset


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    policies, focuses, out = argv[0].split(","), argv[1].split(","), argv[2]
    torch.set_num_threads(1)
    engine = Engine.load("default", selector="auto", backend="transformers")  # as --eval-only loads it
    cases = build_dataset(0, 80, seed=0).heldout[:40]  # train-selector's defaults: --heldout 80 --data-seed 0
    rows = []
    for policy in policies:
        for focus in focuses:
            started = time.perf_counter()
            row = evaluate(engine, cases, f"{policy} {focus}", focus, 256, policy=policy).as_dict()
            row.update(policy=policy, seconds=round(time.perf_counter() - started, 1))
            print(json.dumps(row), flush=True)
            rows.append(row)
    command = "OMP_NUM_THREADS=1 .venv/bin/python scripts/eval_focus_policies.py " + " ".join(argv)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"rows": rows, "command": command}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
