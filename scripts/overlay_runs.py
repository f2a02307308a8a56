"""Whole-corpus figures after a decoder change that can only alter some cases: a stored free-family
``bench edits`` run (BASE, the code before the change reproduces its programs) with the cases of
newer runs (AFTER...) put in their place; per arm pass, exact, collateral lines, syntax breaks and
near-copy insertions, before and after. ``ARM=STORED`` maps a newer arm to the stored one
(program-cursor-on=program-oracle: the same focus line).

    python scripts/overlay_runs.py OUT.json BASE.json AFTER.json... [--map ARM=STORED,...]
"""

from __future__ import annotations

import json
import sys
from typing import Any

from engine.evaluation.corpora import load_corpus
from engine.evaluation.quality import near_copy_insertions
from engine.language.program import ProgramSyntaxError, parse
from engine.language.resolve import ResolveError, resolve


def inserted(case: Any, entry: dict[str, Any]) -> bool:
    if "near_copy_insertions" in entry:
        return entry["near_copy_insertions"] > 0
    try:
        return near_copy_insertions(case.input, resolve(parse(entry.get("raw_output_head", "")), case.input).text) > 0
    except (ProgramSyntaxError, ResolveError):
        return False


def counts(records: dict[str, dict], arm: str, cases: dict[str, Any]) -> dict[str, int]:
    entries = [(cases[i], r["arms"][arm]) for i, r in records.items() if arm in r["arms"]]
    return {"cases": len(entries), "pass": sum(e.get("test") == "pass" for _, e in entries),
            "exact": sum(bool(e.get("exact")) for _, e in entries),
            "collateral_lines": sum(e["collateral"]["lines"] for _, e in entries),
            "syntax_broken": sum(bool(e.get("syntax_broken")) for _, e in entries),
            "near_copy_insertions": sum(inserted(c, e) for c, e in entries)}


def main(argv: list[str]) -> int:
    mapping: dict[str, str] = {}
    if "--map" in argv:
        i = argv.index("--map")
        mapping = dict(pair.split("=", 1) for pair in argv[i + 1].split(","))
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, base_path, after_paths = argv[0], argv[1], argv[2:]
    with open(base_path, encoding="utf-8") as f:
        base = json.load(f)
    cases = {c.id: c for c in load_corpus(base["corpus"])}
    before = {r["id"]: r for r in base["per_case"]}
    after = {i: {"arms": dict(r["arms"])} for i, r in before.items()}
    replaced: list[str] = []
    for path in after_paths:
        with open(path, encoding="utf-8") as f:
            for rec in json.load(f)["per_case"]:
                for arm, entry in rec["arms"].items():
                    stored = mapping.get(arm, arm)
                    if stored in after[rec["id"]]["arms"] and arm != "ar":
                        after[rec["id"]]["arms"][stored] = entry
                replaced.append(rec["id"])
    arms = [a for a in base["settings"]["arms"] if a != "ar"]
    result = {"command": "python scripts/overlay_runs.py " + " ".join(sys.argv[1:]), "base": base_path,
              "after_runs": after_paths, "replaced_cases": sorted(set(replaced)),
              "arms": {a: {"before": counts(before, a, cases), "after": counts(after, a, cases)} for a in arms}}
    for arm, row in result["arms"].items():
        print(arm, "before", row["before"], "after", row["after"])
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
