"""Two trees' ``bench edits`` result files, field by field: the check that a refactor left the
engine's behaviour as it was. Timings are not compared; forward counts and speculative's
generated/copied split follow the cost model's draft lengths, which it learns from measured
forward times, so they are not compared either.

    python scripts/compare_identity.py BEFORE_DIR AFTER_DIR [OUT.json]

Each folder holds the same file names (e.g. forced_py.json, free_canitedit.json); the answer
lists, per file, the cases and arms compared and every difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COMPARED = ("same_as_ar", "exact", "collateral", "wrong_line", "tail_deleted", "syntax_broken", "valid_program",
            "raw_output_head", "test", "output_tokens", "tokens", "stop_reason", "ok", "near_copy_insertions")
# Fields whose values follow timing-learned draft lengths, per arm.
TIMING_LED = {"speculative": {"tokens"}}


def differences(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    b = {r["id"]: r for r in before["per_case"]}
    a = {r["id"]: r for r in after["per_case"]}
    common = [i for i in b if i in a]
    found = []
    for case in common:
        for arm, entry in a[case]["arms"].items():
            old = b[case]["arms"].get(arm)
            if old is None:
                continue
            for key in COMPARED:
                if key in TIMING_LED.get(arm, ()) or (key not in old and key not in entry):
                    continue
                if old.get(key) != entry.get(key):
                    found.append({"case": case, "arm": arm, "field": key, "before": old.get(key), "after": entry.get(key)})
    return len(common), found


def main(argv: list[str]) -> int:
    before_dir, after_dir = Path(argv[0]), Path(argv[1])
    report = []
    for path in sorted(before_dir.glob("*.json")):
        twin = after_dir / path.name
        if not twin.exists():
            continue
        before, after = json.loads(path.read_text()), json.loads(twin.read_text())
        if "per_case" not in before:  # not a bench edits record
            continue
        cases, found = differences(before, after)
        report.append({"file": path.name, "corpus": after.get("corpus"), "family": after.get("family"),
                       "cases": cases, "arms": list(after["per_case"][0]["arms"]) if after["per_case"] else [],
                       "differences": len(found), "details": found})
        print(f"{path.name}: {cases} cases, {len(found)} differences")
    if len(argv) > 2:
        Path(argv[2]).write_text(json.dumps(report, indent=1) + "\n")
    return 1 if any(r["differences"] for r in report) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
