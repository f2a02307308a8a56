"""Two free-family ``bench edits`` result files, arm by arm on the cases both hold (a run stopped
early keeps the cases it finished): pass, exact match, collateral lines and near-copy insertions
(engine/evaluation/quality.py), and the cases where the two differ.

    python scripts/compare_edit_runs.py BEFORE.json AFTER.json [OUT.json]
"""

from __future__ import annotations

import json
import sys
from typing import Any


def arm_counts(records: list[dict[str, Any]], arm: str) -> dict[str, int]:
    entries = [r["arms"][arm] for r in records]
    return {"cases": len(entries), "pass": sum(e.get("test") == "pass" for e in entries),
            "exact": sum(bool(e.get("exact")) for e in entries),
            "collateral_lines": sum(e["collateral"]["lines"] for e in entries),
            "near_copy_insertions": sum(e.get("near_copy_insertions", 0) > 0 for e in entries)}


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    b = {r["id"]: r for r in before["per_case"]}
    a = {r["id"]: r for r in after["per_case"]}
    common = [i for i in b if i in a]
    out: dict[str, Any] = {"cases": common, "arms": {}}
    for arm in after["settings"]["arms"]:
        if arm == "ar":
            continue
        entry: dict[str, Any] = {"after": arm_counts([a[i] for i in common], arm)}
        if all(arm in b[i]["arms"] for i in common):
            entry["before"] = arm_counts([b[i] for i in common], arm)
            entry["changed"] = [{"id": i, "before": b[i]["arms"][arm].get("raw_output_head", "")[:200],
                                 "after": a[i]["arms"][arm].get("raw_output_head", "")[:200],
                                 "test": [b[i]["arms"][arm].get("test"), a[i]["arms"][arm].get("test")]}
                                for i in common
                                if b[i]["arms"][arm].get("raw_output_head") != a[i]["arms"][arm].get("raw_output_head")]
        out["arms"][arm] = entry
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        before = json.load(f)
    with open(argv[1], encoding="utf-8") as f:
        after = json.load(f)
    result = compare(before, after)
    result["command"] = "python scripts/compare_edit_runs.py " + " ".join(argv)
    for arm, entry in result["arms"].items():
        print(arm, "before", entry.get("before"), "after", entry["after"], "changed", len(entry.get("changed", [])))
    if len(argv) == 3:
        with open(argv[2], "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
