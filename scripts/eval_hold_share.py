"""Choose the ``hold`` focus policy's share (engine.decoding.localize.HOLD_SHARE) on whole corpora
without decoding again: per case and cursor (on the bug, near it), the localizer's share of the
cursor line (one forward), joined with a stored bench run that has both the ``-keep`` and the
``-guard`` arms of those cursors. ``hold`` writes keep's edit where the share reaches the threshold
and guard's elsewhere, so its outcome per case is read off those arms (the stored run's adapter
decoded them; the shares come from the adapter shipped now).

    OMP_NUM_THREADS=1 python scripts/eval_hold_share.py CORPUS STORED.json OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

from engine.api import Engine
from engine.decoding.localize import forget_surprises, plan_focus
from engine.decoding.prompt import PromptParts
from engine.evaluation.corpora import load_corpus

THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
CURSORS = {"on": "oracle", "near": "near"}  # cursor -> the stored run's arm infix and focus key


def shares(corpus: str, stored: dict) -> list[dict]:
    engine = Engine.load("default", selector="auto", backend="transformers")
    loaded = engine.model_for("program")
    cases = {c.id: c for c in load_corpus(corpus)}
    rows = []
    for rec in stored["per_case"]:
        case = cases[rec["id"]]
        for cursor, key in CURSORS.items():
            line = (rec.get("focus") or {}).get(key)
            if line is None:
                continue
            forget_surprises(loaded.runtime)
            parts = PromptParts(instruction=case.instruction, region=case.input, language=case.language,
                                focus_line=line)
            plan = plan_focus(loaded, parts, policy="guard")
            arms = rec["arms"]
            keep, guard = arms[f"program-{key}-keep"], arms[f"program-{key}-guard"]
            rows.append({"id": rec["id"], "cursor": cursor, "line": line, "best": plan.hint,
                         "share": plan.cursor_share,
                         "keep": {k: keep.get(k) for k in ("test", "exact")} | {"collateral": keep["collateral"]["lines"]},
                         "guard": {k: guard.get(k) for k in ("test", "exact")} | {"collateral": guard["collateral"]["lines"]}})
    return rows


def table(rows: list[dict]) -> list[dict]:
    out = []
    for t in THRESHOLDS:
        for cursor in ("on", "near", "mix"):
            chosen = [r["keep"] if (r["share"] is not None and r["share"] >= t) else r["guard"]
                      for r in rows if cursor == "mix" or r["cursor"] == cursor]
            out.append({"threshold": t, "cursor": cursor, "cases": len(chosen),
                        "pass": sum(c["test"] == "pass" for c in chosen), "exact": sum(bool(c["exact"]) for c in chosen),
                        "collateral": sum(c["collateral"] for c in chosen)})
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    corpus, stored_path, out = argv
    torch.set_num_threads(1)
    with open(stored_path, encoding="utf-8") as f:
        stored = json.load(f)
    rows = shares(corpus, stored)
    summary = table(rows)
    for row in summary:
        print(json.dumps(row))
    command = "OMP_NUM_THREADS=1 python scripts/eval_hold_share.py " + " ".join(argv)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"command": command, "stored": stored_path, "summary": summary, "per_case": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
